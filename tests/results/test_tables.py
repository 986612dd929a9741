"""Paper-shaped tables (csbench.results.tables) from small synthetic results rows.

Rows are in the shape of ``csbench.results.collect.results_rows``; one test goes through
``aggregate`` with run records on disk, as ``csbench aggregate`` writes them.
"""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from csbench.io import write_json
from csbench.results.report import aggregate
from csbench.results.tables import (
    Cell,
    Table,
    TableSpec,
    build_tables,
    latex_escape,
    relative_drop,
    table_specs,
    to_html,
    to_latex,
    to_markdown,
    write_tables,
)


def row(
    metric: str,
    value: float | None,
    *,
    dataset: str = "d1",
    language: str = "python",
    attack: str = "no_comment",
    model: str = "nbow",
    loss: str = "ce",
    seed: int = 0,
    inference: str = "confused",
    protocol: str = "full-corpus",
    perturbation: str = "none",
    ratio: float | None = 0.0,
    study: str = "unit",
) -> dict:
    """One row of the long `results` table."""
    return {
        "study": study,
        "dataset": dataset,
        "language": language,
        "attack": attack,
        "perturbation": perturbation,
        "ratio": ratio,
        "model": model,
        "loss": loss,
        "seed": seed,
        "inference": inference,
        "protocol": protocol,
        "metric": metric,
        "value": value,
        "run_id": f"{dataset}/{attack}/{model}/{loss}/{seed}/{inference}",
    }


def by_name(tables: list[Table]) -> dict[str, Table]:
    return {table.spec.name: table for table in tables}


def cell(table: Table, keys: dict[str, str], column: tuple[str, str]) -> Cell:
    """The cell of the row whose shown keys match ``keys`` (keys not shown are ignored)."""
    matches = [
        cells
        for row_keys, cells in table.rows
        if all(row_keys[table.key_names.index(k)] == v for k, v in keys.items() if k in table.key_names)
    ]
    assert len(matches) == 1, f"{len(matches)} rows match {keys} in {table.spec.name}"
    return matches[0][table.columns.index(column)]


def test_relative_score_is_the_thesis_percentage_drop_against_no_comment() -> None:
    # thesis Table 5.1: NBoW Python No Comment MRR 0.537; Table 5.4 / 5.5: Most Popular 0.007 -> 98.70 %;
    # Tables 5.10 / 5.11: Random Permutation 0.643 -> -19.74 % (an improvement is negative)
    rows = [
        row("mrr", 0.537),
        row("mrr", 0.007, attack="most_popular"),
        row("mrr", 0.643, attack="random_permutation"),
    ]
    relative = by_name(build_tables(rows))["attacks_relative"]
    worst = cell(relative, {"attack": "most_popular"}, ("python", "MRR [%]"))
    best = cell(relative, {"attack": "random_permutation"}, ("python", "MRR [%]"))
    assert worst.mean == pytest.approx((0.537 - 0.007) / 0.537 * 100)
    assert best.mean == pytest.approx((0.537 - 0.643) / 0.537 * 100)
    markdown = to_markdown(relative)
    assert "| most_popular | nbow | 98.70 |" in markdown
    assert "-19.74" in markdown
    # the baseline itself is not a row of the relative table
    assert all("no_comment" not in keys for keys, _ in relative.rows)


def test_relative_pairs_each_run_with_its_own_inference_and_protocol_baseline() -> None:
    rows = [
        row("mrr", 0.5, inference="confused"),
        row("mrr", 0.25, inference="not_confused"),
        row("mrr", 0.25, attack="full_hash", inference="confused"),
        row("mrr", 0.25, attack="full_hash", inference="not_confused"),
        row("mrr", 0.4, attack="full_hash", protocol="csn-1000"),  # no no_comment run under csn-1000
    ]
    relative = by_name(build_tables(rows))["attacks_relative"]
    column = ("python", "MRR [%]")
    assert cell(relative, {"inference": "confused"}, column).mean == pytest.approx(50.0)
    assert cell(relative, {"inference": "not_confused"}, column).mean == pytest.approx(0.0)
    # without a baseline the csn-1000 row has no value at all: it is dropped (so protocol is constant)
    assert "protocol" not in relative.key_names and "protocol `full-corpus`" in relative.spec.caption
    assert math.isnan(relative_drop(0.1, 0.0))


