"""GeCS Table 1's token counting: a split read a batch of rows at a time against read whole.

    python benchmarks/bench_dataset_table.py --split PATH/train.parquet [--tokenizer minilm] [--rows 20000]

The ``dataset-table`` phase counts the tokens of each test set and of a reference split (a training set
in GeCS's table) with ``csbench.results.dataset_table.count_token_batches``, ``--rows`` rows of the
Parquet split at a time; before, it read the split into a DataFrame and counted it at once
(``count_tokens``). Each way runs in a fresh interpreter on the same split (a Parquet file with ``query``
and ``code`` columns: a prepared ``train.parquet``; ``benchmarks/bench_growth.py`` builds the 10 k / 100 k
/ 1 M corpora) and prints its peak RSS (``ru_maxrss``, the interpreter and the tokenizer included), its
CPU time and its totals; the two ways' totals must be equal.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

COLUMNS = ["query", "code"]


def measure(way: str, split: str, tokenizer_name: str, rows: int) -> dict:
    import pyarrow.parquet as pq

    from csbench.io import parquet_frames
    from csbench.results.dataset_table import count_token_batches, count_tokens, load_tokenizer

    tokenizer = load_tokenizer(tokenizer_name)
    started = time.process_time()
    if way == "whole":
        frame = pq.read_table(split, columns=COLUMNS).to_pandas()
        stats = count_tokens("set", "split", frame["query"].tolist(), frame["code"].tolist(), tokenizer)
    else:
        with open(split, "rb") as handle:
            frames = parquet_frames(handle, rows, COLUMNS)
            batches = ((frame["query"].tolist(), frame["code"].tolist()) for frame in frames)
            stats = count_token_batches("set", "split", batches, tokenizer)
    return {
        "pairs": stats.pairs,
        "totals": stats.totals,
        "distinct": {side: len(counts) for side, counts in stats.counts.items()},
        "cpu_s": time.process_time() - started,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", required=True, help="a Parquet split with query and code columns")
    parser.add_argument("--tokenizer", default="minilm", help="as dataset_table.tokenizer (default: minilm)")
    parser.add_argument("--rows", type=int, default=20_000, help="rows read at a time (the phase's)")
    parser.add_argument("--way", choices=["whole", "batches"], help=argparse.SUPPRESS)  # one way, in this process
    args = parser.parse_args()
    if args.way:
        print(json.dumps(measure(args.way, args.split, args.tokenizer, args.rows)))
        return 0
    print(f"{args.split}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    found = {}
    for way in ("whole", "batches"):
        command = [sys.executable, __file__, "--split", args.split, "--tokenizer", args.tokenizer]
        done = subprocess.run(
            [*command, "--rows", str(args.rows), "--way", way], capture_output=True, text=True, check=True
        )
        row = found[way] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"  {way:<8} {row['pairs']:>10,} pairs  {row['totals']['code']:>12,} code tokens"
            f"  {row['cpu_s']:7.1f} CPU s  peak RSS {row['rss_mib']:8.0f} MiB"
        )
    print(f"peak RSS, batches / whole: {found['batches']['rss_mib'] / found['whole']['rss_mib']:.2f}x")
    same = all(found["whole"][key] == found["batches"][key] for key in ("pairs", "totals", "distinct"))
    print("the same counts" if same else "the counts DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
