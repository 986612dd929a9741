"""End to end: code summarization (issue #25) through both drivers, on the real standard library.

A tiny randomly initialised T5 built from a config (no download) stands in for a hub checkpoint, as a
user would swap a ``model_id``: a summarizer defined in the study (``family: seq2seq``), trained and
zero-shot. It goes through train -> checkpoint -> reload -> generate -> score under ``snakemake``
and under ``dvc repro``; both drivers must write the same summaries and scores, the runs must land in
the study's results database and tables, and the records whose code is over ``max_code_chars`` must
be counted skips naming them, not crashes. (The RoBERTa encoder-decoder of ``codebert-sum`` goes
through the same train -> reload -> generate -> score in tests/summarization/test_seq2seq_pipeline.py;
both drivers run the same phases for every architecture.)
"""

from __future__ import annotations

import collections
import json
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import yaml
from projects import BIN, init_git_dvc
from test_drivers import _copy_project, _run, dvc_jobs, snakemake_jobs

from csbench.config import merge

pytestmark = pytest.mark.e2e

STUDY = "sum-e2e"
OVERLAY = "sum-e2e.yaml"
TINY = "workflow/configs/tiny.yaml"
MAX_CODE_CHARS = 700  # some stdlib functions are longer: counted skips
# the T5 trained on 2 attacks (confused, not_confused) and zero-shot on both
SUMMARY_RUNS = 2 * 2 + 2
SNAKEMAKE_JOBS = {
    "download": 1, "prepare": 1, "audit": 1, "attack": 2, "index": 2, "evaluate": 2,
    "train": 2, "summarize": SUMMARY_RUNS, "aggregate": 1,
}  # fmt: skip
DVC_JOBS = SNAKEMAKE_JOBS  # train-summarizer and summarize-zero-shot count as train and summarize (dvc_jobs)


