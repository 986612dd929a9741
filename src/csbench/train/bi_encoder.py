"""Training a bi-encoder: the in-batch contrastive task that :mod:`csbench.train.engine` runs.

``train(encoder, train_pairs, valid_pairs, config, out_dir)`` fine-tunes a :class:`BiEncoder` with an
in-batch contrastive loss (COBE section III-A), validates with full-validation-set MRR and keeps the
best checkpoint in ``out_dir/best`` (``save_encoder``; ``load_encoder`` reads it: byte-reproducible,
0755 / 0644, with its SHA256SUMS). The step plan, validation schedule, early stopping, resumable state
and ``train.json`` are the engine's. Both SPEC regimes are presets: :meth:`TrainConfig.cobe` and
:meth:`TrainConfig.codebert`.

Design decisions (the why):

* **Global batch, any number of processes.** ``batch_size`` is the *global* number of query-code pairs
  whose (B, B) similarity matrix one loss sees (one micro-batch; ``grad_accum`` of them make a step).
  Each of P processes encodes its B/P slice of the global batch; query and code vectors are then
  all-gathered *with gradient* (:class:`_GatherWithGrad`), so every process scores the full (B, B)
  matrix and computes the identical global loss L (the COBE losses use rows and columns, so both sides
  are gathered). Gradient bookkeeping: every process holds the same dL/d(all vectors); the gather's
  backward sums it over processes, so rank r's local vectors get P·dL/dx_r; DDP then *averages*
  parameter gradients over P, giving Σ_r J_rᵀ dL/dx_r = dL/dθ — exactly the single-process gradient.
  Hence 2-process training equals 1-process training with the same global batch, up to float summation
  order (the gradient is summed in a different order; see the test for the measured difference).
  Randomness inside the encoder (dropout) is drawn per process and is the one thing that is not
  reproduced across process counts.
* **Validation** encodes every valid query and code with :func:`encode_texts` and ranks each query's
  code among *all* valid codes (rank = number of codes scoring ≥ the correct one, ties count against
  the model), not in-batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist
from accelerate import Accelerator
from torch import Tensor, nn
from torch.utils.data import Dataset

from csbench.models.encoder import BiEncoder, Features, encode_texts, save_encoder
from csbench.train import engine
from csbench.train.task import ConfigDict, Outcome, check_loop_config

Pairs = pd.DataFrame | Sequence[tuple[str, str, str]]


@dataclass(frozen=True)
class TrainConfig(ConfigDict):
    """Every knob of one training run; the defaults are COBE's regime (SPEC "Models and training")."""

    optimizer: str = "adam"  # adam (COBE: Adam, L2 weight decay) | adamw (decoupled weight decay)
    lr: float = 2e-5
    weight_decay: float = 0.0  # applied to matrices / embeddings only, never to biases and norm weights
    schedule: str = "step_decay"  # see csbench.train.schedules.SCHEDULES
    schedule_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"every_epochs": 3, "gamma": 0.1}
    epochs: int = 20
    batch_size: int = 32  # global: pairs per in-batch similarity matrix, summed over processes
    grad_accum: int = 1  # micro-batches per optimizer step
    validations_per_epoch: int = 3
    patience: int | None = 6  # validations without MRR gain before stopping; None: never stop early
    max_steps: int | None = None  # optional cap on optimizer steps
    checkpoint_every: int | None = 500  # optimizer steps between training-state checkpoints; None: never
    mixed_precision: str = "auto"  # no | fp16 | bf16 | auto (bf16 on a CUDA device that has it, else no)
    max_grad_norm: float | None = None  # gradient clipping; None: off
    seed: int = 0
    loss: str = "ce"  # see csbench.train.losses.LOSSES
    loss_params: dict[str, Any] = field(default_factory=dict)
    log_every: int = 50  # optimizer steps between log lines
    valid_batch_size: int = 128  # encoding batch for validation
    num_workers: int = 0  # DataLoader workers for tokenization
    cpu: bool = False  # force CPU even when an accelerator is present
    deterministic: bool = False  # torch.use_deterministic_algorithms (slower on GPU)

    def __post_init__(self) -> None:
        check_loop_config(self, positive=("valid_batch_size",), optional=("checkpoint_every",))

    @property
    def micro_batch(self) -> int:
        """Pairs per micro-batch: ``batch_size`` (one in-batch similarity matrix)."""
        return self.batch_size

    @classmethod
    def cobe(cls, **overrides: Any) -> TrainConfig:
        """COBE (section IV-A): Adam, lr 2e-5 / 10 every 3 epochs, 20 epochs, 3 validations an epoch,
        patience 6, batch 85 (their CodeBERT batch; 70 for CodeT5)."""
        base = {"optimizer": "adam", "lr": 2e-5, "schedule": "step_decay", "epochs": 20, "batch_size": 85}
        base |= {"schedule_params": {"every_epochs": 3, "gamma": 0.1}, "validations_per_epoch": 3, "patience": 6}
        return cls(**(base | overrides))

    @classmethod
    def codebert(cls, **overrides: Any) -> TrainConfig:
        """CodeBERT / GraphCodeBERT fine-tuning: AdamW, lr 1e-5, linear decay, batch 32, 8 epochs (the
        CodeBERT parameters GeCS quotes); validation and early stopping as COBE."""
        base = {"optimizer": "adamw", "lr": 1e-5, "schedule": "linear_decay", "epochs": 8, "batch_size": 32}
        return cls(**(base | overrides))


