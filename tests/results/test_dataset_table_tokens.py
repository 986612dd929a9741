"""GeCS Table 1's token statistics counted a batch of pairs at a time (the ``dataset-table`` phase reads a
split in row batches: a reference split such as CodeSearchNet Python's training set is not held) are
the statistics of the whole set at once, on real functions with the all-MiniLM-L6-v2 tokenizer."""

from __future__ import annotations

import pytest
from corpora import local_functions

from csbench.results.dataset_table import count_token_batches, count_tokens, load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    try:
        return load_tokenizer("minilm")
    except OSError as error:
        pytest.skip(f"all-MiniLM-L6-v2's tokenizer is not installed ({error})")


def test_counting_in_batches_gives_the_counts_of_the_whole_set(tokenizer) -> None:
    codes = local_functions("python", limit=1500)
    queries = [code.splitlines()[0] for code in codes]  # the def line: a text of its own per pair
    whole = count_tokens("python", "train", queries, codes, tokenizer)
    for size in (1, 7, 1024, len(codes)):
        cuts = [(queries[i : i + size], codes[i : i + size]) for i in range(0, len(codes), size)]
        batched = count_token_batches("python", "train", iter(cuts), tokenizer)
        assert batched == whole
    assert whole.pairs == len(codes) > 500 and whole.totals["code"] > whole.totals["query"] > len(codes)
    assert count_token_batches("empty", "test", [], tokenizer).pairs == 0


def test_a_batch_with_more_queries_than_codes_is_refused(tokenizer) -> None:
    with pytest.raises(ValueError, match="2 queries but 1 codes"):
        count_token_batches("x", "test", [(["a"], ["b"]), (["a", "b"], ["c"])], tokenizer)


def test_the_benchmark_counts_one_split_both_ways(tokenizer, tmp_path) -> None:
    """benchmarks/bench_dataset_table.py: each way's totals and peak memory, and the verdict."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    codes = local_functions("python", limit=120)
    split = tmp_path / "train.parquet"
    pd.DataFrame({"query": [code.splitlines()[0] for code in codes], "code": codes}).to_parquet(split)
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_dataset_table.py"
    done = subprocess.run(
        [sys.executable, str(script), "--split", str(split), "--rows", "7"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    totals = re.findall(r"^  (whole|batches) +([\d,]+) pairs +([\d,]+) code tokens", done.stdout, re.M)
    assert [way for way, _, _ in totals] == ["whole", "batches"], done.stdout
    assert len({(pairs, tokens) for _, pairs, tokens in totals}) == 1 and totals[0][1] == f"{len(codes):,}"
    assert done.stdout.rstrip().endswith("the same counts")
