"""The aggregate phase (csbench.results.report, csbench.results.collect) and atomic file output (csbench.io).

Run folders are written in the shape ``csbench.cli.cmd_evaluate`` writes them; one test runs
``csbench evaluate`` and ``csbench aggregate`` for real on a tiny synthetic test split.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from csbench.cli import main
from csbench.evaluate.metrics import rank_metrics
from csbench.io import atomic_open, atomic_path, write_json, write_text
from csbench.results.collect import collect, relative_drop, results_rows, robustness_frames
from csbench.results.report import aggregate

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
METRICS = ("mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "n_queries")
SMALL_POOL_NOTE = "test pool has 40 < 1000 records: no full chunk, nothing evaluated"


def _write_run(
    root: Path,
    dataset: str,
    attack: str,
    ranks: dict[str, list[int]],
    notes: dict[str, str] | None = None,
    model: str = "bm25",
) -> Path:
    """A run folder as cmd_evaluate writes it: metrics.json and provenance.json."""
    notes = notes or {}
    run = {
        "dataset": dataset,
        "attack": attack,
        "model": model,
        "loss": "none",
        "seed": 0,
        "inference": "zero_shot",
    }
    run_dir = root / "results" / "runs" / dataset / attack / model / "none" / "0" / "zero_shot"
    cutoffs = {"full-corpus": 1000, "csn-1000": None}
    scores, protocols = [], {}
    for name, protocol_ranks in ranks.items():
        metrics = rank_metrics(np.asarray(protocol_ranks, dtype=np.int64), cutoffs[name])
        scores += [{"protocol": name, "metric": k, "value": v} for k, v in metrics.items()]
        protocols[name] = {"note": notes.get(name, ""), "n_queries": metrics["n_queries"]}
    write_json(
        run_dir / "metrics.json",
        {
            "run": {"study": "unit", "language": "python", **run},
            "scores": scores,
            "protocols": protocols,
        },
    )
    write_json(
        run_dir / "provenance.json",
        {
            "phase": "evaluate",
            "created": "2024-01-01T00:00:00+00:00",
            "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
            "params": {"model": {"k1": 1.2}, "evaluation": {"protocols": list(ranks), "run_depth": 100}},
            "params_sha256": "ab" * 32,
            "inputs": {f"data/attacked/{dataset}/{attack}/test.parquet": "cd" * 32},
            "packages": {"python": "3.11.0", "csbench": "0.1.0", "numpy": "2.0"},
            "seed": 0,
            "device": "cpu",
            "host": "test-host",
            "argv": ["csbench", "evaluate"],
            "timings_s": {"index_s": 0.1, "search_s": 0.2, "total_s": 0.5},
        },
    )
    return run_dir


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    ranks = {"none": [1, 2, 1, 1500], "no_comment": [3, 3, 6, 10]}
    notes = {"csn-1000": SMALL_POOL_NOTE}
    return [
        _write_run(tmp_path, "python-stdlib", attack, {"full-corpus": full, "csn-1000": []}, notes=notes)
        for attack, full in ranks.items()
    ]


def test_results_db_tables_view_and_one_row_per_run_protocol_metric(tmp_path, two_runs) -> None:
    out = tmp_path / "results"
    aggregate(two_runs, out, "unit")
    with sqlite3.connect(out / "results.db") as con:
        objects = dict(con.execute("SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall())
        assert objects["scores"] == "table"
        assert objects["runs"] == "table"
        assert objects["results"] == "table"  # the long table `csbench results` reads (was a view)
        rows = con.execute("SELECT run_id, protocol, metric, value FROM scores").fetchall()
        assert len(rows) == 2 * 2 * len(METRICS)
        assert len({(r[0], r[1], r[2]) for r in rows}) == len(rows)  # unique run x protocol x metric
        runs = con.execute("SELECT run_id, git_commit, params_sha256, wall_s FROM runs ORDER BY run_id").fetchall()
        assert [r[0] for r in runs] == [
            "python-stdlib/no_comment/bm25/none/0/zero_shot",
            "python-stdlib/none/bm25/none/0/zero_shot",
        ]
        assert runs[0][1] == "0123456789abcdef0123456789abcdef01234567"
        assert runs[0][3] == 0.5
        view = con.execute(
            "SELECT value, git_commit FROM results WHERE run_id = ? AND protocol = 'full-corpus' AND metric = 'mrr'",
            ("python-stdlib/none/bm25/none/0/zero_shot",),
        ).fetchall()
        assert len(view) == 1
        assert view[0][0] == pytest.approx((1 + 0.5 + 1 + 0) / 4)  # rank 1500 is beyond the 1,000 cut
        assert view[0][1] == "0123456789abcdef0123456789abcdef01234567"
        n_view = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        assert n_view == len(rows)
        empty = con.execute(
            "SELECT metric, value FROM scores WHERE protocol = 'csn-1000' AND run_id LIKE '%/none/bm25/%'"
        ).fetchall()
        assert dict(empty) == {m: (0 if m == "n_queries" else None) for m in METRICS}
    con.close()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_summary_csv_one_row_per_run_and_protocol(tmp_path, two_runs) -> None:
    out = tmp_path / "results"
    table = aggregate(two_runs, out, "unit")
    csv = pd.read_csv(out / "summary.csv")
    assert len(csv) == 4
    assert len(table) == 4
    keys = ["dataset", "attack", "model", "loss", "seed", "inference", "protocol"]
    metrics = ["n_queries", "mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank"]
    assert list(csv.columns) == [*keys, *metrics, "mrr_drop_vs_no_comment_%"]
    assert not csv.duplicated(subset=keys).any()
    row = csv[(csv["attack"] == "no_comment") & (csv["protocol"] == "full-corpus")].iloc[0]
    assert row["n_queries"] == 4
    assert row["mrr"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 6 + 1 / 10) / 4)
    assert row["r@5"] == pytest.approx(0.5)
    assert row["median_rank"] == pytest.approx(4.5)
    assert row["mrr_drop_vs_no_comment_%"] == pytest.approx(0.0)
    none = csv[(csv["attack"] == "none") & (csv["protocol"] == "full-corpus")].iloc[0]
    # the thesis's sign (Tables 5.5-5.15): (no_comment - attack) / no_comment, so a gain is negative
    assert none["mrr_drop_vs_no_comment_%"] == pytest.approx((row["mrr"] - 0.625) / row["mrr"] * 100)  # -167.9 %
    assert none["mrr_drop_vs_no_comment_%"] == pytest.approx(relative_drop(0.625, row["mrr"]))
    empty = csv[csv["protocol"] == "csn-1000"]
    assert (empty["n_queries"] == 0).all()
    assert empty["mrr"].isna().all()


def test_summary_md_shows_na_and_lists_the_note(tmp_path, two_runs) -> None:
    out = tmp_path / "results"
    aggregate(two_runs, out, "unit")
    text = (out / "summary.md").read_text()
    assert text.startswith("# csbench results: study `unit`\n")
    table_rows = [line for line in text.splitlines() if line.startswith("| python-stdlib |")]
    assert len(table_rows) == 4
    csn = [line for line in table_rows if "| csn-1000 |" in line]
    assert len(csn) == 2
    for line in csn:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[7] == "0"  # n_queries
        assert cells[8:] == ["n/a"] * 8  # seven metrics and the drop against no_comment
    full = next(
        line for line in table_rows if line.startswith("| python-stdlib | none |") and "| full-corpus |" in line
    )
    # nDCG@10 of ranks 1, 2, 1, 1500: (1 + 1 / log2(3) + 1 + 0) / 4 = 0.6577
    assert "| 4 | 0.6250 | 0.5000 | 0.7500 | 0.7500 | 0.6577 | 376.0 | 1.5 | -167.9 |" in full
    assert "positive = loss" in text
    assert "Notes:" in text
    assert f"- python-stdlib/none csn-1000: {SMALL_POOL_NOTE}" in text
    assert f"- python-stdlib/no_comment csn-1000: {SMALL_POOL_NOTE}" in text


def test_summary_md_has_no_notes_section_without_notes(tmp_path) -> None:
    run = _write_run(tmp_path, "python-stdlib", "none", {"full-corpus": [1, 2]})
    aggregate([run], tmp_path / "results", "unit")
    text = (tmp_path / "results" / "summary.md").read_text()
    assert "Notes:" not in text
    row = next(line for line in text.splitlines() if line.startswith("| python-stdlib |"))
    assert "n/a" not in row.rsplit("|", 2)[0]  # every metric is there; only the drop has no baseline
    assert row.endswith("| n/a |")


def test_aggregate_rebuilds_the_database(tmp_path, two_runs) -> None:
    out = tmp_path / "results"
    aggregate(two_runs, out, "unit")
    aggregate(two_runs[:1], out, "unit")  # a second build replaces, never appends
    with sqlite3.connect(out / "results.db") as con:
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
        assert con.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 2 * len(METRICS)
    con.close()
    assert len(pd.read_csv(out / "summary.csv")) == 2


@pytest.mark.parametrize("missing", ["metrics.json", "provenance.json"])
def test_missing_run_record_raises_naming_the_path(tmp_path, two_runs, missing) -> None:
    (two_runs[1] / missing).unlink()
    with pytest.raises(FileNotFoundError) as info:
        aggregate(two_runs, tmp_path / "results", "unit")
    assert str(two_runs[1] / missing) in str(info.value)
    assert not (tmp_path / "results" / "results.db").exists()


def test_summary_has_no_phantom_rows_for_runs_not_forming_a_grid(tmp_path) -> None:
    runs = [
        _write_run(tmp_path, "corpus-a", "none", {"full-corpus": [1, 2]}),
        _write_run(tmp_path, "corpus-b", "no_comment", {"full-corpus": [1, 3]}),
    ]
    table = aggregate(runs, tmp_path / "results", "unit")
    assert sorted(zip(table["dataset"], table["attack"], strict=True)) == [
        ("corpus-a", "none"),
        ("corpus-b", "no_comment"),
    ]


def test_collect_long_table_shape(two_runs) -> None:
    scores, runs = collect(two_runs)
    assert len(scores) == 2 * 2 * len(METRICS)
    assert set(scores["metric"]) == set(METRICS)
    assert set(scores["perturbation"]) == {"none"}
    assert set(runs["study"]) == {"unit"}
    assert set(runs["language"]) == {"python"}
    assert json.loads(runs["inputs_sha256"][0]) == {"data/attacked/python-stdlib/none/test.parquet": "cd" * 32}


def test_summary_drop_is_the_thesis_relative_drop_with_a_loss_positive(tmp_path) -> None:
    runs = [
        _write_run(tmp_path, "corpus", "no_comment", {"full-corpus": [1, 1, 2, 2]}),  # MRR 0.75
        _write_run(tmp_path, "corpus", "full_hash", {"full-corpus": [2, 4, 4, 4]}),  # MRR 0.3125
        _write_run(tmp_path, "other", "full_hash", {"full-corpus": [1, 1]}),  # no no_comment run
    ]
    table = aggregate(runs, tmp_path / "results", "unit").set_index(["dataset", "attack"])
    drops = table["mrr_drop_vs_no_comment_%"]
    assert drops[("corpus", "full_hash")] == pytest.approx(58.333333)  # (0.75 - 0.3125) / 0.75
    assert drops[("corpus", "no_comment")] == 0.0
    assert np.isnan(drops[("other", "full_hash")])
    assert "| +58.3 |" in (tmp_path / "results" / "summary.md").read_text()


ROBUST_RUN = "d/no_comment/bm25/none/0/zero_shot"
ROBUST_RECORD = {  # every field a robustness record has, with a missing drop (None) and flip rate
    "run": {
        "dataset": "d",
        "attack": "no_comment",
        "model": "bm25",
        "loss": "none",
        "seed": 0,
        "inference": "zero_shot",
    },
    "protocol": "full-corpus",
    "curves": {"case": {"0": 0.8, "0.5": 0.6}, "question": {"1": 0.7}},
    "fixed": ["question"],
    "summary": {
        "per_perturbation": {
            "case": {"ir_auc": 0.7, "relative_drop": {"0.0": 0.0, "0.5": None}},
            "question": {"ir_auc": 0.7},
        },
        "macro_ir_auc": 0.7,
        "micro_ir_auc": 0.65,
    },
    "robust_mrr": {"0.5": 0.55},
    "flip_rate": {"case": {"0.5": 0.25}, "question": {"1": 0.1}},
}
ROBUST_RUNS = pd.DataFrame(
    [
        {
            "run_id": ROBUST_RUN,
            "study": "s",
            "language": "python",
            "git_commit": "c0",
            "git_dirty": False,
            "params_sha256": "p0",
            "created": "t0",
            "packages": '{"csbench": "0.1.0"}',
            "device": "cpu",
        }
    ]
)


def test_results_rows_of_a_robustness_record() -> None:
    """The rows as the implementation before robustness_long wrote them (order included)."""
    rows = results_rows(pd.DataFrame(columns=["run_id"]), ROBUST_RUNS, {ROBUST_RUN: ROBUST_RECORD})
    shared = {
        "study": "s",
        "language": "python",
        "git_commit": "c0",
        "git_dirty": 0,
        "params_sha256": "p0",
        "created": "t0",
        "csbench_version": "0.1.0",
        "device": "cpu",
        **ROBUST_RECORD["run"],  # the run's key columns, as the record names them
    }
    expected = [
        ("case", 0.0, "mrr", 0.8),
        ("case", 0.0, "relative_drop", 0.0),
        ("case", 0.5, "mrr", 0.6),
        ("case", 0.5, "relative_drop", None),  # in the record, without a value (clean MRR 0)
        ("case", 0.5, "flip_rate", 0.25),
        ("case", None, "ir_auc", 0.7),
        ("question", 1.0, "mrr", 0.7),
        ("question", 1.0, "flip_rate", 0.1),
        ("question", None, "ir_auc", 0.7),
        ("*", 0.5, "robust_mrr", 0.55),
        ("macro", None, "ir_auc", 0.7),
        ("micro", None, "ir_auc", 0.65),
    ]
    assert rows == [
        {
            **shared,
            "perturbation": p,
            "ratio": r,
            "protocol": "full-corpus",
            "metric": m,
            "value": v,
            "run_id": ROBUST_RUN,
        }
        for p, r, m, v in expected
    ]


def test_robustness_frames_hold_the_same_points_as_the_results_rows() -> None:
    points, aucs = robustness_frames({ROBUST_RUN: ROBUST_RECORD})
    assert list(points.columns[-5:]) == ["perturbation", "ratio", "mrr", "relative_drop", "flip_rate"]
    got = [tuple(None if pd.isna(v) else v for v in row) for row in points.iloc[:, -5:].itertuples(index=False)]
    assert got == [
        ("case", 0.0, 0.8, 0.0, None),
        ("case", 0.5, 0.6, None, 0.25),
        ("question", 1.0, 0.7, None, 0.1),
        ("*", 0.5, 0.55, None, None),  # the robust MRR
    ]
    assert set(points["run_id"]) == {ROBUST_RUN} and set(points["protocol"]) == {"full-corpus"}
    assert list(zip(aucs["perturbation"], aucs["ir_auc"], strict=True)) == [
        ("case", 0.7),
        ("question", 0.7),
        ("macro", 0.7),
        ("micro", 0.65),
    ]


def _stamp_placed(config: Path, attack: str | None = None) -> None:
    """Stamp hand-made prepared / attacked data (of the current folder) as `csbench prepare` /
    `attack` would: phases read only stamped inputs (issue #22 item 3; nothing for the code before it)."""
    try:
        from csbench.lineage import stamp_placed
    except ImportError:
        return
    from csbench.config import load_config

    stamp_placed(load_config([config]), "python-stdlib", attack)


def write_prepared(root: Path, pool: pd.DataFrame) -> Path:
    """``pool`` as the prepared python-stdlib dataset under ``root`` (every record in test, the other
    splits empty) with a card saying so, as `csbench prepare` leaves it (not stamped). Returns its folder."""
    prepared = root / "data" / "prepared" / "python-stdlib"
    prepared.mkdir(parents=True)
    full = pool.assign(repo="r", path="p.py", url=pool["id"], split="test", docstring=pool["query"])
    for split in ("train", "valid", "test", "codebase"):
        (full if split == "test" else full.iloc[0:0]).to_parquet(prepared / f"{split}.parquet", index=False)
    (prepared / "card.json").write_text(json.dumps({"kind": "local-source", "splits": {"test": {"pairs": 40}}}))
    return prepared


def toy_pool(n: int = 40) -> pd.DataFrame:
    """``n`` documented Python functions whose queries share words with their code (BM25 finds most)."""
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    records = []
    for k in range(n):
        a, b = words[k % 8], words[(k // 8) % 5]
        records.append(
            {
                "id": f"mod{k}.py::{a}_{b}_{k}",
                "query": f"Compute the {a} {b} value number {k}.",
                "code": f"def {a}_{b}_{k}(x):\n    # {a} {b}\n    return x + {k}\n",
                "func_name": f"mod{k}.{a}_{b}_{k}",
                "language": "python",
            }
        )
    return pd.DataFrame(records)


def test_cli_evaluate_then_aggregate_end_to_end(tmp_path, monkeypatch, capsys) -> None:
    """The real run records of `csbench evaluate` aggregate (guards the shape written above)."""
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    raw["grid"]["datasets"] = ["python-stdlib"]  # two runs: python-stdlib x {none, no_comment} x bm25
    raw["grid"]["attacks"] = ["none", "no_comment"]
    raw["grid"]["trained"]["models"] = []  # zero-shot runs only
    raw["grid"]["summarization"]["models"] = []  # no summarizer
    raw["grid"]["models"] = ["bm25"]
    raw["evaluation"]["protocols"] = ["full-corpus", "id-chunks-1000"]  # a protocol that evaluates nothing here
    raw["robustness"]["datasets"] = ["python-packages"]  # outside the grid: no robustness runs
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    pool = toy_pool()
    for attack in ("none", "no_comment"):
        target = tmp_path / "data" / "attacked" / "python-stdlib" / attack
        target.mkdir(parents=True)
        pool.to_parquet(target / "test.parquet", index=False)
        pool.iloc[0:0].to_parquet(target / "codebase.parquet", index=False)  # no release pool: empty
        _stamp_placed(config, attack)
    for attack in ("none", "no_comment"):
        for command in ("index", "evaluate"):  # encode the pool once, then search it
            argv = ["-q", command, "--config", str(config), "--dataset", "python-stdlib", "--attack", attack]
            assert main([*argv, "--model", "bm25"]) == 0, capsys.readouterr().err
    run_dir = tmp_path / "results" / "runs" / "python-stdlib" / "none" / "bm25" / "none" / "0" / "zero_shot"
    assert {p.name for p in run_dir.iterdir()} - {"STAMP.json"} == {  # STAMP.json: issue #22 item 3
        "metrics.json",
        "provenance.json",
        "ranks.tsv",
        "run.full-corpus.trec.gz",
        "run.id-chunks-1000.trec.gz",
    }
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["protocols"]["id-chunks-1000"] == {"note": SMALL_POOL_NOTE, "n_queries": 0}
    assert metrics["protocols"]["full-corpus"]["n_queries"] == 40
    # the report also links the dataset card: audit a prepared copy of the same records
    write_prepared(tmp_path, pool)
    _stamp_placed(config)
    assert main(["-q", "audit", "--config", str(config), "--dataset", "python-stdlib", "--jobs", "1"]) == 0
    assert main(["aggregate", "--config", str(config)]) == 0
    study = tmp_path / "results" / "studies" / "default"  # params.yaml's study: its own folder
    # the card is shared by the studies, one level above theirs: the link leads to it
    assert (
        "| [python-stdlib](../../datasets/python-stdlib/card.md) | 0 | 0 | 40 |" in (study / "summary.md").read_text()
    )
    assert (study / "../../datasets/python-stdlib/card.md").is_file()
    csv = pd.read_csv(study / "summary.csv")
    assert len(csv) == 4
    assert set(csv.loc[csv["protocol"] == "full-corpus", "n_queries"]) == {40}
    md = (study / "summary.md").read_text()
    assert f"- python-stdlib/none id-chunks-1000: {SMALL_POOL_NOTE}" in md
    with sqlite3.connect(study / "results.db") as con:
        assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2 * 2 * len(METRICS)
    con.close()


# ---------------------------------------------------------------------------------------------
# csbench.io


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_atomic_open_leaves_nothing_when_the_block_raises(tmp_path) -> None:
    target = tmp_path / "sub" / "out.txt"
    with pytest.raises(RuntimeError, match="boom"), atomic_open(target) as handle:
        handle.write("half a file")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list((tmp_path / "sub").iterdir()) == []


def test_atomic_open_keeps_the_old_file_when_the_block_raises(tmp_path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("new")
        raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert _leftovers(tmp_path) == []


def test_atomic_open_writes_only_on_success(tmp_path) -> None:
    target = tmp_path / "out.bin"
    with atomic_open(target, "wb") as handle:
        handle.write(b"\x00\x01")
        assert not target.exists()  # not visible before the block ends
    assert target.read_bytes() == b"\x00\x01"
    assert _leftovers(tmp_path) == []


def test_atomic_path_cleans_up_when_the_block_raises(tmp_path) -> None:
    target = tmp_path / "db.sqlite"
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise ValueError
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_write_json_replaces_an_existing_file_atomically(tmp_path) -> None:
    target = tmp_path / "metrics.json"
    target.write_text('{"old": true}\n')
    old_inode = target.stat().st_ino
    write_json(target, {"new": [1, 2], "path": Path("a/b")})
    assert json.loads(target.read_text()) == {"new": [1, 2], "path": "a/b"}
    assert target.read_text().endswith("\n")
    assert target.stat().st_ino != old_inode  # renamed over, not rewritten in place
    assert _leftovers(tmp_path) == []


def test_write_json_failing_midway_keeps_the_old_file(tmp_path) -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("cannot serialise")

    target = tmp_path / "metrics.json"
    target.write_text('{"old": true}\n')
    with pytest.raises(RuntimeError, match="cannot serialise"):
        write_json(target, {"first": "written before the failure", "bad": Unprintable()})
    assert target.read_text() == '{"old": true}\n'
    assert _leftovers(tmp_path) == []


def test_write_text_creates_parents(tmp_path) -> None:
    target = tmp_path / "a" / "b" / "c.md"
    write_text(target, "hello\n")
    assert target.read_text() == "hello\n"
    assert os.listdir(target.parent) == ["c.md"]


def test_atomic_writes_get_the_usual_permissions_not_mkstemps_0600(tmp_path) -> None:
    import os
    import stat

    from csbench.io import _UMASK, write_json

    target = tmp_path / "metrics.json"
    write_json(target, {"a": 1})
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~_UMASK