@dataclass
class TrainResult(Outcome):
    """What a run leaves in ``train.json``: the engine's :class:`~csbench.train.task.Outcome` (the
    outcome, the learning curve ``{"step", "epoch", "mrr", "seconds"}``, the efficiency numbers), its
    metric named: ``best_mrr``, ``final_mrr``."""

    best_mrr = property(lambda self: self.best, doc="the best validation MRR")
    final_mrr = property(lambda self: self.final, doc="the last validation's MRR")

    def to_dict(self) -> dict[str, Any]:
        return self.as_record("mrr")


# --------------------------------------------------------------------------------------------- data
def as_triples(pairs: Pairs) -> tuple[list[str], list[str], list[str]]:
    """``(queries, codes, languages)`` from a DataFrame with those columns or (query, code, language) tuples."""
    if isinstance(pairs, pd.DataFrame):
        missing = {"query", "code", "language"} - set(pairs.columns)
        if missing:
            raise ValueError(f"pairs lack column(s) {', '.join(sorted(missing))}")
        return pairs["query"].tolist(), pairs["code"].tolist(), pairs["language"].tolist()
    triples = list(pairs)
    return [t[0] for t in triples], [t[1] for t in triples], [t[2] for t in triples]


class _Pairs(Dataset):
    def __init__(self, queries: list[str], codes: list[str], languages: list[str]) -> None:
        self.queries, self.codes, self.languages = queries, codes, languages

    def __len__(self) -> int:
        return len(self.queries)

    def __getitem__(self, i: int) -> tuple[str, str, str]:
        return self.queries[i], self.codes[i], self.languages[i]


class _Collate:
    """Tokenize a micro-batch with the encoder's own ``query_features`` / ``code_features``."""

    def __init__(self, encoder: BiEncoder) -> None:
        self.encoder = encoder

    def __call__(self, items: list[tuple[str, str, str]]) -> tuple[Features, Features]:
        queries, codes, languages = (list(column) for column in zip(*items, strict=True))
        return self.encoder.query_features(queries), self.encoder.code_features(codes, languages)


