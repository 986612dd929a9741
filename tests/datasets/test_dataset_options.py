"""Reader options of the releases (issue 21, item 9): declared, validated, documented, passed on.

Each release declares the options its reader takes (``DatasetSpec.options``). ``csbench validate``
checks a config overlay's ``datasets.<name>`` entries against them before anything runs (file,
line and key in every error; did-you-mean for an unknown key), the README's table is generated
from the same declarations, and ``csbench prepare`` hands the values to the reader.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from projects import bm25_study

from csbench.cli import main
from csbench.datasets import DATASETS
from csbench.datasets.releases import RELEASES

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
RELEASE_DIR = PROJECT_ROOT / "src/csbench/datasets/releases"
LANGS = ("go", "java", "javascript", "php", "python", "ruby")

# What the readers take (their docstrings and code): every one must be declared, nothing else.
EXPECTED = {
    **{f"csn-{lang}": {"splits"} for lang in LANGS},
    **{f"csn-filtered-{lang}": {"splits"} for lang in LANGS},
    **{f"gecs-csn-{lang}": {"file"} for lang in LANGS if lang != "python"},
    "csn-challenge": set(),
    "advtest": {"splits"},
    "cosqa": {"splits"},
    "cosqa-retrieval": {"splits"},
    "cosqa-webquerytest": {"labels"},
    "statcodesearch": {"format", "file"},
    "tl-codesum": {"splits"},
    "funcom": {"splits", "query", "tmp_dir"},
}


# (release, option, a valid value, an invalid value): every declaration's row of the README table
CASES = [
    ("csn-go", "splits", ["valid", "test"], ["tset"]),
    ("advtest", "splits", ["train", "test"], ["training"]),
    ("tl-codesum", "splits", ["test"], "test"),
    ("csn-filtered-ruby", "splits", ["test", "codebase"], ["pool"]),
    ("cosqa", "splits", ["valid"], ["test"]),
    ("cosqa-retrieval", "splits", ["test", "codebase"], ["train"]),
    ("cosqa-webquerytest", "labels", "webquery_answers.txt", 1),
    ("statcodesearch", "format", "gecs", "csv"),
    ("statcodesearch", "file", "/data/statcodesearch.json", ""),
    ("gecs-csn-ruby", "file", "ruby_test_sample.jsonl", ["a.jsonl"]),
    ("funcom", "query", "comment", "summary+comment"),
    ("funcom", "tmp_dir", "/var/tmp", False),
]
IDS = [f"{dataset}.{option}" for dataset, option, _, _ in CASES]


def overlay(dataset: str, entry: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A study of ``dataset`` alone (bm25, ranking only) with ``entry`` as its options."""
    return {**bm25_study("options", dataset, entry, run_depth=100), **extra}


def validate(tmp_path: Path, study: dict[str, Any], capsys, name: str = "study.yaml") -> tuple[int, str, Path]:
    """``csbench validate --config params.yaml --config <study>``: (exit code, stderr, study file)."""
    path = tmp_path / name
    path.write_text(yaml.safe_dump(study, sort_keys=False), encoding="utf-8")
    code = main(["validate", "--config", str(PARAMS), "--config", str(path)])
    return code, capsys.readouterr().err, path


def line_of(path: Path, text: str) -> int:
    """1-based number of the first line of ``path`` that contains ``text``."""
    return 1 + next(i for i, line in enumerate(path.read_text().splitlines()) if text in line)


# --------------------------------------------------------------------------- declarations


def test_each_release_declares_the_options_its_reader_takes() -> None:
    assert {spec.name: {o.name for o in spec.options} for spec in RELEASES} == EXPECTED


