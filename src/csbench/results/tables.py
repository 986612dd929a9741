"""Tables laid out like the papers' (Markdown, LaTeX, CSV, and an HTML page for the report), built from
the long `results` table.

Every table starts from the rows of ``csbench.results.collect.results_rows`` (one per study,
dataset, language, attack, perturbation, ratio, model, loss, seed, inference, protocol, metric),
averaged over seeds first (mean, sample std, count). A table is a grid of cells: row keys (the
key columns that vary inside the table; the constant ones go into its caption) and value columns,
optionally grouped (a dataset's MRR / Top-1 / ... under the dataset's name, as the thesis's
Tables 5.2-5.3 and GeCS Table 2 group them). A table without a single value is not built.

- ``mrr_by_language``: COBE Table IV / thesis Table 5.1
- ``ir_auc``: COBE Table V
- ``attacks_absolute``, ``attacks_relative``: thesis Tables 5.2-5.15
- ``attacks_weighted``: thesis Table 5.16
- ``gecs``, ``gecs_groups``: GeCS Tables 2 and 3
- ``datasets``: COBE Tables I-II, from the dataset cards
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from csbench.io import atomic_path, write_json, write_text
from csbench.results.collect import BASELINE_ATTACK, RESULT_KEY, relative_drop

TABLES_DIR = "tables"
INDEX_FILE = "index.json"  # tables/index.json: the specs and files written, for the report
SUFFIXES = (".md", ".tex", ".csv")  # the paper tables; index.json lists them
PAGE_SUFFIX = ".html"  # the page of a table in `snakemake --report`
CLEAN = "none"  # perturbation of the clean (unperturbed) scores
UNATTACKED = ("none", BASELINE_ATTACK)  # the code as released (thesis "Base") and without comments
THESIS_METRICS = ("mrr", "r@1", "r@5", "r@10")
METRIC_LABELS = {
    "mrr": "MRR",
    "r@1": "Top-1",
    "r@5": "Top-5",
    "r@10": "Top-10",
    "accuracy": "Acc",
    "accuracy_parsed": "Acc (parsed answers)",
    "n_unparseable": "Unparseable answers",
}
OVERALL_IR_AUC = {"macro": "Overall (macro)", "micro": "Overall (micro)"}
# GeCS section 4.2: matching is scored by accuracy, ranking (99 distractors) by MRR
GECS_PROTOCOLS = {"matching": "accuracy", "gecs-100": "mrr"}
GECS_CSN_PREFIX = "gecs-csn-"
GECS_CSN_AVG = "CodeSearchNet Avg"
GECS_ORDER = ("ruby", "go", "php", "java", "javascript")  # GeCS Table 5's order of the CSN languages
# key columns a table may show; those with one value in a table move into its caption
ROW_KEYS = ("study", "dataset", "attack", "model", "loss", "inference", "protocol")
LENGTH_SPLITS = ("train", "test")  # the datasets table's length columns (COBE Table I: training, codebase)
TABLE_NAMES = (
    "mrr_by_language",
    "ir_auc",
    "attacks_absolute",
    "attacks_relative",
    "attacks_weighted",
    "gecs",
    "gecs_groups",
    "summarization_absolute",  # csbench.results.summarization (code summarization runs, issue #25)
    "summarization_relative",
    "datasets",
)
NA = "n/a"


@dataclass(frozen=True)
class TableSpec:
    """One table: ``name`` is the file stem (tables/{name}.md, .tex, .csv), ``title`` names it and
    the paper table it mirrors, ``caption`` says what it shows and how the numbers were computed."""

    name: str
    title: str
    caption: str


@dataclass(frozen=True)
class Cell:
    """A value (NaN: none) and its spread (NaN: not shown); ``decimals`` overrides the table's."""

    mean: float
    std: float = math.nan
    decimals: int | None = None


Column = tuple[str, str]  # (group, label); group "" for a column outside any group


@dataclass(frozen=True)
class Table:
    """A rendered-ready table: row key names, value columns, and per row its keys and cells."""

    spec: TableSpec
    key_names: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[tuple[tuple[str, ...], tuple[Cell, ...]], ...]
    decimals: int


# ---------------------------------------------------------------- inputs


def as_frame(results: pd.DataFrame | Iterable[Mapping]) -> pd.DataFrame:
    """The long results rows as a DataFrame with every key column (a missing one is empty)."""
    frame = results.copy() if isinstance(results, pd.DataFrame) else pd.DataFrame(list(results))
    for column in (*RESULT_KEY, "value"):
        if column not in frame.columns:
            frame[column] = None
    return frame


