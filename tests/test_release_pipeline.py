"""A downloaded release through the whole pipeline, with files placed by hand (the offline path).

CoSQA retrieval: the real 6,267-function pool and the real dev queries from ../shared/data. The
test-500 query file is not in shared/data; a copy of the dev file stands in for it (its checksum
is not pinned, so it is accepted on first use), which the leakage audit duly reports.
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
    "study": "cosqa",
    "grid": {"datasets": ["cosqa-retrieval"], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
    "datasets": {"cosqa-retrieval": {}},
    "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
}


def test_cosqa_retrieval_placed_by_hand_runs_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    raw = project / "data/raw/cosqa-retrieval"
    raw.mkdir(parents=True)
    for name in ("code_idx_map.txt", "cosqa-retrieval-dev-500.json"):
        shutil.copy(shared_data / "cosqa" / name, raw / name)
    shutil.copy(shared_data / "cosqa/cosqa-retrieval-dev-500.json", raw / "cosqa-retrieval-test-500.json")
    (project / "study.yaml").write_text(yaml.safe_dump(STUDY))

    result = _run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "study.yaml"], project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = snakemake_jobs(result.stdout + result.stderr)
    assert jobs == {"download": 1, "prepare": 1, "audit": 1, "attack": 1, "index": 1, "evaluate": 1, "aggregate": 1}

    manifest = json.loads((raw / "MANIFEST.json").read_text())
    verified = {entry["path"]: entry["verified"] for entry in manifest["files"]}
    assert manifest["complete"] is True
    assert verified == {
        "code_idx_map.txt": "pinned checksum",
        "cosqa-retrieval-dev-500.json": "pinned checksum",
        "cosqa-retrieval-test-500.json": "first use",
    }
    card = json.loads((project / "data/prepared/cosqa-retrieval/card.json").read_text())
    assert {s: card["splits"][s]["pairs"] for s in ("train", "valid", "test", "codebase")} == {
        "train": 0,
        "valid": 500,
        "test": 500,
        "codebase": 6267,
    }
    ranks = list(
        csv.DictReader(
            (project / "results/runs/cosqa-retrieval/none/bm25/none/0/zero_shot/ranks.tsv").read_text().splitlines(),
            delimiter="\t",
        )
    )
    assert len(ranks) == 500 and {r["candidates"] for r in ranks} == {"6267"}  # the whole pool, not the test split
    summary = next(csv.DictReader((project / "results/summary.csv").read_text().splitlines()))
    assert summary["n_queries"] == "500" and 0.0 < float(summary["mrr"]) < 1.0
    audit = json.loads((project / "results/datasets/cosqa-retrieval/card.json").read_text())["audit"]
    assert audit["pool"] == "codebase" and audit["pool_duplicates"]["records"] == 6267
    assert audit["shared_code"]["test_in_valid"]["exact"] == 500  # the stand-in copy is caught


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
