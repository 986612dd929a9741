"""Retrieval protocols (SPEC "Retrieval protocols"): which candidates each query is ranked against.

A protocol is a plan over the test pool: for each query (a record of the pool, whose own code is
the correct answer) the pool indices of its candidates, or None when it is not evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from csbench.registry import Registry


@dataclass(frozen=True)
class Plan:
    """Candidates per query: ``groups[g]`` is an index array of the pool; ``group_of[i]`` is the
    group of query i (-1: query i is not evaluated under this protocol)."""

    groups: list[np.ndarray]
    group_of: np.ndarray
    note: str = ""
    answers: np.ndarray | None = None  # pool index of each query's correct code; None: the query's own
    # one candidate set per query (row i: query i's candidates), instead of groups shared by queries
    per_query: np.ndarray | None = None

    def candidates(self, query: int) -> np.ndarray | None:
        if self.per_query is not None:
            return self.per_query[query]
        group = self.group_of[query]
        return None if group < 0 else self.groups[group]

    def answer(self, query: int) -> int:
        return query if self.answers is None else int(self.answers[query])


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    mrr_cutoff: int | None  # reciprocal rank is 0 beyond this rank
    uses_codebase: bool = False  # ranks against the release's codebase when it has one
    kind: str = "ranking"  # "ranking": a rank per query; "matching": a match / no-match decision per pair

    def plan(self, ids: list[str]) -> Plan:
        raise NotImplementedError


def canonical_order(ids: list[str]) -> np.ndarray:
    """Pool indices sorted by id: protocols that sample draw in this order, so the order the test
    pool comes in changes nothing."""
    return np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)


@dataclass(frozen=True)
class FullCorpus(Protocol):
    def plan(self, ids: list[str]) -> Plan:
        everything = np.arange(len(ids))
        return Plan([everything], np.zeros(len(ids), dtype=np.int64))


@dataclass(frozen=True)
class Chunked(Protocol):
    """CodeSearchNet: order the pool canonically (by id, so the input order does not matter),
    shuffle with ``seed``, cut into chunks of ``size`` and drop the last partial chunk."""

    size: int = 1000
    seed: int = 0

    def plan(self, ids: list[str]) -> Plan:
        canonical = canonical_order(ids)
        shuffled = canonical[np.random.default_rng(self.seed).permutation(len(ids))]
        n_chunks = len(ids) // self.size
        groups = [shuffled[c * self.size : (c + 1) * self.size] for c in range(n_chunks)]
        group_of = np.full(len(ids), -1, dtype=np.int64)
        for g, members in enumerate(groups):
            group_of[members] = g
        note = ""
        if n_chunks == 0:
            note = f"test pool has {len(ids)} < {self.size} records: no full chunk, nothing evaluated"
        elif len(ids) % self.size:
            note = f"{len(ids) % self.size} records in the last partial chunk are not evaluated"
        return Plan(groups, group_of, note)


def sample_others(rng: np.random.Generator, n: int, own: int, k: int) -> np.ndarray:
    """``k`` distinct indices of ``range(n)`` other than ``own``, uniformly without replacement."""
    drawn = rng.choice(n - 1, size=k, replace=False)
    return drawn + (drawn >= own)  # skip over ``own``


@dataclass(frozen=True)
class SampledDistractors(Protocol):
    """GeCS (section 4.2): each query against its correct code and ``distractors`` codes sampled
    uniformly at random from the rest of the test set, independently per query (seed ``seed``).

    Queries draw in canonical (id) order from one generator, so the candidates do not depend on the
    order of the pool. The correct code comes first in each row; ties count against the model, so
    its position does not matter. A pool smaller than ``distractors + 1`` gives every query all the
    other codes (noted)."""

    distractors: int = 99
    seed: int = 42

    def plan(self, ids: list[str]) -> Plan:
        n = len(ids)
        k = min(self.distractors, max(n - 1, 0))
        rng = np.random.default_rng(self.seed)
        rows = np.empty((n, k + 1), dtype=np.int64)
        canonical = canonical_order(ids)
        for rank, query in enumerate(canonical):  # draws are ranks in id order, mapped to the pool
            rows[query, 0] = query
            rows[query, 1:] = canonical[sample_others(rng, n, rank, k)]
        note = ""
        if k < self.distractors:
            note = f"test pool has {n} records: {k} distractors per query instead of {self.distractors}"
        return Plan([], np.arange(n, dtype=np.int64), note, per_query=rows)


@dataclass(frozen=True)
class MatchingPairs:
    """The pairs of a matching protocol: (query index, code index, label 1 = match) of a pool."""

    queries: np.ndarray
    codes: np.ndarray
    labels: np.ndarray


@dataclass(frozen=True)
class Matching(Protocol):
    """GeCS's matching task: every record gives one positive pair (its query, its code) and one
    negative (its query, a code drawn uniformly from the other records), so the classes are
    balanced 1:1; the score is accuracy. A bi-encoder decides by a similarity threshold chosen on
    the validation split (the one maximising accuracy there); a cross-encoder uses its head."""

    seed: int = 42

    def pairs(self, ids: list[str]) -> MatchingPairs:
        n = len(ids)
        if n < 2:
            raise ValueError(f"matching needs at least 2 records, the pool has {n}")
        rng = np.random.default_rng(self.seed)
        negatives = np.empty(n, dtype=np.int64)
        canonical = canonical_order(ids)
        for rank, query in enumerate(canonical):  # draws are ranks in id order, mapped to the pool
            negatives[query] = canonical[sample_others(rng, n, rank, 1)[0]]
        own = np.arange(n, dtype=np.int64)
        return MatchingPairs(
            np.concatenate([own, own]),
            np.concatenate([own, negatives]),
            np.concatenate([np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)]),
        )

    def plan(self, ids: list[str]) -> Plan:
        raise TypeError("matching is not a ranking protocol: use pairs()")


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The decision threshold (match when score >= threshold) with the highest accuracy on
    (``scores``, ``labels``), and that accuracy. Candidates are the midpoints between consecutive
    distinct scores plus one below and one above all; among equally accurate thresholds the
    lowest wins, so the choice is deterministic."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    if scores.size == 0:
        raise ValueError("no validation pairs to choose a threshold on")
    distinct = np.unique(scores[~np.isnan(scores)])
    if distinct.size == 0:
        raise ValueError("every validation score is NaN")
    inner = (distinct[:-1] + distinct[1:]) / 2.0
    candidates = np.concatenate([[distinct[0] - 1.0], inner, [distinct[-1] + 1.0]])
    # accuracy of each candidate: positives at or above it plus negatives below it (NaN never matches)
    order = np.sort(np.where(np.isnan(scores), -np.inf, scores)[labels])
    negatives = np.sort(np.where(np.isnan(scores), -np.inf, scores)[~labels])
    positives_above = order.size - np.searchsorted(order, candidates, side="left")
    negatives_below = np.searchsorted(negatives, candidates, side="left")
    accuracy = (positives_above + negatives_below) / scores.size
    best = int(np.argmax(accuracy))
    return float(candidates[best]), float(accuracy[best])


def codebase_plan(query_urls: list[str], pool_urls: list[str]) -> Plan:
    """Every query against the whole codebase; its correct code is the pool entry with its url
    (how CodeXGLUE's evaluators match). Queries whose url is not in the pool are not evaluated."""
    first: dict[str, int] = {}
    for index, url in enumerate(pool_urls):
        first.setdefault(url, index)
    answers = np.array([first.get(url, -1) for url in query_urls], dtype=np.int64)
    group_of = np.where(answers >= 0, 0, -1).astype(np.int64)
    missing = int((answers < 0).sum())
    repeated = len(pool_urls) - len(first)
    notes = []
    if missing:
        notes.append(f"{missing} queries whose url is not in the codebase are not evaluated")
    if repeated:
        notes.append(f"{repeated} codebase entries repeat a url (the first one is the answer)")
    return Plan([np.arange(len(pool_urls))], group_of, "; ".join(notes), answers)


PROTOCOLS: Registry[Protocol] = Registry("protocol")
PROTOCOLS.register(
    "full-corpus",
    FullCorpus(
        "full-corpus",
        "each query against the whole test codebase (the release's codebase if it has one); MRR cut at 1,000",
        1000,
        uses_codebase=True,
    ),
)
PROTOCOLS.register(
    "csn-1000",
    Chunked(
        "csn-1000",
        "CodeSearchNet: shuffled (seed 0) chunks of 1,000, last partial chunk dropped; ties against the model",
        None,
    ),
)
PROTOCOLS.register(
    "advtest",
    FullCorpus(
        "advtest",
        "CodeXGLUE AdvTest: each query against the whole test set as codebase; MRR cut at 100",
        100,
    ),
)
PROTOCOLS.register(
    "gecs-100",
    SampledDistractors(
        "gecs-100",
        "GeCS: the correct code and 99 distractors drawn uniformly from the test set (seed 42), per query",
        None,
    ),
)
PROTOCOLS.register(
    "matching",
    Matching(
        "matching",
        "GeCS: balanced 1:1 match / no-match pairs (one drawn negative per query, seed 42); accuracy, a "
        "bi-encoder's threshold chosen on the validation split",
        None,
        kind="matching",
    ),
)