def seed_means(results: pd.DataFrame | Iterable[Mapping]) -> pd.DataFrame:
    """One row per key without the seed: ``mean``, sample ``std`` (NaN with one seed) and ``n``
    (seeds with a value) of ``value``; ``seed_min`` / ``seed_max``. Row order: first appearance."""
    frame = as_frame(results)
    keys = [c for c in RESULT_KEY if c != "seed"]
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    frame["ratio"] = pd.to_numeric(frame["ratio"], errors="coerce").astype(float)
    for column in keys:
        if column != "ratio":
            frame[column] = frame[column].fillna("").astype(str)
    if frame.empty:
        return pd.DataFrame(columns=[*keys, "mean", "std", "n", "seed_min", "seed_max"])
    grouped = frame.groupby(keys, dropna=False, sort=False)
    out = grouped["value"].agg(mean="mean", std="std", n="count").reset_index()
    seeds = grouped["seed"].agg(["min", "max"]).reset_index(drop=True)
    out["seed_min"], out["seed_max"] = seeds["min"].to_numpy(), seeds["max"].to_numpy()
    for column in keys:  # plain str objects: iterating rows of Arrow-backed strings is slow
        if column != "ratio":
            out[column] = out[column].astype(object)
    return out


def dataset_labels(avg: pd.DataFrame) -> dict[str, str]:
    """Column label of each dataset: its language when every dataset has one language and no two
    datasets share one (``csn-filtered-ruby`` -> ``ruby``), else the dataset's name."""
    languages = avg.groupby("dataset", sort=False)["language"].agg(lambda s: sorted(set(s) - {""}))
    names = list(languages.index)
    single = [langs[0] if len(langs) == 1 else None for langs in languages]
    if all(single) and len(set(single)) == len(single):
        return dict(zip(names, single, strict=True))
    return {name: name for name in names}


def _first_seen(values: Iterable[str], first: Sequence[str] = ()) -> dict[str, int]:
    """Rank of each value: those in ``first`` in that order, then the rest by first appearance."""
    order = [v for v in first if v in set(values)] if first else []
    order += [v for v in dict.fromkeys(values) if v not in order]
    return {v: i for i, v in enumerate(order)}


