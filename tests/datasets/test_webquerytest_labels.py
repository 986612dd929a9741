"""WebQueryTest's match labels (issue 21, item 3): a label-0 pair is not a record.

``test_webquery.json`` comes in two public copies: CodeXGLUE's ``data/test_webquery.json`` (``idx``,
``doc``, ``code``; code flattened onto one line; no labels, its leaderboard keeps them) and the one in
the first commit of the CoCLR repository (``data/qa/test_webquery.json``: ``idx, doc, code, label,
code_tokens, docstring_tokens``; 422 of 1,046 pairs labelled 1). CodeXGLUE's evaluator reads labels
from an answers file of ``idx<TAB>label`` lines. The files here are built in those formats from the
real CoSQA dev pairs of ``../shared/data/cosqa/cosqa-dev.json`` (same fields, human labels: 313 of
604 are 1), renamed ``webquery-test-<n>`` as the release names its pairs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from projects import bm25_study

from csbench.cli import main
from csbench.datasets import DATASETS
from csbench.datasets.base import ReaderError, SkipReport

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NAME = "cosqa-webquerytest"


@pytest.fixture(scope="module")
def dev_pairs(shared_data: Path) -> list[dict[str, Any]]:
    """The CoSQA dev pairs as WebQueryTest pairs: ``webquery-test-<n>``, CoCLR's field order."""
    pairs = json.loads((shared_data / "cosqa/cosqa-dev.json").read_text(encoding="utf-8"))
    keys = ("idx", "doc", "code", "label", "code_tokens", "docstring_tokens")
    return [{**{k: p[k] for k in keys}, "idx": f"webquery-test-{n}"} for n, p in enumerate(pairs, start=1)]


