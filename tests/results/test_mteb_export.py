"""MTEB-style task results (csbench.results.mteb_export, `csbench results --export mteb DIR`), read back
with mteb's own loaders (``TaskResult.from_disk``, ``ResultCache.load_results``, ``ModelMeta``): from
the database of a real tiny study (test_results_query's: two bm25 runs, robustness curves for one),
and from run folders holding the `qrels` protocol's graded metrics."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml
from test_results import PARAMS, _stamp_placed, _write_run, toy_pool, write_prepared
from test_results_query import DATASET, PERTURBATIONS, PROTOCOLS, RATIOS, ROBUST_RUN, project  # noqa: F401

from csbench.cli import main
from csbench.io import canonical_hash, write_json
from csbench.results.mteb_export import (
    NO_REVISION,
    export_mteb,
    languages,
    main_metric,
    model_folder,
    model_name,
    mteb_metric,
    task_name,
)

mteb = pytest.importorskip("mteb", reason="mteb (pinned in requirements.lock) reads the exported files back")
from mteb.models.model_meta import ModelMeta  # noqa: E402
from mteb.results import TaskResult  # noqa: E402

CUTOFFS = (1, 3, 5, 10, 100, 1000)  # the qrels protocol's (csbench.evaluate.qrels.CUTOFFS)
GRADED = {"ndcg": "ndcg", "map": "map", "recall": "recall", "p": "precision", "mrr": "mrr"}  # csbench -> MTEB


@pytest.fixture(scope="module")
def study_db(project: Path) -> Path:  # noqa: F811 (the fixture imported above)
    return project / "results" / "studies" / "default" / "results.db"


def _rows(db: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(db) as con:
        found = con.execute(sql, params).fetchall()
    con.close()
    return found


def _task_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*/*/*.json") if p.name != "model_meta.json")


def _revision(inputs: dict[str, str]) -> str:
    """The documented dataset revision: sha256 of the run's data inputs (outside results/)."""
    return "sha256:" + canonical_hash({k: v for k, v in inputs.items() if not k.startswith("results/")})


# ---------------------------------------------------------------------------------------------
# names


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        *[(f"{m}@{k}", f"{t}_at_{k}") for m, t in GRADED.items() for k in CUTOFFS],
        ("r@1", "recall_at_1"),
        ("r@10", "recall_at_10"),
        ("ndcg@10", "ndcg_at_10"),
        ("mrr", "mrr"),
        ("mean_rank", "mean_rank"),
        ("n_queries", "n_queries"),
        ("accuracy", "accuracy"),
        ("flip_rate", "flip_rate"),
    ],
)
def test_metric_names_map_to_mteb_names(ours: str, theirs: str) -> None:
    assert mteb_metric(ours) == theirs


def test_main_metric_per_protocol() -> None:
    assert main_metric("qrels") == "ndcg@10"
    assert main_metric("full-corpus") == main_metric("csn-1000") == "mrr"
    assert main_metric("matching") == "accuracy"
    assert main_metric("summarization") == "smoothed_bleu4"
    assert main_metric("qrels", ["mrr", "relative_drop", "flip_rate"]) == "mrr"  # a curve point without nDCG@10
    assert main_metric("qrels", ["mrr", "ndcg@10"]) == "ndcg@10"


def test_task_and_model_names() -> None:
    assert task_name("cosqa-beir", "qrels") == "csbench:cosqa-beir:qrels"
    assert task_name("cosqa-beir", "qrels", "rename_vars") == "csbench:cosqa-beir:qrels:rename_vars"
    assert task_name("cosqa-beir", "qrels", "none", "swap", 0.25) == "csbench:cosqa-beir:qrels:swap@0.25"
    assert (
        task_name("cosqa-beir", "qrels", "no_comment", "question", 1.0)
        == "csbench:cosqa-beir:qrels:no_comment:question@1"
    )
    assert model_name("bm25") == "csbench/bm25"
    assert model_name("nbow", "ce", 1, "confused") == "csbench/nbow+ce+seed1+confused"
    assert model_name("minilm", "none", 2, "zero_shot") == "csbench/minilm+none+seed2+zero_shot"
    assert model_folder("csbench/bm25") == "csbench__bm25"
    assert languages("python") == ["eng-Latn", "python-Code"]
    assert languages("java,go") == ["eng-Latn", "go-Code", "java-Code"]


# ---------------------------------------------------------------------------------------------
# a real study's database


