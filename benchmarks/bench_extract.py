"""Corpus extraction throughput: csbench's parallel extraction against one process.

    python benchmarks/bench_extract.py [--dataset python-stdlib] [--repeat 2]

Prints files/s and functions/s for 1 worker (the obvious alternative: a plain loop) and for
all cores, and their ratio. The outputs must be identical; the script checks that too.
"""

from __future__ import annotations

import argparse
import os
import time

from csbench.code.extract import FilterSettings
from csbench.datasets import DATASETS
from csbench.datasets.local import SplitSettings, build_local_corpus


def timed(name: str, workers: int, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = build_local_corpus(
            name, DATASETS.get(name).defaults, FilterSettings(), SplitSettings(), progress=False, workers=workers
        )
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="python-stdlib", choices=DATASETS.names())
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    single, (frame1, card1) = timed(args.dataset, 1, args.repeat)
    parallel, (frame_n, card_n) = timed(args.dataset, cores, args.repeat)
    assert frame1.equals(frame_n) and card1 == card_n, "parallel extraction changed the corpus"
    files, functions = card1["files"]["found"], card1["extraction"]["documented_functions"]
    print(f"dataset {args.dataset}: {files} files, {functions} documented functions, {len(frame1)} pairs")
    for label, seconds in (("1 process", single), (f"{cores} workers", parallel)):
        print(f"  {label:10}: {seconds:7.2f} s  {files / seconds:7.1f} files/s  {functions / seconds:8.1f} functions/s")
    print(f"  speed-up  : {single / parallel:.2f}x on {cores} cores (identical output)")


if __name__ == "__main__":
    main()
