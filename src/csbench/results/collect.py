"""Build the results database (SQLite) and the summary table from per-run records.

Jobs never write to the database: this phase rebuilds it from the run records each time.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd

from csbench.io import atomic_path, write_text

SUMMARY_METRICS = ("mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "accuracy")
BASELINE_ATTACK = "no_comment"  # every other attack is compared with it (thesis section 3.3.1)
CHANGE_COLUMN = "mrr_vs_no_comment_%"
RUN_COLUMNS = ("study", "dataset", "language", "attack", "model", "loss", "seed", "inference")


def load_run(run_dir: Path) -> tuple[dict, dict]:
    metrics_path, provenance_path = run_dir / "metrics.json", run_dir / "provenance.json"
    for path in (metrics_path, provenance_path):
        if not path.is_file():
            raise FileNotFoundError(f"run record {path} is missing: run the evaluate phase for {run_dir} first")
    return json.loads(metrics_path.read_text()), json.loads(provenance_path.read_text())


def collect(run_dirs: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long table of scores (one row per run × protocol × metric) and a table of run provenance."""
    score_rows, run_rows = [], []
    for run_dir in run_dirs:
        metrics, prov = load_run(run_dir)
        run = metrics["run"]
        run_id = "/".join(str(run[k]) for k in ("dataset", "attack", "model", "loss", "seed", "inference"))
        run_rows.append(
            {
                "run_id": run_id,
                **{k: run.get(k) for k in RUN_COLUMNS},
                "git_commit": prov["git"]["commit"],
                "git_dirty": prov["git"]["dirty"],
                "params_sha256": prov["params_sha256"],
                "inputs_sha256": json.dumps(prov["inputs"], sort_keys=True),
                "packages": json.dumps(prov["packages"], sort_keys=True),
                "device": prov["device"],
                "created": prov["created"],
                "wall_s": prov["timings_s"].get("total_s"),
                **{f"eff_{k}": v for k, v in (prov.get("efficiency") or {}).items()},
            }
        )
        for score in metrics["scores"]:
            score_rows.append(
                {
                    "run_id": run_id,
                    **{k: run.get(k) for k in RUN_COLUMNS},
                    "perturbation": "none",
                    "ratio": 0.0,
                    "protocol": score["protocol"],
                    "metric": score["metric"],
                    "value": score["value"],
                }
            )
    return pd.DataFrame(score_rows), pd.DataFrame(run_rows)


