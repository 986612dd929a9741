"""Training a code summarizer (:class:`~csbench.summarization.models.base.Summarizer`): the task that
:mod:`csbench.train.engine` runs.

``train_summarizer(summarizer, train_pairs, valid_frame, config, out_dir)`` trains by teacher forcing
(token cross-entropy of the reference summary given the code, optional label smoothing;
``Summarizer.collate`` / ``Summarizer.loss``), validates ``validations_per_epoch`` times an epoch and
keeps the best model in ``out_dir/best`` (``Summarizer.save``; ``load_summarizer`` reads it). The step
plan, schedule, early stopping, resumable state (``out_dir/state``) and ``train.json`` are the engine's.

Validation (``metric``):

* ``bleu`` (default): CodeXGLUE's smoothed sentence BLEU-4 (0-100;
  :func:`csbench.summarization.metrics.smoothed_bleu4`) of the summaries generated for the first
  ``max_valid`` records of the validation split, greedy (``valid_beam: 1``) or beam search, as
  CodeXGLUE code-to-text's ``run.py`` chooses its best checkpoint by dev BLEU;
* ``loss``: the mean token cross-entropy (no label smoothing) of those records' references; the engine
  keeps the highest metric, so the history holds ``neg_valid_loss`` and the record ``best_loss``.

Bad records never crash a training: a pair with an empty (blank) reference, or whose code is longer than
the model's ``max_code_chars``, is skipped and counted; ``train.json`` names them (``skipped`` /
``valid_skipped: {reason: [ids]}``: the DataFrame's ``id`` column when there is one, else the pair's index).

``train_pairs`` is any sequence of ``(code, summary)`` pairs: a DataFrame (columns ``code`` and
``query``, the reference), a list, or :class:`csbench.summarization.data`'s memory-mapped store (``len``
and ``[i] -> (code, summary)``; pairs are read when a batch needs them, so a 2 M-pair split is never
held in memory; only the kept indexes are).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from accelerate import Accelerator
from torch import Tensor, nn
from torch.utils.data import Dataset

from csbench.summarization.models.base import Decoding, Summarizer
from csbench.train import engine
from csbench.train.task import KEEP, ConfigDict, Outcome, check_loop_config

METRICS = ("bleu", "loss")
Pairs = pd.DataFrame | Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Seq2SeqTrainConfig(ConfigDict):
    """Every knob of one summarizer training (the engine's :class:`~csbench.train.task.LoopConfig`
    fields and this task's own)."""

    optimizer: str = "adamw"
    lr: float = 5e-5  # CodeXGLUE code-to-text's run.py (a from-scratch model wants ~5e-4)
    weight_decay: float = 0.0
    schedule: str = "linear_decay"  # see csbench.train.schedules.SCHEDULES
    schedule_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"warmup_steps": 200}
    epochs: int = 10
    batch_size: int = 32  # pairs per micro-batch (global)
    grad_accum: int = 1
    validations_per_epoch: int = 1
    patience: int | None = 3  # validations without a gain before stopping; None: never stop early
    max_steps: int | None = None
    checkpoint_every: int | None = 500  # optimizer steps between resumable states; None: never
    mixed_precision: str = "auto"
    max_grad_norm: float | None = 1.0  # CodeXGLUE: 1.0
    seed: int = 0
    log_every: int = 50
    num_workers: int = 0
    cpu: bool = False
    deterministic: bool = False
    # this task's own
    label_smoothing: float = 0.0
    metric: str = "bleu"  # bleu: smoothed BLEU-4 of generated summaries | loss: teacher-forcing loss
    max_valid: int | None = 1000  # validation records used (the first ones); None: all
    valid_beam: int = 1  # 1: greedy
    valid_batch_size: int = 64
    keep: str = "best"  # best: the best validation; last: the final model

    def __post_init__(self) -> None:
        check_loop_config(self, positive=("valid_beam", "valid_batch_size"), optional=("checkpoint_every", "max_valid"))
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {self.metric!r}")
        if self.keep not in KEEP:
            raise ValueError(f"keep must be one of {', '.join(KEEP)}, not {self.keep!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), not {self.label_smoothing!r}")

    @property
    def micro_batch(self) -> int:
        """Pairs per micro-batch: ``batch_size``."""
        return self.batch_size