def _row_ranks(avg: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Per key column, the order its values appear in (attacks: ``none``, ``no_comment`` first)."""
    ranks = {c: _first_seen(avg[c].tolist()) for c in ROW_KEYS if c in avg}
    ranks["attack"] = _first_seen(avg["attack"].tolist(), UNATTACKED)
    return ranks


# ---------------------------------------------------------------- assembling a table


def _grid(
    records: Iterable[Mapping],
    row_keys: Sequence[str],
    column: Callable[[Mapping], Column],
    cell: Callable[[Mapping], Cell] = lambda r: Cell(r["mean"], r["std"]),
) -> dict[tuple[str, ...], dict[Column, Cell]]:
    """Cells by row (tuple of ``row_keys`` values) and column."""
    grid: dict[tuple[str, ...], dict[Column, Cell]] = {}
    for record in records:
        grid.setdefault(tuple(str(record[k]) for k in row_keys), {})[column(record)] = cell(record)
    return grid


def _has_value(cell: Cell | None) -> bool:
    return cell is not None and not math.isnan(cell.mean)


def _finish(
    name: str,
    title: str,
    caption: str,
    row_keys: Sequence[str],
    grid: Mapping[tuple[str, ...], Mapping[Column, Cell]],
    columns: Sequence[Column],
    decimals: int,
    keep: Sequence[str] = ("model",),
    ranks: Mapping[str, Mapping[str, int]] | None = None,
) -> Table | None:
    """The table of ``grid``: rows without a value and columns without a value dropped, rows sorted
    by ``ranks`` per key, key columns with one value (not in ``keep``) moved into the caption.
    None when no cell has a value."""
    rows = {key: cells for key, cells in grid.items() if any(_has_value(c) for c in cells.values())}
    columns = [c for c in dict.fromkeys(columns) if any(_has_value(cells.get(c)) for cells in rows.values())]
    if not rows or not columns:
        return None
    ranks = ranks or {}
    order = sorted(
        rows,
        key=lambda key: tuple(
            ranks.get(k, {}).get(v, len(ranks.get(k, {}))) for k, v in zip(row_keys, key, strict=True)
        ),
    )
    shown = [i for i, k in enumerate(row_keys) if k in keep or len({key[i] for key in order}) > 1]
    fixed = [f"{row_keys[i]} `{order[0][i]}`" for i in range(len(row_keys)) if i not in shown and order[0][i]]
    if fixed:
        caption += " All rows: " + ", ".join(fixed) + "."
    return Table(
        spec=TableSpec(name=name, title=title, caption=caption),
        key_names=tuple(row_keys[i] for i in shown),
        columns=tuple(columns),
        rows=tuple(
            (tuple(key[i] for i in shown), tuple(rows[key].get(c, Cell(math.nan)) for c in columns)) for key in order
        ),
        decimals=decimals,
    )


def _seeds_note(avg: pd.DataFrame) -> str:
    """How many seeds each model's numbers average, e.g. ``bm25 1 (seed 0); nbow 3 (seeds 0-2)``."""
    if avg.empty or avg["n"].max() <= 1:
        return ""
    parts = []
    for model, part in avg.groupby("model", sort=False):
        low, high = part["seed_min"].min(), part["seed_max"].max()
        if pd.isna(low) or pd.isna(high):
            seeds = "seeds unknown"
        else:
            seeds = f"seed {int(low)}" if low == high else f"seeds {int(low)}-{int(high)}"
        parts.append(f"{model} {int(part['n'].max())} ({seeds})")
    return (
        " Mean over seeds (± sample std across seeds where a value has more than one seed). "
        f"Seeds averaged per value, at most: {'; '.join(parts)}."
    )


# ---------------------------------------------------------------- the tables


def mrr_by_language(avg: pd.DataFrame) -> Table | None:
    """COBE Table IV (thesis Table 5.1): MRR per language (columns) and model (rows) on clean
    queries over the un-attacked code: attacks ``none`` and ``no_comment``, side by side under each
    language when the study has both (thesis Table 5.1's Base / NoCom), every attack as rows when it
    has neither. Overall = unweighted mean over the languages, for rows with all of them."""
    clean = avg[(avg["perturbation"] == CLEAN) & (avg["metric"] == "mrr")]
    unattacked = clean[clean["attack"].isin(UNATTACKED)]
    clean = unattacked if not unattacked.empty else clean
    labels = dataset_labels(avg)
    side_by_side = set(clean["attack"]) == set(UNATTACKED)
    row_keys = ("study", "model", "loss", "inference", "protocol")
    if side_by_side:
        attacks = list(UNATTACKED)
        grid = _grid(clean.to_dict("records"), row_keys, lambda r: (labels[r["dataset"]], r["attack"]))
    else:
        attacks, row_keys = [""], ("study", "attack", *row_keys[1:])
        grid = _grid(clean.to_dict("records"), row_keys, lambda r: ("", labels[r["dataset"]]))

    def column(dataset: str, attack: str) -> Column:
        return (labels[dataset], attack) if side_by_side else ("", labels[dataset])

    datasets_ = list(dict.fromkeys(clean["dataset"]))
    columns = [column(d, a) for d in datasets_ for a in attacks]
    if len(datasets_) > 1:
        for cells in grid.values():
            for attack in attacks:
                values = [cells[column(d, attack)].mean for d in datasets_ if _has_value(cells.get(column(d, attack)))]
                mean = sum(values) / len(values) if len(values) == len(datasets_) else math.nan
                cells[("Overall", attack) if side_by_side else ("", "Overall")] = Cell(mean)
        columns += [("Overall", a) if side_by_side else ("", "Overall") for a in attacks]
    caption = (
        "MRR of each model (rows) per language (columns) on clean queries, for the code as released "
        "(attack `none`, the thesis's 'Base') and without comments (`no_comment`, the thesis's 'NoCom' and "
        "COBE's setting). Overall: unweighted mean over the languages (as COBE's Overall), only for rows "
        "with every language."
    )
    return _finish(
        "mrr_by_language",
        "MRR per language and model (COBE Table IV, thesis Table 5.1)",
        caption + _seeds_note(clean),
        row_keys,
        grid,
        columns,
        decimals=3,
        keep=("model", "attack"),
        ranks=_row_ranks(avg),
    )


def ir_auc(avg: pd.DataFrame) -> Table | None:
    """COBE Table V: IR-AUC per perturbation (columns) per run configuration (rows), then the
    macro and micro overall IR-AUC; the clean MRR first, for reference."""
    aucs = avg[avg["metric"] == "ir_auc"]
    if aucs.empty:
        return None
    row_keys = ("study", "dataset", "attack", "model", "loss", "inference", "protocol")

    def column(record: Mapping) -> Column:
        return "", OVERALL_IR_AUC.get(record["perturbation"], record["perturbation"])

    grid = _grid(aucs.to_dict("records"), row_keys, column)
    clean = avg[(avg["perturbation"] == CLEAN) & (avg["metric"] == "mrr")]
    for record in clean.to_dict("records"):
        key = tuple(str(record[k]) for k in row_keys)
        if key in grid:
            grid[key][("", "clean MRR")] = Cell(record["mean"], record["std"])
    names = [p for p in dict.fromkeys(aucs["perturbation"]) if p not in OVERALL_IR_AUC]
    columns = [("", "clean MRR"), *(("", p) for p in names), *(("", label) for label in OVERALL_IR_AUC.values())]
    caption = (
        "IR-AUC per query perturbation: the area under the MRR-vs-noise-ratio curve from ratio 0 (the clean "
        "MRR) to the largest ratio, divided by the ratio range, so a model that never degrades scores its "
        "clean MRR; `question` has no ratio (its MRR). Overall (macro): mean over the perturbations (COBE's "
        "Overall); Overall (micro): the area of the curve of MRR averaged over the perturbations at each ratio. "
        "Clean MRR: the unperturbed queries, for reference."
    )
    return _finish(
        "ir_auc",
        "IR-AUC per query perturbation (COBE Table V)",
        caption + _seeds_note(aucs),
        row_keys,
        grid,
        columns,
        decimals=3,
        ranks=_row_ranks(avg),
    )


ATTACK_ROW_KEYS = ("study", "inference", "attack", "model", "loss", "protocol")
INFERENCE_NOTE = (
    "Inference: `confused` = trained and tested on the attacked code; `not_confused` = trained on "
    "`no_comment`, tested on the attacked code; `zero_shot` = no training."
)


def _thesis_scores(avg: pd.DataFrame) -> pd.DataFrame:
    return avg[(avg["perturbation"] == CLEAN) & avg["metric"].isin(THESIS_METRICS)]


def _metric_columns(datasets: Iterable[str], labels: Mapping[str, str], unit: str = "") -> list[Column]:
    return [(labels[d], METRIC_LABELS[m] + unit) for d in dict.fromkeys(datasets) for m in THESIS_METRICS]


def attacks_absolute(avg: pd.DataFrame) -> Table | None:
    """Thesis Tables 5.2-5.4: MRR, Top-1, Top-5, Top-10 (fractions) per attack and model (rows)
    and dataset (column groups), for each inference type and protocol."""
    scores = _thesis_scores(avg)
    labels = dataset_labels(avg)
    grid = _grid(
        scores.to_dict("records"), ATTACK_ROW_KEYS, lambda r: (labels[r["dataset"]], METRIC_LABELS[r["metric"]])
    )
    caption = (
        "MRR, Top-1, Top-5 and Top-10 (fractions, as the thesis's tables) of each attack (rows) per "
        "dataset (column groups), clean queries. " + INFERENCE_NOTE
    )
    return _finish(
        "attacks_absolute",
        "Scores per attack (thesis Tables 5.2-5.4)",
        caption + _seeds_note(scores),
        ATTACK_ROW_KEYS,
        grid,
        _metric_columns(scores["dataset"], labels),
        decimals=3,
        keep=("attack", "model"),
        ranks=_row_ranks(avg),
    )


def relative_grid(
    scores: pd.DataFrame, labels: Mapping[str, str], metric_labels: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[tuple[str, ...], dict[Column, Cell]]]:
    """The attacked rows of ``scores`` (seed means) and their grid of drops against the ``no_comment``
    run of the same study, dataset, model, loss, inference type, protocol and metric, in percent
    (``collect.relative_drop``; n/a without one): the relative tables of search and summarization."""
    base_keys = ["study", "dataset", "model", "loss", "inference", "protocol", "metric"]
    baseline = {
        tuple(r[k] for k in base_keys): r["mean"]
        for r in scores[scores["attack"] == BASELINE_ATTACK].to_dict("records")
    }
    attacked = scores[scores["attack"] != BASELINE_ATTACK]

    def cell(record: Mapping) -> Cell:
        return Cell(relative_drop(record["mean"], baseline.get(tuple(record[k] for k in base_keys), math.nan)))

    grid = _grid(
        attacked.to_dict("records"),
        ATTACK_ROW_KEYS,
        lambda r: (labels[r["dataset"]], metric_labels[r["metric"]] + " [%]"),
        cell,
    )
    return attacked, grid


def attacks_relative(avg: pd.DataFrame) -> Table | None:
    """Thesis Tables 5.5-5.15: each attack's scores relative to the ``no_comment`` run of the same
    dataset, model, loss, inference type and protocol, in percent (see ``collect.relative_drop``)."""
    scores = _thesis_scores(avg)
    labels = dataset_labels(avg)
    attacked, grid = relative_grid(scores, labels, METRIC_LABELS)
    caption = (
        "Relative scores against `no_comment`, in percent, as the thesis defines them (Tables 5.5-5.15): "
        "(no_comment - attack) / no_comment × 100 for each metric, against the `no_comment` run of the same "
        "dataset, model, loss, inference type and protocol; positive = the attack lowered the score, "
        "negative = it raised it. Computed from the means over seeds; n/a without a `no_comment` run or "
        "when its score is 0. " + INFERENCE_NOTE
    )
    return _finish(
        "attacks_relative",
        "Scores per attack relative to no_comment, % (thesis Tables 5.5-5.15)",
        caption + _seeds_note(attacked),
        ATTACK_ROW_KEYS,
        grid,
        _metric_columns(attacked["dataset"], labels, " [%]"),
        decimals=2,
        keep=("attack", "model"),
        ranks=_row_ranks(avg),
    )


def weighted_average(values: Sequence[float], weights: Sequence[float]) -> float:
    """Σ w·x / Σ w over the pairs with a value and a positive weight; NaN when there is none."""
    pairs = [(x, w) for x, w in zip(values, weights, strict=True) if not math.isnan(x) and w > 0]
    total = sum(w for _, w in pairs)
    return sum(x * w for x, w in pairs) / total if total else math.nan


SIZE_KEYS = ("study", "dataset", "attack", "model", "loss", "inference", "protocol")  # a score's test set
WEIGHTED_KEYS = ("study", "inference", "attack", "model", "loss", "protocol", "metric")  # averaged over datasets


def size_weighted(avg: pd.DataFrame) -> list[dict]:
    """The thesis's metrics on clean queries averaged over the datasets weighted by their size (thesis
    Table 5.16, Appendix E): per ``WEIGHTED_KEYS``, ``weighted_average`` of the seed means of
    ``avg`` (``seed_means``), each weighted by the number of test queries it was computed on.
    Records with the ``WEIGHTED_KEYS`` and ``mean`` (NaN when no dataset has a value and a size)."""
    scores = _thesis_scores(avg)
    clean = avg[avg["perturbation"] == CLEAN]
    sizes = {
        tuple(r[k] for k in SIZE_KEYS): r["mean"] for r in clean[clean["metric"] == "n_queries"].to_dict("records")
    }
    pairs: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}  # per group: scores, weights
    for record in scores.to_dict("records"):
        values, weights = pairs.setdefault(tuple(record[k] for k in WEIGHTED_KEYS), ([], []))
        values.append(record["mean"])
        weight = sizes.get(tuple(record[k] for k in SIZE_KEYS), math.nan)
        weights.append(0.0 if math.isnan(weight) else weight)
    return [
        {**dict(zip(WEIGHTED_KEYS, key, strict=True)), "mean": weighted_average(values, weights)}
        for key, (values, weights) in pairs.items()
    ]


