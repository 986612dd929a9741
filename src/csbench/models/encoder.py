"""Trainable bi-encoders: one interface for the CodeSearchNet baselines and Hugging Face encoders.

A bi-encoder maps queries and codes into one space with a shared (or paired) network; a query's
score for a code is the inner product or the cosine of their vectors (SPEC "Models and training").
Every family (``csn``: the from-scratch baselines, ``hf``: Hugging Face encoders) implements
:class:`BiEncoder`, so one training loop, one checkpoint format and one retriever serve them all.

Checkpoint layout (a directory, no pickle anywhere)::

    encoder.json        {"kind": <family>, "format": 1, "params": {...}}  what ``load_encoder`` reads
    model.safetensors   the weights (Hugging Face families keep their own save_pretrained files too)
    ...                 tokenizer / vocabulary files of the family
    SHA256SUMS          the digest of every other file (:mod:`csbench.models.integrity`), checked by
                        ``load_encoder`` before it reads anything

A checkpoint is byte-reproducible: the same training writes the same bytes (the safetensors
metadata, which the safetensors library writes in a random key order, is rewritten sorted by
:func:`canonical_safetensors`), with the modes of any other output (0755 / 0644 under umask 022,
not ``mkdtemp``'s 0700), so DVC hashes two equal trainings the same.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import json
import shutil
import struct
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from csbench.models.integrity import VerifiedDir, new_dir_beside, publish_dir, verify_dir
from csbench.models.threads import run_batches, tokenizer_lock
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
    """Save ``encoder`` to ``directory`` atomically: written beside it, sealed (:func:`seal_checkpoint`),
    then renamed into place."""
    directory = Path(directory)
    tmp = new_dir_beside(directory)
    try:
        encoder.save(tmp)
        meta = {"kind": encoder.kind, "format": FORMAT_VERSION, "params": encoder.config()}
        (tmp / ENCODER_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        seal_checkpoint(tmp, directory)
    except BaseException:
        _rmtree(tmp)
        raise
    return directory


def seal_checkpoint(tmp: Path, directory: Path) -> str:
    """Make the checkpoint built in ``tmp`` byte-reproducible (sorted safetensors metadata), write
    its ``SHA256SUMS`` and move it to ``directory`` with the usual modes; return the sums' digest."""
    for weights in sorted(Path(tmp).rglob("*.safetensors")):
        canonical_safetensors(weights)
    return publish_dir(tmp, directory)


def checkpoint_remake_hint(directory: Path) -> str:
    """How to re-make a checkpoint whose files do not match its ``SHA256SUMS``."""
    return (
        f"delete {directory} and train again (`csbench train` for its run, or let snakemake / dvc repro "
        "re-run the train job); a checkpoint from a DVC remote: `make pull` again"
    )


def verify_checkpoint(directory: Path) -> None:
    """Refuse a checkpoint whose files are not exactly those its ``SHA256SUMS`` lists."""
    verify_dir(directory, checkpoint_remake_hint(directory))


def canonical_safetensors(path: Path) -> bool:
    """Rewrite the header of a safetensors file with its ``__metadata__`` keys sorted (the library
    keeps them in a hash map, so their order changes from one process to the next and equal weights
    give different bytes). Tensors and their offsets are left as written. True if it was rewritten."""
    path = Path(path)
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        raw = handle.read(size)
    header = json.loads(raw)
    metadata = header.get("__metadata__")
    if not metadata:
        return False
    ordered = {"__metadata__": dict(sorted(metadata.items()))}
    ordered.update((key, value) for key, value in header.items() if key != "__metadata__")
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the library aligns the data to 8 bytes
    if text == raw:
        return False
    if len(text) == size:  # the same keys in another order: overwrite the header in place
        with open(path, "r+b") as handle:
            handle.seek(8)
            handle.write(text)
        return True
    rewritten = path.with_name(f".{path.name}.tmp")
    with open(path, "rb") as source, open(rewritten, "wb") as target:
        source.seek(8 + size)
        target.write(struct.pack("<Q", len(text)) + text)
        shutil.copyfileobj(source, target, 1 << 20)
    rewritten.replace(path)
    return True


