"""Rank-based retrieval metrics. A rank is 1-based; ties count against the model upstream."""

from __future__ import annotations

import math

import numpy as np

RECALL_CUTOFFS = (1, 5, 10)
NDCG_CUTOFF = 10


def reciprocal_ranks(ranks: np.ndarray, cutoff: int | None = None) -> np.ndarray:
    """1 / rank, and 0 where the rank is beyond ``cutoff`` (MRR@cutoff)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    rr = 1.0 / ranks
    if cutoff is not None:
        rr[ranks > cutoff] = 0.0
    return rr


def ndcg_at(ranks: np.ndarray, k: int = NDCG_CUTOFF) -> np.ndarray:
    """Per-query nDCG@k with one relevant code and binary relevance: 1 / log2(rank + 1), 0 beyond rank k.

    The ideal DCG is 1 (the relevant code at rank 1), so the DCG is already normalised."""
    ranks = np.asarray(ranks, dtype=np.float64)
    gains = 1.0 / np.log2(ranks + 1.0)
    gains[ranks > k] = 0.0
    return gains


def rank_metrics(ranks: np.ndarray, cutoff: int | None = None) -> dict[str, float | int | None]:
    """MRR (cut at ``cutoff`` if given), R@1/5/10, nDCG@10, mean and median rank over queries."""
    ranks = np.asarray(ranks)
    if ranks.size == 0:
        metrics: dict[str, float | int | None] = {"mrr": None}
        metrics.update({f"r@{k}": None for k in RECALL_CUTOFFS})
        metrics.update({f"ndcg@{NDCG_CUTOFF}": None, "mean_rank": None, "median_rank": None, "n_queries": 0})
        return metrics
    metrics = {"mrr": float(reciprocal_ranks(ranks, cutoff).mean())}
    metrics.update({f"r@{k}": float((ranks <= k).mean()) for k in RECALL_CUTOFFS})
    # nDCG keeps its own cut at 10 whatever the protocol's MRR cutoff (SPEC "Retrieval protocols")
    metrics[f"ndcg@{NDCG_CUTOFF}"] = float(ndcg_at(ranks).mean())
    metrics["mean_rank"] = float(ranks.mean())
    metrics["median_rank"] = float(np.median(ranks))
    metrics["n_queries"] = int(ranks.size)
    return metrics


def rank_of_correct(scores: np.ndarray, correct: int) -> int:
    """Number of candidates scoring at least as high as the correct one (ties against the model).

    NaN scores are treated as the worst possible score; a NaN on the correct answer ranks it last.
    """
    target = scores[correct]
    if math.isnan(target):
        return int(scores.size)
    return int(np.count_nonzero(scores >= target))