def attacks_weighted(avg: pd.DataFrame) -> Table | None:
    """Thesis Table 5.16: per model (rows) and attack (column groups), each metric averaged over
    the datasets weighted by their size (``size_weighted``). Needs two datasets or more."""
    scores = _thesis_scores(avg)
    if scores["dataset"].nunique() < 2:
        return None
    records = size_weighted(avg)
    row_keys = ("study", "inference", "model", "loss", "protocol")
    grid = _grid(records, row_keys, lambda r: (r["attack"], METRIC_LABELS[r["metric"]]), lambda r: Cell(r["mean"]))
    ranks = _row_ranks(avg)
    attacks = sorted(dict.fromkeys(scores["attack"]), key=ranks["attack"].__getitem__)
    columns = [(a, METRIC_LABELS[m]) for a in attacks for m in THESIS_METRICS]
    caption = (
        "Size-weighted average over the datasets (thesis Table 5.16): for each model, attack and metric, "
        "Σ n_d·score_d / Σ n_d over the datasets d with a score, n_d = the number of test queries that score "
        "was computed on (the thesis weighs by test-set size, its Appendix E). Scores are means over seeds; "
        "fractions. " + INFERENCE_NOTE
    )
    return _finish(
        "attacks_weighted",
        "Size-weighted scores per attack and model (thesis Table 5.16)",
        caption,
        row_keys,
        grid,
        columns,
        decimals=3,
        ranks=ranks,
    )


