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


def retriever_factory(
    spec: ModelSpec, params: dict[str, Any], checkpoint: Path | None = None, batch_size: int = 128
) -> Callable[[], Retriever]:
    """A factory of fresh retrievers for the run: BM25 from its parameters; a dense retriever over the
    trained ``checkpoint`` (``best/``), or over the pretrained encoder for a zero-shot run."""
    if spec.family == "lexical":
        return functools.partial(spec.factory, _own(params))
    if spec.family == "cross":
        from csbench.models.cross import CrossEncoder, CrossRetriever

        if checkpoint is None:
            raise ValueError(f"cross-encoder {spec.name!r} has no zero-shot head: its runs need a checkpoint")
        load = functools.partial(CrossEncoder.load, checkpoint)
        return functools.partial(CrossRetriever, load, batch_size)
    from csbench.models.encoder import DenseRetriever, load_encoder

    if checkpoint is not None:
        loader = functools.partial(load_encoder, checkpoint)
    elif spec.zero_shot:
        loader = functools.partial(pretrained_encoder, params)
    else:
        raise ValueError(f"model {spec.name!r} is trained from scratch: its runs need a checkpoint")
    encoder = loader()  # one load, shared by the pools of a run

    def factory() -> Retriever:
        return DenseRetriever(encoder, batch_size=batch_size, loader=loader)

    return factory
