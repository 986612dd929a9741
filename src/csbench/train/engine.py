"""The training engine: one accelerate loop for every model csbench trains, read top to bottom.

``engine.train(task, config, out_dir)`` fine-tunes ``task.model``: it plans the optimizer steps, sets up
accelerate, steps through seeded batches, validates ``validations_per_epoch`` times an epoch, stops
early, keeps the best (or last) model, writes resumable training state and the run's record. A task
(the contract: :mod:`csbench.train.task`) supplies only what differs between kinds of model: its
training examples and how to batch them, the loss of one micro-batch, its validation, how to save the
model and what its record holds. The tasks: :mod:`csbench.train.bi_encoder` (in-batch contrastive
loss, validation MRR) and :mod:`csbench.train.cross_encoder` (GeCS matching, validation accuracy); a
new kind of model is a new task module, the engine unchanged.

Files under ``out_dir``::

    best/         the task's model (``Task.save``) with the best validation metric, or the last model
                  (``Task.keep == "last"``)
    state/        the last training-state checkpoint (csbench.train.state; only needed to resume)
    train.json    the run's record (``Task.record``): outcome, learning curve, efficiency

Design decisions (the why):

* **Batch order is a pure function of (seed, epoch).** Each epoch's permutation comes from a fresh
  ``torch.Generator`` seeded from (seed, epoch); an optimizer step takes the next ``grad_accum x
  micro_batch`` examples of it and the last partial step is dropped (in-batch negatives need a full
  matrix, and all-gather needs equal slices). Each micro-batch is split evenly over the processes.
  Resuming mid-epoch is therefore "rebuild this epoch's batches and skip the steps done": no sampler
  state to save. What a config's ``batch_size`` counts is its own (``micro_batch``): a bi-encoder's is
  the micro-batch, a cross-encoder's the whole step.
* **Gradient accumulation** uses ``accelerator.accumulate``; an epoch has ``examples // (grad_accum x
  micro_batch)`` steps, so accumulation never straddles epochs.
* **Resume granularity: one optimizer step.** Every ``checkpoint_every`` optimizer steps (after that
  step's validation, if any) the engine writes ``state/`` (:func:`csbench.train.state.save_state`).
  With ``resume=True`` the newest complete state is loaded and training replays from the next step;
  the result (validation history, best metric, best weights) equals an uninterrupted run's bit for bit.
  Wall time lost between the checkpoint and the kill is not counted (it is replayed).
* **Validation** runs on the main process only (the others wait at a barrier, then receive the metrics
  by broadcast, so all take the same early-stopping decision).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, broadcast_object_list, set_seed
from torch import nn
from torch.utils.data import DataLoader
from tqdm import tqdm

from csbench.train import state
from csbench.train.early_stopping import EarlyStopping
from csbench.train.schedules import make_schedule
from csbench.train.task import OPTIMIZERS, LoopConfig, Outcome, Task

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- the step plan
@dataclass(frozen=True)
class StepPlan:
    """How the training examples become optimizer steps (see the module docstring)."""

    examples: int
    micro_batch: int  # global examples per micro-batch
    grad_accum: int  # micro-batches per optimizer step
    world: int  # processes
    rank: int  # this process
    steps_per_epoch: int
    total_steps: int  # min(epochs * steps_per_epoch, max_steps)
    validation_points: frozenset[int]  # validate after these optimizer steps of every epoch

    @property
    def step_size(self) -> int:
        """Examples (global) per optimizer step."""
        return self.micro_batch * self.grad_accum

    def local_micro_batches(self, seed: int, epoch: int, first_step: int) -> list[list[int]]:
        """This process's micro-batches of ``epoch``, from optimizer step ``first_step`` of it on."""
        steps = epoch_batches(self.examples, self.step_size, seed, epoch)
        return [
            part.tolist()
            for batch in steps[first_step:]
            for part in micro_batches(batch, self.grad_accum, self.world, self.rank)
        ]


def plan_steps(examples: int, config: LoopConfig, world: int, rank: int) -> StepPlan:
    """The step plan of ``examples`` training examples under ``config`` on ``world`` processes."""
    micro = config.micro_batch
    if micro % world:
        raise ValueError(
            f"a micro-batch of {micro} examples (batch_size {config.batch_size}, grad_accum {config.grad_accum}) "
            f"is not divisible by {world} processes"
        )
    steps_per_epoch = examples // (micro * config.grad_accum)
    if steps_per_epoch < 1:
        raise ValueError(f"{examples} training examples make no optimizer step of {config.grad_accum} x {micro}")
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    per_epoch = config.validations_per_epoch
    points = frozenset(math.ceil(steps_per_epoch * j / per_epoch) for j in range(1, per_epoch + 1))
    return StepPlan(examples, micro, config.grad_accum, world, rank, steps_per_epoch, total_steps, points)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A fresh generator for one epoch, seeded from (seed, epoch) only."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0]))


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The global batches of one epoch (index arrays), a pure function of (seed, epoch); the last
    partial batch is dropped."""
    order = torch.randperm(n, generator=epoch_generator(seed, epoch)).numpy()
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(n // batch_size)]


def micro_batches(batch: np.ndarray, grad_accum: int, world: int, rank: int) -> list[np.ndarray]:
    """This process's slices of one global batch: ``grad_accum`` micro-batches, each split over processes."""
    micro = len(batch) // grad_accum
    local = micro // world
    return [batch[m * micro + rank * local : m * micro + (rank + 1) * local] for m in range(grad_accum)]


