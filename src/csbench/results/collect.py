"""Build the results database (SQLite) and the summary table from per-run records.

Jobs never write to the database: this phase rebuilds it from the run records each time.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pandas as pd

from csbench.io import atomic_path

SUMMARIZATION = "summarization"  # the protocol (and run.task) of code summarization runs (issue #25)
# summary.csv's metric columns, those the study has: search, then summarization (BLEU, 0-100)
SUMMARY_METRICS = ("mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "accuracy")
# a chat model's matching (issue #26): accuracy over its parsed answers (GeCS re-asked the rest by hand),
# and the answers it could not parse (scored as wrong in accuracy)
SUMMARY_METRICS += ("accuracy_parsed", "n_unparseable")
# the graded protocol (qrels, issue #27): BEIR's and MTEB's headline figures besides nDCG@10
SUMMARY_METRICS += ("map@10", "recall@100")
SUMMARY_METRICS += ("bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4")
BASELINE_ATTACK = "no_comment"  # every other attack is compared with it (thesis section 3.3.1)
DROP_COLUMN = "mrr_drop_vs_no_comment_%"  # relative_drop of MRR against no_comment: positive = loss
DROP_TEXT = (  # what DROP_COLUMN holds: summary.md and the report's summary page say it alike
    f"`{DROP_COLUMN}`: relative drop of MRR against the `{BASELINE_ATTACK}` run of the same dataset, model, "
    f"loss, seed, inference and protocol, in percent: ({BASELINE_ATTACK} - attack) / {BASELINE_ATTACK} × 100, "
    "positive = loss, negative = gain (as thesis Tables 5.5-5.15)."
)
ROBUST_MRR_PERTURBATION = "*"  # robust MRR: each query's worst over the perturbations at a ratio
RUN_COLUMNS = ("study", "dataset", "language", "attack", "model", "loss", "seed", "inference")


def load_run(run_dir: Path) -> tuple[dict, dict]:
    metrics_path, provenance_path = run_dir / "metrics.json", run_dir / "provenance.json"
    for path in (metrics_path, provenance_path):
        if not path.is_file():
            raise FileNotFoundError(f"run record {path} is missing: run the evaluate phase for {run_dir} first")
    return json.loads(metrics_path.read_text()), json.loads(provenance_path.read_text())


def load_robustness(files: dict[str, Path]) -> dict[str, dict]:
    """The robustness records (robustness.json) by run path."""
    records = {}
    for run_path, file in files.items():
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench robustness` for {run_path} first")
        records[run_path] = json.loads(file.read_text())
    return records


def protocol_notes(run_dirs: list[Path]) -> dict[str, str]:
    """Each run's note on a protocol (e.g. why it evaluated no query), by ``dataset/attack protocol``."""
    notes: dict[str, str] = {}
    for run_dir in run_dirs:
        metrics = json.loads((run_dir / "metrics.json").read_text())
        for protocol, info in metrics.get("protocols", {}).items():
            if info.get("note"):
                notes[f"{metrics['run']['dataset']}/{metrics['run']['attack']} {protocol}"] = info["note"]
            if info.get("llm"):  # a chat model's matching: its prompt, shown with the results
                run = metrics["run"]
                notes[f"{run['dataset']}/{run['attack']} {protocol} ({run['model']})"] = llm_note(info["llm"])
    return notes


def llm_note(record: dict) -> str:
    """What a chat model was asked and how it answered: the prompt's name and text (``{language}`` and
    ``{input}``, GeCS's ``query [CODESPLIT] code``, filled per pair), the generation parameters and the
    unparseable answers (decided as no match)."""
    template = " ".join(str(record.get("prompt_template", "")).split())
    return (
        f"chat model asked prompt `{record.get('prompt')}` (max_tokens {record.get('max_tokens')}, temperature "
        f"{record.get('temperature') if record.get('temperature') is not None else 'server default'}): "
        f'"{template}"; {record.get("n_unparseable", 0)} of {record.get("n_answers", 0)} answers unparseable '
        "(decided as no match), every raw answer in the run's llm_answers.jsonl"
    )


