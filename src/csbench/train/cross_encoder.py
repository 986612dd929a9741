"""Fine-tuning a :class:`~csbench.models.cross.CrossEncoder` on GeCS's matching task: the task that
:mod:`csbench.train.engine` runs.

``train_cross(model, train_pairs, valid_pairs, config, out_dir)`` turns the positive (query, code) pairs of
each split into GeCS's matching data (:func:`~csbench.models.cross.matching_pairs`: each positive and one
uniformly drawn negative), trains the 2-way head and the network with cross-entropy over the two logits
(GeCS: ``AutoModelForSequenceClassification``'s ``CrossEntropyLoss`` on labels 0 / 1), validates by matching
accuracy on the balanced validation pairs, and keeps the best model. The step plan, validation schedule,
early stopping, optimizer, schedules, mixed precision and ``train.json`` are the engine's. The training
pairs may be a :class:`~csbench.train.texts.TextTable` (what the ``train`` phase gives): each matching pair
is then read from its file as a batch asks for it, the same pairs in the same order (``_Matching``).

Files under ``out_dir``::

    best/        the kept cross-encoder (``CrossEncoder.load`` reads it): best validation accuracy, or the
                 last model with ``keep="last"`` (what GeCS's script saved); byte-reproducible, with its
                 SHA256SUMS (``CrossEncoder.save``)
    train.json   the run's record: config, validation history, best accuracy, stop reason, efficiency

What GeCS specifies (``experiments/finetuning.py``; Appendix A.1) and is the default here: AdamW with
weight decay 0.01, a linear schedule to 0 without warm-up, batch 32, 512 tokens, the model's lr / epochs
(:meth:`CrossTrainConfig.gecs`), negatives drawn once before training (``random.seed(42)``: ``data_seed``).
Where this training differs or GeCS is silent:

* weight decay skips biases and LayerNorm weights (:func:`csbench.train.engine.make_optimizer`, as
  CodeBERT's scripts); GeCS's ``AdamW(model.parameters(), weight_decay=0.01)`` decayed every tensor;
* batches are seeded permutations, the last partial batch dropped (:func:`csbench.train.engine.epoch_batches`);
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

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch import Tensor, nn
from torch.utils.data import Dataset

from csbench.digests import text_ids
from csbench.models.cross import (
    CROSS_MODELS,
    CrossEncoder,
    matching_accuracy,
    matching_negatives,
    matching_pairs,
)
from csbench.train import engine
from csbench.train.task import KEEP, ConfigDict, Outcome, check_loop_config
from csbench.train.texts import TextTable

PositivePairs = pd.DataFrame | Sequence[tuple[str, ...]] | TextTable


@dataclass(frozen=True)
class CrossTrainConfig(ConfigDict):
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
    # Engine knobs a GeCS run does not set (class constants, not fields: train.json's config is unchanged).
    checkpoint_every: ClassVar[int | None] = None  # no resumable state: a GeCS run is a few epochs
    num_workers: ClassVar[int] = 0  # tokenization in the training process

    def __post_init__(self) -> None:
        if self.keep not in KEEP:
            raise ValueError(f"keep must be one of {', '.join(KEEP)}, not {self.keep!r}")
        check_loop_config(self, positive=("negatives_per_positive",))
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")

    @property
    def micro_batch(self) -> int:
        """Pairs per micro-batch: the step's ``batch_size`` split into ``grad_accum`` parts."""
        return self.batch_size // self.grad_accum

    @classmethod
    def gecs(cls, model: str, **overrides: Any) -> CrossTrainConfig:
        """GeCS's regime for the registered cross-encoder ``model`` (lr / epochs of Table 4, the rest shared)."""
        if model not in CROSS_MODELS:
            raise KeyError(f"unknown cross-encoder {model!r}; registered: {', '.join(CROSS_MODELS)}")
        return cls(**(CROSS_MODELS[model].get("training", {}) | overrides))


@dataclass
class CrossTrainResult(Outcome):
    """What a run leaves in ``train.json``: the engine's :class:`~csbench.train.task.Outcome` (history
    entries ``{"step", "epoch", "accuracy", "loss", "seconds"}``), its metric named ``best_accuracy`` /
    ``final_accuracy``, without the resumption counters (no resumable state), and these fields:"""

    kept: str  # best | last: which model best/ holds
    n_train_pairs: int  # matching pairs built from the positives (positives + negatives)
    n_valid_pairs: int
    model: dict[str, Any]  # the cross-encoder's parameters

    best_accuracy = property(lambda self: self.best, doc="the best validation accuracy")
    final_accuracy = property(lambda self: self.final, doc="the last validation's accuracy")

    def to_dict(self) -> dict[str, Any]:
        return self.as_record("accuracy", drop=("segments", "resumed_from_step"))


def positive_pairs(pairs: PositivePairs) -> tuple[list[str], list[str]]:
    """``(queries, codes)`` from a DataFrame with those columns or from (query, code, ...) tuples."""
    if isinstance(pairs, pd.DataFrame):
        missing = {"query", "code"} - set(pairs.columns)
        if missing:
            raise ValueError(f"pairs lack column(s) {', '.join(sorted(missing))}")
        return pairs["query"].tolist(), pairs["code"].tolist()
    rows = list(pairs)
    return [row[0] for row in rows], [row[1] for row in rows]


