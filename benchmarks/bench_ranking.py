"""Ranking engine (``csbench.evaluate.ranking.rank_dense``) against CodeXGLUE's full-matrix evaluation.

    python benchmarks/bench_ranking.py [--sizes 20000 100000] [--dim 768] [--depth 100] [--memory-mb 256]
                                       [--full-max 20000] [--per-query] [--threads 2] [--seed 0]

For each size n: n code vectors and n queries (float32, seeded; the queries are their own code plus
Gaussian noise scaled so that the correct score stands ~3.5 standard deviations above the others at
any ``--dim``: ranks spread from 1 to thousands, like a real model's), query i's answer is code i.
Each method runs in a fresh subprocess on the same vectors (saved once, loaded with ``np.load``), with
``--threads`` BLAS threads:

* ``engine``: ``rank_dense`` (blocks of queries × codes bounded by ``--memory-mb``; ranks with ties
  against the model, top-``--depth`` lists);
* ``codexglue``: what CodeXGLUE's evaluator does: the full score matrix ``Q @ C.T``, a full
  ``np.argsort`` of each row, rank = position of the correct code + 1 (ties broken by the sort);
  timed beside it, not included, the ties-against-model rank from the same matrix (``S >= S[i, i]``),
  which is what the engine computes; only for n <= ``--full-max`` (at 100k the score matrix alone
  needs 40 GB: printed instead);
* ``per-query`` (``--per-query``): the runner's loop before the engine: one score row per query,
  ``rank_of_correct`` and ``top_k``.

Printed per method: wall seconds and their ratio to the engine's; the peak memory above the loaded
vectors (the subprocess's peak resident set, VmHWM, reset after loading through /proc/self/clear_refs,
minus its resident set then; and tracemalloc's peak, which sees numpy's buffers but not BLAS's); the
load average before and after (other jobs share the machine); and the ranks compared with the
engine's: how many differ from the full matrix's ties-against-model ranks and from the argsort ranks,
and how many top lists differ from the argsort's first ``--depth`` (argsort orders exactly tied codes
by descending index, the engine by ascending index, as ``top_k`` does: with float32 scores some
distinct codes tie exactly). Float32 matmuls of different shapes round differently in the last bit,
so a code within ~1e-6 of another may fall on either side of it: the differences are classified as
such ("near-tied", "within 1e-6").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SNR = 3.5  # correct score over the others' standard deviation, at any dimension


def make_vectors(n: int, dim: int, seed: int, folder: Path) -> None:
    """Save ``n`` unit code vectors and their noisy unit queries (float32) under ``folder``."""
    rng = np.random.default_rng(seed)
    codes = rng.standard_normal((n, dim), dtype=np.float32)
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    noise = rng.standard_normal((n, dim), dtype=np.float32)
    # |noise| ~ sqrt(dim) / SNR: cos(query, code) ~ SNR / sqrt(dim), the other codes' ~ N(0, 1 / dim)
    noise *= 1.0 / SNR
    noise += codes
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    np.save(folder / "codes.npy", codes)
    np.save(folder / "queries.npy", noise)


def near_ties(folder: Path, queries: np.ndarray, tolerance: float = 1e-6) -> int:
    """How many of ``queries`` have another code scoring within ``tolerance`` of their correct code
    (float64 scores): where two float32 computations (a block matmul, the full matmul, a matrix-vector
    product) may round the comparison either way."""
    codes = np.load(folder / "codes.npy").astype(np.float64)
    vectors = np.load(folder / "queries.npy")[queries].astype(np.float64)
    scores = vectors @ codes.T
    correct = scores[np.arange(queries.size), queries]
    scores[np.arange(queries.size), queries] = np.inf
    return int(np.count_nonzero((np.abs(scores - correct[:, None]) <= tolerance).any(axis=1)))


def status_mb(field: str) -> float | None:
    """A memory figure of this process from /proc/self/status (VmRSS, VmHWM), in MiB; None elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def reset_peak() -> bool:
    """Reset this process's peak resident memory (VmHWM) to its current one (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def worker(method: str, folder: Path, depth: int, memory_mb: float) -> dict:
    """Run one method on the saved vectors; return its timings and memory, save its ranks."""
    import resource
    import tracemalloc

    codes = np.load(folder / "codes.npy")
    queries = np.load(folder / "queries.npy")
    n = codes.shape[0]
    answers = np.arange(n)
    # the peak above the loaded vectors: VmHWM reset now (ru_maxrss would keep the interpreter's
    # earlier peaks, and after fork it may even start at the parent's size)
    peak_reset = reset_peak()
    base_rss = status_mb("VmRSS") if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    load_before = os.getloadavg()[0]
    out: dict = {"method": method}
    started = time.perf_counter()
    if method == "engine":
        from csbench.evaluate.ranking import rank_dense

        result = rank_dense(queries, codes, answers, depth, memory_mb=memory_mb)
        out["seconds"] = time.perf_counter() - started
        out["block"] = list(result.block)
        np.save(folder / "engine_ranks.npy", result.ranks)
        np.save(folder / "engine_top.npy", result.top)
        np.save(folder / "engine_top_scores.npy", result.top_scores)
    elif method == "codexglue":
        scores = np.matmul(queries, codes.T)
        matmul_s = time.perf_counter() - started
        sort_ids = np.argsort(scores, axis=-1, kind="quicksort", order=None)[:, ::-1]
        ranks = np.array([int(np.flatnonzero(row == i)[0]) + 1 for i, row in enumerate(sort_ids)])
        out["seconds"] = time.perf_counter() - started
        out["matmul_s"] = matmul_s
        np.save(folder / "argsort_ranks.npy", ranks)
        top = np.ascontiguousarray(sort_ids[:, :depth])
        np.save(folder / "argsort_top.npy", top)
        np.save(folder / "argsort_top_scores.npy", np.take_along_axis(scores, top, axis=1).astype(np.float64))
        del sort_ids
        counted = time.perf_counter()
        ties = np.count_nonzero(scores >= scores[answers, answers][:, None], axis=1)
        out["ties_rank_s"] = time.perf_counter() - counted
        np.save(folder / "ties_ranks.npy", ties)
    elif method == "per-query":
        from csbench.evaluate.metrics import rank_of_correct
        from csbench.evaluate.runner import top_k

        ranks = np.empty(n, dtype=np.int64)
        for i in range(n):
            row = (codes @ queries[i]).astype(np.float64)
            ranks[i] = rank_of_correct(row, i)
            top_k(row, i, depth)
        out["seconds"] = time.perf_counter() - started
        np.save(folder / "perquery_ranks.npy", ranks)
    else:
        raise ValueError(method)
    out["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    peak = status_mb("VmHWM") if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
    out["rss_peak_mb"] = peak - base_rss
    out["load"] = [load_before, os.getloadavg()[0]]
    return out


def run(method: str, folder: Path, args: argparse.Namespace) -> dict:
    """``worker`` in a fresh interpreter with ``args.threads`` BLAS threads."""
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(args.threads)
    command = [sys.executable, __file__, "--worker", method, "--data", str(folder)]
    command += ["--depth", str(args.depth), "--memory-mb", str(args.memory_mb)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000], help="n queries = n codes")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--depth", type=int, default=100, help="top list length (the run depth)")
    parser.add_argument("--memory-mb", type=float, default=256.0)
    parser.add_argument("--full-max", type=int, default=20000, help="largest n for the full score matrix")
    parser.add_argument("--per-query", action="store_true", help="also time the per-query loop")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.data, args.depth, args.memory_mb)))
        return
    settings = f"dim {args.dim}, depth {args.depth}, memory_mb {args.memory_mb}"
    print(f"{args.threads} BLAS threads ({os.cpu_count()} CPUs), {settings}")
    header = f"{'n':>7} {'method':<10} {'wall s':>8} {'/engine':>8} {'RSS peak':>10} {'traced peak':>12} {'load':>11}"
    header += "  ranks vs engine"
    print(header)
    print("-" * len(header))
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="bench_ranking_") as tmp:
            folder = Path(tmp)
            make_vectors(n, args.dim, args.seed, folder)
            results = {"engine": run("engine", folder, args)}
            if n <= args.full_max:
                results["codexglue"] = run("codexglue", folder, args)
            if args.per_query and n <= args.full_max:
                results["per-query"] = run("per-query", folder, args)
            engine_ranks = np.load(folder / "engine_ranks.npy")
            for method, out in results.items():
                speed = out["seconds"] / results["engine"]["seconds"]
                note = ""
                if method == "engine":
                    note = f"block {tuple(out['block'])}; median rank {np.median(engine_ranks):.0f}"
                elif method == "codexglue":
                    ties = np.load(folder / "ties_ranks.npy")
                    argsort = np.load(folder / "argsort_ranks.npy")
                    tops = (np.load(folder / "argsort_top.npy") != np.load(folder / "engine_top.npy")).any(axis=1)
                    # lists holding the same scores in the same order differ only among exactly tied codes
                    same_scores = (
                        np.load(folder / "argsort_top_scores.npy") == np.load(folder / "engine_top_scores.npy")
                    ).all(axis=1)
                    # top lists whose scores agree to float32 rounding: near-equal codes ordered apart
                    gap = np.abs(np.load(folder / "argsort_top_scores.npy") - np.load(folder / "engine_top_scores.npy"))
                    rounding = (gap <= 1e-6).all(axis=1)
                    differ = np.flatnonzero(ties != engine_ranks)
                    note = (
                        f"{differ.size} differ from S >= S[i,i] ({near_ties(folder, differ)} near-tied), "
                        f"{np.count_nonzero(argsort != engine_ranks)} from argsort; "
                        f"{np.count_nonzero(tops)} top-{args.depth} lists differ "
                        f"({np.count_nonzero(tops & same_scores)} only in the order of exactly tied codes, "
                        f"{np.count_nonzero(tops & rounding & ~same_scores)} of codes within 1e-6; "
                        f"matmul {out['matmul_s']:.1f} s; S >= S[i,i] {out['ties_rank_s']:.1f} s more)"
                    )
                else:
                    differ = np.flatnonzero(np.load(folder / "perquery_ranks.npy") != engine_ranks)
                    note = (
                        f"{differ.size} differ ({near_ties(folder, differ)} with a code within 1e-6 of the correct one)"
                    )
                load = f"{out['load'][0]:.1f}->{out['load'][1]:.1f}"
                print(
                    f"{n:>7} {method:<10} {out['seconds']:>8.1f} {speed:>7.2f}x {out['rss_peak_mb']:>7.0f} MB "
                    f"{out['tracemalloc_peak_mb']:>9.0f} MB {load:>11}  {note}"
                )
            if n > args.full_max:
                need = n * n * 4 / 1e9
                print(
                    f"{n:>7} {'codexglue':<10} not run: the float32 score matrix alone needs {need:.0f} GB "
                    f"(and argsort's int64 indices {2 * need:.0f} GB more)"
                )


if __name__ == "__main__":
    main()
