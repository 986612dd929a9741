"""Query perturbation throughput: csbench's ``perturb`` against a plain per-query nlpaug loop.

    python benchmarks/bench_perturbations.py [--dataset cosqa|ruby] [--ratio 0.3] [--repeat 3]

Reads real queries from ../shared/data (CoSQA dev web queries or CodeSearchNet Ruby test
docstrings). For every perturbation it prints queries/s of

* ``perturb``: one call over all queries (one augmenter, a private generator reseeded per query);
* the naive loop a script would write: per query, create the nlpaug augmenter, seed the global
  ``random`` and ``numpy`` generators, call ``augment`` (``case`` / ``question``, which are not
  nlpaug's, call ``perturb`` on one query at a time);

and their ratio. The naive loop uses csbench's augmenter parameters, spacing-keeping tokenizer and
per-query seeds, so both must give the same texts; the script checks that too. One-off costs
(importing nlpaug, loading WordNet) are paid before timing and printed separately.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load(dataset: str) -> tuple[list[str], list[str]]:
    if dataset == "cosqa":
        records = json.loads((SHARED_DATA / "cosqa" / "cosqa-dev.json").read_text())
        return [r["doc"] for r in records], [r["idx"] for r in records]
    lines = (SHARED_DATA / "codesearchnet" / "ruby" / "test.jsonl").read_text().splitlines()
    return [json.loads(line)["docstring"] for line in lines], [f"ruby-test-{i}" for i in range(len(lines))]


def best_of(repeat: int, fn: Callable[[], list[str]]) -> tuple[float, list[str]]:
    best, out = float("inf"), []
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def naive_loop(name: str, queries: list[str], ids: list[str], ratio: float, seed: int) -> list[str]:
    from csbench.perturbations import NLPAUG_PARAMS, make_augmenter, perturb, query_seed
    from csbench.perturbations.tokens import SpacedTokenizer

    out = []
    for query, query_id in zip(queries, ids, strict=True):
        if name not in NLPAUG_PARAMS:
            out += perturb([query], [query_id], name, ratio, seed)
            continue
        augmenter = make_augmenter(name, ratio, SpacedTokenizer())
        query_seed_ = query_seed(seed, name, ratio, query_id)
        random.seed(query_seed_)
        np.random.seed(query_seed_ % 2**32)
        out.append(augmenter.augment(query)[0] if query.strip() else query)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="cosqa", choices=["cosqa", "ruby"])
    parser.add_argument("--ratio", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    if not SHARED_DATA.is_dir():
        sys.exit(f"no shared data at {SHARED_DATA}")
    queries, ids = load(args.dataset)

    started = time.perf_counter()
    from csbench.perturbations import PERTURBATIONS, perturb

    perturb(queries[:1], ids[:1], "typo", args.ratio, 0)
    char_import = time.perf_counter() - started
    started = time.perf_counter()
    perturb(queries[:1], ids[:1], "synonym", args.ratio, 0)
    word_import = time.perf_counter() - started
    print(
        f"{args.dataset}: {len(queries)} queries, ratio {args.ratio}, seed {args.seed}; one-off: nlpaug char "
        f"{char_import:.1f} s, nlpaug word + WordNet {word_import:.1f} s"
    )
    print(f"  {'perturbation':12} {'perturb q/s':>12} {'naive q/s':>10} {'speed-up':>9}  identical")
    for name in PERTURBATIONS:
        fast, ours = best_of(args.repeat, lambda n=name: perturb(queries, ids, n, args.ratio, args.seed))
        slow, theirs = best_of(args.repeat, lambda n=name: naive_loop(n, queries, ids, args.ratio, args.seed))
        same = all(a.strip() == b.strip() for a, b in zip(ours, theirs, strict=True))  # nlpaug strips the query
        n = len(queries)
        print(f"  {name:12} {n / fast:12.0f} {n / slow:10.0f} {slow / fast:8.1f}x  {'yes' if same else 'NO'}")
        assert same, f"{name}: perturb and the naive loop disagree"


if __name__ == "__main__":
    main()
