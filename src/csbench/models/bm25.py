"""BM25 standing in for CodeSearchNet's ElasticSearch baseline.

ElasticSearch indexed two fields per function, the function name split into subtokens and the
whole function text, and was queried with its defaults: a ``multi_match`` query of type
``best_fields`` (score = best field score + ``tie_breaker`` × the others, tie_breaker 0) over
Lucene's BM25 (k1 = 1.2, b = 0.75). We do the same with two bm25s indexes, with code split into
subtokens (snake_case, camelCase, punctuation) instead of ElasticSearch's standard tokenizer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import bm25s
import numpy as np
import pandas as pd

from csbench.code.tokens import subtokens


class BM25Retriever:
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "k1": 1.2,
        "b": 0.75,
        "method": "lucene",
        "name_boost": 1.0,
        "code_boost": 1.0,
        "combine": "best_fields",
        "tie_breaker": 0.0,
    }

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        method: str = "lucene",
        name_boost: float = 1.0,
        code_boost: float = 1.0,
        combine: str = "best_fields",
        tie_breaker: float = 0.0,
    ) -> None:
        if combine not in ("best_fields", "sum"):
            raise ValueError(f"combine must be 'best_fields' or 'sum', not {combine!r}")
        self.k1, self.b, self.method = k1, b, method
        self.name_boost, self.code_boost = name_boost, code_boost
        self.combine, self.tie_breaker = combine, tie_breaker
        self._name_index: bm25s.BM25 | None = None
        self._code_index: bm25s.BM25 | None = None
        self._size = 0
        self._indexed = False

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> BM25Retriever:
        unknown = set(params) - set(cls.DEFAULTS)
        if unknown:
            raise ValueError(f"unknown bm25 parameter(s): {', '.join(sorted(unknown))}")
        return cls(**{**cls.DEFAULTS, **params})

    def _new_index(self) -> bm25s.BM25:
        return bm25s.BM25(k1=self.k1, b=self.b, method=self.method)

    def index(self, codes: pd.DataFrame) -> None:
        """Index candidate functions (columns ``code`` and ``func_name``)."""
        names = [subtokens(name.rsplit(".", 1)[-1]) for name in codes["func_name"]]
        bodies = [subtokens(code) for code in codes["code"]]
        self._size = len(codes)
        # A field with no token at all (CoSQA has no function names) scores 0; bm25s cannot index it.
        self._name_index = self._fit(names)
        self._code_index = self._fit(bodies)
        self._indexed = True

    def _fit(self, documents: list[list[str]]) -> bm25s.BM25 | None:
        if not any(documents):
            return None
        index = self._new_index()
        index.index(documents, show_progress=False)
        return index

    def _field_scores(self, index: bm25s.BM25 | None, tokens: list[str]) -> np.ndarray:
        return np.zeros(self._size) if index is None else index.get_scores(tokens)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed function for ``query`` (same order as indexed)."""
        if not self._indexed:
            raise RuntimeError("index() must be called before scores()")
        tokens = subtokens(query)
        if not tokens:  # bm25s indexes tokens[0]; a query with no subtoken matches nothing
            return np.zeros(self._size, dtype=np.float64)
        name = self.name_boost * self._field_scores(self._name_index, tokens)
        code = self.code_boost * self._field_scores(self._code_index, tokens)
        if self.combine == "sum":
            return (name + code).astype(np.float64)
        best, other = np.maximum(name, code), np.minimum(name, code)
        return (best + self.tie_breaker * other).astype(np.float64)
