"""The embedding cache's own speed (csbench.cache.embeddings): no encoder runs, only the cache.

    python benchmarks/bench_embedding_cache.py [--n 100000] [--dim 384] [--repeat 3] [--shard-rows 65536]

N synthetic float32 vectors of dimension DIM under N distinct texts (``def function_<i>(x): ...``, ~40
characters) are stored once; then, in alternating repeats:

* ``store``: ``EmbeddingCache.store`` of all N into an empty cache (hash, write, fsync, rename);
* ``lookup, cold``: a new ``EmbeddingCache`` object (what a new process starts with) looks all N up:
  listing the shards, checking each header and key block, the sha256 of every vector block it serves,
  the gather into one matrix;
* ``lookup, warm``: the same object again (shards listed and verified): sha256 of the N texts,
  ``searchsorted`` in the sorted key table, the gather;
* ``np.load``: the obvious alternative, the same matrix as one plain ``.npy`` read whole (no keys, no
  checks): the floor of reading these bytes.

Printed: vectors/s (median of ``--repeat``), each row's ratio to ``np.load``, and the load average
(a shared machine: read the ratios, not the rates). Every lookup is checked bitwise against the input.
The file system cache is warm in every row (the shards were just written).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from csbench.cache.embeddings import EmbeddingCache, Namespace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shard-rows", type=int, default=65536)
    args = parser.parse_args()

    texts = [f"def function_{i}(x):\n    return x * {i} + 1" for i in range(args.n)]
    vectors = np.random.default_rng(0).standard_normal((args.n, args.dim)).astype(np.float32)
    ns = Namespace("sha256:" + "0" * 64, {"max_length": 256, "pooling": "mean", "normalize": True}, "code")
    times: dict[str, list[float]] = {"store": [], "lookup, cold": [], "lookup, warm": [], "np.load": []}

    with tempfile.TemporaryDirectory(prefix="bench_embedding_cache.") as tmp:
        for r in range(args.repeat):
            root = Path(tmp) / f"cache{r}"
            start = time.perf_counter()
            EmbeddingCache(root, shard_rows=args.shard_rows).store(ns, texts, vectors)
            times["store"].append(time.perf_counter() - start)

            cache = EmbeddingCache(root)
            start = time.perf_counter()
            found = cache.lookup(ns, texts)
            times["lookup, cold"].append(time.perf_counter() - start)
            assert found.hit.all() and np.array_equal(found.vectors.view(np.uint32), vectors.view(np.uint32))
            start = time.perf_counter()
            found = cache.lookup(ns, texts)
            times["lookup, warm"].append(time.perf_counter() - start)
            assert np.array_equal(found.vectors.view(np.uint32), vectors.view(np.uint32))

            plain = Path(tmp) / f"plain{r}.npy"
            np.save(plain, vectors)
            start = time.perf_counter()
            loaded = np.load(plain, allow_pickle=False)
            times["np.load"].append(time.perf_counter() - start)
            assert np.array_equal(loaded, vectors)

        size = sum(p.stat().st_size for p in (Path(tmp) / "cache0").rglob("*.emb"))
    floor = statistics.median(times["np.load"])
    print(f"{args.n} vectors x {args.dim} (float32, {vectors.nbytes / 2**20:.0f} MiB; shards {size / 2**20:.0f} MiB), "
          f"shard_rows {args.shard_rows}, median of {args.repeat}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'':14} {'seconds':>8} {'vectors/s':>12} {'x np.load time':>15}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:14} {median:8.3f} {args.n / median:12,.0f} {median / floor:15.1f}")


if __name__ == "__main__":
    main()