@pytest.mark.parametrize("module", sorted(p.name for p in RELEASE_DIR.glob("*.py")))
def test_every_option_a_reader_reads_is_declared(module: str) -> None:
    """The class of the bug: an option read in code (``options.get("x")``, ``options["x"]``) or named
    in a docstring (``options.x``, ``options["x"]``) that no declaration lets the config give."""
    source = (RELEASE_DIR / module).read_text(encoding="utf-8")
    read = set(re.findall(r"options(?:\.get\(|\[)\"(\w+)\"", source)) | set(re.findall(r"options\.(\w+)\b", source))
    read -= {"get"}
    if "selected_splits(options" in source:
        read.add("splits")
    declared = {
        o.name
        for spec in RELEASES
        if spec.reader and spec.reader.__module__.endswith(module[:-3])
        for o in spec.options
    }
    multi_split = [s for s in RELEASES if s.reader and s.reader.__module__.endswith(module[:-3]) and len(s.splits) > 1]
    if not multi_split:  # a single-split release's reader only checks the (pointless) splits option
        read.discard("splits")
    assert read <= declared, f"{module} reads {sorted(read - declared)} without declaring it"


def test_defaults_come_from_the_declarations() -> None:
    assert DATASETS.get("statcodesearch").defaults == {"format": "json", "file": None}
    assert DATASETS.get("funcom").defaults == {"splits": None, "query": "summary", "tmp_dir": None}
    assert DATASETS.get("cosqa-webquerytest").defaults == {"labels": None}
    with pytest.raises(ValueError, match="not declared"):
        dataclasses.replace(DATASETS.get("advtest"), defaults={"nope": 1})
    from csbench.datasets.base import DatasetOption

    with pytest.raises(ValueError, match="default 'xml'"):
        DatasetOption("format", "choice", "x", default="xml", choices=("json",))


def test_the_readme_table_is_generated_from_the_declarations() -> None:
    readme = (PROJECT_ROOT / "docs" / "datasets.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- dataset-options:begin -->\n(.*?)<!-- dataset-options:end -->", readme, re.S)
    assert block, "docs/datasets.md lacks the dataset-options block"
    from csbench.datasets.base import options_markdown

    expected = options_markdown(RELEASES)
    assert block.group(1) == expected, (
        "docs/datasets.md's dataset options table is stale; replace the block with:\n" + expected
    )
    for spec in RELEASES:
        for option in spec.options:
            assert f"`{spec.name}`" in block.group(1) and f"`{option.name}`" in block.group(1)


# --------------------------------------------------------------------------- csbench validate


def test_the_cases_cover_every_declaration() -> None:
    """One case per README row: a new declaration needs a case here."""
    rows: dict[object, list[str]] = {}
    for spec in RELEASES:
        for option in spec.options:
            rows.setdefault(option, []).append(spec.name)
    covered = {(dataset, option) for dataset, option, _, _ in CASES}
    for option, datasets in rows.items():
        assert any((d, option.name) in covered for d in datasets), f"no case for {option.name} of {datasets}"


@pytest.mark.parametrize(("dataset", "option", "good", "bad"), CASES, ids=IDS)
def test_validate_accepts_each_option(dataset, option, good, bad, tmp_path, capsys) -> None:
    code, err, _ = validate(tmp_path, overlay(dataset, {option: good}), capsys)
    assert code == 0, err
    from csbench.config import load_config

    assert load_config([PARAMS, tmp_path / "study.yaml"]).dataset_options(dataset)[option] == good


@pytest.mark.parametrize(("dataset", "option", "good", "bad"), CASES, ids=IDS)
def test_validate_refuses_a_bad_value_naming_file_line_and_key(dataset, option, good, bad, tmp_path, capsys) -> None:
    code, err, path = validate(tmp_path, overlay(dataset, {option: bad}), capsys)
    assert code == 2
    line = line_of(path, f"{option}:")
    assert err.startswith(f"csbench validate: error: {path}:{line}: datasets.{dataset}.{option}: "), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(("dataset", "option", "good", "bad"), CASES, ids=IDS)
def test_validate_suggests_the_option_for_a_misspelt_key(dataset, option, good, bad, tmp_path, capsys) -> None:
    typo = option[:-1]
    code, err, path = validate(tmp_path, overlay(dataset, {typo: good}), capsys)
    assert code == 2
    where = f"{path}:{line_of(path, typo + ':')}: datasets.{dataset}.{typo}: unknown option of release {dataset!r}"
    assert err.startswith(f"csbench validate: error: {where}"), err
    assert f"Did you mean {option!r}?" in err