def test_seeds_are_averaged_with_their_sample_std() -> None:
    rows = [row("mrr", v, seed=s) for s, v in enumerate((0.1, 0.2, 0.3))]
    rows += [row("mrr", 0.4, model="bm25", loss="none", inference="zero_shot")]
    absolute = by_name(build_tables(rows))["attacks_absolute"]
    trained = cell(absolute, {"model": "nbow"}, ("python", "MRR"))
    assert trained.mean == pytest.approx(0.2)
    assert trained.std == pytest.approx(0.1)  # sample std (n - 1)
    lexical = cell(absolute, {"model": "bm25"}, ("python", "MRR"))
    assert lexical.mean == pytest.approx(0.4) and math.isnan(lexical.std)
    markdown = to_markdown(absolute)
    assert "0.200 ± 0.100" in markdown and "0.400 |" in markdown and "0.400 ±" not in markdown
    assert "nbow 3 (seeds 0-2); bm25 1 (seed 0)" in absolute.spec.caption


def test_weighted_average_weighs_each_dataset_by_its_test_queries() -> None:
    rows = []
    for dataset, language, mrr, queries in (("small", "go", 0.2, 100), ("large", "java", 0.6, 300)):
        rows += [row("mrr", mrr, dataset=dataset, language=language)]
        rows += [row("n_queries", queries, dataset=dataset, language=language)]
    weighted = by_name(build_tables(rows))["attacks_weighted"]
    assert cell(weighted, {"model": "nbow"}, ("no_comment", "MRR")).mean == pytest.approx(0.5)  # not 0.4


def test_weighted_average_skips_a_dataset_without_a_score() -> None:
    rows = [
        row("mrr", 0.2, dataset="a", language="go"),
        row("n_queries", 100, dataset="a", language="go"),
        row("mrr", None, dataset="b", language="java"),  # a protocol that evaluated no query
        row("n_queries", 0, dataset="b", language="java"),
        row("mrr", 0.8, dataset="b", language="java", attack="full_hash"),
        row("n_queries", 100, dataset="b", language="java", attack="full_hash"),
    ]
    weighted = by_name(build_tables(rows))["attacks_weighted"]
    assert cell(weighted, {"model": "nbow"}, ("no_comment", "MRR")).mean == pytest.approx(0.2)


def test_one_dataset_has_no_weighted_table_and_no_attacks_no_relative_table() -> None:
    names = {spec.name for spec in table_specs([row("mrr", 0.3), row("n_queries", 10)])}
    assert "attacks_absolute" in names and "mrr_by_language" in names
    assert not names & {"attacks_weighted", "attacks_relative", "ir_auc", "gecs", "gecs_groups", "datasets"}


def test_mrr_by_language_has_a_column_per_language_and_the_unweighted_overall() -> None:
    rows = [
        row("mrr", 0.6, dataset="csn-ruby", language="ruby"),
        row("mrr", 0.8, dataset="csn-go", language="go"),
        row("mrr", 0.5, dataset="csn-ruby", language="ruby", model="bm25", loss="none", inference="zero_shot"),
        row("mrr", 0.1, dataset="csn-ruby", language="ruby", attack="full_hash"),  # attacked: not in this table
    ]
    table = by_name(build_tables(rows))["mrr_by_language"]
    assert table.columns == (("", "ruby"), ("", "go"), ("", "Overall"))
    assert cell(table, {"model": "nbow"}, ("", "Overall")).mean == pytest.approx(0.7)
    assert math.isnan(cell(table, {"model": "bm25"}, ("", "Overall")).mean)  # no go score
    assert "full_hash" not in to_markdown(table)


