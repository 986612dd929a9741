"""A downloaded release through the whole pipeline, with files placed by hand (the offline path).

csn-filtered-ruby: the real, complete test and valid files (CodeXGLUE's filtered CodeSearchNet, their
checksums pinned) from ../shared/data, read with `splits: [valid, test]`, so download needs nothing
else: neither the 111 MB ruby.zip nor the filter kits (issue 21, item 8). (This test used CoSQA
retrieval with a copy of the dev queries standing in for the test queries, accepted on first use;
the test file is now pinned, from CoCLR's repository, and no stand-in passes.)
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml
from test_drivers import BIN, _copy_project, _run, snakemake_jobs

pytestmark = pytest.mark.e2e

STUDY = {
    "study": "csn-ruby-placed",
    "grid": {"datasets": ["csn-filtered-ruby"], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
    "datasets": {"csn-filtered-ruby": {"splits": ["valid", "test"]}},
    "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
}


def test_csn_filtered_placed_by_hand_runs_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    raw = project / "data/raw/csn-filtered-ruby"
    (raw / "dataset/ruby").mkdir(parents=True)
    for split in ("test", "valid"):
        shutil.copy(shared_data / "codesearchnet/ruby" / f"{split}.jsonl", raw / "dataset/ruby" / f"{split}.jsonl")
    (project / "study.yaml").write_text(yaml.safe_dump(STUDY))

    result = _run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "study.yaml"], project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = snakemake_jobs(result.stdout + result.stderr)
    assert jobs == {"download": 1, "prepare": 1, "audit": 1, "attack": 1, "index": 1, "evaluate": 1, "aggregate": 1}

    manifest = json.loads((raw / "MANIFEST.json").read_text())
    assert manifest["complete"] is True
    assert {path: record["verified"] for path, record in manifest["reads"].items()} == {
        "dataset/ruby/test.jsonl": "pinned checksum",
        "dataset/ruby/valid.jsonl": "pinned checksum",
    }
    assert sorted(p.name for p in raw.iterdir()) == ["MANIFEST.json", "SHA256SUMS", "dataset"]  # no zip, no kit
    card = json.loads((project / "data/prepared/csn-filtered-ruby/card.json").read_text())
    assert {s: card["splits"][s]["pairs"] for s in ("train", "valid", "test", "codebase")} == {
        "train": 0,
        "valid": 1400,
        "test": 1261,
        "codebase": 0,
    }
    ranks = list(
        csv.DictReader(
            (project / "results/runs/csn-filtered-ruby/none/bm25/none/0/zero_shot/ranks.tsv").read_text().splitlines(),
            delimiter="\t",
        )
    )
    assert len(ranks) == 1261 and {r["candidates"] for r in ranks} == {"1261"}  # no codebase: the test split
    summary = next(csv.DictReader((project / "results/studies/csn-ruby-placed/summary.csv").read_text().splitlines()))
    assert summary["n_queries"] == "1261" and 0.0 < float(summary["mrr"]) < 1.0
    audit = json.loads((project / "results/datasets/csn-filtered-ruby/card.json").read_text())["audit"]
    assert audit["pool"] == "test" and audit["pool_duplicates"]["records"] == 1261
    assert audit["shared_code"]["test_in_valid"] == {"exact": 0, "near": 0, "records": 1261}


def test_a_dataset_without_pairs_is_refused_before_any_job(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    study = {**STUDY, "grid": {**STUDY["grid"], "datasets": ["csn-challenge"]}, "datasets": {"csn-challenge": {}}}
    (project / "study.yaml").write_text(yaml.safe_dump(study))
    result = _run([str(BIN / "snakemake"), "--cores", "1", "--configfile", "study.yaml"], project)
    assert result.returncode != 0
    assert "'csn-challenge' has no query/code pairs" in result.stderr
    assert not (project / "data").exists()


def test_offline_download_names_the_files_and_where_to_put_them(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    study = {**STUDY, "grid": {**STUDY["grid"], "datasets": ["tl-codesum"]}, "datasets": {"tl-codesum": {}}}
    (project / "study.yaml").write_text(yaml.safe_dump(study))
    env_cmd = [
        str(BIN / "csbench"),
        "download",
        "--config",
        "params.yaml",
        "--config",
        "study.yaml",
        "--dataset",
        "tl-codesum",
    ]
    result = _run(["env", "CSBENCH_OFFLINE=1", *env_cmd], project)
    assert result.returncode == 2
    message = result.stderr
    assert "tl-codesum" in message and "data/valid/valid.token.code" in message
    assert str(project / "data/raw/tl-codesum") in message
    assert not (project / "data/raw/tl-codesum/data").exists()