def _record_counts(metrics: dict) -> list[dict]:
    """A summarization run's ``n_queries`` score (the records it scored, as a search run's scores
    have it) from ``protocols.summarization.n_queries`` when its scores do not hold one: the
    summarization figure weighs datasets by it. Nothing for a search run."""
    info = metrics.get("protocols", {}).get(SUMMARIZATION) or {}
    counted = any(s["protocol"] == SUMMARIZATION and s["metric"] == "n_queries" for s in metrics["scores"])
    if counted or info.get("n_queries") is None:
        return []
    return [{"protocol": SUMMARIZATION, "metric": "n_queries", "value": info["n_queries"]}]


API_TOTALS = ("requests", "retries", "cache_hits", "total_tokens", "truncated")


def api_totals(usage: dict | None) -> dict[str, int]:
    """An endpoint model's run (provenance ``efficiency.api_usage``: per pool, what indexing it and
    answering the queries cost) as ``eff_api_*`` columns summed over pools and phases: requests sent,
    retries, answers read from the cache, tokens sent, inputs truncated; {} for a local model."""
    if not usage:
        return {}
    parts = [counts for pool in usage.values() for counts in pool.values() if isinstance(counts, dict)]
    return {f"eff_api_{key}": int(sum(part.get(key, 0) for part in parts)) for key in API_TOTALS}


def queries_encoded(encoding: dict | None) -> dict[str, int]:
    """A dense model's run (provenance ``efficiency.query_encoding``: per pool, the queries its network
    encoded in ``evaluate``; the embedding cache served the others) as ``eff_queries_encoded``; {} for others."""
    if not encoding:
        return {}
    return {"eff_queries_encoded": int(sum(pool.get("n_forward", 0) for pool in encoding.values()))}


NESTED_EFFICIENCY = ("api_usage", "query_encoding")  # summed into columns of their own


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
                **{f"eff_{k}": v for k, v in (prov.get("efficiency") or {}).items() if k not in NESTED_EFFICIENCY},
                **api_totals((prov.get("efficiency") or {}).get("api_usage")),
                **queries_encoded((prov.get("efficiency") or {}).get("query_encoding")),
            }
        )
        for score in [*metrics["scores"], *_record_counts(metrics)]:
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


def robustness_long(record: dict) -> list[dict]:
    """One robustness record as long rows (perturbation, ratio, protocol, metric, value), in the
    order of the `results` table: per perturbation, each point of its curve (ratio 0 is the clean
    MRR the curve starts from) with ``mrr``, ``relative_drop`` and ``flip_rate`` where the record
    has them, then its ``ir_auc`` (ratio None: an area over every ratio); per ratio the robust MRR
    (perturbation ``*``, metric ``robust_mrr``); then ``ir_auc`` as ``macro`` and ``micro``."""
    protocol, summary = record["protocol"], record["summary"]
    rows: list[dict] = []

    def add(perturbation: str, ratio: float | None, metric: str, value: object) -> None:
        rows.append(
            {"perturbation": perturbation, "ratio": ratio, "protocol": protocol, "metric": metric, "value": value}
        )

    for name, curve in record["curves"].items():
        drops = summary["per_perturbation"][name].get("relative_drop", {})
        flips = record["flip_rate"].get(name, {})
        for label, mrr in curve.items():
            ratio = float(label)
            add(name, ratio, "mrr", mrr)
            if str(ratio) in drops:
                add(name, ratio, "relative_drop", drops[str(ratio)])
            if label in flips:
                add(name, ratio, "flip_rate", flips[label])
        add(name, None, "ir_auc", summary["per_perturbation"][name]["ir_auc"])
    for label, value in record["robust_mrr"].items():
        add(ROBUST_MRR_PERTURBATION, float(label), "robust_mrr", value)
    for name in ("macro", "micro"):
        add(name, None, "ir_auc", summary[f"{name}_ir_auc"])
    graded = record.get("graded")
    if graded:  # a graded protocol (qrels): the same figures of its main score, nDCG@10
        metric = graded["metric"]
        for name, curve in graded["curves"].items():
            for label, value in curve.items():
                add(name, float(label), metric, value)
            add(name, None, f"ir_auc_{metric}", graded["summary"]["per_perturbation"][name]["ir_auc"])
        for label, value in graded["robust"].items():
            add(ROBUST_MRR_PERTURBATION, float(label), f"robust_{metric}", value)
        for name in ("macro", "micro"):
            add(name, None, f"ir_auc_{metric}", graded["summary"][f"{name}_ir_auc"])
    return rows