def robustness_frames(records: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long tables of the robustness records: one row per (run, perturbation, ratio) point with its
    MRR, relative drop and flip rate (and the robust MRR per ratio as perturbation ``*``); one row
    per (run, perturbation) IR-AUC, plus ``macro`` and ``micro``."""
    points, aucs = [], []
    for run_path, record in records.items():
        base = {"run_id": run_path, **record["run"], "protocol": record["protocol"]}
        per = record["summary"]["per_perturbation"]
        for name, curve in record["curves"].items():
            drops = per[name].get("relative_drop", {})
            for ratio, mrr in curve.items():
                points.append(
                    {
                        **base,
                        "perturbation": name,
                        "ratio": float(ratio),
                        "mrr": mrr,
                        "relative_drop": drops.get(str(float(ratio))),
                        "flip_rate": record["flip_rate"].get(name, {}).get(ratio),
                    }
                )
            aucs.append({**base, "perturbation": name, "ir_auc": per[name]["ir_auc"]})
        for ratio, value in record["robust_mrr"].items():
            points.append({**base, "perturbation": "*", "ratio": float(ratio), "mrr": value})
        aucs.append({**base, "perturbation": "macro", "ir_auc": record["summary"]["macro_ir_auc"]})
        aucs.append({**base, "perturbation": "micro", "ir_auc": record["summary"]["micro_ir_auc"]})
    return pd.DataFrame(points), pd.DataFrame(aucs)


def robustness_markdown(records: dict[str, dict]) -> list[str]:
    """COBE Table V: IR-AUC per perturbation, macro and micro, per run; and each run's figure."""
    if not records:
        return []
    names: list[str] = []
    for record in records.values():
        names += [n for n in record["curves"] if n not in names]
    lines = [
        "",
        "## Robustness to query perturbations (COBE)",
        "",
        "IR-AUC: area under the MRR-vs-noise-ratio curve (ratios 0 to the largest), divided by the ratio "
        "range, so a model that never degrades scores its clean MRR; `question` has no ratio (its MRR). "
        "Macro: mean over perturbations; micro: the area of the curve of MRR averaged over perturbations. "
        "Robust MRR: each query's worst reciprocal rank over the perturbations at the largest ratio.",
        "",
        "| run | protocol | clean MRR | " + " | ".join(names) + " | macro | micro | robust MRR |",
        "|---|---|---:|" + "---:|" * (len(names) + 3),
    ]
    for run_path, record in records.items():
        per = record["summary"]["per_perturbation"]
        cells = [f"{per[n]['ir_auc']:.4f}" if n in per else "n/a" for n in names]
        micro = record["summary"]["micro_ir_auc"]
        robust = list(record["robust_mrr"].values())
        lines.append(
            f"| {run_path} | {record['protocol']} | {record['clean_mrr']:.4f} | "
            + " | ".join(cells)
            + f" | {record['summary']['macro_ir_auc']:.4f} | {'n/a' if micro is None else f'{micro:.4f}'}"
            + f" | {f'{robust[-1]:.4f}' if robust else 'n/a'} |"
        )
    lines.append("")
    lines += [f"![robustness of {run_path}](robustness/{run_path}/robustness.png)" for run_path in records]
    return lines


def _spread_cell(spread: dict | None) -> str:
    """``mean ± std [min, max]`` of a spread record (n/a without one, or with a single seed)."""
    if not spread or spread.get("std") is None:
        return "n/a"
    return f"{spread['mean']:.4f} ± {spread['std']:.4f} [{spread['min']:.4f}, {spread['max']:.4f}]"


def stability_markdown(records: dict[str, dict]) -> list[str]:
    """COBE V-E: per trained configuration, the agreement of its seeds' top-k lists and the spread
    of MRR and IR-AUC across seeds; each configuration's heatmap (COBE Fig. 5)."""
    if not records:
        return []
    first = next(iter(records.values()))
    lines = [
        "",
        "## Seed stability (COBE V-E)",
        "",
        f"Runs that differ only in seed, compared on each query's top-{first['k']} list under "
        f"`{first['protocol']}`: Spearman correlation over the union of two lists (an item a list lacks "
        "ranks after its last), and the share of items both lists hold; means over queries, then "
        "min / mean / max over the pairs of seeds. Spread: mean ± sample std [min, max] across seeds.",
        "",
        "| configuration | seeds | Spearman min / mean / max | overlap min / mean / max | MRR | IR-AUC (macro) |",
        "|---|---|---|---|---|---|",
    ]
    for group, record in records.items():
        rho, overlap = record["summary"]["spearman"], record["summary"]["overlap"]
        ir_auc = record["spread"].get("ir_auc") or {}
        lines.append(
            f"| {group} | {', '.join(str(s) for s in record['seeds'])} | "
            f"{rho['min']:.3f} / {rho['mean']:.3f} / {rho['max']:.3f} | "
            f"{overlap['min']:.3f} / {overlap['mean']:.3f} / {overlap['max']:.3f} | "
            f"{_spread_cell(record['spread'].get('mrr'))} | {_spread_cell(ir_auc.get('macro'))} |"
        )
    lines.append("")
    lines += [f"![seed stability of {group}](stability/{group}/heatmap.png)" for group in records]
    return lines


def stability_frames(records: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Seed stability as tables: one row per configuration and pair of seeds (mean top-k Spearman
    and overlap), and one per configuration and metric (spread across seeds of MRR, IR-AUC)."""
    keys = ("dataset", "attack", "model", "loss", "inference")
    pairs, spreads = [], []
    for group, record in records.items():
        where = dict(zip(keys, group.split("/"), strict=True)) | {"protocol": record["protocol"], "k": record["k"]}
        for pair in record["pairs"]:
            seed_a, seed_b = pair["seeds"]
            row = {"seed_a": seed_a, "seed_b": seed_b, "spearman": pair["spearman"], "overlap": pair["overlap"]}
            pairs.append(where | row | {"n_queries": pair["n_queries"]})
        ir_auc = record["spread"].get("ir_auc") or {}
        named = {
            "mrr": record["spread"].get("mrr"),
            "ir_auc_macro": ir_auc.get("macro"),
            "ir_auc_micro": ir_auc.get("micro"),
        }
        for metric, spread in named.items():
            if spread:
                stats = {k: spread.get(k) for k in ("n", "min", "max", "mean", "std")}
                spreads.append(where | {"metric": metric} | stats)
    return pd.DataFrame(pairs), pd.DataFrame(spreads)


def write_database(
    path: Path,
    scores: pd.DataFrame,
    runs: pd.DataFrame,
    robustness: dict[str, dict] | None = None,
    stability: dict[str, dict] | None = None,
) -> None:
    with atomic_path(path) as tmp:
        with sqlite3.connect(tmp) as con:
            scores.to_sql("scores", con, index=False)
            runs.to_sql("runs", con, index=False)
            if robustness:
                points, aucs = robustness_frames(robustness)
                points.to_sql("robustness_points", con, index=False)
                aucs.to_sql("robustness_ir_auc", con, index=False)
            if stability:
                pairs, spreads = stability_frames(stability)
                pairs.to_sql("seed_stability", con, index=False)
                spreads.to_sql("seed_spread", con, index=False)
            con.execute("CREATE INDEX scores_run ON scores(run_id)")
            con.execute(
                "CREATE VIEW results AS SELECT s.*, r.git_commit, r.params_sha256, r.created "
                "FROM scores s JOIN runs r USING (run_id)"
            )
        # sqlite3's context manager commits but does not close
        con.close()


def summary_table(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per run and protocol, one column per metric."""
    keys = ["dataset", "attack", "model", "loss", "seed", "inference", "protocol"]
    # pivot (not pivot_table): rows only for runs that exist, no Cartesian product of the keys
    wide = scores.pivot(index=keys, columns="metric", values="value").reset_index()
    if "n_queries" in wide.columns:
        wide["n_queries"] = wide["n_queries"].astype("Int64")
    columns = keys + [m for m in ("n_queries", *SUMMARY_METRICS) if m in wide.columns]
    table = wide[columns].sort_values(keys, kind="stable").reset_index(drop=True)
    if "mrr" in table.columns:
        table[CHANGE_COLUMN] = change_vs_baseline(table)
    return table


def change_vs_baseline(table: pd.DataFrame, baseline: str = BASELINE_ATTACK, metric: str = "mrr") -> pd.Series:
    """Relative change of ``metric`` in percent against the ``baseline`` attack's run with the same
    dataset, model, loss, seed, inference and protocol (thesis Tables 5.x); NaN without that run."""
    keys = ["dataset", "model", "loss", "seed", "inference", "protocol"]
    base = table[table["attack"] == baseline].set_index(keys)[metric]
    reference = pd.Series([base.get(tuple(row), float("nan")) for row in table[keys].itertuples(index=False)])
    return (table[metric].astype(float) / reference.astype(float) - 1.0) * 100.0


def _fmt(value: object, metric: str) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    if metric == "n_queries":
        return str(int(value))
    if metric in ("mean_rank", "median_rank"):
        return f"{float(value):.1f}"
    if metric == CHANGE_COLUMN:
        return f"{float(value):+.1f}"
    return f"{float(value):.4f}"


def datasets_markdown(cards: dict[str, Path]) -> list[str]:
    """One line per dataset: size, leakage between splits, and duplicates in the retrieval pool."""
    if not cards:
        return []
    lines = [
        "",
        "## Datasets",
        "",
        "| dataset | train | valid | test | test code also in train (exact / near) | pool records with a twin |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, path in cards.items():
        if not path.is_file():
            raise FileNotFoundError(f"dataset card {path} is missing: run `csbench audit --dataset {name}` first")
        data = json.loads(path.read_text())
        splits, audit = data["card"]["splits"], data["audit"]
        shared = audit["shared_code"].get("test_in_train")
        leak = f"{shared['exact']} / {shared['near']}" if shared else "n/a"
        twins = audit["pool_duplicates"]["exact_records"] if audit["pool_duplicates"] else "n/a"
        counts = [str(splits.get(s, {}).get("pairs", 0)) for s in ("train", "valid", "test")]
        lines.append(f"| [{name}](datasets/{name}/card.md) | " + " | ".join(counts) + f" | {leak} | {twins} |")
    return lines


def summary_markdown(
    table: pd.DataFrame,
    study: str,
    notes: dict[str, str],
    cards: dict[str, Path] | None = None,
    robustness: dict[str, dict] | None = None,
    stability: dict[str, dict] | None = None,
) -> str:
    lines = [
        f"# csbench results: study `{study}`",
        "",
        "One row per run and retrieval protocol. MRR under `full-corpus` is cut at rank 1,000; "
        "ranks count ties against the model. `n/a`: the protocol evaluated no query (see notes). "
        f"`{CHANGE_COLUMN}`: relative change of MRR against the `{BASELINE_ATTACK}` run of the same dataset, "
        "model and protocol, in percent.",
        "",
        "| " + " | ".join(table.columns) + " |",
        "|"
        + "|".join(
            "---" if c in ("dataset", "attack", "model", "loss", "inference", "protocol") else "---:"
            for c in table.columns
        )
        + "|",
    ]
    for row in table.itertuples(index=False):
        cells = [
            _fmt(v, c) if c in ("n_queries", CHANGE_COLUMN, *SUMMARY_METRICS) else str(v)
            for c, v in zip(table.columns, row, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {key}: {text}" for key, text in sorted(notes.items())]
    lines += robustness_markdown(robustness or {})
    lines += stability_markdown(stability or {})
    lines += datasets_markdown(cards or {})
    return "\n".join(lines) + "\n"


def aggregate(
    run_dirs: list[Path],
    out_dir: Path,
    study: str,
    cards: dict[str, Path] | None = None,
    robustness: dict[str, Path] | None = None,
    stability: dict[str, dict] | None = None,
) -> pd.DataFrame:
    records = {}
    for run_path, file in (robustness or {}).items():
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench robustness` for {run_path} first")
        records[run_path] = json.loads(file.read_text())
    scores, runs = collect(run_dirs)
    table = summary_table(scores)
    notes: dict[str, str] = {}
    for run_dir in run_dirs:
        metrics = json.loads((run_dir / "metrics.json").read_text())
        for protocol, info in metrics.get("protocols", {}).items():
            if info.get("note"):
                notes[f"{metrics['run']['dataset']}/{metrics['run']['attack']} {protocol}"] = info["note"]
    out_dir.mkdir(parents=True, exist_ok=True)
    write_database(out_dir / "results.db", scores, runs, records, stability)
    with atomic_path(out_dir / "summary.csv") as tmp:
        table.to_csv(tmp, index=False)
    write_text(out_dir / "summary.md", summary_markdown(table, study, notes, cards, records, stability))
    return table
