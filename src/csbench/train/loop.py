"""The training loop for every bi-encoder: one file, read top to bottom (nanoGPT / accelerate style).

``train(encoder, train_pairs, valid_pairs, config, out_dir)`` fine-tunes a :class:`BiEncoder` with an
in-batch contrastive loss (COBE section III-A) under accelerate, validates ``validations_per_epoch``
times an epoch with full-validation-set MRR, stops early, keeps the best checkpoint, and writes
resumable training state. Both SPEC regimes are presets: :meth:`TrainConfig.cobe` and
:meth:`TrainConfig.codebert`.

Files under ``out_dir``::

    best/         the encoder with the best validation MRR (``save_encoder``; ``load_encoder`` reads it):
                  byte-reproducible (same seed, same bytes), 0755 / 0644, with its SHA256SUMS
    state/        the last training-state checkpoint (only needed to resume; delete after train.json)
    train.json    the run's record: efficiency (wall time, samples/s), validation history, stop reason

Design decisions (the why):

* **Global batch, any number of processes.** ``batch_size`` is the *global* number of query-code pairs
  whose (B, B) similarity matrix one loss sees. Each of P processes encodes its B/P slice of the
  global batch; query and code vectors are then all-gathered *with gradient* (:class:`_GatherWithGrad`),
  so every process scores the full (B, B) matrix and computes the identical global loss L (the COBE
  losses use rows and columns, so both sides are gathered). Gradient bookkeeping: every process holds
  the same dL/d(all vectors); the gather's backward sums it over processes, so rank r's local vectors
  get P·dL/dx_r; DDP then *averages* parameter gradients over P, giving Σ_r J_rᵀ dL/dx_r = dL/dθ —
  exactly the single-process gradient. Hence 2-process training equals 1-process training with the
  same global batch, up to float summation order (the gradient is summed in a different order; see
  the test for the measured difference). Randomness inside the encoder (dropout) is drawn per process
  and is the one thing that is not reproduced across process counts.
* **Batch order is a pure function of (seed, epoch).** Each epoch's permutation comes from a fresh
  ``torch.Generator`` seeded from (seed, epoch); the last partial global batch is dropped (in-batch
  negatives need a full matrix, and all-gather needs equal slices). Resuming mid-epoch is therefore
  "rebuild this epoch's batches and skip the ones done" — no sampler state to save.
* **Gradient accumulation** (``grad_accum``) uses ``accelerator.accumulate``; an optimizer step is
  ``grad_accum`` micro-batches of ``batch_size`` (negatives stay within a micro-batch). An epoch uses
  ``(n // batch_size) // grad_accum * grad_accum`` micro-batches so accumulation never straddles epochs.
* **Resume granularity: one optimizer step.** Every ``checkpoint_every`` optimizer steps (after that
  step's validation, if any) the loop writes ``state/``: accelerate's ``save_state`` (model as
  safetensors; optimizer, scheduler and per-process RNG states as torch files) plus its own
  ``loop.json`` (step counter, early-stopping state, best MRR, validation history, efficiency
  counters, config) and ``rng_<rank>.json`` (Python / NumPy / torch RNG states). It is written into
  ``.state.tmp/`` and renamed into place, so a killed run never leaves a half-written ``state/``.
  With ``resume=True`` the newest complete state is loaded and training replays from the next step;
  the result (validation history, best MRR, best weights) equals an uninterrupted run's bit for bit.
  Wall time lost between the checkpoint and the kill is not counted (it is replayed).
* **What accelerate 1.15's ``load_state`` loads, and how.** Model weights from ``model.safetensors``
  (safetensors, no pickle). ``optimizer.bin`` / ``scheduler.bin`` / ``random_states_<rank>.pkl`` are
  ``torch.save`` files read through ``accelerate.utils.load``, i.e. ``torch.load(weights_only=True)``
  with a temporary allow-list of NumPy reconstruct / ndarray / dtype globals (needed for NumPy's RNG
  tuple); the loop passes ``load_kwargs={"weights_only": True}`` so this does not depend on the
  default. The RNG file restores Python, NumPy, torch CPU (and CUDA) generators and accelerate's
  accumulation ``step`` counter — but any failure there is swallowed ("Could not load random states",
  logged at INFO only), so the loop restores its own JSON copy of the RNG states afterwards and does
  not depend on it. Nothing is loaded with ``weights_only=False``: ``register_for_checkpointing``
  (whose ``load_custom_state`` forces it) is not used; the loop's own state is JSON.
* **Validation** runs on the main process only (other processes wait at a barrier, then receive the
  MRR by broadcast so all take the same early-stopping decision): every valid query and code is
  encoded with :func:`encode_texts` and each query's code is ranked among *all* valid codes (rank =
  number of codes scoring ≥ the correct one, ties count against the model), not in-batch.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, broadcast, set_seed
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from csbench.models.encoder import BiEncoder, Features, encode_texts, save_encoder
from csbench.registry import Registry
from csbench.train.early_stopping import EarlyStopping
from csbench.train.schedules import SCHEDULES, make_schedule, schedule_params

logger = logging.getLogger(__name__)

Pairs = pd.DataFrame | Sequence[tuple[str, str, str]]
STATE_FORMAT = 1
MIXED_PRECISION = ("auto", "no", "fp16", "bf16")
# Fields that may change between a run and its resumption without changing the result.
RESUME_FREE_FIELDS = frozenset({"log_every", "checkpoint_every", "num_workers"})


# --------------------------------------------------------------------------------------------- config
OPTIMIZERS: Registry[type[torch.optim.Optimizer]] = Registry("optimizer")
OPTIMIZERS.register("adam", torch.optim.Adam)
OPTIMIZERS.register("adamw", torch.optim.AdamW)


@dataclass(frozen=True)
class TrainConfig:
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
        OPTIMIZERS.check(self.optimizer, where="train.optimizer")
        SCHEDULES.check(self.schedule, where="train.schedule")
        unknown = sorted(set(self.schedule_params) - set(schedule_params(self.schedule)))
        if unknown:
            raise ValueError(f"lr schedule {self.schedule!r} takes no parameter {', '.join(unknown)}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ValueError(
                f"mixed_precision must be one of {', '.join(MIXED_PRECISION)}, not {self.mixed_precision!r}"
            )
        for name in ("epochs", "batch_size", "grad_accum", "validations_per_epoch", "log_every", "valid_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("patience", "max_steps", "checkpoint_every"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {getattr(self, name)}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"need lr > 0 and weight_decay >= 0, got {self.lr}, {self.weight_decay}")

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

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        return config_from_dict(cls, values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def config_from_dict(cls: type, values: dict[str, Any]) -> Any:
    """A config dataclass from a mapping (e.g. params.yaml); an unknown key is an error naming the valid ones."""
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - valid)
    if unknown:
        raise ValueError(f"unknown training option(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
    return cls(**values)


@dataclass
class TrainResult:
    """What a run leaves in ``train.json``: the outcome, the learning curve and the efficiency numbers."""

    best_mrr: float | None
    best_step: int | None
    best_epoch: float | None  # fractional: best_step / steps_per_epoch
    final_mrr: float | None  # last validation
    stop_reason: str  # early_stopping | epochs | max_steps
    steps: int  # optimizer steps done
    epochs_run: float  # steps / steps_per_epoch
    samples: int  # training pairs seen (global, counted per optimizer step)
    steps_per_epoch: int
    total_steps: int  # planned: min(epochs * steps_per_epoch, max_steps)
    train_seconds: float  # wall time of the run, validations included, summed over resumed segments
    validation_seconds: float
    samples_per_second: float  # samples / (train_seconds - validation_seconds)
    history: list[dict[str, Any]]  # one {"step", "epoch", "mrr", "seconds"} per validation
    num_processes: int
    mixed_precision: str
    device: str
    segments: int  # 1 + number of resumptions
    resumed_from_step: int | None
    best_dir: str
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A fresh generator for one epoch, seeded from (seed, epoch) only."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0]))


def epoch_batches(n: int, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The global batches of one epoch (index arrays), a pure function of (seed, epoch); the last
    partial batch is dropped."""
    order = torch.randperm(n, generator=epoch_generator(seed, epoch)).numpy()
    return [order[i * batch_size : (i + 1) * batch_size] for i in range(n // batch_size)]


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


def make_optimizer(encoder: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """Adam / AdamW; weight decay only on tensors with >= 2 dims (matrices, embeddings), as nanoGPT
    and CodeBERT's fine-tuning script (no decay on biases and LayerNorm weights)."""
    params = [p for p in encoder.parameters() if p.requires_grad]
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


# --------------------------------------------------------------------------------------------- validation
@torch.inference_mode()
def validation_mrr(
    encoder: BiEncoder,
    queries: list[str],
    codes: list[str],
    languages: list[str],
    batch_size: int = 128,
    device: torch.device | str | None = None,
    chunk: int = 1024,
) -> float:
    """MRR of each query's own code ranked among all valid codes (rank = #codes scoring ≥ the correct one)."""
    q = torch.from_numpy(encode_texts(encoder, queries, "query", batch_size=batch_size, device=device))
    c = torch.from_numpy(encode_texts(encoder, codes, "code", languages, batch_size=batch_size, device=device))
    reciprocal = []
    for start in range(0, len(q), chunk):
        scores = encoder.scores(q[start : start + chunk], c)
        rows = torch.arange(scores.shape[0])
        correct = scores[rows, rows + start]
        ranks = (scores >= correct[:, None]).sum(dim=1).double()
        reciprocal.append(1.0 / ranks)
    return float(torch.cat(reciprocal).mean())


# --------------------------------------------------------------------------------------------- state files
def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _rng_state() -> dict[str, Any]:
    """Python, NumPy and torch RNG states as JSON-serialisable data."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode() for s in torch.cuda.get_rng_state_all()]
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    def tensor(text: str) -> Tensor:
        return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensor(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([tensor(s) for s in state["cuda"]])


def _latest_state(out_dir: Path) -> Path | None:
    """The complete training state with the most steps: ``state/``, or a ``.state.tmp`` / ``.state.old``
    left by a kill during the rename (complete = its ``loop.json`` exists; it is written last)."""
    best: tuple[int, Path] | None = None
    for candidate in (out_dir / "state", out_dir / ".state.tmp", out_dir / ".state.old"):
        loop_file = candidate / "loop.json"
        if loop_file.is_file():
            step = json.loads(loop_file.read_text())["global_step"]
            if best is None or step > best[0]:
                best = (step, candidate)
    return None if best is None else best[1]


def _check_resumable(saved: dict[str, Any], config: TrainConfig, num_processes: int, steps_per_epoch: int) -> None:
    if saved.get("format") != STATE_FORMAT:
        raise ValueError(f"training state format {saved.get('format')!r}, expected {STATE_FORMAT}")
    old, new = saved["config"], config.to_dict()
    changed = sorted(k for k in set(old) | set(new) if k not in RESUME_FREE_FIELDS and old.get(k) != new.get(k))
    if changed:
        raise ValueError(f"cannot resume: the config changed in {', '.join(changed)} (start a fresh run instead)")
    if saved["num_processes"] != num_processes:
        raise ValueError(
            f"cannot resume a {saved['num_processes']}-process run with {num_processes} processes "
            "(accelerate's model state is saved per wrapper)"
        )
    if saved["steps_per_epoch"] != steps_per_epoch:
        raise ValueError("cannot resume: the training data changed (steps per epoch differ)")


# --------------------------------------------------------------------------------------------- the loop
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
    defaults to ``make_loss(config.loss, config.loss_params)``. ``resume=True`` continues from the
    newest training state in ``out_dir``, if any; otherwise earlier outputs there are removed.
    ``on_step(status)`` is called on every process after each optimizer step (and its validation /
    checkpoint). For data parallelism launch the calling script with ``torchrun --nproc_per_node N``
    (or ``accelerate launch --multi_gpu`` on GPUs); on CPU, ``accelerate launch --cpu`` starts a single
    process unless given an mpirun hostfile, so use torchrun (gloo is then set up by accelerate).
    """
    out_dir = Path(out_dir)
    t_start = time.perf_counter()
    accelerator, mixed_precision = make_accelerator(config)
    main = accelerator.is_main_process
    world, rank = accelerator.num_processes, accelerator.process_index
    set_seed(config.seed, deterministic=config.deterministic)
    if main:
        logger.info("train config: %s", json.dumps(config.to_dict(), sort_keys=True))
        logger.info("processes: %d, device: %s, mixed precision: %s", world, accelerator.device, mixed_precision)

    # ---- data: per process, its slice of each global batch
    queries, codes, languages = as_triples(train_pairs)
    valid_queries, valid_codes, valid_languages = as_triples(valid_pairs)
    if config.batch_size % world:
        raise ValueError(f"global batch_size {config.batch_size} is not divisible by {world} processes")
    local_batch = config.batch_size // world
    steps_per_epoch = (len(queries) // config.batch_size) // config.grad_accum
    if steps_per_epoch < 1:
        raise ValueError(
            f"{len(queries)} training pairs make no optimizer step of {config.grad_accum} x {config.batch_size} pairs"
        )
    micro_batches_per_epoch = steps_per_epoch * config.grad_accum
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    per_epoch = config.validations_per_epoch  # validate after these optimizer steps of every epoch:
    validation_points = {math.ceil(steps_per_epoch * j / per_epoch) for j in range(1, per_epoch + 1)}
    dataset, collate = _Pairs(queries, codes, languages), _Collate(encoder)

    # ---- model, optimizer, schedule, loss
    optimizer = make_optimizer(encoder, config)
    scheduler = make_schedule(config.schedule, optimizer, steps_per_epoch, total_steps, config.schedule_params)
    model, optimizer, scheduler = accelerator.prepare(_PairForward(encoder), optimizer, scheduler)
    if loss_fn is None:
        from csbench.train.losses import make_loss

        loss_fn = make_loss(config.loss, config.loss_params)
    if isinstance(loss_fn, nn.Module):
        loss_fn = loss_fn.to(accelerator.device)

    # ---- fresh start or resume
    early = EarlyStopping(config.patience)
    global_step, samples, history = 0, 0, []
    prior_seconds = prior_validation_seconds = 0.0
    segments, resumed_from = 1, None
    state_dir = _latest_state(out_dir) if resume else None
    if state_dir is not None:
        saved = json.loads((state_dir / "loop.json").read_text())
        _check_resumable(saved, config, world, steps_per_epoch)
        accelerator.load_state(str(state_dir), load_kwargs={"weights_only": True})
        _set_rng_state(json.loads((state_dir / f"rng_{rank}.json").read_text()))
        early.load_state_dict(saved["early_stopping"])
        global_step, samples, history = saved["global_step"], saved["samples"], saved["history"]
        prior_seconds, prior_validation_seconds = saved["train_seconds"], saved["validation_seconds"]
        segments, resumed_from = saved["segments"] + 1, global_step
        if main:
            logger.info("resumed from %s at step %d (best MRR %s)", state_dir, global_step, early.best)
    elif main:
        for stale in ("best", "state", ".state.tmp", ".state.old", "train.json"):
            path = out_dir / stale
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    validation_seconds = 0.0

    def elapsed() -> float:
        return prior_seconds + time.perf_counter() - t_start

    def validate() -> float:
        nonlocal validation_seconds
        t0 = time.perf_counter()
        mrr = torch.zeros(1, dtype=torch.float64, device=accelerator.device)
        if main:
            unwrapped = accelerator.unwrap_model(model).encoder
            mrr += validation_mrr(
                unwrapped, valid_queries, valid_codes, valid_languages, config.valid_batch_size, accelerator.device
            )
        accelerator.wait_for_everyone()
        mrr = float(broadcast(mrr, from_process=0).item())
        validation_seconds += time.perf_counter() - t0
        return mrr

    def save_training_state() -> None:
        tmp, final, old = out_dir / ".state.tmp", out_dir / "state", out_dir / ".state.old"
        if main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(tmp), safe_serialization=True)
        _write_json(tmp / f"rng_{rank}.json", _rng_state())
        accelerator.wait_for_everyone()
        if main:
            loop_state = {
                "format": STATE_FORMAT,
                "global_step": global_step,
                "samples": samples,
                "history": history,
                "early_stopping": early.state_dict(),
                "train_seconds": elapsed(),
                "validation_seconds": prior_validation_seconds + validation_seconds,
                "segments": segments,
                "num_processes": world,
                "steps_per_epoch": steps_per_epoch,
                "config": config.to_dict(),
            }
            _write_json(tmp / "loop.json", loop_state)  # written last: marks the state complete
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        accelerator.wait_for_everyone()

    def stop_reason() -> str | None:
        return why_stop(early, config, global_step, steps_per_epoch)

    # ---- train
    bar = tqdm(
        total=total_steps,
        initial=global_step,
        desc="train",
        unit="step",
        disable=not (progress and main),
        mininterval=2,
    )
    model.train()
    last_validated = history[-1]["step"] if history else 0
    logged_loss, logged_steps, t_log = 0.0, 0, time.perf_counter()
    reason = stop_reason()
    while reason is None:
        epoch, step_in_epoch = divmod(global_step, steps_per_epoch)
        batches = epoch_batches(len(queries), config.batch_size, config.seed, epoch)[:micro_batches_per_epoch]
        local = [batch[rank * local_batch : (rank + 1) * local_batch].tolist() for batch in batches]
        loader = DataLoader(
            dataset,
            batch_sampler=local[step_in_epoch * config.grad_accum :],
            collate_fn=collate,
            num_workers=config.num_workers,
            # Its own generator: otherwise each new DataLoader iterator draws its base seed from the
            # global torch RNG, and a resumed run (one iterator more) would see other dropout masks.
            generator=epoch_generator(config.seed + 1, epoch),
        )
        step_loss = 0.0
        for query_features, code_features in loader:
            with accelerator.accumulate(model):
                query_features = {k: v.to(accelerator.device) for k, v in query_features.items()}
                code_features = {k: v.to(accelerator.device) for k, v in code_features.items()}
                query_vectors, code_vectors = model(query_features, code_features)
                scores = encoder.scores(
                    gather_with_grad(query_vectors.float(), accelerator),
                    gather_with_grad(code_vectors.float(), accelerator),
                )
                loss = loss_fn(scores, epoch=epoch, step=global_step)
                accelerator.backward(loss)
                if accelerator.sync_gradients and config.max_grad_norm is not None:
                    accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            step_loss += float(loss.detach()) / config.grad_accum
            if not accelerator.sync_gradients:
                continue

            # ---- one optimizer step done
            global_step += 1
            samples += config.batch_size * config.grad_accum
            logged_loss, logged_steps, step_loss = logged_loss + step_loss, logged_steps + 1, 0.0
            bar.update(1)
            status: dict[str, Any] = {"step": global_step, "epoch": epoch, "lr": scheduler.get_last_lr()[0]}
            if global_step % config.log_every == 0 and main:
                rate = logged_steps * config.batch_size * config.grad_accum / (time.perf_counter() - t_log)
                logger.info(
                    "step %d epoch %d loss %.4f lr %.3g %.1f samples/s",
                    global_step, epoch, logged_loss / logged_steps, status["lr"], rate,
                )  # fmt: skip
                logged_loss, logged_steps, t_log = 0.0, 0, time.perf_counter()

            reason = stop_reason()
            due = (global_step - epoch * steps_per_epoch) in validation_points
            if due or (reason is not None and last_validated != global_step):
                mrr = validate()
                last_validated = global_step
                record = {"step": global_step, "epoch": global_step / steps_per_epoch, "mrr": mrr, "seconds": elapsed()}
                history.append(record)
                if early.update(mrr, global_step) and main:
                    save_encoder(accelerator.unwrap_model(model).encoder, out_dir / "best")
                accelerator.wait_for_everyone()
                status["mrr"] = mrr
                bar.set_postfix(mrr=f"{mrr:.4f}", best=f"{early.best:.4f}")
                if main:
                    best, at = early.best, early.best_step
                    logger.info("step %d: validation MRR %.4f (best %.4f at step %d)", global_step, mrr, best, at)
                reason = stop_reason()
            if config.checkpoint_every is not None and global_step % config.checkpoint_every == 0:
                save_training_state()
                status["checkpoint"] = True
            if on_step is not None:
                on_step(status)
            if reason is not None:
                break
    bar.close()

    # ---- the run's record
    train_seconds = elapsed()
    total_validation = prior_validation_seconds + validation_seconds
    result = TrainResult(
        best_mrr=early.best,
        best_step=early.best_step,
        best_epoch=None if early.best_step is None else early.best_step / steps_per_epoch,
        final_mrr=history[-1]["mrr"] if history else None,
        stop_reason=reason,
        steps=global_step,
        epochs_run=global_step / steps_per_epoch,
        samples=samples,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
        train_seconds=train_seconds,
        validation_seconds=total_validation,
        samples_per_second=samples / max(train_seconds - total_validation, 1e-9),
        history=history,
        num_processes=world,
        mixed_precision=mixed_precision,
        device=str(accelerator.device),
        segments=segments,
        resumed_from_step=resumed_from,
        best_dir=str(out_dir / "best"),
        config=config.to_dict(),
    )
    if main:
        _write_json(out_dir / "train.json", result.to_dict())
        logger.info(
            "done: %s after %d steps; best MRR %s at step %s; %.1f s, %.1f samples/s",
            reason, global_step, early.best, early.best_step, train_seconds, result.samples_per_second,
        )  # fmt: skip
    accelerator.wait_for_everyone()
    return result
