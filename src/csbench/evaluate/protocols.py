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

    def candidates(self, query: int) -> np.ndarray | None:
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

    def plan(self, ids: list[str]) -> Plan:
        raise NotImplementedError


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
        canonical = np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)
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
