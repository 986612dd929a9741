"""Released datasets (``csbench.datasets.releases``): metadata, and the readers on the real files in
``../shared/data`` laid out under a raw directory as each release lays them out.

SPEC "Datasets": one record schema; official splits; pools as split ``codebase`` matched by url;
bad records are counted skips naming file and line, unusable files raise ``ReaderError``.
Malformed-input and Funcom streaming tests are in ``test_releases_malformed.py`` and
``test_releases_funcom.py``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from csbench.datasets.base import POOL_SPLIT, RECORD_COLUMNS, SkipReport
from csbench.datasets.releases import RELEASES
from csbench.datasets.releases._formats import read_labelled_pairs
from csbench.datasets.releases.csn_challenge import (
    ANNOTATION_COLUMNS,
    EXPECTED_ANNOTATIONS,
    EXPECTED_QUERIES,
    load_annotations,
    load_queries,
)

SPECS = {spec.name: spec for spec in RELEASES}
LANGS = ("go", "java", "javascript", "php", "python", "ruby")
GECS_LANGS = ("go", "java", "javascript", "php", "ruby")


def layout(root: Path, files: dict[str, Path]) -> Path:
    """A raw directory holding ``files`` (relative path -> real file) as symbolic links."""
    for relative, source in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source)
    return root


def read(name: str, raw_dir: Path, **options) -> tuple[list[dict], SkipReport]:
    report = SkipReport()
    records = list(SPECS[name].reader(raw_dir, options, report))
    return records, report


def check_records(records: list[dict], pool_may_lack_query: bool = True) -> None:
    """Every record: exactly RECORD_COLUMNS, text values, non-empty code and query, unique ids per split."""
    seen: dict[str, set[str]] = {}
    for record in records:
        assert tuple(record) == RECORD_COLUMNS
        assert all(isinstance(value, str) for value in record.values())
        assert record["code"].strip()
        if not (pool_may_lack_query and record["split"] == POOL_SPLIT):
            assert record["query"].strip()
        ids = seen.setdefault(record["split"], set())
        assert record["id"] not in ids
        ids.add(record["id"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- metadata


def test_registry_names():
    names = [spec.name for spec in RELEASES]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) for name in names)
    expected = {
        *(f"csn-{lang}" for lang in LANGS),
        *(f"csn-filtered-{lang}" for lang in LANGS),
        *(f"gecs-csn-{lang}" for lang in GECS_LANGS),
        "csn-challenge",
        "advtest",
        "cosqa",
        "cosqa-retrieval",
        "cosqa-webquerytest",
        "statcodesearch",
        "tl-codesum",
        "funcom",
    }
    assert set(names) == expected


@pytest.mark.parametrize("spec", RELEASES, ids=lambda spec: spec.name)
def test_spec_metadata(spec):
    assert spec.kind == "release"
    assert spec.languages and spec.description and spec.licence and spec.citation and spec.homepage
    assert set(spec.expected_counts) <= set(spec.splits)
    assert (spec.reader is None) == (spec.name == "csn-challenge")
    assert spec.files
    paths = [file.path for file in spec.files]
    assert len(paths) == len(set(paths))
    for file in spec.files:
        assert not Path(file.path).is_absolute() and ".." not in Path(file.path).parts
        assert all(url.startswith("https://") or url.startswith("http://") for url in file.urls)
        if file.sha256 is None:
            assert "not pinned" in file.note.lower()
        else:
            assert re.fullmatch(r"[0-9a-f]{64}", file.sha256)
        if not file.urls:
            assert "derived" in file.note


def test_published_counts():
    assert SPECS["advtest"].expected_counts == {"train": 251820, "valid": 9604, "test": 19210}
    assert SPECS["tl-codesum"].expected_counts == {"train": 69708, "valid": 8714, "test": 8714}
    assert SPECS["cosqa-retrieval"].expected_counts[POOL_SPLIT] == 6267
    assert SPECS["csn-filtered-ruby"].expected_counts == {"train": 24927, "valid": 1400, "test": 1261, POOL_SPLIT: 4360}
    assert SPECS["csn-filtered-python"].expected_counts[POOL_SPLIT] == 43827
    assert SPECS["statcodesearch"].expected_counts == {"test": 1070}


PINNED_COPIES = {
    ("csn-challenge", "queries.csv"): "codesearchnet/challenge/queries.csv",
    ("csn-challenge", "annotationStore.csv"): "codesearchnet/challenge/annotationStore.csv",
    ("cosqa", "cosqa-dev.json"): "cosqa/cosqa-dev.json",
    ("cosqa-retrieval", "code_idx_map.txt"): "cosqa/code_idx_map.txt",
    ("cosqa-retrieval", "cosqa-retrieval-dev-500.json"): "cosqa/cosqa-retrieval-dev-500.json",
    ("csn-filtered-ruby", "dataset/ruby/test.jsonl"): "codesearchnet/ruby/test.jsonl",
    ("csn-filtered-ruby", "dataset/ruby/valid.jsonl"): "codesearchnet/ruby/valid.jsonl",
    ("tl-codesum", "data/valid/valid.token.code"): "tl_codesum/valid.token.code",
    ("tl-codesum", "data/valid/valid.token.nl"): "tl_codesum/valid.token.nl",
}


def test_pinned_checksums_match_shared_copies(shared_data):
    pinned = {(spec.name, f.path): f for spec in RELEASES for f in spec.files if f.sha256}
    # the others are pinned from their public repositories (tests/datasets/test_release_checksums.py)
    assert set(PINNED_COPIES) <= set(pinned)
    for key, relative in PINNED_COPIES.items():
        copy = shared_data / relative
        assert sha256(copy) == pinned[key].sha256, key
        assert copy.stat().st_size == pinned[key].size, key


# --------------------------------------------------------------------------- CodeSearchNet


def test_csn_filtered_ruby(shared_data, tmp_path):
    raw = layout(
        tmp_path,
        {
            "dataset/ruby/test.jsonl": shared_data / "codesearchnet/ruby/test.jsonl",
            "dataset/ruby/valid.jsonl": shared_data / "codesearchnet/ruby/valid.jsonl",
        },
    )
    records, report = read("csn-filtered-ruby", raw, splits=["valid", "test"])
    assert Counter(r["split"] for r in records) == {"valid": 1400, "test": 1261}
    assert sum(report.counts.values()) == 0
    check_records(records)
    assert {r["language"] for r in records} == {"ruby"}
    first = json.loads((shared_data / "codesearchnet/ruby/valid.jsonl").open().readline())
    record = records[0]
    assert record["query"] == " ".join(first["docstring_tokens"])
    assert record["code"] == first["code"] and record["docstring"] == first["docstring"]
    assert record["id"] == record["url"] == first["url"]
    assert (record["func_name"], record["repo"], record["path"]) == (first["func_name"], first["repo"], first["path"])


def _write_gz_part(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(line if line.endswith("\n") else line + "\n" for line in lines)


def test_csn_original_layout_and_url_list_filter(shared_data, tmp_path):
    """csn-ruby reads {lang}/final/jsonl/{split}/*.jsonl.gz in part order; csn-filtered-ruby applies a URL
    list to that release when the filtered jsonl is absent."""
    lines = (shared_data / "codesearchnet/ruby/test.jsonl").read_text(encoding="utf-8").splitlines()
    base = tmp_path / "ruby" / "final" / "jsonl"
    _write_gz_part(base / "test" / "ruby_test_0.jsonl.gz", lines[:600])
    _write_gz_part(base / "test" / "ruby_test_10.jsonl.gz", lines[900:])
    _write_gz_part(base / "test" / "ruby_test_2.jsonl.gz", lines[600:900])
    other = (shared_data / "codesearchnet/ruby/valid.jsonl").read_text(encoding="utf-8").splitlines()[:5]
    _write_gz_part(base / "train" / "ruby_train_0.jsonl.gz", other)
    _write_gz_part(base / "valid" / "ruby_valid_0.jsonl.gz", [])
    records, report = read("csn-ruby", tmp_path)
    test = [r for r in records if r["split"] == "test"]
    assert [r["url"] for r in test] == [json.loads(line)["url"] for line in lines]  # parts 0, 2, 10
    assert Counter(r["split"] for r in records) == {"test": 1261, "train": 5}
    check_records(records)

    listed = [json.loads(line)["url"] for line in lines[::3]]
    url_list = tmp_path / "dataset" / "ruby" / "test.txt"
    url_list.parent.mkdir(parents=True)
    url_list.write_text("\n".join([*listed, "https://github.com/nowhere/none.rb#L1-L2"]) + "\n", encoding="utf-8")
    records, report = read("csn-filtered-ruby", tmp_path, splits=["test"])
    assert sorted(r["url"] for r in records) == sorted(listed)
    assert {r["split"] for r in records} == {"test"}
    assert report.counts == {"listed url not in the original release": 1}


# --------------------------------------------------------------------------- GeCS / AdvTest


@pytest.mark.parametrize("lang", GECS_LANGS)
def test_gecs_samples(shared_data, tmp_path, lang):
    sample = f"{lang}_test_sample.jsonl"
    raw = layout(tmp_path, {sample: shared_data / "codesearchnet/gecs_samples" / sample})
    records, report = read(f"gecs-csn-{lang}", raw, file=sample)
    lines = (raw / sample).read_text(encoding="utf-8").splitlines()
    positives = sum(json.loads(line)["target"] == 1 for line in lines)
    assert len(lines) == 100
    assert len(records) == positives
    assert len(records) + report.counts["negative pair"] == 100
    assert sum(report.counts.values()) == report.counts["negative pair"]
    check_records(records)
    assert {r["language"] for r in records} == {lang}
    text, code = json.loads(lines[0])["input"].split(" [SEP] ", 1)
    assert (records[0]["query"], records[0]["code"]) == (text.strip(), code)


def test_advtest_train_sample(shared_data, tmp_path):
    raw = layout(tmp_path, {"dataset/train.jsonl": shared_data / "advtest/train_sample.jsonl"})
    records, report = read("advtest", raw, splits=["train"])
    assert len(records) == 100 and not report.counts
    check_records(records)
    first = json.loads((raw / "dataset/train.jsonl").open().readline())
    assert records[0]["code"] == first["code"]
    assert records[0]["query"] == " ".join(first["docstring_tokens"])


def test_advtest_keeps_normalised_function(tmp_path):
    """valid / test of AdvTest store the normalised code as ``function``."""
    line = {
        "url": "u1",
        "function": "def Func(arg_0):\n    return arg_0",
        "original_string": "def add(x):\n    return x",
        "docstring_tokens": ["Add", "it"],
    }
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset/test.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    records, _ = read("advtest", tmp_path, splits=["test"])
    assert records[0]["code"] == line["function"]


# --------------------------------------------------------------------------- CoSQA


def test_cosqa_dev(shared_data, tmp_path):
    raw = layout(tmp_path, {"cosqa-dev.json": shared_data / "cosqa/cosqa-dev.json"})
    records, report = read("cosqa", raw, splits=["valid"])
    labels = Counter(item["label"] for item in json.loads((raw / "cosqa-dev.json").read_text(encoding="utf-8")))
    assert len(records) == labels[1] == 313
    assert report.counts == {"negative pair": labels[0]}
    assert len(records) + report.counts["negative pair"] == 604
    check_records(records)


def test_cosqa_retrieval_dev_against_pool(shared_data, tmp_path):
    raw = layout(
        tmp_path,
        {
            "code_idx_map.txt": shared_data / "cosqa/code_idx_map.txt",
            "cosqa-retrieval-dev-500.json": shared_data / "cosqa/cosqa-retrieval-dev-500.json",
        },
    )
    records, report = read("cosqa-retrieval", raw, splits=["valid", POOL_SPLIT])
    assert not report.counts
    check_records(records)
    pool = {r["url"]: r for r in records if r["split"] == POOL_SPLIT}
    queries = [r for r in records if r["split"] == "valid"]
    assert len(pool) == 6267 and len(queries) == 500
    for query in queries:
        assert query["url"] in pool
        assert pool[query["url"]]["code"] == query["code"]  # CoCLR's pool key is the code itself


# --------------------------------------------------------------------------- StatCodeSearch, TL-CodeSum


def test_statcodesearch_json_and_gecs_agree(shared_data, tmp_path):
    raw = layout(
        tmp_path,
        {
            "sample.json": shared_data / "statcodesearch/sample.json",
            "sample_gecs_format.jsonl": shared_data / "statcodesearch/sample_gecs_format.jsonl",
        },
    )
    from_json, report_json = read("statcodesearch", raw, file="sample.json")
    from_gecs, report_gecs = read("statcodesearch", raw, format="gecs", file="sample_gecs_format.jsonl")
    assert len(from_json) == len(from_gecs) == 60
    assert not report_json.counts and not report_gecs.counts
    check_records(from_json)
    check_records(from_gecs)
    assert [(r["query"], r["code"]) for r in from_json] == [(r["query"], r["code"]) for r in from_gecs]
    assert from_json[0]["repo"].startswith("https://osf.io/") and from_json[0]["language"] == "r"


def test_tl_codesum_valid(shared_data, tmp_path):
    raw = layout(
        tmp_path,
        {
            "data/valid/valid.token.code": shared_data / "tl_codesum/valid.token.code",
            "data/valid/valid.token.nl": shared_data / "tl_codesum/valid.token.nl",
        },
    )
    records, report = read("tl-codesum", raw, splits=["valid"])
    assert len(records) == 8714 and not report.counts
    check_records(records)
    nl_ids = [line.split("\t", 1)[0] for line in (raw / "data/valid/valid.token.nl").read_text().splitlines()]
    code_ids = [line.split("\t", 1)[0] for line in (raw / "data/valid/valid.token.code").read_text().splitlines()]
    assert nl_ids == code_ids
    assert [r["id"] for r in records] == [f"tl-codesum:{i}" for i in nl_ids]


# --------------------------------------------------------------------------- CodeSearchNet Challenge


def test_challenge_files(shared_data):
    queries = load_queries(shared_data / "codesearchnet/challenge/queries.csv")
    assert len(queries) == EXPECTED_QUERIES == 99
    assert queries[0] == "convert int to string" and all(q.strip() for q in queries)
    annotations = load_annotations(shared_data / "codesearchnet/challenge/annotationStore.csv")
    assert len(annotations) == EXPECTED_ANNOTATIONS == 4006
    assert tuple(annotations.columns) == ANNOTATION_COLUMNS
    assert annotations["Relevance"].between(0, 3).all()
    assert str(annotations["Relevance"].dtype) == "int64"
    assert annotations["GitHubUrl"].str.startswith("https://github.com/").all()
    assert set(annotations["Query"]) <= {q for q in queries} | {q.lower() for q in queries}


# --------------------------------------------------------------------------- labelled pairs


def test_read_labelled_pairs_on_real_files(shared_data):
    gecs = list(read_labelled_pairs(shared_data / "codesearchnet/gecs_samples/ruby_test_sample.jsonl"))
    assert len(gecs) == 100 and [line for *_, line in gecs] == list(range(1, 101))
    cosqa = list(read_labelled_pairs(shared_data / "cosqa/cosqa-dev.json"))
    assert len(cosqa) == 604 and Counter(label for _, _, label, _ in cosqa) == {1: 313, 0: 291}
    stat_json = list(read_labelled_pairs(shared_data / "statcodesearch/sample.json"))
    stat_gecs = list(read_labelled_pairs(shared_data / "statcodesearch/sample_gecs_format.jsonl"))
    assert len(stat_json) == len(stat_gecs) == 60
    assert {label for _, _, label, _ in stat_json + stat_gecs} == {1}
    assert [(q.strip(), c) for q, c, _, _ in stat_json] == [(q.strip(), c) for q, c, _, _ in stat_gecs]
