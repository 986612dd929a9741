"""The contract every summarization architecture implements, and what decoding and training call.

A :class:`Summarizer` is one model with its vocabularies / tokenizers. Three parties use it:

* **training** (:mod:`csbench.train.summarizer`): :meth:`Summarizer.collate` turns (code, summary)
  pairs into a teacher-forcing batch, :meth:`Summarizer.loss` is that batch's token cross-entropy
  under the module accelerate prepared (:attr:`Summarizer.module`, or its wrapper);
* **decoding** (:mod:`csbench.summarization.decode`): greedy and beam search drive the
  *incremental-step protocol*: :meth:`~Summarizer.encode` a batch of codes once, then
  :meth:`~Summarizer.step` one token at a time (the logits of the next token given the prefix) and
  :meth:`~Summarizer.reorder` the rows of the decoder state when beams are expanded, re-ranked or
  dropped; :meth:`~Summarizer.detokenize` turns generated ids into text. :meth:`Summarizer.generate`
  is that search, batched by :attr:`Decoding.batch_size`;
* **persistence**: :meth:`~Summarizer.save` writes safetensors weights, ``summarizer.json``
  (``{"architecture", "params", ...}``) and the vocabulary / tokenizer files (no pickle);
  :func:`csbench.summarization.models.load_summarizer` reads ``architecture`` and calls the class's
  :meth:`~Summarizer.load`.

A new architecture is a module defining ``SUMMARIZER`` (its :class:`Summarizer` subclass), registered
in :data:`csbench.summarization.models.ARCHITECTURES`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csbench.summarization.models.defaults import SEQ2SEQ_DEFAULTS

SUMMARIZER_FILE = "summarizer.json"
WEIGHTS_FILE = "model.safetensors"
# Keys a model's registry entry carries that are not the model's own parameters.
NOT_PARAMS = ("family", "training")


@dataclass(frozen=True)
class Decoding:
    """How summaries are generated (``models.<name>.{beam, max_length, length_penalty, decode_batch_size}``).

    Hugging Face ``generate`` semantics with ``num_beams=beam``, ``length_penalty``,
    ``early_stopping=False``, ``do_sample=False`` and ``max_new_tokens=max_length + 1`` (``max_length``
    counts the summary's tokens, the end-of-sequence token excluded).
    """

    beam: int = 1  # 1 = greedy
    max_length: int = 128  # generated target tokens, EOS excluded
    length_penalty: float = 1.0  # a finished beam scores sum(log p) / length ** length_penalty
    batch_size: int = 32  # codes decoded together (beam x batch_size decoder rows)

    def __post_init__(self) -> None:
        for name in ("beam", "max_length", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"decoding {name} must be a positive integer, not {value!r}")

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides: Any) -> Decoding:
        """The decoding a model's params ask for (``beam``, ``max_length``, ``length_penalty``,
        ``decode_batch_size``), with ``overrides`` (e.g. ``beam=1`` for validation)."""
        values = {
            "beam": params.get("beam", cls.beam),
            "max_length": params.get("max_length", cls.max_length),
            "length_penalty": float(params.get("length_penalty", cls.length_penalty)),
            "batch_size": params.get("decode_batch_size", cls.batch_size),
        }
        return cls(**(values | overrides))

    def to_dict(self) -> dict[str, Any]:
        """As plain data (a run's ``metrics.json`` ``decoding``)."""
        return dataclasses.asdict(self)


class Summarizer(ABC):
    """One summarization model and its vocabularies (see the module docstring for who calls what)."""

    architecture: ClassVar[str]  # the ARCHITECTURES name; summarizer.json's "architecture"
    DEFAULTS: ClassVar[dict[str, Any]] = {}  # the architecture's own params and their defaults
    REQUIRED: ClassVar[tuple[str, ...]] = ()  # its own params without a default (e.g. model_id)

    params: dict[str, Any]  # resolved: SEQ2SEQ_DEFAULTS | DEFAULTS | the config's
    module: nn.Module  # what the engine optimizes (accelerate prepares it)

    # ----------------------------------------------------------------------------------- construction
    @classmethod
    def resolve_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` over the shared and the architecture's defaults; an unknown or missing key is an
        error naming the valid ones. Returns a deep, JSON-clean copy."""
        own = {k: v for k, v in params.items() if k not in NOT_PARAMS}
        valid = {"architecture", *SEQ2SEQ_DEFAULTS, *cls.DEFAULTS, *cls.REQUIRED}
        unknown = sorted(set(own) - valid)
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.6)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"unknown parameter(s) for summarization architecture {cls.architecture!r}: {', '.join(hints)}; "
                f"valid: {', '.join(sorted(valid))}"
            )
        missing = [name for name in cls.REQUIRED if name not in own]
        if missing:
            raise ValueError(f"summarization architecture {cls.architecture!r} needs parameter(s) {', '.join(missing)}")
        if own.get("architecture", cls.architecture) != cls.architecture:
            raise ValueError(f"params name architecture {own['architecture']!r}, not {cls.architecture!r}")
        resolved = {**SEQ2SEQ_DEFAULTS, **cls.DEFAULTS, **own, "architecture": cls.architecture}
        return json.loads(json.dumps(resolved))

    @classmethod
    @abstractmethod
    def build(cls, params: dict[str, Any], codes: Iterable[str], summaries: Iterable[str], seed: int) -> Summarizer:
        """A new model: a from-scratch one learns its vocabularies on ``codes`` / ``summaries`` (the
        train split) and initialises its weights from ``seed``; a pretrained one loads its weights."""

    @classmethod
    @abstractmethod
    def load(cls, directory: Path) -> Summarizer:
        """The model :meth:`save` wrote to ``directory``."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write safetensors weights, ``summarizer.json`` and the vocabulary / tokenizer files."""

    # ----------------------------------------------------------------------------------- training
    @abstractmethod
    def collate(self, codes: list[str], summaries: list[str]) -> dict[str, Tensor]:
        """A teacher-forcing batch (CPU tensors) of the pairs: source ids and mask, decoder inputs,
        labels (ignored positions -100)."""

    @abstractmethod
    def loss(self, module: nn.Module, batch: dict[str, Tensor], label_smoothing: float = 0.0) -> Tensor:
        """Mean token cross-entropy of ``batch`` under ``module`` (this summarizer's :attr:`module`,
        or the wrapper accelerate made of it); the batch is moved to the module's device here."""

    # ----------------------------------------------------------------------------------- decoding protocol
    @property
    @abstractmethod
    def decoder_start_id(self) -> int:
        """The token every generated sequence starts from (BOS; T5: the pad id)."""

    @property
    @abstractmethod
    def eos_id(self) -> int:
        """The end-of-sequence token: a hypothesis that emits it is finished."""

    @property
    @abstractmethod
    def pad_id(self) -> int:
        """What finished rows are padded with."""

    @abstractmethod
    def encode(self, codes: list[str]) -> Any:
        """The decoder state of a batch of codes (encoder output, its mask, an empty cache), on the
        module's device; one row per code. Called under ``torch.no_grad`` with the module in eval mode."""

    @abstractmethod
    def step(self, state: Any, prefix: Tensor) -> tuple[Tensor, Any]:
        """The next-token logits ``(rows, vocab)`` (float32) of each row of ``state`` given its generated
        ``prefix`` ``(rows, t)`` (starting with :attr:`decoder_start_id`), and the state to pass to the
        next step (its cache extended by ``prefix[:, -1]``). An implementation with a key/value cache
        reads only the last column; one without recomputes the decoder on the whole prefix."""

    def reorder(self, state: Any, rows: Tensor) -> Any:
        """The state whose row ``i`` is row ``rows[i]`` of ``state`` (beams expanded, re-ranked,
        dropped). The default gathers every tensor along dim 0 in nested tuples / lists / dicts /
        dataclasses, and calls ``reorder_cache(rows)`` on objects that have it (Hugging Face caches)."""
        return gather_rows(state, rows)

    @abstractmethod
    def detokenize(self, ids: list[list[int]]) -> list[str]:
        """The summaries spelt by generated ids (start and end tokens already removed)."""

    def generate(self, codes: list[str], decoding: Decoding) -> list[str]:
        """One summary per code: greedy (``beam=1``) or beam search, batched, deterministic
        (:func:`csbench.summarization.decode.generate`)."""
        from csbench.summarization.decode import generate

        return generate(self, codes, decoding)

    # ----------------------------------------------------------------------------------- conveniences
    @property
    def device(self) -> torch.device:
        """Where the module's parameters are."""
        return next(self.module.parameters()).device

    def write_manifest(self, directory: Path, **extra: Any) -> None:
        """Write ``summarizer.json``: ``{"architecture", "params", **extra}``."""
        directory.mkdir(parents=True, exist_ok=True)
        record = {"architecture": self.architecture, "params": self.params, **extra}
        (directory / SUMMARIZER_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def read_manifest(directory: Path) -> dict[str, Any]:
    """``summarizer.json`` of a saved summarizer; a clear error when ``directory`` holds none."""
    path = Path(directory) / SUMMARIZER_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} is not a saved summarizer (no {SUMMARIZER_FILE})")
    record = json.loads(path.read_text())
    if not isinstance(record, dict) or "architecture" not in record or "params" not in record:
        raise ValueError(f"{path} lacks 'architecture' / 'params'")
    return record


def gather_rows(value: Any, rows: Tensor) -> Any:
    """``value`` with every tensor's dim 0 indexed by ``rows`` (see :meth:`Summarizer.reorder`)."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    if isinstance(value, Tensor):
        return value.index_select(0, rows.to(value.device))
    if isinstance(value, (tuple, list)):
        return type(value)(gather_rows(item, rows) for item in value)
    if isinstance(value, dict):
        return {key: gather_rows(item, rows) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: gather_rows(getattr(value, f.name), rows) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    if hasattr(value, "reorder_cache"):
        value.reorder_cache(rows)
        return value
    raise TypeError(f"cannot reorder decoder state of type {type(value).__name__}; override Summarizer.reorder")
