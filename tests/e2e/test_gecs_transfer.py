"""GeCS's main result, fine-tuned models out of distribution (issue #23 item 4): train once, evaluate on many.

GeCS (Diera et al. 2023, Tables 2, 3 and 5) fine-tunes each cross-encoder once on AdvTest train and tests
that one checkpoint on all eight test sets. ``grid.trained.evaluate_on`` says so in a config: the runs of
a model trained on ``advtest`` carry the inference ``confused@advtest`` on every dataset listed, and all of
them read the one checkpoint ``checkpoints/advtest/...``. Plus GeCS Table 1 (csbench.results.dataset_table).

The tiny GeCS study (tests/configs/tiny-gecs.yaml) runs here in one process on the real samples of
../shared/data (skipped without them): a 2-layer, 32-wide BERT cross-encoder (MiniLM's tokenizer, random
weights: a *tiny* cross-encoder, so that CI stays fast; the config itself names MiniLM) fine-tuned on the
AdvTest training sample, evaluated on the AdvTest test sample, the five GeCS CodeSearchNet samples and the
StatCodeSearch sample. Its DAG is checked with ``snakemake -n`` on the same placed files first.
"""

from __future__ import annotations

import collections
import json
import math
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import PROJECT_ROOT
from projects import place_raw
from test_drivers import BIN, _copy_project, _env

from csbench.config import ConfigError, RunKey, TrainKey, dvc_limitations, load_config

PARAMS = PROJECT_ROOT / "params.yaml"
TINY_GECS = PROJECT_ROOT / "tests" / "configs" / "tiny-gecs.yaml"
GECS = PROJECT_ROOT / "workflow" / "configs" / "gecs.yaml"
TEST_SETS = [
    "advtest",
    *(f"gecs-csn-{lang}" for lang in ("go", "java", "javascript", "php", "ruby")),
    "statcodesearch",
]
CROSS = "minilm-cross"


def _write(tmp_path: Path, change) -> Path:
    raw = yaml.safe_load(TINY_GECS.read_text())
    change(raw)
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------ the grid


def test_run_key_names_the_dataset_its_model_was_trained_on() -> None:
    run = RunKey("gecs-csn-go", "none", CROSS, "ce", 0, "confused", "advtest")
    assert run.label == "confused@advtest"
    assert run.path == f"gecs-csn-go/none/{CROSS}/ce/0/confused@advtest"
    assert run.training == TrainKey("advtest", "none", CROSS, "ce", 0)  # the one checkpoint
    assert run.as_dict()["inference"] == "confused@advtest" and run.as_dict()["trained_on"] == "advtest"
    assert RunKey.parse("gecs-csn-go", "none", CROSS, "ce", 0, "confused@advtest") == run
    plain = RunKey("advtest", "none", CROSS, "ce", 0, "confused")
    assert plain.label == "confused" and plain.training == TrainKey("advtest", "none", CROSS, "ce", 0)
    assert RunKey.parse("advtest", "none", CROSS, "ce", 0, "confused") == plain
    assert RunKey("advtest", "none", "bm25").as_dict()["trained_on"] is None
    for bad in ("confused@", "trained@advtest", "zero_shot@advtest"):
        with pytest.raises(ValueError, match=r"inference|zero-shot"):
            RunKey.parse("gecs-csn-go", "none", CROSS, "ce", 0, bad)


def test_evaluate_on_trains_once_and_evaluates_every_listed_dataset() -> None:
    config = load_config([PARAMS, TINY_GECS])
    assert config.trained["evaluate_on"] == TEST_SETS
    trained = [run for run in config.runs() if run.inference != "zero_shot"]
    assert [run.dataset for run in trained] == TEST_SETS
    assert {run.label for run in trained} == {"confused@advtest"}
    assert config.trainings() == [TrainKey("advtest", "none", CROSS, "ce", 0)]  # trained ONCE
    assert {run.training for run in trained} == set(config.trainings())
    assert len(config.runs()) == 2 * len(TEST_SETS)  # bm25 zero-shot + the fine-tuned model, per test set
    assert config.stability_groups() == []
    assert any(note.startswith("grid.trained.evaluate_on") for note in dvc_limitations(config))
    # GeCS: three cross-encoders trained once each, evaluated on the eight test sets
    gecs = load_config([PARAMS, GECS])
    assert len(gecs.trainings()) == 3
    assert len([r for r in gecs.runs() if r.inference != "zero_shot"]) == 3 * 8