def test_mrr_by_language_puts_base_and_no_comment_side_by_side_as_thesis_table_5_1() -> None:
    rows = []
    for dataset, language, base, no_comment in (("a", "go", 0.8, 0.6), ("b", "java", 0.4, 0.2)):
        rows.append(row("mrr", base, dataset=dataset, language=language, attack="none"))
        rows.append(row("mrr", no_comment, dataset=dataset, language=language))
    table = by_name(build_tables(rows))["mrr_by_language"]
    assert table.columns == (
        ("go", "none"),
        ("go", "no_comment"),
        ("java", "none"),
        ("java", "no_comment"),
        ("Overall", "none"),
        ("Overall", "no_comment"),
    )
    assert "attack" not in table.key_names
    assert [c.mean for c in table.rows[0][1]] == pytest.approx([0.8, 0.6, 0.4, 0.2, 0.6, 0.4])


def test_datasets_sharing_a_language_are_named_by_dataset() -> None:
    rows = [row("mrr", 0.4, dataset="python-stdlib"), row("mrr", 0.5, dataset="python-packages")]
    table = by_name(build_tables(rows))["mrr_by_language"]
    assert [label for _, label in table.columns] == ["python-stdlib", "python-packages", "Overall"]


def test_ir_auc_table_has_perturbations_then_macro_and_micro() -> None:
    rows = [row("mrr", 0.5)]
    for perturbation, value in (("case", 0.2), ("typo", 0.3), ("macro", 0.25), ("micro", 0.24)):
        rows.append(row("ir_auc", value, perturbation=perturbation, ratio=None))
    rows.append(row("mrr", 0.1, perturbation="case", ratio=0.5))  # a curve point: not a column
    table = by_name(build_tables(rows))["ir_auc"]
    labels = [label for _, label in table.columns]
    assert labels == ["clean MRR", "case", "typo", "Overall (macro)", "Overall (micro)"]
    assert [c.mean for c in table.rows[0][1]] == pytest.approx([0.5, 0.2, 0.3, 0.25, 0.24])


# GeCS Table 2 / Table 5 (appendix), the CodeT5+ zero-shot MRR and the RoBERTa accuracy per test set
GECS_CSN = {"ruby": (0.9271, 0.8398), "go": (0.9918, 0.8467), "php": (0.8973, 0.8000)}
GECS_CSN |= {"java": (0.9069, 0.7939), "javascript": (0.9085, 0.8185)}
GECS_OTHERS = {"advtest": (0.8441, 0.8547), "cosqa-retrieval": (0.9596, 0.7972), "statcodesearch": (0.8958, 0.6311)}


def gecs_rows() -> list[dict]:
    rows = []
    sets = {f"gecs-csn-{lang}": v for lang, v in GECS_CSN.items()} | GECS_OTHERS
    for dataset, (accuracy, mrr) in sets.items():
        common = {"dataset": dataset, "language": dataset, "attack": "none", "loss": "none"}
        rows.append(row("accuracy", accuracy, model="roberta-cross", protocol="matching", **common))
        rows.append(row("mrr", mrr, model="codet5p", inference="zero_shot", protocol="gecs-100", **common))
    return rows


def test_gecs_tables_reproduce_the_papers_averages() -> None:
    tables = by_name(build_tables(gecs_rows()))
    per_set, groups = tables["gecs"], tables["gecs_groups"]
    assert per_set.columns[:2] == (("CodeSearchNet Avg", "Acc"), ("CodeSearchNet Avg", "MRR"))
    # GeCS Table 2: CodeSearchNet Avg 0.9263 (RoBERTa Acc), 0.8198 (CodeT5+ zero-shot MRR)
    assert cell(per_set, {"model": "roberta-cross"}, ("CodeSearchNet Avg", "Acc")).mean == pytest.approx(
        0.9263, abs=1e-4
    )
    assert cell(per_set, {"model": "codet5p"}, ("CodeSearchNet Avg", "MRR")).mean == pytest.approx(0.8198, abs=1e-4)
    # GeCS Table 3: RoBERTa Acc 0.9018 / 0.9110 / 0.8958 / 0.9028; CodeT5+ ZS MRR 0.8259 / 0.7254 / 0.6311 / 0.7274
    expected = {
        "roberta-cross": ("Acc", (0.9018, 0.9110, 0.8958, 0.9028)),
        "codet5p": ("MRR", (0.8259, 0.7254, 0.6311, 0.7274)),
    }
    for model, (metric, values) in expected.items():
        for group, value in zip(("Robustness", "Cross-Lingual", "Domain", "Combined"), values, strict=True):
            assert cell(groups, {"model": model}, (group, metric)).mean == pytest.approx(value, abs=2e-4)
        other = "MRR" if metric == "Acc" else "Acc"
        assert math.isnan(cell(groups, {"model": model}, ("Combined", other)).mean)