def test_a_null_option_takes_the_default_only_where_the_default_is_unset(tmp_path, capsys) -> None:
    code, err, _ = validate(tmp_path, overlay("statcodesearch", {"file": None}), capsys)
    assert code == 0, err
    code, err, path = validate(tmp_path, overlay("statcodesearch", {"format": None}), capsys)
    assert code == 2 and f"{path}:{line_of(path, 'format:')}: datasets.statcodesearch.format: must be set" in err


def test_keys_of_the_wrong_kind_of_dataset(tmp_path, capsys) -> None:
    code, err, path = validate(tmp_path, overlay("advtest", {"source": "stdlib"}), capsys)
    assert code == 2
    assert f"{path}:{line_of(path, 'source:')}: datasets.advtest.source: unknown option of release 'advtest'" in err
    assert "'source' is a key of local corpora" in err
    code, err, path = validate(tmp_path, overlay("advtest", {"format": "gecs"}), capsys)
    assert code == 2 and "'format' is an option of statcodesearch" in err
    study = overlay("advtest", {}, datasets={"advtest": {}, "csn-challenge": {"splits": ["test"]}})
    code, err, path = validate(tmp_path, study, capsys)
    assert code == 2 and "release 'csn-challenge' takes no options" in err
    study = overlay("advtest", {}, datasets={"advtest": {}, "python-stdlib": {"format": "json"}})
    code, err, path = validate(tmp_path, study, capsys)
    assert code == 2
    assert f"{path}:{line_of(path, 'format:')}: datasets.python-stdlib: unknown key 'format'; allowed keys:" in err


def test_the_error_names_the_overlay_that_sets_the_key(tmp_path, capsys) -> None:
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(overlay("statcodesearch", {"format": "json"})), encoding="utf-8")
    second = tmp_path / "second.yaml"
    second.write_text("# a later overlay\ndatasets:\n  statcodesearch:\n    format: csv\n", encoding="utf-8")
    assert main(["validate", "--config", str(PARAMS), "--config", str(first), "--config", str(second)]) == 2
    assert f"{second}:4: datasets.statcodesearch.format: 'csv' is not one of json, gecs" in capsys.readouterr().err


def test_splits_must_keep_what_the_runs_read(tmp_path, capsys) -> None:
    code, err, path = validate(tmp_path, overlay("advtest", {"splits": ["train", "valid"]}), capsys)
    assert code == 2
    assert f"{path}:{line_of(path, 'splits:')}: datasets.advtest.splits: leaves out 'test'" in err
    trained = overlay("advtest", {"splits": ["valid", "test"]})
    trained["grid"]["trained"] = {"models": ["nbow"], "attacks": ["none"], "inference": ["confused"]}
    code, err, _ = validate(tmp_path, trained, capsys)
    assert code == 2 and "datasets.advtest.splits: leaves out 'train'" in err
    code, err, _ = validate(tmp_path, overlay("advtest", {"splits": ["valid", "test"]}), capsys)
    assert code == 0, err


# --------------------------------------------------------------------------- the option reaches the reader


def prepare(project: Path, dataset: str, entry: dict[str, Any], files: dict[str, Path], monkeypatch) -> int:
    """``csbench prepare`` of ``dataset`` in ``project`` with the release ``files`` placed under
    ``data/raw/<dataset>/`` (a copy each) and ``entry`` as its options; the exit code."""
    raw = project / "data/raw" / dataset
    for relative, source in files.items():
        (raw / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, raw / relative)
    raw.mkdir(parents=True, exist_ok=True)
    # what `csbench download` records, written directly: prepare only needs the record
    (raw / "MANIFEST.json").write_text(json.dumps({"dataset": dataset, "files": []}), encoding="utf-8")
    (project / "study.yaml").write_text(yaml.safe_dump(overlay(dataset, entry)), encoding="utf-8")
    monkeypatch.chdir(project)
    return main(["--quiet", "prepare", "--config", str(PARAMS), "--config", "study.yaml", "--dataset", dataset])


def prepared(project: Path, dataset: str, split: str) -> pd.DataFrame:
    return pd.read_parquet(project / "data/prepared" / dataset / f"{split}.parquet")