# --------------------------------------------------------------------------------------------- model
class _PairForward(nn.Module):
    """Puts both sides' encoding in ``forward``: DDP's gradient hooks and accelerate's autocast wrap
    ``forward``, and a ``BiEncoder`` has ``encode`` instead."""

    def __init__(self, encoder: BiEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, query_features: Features, code_features: Features) -> tuple[Tensor, Tensor]:
        return self.encoder.encode(query_features, "query"), self.encoder.encode(code_features, "code")


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 whose backward sums the incoming gradient over processes and returns
    this process's slice: the semantics of ``torch.distributed.nn.all_gather``, which torch 2.13
    deprecates (FutureWarning) in favour of a private module; plain ``dist`` calls, fine on gloo."""

    @staticmethod
    def forward(ctx: Any, local: Tensor) -> Tensor:
        ctx.rank, ctx.rows = dist.get_rank(), local.shape[0]
        parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, local.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def gather_with_grad(local: Tensor, accelerator: Accelerator) -> Tensor:
    """The global batch's rows, in process order, differentiable w.r.t. this process's ``local`` rows."""
    if accelerator.num_processes == 1:
        return local
    return _GatherWithGrad.apply(local)


VALIDATION_SCORES = 1 << 24  # most scores of the validation's query x code block at once (64 MiB of float32)


@torch.inference_mode()
def validation_mrr(
    encoder: BiEncoder,
    queries: list[str],
    codes: list[str],
    languages: list[str],
    batch_size: int = 128,
    device: torch.device | str | None = None,
    chunk: int = 1024,
    max_scores: int = VALIDATION_SCORES,
) -> float:
    """MRR of each query's own code ranked among all valid codes (rank = #codes scoring ≥ the correct one).
    The queries are scored ``chunk`` at a time, fewer where a chunk's scores would exceed ``max_scores``
    (a validation split of 110 k pairs: 152 queries x 110 k codes, 64 MiB, not 1,024 x 110 k, 450 MiB;
    up to 16,384 codes the chunk is as it was)."""
    q = torch.from_numpy(encode_texts(encoder, queries, "query", batch_size=batch_size, device=device))
    c = torch.from_numpy(encode_texts(encoder, codes, "code", languages, batch_size=batch_size, device=device))
    chunk = max(1, min(chunk, max_scores // max(1, len(c))))
    reciprocal = []
    for start in range(0, len(q), chunk):
        scores = encoder.scores(q[start : start + chunk], c)
        rows = torch.arange(scores.shape[0])
        correct = scores[rows, rows + start]
        ranks = (scores >= correct[:, None]).sum(dim=1).double()
        reciprocal.append(1.0 / ranks)
    return float(torch.cat(reciprocal).mean())


# --------------------------------------------------------------------------------------------- the task
class BiEncoderTask:
    """A bi-encoder's part of a training (:class:`csbench.train.task.Task`): the loss of the (B, B)
    in-batch score matrix of the global micro-batch, and the validation MRR over all valid codes."""

    name, metric, metric_label, keep, validates, history_loss = "train", "mrr", "MRR", "best", True, False

    def __init__(
        self,
        encoder: BiEncoder,
        train_pairs: Pairs,
        valid_pairs: Pairs,
        config: TrainConfig,
        loss_fn: Callable[..., Tensor] | None,
    ) -> None:
        self.model, self.config, self.loss_fn = encoder, config, loss_fn
        # a map-style dataset of (query, code, language) as it is (a TextTable: the split in a file)
        self.dataset = train_pairs if isinstance(train_pairs, Dataset) else _Pairs(*as_triples(train_pairs))
        self.collate = _Collate(encoder)
        self.valid = as_triples(valid_pairs)
        self.accelerator: Accelerator | None = None

    def describe(self) -> str:
        return f"train config: {json.dumps(self.config.to_dict(), sort_keys=True)}"

    def training_module(self) -> nn.Module:
        return _PairForward(self.model)

    def setup(self, accelerator: Accelerator) -> None:
        self.accelerator = accelerator
        if self.loss_fn is None:
            from csbench.train.losses import make_loss

            self.loss_fn = make_loss(self.config.loss, self.config.loss_params)
        if isinstance(self.loss_fn, nn.Module):
            self.loss_fn = self.loss_fn.to(accelerator.device)

    def batch_loss(self, model: nn.Module, batch: tuple[Features, Features], *, epoch: int, step: int) -> Tensor:
        accelerator = self.accelerator
        query_features = {k: v.to(accelerator.device) for k, v in batch[0].items()}
        code_features = {k: v.to(accelerator.device) for k, v in batch[1].items()}
        query_vectors, code_vectors = model(query_features, code_features)
        scores = self.model.scores(
            gather_with_grad(query_vectors.float(), accelerator), gather_with_grad(code_vectors.float(), accelerator)
        )
        return self.loss_fn(scores, epoch=epoch, step=step)

    def validate(self, model: nn.Module) -> dict[str, float]:
        device = self.accelerator.device
        return {"mrr": validation_mrr(model.encoder, *self.valid, self.config.valid_batch_size, device)}

    def save(self, model: nn.Module, directory: Path) -> None:
        save_encoder(model.encoder, directory)

    def record(self, outcome: Outcome) -> TrainResult:
        return TrainResult(**vars(outcome))


def train(
    encoder: BiEncoder,
    train_pairs: Pairs,
    valid_pairs: Pairs,
    config: TrainConfig,
    out_dir: str | Path,
    loss_fn: Callable[..., Tensor] | None = None,
    progress: bool = True,
    resume: bool = False,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> TrainResult:
    """Fine-tune ``encoder`` in place; the best-MRR checkpoint is written to ``out_dir/best``.

    ``loss_fn(scores, *, epoch, step)`` takes the (B, B) in-batch score matrix (positives on the
    diagonal; ``epoch`` / ``step`` are 0-based counters of epochs and optimizer steps done) and
    defaults to ``make_loss(config.loss, config.loss_params)``. ``resume``, ``on_step`` and launching
    on several processes: :func:`csbench.train.engine.train`.
    """
    task = BiEncoderTask(encoder, train_pairs, valid_pairs, config, loss_fn)
    return engine.train(task, config, out_dir, progress=progress, resume=resume, on_step=on_step)
