"""The aggregate phase: from the run records, every file that describes the study, in its own
folder (results/studies/<study>/, so that studies coexist).

``aggregate`` reads the records and writes, in this order: results.db, summary.csv / summary.md,
the DVC metrics and plot data, the paper tables (.md / .tex / .csv and an .html page each, from
one ``tables.Table``), the summary's page, and the figures. ``collect`` builds the database,
the summary and the frames; ``tables`` and ``figures`` what their names say; this module only
puts them together (so none of them imports another's caller).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import pandas as pd

from csbench.io import atomic_path, write_json, write_text
from csbench.results.collect import (
    CURVES_FILE,
    DROP_TEXT,
    METRICS_FILE,
    collect,
    curves_frame,
    dvc_metrics,
    load_robustness,
    protocol_notes,
    protocols_frame,
    results_rows,
    summary_markdown,
    summary_table,
    write_database,
)
from csbench.results.figures import write_figures
from csbench.results.summarization_examples import write_examples
from csbench.results.tables import PAGE_SUFFIX, TABLES_DIR, html_page, html_text, write_tables

SUMMARY_FILE = "summary.csv"
SUMMARY_PAGE = f"summary{PAGE_SUFFIX}"  # tables/summary.html: the study's summary.csv as a page of the report
SUMMARY_TITLE = "Scores of every run"
SUMMARY_CAPTION = (
    "One row per run and retrieval protocol (summary.csv): the clean scores of every run. MRR under "
    "full-corpus is cut at rank 1,000 and advtest at 100, both ranking ties in np.argsort's order as their "
    "reference scripts do; other ranks count ties against the model; n/a: the protocol evaluated no "
    "query. " + DROP_TEXT
)


def summary_page(frame: pd.DataFrame, title: str = SUMMARY_TITLE, caption: str = SUMMARY_CAPTION) -> str:
    """A frame (summary.csv) as an HTML page with its title and caption above it, and below it
    each protocol of the frame with the script it reproduces; floats with 4 decimals, missing values
    as n/a."""
    table = frame.to_html(index=False, na_rep="n/a", float_format=lambda v: f"{v:.4f}", border=0)
    legend = protocols_frame(list(frame["protocol"]) if "protocol" in frame.columns else [])
    items = "".join(
        f"<li><code>{html.escape(row.label)}</code>: {html.escape(row.description)}</li>"
        for row in legend.itertuples(index=False)
    )
    protocols = f"\n<h2>Protocols</h2>\n<ul>{items}</ul>" if items else ""
    return html_page(title, f"<h1>{html.escape(title)}</h1>\n<p>{html_text(caption)}</p>\n{table}{protocols}")


def aggregate(
    run_dirs: list[Path],
    out_dir: Path,
    study: str,
    cards: dict[str, Path] | None = None,
    robustness: dict[str, Path] | None = None,
    stability: dict[str, dict] | None = None,
    trainings: dict[str, Path] | None = None,
    shared_dir: Path | None = None,
) -> pd.DataFrame:
    """Build the study's folder ``out_dir`` (results/studies/<study>/) from the run records:
    ``run_dirs`` (metrics.json and provenance.json each), the dataset ``cards``, the robustness.json
    files and the seed-stability records by run / group path, and the train.json files by training
    path (the training figures). ``shared_dir`` is the folder holding the records studies share
    (datasets/, robustness/: results/), which summary.md links; default ``out_dir`` itself.
    Writes nothing outside ``out_dir``, each file atomically; returns the summary table."""
    records = load_robustness(robustness or {})
    scores, runs = collect(run_dirs)
    # The study's database holds the study's rows. A run that two studies share (same run, same
    # settings: evaluated once, by whichever study's job came first) is this study's row here; the
    # run's own records keep the study that evaluated it.
    scores, runs = (frame.assign(study=study) if len(frame) else frame for frame in (scores, runs))
    table = summary_table(scores)
    notes = protocol_notes(run_dirs)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = results_rows(scores, runs, records)  # the `results` table, and what the paper tables start from
    write_database(out_dir / "results.db", scores, runs, records, stability, rows=rows)
    with atomic_path(out_dir / SUMMARY_FILE) as tmp:
        table.to_csv(tmp, index=False)
    links = os.path.relpath(shared_dir or out_dir, out_dir).replace(os.sep, "/")
    links = "" if links == "." else f"{links}/"
    markdown = summary_markdown(table, study, notes, cards, records, stability, links=links)
    write_text(out_dir / "summary.md", markdown)
    write_json(out_dir / METRICS_FILE, dvc_metrics(scores, records))
    with atomic_path(out_dir / CURVES_FILE) as tmp:
        curves_frame(records).to_csv(tmp, index=False)
    write_tables(out_dir, rows, cards)
    # the page shows summary.csv as written (its values as the CSV holds them)
    write_text(out_dir / TABLES_DIR / SUMMARY_PAGE, summary_page(pd.read_csv(out_dir / SUMMARY_FILE)))
    write_figures(out_dir, scores, trainings)  # trainings: train.json by training path
    write_examples(out_dir, run_dirs)  # summarization runs: example summaries (their summaries.jsonl)
    return table
