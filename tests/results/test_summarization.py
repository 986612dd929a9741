"""Code summarization results through the aggregate (csbench.results.summarization,
csbench.results.summarization_examples): results.db rows, the BLEU tables, the severity figure, the
example summaries page, and search-only studies unchanged.

Run folders are synthetic (tests/results/summarization_runs.py), in the shape the evaluate phase
writes them. golden_search_study.json holds the digest of the study folder that the code before
issue #25 wrote for the synthetic search runs (``study_digest``: sha256 of each file, results.db by
its SQL dump); a search-only study must still write exactly those bytes.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict
from pathlib import Path

import matplotlib.image
import pandas as pd
import pytest
from summarization_runs import (
    SUMMARY_METRICS,
    run_dir,
    study_digest,
    write_search_runs,
    write_summarization_run,
)

from csbench.io import write_text
from csbench.results.collect import collect
from csbench.results.report import aggregate
from csbench.results.summarization import (
    FIGURE,
    figure_specs,
    search_rows,
    severity_scores,
    summarization_absolute,
    summarization_relative,
)
from csbench.results.summarization_examples import EXAMPLES, collect_examples
from csbench.results.tables import seed_means, to_markdown

GOLDEN = Path(__file__).with_name("golden_search_study.json")
ATTACKS = ("none", "no_comment", "full_hash")
# smoothed BLEU-4 per (dataset, attack, inference, seed); composite = 0.8 x that
SMOOTHED = {
    ("tl_codesum", "none", "confused"): (24.0, 26.0),
    ("tl_codesum", "no_comment", "confused"): (20.0, 22.0),
    ("tl_codesum", "full_hash", "confused"): (10.5, 11.5),
    ("tl_codesum", "none", "not_confused"): (23.0, 23.0),
    ("tl_codesum", "no_comment", "not_confused"): (21.0, 21.0),
    ("tl_codesum", "full_hash", "not_confused"): (7.0, 7.0),
    # a second java dataset: mixed with the search rows it would turn their language labels into names
    ("csn-java-c2t", "none", "confused"): (30.0, 30.0),
    ("csn-java-c2t", "no_comment", "confused"): (28.0, 28.0),
    ("csn-java-c2t", "full_hash", "confused"): (14.0, 14.0),
}
SIZES = {"tl_codesum": 10, "csn-java-c2t": 30}  # records each run scored (ids 0..n-1, some skipped)


def summaries(dataset: str, attack: str) -> list[dict]:
    """The summaries of a run: ids 0..n-1 but 2 (skipped under full_hash) and 5 (skipped under
    none); code with characters HTML must escape; no_comment's code is the original without a comment."""
    skipped = {"full_hash": {2}, "none": {5}}.get(attack, set())
    out = []
    for i in range(SIZES[dataset]):
        if i in skipped:
            continue
        original = f"int f{i}(int a) {{ /* & <b>{i}</b> */ return a < {i}; }}"
        code = {
            "none": original,
            "no_comment": f"int f{i}(int a) {{ return a < {i}; }}",
            "full_hash": f"int h{i:04x}(int v) {{ return v < {i}; }}",
        }[attack]
        out.append(
            {
                "id": i,
                "reference": f"returns whether a < {i} <ref>",
                "hypothesis": f"{attack} says {i} & more",
                "code": code,
            }
        )
    return out


def write_summarization_study(root: Path, n_queries_score: bool = False) -> list[Path]:
    dirs = []
    for (dataset, attack, inference), values in SMOOTHED.items():
        for seed, smoothed in enumerate(values):
            scores = {m: 5.0 + seed for m in SUMMARY_METRICS}
            scores |= {"smoothed_bleu4": smoothed, "bleu_composite": 0.8 * smoothed}
            dirs.append(
                write_summarization_run(
                    root,
                    dataset,
                    attack,
                    scores,
                    summaries(dataset, attack),
                    seed=seed,
                    inference=inference,
                    n_queries_score=n_queries_score,
                )
            )
    return dirs


def read_db(path: Path, where: str = "1") -> pd.DataFrame:
    with sqlite3.connect(path) as con:
        frame = pd.read_sql_query(f"SELECT * FROM results WHERE {where}", con)
    con.close()
    return frame


# ------------------------------------------------------------------------------ search-only: unchanged
def test_a_study_without_summarization_runs_writes_the_same_bytes_as_before(tmp_path: Path) -> None:
    search = write_search_runs(tmp_path)
    aggregate(search, tmp_path / "fresh", "unit")
    assert study_digest(tmp_path / "fresh") == json.loads(GOLDEN.read_text())
    # and over the folder of a build that had summarization runs: their files are removed
    both = search + write_summarization_study(tmp_path)
    aggregate(both, tmp_path / "again", "unit")
    assert (tmp_path / "again/tables/summarization_absolute.md").is_file()
    aggregate(search, tmp_path / "again", "unit")
    assert study_digest(tmp_path / "again") == json.loads(GOLDEN.read_text())