def test_format_and_file_reach_the_statcodesearch_reader(shared_data, tmp_path, monkeypatch) -> None:
    files = {
        "sample.json": shared_data / "statcodesearch/sample.json",
        "sample_gecs.jsonl": shared_data / "statcodesearch/sample_gecs_format.jsonl",
    }
    entry = {"format": "gecs", "file": "sample_gecs.jsonl"}
    assert prepare(tmp_path / "a", "statcodesearch", entry, files, monkeypatch) == 0
    gecs = prepared(tmp_path / "a", "statcodesearch", "test")
    assert gecs["id"].str.startswith("statcodesearch:").all() and len(gecs) == 60
    assert prepare(tmp_path / "b", "statcodesearch", {"file": "sample.json"}, files, monkeypatch) == 0
    plain = prepared(tmp_path / "b", "statcodesearch", "test")
    assert len(plain) == 60 and plain["repo"].str.len().gt(0).all()  # the json format's Source column
    assert prepare(tmp_path / "c", "statcodesearch", {"format": "gecs"}, files, monkeypatch) == 2  # its default file


def test_file_reaches_the_gecs_csn_reader(shared_data, tmp_path, monkeypatch) -> None:
    sample = shared_data / "codesearchnet/gecs_samples/ruby_test_sample.jsonl"
    entry = {"file": "ruby_test_sample.jsonl"}
    assert prepare(tmp_path, "gecs-csn-ruby", entry, {"ruby_test_sample.jsonl": sample}, monkeypatch) == 0
    positives = sum(json.loads(line)["target"] == 1 for line in sample.read_text().splitlines() if line.strip())
    assert len(prepared(tmp_path, "gecs-csn-ruby", "test")) == positives


def test_splits_reach_the_readers(shared_data, tmp_path, monkeypatch) -> None:
    ruby = {
        "dataset/ruby/test.jsonl": shared_data / "codesearchnet/ruby/test.jsonl",
        "dataset/ruby/valid.jsonl": shared_data / "codesearchnet/ruby/valid.jsonl",
    }
    assert prepare(tmp_path / "a", "csn-filtered-ruby", {}, ruby, monkeypatch) == 2  # no train.jsonl
    assert prepare(tmp_path / "b", "csn-filtered-ruby", {"splits": ["valid", "test"]}, ruby, monkeypatch) == 0
    assert (
        len(prepared(tmp_path / "b", "csn-filtered-ruby", "test")),
        len(prepared(tmp_path / "b", "csn-filtered-ruby", "valid")),
    ) == (1261, 1400)
    cosqa = {"cosqa-dev.json": shared_data / "cosqa/cosqa-dev.json"}
    assert prepare(tmp_path / "c", "cosqa", {"splits": ["valid"]}, cosqa, monkeypatch) == 0  # no cosqa-train.json
    assert len(prepared(tmp_path / "c", "cosqa", "valid")) == 313


def test_query_and_tmp_dir_reach_the_funcom_reader(tmp_path, monkeypatch) -> None:
    from test_releases_funcom import write_funcom

    release = tmp_path / "release"
    write_funcom(release, 40)
    files = {str(p.relative_to(release)): p for p in release.rglob("*") if p.is_file()}
    assert prepare(tmp_path / "a", "funcom", {"query": "comment"}, files, monkeypatch) == 0
    comment = prepared(tmp_path / "a", "funcom", "test")
    assert len(comment) == 2 and comment["query"].str.contains("@param a the value").all()  # the whole comment
    missing = tmp_path / "no-such-dir"
    assert prepare(tmp_path / "b", "funcom", {"tmp_dir": str(missing)}, files, monkeypatch) == 2
    assert prepare(tmp_path / "c", "funcom", {"tmp_dir": str(tmp_path)}, files, monkeypatch) == 0
    summary = prepared(tmp_path / "c", "funcom", "test")  # the default query: the Javadoc's summary
    assert summary["id"].tolist() == comment["id"].tolist()
    assert summary["query"].tolist() == [f"Returns the value plus {i}. Never fails." for i in (0, 20)]
