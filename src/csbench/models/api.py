"""Embedding endpoints as zero-shot bi-encoders (model family ``api``; parameters in
:mod:`csbench.api.defaults`): the run's pools are embedded once by ``csbench index`` and saved as
vectors like a local encoder's (:class:`ApiRetriever` is a :class:`csbench.models.encoder.DenseRetriever`
whose vectors come from ``POST {base_url}/embeddings``), so every protocol (full-corpus, csn-1000,
gecs-100, matching, the robustness points) ranks with them exactly as with a local bi-encoder, and
each perturbed query set only embeds its queries (every text once per cache: :mod:`csbench.api.cache`).

What a run sent is counted (:attr:`ApiEmbedder.usage`: requests, cache hits, tokens, truncated
inputs) and recorded in its index and provenance; the key is read from the variable the model's
``api_key_env`` names and never written anywhere.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from csbench.models.encoder import DenseRetriever
from csbench.models.integrity import VerifiedDir


def endpoint_settings(params: dict[str, Any]):
    """The :class:`csbench.api.settings.ApiSettings` of an endpoint model's parameters."""
    from csbench.api.settings import ApiSettings

    return ApiSettings.from_params(params)


def input_limit(params: dict[str, Any]):
    """The :class:`csbench.api.limits.InputLimit` of an endpoint model's parameters."""
    from csbench.api.limits import InputLimit

    return InputLimit(params.get("tokenizer"), params.get("max_input_tokens"), params.get("max_input_chars"))


def response_cache(cache_dir: str | Path | None):
    """The response cache at ``cache_dir`` (``"default"``: :func:`csbench.api.cache.default_cache_dir`),
    or None (``api.cache_dir: null``: every text is sent, every run)."""
    from csbench.api.cache import ResponseCache, default_cache_dir

    if cache_dir is None:
        return None
    return ResponseCache(default_cache_dir() if cache_dir == "default" else Path(cache_dir))


class ApiEmbedder:
    """An embedding endpoint seen as an encoder: ``embed(texts)`` -> float32 rows (inputs truncated as
    the provider does first, and counted). Nothing connects before the first text is embedded, and
    the key is read then (a run whose pools are all cached needs no key)."""

    def __init__(self, params: dict[str, Any], cache_dir: str | Path | None = "default", progress: bool = False):
        self.params = dict(params)
        self.settings = endpoint_settings(self.params)
        self.similarity = str(self.params.get("similarity", "cosine"))
        self.batch_size = int(self.params.get("batch_size", 256))
        self.limit = input_limit(self.params)
        self.cache = response_cache(cache_dir)
        self.progress = progress
        self._client = None
        self.truncated = 0
        self.n_texts = 0

    @property
    def client(self):
        if self._client is None:
            from csbench.api.client import ApiClient

            self._client = ApiClient(self.settings, self.cache, progress=self.progress)
        return self._client

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts, truncated = self.limit.apply(list(texts))
        self.truncated += truncated
        self.n_texts += len(texts)
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        return np.asarray(self.client.embed(texts, batch_size=self.batch_size), dtype=np.float32)

    @property
    def usage(self) -> dict[str, Any]:
        """What this embedder sent and received so far (the client's counts), with the inputs
        truncated and embedded."""
        counts = self._client.usage.as_dict() if self._client is not None else {}
        return {**counts, "texts": self.n_texts, "truncated": self.truncated}


class ApiRetriever(DenseRetriever):
    """A :class:`DenseRetriever` whose vectors come from an embedding endpoint (:class:`ApiEmbedder`,
    built by ``loader``); its index state is the dense one (the pool's vectors, ``.npy``) plus what
    embedding the pool cost (``api_usage``)."""

    INDEX_TYPE: ClassVar[str] = "api"
    # no per-query latency figures (csbench.evaluate.runner._query_latencies): each would be one HTTP
    # request timing the network, not the model, and a run would send a hundred requests more
    times_queries: ClassVar[bool] = False

    def __init__(
        self,
        encoder: ApiEmbedder | None,
        batch_size: int = 256,
        progress: bool = False,
        loader: Callable[[], ApiEmbedder] | None = None,
    ) -> None:
        super().__init__(encoder, batch_size=batch_size, progress=progress, loader=loader)
        self.index_usage: dict[str, Any] = {}
        self._index_end: dict[str, Any] = {}  # the embedder's counts when the pool was indexed here

    def model_vectors(self, texts: list[str], side: str, languages: list[str] | None = None) -> np.ndarray:
        """The endpoint's vectors of ``texts`` (the same request for a query and a code)."""
        return self.encoder.embed(texts)

    def index(self, codes: pd.DataFrame) -> None:
        before = self.encoder.usage
        super().index(codes)
        self._index_end = self.encoder.usage
        self.index_usage = usage_delta(before, self._index_end)

    def api_usage(self) -> dict[str, Any]:
        """What embedding the pool cost when it was indexed (``index``) and what embedding queries
        cost in this process so far (``queries``)."""
        sent = self._encoder.usage if self._encoder is not None else {}
        return {"index": dict(self.index_usage), "queries": usage_delta(self._index_end, sent) if sent else {}}

    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """The dense state (the pool's vectors), with what embedding the pool cost (``api_usage``)."""
        return {**super().index_state(directory, name), "api_usage": self.index_usage}

    @classmethod
    def from_index_state(
        cls, state: dict[str, Any], files: VerifiedDir, loader: Callable[[], ApiEmbedder] | None
    ) -> ApiRetriever:
        retriever = super().from_index_state(state, files, loader)
        retriever.index_usage = dict(state.get("api_usage") or {})
        return retriever  # type: ignore[return-value]


def usage_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The counts of ``after`` less those of ``before`` (what happened in between)."""
    return {k: v - before.get(k, 0) if isinstance(v, (int, float)) else v for k, v in after.items()}


class ClientFactory:
    """What builds a chat model's :class:`csbench.api.client.ApiClient` on first use (a run whose
    answers are all cached reads no key until then), with the model's input limit (``input_limit``),
    which the matcher applies to each prompt."""

    def __init__(self, params: dict[str, Any], cache_dir: str | Path | None = "default", progress: bool = False):
        self.settings = endpoint_settings(params)
        self.input_limit = input_limit(params)
        self.cache_dir = cache_dir
        self.progress = progress

    def __call__(self):
        from csbench.api.client import ApiClient

        return ApiClient(self.settings, response_cache(self.cache_dir), progress=self.progress)


def api_loader(params: dict[str, Any], cache_dir: str | Path | None = "default") -> Callable[[], ApiEmbedder]:
    """What builds a run's embedder when it is first needed (the index's saved vectors need none)."""
    return functools.partial(ApiEmbedder, params, cache_dir)
