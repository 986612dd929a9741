"""Score a test pool with a retriever under several protocols at once, streaming per query."""

from __future__ import annotations

import gzip
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from csbench.evaluate.metrics import rank_metrics, rank_of_correct
from csbench.evaluate.protocols import PROTOCOLS, Plan, codebase_plan


@dataclass
class ProtocolOutcome:
    protocol: str
    plan_note: str
    query_ids: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    n_candidates: list[int] = field(default_factory=list)
    top1: list[str] = field(default_factory=list)  # id of each query's best candidate
    run_lines: list[str] = field(default_factory=list)

    def metrics(self) -> dict:
        return rank_metrics(np.asarray(self.ranks, dtype=np.int64), PROTOCOLS.get(self.protocol).mrr_cutoff)


def top_k(scores: np.ndarray, correct: int, k: int) -> np.ndarray:
    """Indices of the k best candidates; among equal scores the correct answer comes last, so its
    position in the list equals its protocol rank (ties against the model)."""
    scores = np.where(np.isnan(scores), -np.inf, scores)
    is_correct = np.zeros(scores.size, dtype=np.int8)
    is_correct[correct] = 1
    k = min(k, scores.size)
    if k < scores.size:  # partial sort first, then order the (tie-extended) head exactly
        threshold = np.partition(-scores, k - 1)[k - 1]
        head = np.flatnonzero(-scores <= threshold)
    else:
        head = np.arange(scores.size)
    order = np.lexsort((head, is_correct[head], -scores[head]))
    return head[order][:k]


@dataclass
class PoolIndex:
    """The candidate pools of one run, indexed (encoded) once by the model: ``retrievers`` and
    ``pool_ids`` per pool kind (``test``, and ``codebase`` when a protocol searches the release's
    codebase). Pickled by ``csbench index`` and reused for the clean queries and every perturbed
    query set, so a model encodes each pool once whatever the number of query sets."""

    retrievers: dict[str, Any]
    pool_ids: dict[str, list[str]]
    index_s: float = 0.0

    def efficiency(self) -> dict[str, float]:
        """Encoding throughput: candidate codes indexed per second (all pools)."""
        n = sum(len(ids) for ids in self.pool_ids.values())
        return {"indexed_codes": n, "index_codes_per_s": round(n / self.index_s, 1) if self.index_s > 0 else 0.0}


def _plans(pool: pd.DataFrame, protocols: list[str], codebase: pd.DataFrame | None) -> dict[str, tuple[str, Plan]]:
    ids = pool["id"].tolist()
    if len(set(ids)) != len(ids):
        raise ValueError("test pool ids are not unique")
    with_codebase = codebase is not None and len(codebase) > 0
    plans: dict[str, tuple[str, Plan]] = {}
    for name in protocols:
        protocol = PROTOCOLS.get(name)
        if protocol.uses_codebase and with_codebase:
            plans[name] = ("codebase", codebase_plan(pool["url"].tolist(), codebase["url"].tolist()))
        else:
            plans[name] = ("test", protocol.plan(ids))
    return plans


def build_index(
    factory: Callable[[], Any], pool: pd.DataFrame, protocols: list[str], codebase: pd.DataFrame | None = None
) -> PoolIndex:
    """Index each pool the protocols need with a new retriever from ``factory`` (one encoding each)."""
    kinds = {kind for kind, _ in _plans(pool, protocols, codebase).values()}
    frames = {"test": pool, "codebase": codebase}
    t0 = time.perf_counter()
    retrievers, pool_ids = {}, {}
    for kind in [k for k in ("test", "codebase") if k in kinds]:
        retrievers[kind] = factory()
        retrievers[kind].index(frames[kind])
        pool_ids[kind] = frames[kind]["id"].tolist()
    return PoolIndex(retrievers, pool_ids, round(time.perf_counter() - t0, 3))


def evaluate_pool(
    retriever,
    pool: pd.DataFrame,
    protocols: list[str],
    run_depth: int,
    run_name: str,
    progress: bool = True,
    codebase: pd.DataFrame | None = None,
    codebase_retriever=None,
) -> tuple[dict[str, ProtocolOutcome], dict[str, float]]:
    """Rank the queries of the test split ``pool`` under each protocol.

    Test-pool protocols rank each query against test codes (its own code is the answer). When a
    non-empty ``codebase`` is given (with a second retriever for it), protocols that use the
    codebase rank against it instead, the answer being the codebase entry with the query's url.
    Each retriever indexes its pool once; each query is scored once per pool.
    """
    if codebase is not None and len(codebase) > 0 and codebase_retriever is None:
        raise ValueError("a codebase needs its own retriever")
    given = iter([retriever, codebase_retriever])  # build_index asks for test first, then codebase
    index = build_index(lambda: next(given), pool, protocols, codebase)
    return search(index, pool, protocols, run_depth, run_name, progress=progress, codebase=codebase)