def test_gecs_groups_are_na_without_every_member() -> None:
    rows = [r for r in gecs_rows() if r["dataset"] != "cosqa-retrieval"]
    groups = by_name(build_tables(rows))["gecs_groups"]
    # no CoSQA: Robustness and Combined have no value anywhere, so they are left out
    assert [c for c in groups.columns if c[1] == "MRR"] == [("Cross-Lingual", "MRR"), ("Domain", "MRR")]
    assert cell(groups, {"model": "codet5p"}, ("Domain", "MRR")).mean == pytest.approx(0.6311)


def write_card(path: Path, name: str) -> Path:
    stats = {"mean": 10.0, "std": 2.0}
    splits = {
        s: {"pairs": n, "query_tokens": stats, "code_tokens": {"mean": 200.0, "std": 50.0}}
        for s, n in (("train", 80), ("test", 20))
    }
    lengths = {
        s: {"code": {"mean": 200.0, "std": 50.0}, "code_no_comment": {"mean": 150.0, "std": 40.0}} for s in splits
    }
    audit = {"code_length": lengths, "shared_code": {}, "pool_duplicates": None}
    write_json(path, {"card": {"name": name, "language": "python", "splits": splits}, "audit": audit})
    return path


def test_datasets_table_from_the_cards(tmp_path) -> None:
    cards = {"toy": write_card(tmp_path / "card.json", "toy")}
    table = by_name(build_tables([], cards))["datasets"]
    assert cell(table, {"dataset": "toy"}, ("pairs", "test")).mean == 20
    assert cell(table, {"dataset": "toy"}, ("reduction (%)", "train")).mean == pytest.approx(25.0)
    markdown = to_markdown(table)
    assert "| toy | python | 80 | 20 | 10.0 ± 2.0 |" in markdown
    with pytest.raises(FileNotFoundError, match="csbench audit --dataset gone"):
        build_tables([], {"gone": tmp_path / "missing.json"})


def test_latex_escapes_its_special_characters() -> None:
    assert latex_escape("no_comment 50% a&b #1 {x} ±") == r"no\_comment 50\% a\&b \#1 \{x\} $\pm$"


def latex_cells(line: str) -> int:
    """Columns a tabular row spans: its unescaped & separators, \\multicolumn{n} counting n."""
    spans = re.findall(r"\\multicolumn\{(\d+)\}", line)
    parts = re.split(r"(?<!\\)&", line)
    return len(parts) + sum(int(n) - 1 for n in spans)


def test_latex_is_a_well_formed_booktabs_tabular() -> None:
    rows = [row("mrr", 0.5), row("r@1", 0.4), row("mrr", 0.25, attack="k_shift_dataset-3")]
    rows += [row("mrr", 0.3, dataset="other_set")]  # shares d1's language: columns named by dataset
    for table in build_tables(rows):
        latex = to_latex(table)
        lines = latex.splitlines()
        assert lines[0] == r"\begin{table}[htbp]" and lines[-1] == r"\end{table}"
        spec = re.search(r"\\begin\{tabular\}\{([lr]+)\}", latex).group(1)
        body = lines[lines.index(r"\toprule") + 1 : lines.index(r"\bottomrule")]
        assert lines.index(r"\toprule") < lines.index(r"\midrule") < lines.index(r"\bottomrule")
        rows_ = [line for line in body if line.endswith(r"\\")]
        assert rows_ and all(latex_cells(line.removesuffix(r"\\")) == len(spec) for line in rows_)
        assert latex.count("{") == latex.count("}") + latex.count(r"\{") - latex.count(r"\}")
        text = "\n".join(line for line in lines if not line.startswith(r"\label"))  # labels may hold _
        assert re.search(r"(?<!\\)[_%#]", text.replace(r"\_", "").replace(r"\%", "").replace(r"\#", "")) is None
    grouped = to_latex(by_name(build_tables(rows))["attacks_absolute"])
    # keys attack, model; d1 has MRR and Top-1, other_set only MRR (columns without a value are left out)
    assert r"\multicolumn{2}{c}{d1} & \multicolumn{1}{c}{other\_set} \\" in grouped
    assert r"\cmidrule(lr){3-4} \cmidrule(lr){5-5}" in grouped