class _Matching(Dataset):
    """The matching pairs (query, code, label 1 / 0) in ``matching_pairs``'s order, read from the positive
    ``rows`` as they are asked for: item ``m`` is row ``i = m // (1 + k)``'s positive pair when ``m % (1 + k)``
    is 0, else its query with the code of its ``m % (1 + k)``-th negative (``negatives[i]``, record indices).
    ``rows[i]``: the row's values, its query at ``at[0]`` and its code at ``at[1]`` (a list of pairs or a
    :class:`~csbench.train.texts.TextTable`, which reads them from its file: nothing is held but the
    negatives' indices)."""

    def __init__(self, rows: Sequence[tuple[str, ...]], negatives: np.ndarray, at: tuple[int, int] = (0, 1)) -> None:
        self.rows, self.negatives, self.at = rows, negatives, at
        self.width = 1 + negatives.shape[1]

    def __len__(self) -> int:
        return len(self.rows) * self.width

    def __getitem__(self, m: int) -> tuple[str, str, np.int64]:
        i, slot = divmod(int(m), self.width)
        row = self.rows[i]
        query, code = row[self.at[0]], row[self.at[1]]
        if slot:
            code = self.rows[int(self.negatives[i, slot - 1])][self.at[1]]
        return query, code, np.int64(slot == 0)


def _matching_rows(pairs: PositivePairs, seed: int, negatives_per_positive: int) -> _Matching:
    """``matching_pairs`` of the positive ``pairs`` (a DataFrame, (query, code, ...) tuples, or a
    ``TextTable`` with ``query`` and ``code`` columns), as a dataset that reads them where they are."""
    if isinstance(pairs, TextTable):
        rows, at, codes = pairs, (pairs.columns.index("query"), pairs.columns.index("code")), pairs.column("code")
    else:
        queries, codes = positive_pairs(pairs)
        rows, at = list(zip(queries, codes, strict=True)), (0, 1)
    return _Matching(rows, matching_negatives(text_ids(codes), seed, negatives_per_positive), at)


class _Collate:
    """Tokenize a micro-batch of pairs with the cross-encoder's own ``features``; the labels as a tensor."""

    def __init__(self, model: CrossEncoder) -> None:
        self.model = model

    def __call__(self, items: list[tuple[str, str, np.int64]]) -> tuple[dict[str, Tensor], Tensor]:
        queries, codes, labels = zip(*items, strict=True)
        return self.model.features(list(queries), list(codes)), torch.as_tensor(np.asarray(labels))


class CrossEncoderTask:
    """A cross-encoder's part of a training (:class:`csbench.train.task.Task`): cross-entropy over
    the two logits of each matching pair, and the matching accuracy on balanced validation pairs."""

    name, metric, metric_label, history_loss = "train cross", "accuracy", "accuracy", True

    def __init__(
        self, model: CrossEncoder, train_pairs: PositivePairs, valid_pairs: PositivePairs, config: CrossTrainConfig
    ) -> None:
        # GeCS's matching pairs, drawn once; validation always balanced 1:1
        dataset = _matching_rows(train_pairs, config.data_seed, config.negatives_per_positive)
        self.valid = matching_pairs(*positive_pairs(valid_pairs), config.data_seed, 1)
        self.validates, self.keep = bool(self.valid[0]), config.keep
        if not self.validates and config.keep == "best":
            raise ValueError(
                "no validation pairs: keep 'best' chooses the model on them; train without validation with "
                "keep: last (as GeCS's finetuning.py: a fixed number of epochs, the last model saved)"
            )
        self.model, self.config = model, config
        self.dataset, self.collate = dataset, _Collate(model)
        self.device: torch.device | None = None

    def describe(self) -> str:
        return f"cross-encoder training: {len(self.dataset)} train / {len(self.valid[0])} valid pairs; {self.config}"

    def training_module(self) -> nn.Module:
        return self.model

    def setup(self, accelerator: Accelerator) -> None:
        self.device = accelerator.device

    def batch_loss(self, model: nn.Module, batch: tuple[dict[str, Tensor], Tensor], *, epoch: int, step: int) -> Tensor:
        features, target = batch
        logits = model({k: v.to(self.device) for k, v in features.items()})
        return F.cross_entropy(logits.float(), target.to(self.device))

    def validate(self, model: nn.Module) -> dict[str, float]:
        return {"accuracy": matching_accuracy(model, *self.valid, self.config.valid_batch_size)}

    def save(self, model: nn.Module, directory: Path) -> None:
        model.save(directory)

    def record(self, outcome: Outcome) -> CrossTrainResult:
        return CrossTrainResult(
            **vars(outcome),
            kept=self.config.keep,
            n_train_pairs=len(self.dataset),
            n_valid_pairs=len(self.valid[0]),
            model=self.model.config(),
        )


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
    return engine.train(CrossEncoderTask(model, train_pairs, valid_pairs, config), config, out_dir, progress=progress)