def search(
    index: PoolIndex,
    pool: pd.DataFrame,
    protocols: list[str],
    run_depth: int,
    run_name: str,
    queries: list[str] | None = None,
    progress: bool = True,
    codebase: pd.DataFrame | None = None,
) -> tuple[dict[str, ProtocolOutcome], dict[str, float]]:
    """Rank each query of the test split ``pool`` (or ``queries``, one text per test record: a
    perturbed query set) against the indexed pools under each protocol."""
    ids = pool["id"].tolist()
    plans = _plans(pool, protocols, codebase)
    missing = {kind for kind, _ in plans.values()} - set(index.retrievers)
    if missing:
        raise ValueError(f"the index has no {', '.join(sorted(missing))} pool")
    outcomes = {name: ProtocolOutcome(name, plans[name][1].note) for name in protocols}
    pool_ids = index.pool_ids
    t_index = index.index_s
    queries = pool["query"].tolist() if queries is None else list(queries)
    if len(queries) != len(ids):
        raise ValueError(f"{len(queries)} queries for {len(ids)} test records")
    preparers = [getattr(index.retrievers[kind], "prepare_queries", None) for kind in {k for k, _ in plans.values()}]
    preparers = [prepare for prepare in preparers if prepare is not None]
    for prepare in preparers:
        prepare([])  # forget the vectors of an earlier query set: the latencies encode each query
    latencies = _query_latencies(index, plans, queries)
    t0 = time.perf_counter()
    for prepare in preparers:  # dense retrievers encode all queries at once, in batches
        prepare(queries)
    for i in tqdm(range(len(ids)), desc=f"search {run_name}", unit="query", disable=not progress, mininterval=2):
        scores: dict[str, np.ndarray] = {}
        for name, (kind, plan) in plans.items():
            candidates = plan.candidates(i)
            if candidates is None:
                continue
            if kind not in scores:
                scores[kind] = np.asarray(index.retrievers[kind].scores(queries[i]), dtype=np.float64)
            local = scores[kind][candidates]
            correct = int(np.flatnonzero(candidates == plan.answer(i))[0])
            outcome = outcomes[name]
            outcome.query_ids.append(ids[i])
            outcome.ranks.append(rank_of_correct(local, correct))
            outcome.n_candidates.append(int(candidates.size))
            names = pool_ids[kind]
            best = top_k(local, correct, max(run_depth, 1))
            outcome.top1.append(names[candidates[best[0]]])
            for pos, j in enumerate(best[:run_depth], start=1):
                outcome.run_lines.append(f"{ids[i]} Q0 {names[candidates[j]]} {pos} {local[j]:.6f} {run_name}")
    t_search = time.perf_counter() - t0
    timings = {"index_s": round(t_index, 3), "search_s": round(t_search, 3), **index.efficiency()}
    if latencies:
        p50, p95 = np.percentile(np.asarray(latencies) * 1000.0, [50, 95])
        timings |= {"query_latency_ms_p50": round(float(p50), 3), "query_latency_ms_p95": round(float(p95), 3)}
    return outcomes, timings


LATENCY_SAMPLE = 100  # queries timed one at a time for the latency figures


def _query_latencies(index: PoolIndex, plans: dict[str, tuple[str, Plan]], queries: list[str]) -> list[float]:
    """Seconds to answer one query alone (encode it, score the whole pool), for up to
    ``LATENCY_SAMPLE`` evenly spaced queries, before any batch encoding: what a user waits for."""
    kind = next((kind for kind, _ in plans.values()), None)
    if kind is None or not queries:
        return []
    retriever = index.retrievers[kind]
    step = max(1, len(queries) // LATENCY_SAMPLE)
    latencies = []
    for query in queries[::step][:LATENCY_SAMPLE]:
        started = time.perf_counter()
        retriever.scores(query)
        latencies.append(time.perf_counter() - started)
    return latencies


def trec_bytes(lines: list[str]) -> bytes:
    """A gzip-compressed TREC run file, byte-identical for identical content (mtime 0)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        handle.write(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    return buffer.getvalue()