def write_labelled(raw: Path, pairs: list[dict[str, Any]]) -> Path:
    """CoCLR's copy: every pair with its ``label``, a JSON array indented by one space."""
    raw.mkdir(parents=True, exist_ok=True)
    path = raw / "test_webquery.json"
    path.write_text(json.dumps(pairs, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def write_unlabelled(raw: Path, pairs: list[dict[str, Any]]) -> Path:
    """CodeXGLUE's copy: idx, doc and code (its newlines replaced by spaces), no label."""
    raw.mkdir(parents=True, exist_ok=True)
    path = raw / "test_webquery.json"
    plain = [{"idx": p["idx"], "doc": p["doc"], "code": p["code"].replace("\n", " ")} for p in pairs]
    path.write_text(json.dumps(plain, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def write_answers(path: Path, labels: dict[str, int]) -> Path:
    """CodeXGLUE's answers format (evaluator/webquery_answers.txt): ``idx<TAB>label`` lines."""
    path.write_text("".join(f"{idx}\t{label}\n" for idx, label in labels.items()), encoding="utf-8")
    return path


def read(raw: Path, **options: Any) -> tuple[list[dict], SkipReport]:
    report = SkipReport()
    return list(DATASETS.get(NAME).reader(raw, options, report)), report


def positives(pairs: list[dict[str, Any]]) -> list[str]:
    return [p["idx"] for p in pairs if p["label"] == 1]


# --------------------------------------------------------------------------- the reader


def test_the_labelled_file_keeps_only_its_label_1_pairs(dev_pairs, tmp_path) -> None:
    raw = tmp_path / "raw"
    write_labelled(raw, dev_pairs)
    records, report = read(raw)
    assert [r["id"] for r in records] == positives(dev_pairs)
    assert len(records) == 313 and report.counts == {"negative pair": 291}
    negative = next(p for p in dev_pairs if p["label"] == 0)
    assert negative["idx"] not in {r["id"] for r in records}
    assert any(e.startswith("test_webquery.json:") and "negative pair" in e for e in report.examples)


def test_a_labels_file_labels_codexglues_unlabelled_copy(dev_pairs, tmp_path) -> None:
    raw = tmp_path / "raw"
    write_unlabelled(raw, dev_pairs)
    write_answers(raw / "answers.txt", {p["idx"]: p["label"] for p in dev_pairs})
    records, report = read(raw, labels="answers.txt")
    assert [r["id"] for r in records] == positives(dev_pairs)
    assert report.counts == {"negative pair": 291}
    unlabelled, report = read(raw)  # no label anywhere: every pair, as documented
    assert len(unlabelled) == 604 and not report.counts


def test_file_and_labels_file_that_agree_or_complete_each_other(dev_pairs, tmp_path) -> None:
    raw = tmp_path / "raw"
    write_labelled(raw, dev_pairs)
    write_answers(raw / "all.txt", {p["idx"]: p["label"] for p in dev_pairs})
    assert [r["id"] for r in read(raw, labels="all.txt")[0]] == positives(dev_pairs)
    write_answers(raw / "some.txt", {p["idx"]: p["label"] for p in dev_pairs[:5]})  # like CodeXGLUE's 5 lines
    assert [r["id"] for r in read(raw, labels="some.txt")[0]] == positives(dev_pairs)


def test_file_and_labels_file_that_disagree_name_both_and_the_idx(dev_pairs, tmp_path) -> None:
    raw = tmp_path / "raw"
    path = write_labelled(raw, dev_pairs)
    negative = next(i for i, p in enumerate(dev_pairs) if i > 0 and p["label"] == 0)
    idx = dev_pairs[negative]["idx"]
    answers = write_answers(raw / "answers.txt", {dev_pairs[0]["idx"]: dev_pairs[0]["label"], idx: 1})
    with pytest.raises(ReaderError) as err:
        read(raw, labels="answers.txt")
    lines = path.read_text(encoding="utf-8").splitlines()
    line = lines.index(f'  "idx": "{idx}",')  # 1-based: the line of the pair's "{", just above
    assert str(err.value).startswith(f"{path}:{line}: idx {idx!r} is labelled 0 here but 1 in {answers}:2 ")


def test_pairs_without_a_usable_label_in_a_labelled_file_are_counted(dev_pairs, tmp_path) -> None:
    pairs = [dict(p) for p in dev_pairs[:10]]
    del pairs[1]["label"]
    pairs[3]["label"] = 2
    pairs[5]["label"] = "1"  # CodeXGLUE's reader takes str(label): a digit string is a label
    raw = tmp_path / "raw"
    write_labelled(raw, pairs)
    records, report = read(raw)
    kept = [p["idx"] for i, p in enumerate(pairs) if i not in (1, 3) and str(p["label"]) == "1"]
    assert [r["id"] for r in records] == kept
    assert report.counts["no label"] == 1 and report.counts["label is not 0 or 1"] == 1
    assert report.counts["negative pair"] == sum(1 for i, p in enumerate(pairs) if i not in (1, 3) and p["label"] == 0)


# --------------------------------------------------------------------------- through the CLI


def _prepare(project: Path, overlay: dict[str, Any], monkeypatch) -> int:
    """``csbench validate`` then ``csbench prepare`` of the dataset in ``project``: prepare's exit code."""
    (project / "study.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    # prepare reads what `csbench download` records; the data here is built, not the release, so
    # the record is written directly (download would check it against the release's checksum)
    (project / "data/raw" / NAME / "MANIFEST.json").write_text(json.dumps({"dataset": NAME, "files": []}))
    monkeypatch.chdir(project)
    configs = ["--config", str(PROJECT_ROOT / "params.yaml"), "--config", "study.yaml"]
    assert main(["validate", *configs]) == 0
    return main(["--quiet", "prepare", *configs, "--dataset", NAME])


def _test_split(project: Path) -> list[str]:
    return pd.read_parquet(project / "data/prepared" / NAME / "test.parquet")["id"].tolist()


def _study(options: dict[str, Any]) -> dict[str, Any]:
    return bm25_study("webquery", NAME, options, run_depth=10)


def test_prepare_keeps_the_matches_of_the_labelled_file(dev_pairs, tmp_path, monkeypatch) -> None:
    write_labelled(tmp_path / "data/raw" / NAME, dev_pairs)
    assert _prepare(tmp_path, _study({}), monkeypatch) == 0
    ids = _test_split(tmp_path)
    assert ids == positives(dev_pairs) and len(ids) == 313
    assert not set(ids) & {p["idx"] for p in dev_pairs if p["label"] == 0}


def test_prepare_with_the_labels_option(dev_pairs, tmp_path, monkeypatch) -> None:
    raw = tmp_path / "data/raw" / NAME
    write_unlabelled(raw, dev_pairs)
    write_answers(raw / "webquery_answers.txt", {p["idx"]: p["label"] for p in dev_pairs})
    assert _prepare(tmp_path, _study({"labels": "webquery_answers.txt"}), monkeypatch) == 0
    assert _test_split(tmp_path) == positives(dev_pairs)


def test_prepare_refuses_labels_that_disagree(dev_pairs, tmp_path, monkeypatch, capsys) -> None:
    raw = tmp_path / "data/raw" / NAME
    write_labelled(raw, dev_pairs)
    write_answers(raw / "answers.txt", {p["idx"]: 1 - p["label"] for p in dev_pairs[:3]})
    assert _prepare(tmp_path, _study({"labels": "answers.txt"}), monkeypatch) == 2
    err = capsys.readouterr().err
    first = dev_pairs[0]
    assert f"csbench prepare: error: {Path('data/raw') / NAME / 'test_webquery.json'}:" in err
    assert f"idx {first['idx']!r} is labelled {first['label']} here but {1 - first['label']} in " in err
    assert f"{Path('data/raw') / NAME / 'answers.txt'}:1 (options.labels)" in err