def check_remote_code(directory: Path, saved: dict[str, Any], allowed: bool) -> None:
    """Refuse a checkpoint whose own parameters set ``trust_remote_code`` when the config does not:
    the config decides whether a model's code may run, never a file that came with the checkpoint."""
    if saved.get("trust_remote_code") and not allowed:
        raise ValueError(
            f"{directory}: the checkpoint sets trust_remote_code (it would run the code in its folder) but "
            "the config's parameters of this model do not: refused; set trust_remote_code: true for the "
            "model in the config only if you trust that code"
        )


def check_param_names(params: dict[str, Any], defaults: dict[str, Any], what: str) -> None:
    """Refuse keys of ``params`` that ``defaults`` lacks, naming the closest known one."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(defaults), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown {what} parameter(s) {', '.join(unknown)}{hint}")


def read_checkpoint_meta(directory: Path, meta_file: str, what: str) -> tuple[Path, dict[str, Any]]:
    """``(path, content)`` of the JSON file ``meta_file`` that marks ``directory`` as a ``what``
    checkpoint, once the folder's files have been checked against its ``SHA256SUMS``."""
    meta_path = directory / meta_file
    if not meta_path.is_file():
        raise FileNotFoundError(f"{directory} is not a csbench {what} checkpoint (no {meta_file})")
    verify_checkpoint(directory)
    return meta_path, json.loads(meta_path.read_text())


@contextlib.contextmanager
def seeded_init(seed: int | None) -> Iterator[None]:
    """Initialise weights inside a fork of torch's CPU RNG, seeded with ``seed`` (or drawing from the
    global state when None): the same seed gives the same weights, and the caller's RNG stream is
    left as it was either way."""
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        yield


def load_encoder(directory: str | Path, allow_remote_code: bool = False) -> BiEncoder:
    """Load an encoder saved by :func:`save_encoder` (its family is read from ``encoder.json``), once
    its files have been checked against its ``SHA256SUMS``. ``allow_remote_code``: the config's
    ``trust_remote_code`` for the model; a checkpoint that sets it without that is refused."""
    directory = Path(directory)
    meta_path, meta = read_checkpoint_meta(directory, ENCODER_FILE, "encoder")
    if meta.get("format") != FORMAT_VERSION:
        raise ValueError(f"{meta_path}: checkpoint format {meta.get('format')!r}, expected {FORMAT_VERSION}")
    check_remote_code(directory, meta.get("params") or {}, allow_remote_code)
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


def encode_chunks(
    encoder: BiEncoder,
    chunks: Sequence[tuple[Sequence[str], Sequence[str] | None]],
    side: str,
    device: torch.device | str,
    sink: Callable[[int, np.ndarray], None],
    bar: tqdm | None = None,
) -> None:
    """Compute the float32 vectors of each chunk (``(texts, languages)``: a batch as given, no reordering)
    and hand them to ``sink(i, vectors)``, in the chunks' order, in the calling thread: what
    :func:`encode_texts` does per batch, and the workers of :mod:`csbench.models.parallel` and the jobs of
    :mod:`csbench.models.shards` too (the same batch gives the same bits). On CPU each chunk runs on one
    torch thread, as many chunks at once as the caller has torch threads
    (:func:`csbench.models.threads.run_batches`); on a GPU one after another."""

    def compute(i: int) -> np.ndarray:
        texts, languages = chunks[i]
        with tokenizer_lock:
            features = encoder.query_features(texts) if side == "query" else encoder.code_features(texts, languages)
        vectors = encoder.encode({k: v.to(device) for k, v in features.items()}, side).float().cpu().numpy()
        if bar is not None:
            bar.update(1)
        return vectors

    run_batches(compute, len(chunks), sink, device)


def encode_batch(
    encoder: BiEncoder, texts: Sequence[str], side: str, languages: Sequence[str] | None, device: torch.device
) -> np.ndarray:
    """float32 vectors of one batch, as given (no reordering), on one torch thread (:func:`encode_chunks`)."""
    out: list[np.ndarray] = []
    encode_chunks(encoder, [(texts, languages)], side, device, lambda _, vectors: out.append(vectors))
    return out[0]


