"""Robustness in the pipeline (issue #5): config, encoding once, perturbed search, the record, the report."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT
from test_index_integrity import word_pool

from csbench.config import ConfigError, load_config
from csbench.evaluate.robust_report import build_record
from csbench.evaluate.runner import build_index, evaluate_pool, load_pool_index, search
from csbench.models.bm25 import BM25Retriever
from csbench.results.collect import robustness_frames, robustness_markdown

PARAMS = PROJECT_ROOT / "params.yaml"


def _config_error(tmp_path, change) -> str:
    raw = yaml.safe_load(PARAMS.read_text())
    change(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises((ConfigError, ValueError)) as err:
        load_config([path])
    return str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["robustness"].update(attacks=["ordered_id+translaton"]), "robustness.attacks[0]"),
        (
            lambda r: r["robustness"]["perturbations"].append("question"),
            "has no noise ratio; list it under robustness.fixed",
        ),
        (
            lambda r: r["robustness"].update(fixed=["case"]),
            "takes a noise ratio; list it under robustness.perturbations",
        ),
        (lambda r: r["robustness"].update(perturbations=["synonim"]), "Did you mean 'synonym'"),
        (lambda r: r["robustness"].update(ratios=[0.1, 0.1000000001]), "a ratio is listed twice"),
        (lambda r: r["robustness"].update(ratios=[0.0, 0.1]), "robustness"),  # 0 is the clean run (schema)
        (lambda r: r["robustness"].update(protocol="csn-100"), "robustness.protocol"),
    ],
)
def test_invalid_robustness_sections_are_refused(tmp_path, change, message):
    assert message in _config_error(tmp_path, change)


def test_robustness_entries_outside_the_grid_are_skipped_and_reported(tmp_path):
    raw = yaml.safe_load(PARAMS.read_text())
    raw["grid"]["datasets"] = ["python-stdlib"]  # an overlay that changes the grid only
    raw["robustness"]["datasets"] = ["python-stdlib", "python-packages"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    config = load_config([path])
    assert {run.dataset for run in config.robustness_runs()} == {"python-stdlib"}
    assert config.robustness_outside_grid() == ["robustness.datasets: 'python-packages' is not in grid.datasets"]


def test_default_study_points_are_the_cobe_grid():
    config = load_config([PARAMS])
    points = config.perturbation_points()
    ratios = sorted({r for p, r in points if p != "question"})
    assert ratios == pytest.approx([0.05 * i for i in range(1, 11)])
    assert len(points) == 6 * 10 + 1 and ("question", 1.0) in points
    assert [run.path for run in config.robustness_runs()] == [
        *(f"python-stdlib/no_comment/{model}/none/0/zero_shot" for model in ("bm25", "minilm")),
        *(
            f"python-stdlib/no_comment/nbow/ce/{seed}/{inference}"
            for seed in (0, 1)
            for inference in ("confused", "not_confused")
        ),
    ]


def _pool(n: int = 12) -> pd.DataFrame:
    return word_pool(n, language=None)


class Counting(BM25Retriever):
    calls = 0

    def index(self, codes):
        Counting.calls += 1
        super().index(codes)


def test_pools_are_encoded_once_and_reused_for_every_query_set(tmp_path):
    pool = _pool()
    Counting.calls = 0
    index = build_index(Counting, pool, ["full-corpus", "csn-1000"])
    assert Counting.calls == 1  # one pool (no codebase): one encoding
    index.save(tmp_path / "index", {"name": "bm25"})  # as `csbench index` stores it, then reads it back
    index = load_pool_index(tmp_path / "index", {"name": "bm25"}, None, "re-make it")
    clean, _ = search(index, pool, ["full-corpus"], 5, "r", progress=False)
    direct, _ = evaluate_pool(BM25Retriever(), pool, ["full-corpus"], 5, "r", progress=False)
    assert clean["full-corpus"].ranks == direct["full-corpus"].ranks
    assert clean["full-corpus"].top1 == [line.split()[2] for line in direct["full-corpus"].run_lines[::5]]
    shouted = [q.upper() for q in pool["query"]]
    for _ in range(5):
        search(index, pool, ["full-corpus"], 1, "r", queries=shouted, progress=False)
    assert Counting.calls == 1  # perturbed query sets never re-encode
    with pytest.raises(ValueError, match="3 queries for 12 test records"):
        search(index, pool, ["full-corpus"], 1, "r", queries=shouted[:3], progress=False)


def _point(ranks: dict[str, int], top1: dict[str, str]) -> dict:
    ids = sorted(ranks)
    return {"queries": {"id": ids, "rank": [ranks[q] for q in ids], "top1": [top1[q] for q in ids]}}


def test_record_curves_robust_mrr_and_flip_rate_by_hand():
    clean = {"a": (1, "a"), "b": (2, "x"), "c": (4, "y"), "d": (1, "d")}  # MRR (1 + 1/2 + 1/4 + 1) / 4
    points = {
        ("case", 0.1): _point({"a": 1, "b": 4, "c": 4, "d": 2}, {"a": "a", "b": "x", "c": "z", "d": "q"}),
        ("case", 0.2): _point({"a": 2, "b": 4, "c": 1, "d": 2}, {"a": "q", "b": "q", "c": "c", "d": "q"}),
        ("swap", 0.1): _point({"a": 2, "b": 1, "c": 4, "d": 1}, {"a": "q", "b": "b", "c": "y", "d": "d"}),
        ("swap", 0.2): _point({"a": 1, "b": 2, "c": 4, "d": 1}, {"a": "a", "b": "x", "c": "y", "d": "d"}),
        ("question", 1.0): _point({"a": 1, "b": 1, "c": 1, "d": 1}, {"a": "a", "b": "b", "c": "c", "d": "d"}),
    }
    record = build_record(clean, points, "full-corpus")
    assert record["clean_mrr"] == pytest.approx(2.75 / 4)
    assert record["curves"]["case"] == pytest.approx({"0": 2.75 / 4, "0.1": 2.0 / 4, "0.2": 2.25 / 4})
    assert record["curves"]["question"] == {"1": 1.0}
    assert record["fixed"] == ["question"]
    # IR-AUC of case: trapezoids over [0, 0.2] / 0.2 = (0.6875 + 0.5)/2 * 0.5 + (0.5 + 0.5625)/2 * 0.5
    assert record["summary"]["per_perturbation"]["case"]["ir_auc"] == pytest.approx(0.296875 + 0.265625)
    assert record["summary"]["per_perturbation"]["question"]["ir_auc"] == 1.0
    # robust MRR at 0.1: per query the worse of case and swap: a 1/2, b 1/4, c 1/4, d 1/2
    assert record["robust_mrr"]["0.1"] == pytest.approx((0.5 + 0.25 + 0.25 + 0.5) / 4)
    assert record["flip_rate"]["case"]["0.1"] == pytest.approx(2 / 4)  # c and d changed their top-1
    assert record["flip_rate"]["swap"]["0.2"] == 0.0
    assert record["flip_rate"]["question"]["1"] == pytest.approx(2 / 4)  # b and c


def test_record_refuses_points_of_other_queries():
    clean = {"a": (1, "a"), "b": (1, "b")}
    with pytest.raises(ValueError, match="not the clean run's"):
        build_record(clean, {("case", 0.1): _point({"a": 1}, {"a": "a"})}, "full-corpus")


def test_database_rows_and_cobe_table():
    clean = {"a": (1, "a"), "b": (2, "x")}
    points = {
        ("case", 0.5): _point({"a": 2, "b": 2}, {"a": "q", "b": "x"}),
        ("question", 1.0): _point({"a": 1, "b": 1}, {"a": "a", "b": "b"}),
    }
    record = {
        "run": {"dataset": "d", "attack": "no_comment", "model": "bm25"},
        **build_record(clean, points, "full-corpus"),
    }
    records = {"d/no_comment/bm25/none/0/zero_shot": copy.deepcopy(record)}
    points_frame, aucs = robustness_frames(records)
    case = points_frame[points_frame["perturbation"] == "case"].set_index("ratio")
    assert case.loc[0.0, "mrr"] == pytest.approx(0.75) and case.loc[0.5, "mrr"] == pytest.approx(0.5)
    assert case.loc[0.5, "relative_drop"] == pytest.approx(1 / 3)
    assert case.loc[0.5, "flip_rate"] == pytest.approx(0.5)
    assert set(aucs["perturbation"]) == {"case", "question", "macro", "micro"}
    text = "\n".join(robustness_markdown(records))
    assert "| d/no_comment/bm25/none/0/zero_shot | full-corpus | 0.7500 | 0.6250 | 1.0000 | 0.8125 | 0.6250 |" in text
    assert "(robustness/d/no_comment/bm25/none/0/zero_shot/robustness.png)" in text


def test_cli_perturbs_every_ratio_and_scores_every_point_with_one_index_load(tmp_path, monkeypatch, capsys):
    """`csbench perturb` writes a perturbation's query sets at every ratio in one call; `csbench robust`
    scores every point of a run from one loaded index, each point equal to a search on its queries."""
    from csbench import paths
    from csbench.cli import main
    from csbench.phases import index as index_phase

    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(PARAMS.read_text())
    raw["grid"].update(datasets=["python-stdlib"], attacks=["no_comment"], trained={"models": []})
    raw["robustness"].update(
        datasets=["python-stdlib"], attacks=["no_comment"], perturbations=["case", "swap"], ratios=[0.5, 0.25]
    )
    raw["evaluation"]["protocols"] = ["full-corpus"]
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(raw))
    pool = _pool().assign(language="python")
    for folder in ("data/prepared/python-stdlib", "data/attacked/python-stdlib/no_comment"):
        (tmp_path / folder).mkdir(parents=True)
        pool.to_parquet(tmp_path / folder / "test.parquet", index=False)
        pool.iloc[0:0].to_parquet(tmp_path / folder / "codebase.parquet", index=False)
    try:  # stamped as `csbench prepare` / `attack` would: phases read only stamped inputs (issue #22 item 3)
        from csbench.lineage import stamp_placed

        stamp_placed(load_config([config]), "python-stdlib")
        stamp_placed(load_config([config]), "python-stdlib", "no_comment")
    except ImportError:  # the code before it
        pass
    base = ["--config", str(config), "--dataset", "python-stdlib"]
    for perturbation in ("case", "swap", "question"):
        assert main(["-q", "perturb", *base, "--perturbation", perturbation]) == 0, capsys.readouterr().err
    written = sorted(p.relative_to(tmp_path / "data/perturbed").as_posix() for p in tmp_path.rglob("queries.parquet"))
    assert written == [
        "python-stdlib/case/0.25/queries.parquet",
        "python-stdlib/case/0.5/queries.parquet",
        "python-stdlib/question/1/queries.parquet",
        "python-stdlib/swap/0.25/queries.parquet",
        "python-stdlib/swap/0.5/queries.parquet",
    ]
    run = ["--attack", "no_comment", "--model", "bm25"]
    assert main(["-q", "index", *base, *run]) == 0, capsys.readouterr().err
    loads = []
    real_load = index_phase.load_index
    monkeypatch.setattr(index_phase, "load_index", lambda *call: loads.append(call) or real_load(*call))
    assert main(["-q", "robust", *base, *run]) == 0, capsys.readouterr().err
    assert len(loads) == 1
    index, _ = real_load(*loads[0])
    points = load_config([config]).perturbation_points()
    assert len(points) == 5
    for perturbation, ratio in points:
        record = yaml.safe_load(paths.robust_point_file(loads[0][0].path, perturbation, ratio).read_text())
        queries = pd.read_parquet(paths.perturbed_file("python-stdlib", perturbation, ratio))["query"].tolist()
        expected, _ = search(index, pool, ["full-corpus"], 1, "r", queries=queries, progress=False)
        assert (record["perturbation"], record["ratio"]) == (perturbation, ratio)
        assert record["queries"]["rank"] == expected["full-corpus"].ranks
    # one perturbation / ratio on request; a selection outside the config is refused
    target = paths.robust_point_file(loads[0][0].path, "swap", 0.25)
    target.unlink()
    assert main(["-q", "robust", *base, *run, "--perturbation", "swap", "--ratio", "0.25"]) == 0
    assert target.is_file() and len(loads) == 2
    assert main(["-q", "robust", *base, *run, "--perturbation", "swap", "--ratio", "0.3"]) != 0
    assert "no robustness point matches" in capsys.readouterr().err