def test_without_evaluate_on_a_model_is_evaluated_where_it_was_trained(tmp_path: Path) -> None:
    def change(raw: dict) -> None:
        del raw["grid"]["trained"]["evaluate_on"]

    config = load_config([PARAMS, _write(tmp_path, change)])
    trained = [run for run in config.runs() if run.inference != "zero_shot"]
    assert [run.path for run in trained] == [f"advtest/none/{CROSS}/ce/0/confused"]
    assert trained[0].trained_on is None and trained[0].as_dict()["trained_on"] == "advtest"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda raw: raw["grid"]["trained"].update(evaluate_on=["advtest", "cosqa"]),
            r"overlay.yaml:\d+: unknown dataset of grid.datasets 'cosqa' \(at grid.trained.evaluate_on\[1\]\)",
        ),
        (lambda raw: raw["grid"]["trained"].update(evaluate_on=[]), "grid.trained.evaluate_on"),
        (lambda raw: raw["grid"]["trained"].update(evaluate_on=["advtest", "advtest"]), "non-unique"),
        (
            lambda raw: raw["dataset_table"].update(reference="cosqa"),
            r"overlay.yaml:\d+: unknown dataset of grid.datasets 'cosqa' \(at dataset_table.reference\)",
        ),
        (
            lambda raw: raw["dataset_table"].update(reference="statcodesearch"),
            "'statcodesearch' has no 'train' split",
        ),
        (lambda raw: raw["dataset_table"].update(tokeniser="minilm"), "Did you mean 'tokenizer'"),
    ],
)
def test_bad_transfer_and_dataset_table_settings_are_refused(tmp_path: Path, change, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config([PARAMS, _write(tmp_path, change)])


def test_cli_refuses_a_run_of_another_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from csbench.cli import main

    configs = ["--config", str(PARAMS), "--config", str(TINY_GECS)]
    run = ["--dataset", "gecs-csn-go", "--attack", "none", "--model", CROSS, "--loss", "ce", "--seed", "0"]
    for inference, expected in (("confused", "is not a run of the config"), ("confused@go", "is not a run")):
        assert main(["index", *configs, *run, "--inference", inference]) != 0
        assert expected in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ Table 1


def test_total_variation_distance() -> None:
    from csbench.results.dataset_table import SetTokens, shift_rows, total_variation

    assert total_variation({1: 2, 2: 2}, {1: 1, 2: 1}) == 0.0
    assert total_variation({1: 1}, {2: 5}) == 1.0
    assert math.isclose(total_variation({1: 3, 2: 1}, {1: 1, 2: 1, 3: 2}), 0.5)  # |.75-.25|+|.25-.25|+|0-.5| = 1
    assert math.isnan(total_variation({}, {1: 1}))
    rng = np.random.default_rng(0)
    for _ in range(20):  # against a dense computation, ties and absent tokens included
        p, q = rng.integers(0, 4, 12), rng.integers(0, 4, 12)
        p[0] += 1
        q[1] += 1
        dense = 0.5 * np.abs(p / p.sum() - q / q.sum()).sum()
        sparse = total_variation({i: int(v) for i, v in enumerate(p) if v}, {i: int(v) for i, v in enumerate(q) if v})
        assert math.isclose(sparse, dense, abs_tol=1e-15)

    def tokens(name: str, pairs: int, query: dict, code: dict) -> SetTokens:
        stats = SetTokens(name, "test", pairs)
        stats.counts = {"query": Counter(query), "code": Counter(code)}
        stats.totals = {side: sum(stats.counts[side].values()) for side in stats.counts}
        return stats

    reference = tokens("ref", 2, {1: 4}, {7: 10})
    rows = shift_rows(reference, [tokens("a", 1, {1: 2}, {7: 5, 8: 5}), tokens("b", 3, {2: 3}, {8: 6})])
    assert [r.name for r in rows] == ["ref", "a", "b", "Combined test set"]
    assert (rows[0].tv_query, rows[0].tv_code, rows[0].query_tokens, rows[0].code_tokens) == (0.0, 0.0, 2.0, 5.0)
    assert (rows[1].tv_query, rows[1].tv_code) == (0.0, 0.5) and (rows[2].tv_query, rows[2].tv_code) == (1.0, 1.0)
    combined = rows[3]  # pooled: 4 pairs, query {1: 2, 2: 3}, code {7: 5, 8: 11}
    assert combined.pairs == 4 and combined.query_tokens == 5 / 4 and combined.code_tokens == 16 / 4
    assert math.isclose(combined.tv_query, 0.6) and math.isclose(combined.tv_code, 11 / 16)


# ------------------------------------------------------------------------------------------ the tiny study


GECS_SAMPLES = {
    "statcodesearch/sample_gecs_format.jsonl": "statcodesearch/sample_gecs_format.jsonl",
    **{
        f"gecs-csn-{lang}/{lang}_test_sample.jsonl": f"codesearchnet/gecs_samples/{lang}_test_sample.jsonl"
        for lang in ("go", "java", "javascript", "php", "ruby")
    },
}


def _as_released_clf(source: Path, target: Path) -> int:
    """A GeCS sample (positives only) written as GeCS releases its ``clf`` test files: each item's
    true pair and a false pair with another item's code, by GeCS's own ``create_cbt_jsonl_file`` loop
    (tests/reference/gecs_clf.py, seed 42). Returns the number of lines."""
    from reference.gecs_clf import create_cbt_lines

    items = []
    for line in source.read_text(encoding="utf-8").splitlines():
        text = json.loads(line)["input"]
        separator = " [CODESPLIT] " if " [CODESPLIT] " in text else " [SEP] "
        docstring, code = text.split(separator, 1)
        items.append({"docstring": docstring, "code": code})
    lines = create_cbt_lines(items, seed=42)
    target.write_text("".join(json.dumps(row) + "\n" for row in lines), encoding="utf-8")
    return len(lines)


def _place_samples(project: Path, shared: Path) -> None:
    """The samples under data/raw/<dataset>/ as the tiny study's dataset options read them; the GeCS
    samples (positives only) as released ``clf`` files with their negatives (``_as_released_clf``)."""
    files = {
        "advtest/dataset/train.jsonl": shared / "advtest/train_sample.jsonl",
        "advtest/dataset/test.jsonl": shared / "advtest/test_sample_normalized.jsonl",
    }
    place_raw(project, files)
    for relative, source in GECS_SAMPLES.items():
        target = project / "data/raw" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        _as_released_clf(shared / source, target)


def _tiny_network(folder: Path) -> Path:
    """A 2-layer, 32-wide BERT with a 2-way head and MiniLM's tokenizer, random weights (seed 0)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertConfig

    from csbench.models.hf import resolve_model_id

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_id("sentence-transformers/all-MiniLM-L6-v2"))
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id, num_labels=2,
    )  # fmt: skip
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _job_stats(output: str) -> collections.Counter[str]:
    from test_studies import job_stats

    return job_stats(output)


@pytest.fixture(scope="module")
def tiny_study(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny GeCS study: a dry run of its DAG, then every phase in this process (timed)."""
    import torch

    from csbench.cli import main

    base = tmp_path_factory.mktemp("tiny-gecs")
    project = _copy_project(base / "project")
    shutil.copy(TINY_GECS, project / "tiny-gecs.yaml")
    _place_samples(project, shared_data)
    timings: dict[str, float] = collections.defaultdict(float)

    t0 = time.perf_counter()
    dry = subprocess.run(
        [str(BIN / "snakemake"), "-n", "--cores", "2", "--quiet", "rules", "--configfile", "tiny-gecs.yaml"],
        cwd=project, env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    timings["dry_run"] = time.perf_counter() - t0

    # the tiny network stands in for MiniLM (an overlay, as a user would swap a model_id)
    network = _tiny_network(base / "tiny-bert")
    (project / "tiny-network.yaml").write_text(yaml.safe_dump({"models": {CROSS: {"model_id": str(network)}}}))
    configs = ["--config", "params.yaml", "--config", "tiny-gecs.yaml", "--config", "tiny-network.yaml"]
    config = load_config([project / "params.yaml", project / "tiny-gecs.yaml", project / "tiny-network.yaml"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # pair tokenization dominates; a second thread only contends on a busy machine
    cwd = os.getcwd()
    os.chdir(project)

    def phase(name: str, *args: str) -> None:
        start = time.perf_counter()
        code = main(["--quiet", name, *configs, *args])
        timings[name] += time.perf_counter() - start
        assert code == 0, f"csbench {name} {' '.join(args)} failed"

    try:
        for dataset in config.datasets:
            phase("download", "--dataset", dataset)
            phase("prepare", "--dataset", dataset)
            phase("audit", "--dataset", dataset)
            phase("attack", "--dataset", dataset, "--attack", "none")
        for key in config.trainings():
            phase("train", "--dataset", key.dataset, "--attack", key.attack, "--model", key.model,
                  "--loss", key.loss, "--seed", str(key.seed))  # fmt: skip
        for run in config.runs():
            coordinates = ["--dataset", run.dataset, "--attack", run.attack, "--model", run.model]
            coordinates += ["--loss", run.loss, "--seed", str(run.seed), "--inference", run.label]
            phase("index", *coordinates)
            phase("evaluate", *coordinates)
        phase("aggregate")
        phase("dataset-table")
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
    return {"project": project, "config": config, "dry": dry, "timings": dict(timings)}


@pytest.mark.e2e
def test_tiny_study_dag_trains_once_and_evaluates_seven_test_sets(tiny_study: dict) -> None:
    dry = tiny_study["dry"]
    assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]
    n = len(TEST_SETS)
    assert _job_stats(dry.stdout + dry.stderr) == collections.Counter(
        download=n, prepare=n, audit=n, attack=n, train=1, index=2 * n, evaluate=2 * n, aggregate=1, dataset_table=1
    )


@pytest.mark.e2e
def test_tiny_study_one_checkpoint_serves_every_test_set(tiny_study: dict) -> None:
    project = tiny_study["project"]
    checkpoints = sorted(p.parent.relative_to(project).as_posix() for p in project.glob("checkpoints/**/train.json"))
    assert checkpoints == [f"checkpoints/advtest/none/{CROSS}/ce/0"]
    record = json.loads((project / checkpoints[0] / "train.json").read_text())
    assert record["n_valid_pairs"] == 0 and record["kept"] == "last" and record["history"] == []  # as GeCS
    assert record["n_train_pairs"] == 2 * 100  # the 100 AdvTest positives and one drawn negative each
    best = (project / checkpoints[0] / "best/SHA256SUMS").read_text()
    for dataset in TEST_SETS:
        run = project / "results/runs" / dataset / f"none/{CROSS}/ce/0/confused@advtest"
        metrics = json.loads((run / "metrics.json").read_text())
        assert metrics["run"]["inference"] == "confused@advtest" and metrics["run"]["trained_on"] == "advtest"
        scores = {(s["protocol"], s["metric"]): s["value"] for s in metrics["scores"]}
        assert 0 < scores[("gecs-100", "mrr")] <= 1 and 0 <= scores[("matching", "accuracy")] <= 1
        # the GeCS sets are matched on their released pairs (negatives included), AdvTest on drawn ones
        matching = metrics["protocols"]["matching"]
        assert matching["pairs"] == ("drawn" if dataset == "advtest" else "released"), (dataset, matching)
        index_file = project / "results/index" / dataset / f"none/{CROSS}/ce/0/confused@advtest/index.json"
        index = json.loads(index_file.read_text())
        assert best.strip() and "advtest/none/minilm-cross/ce/0" in json.dumps(index)
    assert not list(project.glob("checkpoints/gecs-csn-*"))  # never trained on a test set


@pytest.mark.e2e
def test_tiny_study_gecs_table_has_one_fine_tuned_row_over_all_test_sets(tiny_study: dict) -> None:
    tables = tiny_study["project"] / "results/studies/tiny-gecs/tables"
    frame = (tables / "gecs.csv").read_text().splitlines()
    header, rows = frame[0], frame[1:]
    fine_tuned = [row for row in rows if "confused@advtest" in row]
    assert len(fine_tuned) == 1, rows  # one checkpoint: one row, as Table 2's "Fine-tuned Models"
    for test_set in ("AdvTest", "StatCodeSearch", "CodeSearchNet Avg"):
        assert test_set in header


@pytest.mark.e2e
def test_tiny_study_dataset_table(tiny_study: dict) -> None:
    out = tiny_study["project"] / "results/studies/tiny-gecs/dataset_table"
    record = json.loads((out / "gecs_datasets.json").read_text())
    assert [(row["name"], row["split"]) for row in record["rows"]] == [
        ("advtest", "train"),
        *((name, "test") for name in TEST_SETS),
        ("Combined test set", "test"),
    ]
    rows = {row["name"]: row for row in record["rows"][1:]}
    ref = record["rows"][0]
    assert (ref["split"], ref["pairs"], ref["tv_query"], ref["tv_code"]) == ("train", 100, 0.0, 0.0)
    assert rows["gecs-csn-go"]["pairs"] == 100 and rows["statcodesearch"]["pairs"] == 60
    assert all(0 < row["tv_code"] <= 1 for row in record["rows"][1:])
    assert "minilm" in record["caption"] and "roberta-base" in record["caption"]
    print("\nGeCS Table 1 on the shared samples:\n" + (out / "gecs_datasets.md").read_text())
    print("tiny study timings (s):", {k: round(v, 1) for k, v in tiny_study["timings"].items()})