def test_markdown_escapes_pipes() -> None:
    spec = TableSpec(name="t", title="T", caption="c")
    table = Table(spec=spec, key_names=("model",), columns=(("", "a|b"),), rows=((("x|y",), (Cell(1.0),)),), decimals=2)
    assert "| x\\|y | 1.00 |" in to_markdown(table) and "| model | a\\|b |" in to_markdown(table)


class HtmlTable(HTMLParser):
    """The header rows (text, colspan, rowspan of each <th>), body rows (text of each <td>) and
    the text of <title>, <h3> and <p> of a page."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.head: list[list[tuple[str, int, int]]] = []
        self.body: list[list[str]] = []
        self.text: dict[str, str] = {}
        self._tag: str | None = None
        self._span = (1, 1)
        self._in_body = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr":
            (self.body if self._in_body else self.head).append([])
        elif tag in ("th", "td", "title", "h3", "p"):
            self._tag, self._parts = tag, []
            self._span = (int(named.get("colspan") or 1), int(named.get("rowspan") or 1))

    def handle_data(self, data: str) -> None:
        if self._tag:
            self._parts.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag != self._tag:
            return
        text, self._tag = "".join(self._parts), None
        if tag == "th":
            self.head[-1].append((text, *self._span))
        elif tag == "td":
            self.body[-1].append(text)
        else:
            self.text[tag] = text


def markdown_body(markdown: str) -> list[list[str]]:
    """The body rows of the pipe table of ``to_markdown`` (pipes unescaped)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")][2:]
    return [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def test_html_page_has_the_markdown_cells_under_grouped_headers() -> None:
    rows = [row("mrr", v, seed=s) for s, v in enumerate((0.3, 0.5))] + [row("r@1", 0.25)]
    rows += [row("mrr", 0.2, attack="ordered_id"), row("mrr", 0.4, dataset="d2")]  # d2: no r@1
    for table in build_tables(rows):
        page = HtmlTable(to_html(table))
        assert page.body == markdown_body(to_markdown(table)), table.spec.name
        assert page.text["title"] == page.text["h3"] == table.spec.title
        assert page.text["p"] == table.spec.caption.replace("`", "")  # code spans as <code>
    absolute = by_name(build_tables(rows))["attacks_absolute"]
    page = HtmlTable(to_html(absolute))
    # keys attack, model span both header rows; d1 groups MRR and Top-1, d2 only MRR
    assert page.head == [
        [("attack", 1, 2), ("model", 1, 2), ("d1", 2, 1), ("d2", 1, 1)],
        [("MRR", 1, 1), ("Top-1", 1, 1), ("MRR", 1, 1)],
    ]
    assert page.body[0] == ["no_comment", "nbow", "0.400 ± 0.141", "0.250", "0.400"]
    assert page.body[1] == ["ordered_id", "nbow", "0.200", "n/a", "n/a"]


def test_html_page_escapes_its_text_and_has_one_header_row_without_groups() -> None:
    spec = TableSpec(name="t", title="T & U", caption="Under `a<b`, in %.")
    table = Table(spec=spec, key_names=("model",), columns=(("", "a|b"),), rows=((("x<y",), (Cell(1.0),)),), decimals=2)
    html = to_html(table)
    assert "<title>T &amp; U</title>" in html and "<p>Under <code>a&lt;b</code>, in %.</p>" in html
    assert HtmlTable(html).head == [[("model", 1, 1), ("a|b", 1, 1)]]
    assert HtmlTable(html).body == [["x<y", "1.00"]]
    assert "http" not in html  # nothing fetched from the network


def test_an_empty_study_writes_no_table_and_removes_stale_ones(tmp_path) -> None:
    stale = tmp_path / "tables" / "ir_auc.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("from an earlier study")
    stale_page = tmp_path / "tables" / "ir_auc.html"
    stale_page.write_text("<table></table>")
    unrelated = tmp_path / "tables" / "notes.md"
    unrelated.write_text("not a table of this module")
    assert write_tables(tmp_path, [], {}) == []
    assert not stale.exists() and not stale_page.exists() and unrelated.exists()
    assert json.loads((tmp_path / "tables" / "index.json").read_text()) == []
    assert table_specs([row("mrr", None)]) == []  # a row without a value is no data either


def test_write_tables_writes_md_tex_csv_per_spec(tmp_path) -> None:
    rows = [row("mrr", v, seed=s) for s, v in enumerate((0.3, 0.5))] + [row("mrr", 0.2, attack="ordered_id")]
    written = write_tables(tmp_path, rows)
    specs = table_specs(rows)
    suffixes = (".md", ".tex", ".csv", ".html")
    assert sorted(p.name for p in written) == sorted(f"{s.name}{x}" for s in specs for x in suffixes)
    csv = pd.read_csv(tmp_path / "tables" / "attacks_absolute.csv")
    assert list(csv.columns[:3]) == ["attack", "model", "python MRR"]
    assert csv.loc[csv["attack"] == "no_comment", "python MRR"].item() == pytest.approx(0.4)
    assert csv.loc[csv["attack"] == "no_comment", "python MRR std"].item() == pytest.approx(math.sqrt(0.02))
    index = json.loads((tmp_path / "tables" / "index.json").read_text())
    assert [entry["name"] for entry in index] == [s.name for s in specs]
    assert not list((tmp_path / "tables").glob(".*.tmp"))


def write_run(root: Path, attack: str, mrr: float) -> Path:
    """A run folder as cmd_evaluate writes it (metrics.json, provenance.json)."""
    run = {"study": "unit", "language": "python", "dataset": "toy", "attack": attack, "model": "bm25"}
    run |= {"loss": "none", "seed": 0, "inference": "zero_shot"}
    run_dir = root / "runs" / "toy" / attack / "bm25" / "none" / "0" / "zero_shot"
    scores = [{"protocol": "full-corpus", "metric": m, "value": v} for m, v in (("mrr", mrr), ("n_queries", 4))]
    write_json(run_dir / "metrics.json", {"run": run, "scores": scores, "protocols": {"full-corpus": {"note": ""}}})
    provenance = {
        "git": {"commit": "0" * 40, "dirty": False},
        "params_sha256": "ab" * 32,
        "inputs": {},
        "packages": {"csbench": "0.1.0"},
        "device": "cpu",
        "created": "2024-01-01T00:00:00+00:00",
        "timings_s": {"total_s": 0.5},
    }
    write_json(run_dir / "provenance.json", provenance)
    return run_dir


def test_aggregate_writes_the_tables(tmp_path) -> None:
    runs = [write_run(tmp_path, "no_comment", 0.8), write_run(tmp_path, "full_hash", 0.2)]
    cards = {"toy": write_card(tmp_path / "datasets" / "toy" / "card.json", "toy")}
    aggregate(runs, tmp_path / "results", "unit", cards)
    tables = tmp_path / "results" / "tables"
    names = [entry["name"] for entry in json.loads((tables / "index.json").read_text())]
    assert names == ["mrr_by_language", "attacks_absolute", "attacks_relative", "datasets"]
    assert "| full_hash | bm25 | 75.00 |" in (tables / "attacks_relative.md").read_text()
    # each table's page for the report, with the cells of its Markdown; and the summary's page
    assert sorted(p.name for p in tables.glob("*.html")) == sorted([f"{n}.html" for n in names] + ["summary.html"])
    for name in names:
        page = HtmlTable((tables / f"{name}.html").read_text())
        assert page.body and page.body == markdown_body((tables / f"{name}.md").read_text())
    summary = HtmlTable((tables / "summary.html").read_text())
    assert len(summary.body) == 2 and "mrr_drop_vs_no_comment_%" in [t for t, _, _ in summary.head[0]]
    assert "positive = loss" in summary.text["p"]
