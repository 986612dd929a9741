"""Robustness evaluation: code encodings and time over a full COBE grid, against re-encoding per query set.

    python benchmarks/bench_robustness.py [--dataset python-packages] [--attack no_comment] [--queries 300]

The grid is 7 perturbations x 11 noise ratios (0.0 to 0.5; ``question`` has no ratio, so it is
evaluated once, and ratio 0 is the same clean query set for all): 1 + 6 x 10 + 1 = 62 distinct query
sets cover the 77 grid cells of COBE. Perturbed sets come from ``csbench.perturbations.perturb`` on the test queries of
``data/attacked/<dataset>/<attack>/test.parquet`` (written by the pipeline; ``--queries`` keeps the
first N records and their pool). Two ways to score them with BM25:

* csbench: encode (index) the pool once with ``build_index`` -- what the ``index`` rule does once per
  model checkpoint and pool -- and ``search`` every query set against it (the ``robust`` rule);
* the obvious alternative: ``evaluate_pool`` per query set, which encodes the pool every time.

Printed: encoding calls of each (csbench must make one per pool), time, and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from csbench.evaluate.runner import build_index, evaluate_pool, search
from csbench.models.bm25 import BM25Retriever
from csbench.perturbations import DEFAULT_RATIOS, PERTURBATIONS, QUESTION_RATIO, perturb

ROOT = Path(__file__).resolve().parents[1]


class Counting(BM25Retriever):
    """BM25 that counts how often a pool is encoded."""

    calls = 0

    def index(self, codes: pd.DataFrame) -> None:
        Counting.calls += 1
        super().index(codes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="python-packages")
    parser.add_argument("--attack", default="no_comment")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--protocol", default="full-corpus")
    args = parser.parse_args()
    test_file = ROOT / "data" / "attacked" / args.dataset / args.attack / "test.parquet"
    if not test_file.is_file():
        print(f"{test_file} is missing: run the pipeline (make run) first", file=sys.stderr)
        return 2
    pool = pd.read_parquet(test_file).head(args.queries).reset_index(drop=True)
    queries, ids = pool["query"].tolist(), pool["id"].tolist()
    grid: list[tuple[str, float]] = [("clean", 0.0)]  # ratio 0: the same clean set for every perturbation
    for name in PERTURBATIONS.names():
        ratios = [r for r in DEFAULT_RATIOS if r > 0] if PERTURBATIONS.get(name).has_ratio else [QUESTION_RATIO]
        grid += [(name, r) for r in ratios]
    started = time.perf_counter()
    sets = {(n, r): queries if n == "clean" else perturb(queries, ids, n, r, seed=0) for n, r in grid}
    perturb_s = time.perf_counter() - started
    print(f"{args.dataset}/{args.attack}: {len(pool)} test records, {len(grid)} query sets "
          f"({len(PERTURBATIONS.names())} perturbations x {len(DEFAULT_RATIOS)} ratios, clean once, question once); "
          f"perturbed in {perturb_s:.1f} s")  # fmt: skip

    Counting.calls = 0
    started = time.perf_counter()
    index = build_index(Counting, pool, [args.protocol])
    ours = {
        key: search(index, pool, [args.protocol], 1, "bench", queries=q, progress=False)[0] for key, q in sets.items()
    }
    ours_s, ours_calls = time.perf_counter() - started, Counting.calls

    Counting.calls = 0
    started = time.perf_counter()
    naive = {
        key: evaluate_pool(Counting(), pool.assign(query=q), [args.protocol], 1, "bench", progress=False)[0]
        for key, q in sets.items()
    }
    naive_s, naive_calls = time.perf_counter() - started, Counting.calls

    same = all(ours[key][args.protocol].ranks == naive[key][args.protocol].ranks for key in sets)
    print(f"  encoding calls  csbench {ours_calls} (pools: {len(index.retrievers)})   per query set: {naive_calls}")
    print(
        f"  time            csbench {ours_s:6.1f} s   per query set: {naive_s:6.1f} s   ratio {naive_s / ours_s:4.1f}x"
    )
    print(f"  identical ranks: {same}")
    return 0 if same and ours_calls == len(index.retrievers) else 1


if __name__ == "__main__":
    raise SystemExit(main())