@dataclass
class Seq2SeqTrainResult(Outcome):
    """``train.json``: the engine's :class:`Outcome` with its metric named ``best_bleu`` / ``final_bleu``
    (or ``best_loss`` / ``final_loss``, positive), and these fields:"""

    metric: str
    n_train: int  # pairs trained on (after skips)
    n_valid: int  # validation records scored
    skipped: dict[str, list[Any]]  # reason -> ids (or indexes) of the training pairs left out
    valid_skipped: dict[str, list[Any]]  # the same for the validation records
    model: dict[str, Any]  # the summarizer's params

    def to_dict(self) -> dict[str, Any]:
        if self.metric == "bleu":
            return self.as_record("bleu")
        record = self.as_record("loss")
        for key in ("best_loss", "final_loss"):
            record[key] = None if record[key] is None else -record[key]
        return record


def _ids(frame: pd.DataFrame) -> list[Any]:
    return frame["id"].tolist() if "id" in frame.columns else list(range(len(frame)))


class _Pairs(Dataset):
    """The kept training pairs: ``[i] -> (code, summary)`` of ``source[kept[i]]``, read on demand."""

    def __init__(self, source: Pairs, kept: np.ndarray) -> None:
        if isinstance(source, pd.DataFrame):
            self.codes, self.summaries = source["code"].tolist(), source["query"].tolist()
            self.source = None
        else:
            self.source = source
        self.kept = kept

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, i: int) -> tuple[str, str]:
        j = int(self.kept[i])
        if self.source is None:
            return self.codes[j], self.summaries[j]
        code, summary = self.source[j][:2]
        return code, summary


def screen_pairs(pairs: Pairs, max_code_chars: int) -> tuple[np.ndarray, dict[str, list[Any]]]:
    """The indexes of the usable pairs and the skipped ones by reason (``empty_reference``,
    ``over_long_code``), named by ``id`` (a DataFrame with that column) or index."""
    if isinstance(pairs, pd.DataFrame):
        missing = {"code", "query"} - set(pairs.columns)
        if missing:
            raise ValueError(f"summarization pairs lack column(s) {', '.join(sorted(missing))}")
        names, rows = _ids(pairs), zip(pairs["code"].tolist(), pairs["query"].tolist(), strict=True)
    else:
        names, rows = None, (pairs[i][:2] for i in range(len(pairs)))
    kept: list[int] = []
    skipped: dict[str, list[Any]] = {"empty_reference": [], "over_long_code": []}
    for i, (code, summary) in enumerate(rows):
        reason = None
        if not isinstance(summary, str) or not summary.strip():
            reason = "empty_reference"
        elif not isinstance(code, str) or len(code) > max_code_chars:
            reason = "over_long_code"
        if reason is None:
            kept.append(i)
        else:
            skipped[reason].append(i if names is None else names[i])
    return np.asarray(kept, dtype=np.int64), {reason: ids for reason, ids in skipped.items() if ids}


class _Collate:
    """A micro-batch of (code, summary) pairs -> the summarizer's teacher-forcing batch."""

    def __init__(self, summarizer: Summarizer) -> None:
        self.summarizer = summarizer

    def __call__(self, items: list[tuple[str, str]]) -> dict[str, Tensor]:
        codes, summaries = zip(*items, strict=True)
        return self.summarizer.collate(list(codes), list(summaries))