def gecs_test_set(dataset: str) -> str | None:
    """GeCS test set a dataset stands for (``gecs-csn-go`` -> ``go``, ``advtest`` -> ``AdvTest``,
    ``cosqa*`` -> ``CoSQA``, ``statcodesearch`` -> ``StatCodeSearch``); None for other datasets."""
    if dataset.startswith(GECS_CSN_PREFIX):
        return dataset.removeprefix(GECS_CSN_PREFIX)
    if dataset == "advtest":
        return "AdvTest"
    if dataset.startswith("cosqa"):
        return "CoSQA"
    if dataset == "statcodesearch":
        return "StatCodeSearch"
    return None


GECS_GROUPS = {  # GeCS 4.3: unweighted means over test sets
    "Robustness": ("AdvTest", "CoSQA"),
    "Cross-Lingual": (GECS_CSN_AVG, "StatCodeSearch"),
    "Domain": ("StatCodeSearch",),
}


def _gecs_scores(avg: pd.DataFrame) -> pd.DataFrame:
    """GeCS scores: accuracy under ``matching``, MRR under ``gecs-100``, on GeCS test sets."""
    wanted = pd.Series(False, index=avg.index)
    for protocol, metric in GECS_PROTOCOLS.items():
        wanted |= (avg["protocol"] == protocol) & (avg["metric"] == metric)
    scores = avg[wanted & (avg["perturbation"] == CLEAN)]
    scores = scores[scores["dataset"].map(gecs_test_set).notna()].copy()
    scores["test_set"] = scores["dataset"].map(gecs_test_set)
    return scores


GECS_ROW_KEYS = ("study", "inference", "model", "loss", "attack")
GECS_NOTE = (
    "Acc: matching accuracy (`matching`: the positives and as many negatives drawn from the same set); "
    "MRR: the correct code against 99 distractors drawn per query (`gecs-100`). `confused` = fine-tuned, "
    "`zero_shot` = not fine-tuned."
)


