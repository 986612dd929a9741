"""BM25's query-by-query search (``full-corpus``, ``runner._search_rows``) on 1 thread against N.

    python benchmarks/bench_bm25_threads.py [--copies 2] [--threads 2] [--repeat 3] [--protocols full-corpus]

The growth benchmark's ``evaluate bm25`` ran on one thread (438.6 s at 1 M functions, a test pool of
107 k: docs/performance.md): each query's scores over the pool (bm25s) and its rank in CodeXGLUE's
argsort order, query after query. They now run on the evaluation's threads (``ranking.work_threads``:
OMP_NUM_THREADS, as a snakemake job's threads set it), the records taken in query order. The pool: the
running Python's standard library (every documented function csbench's local corpus keeps, about 4,500)
``--copies`` times with distinct ids (the repeats tie, as the growth corpus's do), each function's
docstring its query. Each setting runs in a fresh process, alternating, ``--repeat`` times; printed: the
median wall time of the search (``evaluate_pool`` after the index is built), the ratio, and whether
ranks, top lists, run lines and notes are equal on every run. Read the ratio with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

RUN = """
import hashlib, json, sys, time
import pandas as pd
from csbench.evaluate.runner import evaluate_pool
from csbench.models.bm25 import BM25Retriever
pool = pd.read_parquet(sys.argv[1])
protocols = sys.argv[2].split(",")
started = time.perf_counter()
outcomes, _ = evaluate_pool(BM25Retriever(), pool, protocols, 10, "bench", progress=False)
seconds = time.perf_counter() - started
record = {n: [o.query_ids, o.ranks, o.top1, list(o.run_lines), o.plan_note] for n, o in sorted(outcomes.items())}
print(json.dumps({"seconds": seconds, "digest": hashlib.sha256(json.dumps(record).encode()).hexdigest()}))
"""


def stdlib_pool(copies: int) -> pd.DataFrame:
    """The standard library's documented functions, ``copies`` times with distinct ids."""
    from csbench.code.extract import FilterSettings
    from csbench.datasets import local

    options = {"language": "python", "source": local.STDLIB, "exclude_dirs": ["site-packages", "test", "tests"]}
    frame, _ = local.build_local_corpus("stdlib", options, FilterSettings(), local.SplitSettings(0, 0, 100), False)
    frame = frame[["id", "query", "code", "func_name", "language"]].reset_index(drop=True)
    parts = [frame.assign(id=frame["id"] + f"#{k}") for k in range(copies)]
    return pd.concat(parts, ignore_index=True)


def run(pool: Path, protocols: str, threads: int) -> dict:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(pool), protocols], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=2, help="the standard library's functions this many times")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--protocols", default="full-corpus", help="comma-separated")
    args = parser.parse_args()
    pool = stdlib_pool(args.copies)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{len(pool)} functions ({args.copies} copies), {args.protocols}; load average {load}", flush=True)
    times: dict[int, list[float]] = {1: [], args.threads: []}
    digests: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_bm25_") as tmp:
        path = Path(tmp) / "pool.parquet"
        pool.to_parquet(path, index=False)
        for repeat in range(args.repeat):
            for threads in (1, args.threads) if repeat % 2 == 0 else (args.threads, 1):
                out = run(path, args.protocols, threads)
                times[threads].append(out["seconds"])
                digests.append(out["digest"])
                print(f"  {threads} thread(s): {out['seconds']:.2f} s", flush=True)
    one, many = statistics.median(times[1]), statistics.median(times[args.threads])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"1 thread {one:.2f} s, {args.threads} threads {many:.2f} s (medians of {args.repeat}): {one / many:.2f}x; "
        f"equal records on every run: {len(set(digests)) == 1}; load average {load}"
    )


if __name__ == "__main__":
    main()
