"""A cross-encoder training's matching data: read from the split's file against held in memory.

    python benchmarks/bench_cross_matching.py --split PATH/train.parquet [--negatives 1]

The ``train`` phase gives a cross-encoder its split as a ``csbench.train.texts.TextTable`` (a file in
TMPDIR, rows read back by position) and the training reads each matching pair from it
(``csbench.train.cross_encoder._matching_rows``); before, it read the split into a DataFrame and
expanded it into GeCS's matching pairs (``csbench.models.cross.matching_pairs``: lists of every pair).
Each way runs in a fresh interpreter on the same split (a Parquet file with ``query`` and ``code``
columns: an attacked ``train.parquet``; ``benchmarks/bench_growth.py`` builds the 10 k / 100 k / 1 M
corpora), and prints its peak RSS (``ru_maxrss``: the interpreter with its imports included) and CPU
time; then both are built in one process and every pair compared. The model is left out: it costs the
same either way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

COLUMNS = ["query", "code", "language"]


def build(way: str, split: str, negatives: int):
    """The matching data of ``split`` built ``way`` (``memory`` or ``file``), and the table it reads (or None)."""
    if way == "memory":
        import pyarrow.parquet as pq

        from csbench.models.cross import matching_pairs
        from csbench.train.cross_encoder import positive_pairs

        frame = pq.read_table(split, columns=COLUMNS).to_pandas()
        return list(zip(*matching_pairs(*positive_pairs(frame), 42, negatives), strict=True)), None
    from csbench.io import parquet_frames
    from csbench.train.cross_encoder import _matching_rows
    from csbench.train.texts import TextTable

    with open(split, "rb") as handle:
        table = TextTable.write(parquet_frames(handle, 20_000, COLUMNS), COLUMNS, tempfile.gettempdir())
    return _matching_rows(table, 42, negatives), table


def measure(way: str, split: str, negatives: int) -> dict:
    started = time.process_time()
    data, table = build(way, split, negatives)
    seconds = time.process_time() - started
    if table is not None:
        table.close()
    return {"pairs": len(data), "cpu_s": seconds, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", required=True, help="a Parquet split with query and code columns")
    parser.add_argument("--negatives", type=int, default=1, help="negatives per positive (GeCS: 1)")
    parser.add_argument("--way", choices=["memory", "file"], help=argparse.SUPPRESS)  # one way, in this process
    args = parser.parse_args()
    if args.way:
        print(json.dumps(measure(args.way, args.split, args.negatives)))
        return 0
    print(f"{args.split}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    found = {}
    for way in ("memory", "file"):
        done = subprocess.run(
            [sys.executable, __file__, "--split", args.split, "--negatives", str(args.negatives), "--way", way],
            capture_output=True,
            text=True,
            check=True,
        )
        found[way] = json.loads(done.stdout.strip().splitlines()[-1])
        row = found[way]
        print(f"  {way:<7} {row['pairs']:>10,} pairs  {row['cpu_s']:7.1f} CPU s  peak RSS {row['rss_mib']:8.0f} MiB")
    print(f"peak RSS, file / memory: {found['file']['rss_mib'] / found['memory']['rss_mib']:.2f}x")
    (held, _), (read, table) = build("memory", args.split, args.negatives), build("file", args.split, args.negatives)
    differ = sum(1 for m, pair in enumerate(held) if read[m] != pair)
    table.close()
    print(f"{len(held):,} pairs compared: {differ} differ")
    return 1 if differ or len(held) != len(read) else 0


if __name__ == "__main__":
    raise SystemExit(main())
