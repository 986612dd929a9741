"""Retrieval models, registered by name. A model scores every candidate code for each query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from csbench.models.bm25 import BM25Retriever
from csbench.registry import Registry


class Retriever(Protocol):
    def index(self, codes: pd.DataFrame) -> None: ...

    def scores(self, query: str) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    trained: bool  # False: no fine-tuning; its runs are zero-shot with loss "none" and seed 0
    factory: Any  # (params dict) -> Retriever
    defaults: dict[str, Any]


MODELS: Registry[ModelSpec] = Registry("model")
MODELS.register(
    "bm25",
    ModelSpec(
        "bm25",
        "BM25 over code subtokens with a separate function-name field (CodeSearchNet's ElasticSearch baseline)",
        trained=False,
        factory=BM25Retriever.from_params,
        defaults=BM25Retriever.DEFAULTS,
    ),
)