def encode_texts(
    encoder: BiEncoder,
    texts: Sequence[str],
    side: str,
    languages: Sequence[str] | None = None,
    batch_size: int = 128,
    progress: bool = False,
    device: torch.device | str | None = None,
) -> np.ndarray:
    """Encode ``texts`` in length-sorted batches without gradient bookkeeping; rows in input order.
    On CPU each batch runs on one torch thread, as many at once as torch has threads here, so the
    vectors do not depend on the thread count (:mod:`csbench.models.threads`)."""
    if side not in ("query", "code"):
        raise ValueError(f"side must be 'query' or 'code', not {side!r}")
    if side == "code" and languages is None:
        raise ValueError("code needs its languages")
    device = torch.device(device) if device is not None else next(encoder.parameters()).device
    batches = length_sorted_batches(encoder.lengths(texts, side), batch_size)
    chunks = [
        ([texts[i] for i in batch], None if side == "query" else [languages[i] for i in batch]) for batch in batches
    ]
    out: np.ndarray | None = None

    def sink(i: int, vectors: np.ndarray) -> None:
        nonlocal out
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[batches[i]] = vectors

    was_training = encoder.training
    encoder.eval()
    bar = tqdm(total=len(batches), desc=f"encode {side}s", unit="batch", disable=not progress, mininterval=2)
    try:
        encode_chunks(encoder, chunks, side, device, sink, bar)
    finally:
        bar.close()
        encoder.train(was_training)
    return out if out is not None else np.empty((0, 0), dtype=np.float32)


