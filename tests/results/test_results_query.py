"""results.db's long `results` table (csbench.results.collect) and `csbench results`
(csbench.results.query), on a database built by the real pipeline: `csbench index / evaluate`
for two bm25 runs, `perturb / robust / robustness` for one of them, and `csbench aggregate`."""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_results import toy_pool

from csbench import __version__
from csbench.cli import main
from csbench.results.collect import RESULT_COLUMNS, RESULT_KEY, collect, write_database
from csbench.results.query import split_values

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
DATASET = "python-stdlib"
ATTACKS = ("none", "no_comment")
PROTOCOLS = ("full-corpus", "csn-1000")
RANK_METRICS = ("mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "n_queries")
PERTURBATIONS = ("case", "swap")  # take a ratio
RATIOS = (0.25, 0.5)
FIXED = ("question",)  # no ratio: one point, at ratio 1
ROBUST_RUN = f"{DATASET}/no_comment/bm25/none/0/zero_shot"
ORDER = "study, dataset, language, attack, model, loss, seed, inference, protocol, perturbation, ratio, metric"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project folder after a real (tiny) study: two clean runs, one with robustness curves."""
    root = tmp_path_factory.mktemp("query")
    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    raw["grid"].update(datasets=[DATASET], attacks=list(ATTACKS), models=["bm25"])
    raw["grid"]["trained"]["models"] = []  # zero-shot runs only
    raw["grid"]["summarization"]["models"] = []  # no summarizer (issue #25)
    raw["evaluation"]["protocols"] = list(PROTOCOLS)
    raw["robustness"].update(
        datasets=[DATASET],
        attacks=["no_comment"],
        perturbations=list(PERTURBATIONS),
        ratios=list(RATIOS),
        fixed=list(FIXED),
    )
    config = root / "params.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    pool = toy_pool()
    prepared = pool.assign(repo="r", path="p.py", url=pool["id"], split="test", docstring=pool["query"])
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        folder = root / "data" / "prepared" / DATASET
        folder.mkdir(parents=True)
        for split in ("train", "valid", "test", "codebase"):
            (prepared if split == "test" else prepared.iloc[0:0]).to_parquet(folder / f"{split}.parquet", index=False)
        (folder / "card.json").write_text(json.dumps({"kind": "local-source", "splits": {"test": {"pairs": 40}}}))
        for attack in ATTACKS:
            target = root / "data" / "attacked" / DATASET / attack
            target.mkdir(parents=True)
            pool.to_parquet(target / "test.parquet", index=False)
            pool.iloc[0:0].to_parquet(target / "codebase.parquet", index=False)
        try:  # stamped as `csbench prepare` / `attack` would: phases read only stamped inputs (issue #22 item 3)
            from csbench.config import load_config
            from csbench.lineage import stamp_placed

            stamp_placed(load_config([config]), DATASET)
            for attack in ATTACKS:
                stamp_placed(load_config([config]), DATASET, attack)
        except ImportError:  # the code before it
            pass
        base = ["-q", "--config", str(config), "--dataset", DATASET]
        steps = [["audit", "--jobs", "1"]]
        steps += [[command, "--attack", a, "--model", "bm25"] for a in ATTACKS for command in ("index", "evaluate")]
        steps += [["perturb", "--perturbation", p] for p in (*PERTURBATIONS, *FIXED)]
        steps += [[command, "--attack", "no_comment", "--model", "bm25"] for command in ("robust", "robustness")]
        for step in steps:
            assert main([base[0], step[0], *base[1:], *step[1:]]) == 0, step
        assert main(["-q", "aggregate", "--config", str(config)]) == 0
    return root


@pytest.fixture(scope="module")
def db(project) -> Path:
    return project / "results" / "studies" / "default" / "results.db"  # params.yaml's study


def _all_rows(db: Path) -> list[dict]:
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        rows = [dict(row) for row in con.execute(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results ORDER BY {ORDER}")]
    con.close()
    return rows


def _db_frame(db: Path) -> pd.DataFrame:
    with sqlite3.connect(db) as con:
        frame = pd.read_sql_query(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results ORDER BY {ORDER}", con)
    con.close()
    return frame


def _plain(frame: pd.DataFrame) -> list[dict]:
    """Rows as sqlite3 gives them: None for NaN, Python scalars."""
    return [
        {k: None if pd.isna(v) else getattr(v, "item", lambda v=v: v)() for k, v in r.items()}
        for r in frame.to_dict("records")
    ]


def _results(capsys, db: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["results", "--db", str(db), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _key(row: dict) -> tuple:
    return tuple(row[c] for c in RESULT_KEY)


# ---------------------------------------------------------------------------------------------
# the table


def test_one_row_per_key_and_the_count_the_grid_implies(db) -> None:
    rows = _all_rows(db)
    assert len({_key(r) for r in rows}) == len(rows)
    clean = [r for r in rows if r["perturbation"] == "none"]
    assert len(clean) == len(ATTACKS) * len(PROTOCOLS) * len(RANK_METRICS)  # 1 dataset, model, loss, seed
    assert {(r["ratio"], r["study"], r["language"]) for r in clean} == {(0.0, "default", "python")}
    robust = [r for r in rows if r["perturbation"] != "none"]
    assert {(r["attack"], r["protocol"], r["run_id"]) for r in robust} == {("no_comment", "full-corpus", ROBUST_RUN)}
    per_metric = pd.Series([r["metric"] for r in robust]).value_counts().to_dict()
    p, n, f = len(PERTURBATIONS), len(RATIOS), len(FIXED)
    assert per_metric == {
        "mrr": p * (n + 1) + f,  # every curve point, ratio 0 (the clean MRR) included; question once
        "relative_drop": p * (n + 1),  # curves with a ratio 0 only
        "flip_rate": p * n + f,  # no flip at ratio 0
        "robust_mrr": n,  # perturbation `*`, per ratio
        "ir_auc": p + f + 2,  # per perturbation, macro and micro
    }
    assert len(rows) == len(clean) + sum(per_metric.values())
    assert all(r["ratio"] is None for r in robust if r["metric"] == "ir_auc")
    assert all(r["ratio"] is not None for r in rows if r["metric"] != "ir_auc")
    assert {r["perturbation"] for r in robust if r["metric"] == "robust_mrr"} == {"*"}


def test_values_and_provenance_are_the_run_records(project, db) -> None:
    rows = {_key(r): r for r in _all_rows(db)}
    for attack in ATTACKS:
        run = project / "results" / "runs" / DATASET / attack / "bm25" / "none" / "0" / "zero_shot"
        metrics = json.loads((run / "metrics.json").read_text())
        prov = json.loads((run / "provenance.json").read_text())
        for score in metrics["scores"]:
            key = ("default", DATASET, "python", attack, "none", 0.0, "bm25", "none", 0, "zero_shot")
            row = rows[(*key, score["protocol"], score["metric"])]
            assert row["value"] == score["value"]  # exact: NULL for the empty csn-1000 protocol
            assert row["git_commit"] == prov["git"]["commit"]
            assert row["params_sha256"] == prov["params_sha256"]
            assert row["created"] == prov["created"]
            assert row["csbench_version"] == prov["packages"]["csbench"] == __version__
            assert row["device"] == prov["device"]
    record = json.loads((project / "results" / "robustness" / ROBUST_RUN / "robustness.json").read_text())
    key = ("default", DATASET, "python", "no_comment")
    tail = ("bm25", "none", 0, "zero_shot", "full-corpus")
    assert rows[(*key, "case", 0.25, *tail, "mrr")]["value"] == record["curves"]["case"]["0.25"]
    assert rows[(*key, "case", 0.0, *tail, "mrr")]["value"] == record["clean_mrr"]
    assert rows[(*key, "question", 1.0, *tail, "flip_rate")]["value"] == record["flip_rate"]["question"]["1"]
    assert rows[(*key, "*", 0.5, *tail, "robust_mrr")]["value"] == record["robust_mrr"]["0.5"]
    assert rows[(*key, "macro", None, *tail, "ir_auc")]["value"] == record["summary"]["macro_ir_auc"]
    assert (
        rows[(*key, "swap", None, *tail, "ir_auc")]["value"] == record["summary"]["per_perturbation"]["swap"]["ir_auc"]
    )
    assert (
        rows[(*key, "case", 0.5, *tail, "mrr")]["git_commit"] == rows[(*key, "none", 0.0, *tail, "mrr")]["git_commit"]
    )


def test_schema_unique_key_and_indexes(db) -> None:
    with sqlite3.connect(db) as con:
        kind = con.execute("SELECT type FROM sqlite_master WHERE name = 'results'").fetchone()[0]
        columns = [row[1] for row in con.execute("PRAGMA table_info(results)")]
        indexes = {row[1]: row[2] for row in con.execute("PRAGMA index_list(results)")}  # name -> unique
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    con.close()
    assert kind == "table"
    assert columns == list(RESULT_COLUMNS)
    assert indexes.pop("results_key") == 1
    assert set(indexes) >= {f"results_{c}" for c in ("dataset", "attack", "model", "metric", "perturbation")}
    assert not any(indexes.values())  # only the key is unique
    # the tables the summary and others read are still there
    assert tables >= {"scores", "runs", "robustness_points", "robustness_ir_auc", "results"}


@pytest.mark.parametrize(
    "where",
    ["perturbation = 'none' AND metric = 'mrr'", "metric = 'ir_auc' AND perturbation = 'macro'"],  # ratio 0 / NULL
)
def test_a_duplicate_key_is_refused(db, tmp_path, where) -> None:
    copy = tmp_path / "results.db"
    shutil.copy(db, copy)
    with sqlite3.connect(copy) as con:
        before = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            con.execute(f"INSERT INTO results SELECT * FROM results WHERE {where} LIMIT 1")
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == before
        # the same row with another metric is a new key
        columns = ", ".join("'other' AS metric" if c == "metric" else c for c in RESULT_COLUMNS)
        con.execute(f"INSERT INTO results SELECT {columns} FROM results WHERE {where} LIMIT 1")
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == before + 1
    con.close()


def test_provenance_columns_of_hand_written_records(tmp_path) -> None:
    from test_results import _write_run

    run = _write_run(tmp_path, DATASET, "none", {"full-corpus": [1, 2]})
    scores, runs = collect([run])
    write_database(tmp_path / "results.db", scores, runs)
    rows = _all_rows(tmp_path / "results.db")
    assert len(rows) == len(RANK_METRICS)
    assert {(r["study"], r["language"], r["perturbation"], r["ratio"]) for r in rows} == {
        ("unit", "python", "none", 0.0)
    }
    provenance = {tuple(r[c] for c in RESULT_COLUMNS[len(RESULT_KEY) + 1 :]) for r in rows}
    commit = "0123456789abcdef0123456789abcdef01234567"
    run_id = f"{DATASET}/none/bm25/none/0/zero_shot"
    assert provenance == {(run_id, commit, 0, "ab" * 32, "2024-01-01T00:00:00+00:00", "0.1.0", "cpu")}


def test_write_database_reports_duplicate_runs(project, tmp_path) -> None:
    run = project / "results" / "runs" / DATASET / "none" / "bm25" / "none" / "0" / "zero_shot"
    scores, runs = collect([run, run])
    target = tmp_path / "results.db"
    with pytest.raises(ValueError, match=r"UNIQUE constraint failed.*default/python-stdlib/python/none/none/0.0/bm25"):
        write_database(target, scores, runs.iloc[:1])
    assert not target.exists()  # nothing half-written


# ---------------------------------------------------------------------------------------------
# csbench results


@pytest.mark.parametrize(
    ("args", "keep"),
    [
        ([], lambda r: True),
        (["--attack", "none"], lambda r: r["attack"] == "none"),
        (["--perturbation", "none"], lambda r: r["perturbation"] == "none"),
        (["--metric", "mrr,ir_auc"], lambda r: r["metric"] in ("mrr", "ir_auc")),
        (
            ["--perturbation", "case", "--perturbation", "swap", "--metric", "mrr"],
            lambda r: r["perturbation"] in ("case", "swap") and r["metric"] == "mrr",
        ),
        (["--ratio", "0.25"], lambda r: r["ratio"] == 0.25),
        (["--ratio", "0"], lambda r: r["ratio"] == 0.0),
        (["--ratio", "none"], lambda r: r["ratio"] is None),
        (["--ratio", "none,0.5"], lambda r: r["ratio"] in (None, 0.5)),
        (["--perturbation", "*"], lambda r: r["perturbation"] == "*"),
        (
            ["--protocol", "full-corpus", "--seed", "0", "--model", "bm25", "--metric", "r@1,mrr", "--attack", "none"],
            lambda r: r["protocol"] == "full-corpus" and r["metric"] in ("r@1", "mrr") and r["attack"] == "none",
        ),
        (["--study", "default", "--dataset", DATASET, "--language", "python", "--loss", "none"], lambda r: True),
        (["--inference", "zero_shot", "--protocol", "csn-1000"], lambda r: r["protocol"] == "csn-1000"),
    ],
)
def test_filters_select_exactly_the_matching_rows(capsys, db, args, keep) -> None:
    code, out, err = _results(capsys, db, *args, "--format", "json")
    assert code == 0, err
    expected = [r for r in _all_rows(db) if keep(r)]
    assert expected  # every case selects something
    assert json.loads(out) == expected  # same rows, same order, same values


def test_csv_json_and_parquet_round_trip_the_database_rows(capsys, db, tmp_path) -> None:
    frame = _db_frame(db)
    code, out, _ = _results(capsys, db, "--format", "csv")
    assert code == 0
    assert _plain(pd.read_csv(io.StringIO(out))) == _all_rows(db)  # NULL is an empty field
    code, out, _ = _results(capsys, db, "--format", "json")
    assert json.loads(out) == _all_rows(db)
    for name in ("rows.parquet", "rows.csv", "rows.json"):
        target = tmp_path / "sub" / name
        code, out, err = _results(capsys, db, "--export", str(target))
        assert code == 0 and out == ""
        assert f"{len(frame)} row(s) written to {target}" in err
        if name.endswith(".parquet"):
            pd.testing.assert_frame_equal(pd.read_parquet(target), frame)
        elif name.endswith(".csv"):
            assert _plain(pd.read_csv(target)) == _all_rows(db)
        else:
            assert json.loads(target.read_text()) == _all_rows(db)
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["rows.csv", "rows.json", "rows.parquet"]
    # a filtered export holds the filtered rows only
    code, _, _ = _results(capsys, db, "--metric", "ir_auc", "--export", str(tmp_path / "auc.parquet"))
    auc = pd.read_parquet(tmp_path / "auc.parquet")
    pd.testing.assert_frame_equal(auc, frame[frame["metric"] == "ir_auc"].reset_index(drop=True))


def test_table_format_is_aligned_text(capsys, db) -> None:
    code, out, _ = _results(capsys, db, "--perturbation", "none", "--protocol", "full-corpus")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [*RESULT_KEY, "value"]
    assert len(lines) == 1 + len(ATTACKS) * len(RANK_METRICS)
    assert len({len(line) for line in lines}) == 1  # value, the last column, is right-aligned
    start = lines[0].index("metric")
    assert all(line[start - 1] == " " and line[start] != " " for line in lines)  # left-aligned under its header
    mrr = next(line for line in lines if line.split()[0] == "default" and " mrr " in line and " none " in line)
    assert mrr.split()[5] == "0"  # ratio


def test_pivot_puts_metrics_in_columns(capsys, db) -> None:
    code, out, _ = _results(capsys, db, "--perturbation", "none", "--pivot", "metric", "--format", "csv")
    assert code == 0
    wide = pd.read_csv(io.StringIO(out))
    assert list(wide.columns) == [*[c for c in RESULT_KEY if c != "metric"], *sorted(RANK_METRICS)]
    assert len(wide) == len(ATTACKS) * len(PROTOCOLS)
    frame = _db_frame(db)
    clean = frame[(frame["perturbation"] == "none") & (frame["metric"] == "mrr")]
    for row in wide.itertuples(index=False):
        expected = clean[(clean["attack"] == row.attack) & (clean["protocol"] == row.protocol)]["value"].iloc[0]
        assert row.mrr == pytest.approx(expected, nan_ok=True)
    code, out, _ = _results(capsys, db, "--metric", "mrr", "--perturbation", "case", "--pivot", "ratio")
    header = out.splitlines()[0].split()
    assert header[-3:] == ["0", "0.25", "0.5"]  # the curve as one row
    assert len(out.splitlines()) == 2


def test_missing_database_says_run_aggregate(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["results"]) == 2
    assert "no study has a database under results/studies/" in capsys.readouterr().err
    assert main(["results", "--db", "results/results.db"]) == 2
    assert "results/results.db is missing: run `csbench aggregate` first" in capsys.readouterr().err


def test_a_database_without_the_table_asks_for_a_new_aggregate(capsys, tmp_path) -> None:
    old = tmp_path / "old.db"
    with sqlite3.connect(old) as con:
        con.execute("CREATE TABLE scores (run_id TEXT, metric TEXT, value REAL)")
        con.execute("CREATE VIEW results AS SELECT * FROM scores")
    con.close()
    code, _, err = _results(capsys, old)
    assert code == 2
    assert "run `csbench aggregate` again" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "bm26"], "unknown model 'bm26'"),
        (["--model", "bm25,bm26"], "valid names: bm25. Did you mean 'bm25'?"),
        (["--perturbation", "cases"], "valid names: *, case, macro, micro, none, question, swap. Did you mean 'case'?"),
        (["--ratio", "0.3"], "valid names: 0, 0.25, 0.5, 1, none"),
        (["--ratio", "half"], "--ratio 'half' is not a number"),
        (["--seed", "1"], "unknown seed '1'"),
        (["--seed", "x"], "--seed 'x' is not an integer"),
        (["--metric", "mrrr"], "Did you mean 'mrr'?"),
        (["--export", "rows.xlsx"], "must end in .csv, .parquet, .json"),
        (["--pivot", "value"], "--pivot 'value'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, db, tmp_path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _results(capsys, db, *args)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.startswith("csbench results: error:") and err.count("\n") == 1
    assert not (tmp_path / "rows.xlsx").exists()


@pytest.mark.parametrize(
    ("fmt", "expected"), [("csv", ",".join(RESULT_COLUMNS) + "\n"), ("json", "[]\n"), ("table", "")]
)
def test_an_empty_selection_exits_0_with_a_message(capsys, db, fmt, expected) -> None:
    # both values exist, but no clean run has perturbed rows
    code, out, err = _results(capsys, db, "--attack", "none", "--perturbation", "case", "--format", fmt)
    assert code == 0
    assert out == expected
    assert "no row of" in err and "matches the filters" in err


def test_an_empty_export_has_the_columns(capsys, db, tmp_path) -> None:
    target = tmp_path / "none.parquet"
    code, _, err = _results(capsys, db, "--attack", "none", "--metric", "ir_auc", "--export", str(target))
    assert code == 0 and "0 row(s) written" in err
    assert list(pd.read_parquet(target).columns) == list(RESULT_COLUMNS)


def test_split_values_keeps_existing_values_with_commas() -> None:
    assert split_values(["a,b", "c", "a"]) == ["a", "b", "c"]
    assert split_values(["go,java", "python"], existing=["go,java", "python"]) == ["go,java", "python"]
    assert split_values(["go, java"], existing=["go,java"]) == ["go", "java"]