# ------------------------------------------------------------------------------------------ results.db
@pytest.mark.parametrize("n_queries_score", [False, True])
def test_summarization_runs_land_in_results_db_beside_unchanged_search_rows(
    tmp_path: Path, n_queries_score: bool
) -> None:
    search = write_search_runs(tmp_path)
    aggregate(search, tmp_path / "search", "unit")
    aggregate(search + write_summarization_study(tmp_path, n_queries_score), tmp_path / "both", "unit")

    own = read_db(tmp_path / "both/results.db", "protocol = 'summarization'")
    assert set(own["metric"]) == {*SUMMARY_METRICS, "n_queries"}  # n_queries from metrics.json's protocols
    assert len(own) == len(SMOOTHED) * 2 * (len(SUMMARY_METRICS) + 1)  # runs x seeds x metrics
    one = own[
        (own["dataset"] == "tl_codesum")
        & (own["attack"] == "full_hash")
        & (own["seed"] == 1)
        & (own["inference"] == "confused")
    ].set_index("metric")
    assert one.loc["smoothed_bleu4", "value"] == 11.5
    assert one.loc["bleu_composite", "value"] == pytest.approx(0.8 * 11.5)
    assert one.loc["n_queries", "value"] == SIZES["tl_codesum"] - 1
    row = one.loc["smoothed_bleu4"]
    assert (row["study"], row["language"], row["model"], row["loss"], row["perturbation"], row["ratio"]) == (
        "unit",
        "java",
        "transformer-sum",
        "xent",
        "none",
        0.0,
    )
    assert row["run_id"] == "tl_codesum/full_hash/transformer-sum/xent/1/confused"
    assert row["git_commit"].startswith("0123") and row["csbench_version"] == "0.1.0"
    # the search rows are those of the search-only study, row for row
    order = "ORDER BY run_id, protocol, metric"
    before = read_db(tmp_path / "search/results.db", f"protocol != 'summarization' {order}")
    after = read_db(tmp_path / "both/results.db", f"protocol != 'summarization' {order}")
    pd.testing.assert_frame_equal(before, after)


# ------------------------------------------------------------------------------------ search tables
def test_search_tables_figures_and_summary_drops_ignore_summarization_rows(tmp_path: Path) -> None:
    search = write_search_runs(tmp_path)
    aggregate(search, tmp_path / "search", "unit")
    # full_hash and an attack only summarization has: neither may reach the search figures
    extra = write_summarization_run(
        tmp_path, "tl_codesum", "translation", {"smoothed_bleu4": 1.0}, summaries("tl_codesum", "none")
    )
    aggregate([*search, *write_summarization_study(tmp_path), extra], tmp_path / "both", "unit")
    names = [
        f"{folder}/{name}"
        for folder, stems in (
            ("tables", ("mrr_by_language", "attacks_absolute", "attacks_relative", "attacks_weighted")),
            ("figures/severity", ("full-corpus", "csn-1000")),
        )
        for name in stems
    ]
    for name in names:
        suffixes = (".png",) if name.startswith("figures") else (".md", ".tex", ".csv", ".html")
        for suffix in suffixes:
            file = f"{name}{suffix}"
            assert (tmp_path / "both" / file).read_bytes() == (tmp_path / "search" / file).read_bytes(), file
    figures = {e["name"]: e for e in json.loads((tmp_path / "both/figures/index.json").read_text())}
    assert "translation" not in figures["severity/full-corpus"]["caption"]
    assert "translation" in figures[FIGURE]["caption"]
    # summary.csv: the search rows and their MRR drop as before; summarization rows have BLEU, no drop
    before = pd.read_csv(tmp_path / "search/summary.csv")
    after = pd.read_csv(tmp_path / "both/summary.csv")
    searched = after[after["protocol"] != "summarization"].reset_index(drop=True)
    pd.testing.assert_frame_equal(searched[before.columns], before)
    own = after[after["protocol"] == "summarization"]
    assert own["mrr_drop_vs_no_comment_%"].isna().all() and own["mrr"].isna().all()
    assert own["smoothed_bleu4"].notna().all()


