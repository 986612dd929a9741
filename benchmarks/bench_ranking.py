"""Ranking engine (``csbench.evaluate.ranking.rank_dense``) against faiss's exact search, the bare matmul
and CodeXGLUE's full-matrix evaluation.

    python benchmarks/bench_ranking.py [--sizes 20000 100000] [--dims 384 768] [--queries N] [--depth 1000]
                                       [--memory-mb 256] [--repeat 3] [--full-max 20000] [--per-query]
                                       [--threads 2] [--seed 0] [--openblas-timeout N]

For each size n and dimension: n code vectors and n queries (``--queries``: at most that many; float32,
seeded; the queries are their own code plus Gaussian noise scaled so that the correct score stands ~3.5
standard deviations above the others at any dimension: ranks spread from 1 to thousands, like a real
model's), query i's answer is code i. Each method runs in a fresh subprocess on the same vectors (saved
once, loaded with ``np.load``), with ``--threads`` BLAS / OpenMP threads, ``--repeat`` times, the methods
interleaved (engine, faiss, matmul, engine, ...) so that a change of the machine's load hits them alike;
the medians are printed. ``--openblas-timeout N`` runs every method's process with
``OPENBLAS_THREAD_TIMEOUT=N`` (how long OpenBLAS's threads spin after a product: 2^N cycles, 28 by
default); without it, with the environment's:

* ``engine``: ``rank_dense`` (blocks of queries × codes bounded by ``--memory-mb``; ranks with ties
  against the model, top-``--depth`` lists);
* ``faiss``: faiss-cpu's exact ``IndexFlatIP`` (``add`` the codes, ``search`` the queries with
  k = ``--depth``): top lists and their scores, no rank of the correct code (skipped when faiss is not
  installed: ``pip install faiss-cpu``);
* ``matmul``: the floor: ``Q @ C.T`` in the engine's blocks, nothing else;
* ``codexglue``: what CodeXGLUE's evaluator does: the full score matrix ``Q @ C.T``, a full
  ``np.argsort`` of each row, rank = position of the correct code + 1 (ties broken by the sort);
  timed beside it, not included, the ties-against-model rank from the same matrix (``S >= S[i, i]``),
  which is what the engine computes; only for n <= ``--full-max`` with as many queries as codes (at
  100k the score matrix alone needs 40 GB: printed instead);
* ``per-query`` (``--per-query``): the runner's loop before the engine: one score row per query,
  ``rank_of_correct`` and ``top_k``.

Printed per method: median wall seconds (min–max) and their ratio to the engine's median; the peak
memory above the loaded vectors (the subprocess's peak resident set, VmHWM, reset after loading through
/proc/self/clear_refs, minus its resident set then; and tracemalloc's peak, which sees numpy's buffers
but not BLAS's or faiss's, from one more run of each method, not timed: tracing slows numpy's
allocations; ``--no-trace`` skips it); the load average before and after (other jobs share the machine); and the
results compared with the engine's. faiss: how many top lists differ from the engine's, and of those
how many hold the same scores in another order of exactly tied codes (faiss's heap orders them its own
way, the engine by ascending index, as ``top_k`` does) or scores within 1e-6 of the engine's (faiss's
own float32 matmul rounds the last bit otherwise); and for the queries whose correct code is in faiss's
list, how many of its positions + 1 differ from the engine's rank (and how many of those have a code
within 1e-6 of the correct one, "near-tied"). codexglue: the ranks against the full matrix's
ties-against-model ranks and against the argsort ranks, and the top lists against the argsort's first
``--depth`` (argsort orders exactly tied codes by descending index). Float32 matmuls of different
shapes round differently in the last bit, so a code within ~1e-6 of another may fall on either side of
it: the differences are classified as such ("near-tied", "within 1e-6").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SNR = 3.5  # correct score over the others' standard deviation, at any dimension


def make_vectors(n: int, dim: int, seed: int, folder: Path, n_queries: int | None = None) -> None:
    """Save ``n`` unit code vectors and noisy unit queries (float32) of the first ``n_queries`` of them
    (all by default) under ``folder``."""
    rng = np.random.default_rng(seed)
    codes = rng.standard_normal((n, dim), dtype=np.float32)
    codes /= np.linalg.norm(codes, axis=1, keepdims=True)
    m = n if n_queries is None else min(n, n_queries)
    noise = rng.standard_normal((m, dim), dtype=np.float32)
    # |noise| ~ sqrt(dim) / SNR: cos(query, code) ~ SNR / sqrt(dim), the other codes' ~ N(0, 1 / dim)
    noise *= 1.0 / SNR
    noise += codes[:m]
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


def worker(method: str, folder: Path, depth: int, memory_mb: float, trace: bool = False) -> dict:
    """Run one method on the saved vectors; return its timings and memory, save its ranks. ``trace``:
    under tracemalloc, for its peak (it slows numpy's allocations, so such a run is not timed)."""
    import resource
    import tracemalloc

    codes = np.load(folder / "codes.npy")
    queries = np.load(folder / "queries.npy")
    n = queries.shape[0]
    answers = np.arange(n)
    # the peak above the loaded vectors: VmHWM reset now (ru_maxrss would keep the interpreter's
    # earlier peaks, and after fork it may even start at the parent's size)
    peak_reset = reset_peak()
    base_rss = status_mb("VmRSS") if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if trace:
        tracemalloc.start()
    load_before = os.getloadavg()[0]
    out: dict = {"method": method}
    started = time.perf_counter()
    if method == "engine":
        from csbench.evaluate import ranking

        result = ranking.rank_dense(queries, codes, answers, depth, memory_mb=memory_mb)
        out["seconds"] = time.perf_counter() - started
        out["block"] = list(result.block)
        out["kernel"] = "compiled kernel" if ranking.USE_KERNEL else "numpy path (kernel not compiled)"
        np.save(folder / "engine_ranks.npy", result.ranks)
        np.save(folder / "engine_top.npy", result.top)
        np.save(folder / "engine_top_scores.npy", result.top_scores)
    elif method == "faiss":
        import faiss

        faiss.omp_set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        index = faiss.IndexFlatIP(codes.shape[1])
        index.add(codes)
        scores, top = index.search(queries, depth)
        out["seconds"] = time.perf_counter() - started
        np.save(folder / "faiss_top.npy", top.astype(np.int64))
        np.save(folder / "faiss_top_scores.npy", scores.astype(np.float64))
    elif method == "matmul":
        from csbench.evaluate.ranking import block_shape

        rows, cols = block_shape(n, codes.shape[0], depth, memory_mb, 4 * 3 + 2)  # rank_dense's blocks
        for start in range(0, n, rows):
            block = queries[start : start + rows]
            for column in range(0, codes.shape[0], cols):
                block @ codes[column : column + cols].T
        out["seconds"] = time.perf_counter() - started
        out["block"] = [rows, cols]
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
    if trace:
        out["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    peak = status_mb("VmHWM") if peak_reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB
    out["rss_peak_mb"] = peak - base_rss
    out["load"] = [load_before, os.getloadavg()[0]]
    return out


def run(method: str, folder: Path, args: argparse.Namespace, trace: bool = False) -> dict:
    """``worker`` in a fresh interpreter with ``args.threads`` BLAS threads."""
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(args.threads)
    if args.openblas_timeout is not None:  # every method under the same OpenBLAS spin
        env["OPENBLAS_THREAD_TIMEOUT"] = str(args.openblas_timeout)
    command = [sys.executable, __file__, "--worker", method, "--data", str(folder)]
    command += ["--depth", str(args.depth), "--memory-mb", str(args.memory_mb)] + (["--trace"] if trace else [])
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def faiss_available() -> bool:
    """Whether faiss-cpu can be imported (the faiss method needs it; nothing else does)."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def compare_faiss(folder: Path, engine_ranks: np.ndarray) -> str:
    """faiss's top lists and the correct codes' positions in them against the engine's."""
    top, engine_top = np.load(folder / "faiss_top.npy"), np.load(folder / "engine_top.npy")
    scores, engine_scores = np.load(folder / "faiss_top_scores.npy"), np.load(folder / "engine_top_scores.npy")
    tops = (top != engine_top).any(axis=1)
    # lists holding the same scores in the same order differ only among exactly tied codes
    same_scores = (scores == engine_scores).all(axis=1)
    rounding = (np.abs(scores - engine_scores) <= 1e-6).all(axis=1)
    found = top == np.arange(top.shape[0])[:, None]
    listed = np.flatnonzero(found.any(axis=1))
    positions = found[listed].argmax(axis=1) + 1
    differ = listed[positions != engine_ranks[listed]]
    return (
        f"{np.count_nonzero(tops)} top lists differ ({np.count_nonzero(tops & same_scores)} only in the order of "
        f"exactly tied codes, {np.count_nonzero(tops & rounding & ~same_scores)} of codes within 1e-6); "
        f"correct code listed for {listed.size}: {differ.size} positions differ from the rank "
        f"({near_ties(folder, differ)} near-tied)"
    )


def compare_codexglue(folder: Path, engine_ranks: np.ndarray, out: dict, depth: int) -> str:
    """CodeXGLUE's argsort ranks and lists, and the full matrix's ties-against-model ranks, against the engine's."""
    ties = np.load(folder / "ties_ranks.npy")
    argsort = np.load(folder / "argsort_ranks.npy")
    tops = (np.load(folder / "argsort_top.npy") != np.load(folder / "engine_top.npy")).any(axis=1)
    # lists holding the same scores in the same order differ only among exactly tied codes
    same_scores = (np.load(folder / "argsort_top_scores.npy") == np.load(folder / "engine_top_scores.npy")).all(axis=1)
    # top lists whose scores agree to float32 rounding: near-equal codes ordered apart
    gap = np.abs(np.load(folder / "argsort_top_scores.npy") - np.load(folder / "engine_top_scores.npy"))
    rounding = (gap <= 1e-6).all(axis=1)
    differ = np.flatnonzero(ties != engine_ranks)
    return (
        f"{differ.size} differ from S >= S[i,i] ({near_ties(folder, differ)} near-tied), "
        f"{np.count_nonzero(argsort != engine_ranks)} from argsort; "
        f"{np.count_nonzero(tops)} top-{depth} lists differ "
        f"({np.count_nonzero(tops & same_scores)} only in the order of exactly tied codes, "
        f"{np.count_nonzero(tops & rounding & ~same_scores)} of codes within 1e-6; "
        f"matmul {out['matmul_s']:.1f} s; S >= S[i,i] {out['ties_rank_s']:.1f} s more)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 100000], help="n codes")
    parser.add_argument("--dims", "--dim", type=int, nargs="+", default=[384, 768], help="vector widths")
    parser.add_argument("--queries", type=int, help="at most this many queries (default: as many as codes)")
    parser.add_argument("--depth", type=int, default=1000, help="top list length (faiss's k)")
    parser.add_argument("--memory-mb", type=float, default=256.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each method (medians printed)")
    parser.add_argument("--full-max", type=int, default=20000, help="largest n for the full score matrix")
    parser.add_argument("--per-query", action="store_true", help="also time the per-query loop")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--openblas-timeout",
        type=int,
        help="OPENBLAS_THREAD_TIMEOUT of every method's process (default: the environment's; OpenBLAS's own is 28)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-trace", action="store_true", help="skip the (untimed) tracemalloc run of each method")
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.data, args.depth, args.memory_mb, args.trace)))
        return
    settings = f"depth {args.depth}, memory_mb {args.memory_mb}, {args.repeat} runs each (median, min-max)"
    chosen = args.openblas_timeout if args.openblas_timeout is not None else os.environ.get("OPENBLAS_THREAD_TIMEOUT")
    spin = f"OPENBLAS_THREAD_TIMEOUT {chosen if chosen is not None else 'unset (28)'}"
    print(f"{args.threads} BLAS/OpenMP threads ({os.cpu_count()} CPUs), {spin}, {settings}")
    header = f"{'codes':>7} {'queries':>7} {'dim':>4} {'method':<10} {'wall s':>17} {'/engine':>8}"
    header += f" {'RSS peak':>9} {'traced':>8} {'load':>9}  results vs engine"
    print(header)
    print("-" * len(header))
    timed = ["engine", *(["faiss"] if faiss_available() else []), "matmul"]
    for n in args.sizes:
        n_queries = n if args.queries is None else min(n, args.queries)
        for dim in args.dims:
            with tempfile.TemporaryDirectory(prefix="bench_ranking_") as tmp:
                folder = Path(tmp)
                make_vectors(n, dim, args.seed, folder, n_queries)
                runs: dict[str, list[dict]] = {method: [] for method in timed}
                traced = {} if args.no_trace else {method: run(method, folder, args, trace=True) for method in timed}
                for _ in range(max(1, args.repeat)):
                    for method in timed:
                        runs[method].append(run(method, folder, args))
                if n <= args.full_max and n_queries == n:
                    runs["codexglue"] = [run("codexglue", folder, args)]
                    traced["codexglue"] = run("codexglue", folder, args, trace=True) if not args.no_trace else {}
                    if args.per_query:
                        runs["per-query"] = [run("per-query", folder, args)]
                engine_ranks = np.load(folder / "engine_ranks.npy")
                engine_s = statistics.median(out["seconds"] for out in runs["engine"])
                for method, outs in runs.items():
                    seconds = [out["seconds"] for out in outs]
                    median = statistics.median(seconds)
                    out = outs[-1]
                    if method == "engine":
                        note = f"{out['kernel']}; block {tuple(out['block'])}"
                        note += f"; median rank {np.median(engine_ranks):.0f}"
                    elif method == "faiss":
                        note = compare_faiss(folder, engine_ranks)
                    elif method == "matmul":
                        note = f"the floor: the engine's blocks {tuple(out['block'])}, nothing else"
                    elif method == "codexglue":
                        note = compare_codexglue(folder, engine_ranks, out, args.depth)
                    else:
                        differ = np.flatnonzero(np.load(folder / "perquery_ranks.npy") != engine_ranks)
                        near = near_ties(folder, differ)
                        note = f"{differ.size} differ ({near} with a code within 1e-6 of the correct one)"
                    peak = traced.get(method, {}).get("tracemalloc_peak_mb")
                    traced_mb = "-" if peak is None else f"{peak:.0f} MB"
                    wall = f"{median:.2f} ({min(seconds):.1f}-{max(seconds):.1f})"
                    load = f"{min(o['load'][0] for o in outs):.1f}-{max(o['load'][1] for o in outs):.1f}"
                    print(
                        f"{n:>7} {n_queries:>7} {dim:>4} {method:<10} {wall:>17} {median / engine_s:>7.2f}x "
                        f"{max(o['rss_peak_mb'] for o in outs):>6.0f} MB "
                        f"{traced_mb:>8} {load:>9}  {note}",
                        flush=True,
                    )
                if args.full_max >= n > n_queries:
                    print(f"{n:>7} {n_queries:>7} {dim:>4} {'codexglue':<10} not run: fewer queries than codes")
                elif n > args.full_max:
                    need = n_queries * n * 4 / 1e9
                    print(
                        f"{n:>7} {n_queries:>7} {dim:>4} {'codexglue':<10} not run (--full-max {args.full_max}): "
                        f"the float32 score matrix alone needs {need:.1f} GB "
                        f"(and argsort's int64 indices {2 * need:.1f} GB more)"
                    )


if __name__ == "__main__":
    main()