def _overlay(t5: Path) -> dict:
    """The study: the tiny study's few stdlib packages, BM25 for search beside it, the T5 trained on
    no_comment and ordered_id (confused and not confused) and zero-shot."""
    tiny = yaml.safe_load((Path(__file__).resolve().parents[2] / TINY).read_text())
    small = {
        "max_source_len": 64, "max_target_len": 16, "beam": 3, "max_length": 10, "decode_batch_size": 8,
        "max_code_chars": MAX_CODE_CHARS,
        "training": {"lr": 0.001, "epochs": 1, "batch_size": 16, "max_valid": 20, "checkpoint_every": None},
    }  # fmt: skip
    return {
        "study": STUDY,
        "grid": {
            "datasets": ["python-stdlib"],
            "attacks": ["no_comment", "ordered_id"],
            "models": ["bm25"],
            "trained": {"models": []},
            "summarization": {
                "models": ["tiny-t5"],
                "zero_shot": ["tiny-t5"],
                "datasets": ["python-stdlib"],
                "attacks": ["no_comment", "ordered_id"],
                "seeds": [0],
                "inference": ["confused", "not_confused"],
            },
        },
        "datasets": {"python-stdlib": tiny["datasets"]["python-stdlib"]},
        "robustness": {"datasets": [], "attacks": []},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
        "models": {
            "tiny-t5": {"family": "seq2seq", "model_id": str(t5), **small},
        },
    }


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The study run by snakemake in one copy of the project and by dvc repro in another."""
    import tiny_seq2seq

    base = tmp_path_factory.mktemp("summarization")
    texts = [text for pair in tiny_seq2seq.pairs(200) for text in pair]
    overlay = _overlay(tiny_seq2seq.tiny_t5_dir(base / "tiny-t5", texts))

    ours = _copy_project(base / "snakemake")
    (ours / OVERLAY).write_text(yaml.safe_dump(overlay, sort_keys=False))
    made = _run([str(BIN / "snakemake"), "--cores", "2", "--configfile", OVERLAY], ours)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]

    theirs = _copy_project(base / "dvc")
    params = merge(yaml.safe_load((theirs / "params.yaml").read_text()), overlay)
    init_git_dvc(theirs, params, STUDY)
    repro = _run([str(BIN / "dvc"), "repro"], theirs)
    assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
    again = _run([str(BIN / "dvc"), "repro"], theirs)
    return {
        "snakemake": ours,
        "dvc": theirs,
        "snakemake_jobs": snakemake_jobs(made.stdout + made.stderr),
        "dvc_jobs": dvc_jobs(repro.stdout + repro.stderr),
        "dvc_stages": collections.Counter(re.findall(r"Running stage '([\w-]+)@", repro.stdout + repro.stderr)),
        "dvc_again": dvc_jobs(again.stdout + again.stderr),
        "overlay": overlay,
    }


def _summary_runs(project: Path) -> list[Path]:
    return sorted(p.parent for p in (project / "results/runs").glob("**/summaries.jsonl"))


def test_each_driver_runs_every_summarization_job_once(projects: dict) -> None:
    assert projects["snakemake_jobs"] == collections.Counter(SNAKEMAKE_JOBS)
    assert projects["dvc_jobs"] == collections.Counter(DVC_JOBS)
    assert projects["dvc_stages"]["summarize-zero-shot"] == 2 and projects["dvc_stages"]["train-summarizer"] == 2
    assert projects["dvc_again"] == {}  # nothing re-runs


def test_both_drivers_write_the_same_summaries_and_scores(projects: dict) -> None:
    ours, theirs = projects["snakemake"], projects["dvc"]
    runs = _summary_runs(ours)
    assert len(runs) == SUMMARY_RUNS
    assert [r.relative_to(ours) for r in runs] == [r.relative_to(theirs) for r in _summary_runs(theirs)]
    for run in runs:
        for name in ("summaries.jsonl", "metrics.json"):
            mine, other = run / name, theirs / run.relative_to(ours) / name
            assert mine.read_bytes() == other.read_bytes(), mine.relative_to(ours)


def test_a_summarization_run_records_its_summaries_scores_and_skips(projects: dict) -> None:
    project = projects["snakemake"]
    test = pd.read_parquet(project / "data/attacked/python-stdlib/ordered_id/test.parquet")
    for run in _summary_runs(project):
        metrics = json.loads((run / "metrics.json").read_text())
        lines = [json.loads(line) for line in (run / "summaries.jsonl").read_text().splitlines()]
        info = metrics["protocols"]["summarization"]
        scores = {s["metric"]: s["value"] for s in metrics["scores"]}
        assert metrics["run"]["task"] == "summarization"
        assert set(scores) >= {"bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4", "n_queries"}
        assert all(0 <= scores[m] <= 100 for m in scores if m != "n_queries")
        skipped = info["skipped"]["over_long_code"]
        assert skipped, "the study's max_code_chars leaves some stdlib functions out"
        assert scores["n_queries"] == info["n_queries"] == len(lines)
        assert len(lines) + len(skipped) == len(test)  # every test record is scored or named as skipped
        assert not {line["id"] for line in lines} & set(skipped)
        assert all(len(line["code"]) <= MAX_CODE_CHARS and line["reference"] for line in lines)
        if "/ordered_id/" in run.as_posix():
            assert not any(re.search(r"\bdef (?!id\d)", line["code"]) for line in lines)  # the attacked code was fed


def test_a_trained_checkpoint_reloads_and_generates_the_recorded_summaries(projects: dict) -> None:
    """train -> checkpoint -> reload -> generate -> score, outside the pipeline: the reloaded model
    gives the very summaries (and so the scores) the run recorded."""
    from csbench.summarization.metrics import summary_scores
    from csbench.summarization.models import load_summarizer
    from csbench.summarization.models.base import Decoding

    project = projects["snakemake"]
    params = projects["overlay"]["models"]["tiny-t5"]
    run = project / "results/runs/python-stdlib/ordered_id/tiny-t5/xent/0/confused"
    best = project / "checkpoints/python-stdlib/ordered_id/tiny-t5/xent/0/best"
    lines = [json.loads(line) for line in (run / "summaries.jsonl").read_text().splitlines()]
    summarizer = load_summarizer(best)
    decoding = Decoding(beam=params["beam"], max_length=params["max_length"], batch_size=8)
    hypotheses = summarizer.generate([line["code"] for line in lines[:24]], decoding)
    assert hypotheses == [line["hypothesis"] for line in lines[:24]]
    recorded = {s["metric"]: s["value"] for s in json.loads((run / "metrics.json").read_text())["scores"]}
    again = summary_scores([line["reference"] for line in lines], [line["hypothesis"] for line in lines])
    assert again == {k: recorded[k] for k in again}


def test_the_study_database_and_tables_hold_the_summarization_runs(projects: dict) -> None:
    project = projects["snakemake"]
    study = project / "results/studies" / STUDY
    with sqlite3.connect(study / "results.db") as con:
        rows = con.execute(
            "select model, inference, count(*) from results where protocol = 'summarization' "
            "and metric = 'smoothed_bleu4' group by model, inference order by model, inference"
        ).fetchall()
        search = con.execute("select count(*) from results where protocol = 'full-corpus'").fetchone()[0]
    assert rows == [
        ("tiny-t5", "confused", 2),
        ("tiny-t5", "not_confused", 2),
        ("tiny-t5", "zero_shot", 2),
    ]
    assert search > 0  # the search runs sit beside them
    for name in ("summarization_absolute.md", "summarization_relative.md", "summarization_examples.html"):
        assert (study / "tables" / name).is_file(), name
    assert (study / "figures/severity/summarization.png").is_file()
