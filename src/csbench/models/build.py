"""Build a run's model from its registry entry and parameters: a new encoder to train, a pretrained
one to evaluate zero-shot, or a trained checkpoint; and the retriever that scores with it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from csbench.models import ModelSpec, Retriever


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


def new_encoder(spec: ModelSpec, params: dict[str, Any], train: pd.DataFrame, seed: int):
    """The encoder a training starts from: a from-scratch network whose vocabularies are learnt on
    ``train`` (CodeSearchNet baselines), or the pretrained encoder (fine-tuning)."""
    if spec.family == "csn":
        from csbench.models.csn import CSNEncoder

        return CSNEncoder.from_training_data(
            train["query"].tolist(), train["code"].tolist(), {"architecture": spec.name, **_own(params)}, seed
        )
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


def retriever_factory(
    spec: ModelSpec,
    params: dict[str, Any],
    checkpoint: Path | None = None,
    batch_size: int = 128,
    cache_dir: str | Path | None = "default",
    dataset: str | None = None,
) -> Callable[[], Retriever]:
    """A factory of fresh retrievers for the run: BM25 from its parameters; a dense retriever over the
    trained ``checkpoint`` (``best/``), or over the pretrained encoder for a zero-shot run, or over a
    user's class (``python``); an endpoint's retriever (``api``) or matcher (``llm``: its prompt is
    ``dataset``'s), whose answers are cached in ``cache_dir``."""
    if spec.family == "lexical":
        return functools.partial(spec.factory, _own(params))
    loader = model_loader(spec, params, checkpoint, cache_dir)
    if spec.family == "api":
        from csbench.models.api import ApiRetriever

        embedder = loader()  # one client (and one usage count) for the pools of a run
        return functools.partial(ApiRetriever, embedder, int(params.get("batch_size", 256)), False, loader)
    if spec.family == "python":
        from csbench.models.python import PythonRetriever

        encoder = loader()  # one instance of the user's class for the pools of a run
        return functools.partial(PythonRetriever, encoder, int(params.get("batch_size", 128)), False, loader)
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
        return DenseRetriever(encoder, batch_size=batch_size, loader=loader)

    return factory
