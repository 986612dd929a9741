"""The contract between the training engine (:mod:`csbench.train.engine`) and a kind of model.

A kind of model (bi-encoder, cross-encoder, ...) plugs into the engine with three things:

* a **config**: a frozen dataclass with the engine's knobs (:class:`LoopConfig`; ``from_dict`` /
  ``to_dict`` from :class:`ConfigDict`, the shared checks in :func:`check_loop_config`) plus its own;
  its ``micro_batch`` says what its ``batch_size`` counts;
* a **task**: an object with the attributes and methods of :class:`Task` (training examples and their
  collation, the loss of one micro-batch, validation, saving, the record);
* a **record**: a subclass of :class:`Outcome` that names the validation metric in ``train.json``.

See :mod:`csbench.train.bi_encoder` and :mod:`csbench.train.cross_encoder`, and docs/extending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, Self

import torch
from accelerate import Accelerator
from torch import Tensor, nn
from torch.utils.data import Dataset

from csbench.registry import Registry
from csbench.train.schedules import SCHEDULES, schedule_params

MIXED_PRECISION = ("auto", "no", "fp16", "bf16")
KEEP = ("best", "last")
OPTIMIZERS: Registry[type[torch.optim.Optimizer]] = Registry("optimizer")
OPTIMIZERS.register("adam", torch.optim.Adam)
OPTIMIZERS.register("adamw", torch.optim.AdamW)


# --------------------------------------------------------------------------------------------- contracts
class LoopConfig(Protocol):
    """The knobs the engine reads from a task's config (a frozen dataclass: TrainConfig, CrossTrainConfig)."""

    optimizer: str  # see OPTIMIZERS
    lr: float
    weight_decay: float  # on matrices / embeddings only, never on biases and norm weights
    schedule: str  # see csbench.train.schedules.SCHEDULES
    schedule_params: dict[str, Any]
    epochs: int
    batch_size: int
    grad_accum: int  # micro-batches per optimizer step
    validations_per_epoch: int
    patience: int | None  # validations without a gain before stopping; None: never stop early
    max_steps: int | None  # optional cap on optimizer steps
    checkpoint_every: int | None  # optimizer steps between training-state checkpoints; None: never
    mixed_precision: str  # see MIXED_PRECISION
    max_grad_norm: float | None  # gradient clipping; None: off
    seed: int
    log_every: int  # optimizer steps between log lines
    num_workers: int  # DataLoader workers for collation
    cpu: bool  # force CPU even when an accelerator is present
    deterministic: bool  # torch.use_deterministic_algorithms

    @property
    def micro_batch(self) -> int:
        """Examples (global, over all processes) in one micro-batch."""
        ...

    def to_dict(self) -> dict[str, Any]: ...


class Task(Protocol):
    """What one kind of model supplies to the engine; everything else is the engine's."""

    name: str  # the progress bar's label
    model: nn.Module  # the parameters to optimize
    dataset: Dataset  # the training examples, indexed 0..n-1
    collate: Callable[[list[Any]], Any]  # examples -> one micro-batch (DataLoader collate_fn)
    metric: str  # the validation metric that chooses the best model (higher is better): a history key
    metric_label: str  # how log lines name it
    keep: str  # "best": the best validation's model goes to best/; "last": the final model
    validates: bool  # False: no validation data (keep must then be "last")
    history_loss: bool  # add the mean training loss since the previous validation to each history entry

    def describe(self) -> str:
        """The log line that opens the run (data and config)."""
        ...

    def training_module(self) -> nn.Module:
        """The module accelerate prepares: its ``forward`` is what :meth:`batch_loss` calls."""
        ...

    def setup(self, accelerator: Accelerator) -> None:
        """Called once the module is prepared (device placement of anything else the loss needs)."""
        ...

    def batch_loss(self, model: nn.Module, batch: Any, *, epoch: int, step: int) -> Tensor:
        """The loss of one micro-batch under the prepared ``model`` (``epoch`` / ``step``: 0-based
        epochs and optimizer steps done)."""
        ...

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Validation metrics of the unwrapped training module, :attr:`metric` among them (main process)."""
        ...

    def save(self, model: nn.Module, directory: Path) -> None:
        """Write the model of the unwrapped training module to ``directory`` (main process)."""
        ...

    def record(self, outcome: Outcome) -> Any:
        """The run's record (``to_dict()`` is written to ``train.json``) from the engine's outcome."""
        ...


@dataclass
class Outcome:
    """What the engine measured; a task's record (:meth:`Task.record`) is a subclass that names the
    metric in ``to_dict`` (``best_mrr``, ``final_accuracy``...) and may add fields."""

    best: float | None  # best validation metric
    best_step: int | None
    best_epoch: float | None  # fractional: best_step / steps_per_epoch
    final: float | None  # the last validation's metric
    stop_reason: str  # early_stopping | epochs | max_steps
    steps: int  # optimizer steps done
    epochs_run: float  # steps / steps_per_epoch
    samples: int  # training examples seen (global, counted per optimizer step)
    steps_per_epoch: int
    total_steps: int  # planned: min(epochs * steps_per_epoch, max_steps)
    train_seconds: float  # wall time of the run, validations included, summed over resumed segments
    validation_seconds: float
    samples_per_second: float  # samples / (train_seconds - validation_seconds)
    history: list[dict[str, Any]]  # one {"step", "epoch", <metrics>, ["loss"], "seconds"} per validation
    num_processes: int
    mixed_precision: str
    device: str
    segments: int  # 1 + number of resumptions
    resumed_from_step: int | None
    best_dir: str
    config: dict[str, Any]

    def as_record(self, metric: str, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The fields for a task's record, ``best`` / ``final`` named ``best_<metric>`` / ``final_<metric>``
        and ``drop`` left out."""
        values = {name: value for name, value in asdict(self).items() if name not in drop}
        values[f"best_{metric}"], values[f"final_{metric}"] = values.pop("best"), values.pop("final")
        return values

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data (``train.json``)."""
        return asdict(self)


def check_loop_config(config: Any, positive: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    """The checks every training config shares (its ``__post_init__`` calls this); ``positive`` /
    ``optional``: its own fields that must be >= 1 / None or >= 1."""
    OPTIMIZERS.check(config.optimizer, where="train.optimizer")
    SCHEDULES.check(config.schedule, where="train.schedule")
    unknown = sorted(set(config.schedule_params) - set(schedule_params(config.schedule)))
    if unknown:
        raise ValueError(f"lr schedule {config.schedule!r} takes no parameter {', '.join(unknown)}")
    if config.mixed_precision not in MIXED_PRECISION:
        raise ValueError(f"mixed_precision must be one of {', '.join(MIXED_PRECISION)}, not {config.mixed_precision!r}")
    for name in ("epochs", "batch_size", "grad_accum", "validations_per_epoch", "log_every", *positive):
        if getattr(config, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(config, name)}")
    for name in ("patience", "max_steps", *optional):
        if getattr(config, name) is not None and getattr(config, name) < 1:
            raise ValueError(f"{name} must be >= 1 or None, got {getattr(config, name)}")
    if config.lr <= 0 or config.weight_decay < 0:
        raise ValueError(f"need lr > 0 and weight_decay >= 0, got {config.lr}, {config.weight_decay}")


class ConfigDict:
    """``from_dict`` / ``to_dict`` of a training config dataclass (TrainConfig, CrossTrainConfig)."""

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """A config from a mapping (e.g. params.yaml); an unknown key is an error naming the valid ones."""
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - valid)
        if unknown:
            raise ValueError(f"unknown training option(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (``train.json``, ``loop.json``)."""
        return asdict(self)
