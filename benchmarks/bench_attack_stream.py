"""A dataset-wide renaming attacked in batches of rows (the ``attack`` phase on a large dataset) against the
same attack on all rows at once, on the same functions.

    python benchmarks/bench_attack_stream.py [--attacks most_popular k_shift_dataset-3] [--functions 6267]
                                              [--batch-rows 2000] [--repeat 3]

``csbench.attacks.stream.attack_batches`` is what the ``attack`` phase runs on a dataset of more than
``--batch-rows`` rows (CodeSearchNet's and every corpus of the growth benchmark). A dataset-wide renaming
(``most_popular``, ``k_shift_dataset``) needs every snippet's analysis before it renames any: a first pass
over the batches gathers its statistics, a second renames. Timed here: ``run_attack`` on all rows at once
(one analysis per snippet, the lower bound), ``attack_batches`` as the phase runs it, and, where the stream
can keep the first pass's analyses (``keep_analyses``), ``attack_batches`` analysing every snippet twice,
as before it could. Functions: the python-csn set of ``bench_attacks.py`` (the CoSQA code pool, 6,267 real
CodeSearchNet Python functions) where ``../shared/data`` is beside the project, else the installed
Python sources' functions. CPU time of this process (``time.process_time``), best of ``--repeat``, each
variant timed in turn; every variant's output is checked equal to ``run_attack``'s. The size of the
temporary file of kept analyses is printed.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_attacks import functions, shared_sets  # noqa: E402

from csbench.attacks import run_attack  # noqa: E402
from csbench.attacks import stream as S  # noqa: E402


def streamed(spec: str, frame: pd.DataFrame, rows: int, folder: Path, **options) -> tuple[pd.DataFrame, float]:
    """``attack_batches`` over ``frame`` (one split) in batches of ``rows``: the attacked rows and CPU seconds."""

    def batches(split: str, columns: list[str] | None) -> Iterator[pd.DataFrame]:
        part = frame if columns is None else frame[columns]
        for start in range(0, len(part), rows):
            yield part[start : start + rows].reset_index(drop=True)

    out: list[pd.DataFrame] = []
    started = time.process_time()
    S.attack_batches(spec, ["train"], batches, lambda _, f: out.append(f), folder, progress=False, **options)
    return pd.concat(out, ignore_index=True), time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attacks", nargs="+", default=["most_popular", "k_shift_dataset-3"])
    parser.add_argument("--functions", type=int, default=6267)
    parser.add_argument("--batch-rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    found = shared_sets(args.functions).get("python-csn")
    _, codes, origin = found if found else ("python", *functions("python", args.functions))
    frame = pd.DataFrame({"id": range(len(codes)), "language": "python", "code": codes})
    can_keep = "keep_analyses" in inspect.signature(S.attack_batches).parameters
    kept_bytes: list[int] = []
    if can_keep:  # the size of the kept analyses' file, seen as it is closed
        close = S._KeptAnalyses.close
        S._KeptAnalyses.close = lambda self: (kept_bytes.append(self.bytes), close(self))[1]
    print(f"{len(codes)} functions ({origin}), batches of {args.batch_rows} rows; CPU s, best of {args.repeat}")
    for spec in args.attacks:
        variants = {"at once (run_attack)": None, "in batches": {}}
        if can_keep:
            variants["in batches, analysed twice"] = {"keep_analyses": False}
        best: dict[str, float] = {}
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(args.repeat):
                started = time.process_time()
                whole = run_attack(spec, {"train": frame}, progress=False)[0]["train"]
                best["at once (run_attack)"] = min(best.get("at once (run_attack)", 1e9), time.process_time() - started)
                for name, options in variants.items():
                    if options is None:
                        continue
                    attacked, seconds = streamed(spec, frame, args.batch_rows, Path(folder), **options)
                    pd.testing.assert_frame_equal(attacked, whole, check_dtype=False)
                    best[name] = min(best.get(name, 1e9), seconds)
        print(f"{spec}:")
        for name, seconds in best.items():
            print(f"  {name:<28} {seconds:7.2f} s  ({seconds / best['at once (run_attack)']:.2f}x at once)")
        if can_keep:
            ratio = best["in batches, analysed twice"] / best["in batches"]
            size = max(kept_bytes)
            print(f"  analysed twice / kept: {ratio:.2f}x; kept analyses' file: {size:,} bytes", end="")
            print(f" ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
