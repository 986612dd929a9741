"""Score a test pool with a retriever under several protocols at once, streaming per query."""

from __future__ import annotations

import gzip
import io
import time
from dataclasses import dataclass, field

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
    ids = pool["id"].tolist()
    if len(set(ids)) != len(ids):
        raise ValueError("test pool ids are not unique")
    with_codebase = codebase is not None and len(codebase) > 0
    if with_codebase and codebase_retriever is None:
        raise ValueError("a codebase needs its own retriever")
    plans: dict[str, tuple[str, Plan]] = {}
    for name in protocols:
        protocol = PROTOCOLS.get(name)
        if protocol.uses_codebase and with_codebase:
            plans[name] = ("codebase", codebase_plan(pool["url"].tolist(), codebase["url"].tolist()))
        else:
            plans[name] = ("test", protocol.plan(ids))
    outcomes = {name: ProtocolOutcome(name, plans[name][1].note) for name in protocols}
    retrievers = {"test": (retriever, pool)}
    if any(kind == "codebase" for kind, _ in plans.values()):
        retrievers["codebase"] = (codebase_retriever, codebase)
    needed = {kind for kind, _ in plans.values()}
    t0 = time.perf_counter()
    for kind in needed:
        model, frame = retrievers[kind]
        model.index(frame)
    t_index = time.perf_counter() - t0
    pool_ids = {kind: frame["id"].tolist() for kind, (_, frame) in retrievers.items()}
    queries = pool["query"].tolist()
    t0 = time.perf_counter()
    for i in tqdm(range(len(ids)), desc=f"search {run_name}", unit="query", disable=not progress, mininterval=2):
        scores: dict[str, np.ndarray] = {}
        for name, (kind, plan) in plans.items():
            candidates = plan.candidates(i)
            if candidates is None:
                continue
            if kind not in scores:
                scores[kind] = np.asarray(retrievers[kind][0].scores(queries[i]), dtype=np.float64)
            local = scores[kind][candidates]
            correct = int(np.flatnonzero(candidates == plan.answer(i))[0])
            outcome = outcomes[name]
            outcome.query_ids.append(ids[i])
            outcome.ranks.append(rank_of_correct(local, correct))
            outcome.n_candidates.append(int(candidates.size))
            names = pool_ids[kind]
            for pos, j in enumerate(top_k(local, correct, run_depth), start=1):
                outcome.run_lines.append(f"{ids[i]} Q0 {names[candidates[j]]} {pos} {local[j]:.6f} {run_name}")
    t_search = time.perf_counter() - t0
    return outcomes, {"index_s": round(t_index, 3), "search_s": round(t_search, 3)}


def trec_bytes(lines: list[str]) -> bytes:
    """A gzip-compressed TREC run file, byte-identical for identical content (mtime 0)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        handle.write(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    return buffer.getvalue()
