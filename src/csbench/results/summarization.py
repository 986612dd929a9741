"""The results of code summarization runs (issue #25): their paper-shaped tables, their severity
figure, and the report's page of example summaries.

A summarization run's scores are rows of the `results` table with protocol ``summarization``
(``collect.SUMMARIZATION``) and metrics ``bleu1``..``bleu4``, ``bleu_composite`` and
``smoothed_bleu4`` (0-100, as papers print BLEU), plus ``n_queries`` (the records scored). The
search tables and figures never see them (``search_rows``); these do:

- ``summarization_absolute``: smoothed BLEU-4 and composite BLEU per attack and model (rows) and
  dataset (column groups), per inference type: the thesis's Tables 5.2-5.4 for summarization;
- ``summarization_relative``: the same relative to ``no_comment`` in percent, as the thesis's
  Tables 5.5-5.15 (``collect.relative_drop``, the formula of the search drop);
- ``severity/summarization.png``: BLEU against attack severity (thesis Fig. 5.1's layout);
- ``tables/summarization_examples.html`` / ``.md``: 5 test records per dataset, model and inference,
  with the reference, each attack's hypothesis and the code the model read
  (:mod:`csbench.results.summarization_examples`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from csbench.results.collect import SUMMARIZATION
from csbench.results.figures import FigureSpec, by_severity, model_label
from csbench.results.plots import plot_severity
from csbench.results.tables import (
    ATTACK_ROW_KEYS,
    CLEAN,
    INFERENCE_NOTE,
    SIZE_KEYS,
    WEIGHTED_KEYS,
    Column,
    Table,
    _finish,
    _grid,
    _row_ranks,
    _seeds_note,
    dataset_labels,
    relative_grid,
    seed_means,
    weighted_average,
)

SUMMARIZATION_METRICS = ("bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4")
TABLE_METRICS = ("smoothed_bleu4", "bleu_composite")  # the tables' and the figure's columns / panels
METRIC_LABELS = {
    "smoothed_bleu4": "BLEU-4 (smoothed)",
    "bleu_composite": "BLEU (composite)",
    "bleu1": "BLEU-1",
    "bleu2": "BLEU-2",
    "bleu3": "BLEU-3",
    "bleu4": "BLEU-4",
}
TABLE_NAMES = ("summarization_absolute", "summarization_relative")
FIGURE = f"severity/{SUMMARIZATION}"  # figures/severity/summarization.png
BLEU_NOTE = (
    "BLEU-4 (smoothed): CodeXGLUE code-to-text's smoothed sentence-level BLEU-4 averaged over the test "
    "records (the number code-to-text papers report); BLEU (composite): the geometric mean of corpus "
    "BLEU-1..4 (the thesis's BLEU-composite, section 3.1). Both on a 0-100 scale."
)


# ---------------------------------------------------------------- the rows of each task


def is_summarization(frame: pd.DataFrame) -> pd.Series:
    """Which rows of a long results / scores frame are summarization scores (protocol ``summarization``)."""
    if "protocol" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["protocol"] == SUMMARIZATION


def search_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without its summarization rows (the frame itself when it has none: search-only
    studies build their tables and figures from exactly what they did before)."""
    mask = is_summarization(frame)
    return frame[~mask] if mask.any() else frame


def summarization_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame's summarization rows, clean (perturbation ``none``) where it has a perturbation column."""
    own = frame[is_summarization(frame)]
    return own[own["perturbation"] == CLEAN] if "perturbation" in own.columns else own


# ---------------------------------------------------------------- tables


def _scores(avg: pd.DataFrame) -> pd.DataFrame:
    own = summarization_rows(avg)
    return own[own["metric"].isin(TABLE_METRICS)]


def _columns(datasets: Sequence[str], labels: Mapping[str, str], unit: str = "") -> list[Column]:
    return [(labels[d], METRIC_LABELS[m] + unit) for d in dict.fromkeys(datasets) for m in TABLE_METRICS]


def summarization_absolute(avg: pd.DataFrame) -> Table | None:
    """Smoothed BLEU-4 and composite BLEU (0-100) of each attack and model (rows) per dataset
    (column groups), for each inference type: thesis Tables 5.2-5.4's layout for summarization.
    ``avg``: ``tables.seed_means`` of the results rows (other rows than summarization are ignored)."""
    scores = _scores(avg)
    if scores.empty:
        return None
    own = summarization_rows(avg)
    labels = dataset_labels(own)
    grid = _grid(
        scores.to_dict("records"), ATTACK_ROW_KEYS, lambda r: (labels[r["dataset"]], METRIC_LABELS[r["metric"]])
    )
    caption = (
        "Code summarization: smoothed BLEU-4 and composite BLEU of each attack (rows) per dataset (column "
        "groups), the model's summaries of the attacked test code against the reference summaries. "
        + BLEU_NOTE
        + " "
        + INFERENCE_NOTE
    )
    return _finish(
        "summarization_absolute",
        "Summarization: BLEU per attack (thesis Tables 5.2-5.4 for summarization)",
        caption + _seeds_note(scores),
        ATTACK_ROW_KEYS,
        grid,
        _columns(list(scores["dataset"]), labels),
        decimals=2,
        keep=("attack", "model"),
        ranks=_row_ranks(own),
    )