@pytest.fixture(scope="module")
def exported(study_db: Path, tmp_path_factory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("mteb") / "results"  # a ResultCache's results/ folder
    return out, export_mteb(study_db, out)


def test_one_task_per_run_protocol_and_curve_point_with_distinct_names(exported) -> None:
    out, files = exported
    assert files == _task_files(out)
    clean = {f"csbench:{DATASET}:{p}" for p in PROTOCOLS}
    attacked = {f"csbench:{DATASET}:{p}:no_comment" for p in PROTOCOLS}
    points = {f"csbench:{DATASET}:full-corpus:no_comment:{p}@{r:g}" for p in PERTURBATIONS for r in RATIOS}
    points.add(f"csbench:{DATASET}:full-corpus:no_comment:question@1")  # a fixed perturbation: ratio 1
    assert {f.stem for f in files} == clean | attacked | points
    assert {f.parent.relative_to(out).as_posix() for f in files} == {f"csbench__bm25/{NO_REVISION}"}


def test_every_file_reads_back_with_mteb_and_round_trips(exported, study_db) -> None:
    _, files = exported
    runs = {
        run_id: (json.loads(inputs), wall_s)
        for run_id, inputs, wall_s in _rows(study_db, "SELECT run_id, inputs_sha256, wall_s FROM runs")
    }
    for file in files:
        raw = json.loads(file.read_text(encoding="utf-8"))
        result = TaskResult.from_disk(file, load_historic_data=False)  # the current schema, no conversion
        info = raw["csbench"]
        assert result.task_name == file.stem == raw["task_name"]
        assert result.eval_splits == ["test"] and result.hf_subsets == ["default"]
        (entry,) = result.scores["test"]
        assert entry["languages"] == ["eng-Latn", "python-Code"]
        inputs, wall_s = runs[info["run"]]
        assert result.dataset_revision == _revision(inputs)
        point = info["perturbation"] != "none"
        assert result.evaluation_time == (None if point else wall_s)
        # every score equals results.db's value, under MTEB's name; main score MRR (single-answer protocols)
        stored = _rows(
            study_db,
            "SELECT metric, value FROM results WHERE run_id = ? AND protocol = ? AND perturbation = ? AND ratio = ?",
            info["run"],
            info["protocol"],
            info["perturbation"],
            info["ratio"],
        )
        assert stored
        assert {mteb_metric(m): v for m, v in stored} == {k: entry[k] for k in info["metrics"]}
        assert result.get_score() == entry["main_score"] == dict(stored)["mrr"]
        assert info["main_metric"] == "mrr" and info["version"] and info["run_path"] == f"results/runs/{info['run']}"
        assert (info["run"] == ROBUST_RUN) if point else True


def test_result_cache_loads_the_folder_and_model_meta_validates(exported) -> None:
    out, files = exported
    cache = mteb.ResultCache(cache_path=out.parent)
    loaded = cache.load_results(include_remote=False)  # validate_and_filter=False: no task of mteb's registry
    (model,) = loaded.model_results
    assert (model.model_name, model.model_revision) == ("csbench/bm25", NO_REVISION)
    assert sorted(t.task_name for t in model.task_results) == sorted(f.stem for f in files)
    one = cache.load_results(tasks=[f"csbench:{DATASET}:full-corpus"], include_remote=False)
    assert [t.task_name for t in one.model_results[0].task_results] == [f"csbench:{DATASET}:full-corpus"]
    meta = ModelMeta.model_validate_json_resolved((files[0].parent / "model_meta.json").read_text(encoding="utf-8"))
    assert (meta.name, meta.revision) == ("csbench/bm25", NO_REVISION)


def test_cli_exports_the_filtered_runs(study_db, tmp_path, capsys) -> None:
    out = tmp_path / "results"
    args = ["results", "--db", str(study_db), "--attack", "no_comment", "--perturbation", "none"]
    assert main([*args, "--export", "mteb", str(out)]) == 0
    assert "2 MTEB task result(s)" in capsys.readouterr().err
    assert [f.stem for f in _task_files(out)] == [f"csbench:{DATASET}:{p}:no_comment" for p in sorted(PROTOCOLS)]
    assert main([*args, "--export", "mteb"]) == 2
    assert "--export mteb DIR" in capsys.readouterr().err
    assert main([*args, "--pivot", "metric", "--export", "mteb", str(out)]) == 2
    assert main([*args, "--export", "a.csv", "b.csv"]) == 2
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# the qrels protocol's graded metrics, from run folders


def _graded_run(
    root: Path, attack: str, model: str, loss: str, seed: int, inference: str, revision: str | None
) -> Path:
    """A run folder as `csbench evaluate` writes it, with the `qrels` protocol's metrics (the contract:
    ``ndcg@k``, ``map@k``, ``recall@k``, ``p@k``, ``mrr@k``, plus ``mrr`` and ``n_queries``)."""
    run_dir = _write_run(root, "cosqa-beir", attack, {"full-corpus": [1, 2, 4]}, model=model)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    graded = {
        f"{m}@{k}": round(0.01 * i + 0.001 * j, 6) for i, m in enumerate(GRADED, 1) for j, k in enumerate(CUTOFFS)
    }
    metrics["scores"] += [{"protocol": "qrels", "metric": k, "value": v} for k, v in graded.items()]
    metrics["scores"] += [
        {"protocol": "qrels", "metric": "mrr", "value": 0.5},
        {"protocol": "qrels", "metric": "n_queries", "value": 3},
    ]
    metrics["run"].update(loss=loss, seed=seed, inference=inference)
    metrics["protocols"]["qrels"] = {"note": "", "n_queries": 3}
    target = root / "results" / "runs" / "cosqa-beir" / attack / model / loss / str(seed) / inference
    write_json(target / "metrics.json", metrics)
    provenance = json.loads((run_dir / "provenance.json").read_text())
    provenance["params"]["model"]["revision"] = revision
    provenance["inputs"]["results/index/x/SHA256SUMS"] = "ef" * 32  # the model's file: not the dataset's
    write_json(target / "provenance.json", provenance)
    return target


def test_qrels_runs_export_mteb_names_main_ndcg_and_model_coordinates(tmp_path) -> None:
    runs = [
        _graded_run(tmp_path, "none", "minilm", "none", 0, "zero_shot", "c0ffee"),
        _graded_run(tmp_path, "rename_vars", "nbow", "ce", 1, "confused", None),
    ]
    out = tmp_path / "export" / "results"
    files = export_mteb(runs, out)
    names = {f.relative_to(out).as_posix() for f in files}
    assert names == {
        "csbench__minilm/c0ffee/csbench:cosqa-beir:full-corpus.json",
        "csbench__minilm/c0ffee/csbench:cosqa-beir:qrels.json",
        f"csbench__nbow+ce+seed1+confused/{NO_REVISION}/csbench:cosqa-beir:full-corpus:rename_vars.json",
        f"csbench__nbow+ce+seed1+confused/{NO_REVISION}/csbench:cosqa-beir:qrels:rename_vars.json",
    }
    qrels = TaskResult.from_disk(out / "csbench__minilm" / "c0ffee" / "csbench:cosqa-beir:qrels.json")
    (entry,) = qrels.scores["test"]
    for i, measure in enumerate(GRADED, 1):
        for j, k in enumerate(CUTOFFS):
            assert entry[f"{GRADED[measure]}_at_{k}"] == round(0.01 * i + 0.001 * j, 6)
    assert qrels.get_score() == entry["main_score"] == entry["ndcg_at_10"]
    assert (entry["mrr"], entry["n_queries"]) == (0.5, 3)
    inputs = json.loads((runs[0] / "provenance.json").read_text())["inputs"]
    assert qrels.dataset_revision == _revision(inputs) and len(inputs) == 2
    loaded = mteb.ResultCache(cache_path=out.parent).load_results(include_remote=False)
    assert {(m.model_name, m.model_revision) for m in loaded.model_results} == {
        ("csbench/minilm", "c0ffee"),
        ("csbench/nbow+ce+seed1+confused", NO_REVISION),
    }


def test_a_real_qrels_run_exports_every_graded_measure_with_ndcg_at_10_main(tmp_path, monkeypatch) -> None:
    """`csbench index / evaluate` under the `qrels` protocol (a dataset without judgements: each
    query's own code, grade 1), exported from the run folders and read back by mteb."""
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    raw["grid"].update(datasets=["python-stdlib"], attacks=["none", "no_comment"], models=["bm25"])
    raw["grid"]["trained"]["models"] = []
    raw["grid"]["summarization"]["models"] = []
    raw["evaluation"]["protocols"] = ["full-corpus", "qrels"]
    raw["robustness"]["datasets"] = ["python-packages"]  # outside the grid: no robustness runs
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    pool = toy_pool()
    write_prepared(tmp_path, pool)
    _stamp_placed(config)
    run_dirs = []
    for attack in ("none", "no_comment"):
        target = tmp_path / "data" / "attacked" / "python-stdlib" / attack
        target.mkdir(parents=True)
        pool.to_parquet(target / "test.parquet", index=False)
        pool.iloc[0:0].to_parquet(target / "codebase.parquet", index=False)
        _stamp_placed(config, attack)
        for command in ("index", "evaluate"):
            argv = ["-q", command, "--config", str(config), "--dataset", "python-stdlib", "--attack", attack]
            assert main([*argv, "--model", "bm25"]) == 0
        run_dirs.append(tmp_path / "results" / "runs" / "python-stdlib" / attack / "bm25" / "none" / "0" / "zero_shot")
    out = tmp_path / "mteb" / "results"
    files = [f for f in export_mteb(run_dirs, out) if ":qrels" in f.stem]
    assert [f.stem for f in files] == ["csbench:python-stdlib:qrels", "csbench:python-stdlib:qrels:no_comment"]
    for file, run_dir in zip(files, run_dirs, strict=True):
        result = TaskResult.from_disk(file, load_historic_data=False)
        (entry,) = result.scores["test"]
        scores = json.loads((run_dir / "metrics.json").read_text())["scores"]
        ours = {s["metric"]: s["value"] for s in scores if s["protocol"] == "qrels"}
        expected = {f"{t}_at_{k}" for t in GRADED.values() for k in CUTOFFS} | {"mrr", "n_queries"}
        assert {k for k in entry if k not in ("main_score", "hf_subset", "languages", "mteb_version")} == expected
        assert {mteb_metric(m): v for m, v in ours.items()} == {k: entry[k] for k in expected}
        assert result.get_score() == entry["main_score"] == ours["ndcg@10"] > 0
        provenance = json.loads((run_dir / "provenance.json").read_text())
        assert result.dataset_revision == _revision(provenance["inputs"])
        assert result.evaluation_time == provenance["timings_s"]["total_s"]