# --------------------------------------------------------------------------------- the BLEU tables
def test_bleu_tables_absolute_and_relative_to_no_comment_by_hand(tmp_path: Path) -> None:
    dirs = write_search_runs(tmp_path) + write_summarization_study(tmp_path)
    aggregate(dirs, tmp_path / "out", "unit")
    tables = tmp_path / "out/tables"
    index = {entry["name"]: entry for entry in json.loads((tables / "index.json").read_text())}
    for name in ("summarization_absolute", "summarization_relative"):
        assert index[name]["files"] == [f"tables/{name}{s}" for s in (".md", ".tex", ".csv")]
        for suffix in (".md", ".tex", ".csv", ".html"):
            assert (tables / f"{name}{suffix}").stat().st_size > 0
    absolute = pd.read_csv(tables / "summarization_absolute.csv")
    relative = pd.read_csv(tables / "summarization_relative.csv")
    key = (absolute["attack"] == "full_hash") & (absolute["inference"] == "confused")
    # the two datasets are both java: columns by dataset name; mean and sample std over the 2 seeds
    assert absolute.loc[key, "tl_codesum BLEU-4 (smoothed)"].item() == pytest.approx(11.0)
    assert absolute.loc[key, "tl_codesum BLEU-4 (smoothed) std"].item() == pytest.approx(math.sqrt(0.5))
    assert absolute.loc[key, "csn-java-c2t BLEU (composite)"].item() == pytest.approx(0.8 * 14.0)
    # (no_comment - attack) / no_comment x 100, from the seed means: (21 - 11) / 21 x 100
    key = (relative["attack"] == "full_hash") & (relative["inference"] == "confused")
    assert relative.loc[key, "tl_codesum BLEU-4 (smoothed) [%]"].item() == pytest.approx((21 - 11) / 21 * 100)
    assert relative.loc[key, "csn-java-c2t BLEU (composite) [%]"].item() == pytest.approx(50.0)
    # not_confused against its own no_comment run (21 -> 7), none gains on no_comment: negative
    key = (relative["attack"] == "full_hash") & (relative["inference"] == "not_confused")
    assert relative.loc[key, "tl_codesum BLEU-4 (smoothed) [%]"].item() == pytest.approx((21 - 7) / 21 * 100)
    key = (relative["attack"] == "none") & (relative["inference"] == "confused")
    assert relative.loc[key, "tl_codesum BLEU-4 (smoothed) [%]"].item() == pytest.approx((21 - 25) / 21 * 100)
    assert "no_comment" not in set(relative["attack"])
    # not_confused has no csn-java-c2t run: n/a there, not 0
    key = (relative["attack"] == "full_hash") & (relative["inference"] == "not_confused")
    assert relative.loc[key, "csn-java-c2t BLEU-4 (smoothed) [%]"].isna().all()
    markdown = (tables / "summarization_relative.md").read_text()
    assert "| confused | full_hash | transformer-sum | 47.62 |" in markdown
    assert "protocol `summarization`" in markdown and "(no_comment - attack) / no_comment" in markdown
    assert r"\begin{tabular}" in (tables / "summarization_absolute.tex").read_text()


def test_bleu_tables_label_datasets_by_language_when_they_can_and_skip_search_rows() -> None:
    rows = []
    for dataset, language in (("tl_codesum", "java"), ("local-python", "python")):
        for attack, value in (("no_comment", 40.0), ("ordered_id", 30.0)):
            for metric in ("smoothed_bleu4", "bleu_composite"):
                rows.append(
                    {"study": "s", "dataset": dataset, "language": language, "attack": attack, "perturbation": "none",
                     "ratio": 0.0, "model": "m", "loss": "xent", "seed": 0, "inference": "confused",
                     "protocol": "summarization", "metric": metric, "value": value}
                )  # fmt: skip
    search = dict(rows[0], protocol="full-corpus", metric="mrr", value=0.5, dataset="other", language="java")
    avg = seed_means([*rows, search])
    absolute, relative = summarization_absolute(avg), summarization_relative(avg)
    assert [c[0] for c in absolute.columns] == ["java", "java", "python", "python"]
    assert relative.columns[0] == ("java", "BLEU-4 (smoothed) [%]")
    assert "| ordered_id | m | 25.00 | 25.00 | 25.00 | 25.00 |" in to_markdown(relative)
    assert len(search_rows(avg)) == 1 and summarization_absolute(search_rows(avg)) is None


# ---------------------------------------------------------------------------------- severity figure
def test_summarization_severity_figure_weights_datasets_by_records_scored(tmp_path: Path) -> None:
    dirs = write_summarization_study(tmp_path)
    scores, _ = collect(dirs)
    figure = severity_scores(scores)
    assert set(figure) == {"smoothed_bleu4", "bleu_composite"}
    # confused full_hash: tl_codesum 11 on 9 records, csn-java-c2t 14 on 29 records
    assert figure["smoothed_bleu4"]["transformer-sum (confused)"]["full_hash"] == pytest.approx((11 * 9 + 14 * 29) / 38)
    assert figure["smoothed_bleu4"]["transformer-sum (not confused)"]["full_hash"] == pytest.approx(7.0)
    aggregate(dirs, tmp_path / "out", "unit")
    png = tmp_path / "out/figures" / f"{FIGURE}.png"
    height, width, _ = matplotlib.image.imread(png).shape
    assert width > 300 and height > 200
    index = json.loads((tmp_path / "out/figures/index.json").read_text())
    assert [e["name"] for e in index] == [FIGURE]  # no search figure without search runs
    assert "none < no_comment < full_hash" in index[0]["caption"]
    # what the Snakefile names from the config's attacks is what the aggregate draws
    assert index[0] == asdict(figure_specs(["full_hash", "none", "no_comment"])[0]) | {"file": f"{FIGURE}.png"}
    assert figure_specs(["no_comment"]) == []