def _gecs_test_grid(scores: pd.DataFrame) -> tuple[dict[tuple[str, ...], dict[Column, Cell]], list[str]]:
    """Cells per row and (test set, Acc / MRR), with the CodeSearchNet Avg; the test sets in order."""
    grid = _grid(scores.to_dict("records"), GECS_ROW_KEYS, lambda r: (r["test_set"], METRIC_LABELS[r["metric"]]))
    present = set(scores["test_set"])
    csn = set(scores.loc[scores["dataset"].str.startswith(GECS_CSN_PREFIX), "test_set"])
    languages = [t for t in GECS_ORDER if t in csn] + sorted(csn - set(GECS_ORDER))
    others = [t for t in ("AdvTest", "CoSQA", "StatCodeSearch") if t in present]
    for cells in grid.values():
        for metric in ("Acc", "MRR"):
            values = [cells[(t, metric)].mean for t in languages if _has_value(cells.get((t, metric)))]
            if languages and len(values) == len(languages):
                cells[(GECS_CSN_AVG, metric)] = Cell(sum(values) / len(values))
    sets = ([GECS_CSN_AVG] if languages else []) + languages + others
    return grid, sets


def gecs(avg: pd.DataFrame) -> Table | None:
    """GeCS Table 2: Acc and MRR per test set (the CodeSearchNet languages, their average, AdvTest,
    CoSQA, StatCodeSearch) and model (rows)."""
    scores = _gecs_scores(avg)
    if scores.empty:
        return None
    grid, sets = _gecs_test_grid(scores)
    caption = (
        "Matching accuracy and ranking MRR per GeCS test set. CodeSearchNet Avg: unweighted mean over the GeCS "
        "CodeSearchNet languages, for rows with all of them. CoSQA is the study's CoSQA dataset. " + GECS_NOTE
    )
    return _finish(
        "gecs",
        "Results per test set (GeCS Table 2)",
        caption + _seeds_note(scores),
        GECS_ROW_KEYS,
        grid,
        [(t, m) for t in sets for m in ("Acc", "MRR")],
        decimals=4,
        ranks=_row_ranks(avg),
    )


def gecs_groups(avg: pd.DataFrame) -> Table | None:
    """GeCS Table 3: unweighted means over the test sets of each generalisation type, and their
    mean (Combined); n/a where a member test set has no score."""
    scores = _gecs_scores(avg)
    if scores.empty:
        return None
    grid, _ = _gecs_test_grid(scores)
    grouped: dict[tuple[str, ...], dict[Column, Cell]] = {}
    for key, cells in grid.items():
        out: dict[Column, Cell] = {}
        for metric in ("Acc", "MRR"):
            means = []
            for group, members in GECS_GROUPS.items():
                values = [cells[(t, metric)].mean for t in members if _has_value(cells.get((t, metric)))]
                mean = sum(values) / len(values) if len(values) == len(members) else math.nan
                out[(group, metric)] = Cell(mean)
                means.append(mean)
            out[("Combined", metric)] = Cell(sum(means) / len(means))  # NaN unless every group has one
        grouped[key] = out
    caption = (
        "Means over test sets per generalisation type (GeCS 4.3, unweighted): Robustness = AdvTest and CoSQA; "
        "Cross-Lingual = CodeSearchNet Avg and StatCodeSearch; Domain = StatCodeSearch; Combined = mean of the "
        "three. n/a where a member has no score. " + GECS_NOTE
    )
    return _finish(
        "gecs_groups",
        "Results per generalisation type (GeCS Table 3)",
        caption,
        GECS_ROW_KEYS,
        grouped,
        [(g, m) for g in (*GECS_GROUPS, "Combined") for m in ("Acc", "MRR")],
        decimals=4,
        ranks=_row_ranks(avg),
    )


def _length_cell(stats: Mapping | None) -> Cell:
    if not stats or stats.get("mean") is None:
        return Cell(math.nan)
    std = stats.get("std")
    return Cell(float(stats["mean"]), math.nan if std is None else float(std), decimals=1)


def datasets(cards: Mapping[str, Path]) -> Table | None:
    """COBE Tables I-II from the dataset cards: pairs per split; for the training and test splits
    (COBE Table I: training and codebase) the mean ± std length in tokens of the queries and of the
    code with and without comments, and the reduction in %."""
    grid: dict[tuple[str, ...], dict[Column, Cell]] = {}
    splits: list[str] = []
    for name, path in cards.items():
        if not Path(path).is_file():
            raise FileNotFoundError(f"dataset card {path} is missing: run `csbench audit --dataset {name}` first")
        data = json.loads(Path(path).read_text())
        card, audit = data.get("card", {}), data.get("audit") or {}
        lengths = audit.get("code_length") or {}
        cells: dict[Column, Cell] = {}
        for split, info in card.get("splits", {}).items():
            splits += [split] if split not in splits else []
            cells[("pairs", split)] = Cell(float(info.get("pairs", math.nan)), decimals=0)
            cells[("query tokens", split)] = _length_cell(info.get("query_tokens"))
            cells[("code tokens", split)] = _length_cell(info.get("code_tokens"))
            raw, bare = (lengths.get(split) or {}).get("code"), (lengths.get(split) or {}).get("code_no_comment")
            cells[("code tokens, no comments", split)] = _length_cell(bare)
            if raw and bare and raw.get("mean"):
                cells[("reduction (%)", split)] = Cell((1 - bare["mean"] / raw["mean"]) * 100, decimals=1)
        grid[(name, str(card.get("language", "")))] = cells
    groups = ("pairs", "query tokens", "code tokens", "code tokens, no comments", "reduction (%)")
    caption = (
        "Pairs per split (COBE Table II) and, for the training and test splits, the mean ± std length in tokens "
        "of the queries and of the code (COBE Table I: with and without comments; reduction = 1 - mean without "
        "/ mean with, in %), from the dataset cards (results/datasets/<dataset>/card.json)."
    )
    lengths_of = [s for s in splits if s in LENGTH_SPLITS] or splits
    return _finish(
        "datasets",
        "Datasets (COBE Tables I-II)",
        caption,
        ("dataset", "language"),
        grid,
        [("pairs", s) for s in splits] + [(g, s) for g in groups[1:] for s in lengths_of],
        decimals=1,
        keep=("dataset", "language"),
    )


