"""Funcom: streamed join of ``functions.json`` and ``comments.json`` (JSON objects fid -> text) with the
split files of the tokenized release, in bounded memory (SPEC: "the pipeline must stream it")."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from csbench.datasets.base import RECORD_COLUMNS, SPLITS, ReaderError, SkipReport
from csbench.datasets.releases.funcom import COMMENTS, FUNCTIONS, read_funcom, split_file

PEAK_BOUND = 50 * 2**20  # bytes of traced Python memory while reading, whatever the input size


def split_of(i: int) -> str:
    return "test" if i % 20 == 0 else "valid" if i % 20 == 1 else "train"


def write_funcom(root: Path, n: int) -> Counter:
    """A Funcom release of ``n`` methods, written record by record (never built in memory)."""
    (root / "funcom_processed").mkdir(parents=True, exist_ok=True)
    splits = {}
    for split in SPLITS:
        (root / split_file(split)).parent.mkdir(parents=True, exist_ok=True)
        splits[split] = open(root / split_file(split), "w", encoding="utf-8")  # noqa: SIM115
    counts: Counter = Counter()
    with open(root / FUNCTIONS, "w", encoding="utf-8") as functions, open(root / COMMENTS, "w") as comments:
        functions.write("{")
        comments.write("{")
        for i in range(n):
            fid = json.dumps(str(100000 + i))
            sep = ", " if i else ""
            code = f"public int plus{i}(int a) {{\n    // add\n    return a + {i};\n}}"
            comment = f"/**\n * Returns the value plus {i}.\n * Never fails.\n *\n * @param a the value\n */"
            functions.write(f"{sep}{fid}: {json.dumps(code)}")
            comments.write(f"{sep}{fid}: {json.dumps(comment)}")
            splits[split_of(i)].write(f"{100000 + i}\t<s> returns the value plus {i} . </s>\n")
            counts[split_of(i)] += 1
        functions.write("}")
        comments.write("}")
    for handle in splits.values():
        handle.close()
    return counts


def traced_read(root: Path) -> tuple[int, Counter, int, SkipReport]:
    report = SkipReport()
    per_split: Counter = Counter()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for record in read_funcom(root, {}, report):
            per_split[record["split"]] += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return sum(per_split.values()), per_split, peak, report


def test_funcom_records(tmp_path):
    write_funcom(tmp_path, 40)
    records = list(read_funcom(tmp_path, {}, SkipReport()))
    assert len(records) == 40
    first = records[0]
    assert tuple(first) == RECORD_COLUMNS
    assert first["id"] == "funcom:100000" and first["split"] == "test" and first["language"] == "java"
    assert first["query"] == "Returns the value plus 0. Never fails."
    assert first["code"].startswith("public int plus0(int a)") and first["docstring"].startswith("/**")
    whole = list(read_funcom(tmp_path, {"query": "comment", "splits": ["valid"]}, SkipReport()))
    assert [r["id"] for r in whole] == ["funcom:100001", "funcom:100021"]
    assert whole[0]["query"].startswith("/** * Returns the value plus 1.")


def test_funcom_memory_does_not_grow_with_input(tmp_path):
    small, large = tmp_path / "small", tmp_path / "large"
    small_counts = write_funcom(small, 10_000)
    large_counts = write_funcom(large, 100_000)
    n_small, per_small, peak_small, report_small = traced_read(small)
    n_large, per_large, peak_large, report_large = traced_read(large)
    assert (n_small, n_large) == (10_000, 100_000)
    assert per_small == small_counts and per_large == large_counts
    assert not report_small.counts and not report_large.counts
    assert peak_large < PEAK_BOUND
    # Ten times the input, about the same peak: nothing proportional to the input is held.
    assert peak_large < 1.5 * peak_small + 2**20, (peak_small, peak_large)


def test_funcom_bad_records(tmp_path):
    write_funcom(tmp_path, 3)  # fids 100000..100002
    functions = {
        "100000": "int a() { return 0; }",
        "100001": "int b() { return 1; }",  # its comment has only block tags: empty query
        "100002": "   ",  # empty code
        "100003": "int d() { return 3; }",  # in no split file
        "100004": "int e() { return 4; }",  # in a split file, but no comment
        "100005": 5,  # not a string: empty code
    }
    comments = {"100000": "/** Zero. */", "100001": "/**\n * @return one\n */", "100002": "/** Two. */"}
    (tmp_path / FUNCTIONS).write_text(json.dumps(functions) + "\n")
    (tmp_path / COMMENTS).write_text(json.dumps(comments) + "\n")
    with open(tmp_path / split_file("train"), "a") as handle:
        handle.write("100004\t<s> e </s>\n100005\t<s> f </s>\nno-tab-line\n")
    report = SkipReport()
    records = list(read_funcom(tmp_path, {}, report))
    assert [r["id"] for r in records] == ["funcom:100000"]
    assert report.counts == {
        "empty query": 1,
        "empty code": 2,
        "not in any split file": 1,
        "no comment for function": 1,
        "missing field 'fid' (no tab)": 1,
    }
    assert "functions.json: not in any split file (id 100003)" in report.examples
    assert any(e.startswith("comments.train:") and "no tab" in e for e in report.examples)


def test_funcom_duplicate_fid_is_skipped(tmp_path):
    write_funcom(tmp_path, 2)
    (tmp_path / FUNCTIONS).write_text('{"100000": "int a() {}", "100001": "int b() {}", "100000": "int c() {}"}')
    report = SkipReport()
    records = list(read_funcom(tmp_path, {}, report))
    assert [r["code"] for r in records] == ["int a() {}", "int b() {}"]
    assert report.counts == {"duplicate id": 1}


def test_funcom_unusable_files_raise(tmp_path):
    write_funcom(tmp_path, 3)
    (tmp_path / COMMENTS).write_text('{"100000": "/** Zero. */", "100001": ')
    with pytest.raises(ReaderError, match=r"comments\.json: not a valid JSON object"):
        list(read_funcom(tmp_path, {}, SkipReport()))
    (tmp_path / split_file("valid")).unlink()
    with pytest.raises(ReaderError, match=r"comments\.valid: missing file of dataset 'funcom'"):
        list(read_funcom(tmp_path, {}, SkipReport()))
    with pytest.raises(ReaderError, match=r"options\.query"):
        list(read_funcom(tmp_path, {"query": "first-line"}, SkipReport()))
