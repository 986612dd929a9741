"""trec_eval's order of one ranked list (``csbench.evaluate.qrels.trec_order``, which every graded query of a
search goes through) against the whole-list lexsort it replaced.

    python benchmarks/bench_trec_order.py [--docs 1000] [--queries 300] [--repeat 5]

trec_order sorts by score (float32, descending, NaN as -inf) and breaks ties by document id descending.
The former way always ranked every id by a numpy string argsort and ran one lexsort of (score, id
rank); now the scores are sorted alone first, and the ids are read (the former way) only when two
scores are equal. Timed on ``--queries``
lists of ``--docs`` real-looking ids (paths of the growth corpus's shape) for three kinds of scores:
all distinct (a dense model), runs of 23 equal scores (BM25 on a corpus of repeated functions, as the
growth corpus is) and all equal. Printed per kind: microseconds a list (CPU time, best of
``--repeat``), the ratio former / now, and whether the two orders are equal on every list.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from csbench.evaluate.qrels import trec_order


def trec_order_by_lexsort(doc_ids: list[str], scores: np.ndarray) -> np.ndarray:
    """The former trec_order: every id ranked by a numpy string argsort, one lexsort of (score, -id rank)."""
    if not doc_ids:
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        single = np.asarray(scores, dtype=np.float64).astype(np.float32).astype(np.float64)
    id_rank = np.empty(len(doc_ids), dtype=np.int64)
    id_rank[np.argsort(np.asarray(doc_ids, dtype=str), kind="stable")] = np.arange(len(doc_ids))
    key = np.where(np.isnan(single), np.inf, -single)
    return np.lexsort((-id_rank, key))


def lists(kind: str, n_docs: int, n_queries: int, rng: np.random.Generator) -> list[tuple[list[str], np.ndarray]]:
    """``n_queries`` (ids, scores) lists of ``n_docs`` documents with scores of ``kind``."""
    out = []
    for _ in range(n_queries):
        numbers = rng.choice(10**6, size=n_docs, replace=False)
        ids = [f"growth-1000k/copy_{n % 23}/lib/python3.11/module_{n // 23}.py::function_{n}" for n in numbers]
        if kind == "distinct":
            scores = rng.random(n_docs)
        elif kind == "runs of 23":
            scores = np.repeat(rng.random(-(-n_docs // 23)), 23)[:n_docs]
        else:
            scores = np.ones(n_docs)
        out.append((ids, scores))
    return out


def best_cpu(function, data, repeat: int) -> float:
    """The fastest of ``repeat`` CPU times of ``function`` over every list of ``data``, per list (us)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for ids, scores in data:
            function(ids, scores)
        best = min(best, time.process_time() - started)
    return best / len(data) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="documents a list (a graded run's depth)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {args.queries} lists of {args.docs} documents; CPU time, best of {args.repeat}")
    print(f"{'scores':<12} {'former us':>10} {'now us':>10} {'former/now':>11}  same order")
    for kind in ("distinct", "runs of 23", "all equal"):
        data = lists(kind, args.docs, args.queries, rng)
        same = all(np.array_equal(trec_order(i, s), trec_order_by_lexsort(i, s)) for i, s in data)
        former = best_cpu(trec_order_by_lexsort, data, args.repeat)
        now = best_cpu(trec_order, data, args.repeat)
        print(f"{kind:<12} {former:>10.0f} {now:>10.0f} {former / now:>10.2f}x  {'yes' if same else 'NO'}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