# --------------------------------------------------------------------------------------------- the loop
def train(
    task: Task,
    config: LoopConfig,
    out_dir: str | Path,
    *,
    progress: bool = True,
    resume: bool = False,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> Any:
    """Train ``task.model`` in place and return ``task.record(outcome)`` (also in ``out_dir/train.json``).

    ``resume=True`` continues from the newest training state in ``out_dir``, if any; otherwise earlier
    outputs there are removed. ``on_step(status)`` is called on every process after each optimizer step
    (and its validation / checkpoint). For data parallelism launch the calling script with ``torchrun
    --nproc_per_node N`` (or ``accelerate launch --multi_gpu`` on GPUs); on CPU, ``accelerate launch
    --cpu`` starts a single process unless given an mpirun hostfile, so use torchrun (gloo is then set
    up by accelerate).
    """
    run = _Run.start(task, config, Path(out_dir), resume)
    accelerator, model, optimizer, scheduler = run.accelerator, run.model, run.optimizer, run.scheduler
    bar = tqdm(
        total=run.plan.total_steps,
        initial=run.step,
        desc=task.name,
        unit="step",
        disable=not (progress and accelerator.is_main_process),
        mininterval=2,
    )
    model.train()
    reason = run.stop_reason()
    while reason is None:
        epoch, done_in_epoch = divmod(run.step, run.plan.steps_per_epoch)
        loader = DataLoader(
            task.dataset,
            batch_sampler=run.plan.local_micro_batches(config.seed, epoch, done_in_epoch),
            collate_fn=task.collate,
            num_workers=config.num_workers,
            # Its own generator: otherwise each new DataLoader iterator draws its base seed from the
            # global torch RNG, and a resumed run (one iterator more) would see other dropout masks.
            generator=epoch_generator(config.seed + 1, epoch),
        )
        step_loss = 0.0
        for batch in loader:
            with accelerator.accumulate(model):
                loss = task.batch_loss(model, batch, epoch=epoch, step=run.step)
                accelerator.backward(loss)
                if accelerator.sync_gradients and config.max_grad_norm is not None:
                    accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            step_loss += float(loss.detach()) / config.grad_accum
            if not accelerator.sync_gradients:
                continue
            reason = run.after_step(step_loss, epoch, bar, on_step)  # log, validate, checkpoint
            step_loss = 0.0
            if reason is not None:
                break
    bar.close()
    return run.finish(reason)


@dataclass
class _Run:
    """One training run's objects and counters (``loop.json`` holds the counters of a checkpoint)."""

    task: Task
    config: LoopConfig
    out_dir: Path
    accelerator: Accelerator
    mixed_precision: str
    plan: StepPlan
    model: nn.Module  # prepared by accelerate
    optimizer: Any
    scheduler: Any
    early: EarlyStopping
    step: int = 0  # optimizer steps done
    samples: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    prior_seconds: float = 0.0  # of the segments before a resumption
    prior_validation_seconds: float = 0.0
    validation_seconds: float = 0.0  # of this segment
    segments: int = 1
    resumed_from: int | None = None
    t_start: float = field(default_factory=time.perf_counter)
    window_loss: float = 0.0  # summed step losses since the last log line ...
    window_steps: int = 0
    window_start: float = field(default_factory=time.perf_counter)
    valid_loss: float = 0.0  # ... and since the last validation
    valid_steps: int = 0

    @classmethod
    def start(cls, task: Task, config: LoopConfig, out_dir: Path, resume: bool) -> _Run:
        """Accelerate, seeds, the step plan, optimizer and schedule; then a fresh start or a resumption."""
        t_start = time.perf_counter()
        accelerator, mixed_precision = make_accelerator(config)
        main = accelerator.is_main_process
        set_seed(config.seed, deterministic=config.deterministic)
        if main:
            logger.info("%s", task.describe())
            logger.info(
                "processes: %d, device: %s, mixed precision: %s",
                accelerator.num_processes, accelerator.device, mixed_precision,
            )  # fmt: skip
        plan = plan_steps(len(task.dataset), config, accelerator.num_processes, accelerator.process_index)
        optimizer = make_optimizer(task.model, config)
        scheduler = make_schedule(
            config.schedule, optimizer, plan.steps_per_epoch, plan.total_steps, config.schedule_params
        )
        model, optimizer, scheduler = accelerator.prepare(task.training_module(), optimizer, scheduler)
        task.setup(accelerator)
        early = EarlyStopping(config.patience)
        run = cls(task, config, out_dir, accelerator, mixed_precision, plan, model, optimizer, scheduler, early)
        run.t_start = t_start
        state_dir = state.latest_state(out_dir) if resume else None
        if state_dir is not None:
            run.resume_from(state_dir)
        elif main:
            state.clear_outputs(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        accelerator.wait_for_everyone()
        return run

    def resume_from(self, state_dir: Path) -> None:
        """Continue from the training state in ``state_dir`` (checked against this run first)."""
        saved = json.loads((state_dir / "loop.json").read_text())
        state.check_resumable(saved, self.config.to_dict(), self.plan.world, self.plan.steps_per_epoch)
        state.load_state(self.accelerator, state_dir)
        self.early.load_state_dict(saved["early_stopping"])
        self.step, self.samples, self.history = saved["global_step"], saved["samples"], saved["history"]
        self.prior_seconds, self.prior_validation_seconds = saved["train_seconds"], saved["validation_seconds"]
        self.segments, self.resumed_from = saved["segments"] + 1, self.step
        self.valid_loss, self.valid_steps = saved.get("valid_loss", 0.0), saved.get("valid_steps", 0)
        if self.accelerator.is_main_process:
            logger.info(
                "resumed from %s at step %d (best %s %s)", state_dir, self.step, self.task.metric_label, self.early.best
            )

    def elapsed(self) -> float:
        return self.prior_seconds + time.perf_counter() - self.t_start

    def stop_reason(self) -> str | None:
        return why_stop(self.early, self.config, self.step, self.plan.steps_per_epoch)

    def after_step(
        self, step_loss: float, epoch: int, bar: tqdm, on_step: Callable[[dict[str, Any]], None] | None
    ) -> str | None:
        """Book one optimizer step: counters, log line, validation when due, checkpoint; the stop reason."""
        config, main = self.config, self.accelerator.is_main_process
        self.step += 1
        self.samples += self.plan.step_size
        self.window_loss, self.window_steps = self.window_loss + step_loss, self.window_steps + 1
        self.valid_loss, self.valid_steps = self.valid_loss + step_loss, self.valid_steps + 1
        bar.update(1)
        status: dict[str, Any] = {"step": self.step, "epoch": epoch, "lr": self.scheduler.get_last_lr()[0]}
        if self.step % config.log_every == 0 and main:
            rate = self.window_steps * self.plan.step_size / (time.perf_counter() - self.window_start)
            loss = self.window_loss / self.window_steps
            logger.info("step %d epoch %d loss %.4f lr %.3g %.1f samples/s", self.step, epoch, loss, status["lr"], rate)
            self.window_loss, self.window_steps, self.window_start = 0.0, 0, time.perf_counter()
        reason = self.stop_reason()
        due = (self.step - epoch * self.plan.steps_per_epoch) in self.plan.validation_points
        if self.task.validates and (due or reason is not None):
            status[self.task.metric] = self.validate(bar)
            reason = self.stop_reason()
        if config.checkpoint_every is not None and self.step % config.checkpoint_every == 0:
            state.save_state(self.accelerator, self.out_dir, self.loop_state)
            status["checkpoint"] = True
        if on_step is not None:
            on_step(status)
        return reason

    def validate(self, bar: tqdm) -> float:
        """Validate (main process), record the history entry, keep a new best; the metric's value."""
        accelerator, task, main = self.accelerator, self.task, self.accelerator.is_main_process
        t0 = time.perf_counter()
        metrics = [task.validate(accelerator.unwrap_model(self.model)) if main else None]
        accelerator.wait_for_everyone()
        metrics = broadcast_object_list(metrics, from_process=0)[0]  # every process takes the same decision
        self.validation_seconds += time.perf_counter() - t0
        value = metrics[task.metric]
        record = {"step": self.step, "epoch": self.step / self.plan.steps_per_epoch, **metrics}
        if task.history_loss:
            record["loss"] = self.valid_loss / max(self.valid_steps, 1)
        record["seconds"] = self.elapsed()
        self.history.append(record)
        self.valid_loss, self.valid_steps = 0.0, 0
        if self.early.update(value, self.step) and task.keep == "best" and main:
            task.save(accelerator.unwrap_model(self.model), self.out_dir / "best")
        accelerator.wait_for_everyone()
        bar.set_postfix({task.metric: f"{value:.4f}", "best": f"{self.early.best:.4f}"})
        if main:
            best, at = self.early.best, self.early.best_step
            logger.info(
                "step %d: validation %s %.4f (best %.4f at step %d)", self.step, task.metric_label, value, best, at
            )
        return value

    def loop_state(self) -> dict[str, Any]:
        """The counters a resumed run continues from (``loop.json``)."""
        if self.task.history_loss:  # the loss of the steps since the last validation, for its history entry
            return self.counters() | {"valid_loss": self.valid_loss, "valid_steps": self.valid_steps}
        return self.counters()

    def counters(self) -> dict[str, Any]:
        """What every ``loop.json`` holds."""
        return {
            "global_step": self.step,
            "samples": self.samples,
            "history": self.history,
            "early_stopping": self.early.state_dict(),
            "train_seconds": self.elapsed(),
            "validation_seconds": self.prior_validation_seconds + self.validation_seconds,
            "segments": self.segments,
            "num_processes": self.plan.world,
            "steps_per_epoch": self.plan.steps_per_epoch,
            "config": self.config.to_dict(),
        }

    def finish(self, reason: str) -> Any:
        """Keep the last model if asked, then write and return the task's record of the run."""
        accelerator, task, main, plan = self.accelerator, self.task, self.accelerator.is_main_process, self.plan
        if task.keep == "last":
            if main:
                task.save(accelerator.unwrap_model(self.model), self.out_dir / "best")
            accelerator.wait_for_everyone()
        train_seconds = self.elapsed()
        validation_seconds = self.prior_validation_seconds + self.validation_seconds
        outcome = Outcome(
            best=self.early.best,
            best_step=self.early.best_step,
            best_epoch=None if self.early.best_step is None else self.early.best_step / plan.steps_per_epoch,
            final=self.history[-1][task.metric] if self.history else None,
            stop_reason=reason,
            steps=self.step,
            epochs_run=self.step / plan.steps_per_epoch,
            samples=self.samples,
            steps_per_epoch=plan.steps_per_epoch,
            total_steps=plan.total_steps,
            train_seconds=train_seconds,
            validation_seconds=validation_seconds,
            samples_per_second=self.samples / max(train_seconds - validation_seconds, 1e-9),
            history=self.history,
            num_processes=plan.world,
            mixed_precision=self.mixed_precision,
            device=str(accelerator.device),
            segments=self.segments,
            resumed_from_step=self.resumed_from,
            best_dir=str(self.out_dir / "best"),
            config=self.config.to_dict(),
        )
        record = task.record(outcome)
        if main:
            state.write_json(self.out_dir / "train.json", record.to_dict())
            logger.info(
                "done: %s after %d steps; best %s %s at step %s; %.1f s, %.1f samples/s",
                reason, self.step, task.metric_label, self.early.best, self.early.best_step, train_seconds,
                outcome.samples_per_second,
            )  # fmt: skip
        accelerator.wait_for_everyone()
        return record


# --------------------------------------------------------------------------------------------- set-up pieces
def make_accelerator(config: Any) -> tuple[Accelerator, str]:
    """The accelerator of a training run (and its resolved mixed precision) from the config's
    ``cpu``, ``mixed_precision`` and ``grad_accum``."""
    # On a CPU-only machine accelerate only sets up multi-process (gloo) when asked for the CPU.
    use_cpu = config.cpu or (int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available())
    mixed_precision = resolve_mixed_precision(config.mixed_precision, use_cpu)
    accelerator = Accelerator(
        cpu=use_cpu,
        mixed_precision=mixed_precision,
        gradient_accumulation_steps=config.grad_accum,
        # One global batch split over the processes: the scheduler steps once per optimizer step.
        dataloader_config=DataLoaderConfiguration(split_batches=True),
    )
    return accelerator, mixed_precision


def resolve_mixed_precision(value: str, cpu: bool) -> str:
    """``auto`` → ``bf16`` on a CUDA device that supports it, else ``no`` (always ``no`` on CPU)."""
    if value != "auto":
        return value
    if not cpu and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    return "no"


def make_optimizer(model: nn.Module, config: Any) -> torch.optim.Optimizer:
    """Adam / AdamW from the config's ``optimizer``, ``lr`` and ``weight_decay``; weight decay only on
    tensors with >= 2 dims (matrices, embeddings), as nanoGPT and CodeBERT's fine-tuning script (no
    decay on biases and LayerNorm weights)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return OPTIMIZERS.get(config.optimizer)([g for g in groups if g["params"]], lr=config.lr)


def why_stop(early: EarlyStopping, config: Any, global_step: int, steps_per_epoch: int) -> str | None:
    """Why a training stops after ``global_step`` optimizer steps, or None to go on."""
    if early.should_stop:
        return "early_stopping"
    if config.max_steps is not None and global_step >= config.max_steps:
        return "max_steps"
    if global_step >= config.epochs * steps_per_epoch:
        return "epochs"
    return None
