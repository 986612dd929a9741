"""Loading a run's index (``csbench.evaluate.runner.load_pool_index``): what the digest check costs.

    python benchmarks/bench_index_load.py [--codes 20000] [--dim 384] [--repeat 7] [--seed 0]

Builds two indexes of ``--codes`` candidates and saves them as ``csbench index`` does: a dense one
(``--codes`` x ``--dim`` float32 vectors, seeded) and a BM25 one (synthetic 60-word functions over a
5,000-word vocabulary). For each it prints the folder's size, the median load time over ``--repeat``
loads (page cache warm: the files were just written) and, of that, the time of the SHA-256 check
alone (``verify_dir`` over the same folder), so the share of the check is visible. The encoder of a
dense index is not loaded (it is rebuilt on the first query).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from csbench.evaluate.runner import PoolIndex, load_pool_index
from csbench.models.bm25 import BM25Retriever
from csbench.models.encoder import DenseRetriever
from csbench.models.integrity import verify_dir


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def _never() -> None:
    raise AssertionError("the encoder is not loaded by the index")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ids = [f"python-stdlib/f{i:06d}" for i in range(args.codes)]

    dense = DenseRetriever(None, loader=_never)
    dense._codes = rng.standard_normal((args.codes, args.dim), dtype=np.float32)
    dense.similarity = "cosine"
    words = np.array([f"w{i}" for i in range(5000)])
    pool = pd.DataFrame(
        {
            "id": ids,
            "func_name": [f"module.function_{i}" for i in range(args.codes)],
            "code": [" ".join(rng.choice(words, 60)) for _ in range(args.codes)],
        }
    )
    bm25 = BM25Retriever()
    bm25.index(pool)
    print(json.dumps({"load_average": os.getloadavg()[0]}))
    with tempfile.TemporaryDirectory() as tmp:
        for name, retriever, loader in (("dense", dense, _never), ("bm25", bm25, None)):
            folder = Path(tmp) / name
            PoolIndex({"test": retriever}, {"test": ids}, 1.0).save(folder, {"name": name})
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            load_ms = _median_ms(
                lambda f=folder, n=name, lo=loader: load_pool_index(f, {"name": n}, lo, "-"), args.repeat
            )
            check_ms = _median_ms(lambda f=folder: verify_dir(f, "-", keep=lambda n: "/" not in n), args.repeat)
            print(
                json.dumps(
                    {
                        "index": name,
                        "codes": args.codes,
                        "megabytes": round(size / 1e6, 2),
                        "load_ms": load_ms,
                        "sha256_check_ms": check_ms,
                        "check_ms_per_mb": round(check_ms / (size / 1e6), 2),
                    }
                )
            )


if __name__ == "__main__":
    main()