class DenseRetriever:
    """The ``Retriever`` interface (``index`` / ``scores``) over a bi-encoder: codes are encoded once
    by ``index``; each query is encoded and scored against them.

    ``loader`` rebuilds the encoder (``functools.partial(load_encoder, checkpoint)`` for a trained
    model, a ``from_pretrained`` call for a zero-shot one). The run's index keeps the code vectors
    (:meth:`index_state`: a ``.npy`` array), never the network: a retriever read back from it
    (:meth:`from_index_state`) gets its loader from the config, and the encoder is rebuilt the first
    time a query is encoded."""

    INDEX_TYPE: ClassVar[str] = "dense"

    def __init__(
        self,
        encoder: BiEncoder | None,
        batch_size: int = 128,
        progress: bool = False,
        loader: Callable[[], BiEncoder] | None = None,
        processes: int = 1,
    ) -> None:
        if encoder is None and loader is None:
            raise ValueError("a DenseRetriever needs an encoder or a loader")
        if processes < 1:
            raise ValueError(f"processes must be at least 1, not {processes}")
        self._encoder = encoder
        self.loader = loader
        self.batch_size = batch_size
        self.processes = processes  # > 1: large encodings go over that many worker processes (.parallel)
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

    # The embedding cache (csbench.cache.embeddings), off unless use_embedding_cache is called; n_forward
    # counts the texts the network encoded (a fully cached run: 0).
    embedding_cache: Any = None
    n_forward: int = 0

    def use_embedding_cache(self, cache: Any, identity: str, params: dict[str, Any] | None = None) -> None:
        """Look vectors up in ``cache`` (an :class:`csbench.cache.embeddings.EmbeddingCache`) before
        encoding, and store what is encoded. ``identity`` must change with the weights (a trained
        checkpoint: its weights' sha256; a zero-shot model: its folder's content hash or hub revision);
        ``params``: the encoding parameters (default: the encoder's family and ``config()``). A code's
        language is part of its key (the CodeSearchNet baselines encode by language)."""
        self.embedding_cache = (cache, identity, params)

    def encode(self, texts: list[str], side: str, languages: list[str] | None = None) -> np.ndarray:
        """Raw vectors of ``texts`` (``side``: query or code), before the cosine's normalisation: looked up
        in the embedding cache when one is in use (:meth:`use_embedding_cache`), the others computed by
        :meth:`model_vectors`. ``n_forward`` counts the texts the model computed."""
        if self.embedding_cache is None:
            self.n_forward += len(texts)
            return self.model_vectors(texts, side, languages)
        return self._encode_through_cache(texts, side, languages)

    def model_vectors(self, texts: list[str], side: str, languages: list[str] | None = None) -> np.ndarray:
        """The model's raw vectors of ``texts``, computed now: the one place a subclass changes to get its
        vectors elsewhere (csbench.models.api: an endpoint; csbench.models.python: a user's class)."""
        progress = self.progress and side == "code"  # a pool's encoding shows a bar, a query set's not
        if self.processes > 1 and self.loader is not None and len(texts) >= 2 * self.batch_size:
            from csbench.models.parallel import encode_parallel

            # the same batches as encode_texts, spread over processes that rebuild the encoder: the same bits
            return encode_parallel(
                self.loader, texts, side, languages, self.encoder.lengths(texts, side), self.batch_size,
                self.processes, progress,
            )  # fmt: skip
        return encode_texts(self.encoder, texts, side, languages, self.batch_size, progress)

    def cache_params(self) -> dict[str, Any]:
        """What besides the weights changes a vector (the cache key's parameters): the encoder's family
        and ``config()`` (max lengths, pooling, prefixes, ...)."""
        return {"kind": self.encoder.kind, "config": self.encoder.config()}

    def cache_namespace(self, side: str, language: str | None = None):
        """The embedding cache's namespace of this model's vectors of ``side`` (a code's: of ``language``)."""
        from csbench.cache.embeddings import Namespace

        _, identity, params = self.embedding_cache
        params = params if params is not None else self.cache_params()
        return Namespace(identity, {**params, "language": language} if side == "code" else params, side)

    def _encode_through_cache(self, texts: list[str], side: str, languages: list[str] | None) -> np.ndarray:
        cache = self.embedding_cache[0]
        if side == "code" and languages is None:
            raise ValueError("code needs its languages")
        groups: dict[str | None, list[int]] = {}
        for i in range(len(texts)):
            groups.setdefault(languages[i] if side == "code" else None, []).append(i)
        out: np.ndarray | None = None
        for language, rows in groups.items():
            namespace = self.cache_namespace(side, language)

            def encode(batch: list[str], language: str | None = language) -> np.ndarray:
                self.n_forward += len(batch)
                return self.model_vectors(batch, side, [language] * len(batch) if side == "code" else None)

            vectors = cache.get_or_encode(namespace, [texts[i] for i in rows], encode)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out if out is not None else np.empty((0, 0), dtype=np.float32)

    def index(self, codes: pd.DataFrame) -> None:
        t0 = time.perf_counter()
        vectors = self.encode(codes["code"].tolist(), "code", codes["language"].tolist())
        self.encode_s += time.perf_counter() - t0
        self.n_encoded += len(codes)
        if self.encoder.similarity == "cosine":
            vectors = _unit(vectors)
        self._codes = vectors

    def query_vectors(self, queries: Sequence[str]) -> np.ndarray:
        vectors = self.encode(list(queries), "query")
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

    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """Write the indexed code vectors to ``directory/<name>.vectors.npy`` (float32, no pickle);
        return the rest of the state, JSON (the encoder itself is not saved)."""
        if self._codes is None:
            raise RuntimeError("index() must be called before the index is saved")
        file = f"{name}.vectors.npy"
        np.save(directory / file, np.ascontiguousarray(self._codes, dtype=np.float32), allow_pickle=False)
        return {
            "type": self.INDEX_TYPE,
            "vectors": file,
            "similarity": self.similarity,
            "batch_size": self.batch_size,
            "encode_s": self.encode_s,
            "n_encoded": self.n_encoded,
            **self.encoding_record(),
        }

    def encoding_record(self) -> dict[str, Any]:
        """How many texts the model encoded here (``n_forward``; the others came from the embedding
        cache) and under which cache identity (None: no cache)."""
        identity = self.embedding_cache[1] if self.embedding_cache else None
        return {"n_forward": self.n_forward, "embedding_cache": identity}

    @classmethod
    def from_index_state(
        cls, state: dict[str, Any], files: VerifiedDir, loader: Callable[[], BiEncoder] | None
    ) -> DenseRetriever:
        """The retriever :meth:`index_state` saved: its vectors from the index's verified ``files``
        (the bytes that were hashed, no pickle), its encoder rebuilt by ``loader`` on first use."""
        if loader is None:
            raise ValueError("a dense index needs the loader of its model's encoder")
        retriever = cls(None, batch_size=int(state["batch_size"]), loader=loader)
        vectors = files.array(state["vectors"])
        if vectors.ndim != 2 or vectors.dtype != np.float32:
            raise ValueError(f"{state['vectors']}: expected a 2-d float32 array, got {vectors.dtype} {vectors.shape}")
        retriever._codes = vectors
        retriever.similarity = state["similarity"]
        retriever.encode_s, retriever.n_encoded = float(state["encode_s"]), int(state["n_encoded"])
        return retriever


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


LossFn = Callable[..., Tensor]  # (scores (B, B), *, epoch: int, step: int) -> scalar
