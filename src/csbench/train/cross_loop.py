"""Fine-tuning a :class:`~csbench.models.cross.CrossEncoder` on GeCS's matching task, under accelerate.

``train_cross(model, train_pairs, valid_pairs, config, out_dir)`` turns the positive (query, code) pairs of
each split into GeCS's matching data (:func:`~csbench.models.cross.matching_pairs`: each positive and one
uniformly drawn negative), trains the 2-way head and the network with cross-entropy over the two logits
(GeCS: ``AutoModelForSequenceClassification``'s ``CrossEntropyLoss`` on labels 0 / 1), validates by matching
accuracy on the balanced validation pairs, and keeps the best model. It follows :mod:`csbench.train.loop`
and reuses its pieces (optimizer, schedules, seeded batch order, mixed precision, JSON writing).

Files under ``out_dir``::

    best/        the kept cross-encoder (``CrossEncoder.load`` reads it): best validation accuracy, or the
                 last model with ``keep="last"`` (what GeCS's script saved); byte-reproducible, with its
                 SHA256SUMS (``CrossEncoder.save``)
    train.json   the run's record: config, validation history, best accuracy, stop reason, efficiency

What GeCS specifies (``experiments/finetuning.py``; Appendix A.1) and is the default here: AdamW with
weight decay 0.01, a linear schedule to 0 without warm-up, batch 32, 512 tokens, the model's lr / epochs
(:meth:`CrossTrainConfig.gecs`), negatives drawn once before training (``random.seed(42)``: ``data_seed``).
Where this loop differs or GeCS is silent:

* weight decay skips biases and LayerNorm weights (:func:`csbench.train.loop.make_optimizer`, as CodeBERT's
  scripts); GeCS's ``AdamW(model.parameters(), weight_decay=0.01)`` decayed every tensor;
* batches are seeded permutations, the last partial batch dropped (:func:`csbench.train.loop.epoch_batches`);
  GeCS's ``DataLoader(shuffle=True)`` kept it, unseeded;
* GeCS trained for a fixed number of epochs without validation; here the matching accuracy on the
  validation split is measured ``validations_per_epoch`` times an epoch and recorded, early stopping is
  off unless ``patience`` is set, and ``keep`` chooses the best or the last model. Without validation
  pairs (a training set released without a validation split) and with ``keep="last"``, nothing is
  measured and the last model is kept, exactly as GeCS's script.
* no resumable training state (a killed run starts again): a GeCS run is a few epochs.

``batch_size`` is the global number of pairs per optimizer step, split into ``grad_accum`` micro-batches and
then over processes; each process averages its cross-entropy and DDP averages the gradients, so the step
is the one of a single process on the whole batch (up to float summation order).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from accelerate.utils import broadcast, set_seed
from tqdm import tqdm

from csbench.models.cross import CROSS_MODELS, CrossEncoder, matching_accuracy, matching_pairs
from csbench.train.early_stopping import EarlyStopping
from csbench.train.loop import (
    MIXED_PRECISION,
    OPTIMIZERS,
    _write_json,
    config_from_dict,
    epoch_batches,
    make_accelerator,
    make_optimizer,
    why_stop,
)
from csbench.train.schedules import SCHEDULES, make_schedule, schedule_params

logger = logging.getLogger(__name__)

PositivePairs = pd.DataFrame | Sequence[tuple[str, ...]]
KEEP = ("best", "last")


@dataclass(frozen=True)
class CrossTrainConfig:
    """Every knob of one cross-encoder fine-tuning; the defaults are GeCS's shared regime."""

    optimizer: str = "adamw"
    lr: float = 2e-5
    weight_decay: float = 0.01
    schedule: str = "linear_decay"  # GeCS: get_scheduler("linear", num_warmup_steps=0)
    schedule_params: dict[str, Any] = field(default_factory=dict)
    epochs: int = 5
    batch_size: int = 32  # global pairs per optimizer step (positives and negatives together)
    grad_accum: int = 1  # micro-batches the batch is split into (memory, not the result)
    negatives_per_positive: int = 1  # GeCS: one
    data_seed: int = 42  # draws the negatives, once (GeCS: random.seed(42)); the same for every training seed
    validations_per_epoch: int = 1
    patience: int | None = None  # validations without accuracy gain before stopping; None: never (GeCS)
    keep: str = "best"  # best: the best validation accuracy; last: the final model (GeCS)
    max_steps: int | None = None
    mixed_precision: str = "auto"
    max_grad_norm: float | None = None  # GeCS: no clipping
    seed: int = 0  # batch order, dropout (the head's initialisation is the model constructor's)
    log_every: int = 50
    valid_batch_size: int = 64
    cpu: bool = False
    deterministic: bool = False

    def __post_init__(self) -> None:
        OPTIMIZERS.check(self.optimizer, where="train.optimizer")
        SCHEDULES.check(self.schedule, where="train.schedule")
        unknown = sorted(set(self.schedule_params) - set(schedule_params(self.schedule)))
        if unknown:
            raise ValueError(f"lr schedule {self.schedule!r} takes no parameter {', '.join(unknown)}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {', '.join(MIXED_PRECISION)}")
        if self.keep not in KEEP:
            raise ValueError(f"keep must be one of {', '.join(KEEP)}, not {self.keep!r}")
        for name in ("epochs", "batch_size", "grad_accum", "negatives_per_positive", "validations_per_epoch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("patience", "max_steps"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {getattr(self, name)}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"need lr > 0 and weight_decay >= 0, got {self.lr}, {self.weight_decay}")

    @classmethod
    def gecs(cls, model: str, **overrides: Any) -> CrossTrainConfig:
        """GeCS's regime for the registered cross-encoder ``model`` (lr / epochs of Table 4, the rest shared)."""
        if model not in CROSS_MODELS:
            raise KeyError(f"unknown cross-encoder {model!r}; registered: {', '.join(CROSS_MODELS)}")
        return cls(**(CROSS_MODELS[model].get("training", {}) | overrides))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CrossTrainConfig:
        return config_from_dict(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (``train.json``)."""
        return asdict(self)


@dataclass
class CrossTrainResult:
    """What a run leaves in ``train.json`` (fields as :class:`csbench.train.loop.TrainResult`, accuracy for MRR)."""

    best_accuracy: float | None
    best_step: int | None
    best_epoch: float | None
    final_accuracy: float | None
    kept: str  # best | last: which model best/ holds
    stop_reason: str  # early_stopping | epochs | max_steps
    steps: int
    epochs_run: float
    samples: int  # training pairs seen (global)
    steps_per_epoch: int
    total_steps: int
    n_train_pairs: int  # matching pairs built from the positives (positives + negatives)
    n_valid_pairs: int
    train_seconds: float
    validation_seconds: float
    samples_per_second: float  # samples / (train_seconds - validation_seconds)
    history: list[dict[str, Any]]  # one {"step", "epoch", "accuracy", "loss", "seconds"} per validation
    num_processes: int
    mixed_precision: str
    device: str
    best_dir: str
    model: dict[str, Any]  # the cross-encoder's parameters
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data."""
        return asdict(self)


def positive_pairs(pairs: PositivePairs) -> tuple[list[str], list[str]]:
    """``(queries, codes)`` from a DataFrame with those columns or from (query, code, ...) tuples."""
    if isinstance(pairs, pd.DataFrame):
        missing = {"query", "code"} - set(pairs.columns)
        if missing:
            raise ValueError(f"pairs lack column(s) {', '.join(sorted(missing))}")
        return pairs["query"].tolist(), pairs["code"].tolist()
    rows = list(pairs)
    return [row[0] for row in rows], [row[1] for row in rows]


def micro_batches(batch: np.ndarray, grad_accum: int, world: int, rank: int) -> list[np.ndarray]:
    """This process's slices of one global batch: ``grad_accum`` micro-batches, each split over processes."""
    micro = len(batch) // grad_accum
    local = micro // world
    return [batch[m * micro + rank * local : m * micro + (rank + 1) * local] for m in range(grad_accum)]


def _clear_outputs(out_dir: Path) -> None:
    """Remove a previous run's outputs (no resume: a new run starts clean)."""
    for stale in ("best", ".best.old", "train.json"):
        path = out_dir / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def train_cross(
    model: CrossEncoder,
    train_pairs: PositivePairs,
    valid_pairs: PositivePairs,
    config: CrossTrainConfig,
    out_dir: str | Path,
    progress: bool = True,
) -> CrossTrainResult:
    """Fine-tune ``model`` in place on matching pairs built from the positive ``train_pairs``; the kept
    model goes to ``out_dir/best`` and the record to ``out_dir/train.json`` (see the module docstring)."""
    out_dir = Path(out_dir)
    t_start = time.perf_counter()
    accelerator, mixed_precision = make_accelerator(config)
    main = accelerator.is_main_process
    world, rank = accelerator.num_processes, accelerator.process_index
    set_seed(config.seed, deterministic=config.deterministic)

    # ---- data: GeCS's matching pairs, drawn once; validation always balanced 1:1
    queries, codes, labels = matching_pairs(
        *positive_pairs(train_pairs), config.data_seed, config.negatives_per_positive
    )
    valid_queries, valid_codes, valid_labels = matching_pairs(*positive_pairs(valid_pairs), config.data_seed, 1)
    if config.batch_size % (config.grad_accum * world):
        raise ValueError(f"batch_size {config.batch_size} does not split into {config.grad_accum} x {world} slices")
    steps_per_epoch = len(queries) // config.batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"{len(queries)} matching pairs make no batch of {config.batch_size}")
    if not valid_queries and config.keep == "best":
        raise ValueError(
            "no validation pairs: keep 'best' chooses the model on them; train without validation with "
            "keep: last (as GeCS's finetuning.py: a fixed number of epochs, the last model saved)"
        )
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    per_epoch = config.validations_per_epoch
    validation_points = {math.ceil(steps_per_epoch * j / per_epoch) for j in range(1, per_epoch + 1)}
    if main:
        logger.info("cross-encoder training: %d train / %d valid pairs; %s", len(queries), len(valid_queries), config)

    # ---- model, optimizer, schedule
    optimizer = make_optimizer(model, config)  # reads optimizer / lr / weight_decay only
    scheduler = make_schedule(config.schedule, optimizer, steps_per_epoch, total_steps, config.schedule_params)
    wrapped, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    if main:
        out_dir.mkdir(parents=True, exist_ok=True)
        _clear_outputs(out_dir)
    accelerator.wait_for_everyone()

    early = EarlyStopping(config.patience)
    global_step, samples, history = 0, 0, []
    validation_seconds = 0.0
    logged_loss, logged_steps = 0.0, 0  # since the last validation (history) ...
    window_loss, window_steps, t_log = 0.0, 0, time.perf_counter()  # ... and since the last log line

    def validate() -> float:
        nonlocal validation_seconds
        t0 = time.perf_counter()
        accuracy = torch.zeros(1, dtype=torch.float64, device=accelerator.device)
        if main:
            unwrapped = accelerator.unwrap_model(wrapped)
            accuracy += matching_accuracy(unwrapped, valid_queries, valid_codes, valid_labels, config.valid_batch_size)
        accelerator.wait_for_everyone()
        accuracy = float(broadcast(accuracy, from_process=0).item())  # every process takes the same decision
        validation_seconds += time.perf_counter() - t0
        return accuracy

    def stop_reason() -> str | None:
        return why_stop(early, config, global_step, steps_per_epoch)

    bar = tqdm(total=total_steps, desc="train cross", unit="step", disable=not (progress and main), mininterval=2)
    wrapped.train()
    reason = stop_reason()
    while reason is None:
        epoch = global_step // steps_per_epoch
        for batch in epoch_batches(len(queries), config.batch_size, config.seed, epoch):
            step_loss = 0.0
            for part in micro_batches(batch, config.grad_accum, world, rank):
                with accelerator.accumulate(wrapped):
                    features = model.features([queries[i] for i in part], [codes[i] for i in part])
                    logits = wrapped({k: v.to(accelerator.device) for k, v in features.items()})
                    target = torch.as_tensor(labels[part], device=accelerator.device)
                    loss = F.cross_entropy(logits.float(), target)
                    accelerator.backward(loss)
                    if accelerator.sync_gradients and config.max_grad_norm is not None:
                        accelerator.clip_grad_norm_(wrapped.parameters(), config.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                step_loss += float(loss.detach()) / config.grad_accum

            # ---- one optimizer step done
            global_step += 1
            samples += config.batch_size
            logged_loss, logged_steps = logged_loss + step_loss, logged_steps + 1
            window_loss, window_steps = window_loss + step_loss, window_steps + 1
            bar.update(1)
            if global_step % config.log_every == 0 and main:
                rate = window_steps * config.batch_size / (time.perf_counter() - t_log)
                lr = scheduler.get_last_lr()[0]
                logger.info("step %d epoch %d loss %.4f lr %.3g %.1f samples/s",
                            global_step, epoch, window_loss / window_steps, lr, rate)  # fmt: skip
                window_loss, window_steps, t_log = 0.0, 0, time.perf_counter()

            reason = stop_reason()
            due = (global_step - epoch * steps_per_epoch) in validation_points
            if valid_queries and (due or reason is not None):
                accuracy = validate()
                history.append({
                    "step": global_step,
                    "epoch": global_step / steps_per_epoch,
                    "accuracy": accuracy,
                    "loss": logged_loss / max(logged_steps, 1),
                    "seconds": time.perf_counter() - t_start,
                })  # fmt: skip
                logged_loss, logged_steps = 0.0, 0
                if early.update(accuracy, global_step) and config.keep == "best" and main:
                    accelerator.unwrap_model(wrapped).save(out_dir / "best")
                accelerator.wait_for_everyone()
                bar.set_postfix(acc=f"{accuracy:.4f}", best=f"{early.best:.4f}")
                if main:
                    logger.info("step %d: validation accuracy %.4f (best %.4f at step %d)",
                                global_step, accuracy, early.best, early.best_step)  # fmt: skip
                reason = stop_reason()
            if reason is not None:
                break
    bar.close()
    if config.keep == "last" and main:
        accelerator.unwrap_model(wrapped).save(out_dir / "best")
    accelerator.wait_for_everyone()

    # ---- the run's record
    train_seconds = time.perf_counter() - t_start
    result = CrossTrainResult(
        best_accuracy=early.best,
        best_step=early.best_step,
        best_epoch=None if early.best_step is None else early.best_step / steps_per_epoch,
        final_accuracy=history[-1]["accuracy"] if history else None,
        kept=config.keep,
        stop_reason=reason,
        steps=global_step,
        epochs_run=global_step / steps_per_epoch,
        samples=samples,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        n_train_pairs=len(queries),
        n_valid_pairs=len(valid_queries),
        train_seconds=train_seconds,
        validation_seconds=validation_seconds,
        samples_per_second=samples / max(train_seconds - validation_seconds, 1e-9),
        history=history,
        num_processes=world,
        mixed_precision=mixed_precision,
        device=str(accelerator.device),
        best_dir=str(out_dir / "best"),
        model=accelerator.unwrap_model(wrapped).config(),
        config=config.to_dict(),
    )
    if main:
        _write_json(out_dir / "train.json", result.to_dict())
        logger.info("done: %s after %d steps; best accuracy %s at step %s; %.1f s, %.1f samples/s",
                    reason, global_step, early.best, early.best_step, train_seconds,
                    result.samples_per_second)  # fmt: skip
    accelerator.wait_for_everyone()
    return result
