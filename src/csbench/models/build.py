"""Build a run's model from its registry entry and parameters: a new encoder to train, a pretrained
one to evaluate zero-shot, or a trained checkpoint; and the retriever that scores with it."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from csbench.models import ModelSpec, Retriever

log = logging.getLogger("csbench")
# what an endpoint model's params say about how to reach it and how hard to try: not part of its vectors
_API_TRANSPORT = frozenset({"api_key_env", "timeout_s", "max_retries", "backoff_s", "backoff_max_s", "concurrency",
                            "batch_size", "family", "training"})


def _own(params: dict[str, Any]) -> dict[str, Any]:
    """The family's own parameters (``family`` is the registry's, ``training`` the loop's)."""
    return {k: v for k, v in params.items() if k not in ("family", "training")}


def _remote_code(params: dict[str, Any]) -> bool:
    """Whether the config lets this model's own code run (``trust_remote_code``; README)."""
    return params.get("trust_remote_code") is True


def pretrained_encoder(params: dict[str, Any]):
    """A Hugging Face bi-encoder as released (weights from the hub, a local folder or a package)."""
    from csbench.models.hf import HFBiEncoder

    return HFBiEncoder.from_pretrained(_own(params))


def new_encoder(spec: ModelSpec, params: dict[str, Any], train, seed: int):
    """The encoder a training starts from: a from-scratch network whose vocabularies are learnt on
    ``train`` (its ``query`` and ``code`` columns: a DataFrame or a ``TextTable``, streamed; CodeSearchNet
    baselines), or the pretrained encoder (fine-tuning)."""
    if spec.family == "csn":
        from csbench.models.csn import CSNEncoder

        queries, codes = (train.column(c) if hasattr(train, "column") else train[c].tolist() for c in ("query", "code"))
        return CSNEncoder.from_training_data(queries, codes, {"architecture": spec.name, **_own(params)}, seed)
    if spec.family == "hf":
        return pretrained_encoder(params)
    if spec.family == "cross":
        from csbench.models.cross import CrossEncoder, resolve_cross_params

        return CrossEncoder.from_pretrained(resolve_cross_params(_own(params)), seed=seed)
    raise ValueError(f"model {spec.name!r} ({spec.family}) is not trainable")


def model_loader(
    spec: ModelSpec, params: dict[str, Any], checkpoint: Path | None = None, cache_dir: str | Path | None = "default"
) -> Callable[[], Any] | None:
    """What (re)builds a run's model when it is first needed: the trained ``checkpoint`` (``best/``),
    or the pretrained encoder for a zero-shot run, or an endpoint's client (``cache_dir``: its response
    cache, the config's ``api.cache_dir``), or a user's class (``python``: imported as the config names
    it); None for a lexical model (nothing to load). A run's saved
    index is read back with this loader, made from the config, never from the index."""
    if spec.family == "lexical":
        return None
    if spec.family == "api":
        from csbench.models.api import api_loader

        return api_loader(_own(params), cache_dir)
    if spec.family == "python":
        from csbench.models.python import python_loader

        return python_loader(spec.name, _own(params))
    if spec.family == "llm":
        from csbench.models.api import ClientFactory

        return ClientFactory(_own(params), cache_dir)
    if spec.family == "cross":
        from csbench.models.cross import CrossEncoder

        if checkpoint is None:
            raise ValueError(f"cross-encoder {spec.name!r} has no zero-shot head: its runs need a checkpoint")
        return functools.partial(CrossEncoder.load, checkpoint, allow_remote_code=_remote_code(params))
    from csbench.models.encoder import load_encoder

    if checkpoint is not None:
        return functools.partial(load_encoder, checkpoint, allow_remote_code=_remote_code(params))
    if spec.zero_shot:
        return functools.partial(pretrained_encoder, params)
    raise ValueError(f"model {spec.name!r} is trained from scratch: its runs need a checkpoint")


# ------------------------------------------------------------------------------ the embedding cache


@functools.lru_cache(maxsize=32)
def _folder_digest(folder: str, listing: tuple[tuple[str, int, int], ...]) -> str:
    """The sha256 over a folder's files (relative name and content, in name order); memoised on the
    listing's names, sizes and modification times."""
    digest = hashlib.sha256()
    for name, _, _ in listing:
        file_digest = hashlib.sha256()
        with open(os.path.join(folder, name), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                file_digest.update(block)
        digest.update(f"{name}\0{file_digest.hexdigest()}\n".encode())
    return digest.hexdigest()


def folder_identity(folder: str | Path) -> str:
    """``folder:sha256:<hash>`` of every file below ``folder`` (a model as a local folder or a package)."""
    root = Path(folder)
    listing = tuple(sorted(
        (path.relative_to(root).as_posix(), stat.st_size, stat.st_mtime_ns)
        for path in root.rglob("*") if path.is_file() and not path.name.startswith(".")
        for stat in [path.stat()]
    ))
    return f"folder:sha256:{_folder_digest(str(root), listing)}"


def _hub_identity(model_id: str) -> str | None:
    """``hub:<id>@<commit>`` of the snapshot of hub model ``model_id`` that loading reads (the local
    Hugging Face cache's, as ``from_pretrained`` resolves it offline); None when there is none."""
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(model_id, local_files_only=True))
    except Exception:  # not in the cache, or not a hub id: no identity, no caching
        return None
    return f"hub:{model_id}@{folder.name}"


