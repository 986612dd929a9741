"""CodeXGLUE's argsort order (``full-corpus``: ``ranking.rank_dense_argsort``) on 1 thread against N.

    python benchmarks/bench_argsort_threads.py [--codes 20000] [--dim 32] [--copies 4] [--threads 2]
                                               [--depth 10] [--repeat 3]

The growth benchmark's evaluate phases spent their time here at 1 M functions, on one thread
(docs/performance.md). Each score block's rows are now ranked in parts over the threads
(``_rank_rows_argsort_parts``). The vectors: ``--codes`` random small-integer vectors of ``--dim``
(many exact ties, as a corpus of repeated functions has), every distinct vector ``--copies`` times, one
query per code (its code plus noise), run depth ``--depth``. Each setting runs in a fresh process
with OMP_NUM_THREADS (what ``work_threads`` reads, as a snakemake job's threads set it), alternating,
``--repeat`` times: printed, the median wall time of each, the ratio, and whether ranks, lists, scores
and tie flags are bitwise equal. The load average is printed: read the ratio, not the rates.
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

import numpy as np

RUN = """
import hashlib, json, sys, time, numpy as np
from csbench.evaluate.ranking import rank_dense_argsort
folder, depth = sys.argv[1], int(sys.argv[2])
queries, codes = np.load(folder + "/queries.npy"), np.load(folder + "/codes.npy")
keys = np.arange(codes.shape[0])
started = time.perf_counter()
result = rank_dense_argsort(queries, codes, keys, keys, depth)
seconds = time.perf_counter() - started
digest = [hashlib.sha256(a.tobytes()).hexdigest() for a in (result.ranks, result.top, result.top_scores, result.tied)]
print(json.dumps({"seconds": seconds, "digest": digest, "tied": int(result.tied.sum())}))
"""


def run(folder: Path, depth: int, threads: int) -> dict:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(folder), str(depth)], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--codes", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--copies", type=int, default=4, help="each distinct vector this many times")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    distinct = rng.integers(-3, 4, size=(max(1, args.codes // args.copies), args.dim)).astype(np.float32)
    codes = distinct[np.arange(args.codes) % distinct.shape[0]]
    queries = codes + rng.integers(-1, 2, size=codes.shape).astype(np.float32)
    print(f"{args.codes} codes x {args.codes} queries, dim {args.dim}, {distinct.shape[0]} distinct codes; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)  # fmt: skip
    times: dict[int, list[float]] = {1: [], args.threads: []}
    digests: dict[int, list] = {1: [], args.threads: []}
    with tempfile.TemporaryDirectory(prefix="bench_argsort_") as tmp:
        np.save(Path(tmp) / "codes.npy", codes)
        np.save(Path(tmp) / "queries.npy", queries)
        for repeat in range(args.repeat):
            for threads in (1, args.threads) if repeat % 2 == 0 else (args.threads, 1):
                out = run(Path(tmp), args.depth, threads)
                times[threads].append(out["seconds"])
                digests[threads].append(out["digest"])
                print(f"  {threads} thread(s): {out['seconds']:.2f} s ({out['tied']} queries with a tied answer)",
                      flush=True)  # fmt: skip
    one, many = statistics.median(times[1]), statistics.median(times[args.threads])
    equal = all(d == digests[1][0] for d in digests[1] + digests[args.threads])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"1 thread {one:.2f} s, {args.threads} threads {many:.2f} s (medians of {args.repeat}): {one / many:.2f}x; "
          f"bitwise equal on every run: {equal}; load average {load}")  # fmt: skip


if __name__ == "__main__":
    main()