class SummarizerTask:
    """A summarizer's part of a training (:class:`csbench.train.task.Task`)."""

    name, history_loss = "train summarizer", True

    def __init__(
        self, summarizer: Summarizer, train_pairs: Pairs, valid_frame: pd.DataFrame | None, config: Seq2SeqTrainConfig
    ) -> None:
        self.summarizer, self.config, self.keep = summarizer, config, config.keep
        self.model = summarizer.module
        max_chars = summarizer.params["max_code_chars"]
        kept, skipped = screen_pairs(train_pairs, max_chars)
        if len(kept) == 0:
            raise ValueError(f"no usable training pairs (skipped: { {k: len(v) for k, v in skipped.items()} })")
        self.dataset, self.collate = _Pairs(train_pairs, kept), _Collate(summarizer)
        self.skipped, self.valid_skipped = skipped, {}
        self.valid_codes: list[str] = []
        self.valid_refs: list[str] = []
        if valid_frame is not None and len(valid_frame):
            kept_valid, skipped_valid = screen_pairs(valid_frame, max_chars)
            kept_valid = kept_valid[: config.max_valid]
            self.valid_codes = valid_frame["code"].iloc[kept_valid].tolist()
            self.valid_refs = valid_frame["query"].iloc[kept_valid].tolist()
            self.valid_skipped = skipped_valid
        self.validates = bool(self.valid_codes)
        if not self.validates and config.keep == "best":
            raise ValueError("no validation records: keep 'best' chooses the model on them; use keep: last")
        self.metric = "smoothed_bleu4" if config.metric == "bleu" else "neg_valid_loss"
        self.metric_label = "smoothed BLEU-4" if config.metric == "bleu" else "-loss"

    def describe(self) -> str:
        skipped = {reason: len(ids) for reason, ids in self.skipped.items()}
        valid_skipped = {reason: len(ids) for reason, ids in self.valid_skipped.items()}
        return (
            f"summarizer training ({self.summarizer.architecture}): {len(self.dataset)} train pairs (skipped "
            f"{skipped}), {len(self.valid_codes)} valid records (skipped {valid_skipped}); {self.config}"
        )

    def training_module(self) -> nn.Module:
        return self.summarizer.module

    def setup(self, accelerator: Accelerator) -> None:
        """Nothing to place: the summarizer moves each batch to its module's device."""

    def batch_loss(self, model: nn.Module, batch: dict[str, Tensor], *, epoch: int, step: int) -> Tensor:
        return self.summarizer.loss(model, batch, self.config.label_smoothing)

    def validate(self, model: nn.Module) -> dict[str, float]:
        if self.config.metric == "loss":
            loss = self.valid_loss(model)
            return {"valid_loss": loss, "neg_valid_loss": -loss}
        from csbench.summarization.metrics import smoothed_bleu4

        decoding = Decoding.from_params(
            self.summarizer.params, beam=self.config.valid_beam, batch_size=self.config.valid_batch_size
        )
        hypotheses = self.summarizer.generate(self.valid_codes, decoding)
        return {"smoothed_bleu4": float(smoothed_bleu4(self.valid_refs, hypotheses))}

    def valid_loss(self, model: nn.Module) -> float:
        """Mean token cross-entropy of the validation references (token-weighted over batches)."""
        was_training = model.training
        model.eval()
        total, tokens = 0.0, 0
        size = self.config.valid_batch_size
        try:
            with torch.no_grad():
                for start in range(0, len(self.valid_codes), size):
                    batch = self.summarizer.collate(
                        self.valid_codes[start : start + size], self.valid_refs[start : start + size]
                    )
                    n = int((batch["labels"] != -100).sum())
                    total += float(self.summarizer.loss(model, batch)) * n
                    tokens += n
        finally:
            model.train(was_training)
        return total / max(tokens, 1)

    def save(self, model: nn.Module, directory: Path) -> None:
        self.summarizer.save(directory)

    def record(self, outcome: Outcome) -> Seq2SeqTrainResult:
        return Seq2SeqTrainResult(
            **vars(outcome),
            metric=self.config.metric,
            n_train=len(self.dataset),
            n_valid=len(self.valid_codes),
            skipped=self.skipped,
            valid_skipped=self.valid_skipped,
            model=self.summarizer.params,
        )


def train_summarizer(
    summarizer: Summarizer,
    train_pairs: Pairs,
    valid_frame: pd.DataFrame | None,
    config: Seq2SeqTrainConfig,
    out_dir: str | Path,
    progress: bool = False,
    resume: bool = True,
) -> Seq2SeqTrainResult:
    """Train ``summarizer`` in place; the kept model goes to ``out_dir/best`` and the record to
    ``out_dir/train.json`` (see the module docstring). With ``resume`` a run continues from the newest
    training state under ``out_dir/state``."""
    task = SummarizerTask(summarizer, train_pairs, valid_frame, config)
    return engine.train(task, config, out_dir, progress=progress, resume=resume)
