"""Trainable bi-encoders: one interface for the CodeSearchNet baselines and Hugging Face encoders.

A bi-encoder maps queries and codes into one space with a shared (or paired) network; a query's
score for a code is the inner product or the cosine of their vectors (SPEC "Models and training").
Every family (``csn``: the from-scratch baselines, ``hf``: Hugging Face encoders) implements
:class:`BiEncoder`, so one training loop, one checkpoint format and one retriever serve them all.

Checkpoint layout (a directory, no pickle anywhere)::

    encoder.json        {"kind": <family>, "format": 1, "params": {...}}  what ``load_encoder`` reads
    model.safetensors   the weights (Hugging Face families keep their own save_pretrained files too)
    ...                 tokenizer / vocabulary files of the family
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from csbench.registry import Registry

Features = dict[str, Tensor]

ENCODER_FILE = "encoder.json"
FORMAT_VERSION = 1


class BiEncoder(nn.Module, ABC):
    """A query / code encoder pair trained for retrieval.

    Subclasses set ``kind`` (their family name in :data:`ENCODER_KINDS`) and implement
    tokenization (``query_features`` / ``code_features``: texts → a dict of CPU tensors, padded to
    the batch), ``encode`` (features → ``(batch, dim)`` vectors, differentiable) and
    ``save`` / ``load``.
    """

    kind: ClassVar[str] = ""

    def __init__(self, similarity: str = "dot") -> None:
        super().__init__()
        if similarity not in ("dot", "cosine"):
            raise ValueError(f"similarity must be 'dot' or 'cosine', not {similarity!r}")
        self.similarity = similarity

    @abstractmethod
    def query_features(self, queries: Sequence[str]) -> Features:
        """Tokenize a batch of natural-language queries."""

    @abstractmethod
    def code_features(self, codes: Sequence[str], languages: Sequence[str]) -> Features:
        """Tokenize a batch of code snippets (``languages`` lets a family add e.g. data flow)."""

    @abstractmethod
    def encode(self, features: Features, side: str) -> Tensor:
        """Vectors ``(batch, dim)`` for tokenized ``features``; ``side`` is ``query`` or ``code``."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """The JSON-serialisable parameters ``load`` needs to rebuild this encoder."""

    @abstractmethod
    def save(self, directory: Path) -> None:
        """Write weights (safetensors) and tokenizer files into the existing ``directory``."""

    @classmethod
    @abstractmethod
    def load(cls, directory: Path, params: dict[str, Any]) -> BiEncoder:
        """Rebuild the encoder saved by ``save`` (``params`` is what ``config`` returned)."""

    def lengths(self, texts: Sequence[str], side: str) -> list[int]:
        """Sort keys for length-sorted batching: the length each text will have as input. Characters
        here; a family whose tokenizer is fast overrides it with token counts (less padding)."""
        return [len(text) for text in texts]

    def scores(self, queries: Tensor, codes: Tensor) -> Tensor:
        """Similarity matrix ``(n_queries, n_codes)``: inner product, or cosine."""
        if self.similarity == "cosine":
            queries = nn.functional.normalize(queries, dim=-1)
            codes = nn.functional.normalize(codes, dim=-1)
        return queries @ codes.T


ENCODER_KINDS: Registry[type[BiEncoder]] = Registry("encoder family")


def register_kind(cls: type[BiEncoder]) -> type[BiEncoder]:
    """Class decorator: make a family loadable by ``load_encoder``."""
    ENCODER_KINDS.register(cls.kind, cls)
    return cls


def save_encoder(encoder: BiEncoder, directory: str | Path) -> Path:
    """Save ``encoder`` to ``directory`` atomically: written beside it, then renamed into place."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        encoder.save(tmp)
        meta = {"kind": encoder.kind, "format": FORMAT_VERSION, "params": encoder.config()}
        (tmp / ENCODER_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old")
            os.replace(directory, old)
            os.replace(tmp, directory)
            _rmtree(old)
        else:
            os.replace(tmp, directory)
    except BaseException:
        _rmtree(tmp)
        raise
    return directory


def load_encoder(directory: str | Path) -> BiEncoder:
    """Load an encoder saved by :func:`save_encoder` (its family is read from ``encoder.json``)."""
    directory = Path(directory)
    meta_path = directory / ENCODER_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{directory} is not a csbench encoder checkpoint (no {ENCODER_FILE})")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: checkpoint format {meta.get('format')!r}, expected {FORMAT_VERSION}")
    kind = meta["kind"]
    if kind not in ENCODER_KINDS and kind in _KIND_MODULES:
        importlib.import_module(_KIND_MODULES[kind])  # registers the family
    return ENCODER_KINDS.get(kind, where=str(meta_path)).load(directory, meta["params"])


# the modules of the built-in families, imported on first load (importing them costs a second or more)
_KIND_MODULES = {"csn": "csbench.models.csn", "hf": "csbench.models.hf"}


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