# ------------------------------------------------------------------------------------ examples page
def test_examples_page_shows_five_common_records_per_attack_escaped(tmp_path: Path) -> None:
    dirs = write_search_runs(tmp_path) + write_summarization_study(tmp_path)
    aggregate(dirs, tmp_path / "out", "unit")
    page = (tmp_path / "out/tables" / f"{EXAMPLES}.html").read_text()
    markdown = (tmp_path / "out/tables" / f"{EXAMPLES}.md").read_text()
    # groups: tl_codesum confused and not_confused, csn-java-c2t confused
    assert page.count("<h2>") == 3 and "<h2>tl_codesum / transformer-sum (xent) / not_confused</h2>" in page
    # ids 2 (skipped under full_hash) and 5 (under none) are not common: 0 1 3 4 6, numerically sorted
    examples = collect_examples(dirs)
    assert [e["ids"] for e in examples] == [["0", "1", "3", "4", "6"]] * 3
    assert page.count("<table>") == 15 and page.count("<h3>") == 15
    assert "<h3>test record <code>6</code></h3>" in page and "<code>10</code>" not in page
    # reference, each attack's hypothesis and code, escaped
    assert "<b>Reference:</b> returns whether a &lt; 3 &lt;ref&gt;</p>" in page
    assert "full_hash says 3 &amp; more" in page and "no_comment says 3 &amp; more" in page
    assert "int h0003(int v) { return v &lt; 3; }" in page
    assert "/* &amp; &lt;b&gt;3&lt;/b&gt; */" in page and "<b>3</b>" not in page  # original code, escaped
    assert "(the original code, unchanged by this attack)" in page  # the none row
    rows = page.split("<tbody>")[1].split("</tbody>")[0]
    assert [r.split("<code>")[1].split("</code>")[0] for r in rows.split("<tr>")[1:]] == list(ATTACKS)
    # markdown beside it: the same records, code fenced
    assert markdown.count("### test record") == 15 and markdown.count("#### `full_hash` (seed 0)") == 15
    assert "```\nint h0003(int v) { return v < 3; }\n```" in markdown
    assert r"**Reference:** returns whether a \< 3 \<ref\>" in markdown


def test_examples_take_the_original_code_from_no_comment_and_say_when_fewer_are_common(tmp_path: Path) -> None:
    few = [s for s in summaries("tl_codesum", "no_comment") if s["id"] in (1, 7, 9)]
    dirs = [
        write_summarization_run(tmp_path, "tl_codesum", "no_comment", {"smoothed_bleu4": 9.0}, few),
        write_summarization_run(
            tmp_path, "tl_codesum", "full_hash", {"smoothed_bleu4": 3.0}, summaries("tl_codesum", "full_hash")
        ),
    ]
    examples = collect_examples(dirs)
    assert examples[0]["ids"] == ["1", "7", "9"]
    assert examples[0]["records"][0]["original"] == ("no_comment", "int f1(int a) { return a < 1; }")
    aggregate(dirs, tmp_path / "out", "unit")
    page = (tmp_path / "out/tables" / f"{EXAMPLES}.html").read_text()
    assert "Only 3 test records are common to every attack's run." in page
    assert "(attack <code>no_comment</code>)" in page


def test_examples_name_a_missing_or_broken_summaries_file(tmp_path: Path) -> None:
    run = write_summarization_run(
        tmp_path, "tl_codesum", "none", {"smoothed_bleu4": 9.0}, summaries("tl_codesum", "none")
    )
    write_text(run / "summaries.jsonl", '{"id": 1, "reference": "r", "hypothesis": "h", "code": "c"}\n{"id": 2}\n')
    with pytest.raises(ValueError, match=r"summaries.jsonl:2: record without reference, hypothesis, code"):
        collect_examples([run])
    write_text(run / "summaries.jsonl", "not json\n")
    with pytest.raises(ValueError, match=r"summaries.jsonl:1: not a JSON line"):
        collect_examples([run])
    (run / "summaries.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=r"summaries\.jsonl is missing"):
        aggregate([run], tmp_path / "out", "unit")
    assert run == run_dir(tmp_path, "tl_codesum", "none", "transformer-sum", "xent", 0, "confused")