def summarization_relative(avg: pd.DataFrame) -> Table | None:
    """Each attack's smoothed BLEU-4 and composite BLEU relative to the ``no_comment`` run of the
    same dataset, model, loss, inference type and protocol, in percent: ``collect.relative_drop``,
    (no_comment - attack) / no_comment × 100, from the means over seeds (thesis Tables 5.5-5.15)."""
    scores = _scores(avg)
    if scores.empty:
        return None
    own = summarization_rows(avg)
    labels = dataset_labels(own)
    attacked, grid = relative_grid(scores, labels, METRIC_LABELS)
    caption = (
        "Code summarization, relative to `no_comment`, in percent (as the thesis's Tables 5.5-5.15): "
        "(no_comment - attack) / no_comment × 100 for each metric, against the `no_comment` run of the same "
        "dataset, model, loss, inference type and protocol; positive = the attack lowered BLEU, negative = it "
        "raised it. Computed from the means over seeds; n/a without a `no_comment` run or when its score is 0. "
        + BLEU_NOTE
        + " "
        + INFERENCE_NOTE
    )
    return _finish(
        "summarization_relative",
        "Summarization: BLEU per attack relative to no_comment, % (thesis Tables 5.5-5.15 for summarization)",
        caption + _seeds_note(attacked),
        ATTACK_ROW_KEYS,
        grid,
        _columns(list(attacked["dataset"]), labels, " [%]"),
        decimals=2,
        keep=("attack", "model"),
        ranks=_row_ranks(own),
    )


def build_summarization_tables(avg: pd.DataFrame) -> list[Table]:
    """The summarization tables that have a value, in ``TABLE_NAMES`` order (``avg``: seed means)."""
    built = (summarization_absolute(avg), summarization_relative(avg))
    return [table for table in built if table is not None]


# ---------------------------------------------------------------- the severity figure


def severity_spec(attacks: Sequence[str]) -> FigureSpec:
    """The summarization severity figure (thesis Fig. 5.1's layout) over ``attacks``."""
    order = by_severity(attacks)
    metrics = ", ".join(METRIC_LABELS[m] for m in TABLE_METRICS)
    return FigureSpec(
        name=FIGURE,
        title=f"{metrics} against attack severity (summarization)",
        caption=(
            "Code summarization scores against attack severity, as thesis Fig. 5.1 for search: one panel per "
            f"metric ({metrics}, on BLEU's 0-100 scale), the attacks from least to most severe "
            f"({' < '.join(order)}), one line per model (a trained model once per inference type: "
            "confused, trained on the attacked data; not confused, trained on no_comment). Each point is "
            "the model's score averaged over seeds, then over datasets weighted by their number of scored "
            "test records. " + BLEU_NOTE
        ),
    )


def figure_specs(attacks: Sequence[str]) -> list[FigureSpec]:
    """The summarization figures of a study whose summarization runs have these ``attacks`` (from
    the config, for the Snakefile's captions): the severity figure when there are two attacks or more."""
    return [severity_spec(attacks)] if len(set(attacks)) > 1 else []


def weighted(avg: pd.DataFrame) -> list[dict]:
    """Per ``tables.WEIGHTED_KEYS`` (model, attack, inference, ... and metric), the seed means of the
    summarization scores averaged over datasets weighted by each run's ``n_queries`` (the records it
    scored), as ``tables.size_weighted`` does for search. Records with the keys and ``mean``."""
    own = summarization_rows(avg)
    sizes = {tuple(r[k] for k in SIZE_KEYS): r["mean"] for r in own[own["metric"] == "n_queries"].to_dict("records")}
    pairs: dict[tuple[str, ...], tuple[list[float], list[float]]] = {}
    for record in _scores(avg).to_dict("records"):
        values, weights = pairs.setdefault(tuple(record[k] for k in WEIGHTED_KEYS), ([], []))
        values.append(record["mean"])
        weight = sizes.get(tuple(record[k] for k in SIZE_KEYS), math.nan)
        weights.append(0.0 if math.isnan(weight) else weight)
    return [
        {**dict(zip(WEIGHTED_KEYS, key, strict=True)), "mean": weighted_average(values, weights)}
        for key, (values, weights) in pairs.items()
    ]


def severity_scores(scores: pd.DataFrame) -> dict[str, dict[str, dict[str, float]]]:
    """``{metric: {model label: {attack: value}}}`` of the summarization runs, from a long scores
    frame in the shape of ``collect.collect`` (``weighted`` of its seed means); as
    ``figures.severity_scores`` for search. Values without a score are left out."""
    own = scores[is_summarization(scores)]
    several_losses = own.loc[own["loss"] != "none", "loss"].nunique() > 1
    records = [r for r in weighted(seed_means(own)) if not math.isnan(r["mean"])]
    records.sort(key=lambda r: (r["attack"], r["model"], r["loss"], r["inference"]))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for metric in TABLE_METRICS:
        for r in (r for r in records if r["metric"] == metric):
            label = model_label(r["model"], r["loss"], r["inference"], several_losses)
            out.setdefault(metric, {}).setdefault(label, {})[r["attack"]] = float(r["mean"])
    return out


def study_figure_specs(scores: pd.DataFrame) -> list[FigureSpec]:
    """``figure_specs`` of the attacks the study's summarization runs have (``write_figures``)."""
    own = scores[is_summarization(scores)] if len(scores) else scores
    return figure_specs(sorted(own["attack"].unique()) if len(own) else [])


def draw_severity(scores: pd.DataFrame, path: Path, title: str) -> None:
    """Draw the summarization severity figure of a long scores frame into ``path``: the BLEU axis from
    0 to the highest score rounded up to a multiple of 10 (BLEU rarely nears 100: a 0-100 axis
    would flatten the lines)."""
    own = scores[is_summarization(scores)]
    points = severity_scores(scores)
    highest = max((v for lines in points.values() for line in lines.values() for v in line.values()), default=0.0)
    plot_severity(
        points,
        by_severity(own["attack"].unique()),
        path,
        title,
        titles=METRIC_LABELS,
        top=max(10.0, math.ceil(highest / 10.0) * 10.0),
        ylabel="BLEU (size-weighted mean over datasets)",
    )
