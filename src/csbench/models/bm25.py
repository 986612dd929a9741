"""BM25 standing in for CodeSearchNet's ElasticSearch baseline.

ElasticSearch indexed two fields per function, the function name split into subtokens and the
whole function text, "with the default ElasticSearch tokenizer" (the paper, section 4.2), and was
queried with its defaults: a ``multi_match`` query of type ``best_fields`` (score = best field score +
``tie_breaker`` × the others, tie_breaker 0) over Lucene's BM25 (k1 = 1.2, b = 0.75). We do the same
with two bm25s indexes. The paper's code is not public (its repository has no ElasticSearch script),
so the analysis follows what it states and ElasticSearch's defaults:

``analyzer: standard`` (default)
    ElasticSearch's ``standard`` analyzer on the whole-function field and on the query (the search
    analyzer of a field is its index analyzer): :func:`csbench.code.tokens.standard_tokens`, Lucene's
    StandardTokenizer + lower-casing, checked against Lucene 8.7 itself. The name field holds the
    name's subtokens (``getFileName`` -> ``get file name``), as CodeSearchNet indexed it. Each word of
    a query is lower-cased and UAX #29 word boundaries do not depend on case, so changing a query's
    case changes nothing (COBE's ``case`` perturbation leaves the ranking as it is). A genuine
    identifier in a query stays one word (``getFileName`` -> ``getfilename``) and matches the same
    identifier in the code, as in ElasticSearch; ``get file name`` in a query matches the name field.
``analyzer: subtokens``
    Code (both fields) split into lower-cased subtokens (snake_case, camelCase, punctuation), a common
    variant that lets prose words match parts of identifiers. The query is lower-cased *before* it is
    split, so case changes still change nothing; the price is that a camelCase identifier in a query
    stays one word and matches no subtoken of the code (snake_case ones are split).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import bm25s
import numpy as np
import pandas as pd

from csbench.code.tokens import standard_tokens, subtokens

if TYPE_CHECKING:
    from csbench.models.integrity import VerifiedDir

ANALYZERS = ("standard", "subtokens")


class BM25Retriever:
    INDEX_TYPE: ClassVar[str] = "bm25"
    FIELDS: ClassVar[tuple[str, ...]] = ("name", "code")
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "k1": 1.2,
        "b": 0.75,
        "method": "lucene",
        "name_boost": 1.0,
        "code_boost": 1.0,
        "combine": "best_fields",
        "tie_breaker": 0.0,
        "analyzer": "standard",
    }
    # ``scores`` may run on several threads at once (it only reads the index; numpy releases the GIL):
    # the evaluation scores and ranks queries on its threads (csbench.evaluate.runner._search_rows)
    concurrent_scores: ClassVar[bool] = True

    def __init__(
        self,
        k1: float = 1.2,
        b: float = 0.75,
        method: str = "lucene",
        name_boost: float = 1.0,
        code_boost: float = 1.0,
        combine: str = "best_fields",
        tie_breaker: float = 0.0,
        analyzer: str = "standard",
    ) -> None:
        if combine not in ("best_fields", "sum"):
            raise ValueError(f"combine must be 'best_fields' or 'sum', not {combine!r}")
        if analyzer not in ANALYZERS:
            raise ValueError(f"analyzer must be one of {', '.join(ANALYZERS)}, not {analyzer!r}")
        self.analyzer = analyzer
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
        code_tokens = standard_tokens if self.analyzer == "standard" else subtokens
        bodies = [code_tokens(code) for code in codes["code"]]
        self._size = len(codes)
        # A field with no token at all (CoSQA has no function names) scores 0; bm25s cannot index it.
        self._name_index = self._fit(names)
        self._code_index = self._fit(bodies)
        self._indexed = True

    def _fit(self, documents: list[list[str]]) -> bm25s.BM25 | None:
        if not any(documents):
            return None
        # the vocabulary in order of first appearance: bm25s numbers tokens from a set, whose order changes
        # with each process's string hashing, so the saved index's arrays did (its scores did not)
        vocabulary: dict[str, int] = {}
        ids = [[vocabulary.setdefault(token, len(vocabulary)) for token in document] for document in documents]
        index = self._new_index()
        index.index((ids, vocabulary), show_progress=False)
        return index

    def _field_scores(self, index: bm25s.BM25 | None, tokens: list[str]) -> np.ndarray:
        return np.zeros(self._size) if index is None else index.get_scores(tokens)

    def query_tokens(self, query: str) -> list[str]:
        """The query's terms, whatever its case (module docstring): the standard analyzer's segmentation
        does not depend on case and it lower-cases each word; the subtoken split does, so the query is
        lower-cased before it."""
        return standard_tokens(query) if self.analyzer == "standard" else subtokens(query.lower())

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed function for ``query`` (same order as indexed)."""
        if not self._indexed:
            raise RuntimeError("index() must be called before scores()")
        tokens = self.query_tokens(query)
        if not tokens:  # bm25s indexes tokens[0]; a query with no subtoken matches nothing
            return np.zeros(self._size, dtype=np.float64)
        name = self.name_boost * self._field_scores(self._name_index, tokens)
        code = self.code_boost * self._field_scores(self._code_index, tokens)
        if self.combine == "sum":
            return (name + code).astype(np.float64)
        best, other = np.maximum(name, code), np.minimum(name, code)
        return (best + self.tie_breaker * other).astype(np.float64)

    # -- the run's index (csbench.evaluate.runner.PoolIndex.save) --------------------------------
    def params(self) -> dict[str, Any]:
        """The parameters this retriever was built with (``from_params`` rebuilds it from them)."""
        return {key: getattr(self, key) for key in self.DEFAULTS}

    def index_state(self, directory: Path, name: str) -> dict[str, Any]:
        """Save each field's bm25s index with bm25s's own format (``.npy`` arrays written without
        pickle, vocabulary and parameters in JSON) to ``directory/<name>.<field>/``; return the rest."""
        if not self._indexed:
            raise RuntimeError("index() must be called before the index is saved")
        fields: dict[str, str | None] = {}
        for field, index in zip(self.FIELDS, (self._name_index, self._code_index), strict=True):
            if index is None:  # a field without any token (module docstring): it scores 0
                fields[field] = None
                continue
            folder = f"{name}.{field}"
            index.save(directory / folder, show_progress=False)
            fields[field] = folder
        return {"type": self.INDEX_TYPE, "params": self.params(), "size": self._size, "fields": fields}

    @classmethod
    def from_index_state(cls, state: dict[str, Any], files: VerifiedDir, loader: object = None) -> BM25Retriever:
        """The retriever :meth:`index_state` saved, from the index's verified ``files`` (bm25s reads its
        arrays with ``allow_pickle=False``); ``loader`` is unused (no model)."""
        retriever = cls.from_params(state["params"])
        loaded = []
        for field in cls.FIELDS:
            saved = state["fields"][field]
            loaded.append(None if saved is None else bm25s.BM25.load(files.path(saved), allow_pickle=False, mmap=False))
        retriever._name_index, retriever._code_index = loaded
        retriever._size = int(state["size"])
        retriever._indexed = True
        return retriever