# ---------------------------------------------------------------- rendering


def format_number(value: float, decimals: int) -> str:
    """``value`` with ``decimals`` decimals (thousands unseparated); ``n/a`` for NaN."""
    if value is None or math.isnan(value):
        return NA
    return f"{value:.{decimals}f}"


def _cell_text(cell: Cell, decimals: int, pm: str) -> str:
    places = decimals if cell.decimals is None else cell.decimals
    text = format_number(cell.mean, places)
    if not math.isnan(cell.mean) and not math.isnan(cell.std):
        text += f"{pm}{format_number(cell.std, places)}"
    return text


def _flat(column: Column) -> str:
    group, label = column
    return f"{group} {label}" if group else label


def to_markdown(table: Table) -> str:
    """``### title``, the caption, and a pipe table (grouped columns as ``group label``)."""

    def escape(text: str) -> str:
        return text.replace("|", "\\|")

    header = [*table.key_names, *(_flat(c) for c in table.columns)]
    lines = [
        f"### {table.spec.title}",
        "",
        table.spec.caption,
        "",
        "| " + " | ".join(escape(h) for h in header) + " |",
        "|" + "---|" * len(table.key_names) + "---:|" * len(table.columns),
    ]
    for keys, cells in table.rows:
        texts = [*keys, *(_cell_text(c, table.decimals, " ± ") for c in cells)]
        lines.append("| " + " | ".join(escape(t) for t in texts) + " |")
    return "\n".join(lines) + "\n"


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "Σ": r"$\Sigma$",
    "×": r"$\times$",
}


def latex_escape(text: str) -> str:
    """``text`` safe in LaTeX: its special characters escaped, ± × Σ as math."""
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def _latex_caption(text: str) -> str:
    """The caption with Markdown code spans dropped to plain text, escaped."""
    return latex_escape(text.replace("`", ""))