def robustness_frames(records: dict[str, dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Long tables of the robustness records: one row per (run, perturbation, ratio) point with its
    MRR, relative drop and flip rate (and the robust MRR per ratio as perturbation ``*``); one row
    per (run, perturbation) IR-AUC, plus ``macro`` and ``micro``. Built from ``robustness_long``."""
    points, aucs = [], []
    for run_path, record in records.items():
        base = {"run_id": run_path, **record["run"], "protocol": record["protocol"]}
        by_point: dict[tuple[str, float], dict] = {}  # first appearance: the curves', then robust MRR
        by_auc: dict[str, dict] = {}
        for row in robustness_long(record):
            name, ratio, metric = row["perturbation"], row["ratio"], row["metric"]
            if metric.startswith("ir_auc"):  # ir_auc (of MRR), ir_auc_ndcg@10 (a graded protocol's)
                if name not in by_auc:
                    by_auc[name] = {**base, "perturbation": name}
                    aucs.append(by_auc[name])
                by_auc[name][metric] = row["value"]
                continue
            if metric.startswith("robust_") and metric != "robust_mrr":  # robust nDCG@10: beside robust MRR
                by_point[(name, ratio)][metric.removeprefix("robust_")] = row["value"]
                continue
            if (name, ratio) not in by_point:
                # a curve point names every column (None where the record has no value); robust MRR only its own
                blank = {} if name == ROBUST_MRR_PERTURBATION else {"relative_drop": None, "flip_rate": None}
                by_point[(name, ratio)] = {**base, "perturbation": name, "ratio": ratio, "mrr": None, **blank}
            by_point[(name, ratio)]["mrr" if metric == "robust_mrr" else metric] = row["value"]
        points += by_point.values()
    return pd.DataFrame(points), pd.DataFrame(aucs)


def robustness_markdown(records: dict[str, dict], links: str = "") -> list[str]:
    """COBE Table V: IR-AUC per perturbation, macro and micro, per run; and each run's figure
    (linked through ``links``, the way from the summary's folder to results/, e.g. ``../../``)."""
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
        row = (record["protocol"], record["clean_mrr"], record["summary"], list(record["robust_mrr"].values()))
        lines.append(_ir_auc_row(run_path, names, *row))
    lines += _graded_robustness_markdown(records, names)
    lines.append("")
    lines += [f"![robustness of {run_path}]({links}robustness/{run_path}/robustness.png)" for run_path in records]
    return lines


def _graded_robustness_markdown(records: dict[str, dict], names: list[str]) -> list[str]:
    """The same table of nDCG@10 for the runs whose robustness protocol is graded (qrels); [] without."""
    graded = {path: record["graded"] for path, record in records.items() if record.get("graded")}
    if not graded:
        return []
    metric = next(iter(graded.values()))["metric"]
    lines = [
        "",
        f"Graded protocol (relevance judgements): the same figures of {metric} (IR-AUC of its curve, robust "
        f"{metric}: each query's lowest {metric} over the perturbations at the largest ratio).",
        "",
        f"| run | protocol | clean {metric} | " + " | ".join(names) + f" | macro | micro | robust {metric} |",
        "|---|---|---:|" + "---:|" * (len(names) + 3),
    ]
    for run_path, record in graded.items():
        row = (records[run_path]["protocol"], record["clean"], record["summary"], list(record["robust"].values()))
        lines.append(_ir_auc_row(run_path, names, *row))
    return lines


def _ir_auc_row(run_path: str, names: list[str], protocol: str, clean: float, summary: dict, robust: list) -> str:
    """One run's row of an IR-AUC table: the clean score, the IR-AUC of each perturbation in ``names``,
    macro, micro, and the robust score at the largest ratio."""
    per = summary["per_perturbation"]
    cells = [f"{per[n]['ir_auc']:.4f}" if n in per else "n/a" for n in names]
    micro = summary["micro_ir_auc"]
    return (
        f"| {run_path} | {protocol} | {clean:.4f} | "
        + " | ".join(cells)
        + f" | {summary['macro_ir_auc']:.4f} | {'n/a' if micro is None else f'{micro:.4f}'}"
        + f" | {f'{robust[-1]:.4f}' if robust else 'n/a'} |"
    )


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


# The long `results` table of results.db: one row per key, its value, and the run's provenance.
RESULT_KEY = (
    "study",
    "dataset",
    "language",
    "attack",
    "perturbation",
    "ratio",
    "model",
    "loss",
    "seed",
    "inference",
    "protocol",
    "metric",
)
PROVENANCE_COLUMNS = ("git_commit", "git_dirty", "params_sha256", "created", "csbench_version", "device")
RESULT_COLUMNS = (*RESULT_KEY, "value", "run_id", *PROVENANCE_COLUMNS)
_SQL_TYPES = {"ratio": "REAL", "seed": "INTEGER", "value": "REAL", "git_dirty": "INTEGER"}
# columns the filters of `csbench results` use most, each with an index
RESULT_INDEXED = ("dataset", "attack", "perturbation", "model", "protocol", "metric", "run_id")


def _native(value: object) -> object:
    """A value SQLite can store: None for NaN / None, Python scalars for numpy ones."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value.item() if hasattr(value, "item") else value


def results_rows(scores: pd.DataFrame, runs: pd.DataFrame, robustness: dict[str, dict] | None = None) -> list[dict]:
    """The rows of the `results` table.

    Clean scores (every metric of every run and protocol) have perturbation ``none`` and ratio 0;
    a robustness record adds the rows of ``robustness_long`` (curve points, robust MRR, IR-AUC).
    Study, language and provenance columns are those of the run's evaluation record.
    """
    by_run: dict[str, dict] = {}
    for run in runs.to_dict("records"):
        packages = json.loads(run["packages"]) if isinstance(run.get("packages"), str) else {}
        dirty = _native(run.get("git_dirty"))
        by_run[run["run_id"]] = {
            "study": run.get("study"),
            "language": run.get("language"),
            "git_commit": run.get("git_commit"),
            "git_dirty": None if dirty is None else int(bool(dirty)),
            "params_sha256": run.get("params_sha256"),
            "created": run.get("created"),
            "csbench_version": packages.get("csbench"),
            "device": run.get("device"),
        }
    rows: list[dict] = []

    def add(run_id: str, run: dict, **cells: object) -> None:
        if run_id not in by_run:
            raise ValueError(f"results of {run_id} have no run record (metrics.json / provenance.json)")
        row = {**by_run[run_id], **{k: run.get(k) for k in ("dataset", "attack", "model", "loss", "seed", "inference")}}
        rows.append({c: _native(v) for c, v in {**row, **cells, "run_id": run_id}.items()})

    for score in scores.to_dict("records"):
        cells = {k: score[k] for k in ("perturbation", "ratio", "protocol", "metric", "value")}
        add(score["run_id"], score, **cells)
    for run_id, record in (robustness or {}).items():
        for cells in robustness_long(record):
            add(run_id, record["run"], **cells)
    return rows


def write_results_table(con: sqlite3.Connection, rows: list[dict]) -> None:
    """Create and fill the `results` table. A UNIQUE index on the key (ratio NULL counted as one
    value: SQLite lets NULLs repeat in a UNIQUE index) makes a duplicate row an error."""
    columns = ", ".join(
        f'"{c}" {_SQL_TYPES.get(c, "TEXT")}' + (" NOT NULL" if c in RESULT_KEY and c != "ratio" else "")
        for c in RESULT_COLUMNS
    )
    con.execute(f"CREATE TABLE results ({columns})")
    key = ", ".join("ifnull(ratio, -1.0)" if c == "ratio" else f'"{c}"' for c in RESULT_KEY)
    con.execute(f"CREATE UNIQUE INDEX results_key ON results({key})")
    for column in RESULT_INDEXED:
        con.execute(f'CREATE INDEX results_{column} ON results("{column}")')
    placeholders = ", ".join("?" * len(RESULT_COLUMNS))
    try:
        con.executemany(
            f"INSERT INTO results VALUES ({placeholders})", [[row.get(c) for c in RESULT_COLUMNS] for row in rows]
        )
    except sqlite3.IntegrityError as err:
        seen: set[tuple] = set()
        twice = [k for k in (tuple(row.get(c) for c in RESULT_KEY) for row in rows) if k in seen or seen.add(k)]
        shown = "; ".join("/".join(str(v) for v in k) for k in twice[:3])
        raise ValueError(f"results.db: {err} ({', '.join(RESULT_KEY)}: {shown or 'a key column is empty'})") from err


def write_database(
    path: Path,
    scores: pd.DataFrame,
    runs: pd.DataFrame,
    robustness: dict[str, dict] | None = None,
    stability: dict[str, dict] | None = None,
    rows: list[dict] | None = None,
) -> None:
    """results.db: the long `results` table (see ``results_rows``), which `csbench results` reads;
    and the tables it is built from or complements: `protocols` (each protocol with the script it
    reproduces), `scores` and `runs` (one row per run: its
    provenance and efficiency), `robustness_points` / `robustness_ir_auc` and `seed_stability` /
    `seed_spread` (seed spreads have no seed, so they are not in `results`). ``rows``: the
    ``results_rows`` of these arguments when the caller has them already (aggregate reuses them)."""
    rows = results_rows(scores, runs, robustness) if rows is None else rows
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
            names = list(scores["protocol"]) if "protocol" in scores.columns else []
            protocols_frame(names).to_sql("protocols", con, index=False)
            write_results_table(con, rows)
        # sqlite3's context manager commits but does not close
        con.close()


def summary_table(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per run and protocol, one column per metric, and ``DROP_COLUMN``."""
    keys = ["dataset", "attack", "model", "loss", "seed", "inference", "protocol"]
    # pivot (not pivot_table): rows only for runs that exist, no Cartesian product of the keys
    wide = scores.pivot(index=keys, columns="metric", values="value").reset_index()
    if "n_queries" in wide.columns:
        wide["n_queries"] = wide["n_queries"].astype("Int64")
    columns = keys + [m for m in ("n_queries", *SUMMARY_METRICS) if m in wide.columns]
    table = wide[columns].sort_values(keys, kind="stable").reset_index(drop=True)
    if "mrr" in table.columns:
        table[DROP_COLUMN] = drop_vs_baseline(table)
    return table


def protocols_frame(names: list[str]) -> pd.DataFrame:
    """One row per protocol of ``names`` (sorted, once each): its name, the reference script that
    defines it (``Protocol.reference``), its label (name with reference) and its description; the
    ``protocols`` table of results.db."""
    from csbench.evaluate.protocols import PROTOCOLS

    rows = []
    for name in sorted(set(names)):
        protocol = PROTOCOLS.get(name) if name in PROTOCOLS else None
        rows.append(
            {
                "protocol": name,
                "reference": protocol.reference if protocol else "",
                "label": protocol.label if protocol else name,
                "description": protocol.description if protocol else "",
            }
        )
    return pd.DataFrame(rows, columns=["protocol", "reference", "label", "description"])


def protocols_markdown(names: list[str]) -> list[str]:
    """The summary's legend: each protocol of the study with the script it reproduces."""
    frame = protocols_frame(names)
    if frame.empty:
        return []
    return ["", "Protocols (each with the script it reproduces):", ""] + [
        f"- `{row.label}`: {row.description}" for row in frame.itertuples(index=False)
    ]


def relative_drop(attacked: float, baseline: float) -> float:
    """The thesis's relative score in percent: (baseline - attacked) / baseline × 100, so a
    positive value is a loss against ``no_comment`` and a negative one a gain (thesis 5.3, e.g.
    Table 5.5: MRR 0.007 against 0.537 gives 98.70); NaN when the baseline is 0 or missing."""
    if math.isnan(attacked) or math.isnan(baseline) or baseline == 0:
        return math.nan
    return (baseline - attacked) / baseline * 100.0


def drop_vs_baseline(table: pd.DataFrame, baseline: str = BASELINE_ATTACK, metric: str = "mrr") -> pd.Series:
    """``relative_drop`` of ``metric`` against the ``baseline`` attack's run with the same dataset,
    model, loss, seed, inference and protocol (thesis Tables 5.5-5.15); NaN without that run."""
    keys = ["dataset", "model", "loss", "seed", "inference", "protocol"]
    base = table[table["attack"] == baseline].set_index(keys)[metric]
    references = [float(base.get(tuple(row), math.nan)) for row in table[keys].itertuples(index=False)]
    drops = [relative_drop(float(value), reference) for value, reference in zip(table[metric], references, strict=True)]
    return pd.Series(drops, index=table.index, dtype=float)


def _fmt(value: object, metric: str) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "n/a"
    if metric in ("n_queries", "n_unparseable"):
        return str(int(value))
    if metric in ("mean_rank", "median_rank"):
        return f"{float(value):.1f}"
    if metric == DROP_COLUMN:
        return f"{float(value):+.1f}"
    return f"{float(value):.4f}"


def datasets_markdown(cards: dict[str, Path], links: str = "") -> list[str]:
    """One line per dataset: size, leakage between splits, and duplicates in the retrieval pool;
    each links its card (through ``links``, as in ``robustness_markdown``)."""
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
        lines.append(f"| [{name}]({links}datasets/{name}/card.md) | " + " | ".join(counts) + f" | {leak} | {twins} |")
    return lines


def summary_markdown(
    table: pd.DataFrame,
    study: str,
    notes: dict[str, str],
    cards: dict[str, Path] | None = None,
    robustness: dict[str, dict] | None = None,
    stability: dict[str, dict] | None = None,
    links: str = "",
) -> str:
    """The study's summary.md. It links the seed heatmaps of the study's own folder, and the cards
    and robustness figures that studies share through ``links``: the way from the summary's folder
    to results/ (``../../`` from results/studies/<study>/)."""
    lines = [
        f"# csbench results: study `{study}`",
        "",
        "One row per run and retrieval protocol. MRR under `full-corpus` is cut at rank 1,000 and under "
        "`advtest` at 100, both ranking ties in np.argsort's order as their reference scripts (CodeXGLUE's "
        "run.py) do; other ranks count ties against the model. `csn-1000` is CodeSearchNet's model_test.py (each code "
        "ranks the queries of its chunk of 1,000, or of the whole test split when smaller) and "
        "`csn-funcname` its FuncName MRR (the function name's subtokens as the query). "
        "`n/a`: the protocol evaluated no query (see notes). " + DROP_TEXT,
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
            _fmt(v, c) if c in ("n_queries", DROP_COLUMN, *SUMMARY_METRICS) else str(v)
            for c, v in zip(table.columns, row, strict=True)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += protocols_markdown(list(table["protocol"]) if "protocol" in table.columns else [])
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {key}: {text}" for key, text in sorted(notes.items())]
    lines += robustness_markdown(robustness or {}, links)
    lines += stability_markdown(stability or {})
    lines += datasets_markdown(cards or {}, links)
    return "\n".join(lines) + "\n"


METRICS_FILE = "metrics.json"  # `dvc metrics show` (dvc.yaml: aggregate's metrics)
CURVES_FILE = "robustness_curves.csv"  # `dvc plots show` (dvc.yaml: aggregate's plots)
CURVE_COLUMNS = ("run_id", "perturbation", "ratio", "mrr")


def dvc_metrics(scores: pd.DataFrame, records: dict[str, dict]) -> dict[str, dict]:
    """The headline numbers as DVC metrics: ``{run: {protocol: {metric: value}}}`` for every score
    with a value, and ``{run: {"robustness": {"macro_ir_auc": .., "micro_ir_auc": ..}}}``."""
    out: dict[str, dict] = {}
    for row in scores.to_dict("records") if len(scores) else []:
        value = row["value"]
        if value is None or (isinstance(value, float) and value != value):
            continue
        out.setdefault(row["run_id"], {}).setdefault(row["protocol"], {})[row["metric"]] = value
    for run_path, record in records.items():
        summary = record["summary"]
        out.setdefault(run_path, {})["robustness"] = {
            k: summary[k] for k in ("macro_ir_auc", "micro_ir_auc") if summary.get(k) is not None
        }
    return out


def curves_frame(records: dict[str, dict]) -> pd.DataFrame:
    """Every point of every robustness curve (run, perturbation, ratio, MRR): DVC's plot data. The
    fixed perturbations (``question``) have no noise ratio and are left out, as is the robust MRR."""
    points, _ = robustness_frames(records)
    if points.empty:
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    fixed = {name for record in records.values() for name in record.get("fixed", [])} | {"*"}
    return points.loc[~points["perturbation"].isin(fixed), list(CURVE_COLUMNS)].reset_index(drop=True)
