"""How a matching protocol decides its (query, code) pairs: which pairs (:class:`MatchingSetup`:
the release's labelled ones or drawn), their scores (:func:`pair_scores_of`) and the decision rule
(a cross-encoder's head, a threshold chosen on a validation split, GeCS's fixed cosine, a fixed or
a borrowed threshold: :func:`decide_pairs`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from csbench.evaluate.outcomes import MatchingOutcome
from csbench.evaluate.pool_index import PoolIndex
from csbench.evaluate.protocols import (
    PROTOCOLS,
    MatchingPairs,
    MatchRule,
    best_threshold,
    cosine_similarity,
    decide,
)


def has_valid(valid: pd.DataFrame | None) -> bool:
    """Whether a validation split can choose a matching threshold (2 records or more)."""
    return valid is not None and len(valid) >= 2


def _is_dense(retriever: Any) -> bool:
    """A retriever whose scores are inner products of vectors it exposes (the ranking engine's path)."""
    return getattr(retriever, "code_vectors", None) is not None and hasattr(retriever, "query_matrix")


MATCH_PAIRS = ("auto", "released", "drawn")  # evaluation.match_pairs


@dataclass(frozen=True)
class MatchingSetup:
    """Which pairs a matching protocol decides and how (``evaluation.match_pairs`` and
    ``evaluation.match_threshold``).

    ``released``: the release's labelled pairs (:data:`csbench.evaluate.protocols.RELEASED_COLUMNS`),
    None where it has none. ``pairs``: ``auto`` (the released pairs where the release has negative
    pairs, else one drawn negative per query), ``released`` (the released pairs, an error where
    there are none) or ``drawn``. ``rule``: the :class:`MatchRule`. ``borrowed``: for a borrowed
    threshold, the validation split it is chosen on and a retriever that indexed it.
    ``special_tokens``: the model tokenizer's sep / cls / pad / eos tokens (:func:`gecs_special_tokens`);
    released pairs whose texts hold one are not evaluated, as GeCS's scripts skip them."""

    released: pd.DataFrame | None = None
    pairs: str = "auto"
    rule: MatchRule = field(default_factory=MatchRule)
    borrowed: tuple[pd.DataFrame, Any] | None = None
    special_tokens: tuple[str, ...] = ()  # released pairs holding one are skipped, as eval_clf*.py does

    def __post_init__(self) -> None:
        if self.pairs not in MATCH_PAIRS:
            raise ValueError(f"evaluation.match_pairs: {self.pairs!r} is not one of {', '.join(MATCH_PAIRS)}")

    def pairs_of(self, protocol: Any, ids: list[str]) -> MatchingPairs:
        """The pairs ``protocol`` decides over the pool ``ids``, with a note where ``auto`` had to
        draw: the release gives no negative pair (e.g. a sample file of positive lines only)."""
        released = self.released
        negatives = released is not None and bool((released["label"] == 0).any())
        if self.pairs == "released" and released is None:
            raise ValueError("evaluation.match_pairs is 'released', but the dataset has no released matching pairs")
        if self.pairs == "released" or (self.pairs == "auto" and negatives):
            return protocol.pairs(ids, released)
        drawn = protocol.pairs(ids)
        if self.pairs == "auto" and released is not None:
            note = (
                f"the release's labelled pairs ({len(released)}) hold no negative pair: one negative per query "
                f"drawn instead (seed {protocol.seed})"
            )
            return MatchingPairs(drawn.queries, drawn.codes, drawn.labels, "drawn", note)
        return drawn


def gecs_special_tokens(retriever: Any) -> tuple[str, ...]:
    """The sep, cls, pad and eos tokens of the tokenizer behind ``retriever`` (a cross-encoder's or a
    Hugging Face bi-encoder's), which GeCS's ``eval_clf*.py`` refuses in a pair's texts; () for a
    model without one (BM25)."""
    holder = retriever.model if getattr(retriever, "decides_matches", False) else getattr(retriever, "encoder", None)
    tokenizer = getattr(holder, "tokenizer", None)
    if tokenizer is None:
        return ()
    found = (getattr(tokenizer, f"{kind}_token", None) for kind in ("sep", "cls", "pad", "eos"))
    return tuple(dict.fromkeys(str(token) for token in found if token))


NO_VALID_NOTE = (
    "no validation split to choose a bi-encoder's match threshold on: matching not evaluated "
    "(a cross-encoder's head needs none)"
)


def _rows_by_query(owners: np.ndarray, n: int) -> list[np.ndarray]:
    """For each query, the indices of the rows ``owners`` assigns to it."""
    order = np.argsort(owners, kind="stable")
    bounds = np.searchsorted(owners[order], np.arange(n + 1))
    return [order[bounds[q] : bounds[q + 1]] for q in range(n)]


def decide_pairs(
    name: str,
    index: PoolIndex,
    pairs: MatchingPairs,
    scores: np.ndarray,
    ids: list[str],
    valid: pd.DataFrame | None,
    queries: list[str] | None = None,
    setup: MatchingSetup | None = None,
) -> MatchingOutcome:
    """Match / no-match decisions of the test pairs: a cross-encoder's head, else ``setup.rule``
    (a threshold chosen on the validation split's drawn pairs, GeCS's fixed ``cosine > 0.5``, a
    fixed value, or one chosen on another dataset's validation split)."""
    protocol = PROTOCOLS.get(name)
    setup = setup or MatchingSetup()
    rule = setup.rule
    test = index.retrievers["test"]
    threshold: float | None = None
    valid_accuracy: float | None = None
    notes = [pairs.note] if pairs.note else []
    unparseable = None
    if getattr(test, "decides_matches", False):  # a cross-encoder's head or a chat model's answer decides
        described = getattr(test, "DECISION_RULE", "the cross-encoder's head (match logit above no-match)")
        decisions = np.where(np.isnan(scores), False, scores > 0)
        if getattr(test, "parses_answers", False):  # a chat model: NaN is an unparseable answer, counted
            unparseable = np.isnan(np.asarray(scores, dtype=np.float64))
    elif rule.uses_cosine:
        described = rule.describe()
        if _is_dense(test):  # GeCS thresholds the cosine of the two vectors, as torch computes it
            if queries is None:
                raise ValueError(f"{name}: the cosine rule needs the query texts")
            q_vectors = test.query_matrix(queries)
            scores = cosine_similarity(q_vectors[pairs.queries], test.code_vectors[pairs.codes])
        else:
            notes.append("not a vector model: the fixed threshold applies to its own score")
        threshold = float(rule.value)
        decisions = decide(scores, threshold, strict=True)
    elif rule.kind == "borrowed":
        if setup.borrowed is None:
            raise ValueError(f"{name}: the threshold is borrowed from {rule.dataset}; its validation split is missing")
        other, retriever = setup.borrowed
        other_pairs = protocol.pairs(other["id"].tolist())
        other_scores = pair_scores_of(retriever, other["query"].tolist(), other_pairs)
        threshold, valid_accuracy = best_threshold(other_scores, other_pairs.labels)
        described = rule.describe()
        decisions = decide(scores, threshold, strict=False)
    elif "valid" not in index.retrievers or not has_valid(valid):
        empty = np.zeros(0)
        return MatchingOutcome(
            name,
            "; ".join([*notes, NO_VALID_NOTE]),
            [],
            [],
            empty.astype(int),
            empty,
            None,
            None,
            empty.astype(bool),
            pairs.source,
            rule.describe(),
            0,
        )
    else:
        valid_pairs = protocol.pairs(valid["id"].tolist())
        valid_scores = pair_scores_of(index.retrievers["valid"], valid["query"].tolist(), valid_pairs)
        threshold, valid_accuracy = best_threshold(valid_scores, valid_pairs.labels)
        described = rule.describe()
        decisions = decide(scores, threshold, strict=False)
    test_ids = index.pool_ids["test"]
    return MatchingOutcome(
        name,
        "; ".join(notes),
        [ids[q] for q in pairs.queries],
        [test_ids[c] for c in pairs.codes],
        pairs.labels,
        np.asarray(scores, dtype=np.float64),
        threshold,
        valid_accuracy,
        decisions,
        pairs.source,
        described,
        pairs.n_queries,
        unparseable,
    )


def pair_scores_of(retriever: Any, queries: list[str], pairs: MatchingPairs) -> np.ndarray:
    """The score of each (query, code) pair: from the vectors of a dense retriever, else from one
    score row per query."""
    if _is_dense(retriever):
        q_vectors = retriever.query_matrix(queries)
        return np.einsum("ij,ij->i", q_vectors[pairs.queries], retriever.code_vectors[pairs.codes]).astype(np.float64)
    out = np.empty(pairs.labels.size, dtype=np.float64)
    for q, rows in enumerate(_rows_by_query(pairs.queries, len(queries))):
        if rows.size:
            out[rows] = np.asarray(retriever.scores(queries[q]), dtype=np.float64)[pairs.codes[rows]]
    return out