def to_latex(table: Table) -> str:
    """A booktabs ``table`` environment: a grouped header row (``\\multicolumn`` + ``\\cmidrule``)
    when columns are grouped, the column names, the rows; caption and label ``tab:{name}``."""
    n_keys = len(table.key_names)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{latex_escape(table.spec.title)}. {_latex_caption(table.spec.caption)}}}",
        rf"\label{{tab:{table.spec.name}}}",
        r"\begin{tabular}{" + "l" * n_keys + "r" * len(table.columns) + "}",
        r"\toprule",
    ]
    if any(group for group, _ in table.columns):
        spans: list[tuple[str, int, int]] = []  # group, first column (1-based), last column
        for index, (group, _) in enumerate(table.columns, start=n_keys + 1):
            if spans and spans[-1][0] == group:
                spans[-1] = (group, spans[-1][1], index)
            else:
                spans.append((group, index, index))
        cells = [""] * n_keys
        cells += [rf"\multicolumn{{{last - first + 1}}}{{c}}{{{latex_escape(g)}}}" for g, first, last in spans]
        lines.append(" & ".join(cells) + r" \\")
        lines.append(" ".join(rf"\cmidrule(lr){{{first}-{last}}}" for g, first, last in spans if g))
    names = [*table.key_names, *(label for _, label in table.columns)]
    lines.append(" & ".join(latex_escape(n) for n in names) + r" \\")
    lines.append(r"\midrule")
    for keys, cells in table.rows:
        texts = [latex_escape(k) for k in keys]
        texts += [latex_escape(_cell_text(c, table.decimals, "±")) for c in cells]
        lines.append(" & ".join(texts) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


HTML_STYLE = """body { font-family: sans-serif; font-size: 13px; margin: 1em; }
p { max-width: 60em; color: #333; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; }
th { background: #f0f0f0; }"""


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page (no external CSS or script: the report works offline)."""
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
        f"<style>\n{HTML_STYLE}\n</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def html_text(text: str) -> str:
    """Caption text as HTML: escaped, its Markdown code spans (`name`) as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _html_cell(tag: str, text: str, align: str, span: str = "") -> str:
    return f'<{tag}{span} style="text-align:{align}">{html.escape(text, quote=False)}</{tag}>'


def to_html(table: Table) -> str:
    """An HTML page: the title, the caption, and the table with the cells of ``to_markdown``; grouped
    columns get a header row of groups over their labels (as ``to_latex``)."""
    keys, columns = table.key_names, table.columns
    if any(group for group, _ in columns):
        tall = ' rowspan="2"'  # key columns and columns outside a group span both header rows
        top = [_html_cell("th", name, "left", tall) for name in keys]
        for group, members in itertools.groupby(columns, key=lambda column: column[0]):
            labels = [label for _, label in members]
            if group:
                top.append(_html_cell("th", group, "center", f' colspan="{len(labels)}"'))
            else:
                top += [_html_cell("th", label, "right", tall) for label in labels]
        bottom = [_html_cell("th", label, "right") for group, label in columns if group]
        head = [top, bottom]
    else:
        head = [[_html_cell("th", name, "left") for name in keys] + [_html_cell("th", c, "right") for _, c in columns]]
    body = [
        [_html_cell("td", key, "left") for key in row_keys]
        + [_html_cell("td", _cell_text(cell, table.decimals, " ± "), "right") for cell in cells]
        for row_keys, cells in table.rows
    ]
    thead = "".join(f"<tr>{''.join(cells)}</tr>" for cells in head)
    tbody = "".join(f"<tr>{''.join(cells)}</tr>\n" for cells in body)
    title, caption = html.escape(table.spec.title, quote=False), html_text(table.spec.caption)
    grid = f"<table><thead>{thead}</thead>\n<tbody>\n{tbody}</tbody></table>"
    return html_page(table.spec.title, f"<h3>{title}</h3>\n<p>{caption}</p>\n{grid}")


def to_frame(table: Table) -> pd.DataFrame:
    """The table as a flat frame for CSV: key columns, each value column (unrounded), and a
    ``<column> std`` column after each value column that has a spread."""
    data: dict[str, list] = {name: [keys[i] for keys, _ in table.rows] for i, name in enumerate(table.key_names)}
    for j, column in enumerate(table.columns):
        name = _flat(column)
        data[name] = [cells[j].mean for _, cells in table.rows]
        stds = [cells[j].std for _, cells in table.rows]
        if any(not math.isnan(s) for s in stds):
            data[f"{name} std"] = stds
    return pd.DataFrame(data)


# ---------------------------------------------------------------- the public entry points


def build_tables(results: pd.DataFrame | Iterable[Mapping], cards: Mapping[str, Path] | None = None) -> list[Table]:
    """Every table that has at least one value for this study, in ``TABLE_NAMES`` order. The search
    tables never see summarization rows (``summarization.search_rows``); its own tables do."""
    from csbench.results import summarization  # it builds on this module

    avg = seed_means(results)
    search = summarization.search_rows(avg)
    built = (
        [
            builder(search)
            for builder in (
                mrr_by_language,
                ir_auc,
                attacks_absolute,
                attacks_relative,
                attacks_weighted,
                gecs,
                gecs_groups,
            )
        ]
        if not search.empty
        else []
    )
    built += summarization.build_summarization_tables(avg)
    built.append(datasets(cards or {}))
    return [table for table in built if table is not None]


def table_specs(results: pd.DataFrame | Iterable[Mapping], cards: Mapping[str, Path] | None = None) -> list[TableSpec]:
    """The specs of the tables ``write_tables`` writes for these results (only tables with a value)."""
    return [table.spec for table in build_tables(results, cards)]


def write_tables(
    out_dir: Path, results: pd.DataFrame | Iterable[Mapping], cards: Mapping[str, Path] | None = None
) -> list[Path]:
    """Write ``out_dir/tables/{name}.md``, ``.tex``, ``.csv`` and the report's page ``.html`` for each
    table with a value, each atomically from the same ``Table``, and ``tables/index.json`` (name,
    title, caption, and the .md / .tex / .csv files of each); remove the files of tables (of
    ``TABLE_NAMES``) that this study no longer has. Returns the table files written."""
    directory = Path(out_dir) / TABLES_DIR
    tables = build_tables(results, cards)
    written: list[Path] = []
    for table in tables:
        md, tex, csv = (directory / f"{table.spec.name}{suffix}" for suffix in SUFFIXES)
        write_text(md, to_markdown(table))
        write_text(tex, to_latex(table))
        with atomic_path(csv) as tmp:
            to_frame(table).to_csv(tmp, index=False)
        page = directory / f"{table.spec.name}{PAGE_SUFFIX}"
        write_text(page, to_html(table))
        written += [md, tex, csv, page]
    names = {table.spec.name for table in tables}
    for stale in (directory / f"{n}{s}" for n in TABLE_NAMES if n not in names for s in (*SUFFIXES, PAGE_SUFFIX)):
        stale.unlink(missing_ok=True)
    index = [
        {**vars(table.spec), "files": [f"{TABLES_DIR}/{table.spec.name}{s}" for s in SUFFIXES]} for table in tables
    ]
    write_json(directory / INDEX_FILE, index)
    return written