def encoder_identity(
    spec: ModelSpec, params: dict[str, Any], checkpoint: Path | None, retriever: Any = None
) -> str | None:
    """What names the weights behind a run's vectors in the embedding cache (csbench.cache.embeddings),
    changing whenever they do, or None when nothing can (the run then encodes without the cache):

    - a trained checkpoint: the digest of its ``SHA256SUMS`` (which lists every file's sha256);
    - a zero-shot Hugging Face model: the content hash of its folder (local or packaged), else the hub
      commit of the cached snapshot;
    - an endpoint (``api``): its URL, model name and pinned revision;
    - a user's class (``python``): its class, distribution, version and revision, only when a revision
      is given (csbench cannot see a user's weights change otherwise)."""
    from csbench.models.integrity import sums_digest

    if checkpoint is not None:
        digest = sums_digest(checkpoint)
        return f"checkpoint:sha256sums:{digest}" if digest else None
    if spec.family == "hf":
        from csbench.models.hf import resolve_model_id, resolve_params

        source = resolve_model_id(str(resolve_params(_own(params))["model_id"]))
        return folder_identity(source) if Path(source).is_dir() else _hub_identity(source)
    if spec.family == "api":
        from csbench.api.settings import ApiSettings

        settings = ApiSettings.from_params(_own(params))
        return f"api:{settings.base_url}/{settings.model}@{settings.revision or ''}"
    if spec.family == "python" and retriever is not None:
        source = retriever.model_source()
        if not source.get("revision"):
            return None
        keys = ("class", "distribution", "version", "revision")
        return "python:" + json.dumps({k: source.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))
    return None


def attach_embedding_cache(
    retriever: Any, cache: Any, spec: ModelSpec, params: dict[str, Any], checkpoint: Path | None
) -> Any:
    """Make ``retriever`` (a dense one: its ``encode``) look its vectors up in ``cache`` before encoding
    (:meth:`csbench.models.encoder.DenseRetriever.use_embedding_cache`), under the run's
    :func:`encoder_identity`; other retrievers, or no cache, or no identity: unchanged. Returns it."""
    if cache is None or not hasattr(retriever, "use_embedding_cache"):
        return retriever
    identity = encoder_identity(spec, params, checkpoint, retriever)
    if identity is None:
        log.info("model %s: no identity for the embedding cache (see docs/cache.md): encoded without it", spec.name)
        return retriever
    cache_params = None
    if spec.family == "api":
        cache_params = {"kind": "api", "params": {k: v for k, v in params.items() if k not in _API_TRANSPORT}}
    elif spec.family == "python":
        cache_params = {"kind": "python", "params": {k: v for k, v in _own(params).items() if k != "batch_size"}}
    retriever.use_embedding_cache(cache, identity, cache_params)
    return retriever


def retriever_factory(
    spec: ModelSpec,
    params: dict[str, Any],
    checkpoint: Path | None = None,
    batch_size: int = 128,
    cache_dir: str | Path | None = "default",
    dataset: str | None = None,
    embedding_cache: Any = None,
    processes: int = 1,
) -> Callable[[], Retriever]:
    """A factory of fresh retrievers for the run: BM25 from its parameters; a dense retriever over the
    trained ``checkpoint`` (``best/``), or over the pretrained encoder for a zero-shot run, or over a
    user's class (``python``); an endpoint's retriever (``api``) or matcher (``llm``: its prompt is
    ``dataset``'s), whose answers are cached in ``cache_dir``. A dense retriever looks its vectors up in
    ``embedding_cache`` (:func:`attach_embedding_cache`) when one is given; a bi-encoder's encodes its pools
    over ``processes`` worker processes (csbench.models.parallel) when more than 1."""
    if spec.family == "lexical":
        return functools.partial(spec.factory, _own(params))
    loader = model_loader(spec, params, checkpoint, cache_dir)
    if spec.family == "api":
        from csbench.models.api import ApiRetriever

        embedder = loader()  # one client (and one usage count) for the pools of a run
        api = functools.partial(ApiRetriever, embedder, int(params.get("batch_size", 256)), False, loader)
        return lambda: attach_embedding_cache(api(), embedding_cache, spec, params, checkpoint)
    if spec.family == "python":
        from csbench.models.python import PythonRetriever

        encoder = loader()  # one instance of the user's class for the pools of a run
        user = functools.partial(PythonRetriever, encoder, int(params.get("batch_size", 128)), False, loader)
        return lambda: attach_embedding_cache(user(), embedding_cache, spec, params, checkpoint)
    if spec.family == "llm":
        from csbench.models.llm import LlmMatcher

        own = _own(params)
        return functools.partial(
            LlmMatcher,
            loader,
            prompt=own.get("prompt"),
            max_tokens=own.get("max_tokens"),
            temperature=own.get("temperature"),
            dataset=dataset,
            input_limit=loader.input_limit,
        )
    if spec.family == "cross":
        from csbench.models.cross import CrossRetriever

        return functools.partial(CrossRetriever, loader, batch_size)
    from csbench.models.encoder import DenseRetriever

    encoder = loader()  # one load, shared by the pools of a run

    def factory() -> Retriever:
        retriever = DenseRetriever(encoder, batch_size=batch_size, loader=loader, processes=processes)
        return attach_embedding_cache(retriever, embedding_cache, spec, params, checkpoint)

    return factory