MAX_PAD_RATIO = 1.25  # a batch pads none of its texts to more than 1.25x its own length


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_pad_ratio: float | None = MAX_PAD_RATIO
) -> list[np.ndarray]:
    """Index batches of similar lengths (longest first), so padding stays small; every index once.

    A batch holds at most ``batch_size`` texts, and (with ``max_pad_ratio``) only texts at least
    1 / ``max_pad_ratio`` as long as its first, longest one: a batch is padded to its longest text, so
    a few long queries among many short ones would otherwise cost the short ones the long length
    (python-stdlib's 590 test queries average 17 tokens, the longest has 118: fixed batches of 128
    encoded them 2.0x slower, 2.6x with typos; benchmarks/bench_query_batches.py). ``None``:
    fixed-size batches."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if max_pad_ratio is not None and max_pad_ratio < 1:
        raise ValueError(f"max_pad_ratio must be at least 1, not {max_pad_ratio}")
    sizes = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-sizes, kind="stable")
    if max_pad_ratio is None:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    batches, start = [], 0
    while start < len(order):
        # lengths fall along ``order``: the batch ends where a text is shorter than longest / ratio
        longest = sizes[order[start]]
        window = sizes[order[start : start + batch_size]]
        fits = int(np.count_nonzero(window * max_pad_ratio >= longest))
        batches.append(order[start : start + fits])
        start += fits
    return batches


@torch.inference_mode()
def encode_texts(
    encoder: BiEncoder,
    texts: Sequence[str],
    side: str,
    languages: Sequence[str] | None = None,
    batch_size: int = 128,
    progress: bool = False,
    device: torch.device | str | None = None,
) -> np.ndarray:
    """Encode ``texts`` in length-sorted batches without gradient bookkeeping; rows in input order."""
    if side not in ("query", "code"):
        raise ValueError(f"side must be 'query' or 'code', not {side!r}")
    if side == "code" and languages is None:
        raise ValueError("code needs its languages")
    device = torch.device(device) if device is not None else next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    out: np.ndarray | None = None
    batches = length_sorted_batches(encoder.lengths(texts, side), batch_size)
    try:
        for batch in tqdm(batches, desc=f"encode {side}s", unit="batch", disable=not progress, mininterval=2):
            chunk = [texts[i] for i in batch]
            if side == "query":
                features = encoder.query_features(chunk)
            else:
                features = encoder.code_features(chunk, [languages[i] for i in batch])
            vectors = encoder.encode({k: v.to(device) for k, v in features.items()}, side)
            vectors = vectors.float().cpu().numpy()
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
    finally:
        encoder.train(was_training)
    if out is None:
        return np.empty((0, 0), dtype=np.float32)
    return out


class DenseRetriever:
    """The ``Retriever`` interface (``index`` / ``scores``) over a bi-encoder: codes are encoded once
    by ``index``; each query is encoded and scored against them.

    ``loader`` rebuilds the encoder (``functools.partial(load_encoder, checkpoint)`` for a trained
    model, a ``from_pretrained`` call for a zero-shot one). A pickled retriever (the run's index file)
    keeps the code vectors and the loader, never the network's weights: it is rebuilt from its
    checkpoint (safetensors) the first time a query is encoded."""

    def __init__(
        self,
        encoder: BiEncoder | None,
        batch_size: int = 128,
        progress: bool = False,
        loader: Callable[[], BiEncoder] | None = None,
    ) -> None:
        if encoder is None and loader is None:
            raise ValueError("a DenseRetriever needs an encoder or a loader")
        self._encoder = encoder
        self.loader = loader
        self.batch_size = batch_size
        self.progress = progress
        self.similarity = encoder.similarity if encoder is not None else None
        self._codes: np.ndarray | None = None
        self.encode_s = 0.0
        self.n_encoded = 0

    @property
    def encoder(self) -> BiEncoder:
        if self._encoder is None:
            self._encoder = self.loader()
            self.similarity = self._encoder.similarity
        return self._encoder

    def index(self, codes: pd.DataFrame) -> None:
        t0 = time.perf_counter()
        vectors = encode_texts(
            self.encoder,
            codes["code"].tolist(),
            "code",
            languages=codes["language"].tolist(),
            batch_size=self.batch_size,
            progress=self.progress,
        )
        self.encode_s += time.perf_counter() - t0
        self.n_encoded += len(codes)
        if self.encoder.similarity == "cosine":
            vectors = _unit(vectors)
        self._codes = vectors

    def query_vectors(self, queries: Sequence[str]) -> np.ndarray:
        vectors = encode_texts(self.encoder, list(queries), "query", batch_size=self.batch_size)
        return _unit(vectors) if self.encoder.similarity == "cosine" else vectors

    def prepare_queries(self, queries: Sequence[str]) -> None:
        """Encode ``queries`` at once in length-sorted batches (``search`` calls it before scoring
        them one by one): ``scores`` then looks each query's vector up instead of encoding it alone."""
        distinct = list(dict.fromkeys(queries))
        self._queries = dict(zip(distinct, self.query_vectors(distinct), strict=True)) if distinct else {}

    @property
    def code_vectors(self) -> np.ndarray | None:
        """The indexed codes' vectors (unit length for a cosine model): the ranking engine reads them."""
        return self._codes

    def query_matrix(self, queries: Sequence[str]) -> np.ndarray:
        """The vectors of ``queries`` in order, one row each: looked up where ``prepare_queries``
        encoded them, the others encoded now."""
        cached = getattr(self, "_queries", {})
        todo = list(dict.fromkeys(q for q in queries if q not in cached))
        fresh = dict(zip(todo, self.query_vectors(todo), strict=True)) if todo else {}
        if not queries:
            return np.empty((0, 0 if self._codes is None else self._codes.shape[1]), dtype=np.float32)
        return np.stack([cached[q] if q in cached else fresh[q] for q in queries]).astype(np.float32, copy=False)

    def scores(self, query: str) -> np.ndarray:
        if self._codes is None:
            raise RuntimeError("index() must be called before scores()")
        cached = getattr(self, "_queries", {}).get(query)
        vector = cached if cached is not None else self.query_vectors([query])[0]
        return (self._codes @ vector).astype(np.float64)

    def __getstate__(self) -> dict[str, Any]:
        if self.loader is None:
            raise TypeError("a DenseRetriever without a loader cannot be pickled (its weights are not)")
        state = dict(self.__dict__)
        state["_encoder"] = None
        state.pop("_queries", None)
        return state


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


LossFn = Callable[..., Tensor]  # (scores (B, B), *, epoch: int, step: int) -> scalar
