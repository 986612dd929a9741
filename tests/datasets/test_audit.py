"""Streaming preparation (SplitWriter, RunningStats) and the leakage audit."""

from __future__ import annotations

import statistics
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest

from csbench.datasets.audit import audit_dataset, card_markdown
from csbench.datasets.base import RECORD_COLUMNS
from csbench.datasets.prepare import RunningStats, SplitWriter

SPLITS = ("train", "valid", "test", "codebase")


def record(i: int, split: str, code: str, query: str = "return the sum of two numbers") -> dict:
    return {
        "id": f"r{i}",
        "language": "python",
        "query": query,
        "code": code,
        "func_name": f"f{i}",
        "repo": "repo",
        "path": "a.py",
        "url": f"u{i}",
        "split": split,
        "docstring": query,
    }


def fn(name: str, body: str = "return a + b", comment: str = "") -> str:
    return f"def {name}(a, b):\n    {comment}\n    x = a\n    y = b\n    {body}\n"


def test_running_stats_match_statistics_module() -> None:
    values = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    stats = RunningStats()
    for v in values:
        stats.add(v)
    assert stats.as_dict() == {"mean": round(statistics.fmean(values), 2), "std": round(statistics.pstdev(values), 2)}
    assert RunningStats().as_dict()["mean"] != RunningStats().as_dict()["mean"]  # NaN when empty


def test_split_writer_writes_every_split_with_exact_columns(tmp_path: Path) -> None:
    with SplitWriter(tmp_path, SPLITS, batch_size=3) as writer:
        for i in range(10):
            writer.add(record(i, "train" if i < 7 else "test", fn(f"f{i}")))
    frames = {s: pd.read_parquet(tmp_path / f"{s}.parquet") for s in SPLITS}
    assert [len(frames[s]) for s in SPLITS] == [7, 0, 3, 0]
    assert all(tuple(f.columns) == RECORD_COLUMNS for f in frames.values())
    assert frames["train"]["id"].tolist() == [f"r{i}" for i in range(7)]
    assert writer.stats["train"].pairs == 7
    assert not list(tmp_path.glob(".*tmp"))


def test_split_writer_leaves_nothing_when_the_reader_fails(tmp_path: Path) -> None:
    def records():
        yield record(0, "train", fn("f0"))
        raise ValueError("bad line 2")

    with pytest.raises(ValueError, match="bad line 2"), SplitWriter(tmp_path, SPLITS) as writer:
        for item in records():
            writer.add(item)
    assert list(tmp_path.iterdir()) == []


def test_split_writer_rejects_an_undeclared_split(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="split 'dev'"), SplitWriter(tmp_path, SPLITS) as writer:
        writer.add(record(0, "dev", fn("f0")))


def test_split_writer_memory_is_bounded_by_the_batch_not_the_input(tmp_path: Path) -> None:
    def peak(n: int) -> int:
        out = tmp_path / str(n)
        tracemalloc.start()
        with SplitWriter(out, SPLITS, batch_size=1000) as writer:
            for i in range(n):
                writer.add(record(i, "train", fn(f"f{i}")))
        peak_bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak_bytes

    small, large = peak(5_000), peak(40_000)
    assert large < small * 1.5, (small, large)


def _prepared(tmp_path: Path, rows: list[dict]) -> Path:
    with SplitWriter(tmp_path, SPLITS) as writer:
        for row in rows:
            writer.add(row)
    return tmp_path


def test_audit_counts_exact_and_near_duplicates_across_splits_and_in_the_pool(tmp_path: Path) -> None:
    rows = [
        record(0, "train", fn("alpha")),
        record(1, "train", fn("beta", body="return a - b")),
        record(2, "train", fn("gamma", body="return a * b")),
        # exact copy of alpha (white space differs): exact and near
        record(3, "test", fn("alpha").replace("    x = a", "    x  =  a")),
        # beta with a comment added: near only
        record(4, "test", fn("beta", body="return a - b", comment="# subtract")),
        record(5, "test", fn("delta", body="return a / b")),
        record(6, "test", fn("delta", body="return a / b")),  # a twin inside the test pool
        record(7, "valid", fn("gamma", body="return a * b")),
    ]
    audit = audit_dataset(_prepared(tmp_path, rows), workers=1, progress=False)
    assert audit["splits"] == ["train", "valid", "test"]  # the empty codebase is not audited
    assert audit["shared_code"]["test_in_train"] == {"exact": 1, "near": 2, "records": 4}
    assert audit["shared_code"]["valid_in_train"] == {"exact": 1, "near": 1, "records": 1}
    assert audit["shared_code"]["test_in_valid"] == {"exact": 0, "near": 0, "records": 4}
    assert audit["pool"] == "test"
    assert audit["pool_duplicates"] == {
        "exact_groups": 1,
        "exact_records": 2,
        "near_groups": 1,
        "near_records": 2,
        "records": 4,
    }
    # comment removal shortens code: the COBE Table I "after" column is smaller for the commented one
    lengths = audit["code_length"]["test"]
    assert lengths["code_no_comment"]["mean"] < lengths["code"]["mean"]


def test_audit_uses_the_codebase_as_pool_when_the_release_has_one(tmp_path: Path) -> None:
    rows = [
        record(0, "test", fn("a")),
        record(1, "codebase", fn("a")),
        record(2, "codebase", fn("a")),
        record(3, "codebase", fn("b", body="return b")),
    ]
    audit = audit_dataset(_prepared(tmp_path, rows), workers=2, progress=False)
    assert audit["pool"] == "codebase"
    assert audit["pool_duplicates"]["exact_records"] == 2 and audit["pool_duplicates"]["records"] == 3


def test_audit_gives_the_same_answer_with_worker_processes(tmp_path: Path) -> None:
    rows = [record(i, ("train", "test")[i % 2], fn(f"f{i % 7}")) for i in range(300)]
    prepared = _prepared(tmp_path, rows)
    assert audit_dataset(prepared, workers=1, progress=False) == audit_dataset(
        prepared, workers=2, progress=False, batch_size=17
    )


def test_card_markdown_reports_the_audit(tmp_path: Path) -> None:
    rows = [record(0, "train", fn("a")), record(1, "test", fn("a")), record(2, "test", fn("a"))]
    audit = audit_dataset(_prepared(tmp_path, rows), workers=1, progress=False)
    card = {"kind": "release", "splits": {"train": {"pairs": 1, "query_tokens": {"mean": 6, "std": 0}}}}
    text = card_markdown("toy", card, audit)
    assert "| test | train | 2 | 2 | 2 |" in text
    assert "2 records in 1 groups of identical code" in text


def test_audit_without_prepared_files_names_the_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run `csbench prepare` first"):
        audit_dataset(tmp_path / "nothing", progress=False)
