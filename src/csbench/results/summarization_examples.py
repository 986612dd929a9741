"""The report's page of example summaries (issue #25): for each dataset, model, loss and inference
type with summarization runs, ``N_EXAMPLES`` test records common to every attack's run, each with
its reference summary, the code as released (the ``none`` run's, else ``no_comment``'s) and, per
attack, the model's hypothesis and the code it read. Written as tables/summarization_examples.html
(a page of the report, one table per record) and .md beside it.

It reads the runs' summaries.jsonl (one ``{"id", "reference", "hypothesis", "code"}`` per scored
test record, the code as fed to the model: attacked) twice, streamed: the ids first (to find the
common ones), then only the chosen records, so a large test split is never held in memory.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from csbench.io import write_text
from csbench.results.collect import SUMMARIZATION, load_run
from csbench.results.figures import by_severity
from csbench.results.tables import PAGE_SUFFIX, TABLES_DIR, html_page, html_text

SUMMARIES_FILE = "summaries.jsonl"  # in each summarization run's folder
EXAMPLES = "summarization_examples"  # tables/summarization_examples.html and .md
N_EXAMPLES = 5
UNATTACKED = ("none", "no_comment")  # where the original code comes from, in this order
FIELDS = ("id", "reference", "hypothesis", "code")
TITLE = "Summarization: example summaries per attack"
PRE = 'style="white-space:pre-wrap;margin:0;font-size:12px"'
SAME = "(the original code, unchanged by this attack)"


@dataclass(frozen=True)
class SummaryRun:
    """A summarization run: its keys and its summaries.jsonl."""

    dataset: str
    attack: str
    model: str
    loss: str
    seed: int
    inference: str
    file: Path


def summarization_runs(run_dirs: Sequence[Path]) -> list[SummaryRun]:
    """The summarization runs among ``run_dirs`` (run.task ``summarization`` or a ``summarization``
    score in metrics.json), each with its summaries.jsonl; FileNotFoundError naming a missing one."""
    runs = []
    for run_dir in run_dirs:
        metrics, _ = load_run(Path(run_dir))
        run = metrics["run"]
        if run.get("task") != SUMMARIZATION and not any(s["protocol"] == SUMMARIZATION for s in metrics["scores"]):
            continue
        file = Path(run_dir) / SUMMARIES_FILE
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run the evaluate phase for {run_dir} first")
        keys = [str(run[k]) for k in ("dataset", "attack", "model", "loss")]
        runs.append(SummaryRun(*keys, int(run["seed"]), str(run["inference"]), file))
    return runs


def read_summaries(file: Path, wanted: set[str] | None = None) -> Iterator[dict]:
    """The records of a summaries.jsonl (only those whose id, as a string, is in ``wanted`` when
    given), each checked for its four fields; ValueError naming the file and line otherwise."""
    with open(file, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{file}:{number}: not a JSON line ({err.msg})") from err
            missing = [k for k in FIELDS if not isinstance(record, dict) or k not in record]
            if missing:
                raise ValueError(f"{file}:{number}: record without {', '.join(missing)} (fields: {', '.join(FIELDS)})")
            if wanted is None or str(record["id"]) in wanted:
                yield record


def _id_key(value: str) -> tuple[int, int, str]:
    """Sort ids numerically when they are integers, else as text (integers first)."""
    return (0, int(value), "") if re.fullmatch(r"-?[0-9]+", value) else (1, 0, value)


def common_ids(runs: Sequence[SummaryRun], n: int = N_EXAMPLES) -> list[str]:
    """The first ``n`` ids (sorted: numerically for integers) present in every run's summaries."""
    common: set[str] | None = None
    for run in runs:
        ids = {str(record["id"]) for record in read_summaries(run.file)}
        common = ids if common is None else common & ids
    return sorted(common or set(), key=_id_key)[:n]


def _groups(runs: Sequence[SummaryRun]) -> dict[tuple[str, str, str, str], dict[str, SummaryRun]]:
    """Per (dataset, model, loss, inference), each attack's run of the lowest seed."""
    groups: dict[tuple[str, str, str, str], dict[str, SummaryRun]] = {}
    for run in sorted(runs, key=lambda r: (r.dataset, r.model, r.loss, r.inference, r.attack, r.seed)):
        groups.setdefault((run.dataset, run.model, run.loss, run.inference), {}).setdefault(run.attack, run)
    return groups


def _original_code(runs: Sequence[SummaryRun], group: dict[str, SummaryRun], ids: list[str]) -> dict[str, tuple]:
    """Per id, (attack, code) of the code as released: from the group's own ``none`` run, else any
    ``none`` run of the dataset, else the same for ``no_comment`` (the code does not depend on the model)."""
    found: dict[str, tuple[str, str]] = {}
    for attack in UNATTACKED:
        own = [group[attack]] if attack in group else []
        others = [r for r in runs if r.attack == attack and r.dataset == next(iter(group.values())).dataset]
        for run in own + sorted(others, key=lambda r: str(r.file)):
            missing = set(ids) - set(found)
            if not missing:
                return found
            for record in read_summaries(run.file, missing):
                found.setdefault(str(record["id"]), (attack, str(record["code"])))
    return found


def collect_examples(run_dirs: Sequence[Path], n: int = N_EXAMPLES) -> list[dict]:
    """The examples of every group (dataset, model, loss, inference), in that order: ``{"group":
    {...}, "attacks": [attack, ...] by severity, "seeds": {attack: seed}, "ids": [...], "records":
    [{"id", "reference", "original": (attack, code) | None, "by_attack": {attack: record}}]}``."""
    runs = summarization_runs(run_dirs)
    out = []
    for (dataset, model, loss, inference), group in _groups(runs).items():
        attacks = by_severity(group)
        ids = common_ids([group[a] for a in attacks], n)
        chosen = {a: {str(r["id"]): r for r in read_summaries(group[a].file, set(ids))} for a in attacks}
        original = _original_code(runs, group, ids)
        records = [
            {
                "id": i,
                "reference": str(chosen[attacks[0]][i]["reference"]),
                "original": original.get(i),
                "by_attack": {a: chosen[a][i] for a in attacks},
            }
            for i in ids
        ]
        keys = {"dataset": dataset, "model": model, "loss": loss, "inference": inference}
        out.append(
            {
                "group": keys,
                "attacks": attacks,
                "seeds": {a: group[a].seed for a in attacks},
                "ids": ids,
                "records": records,
            }
        )
    return out


CAPTION = (
    "For each dataset, model, loss and inference type with summarization runs: the first {n} test records "
    "(by id, numerically where ids are integers) that every attack's run scored, each with its reference "
    "summary, the code as released (from the `none` run, else the `no_comment` run) and, per attack from "
    "least to most severe, the model's summary (hypothesis) and the code the model read (attacked). With "
    "several seeds, each attack's run of the lowest seed. From each run's summaries.jsonl."
)


def _group_title(example: dict) -> str:
    g = example["group"]
    return f"{g['dataset']} / {g['model']} ({g['loss']}) / {g['inference']}"


def _pre(text: str) -> str:
    return f"<pre {PRE}>{html.escape(text, quote=False)}</pre>"


def examples_html(examples: list[dict], n: int = N_EXAMPLES) -> str:
    """The examples page: a section per group, a table per record (one row per attack)."""
    parts = [f"<h1>{html.escape(TITLE)}</h1>", f"<p>{html_text(CAPTION.format(n=n))}</p>"]
    for example in examples:
        parts.append(f"<h2>{html.escape(_group_title(example))}</h2>")
        if len(example["ids"]) < n:
            parts.append(f"<p>Only {len(example['ids'])} test records are common to every attack's run.</p>")
        for record in example["records"]:
            parts.append(f"<h3>test record <code>{html.escape(record['id'])}</code></h3>")
            parts.append(f"<p><b>Reference:</b> {html.escape(record['reference'], quote=False)}</p>")
            original = record["original"]
            if original is None:
                parts.append("<p><b>Original code:</b> n/a (no <code>none</code> or <code>no_comment</code> run)</p>")
            else:
                parts.append(f"<p><b>Original code</b> (attack <code>{html.escape(original[0])}</code>):</p>")
                parts.append(_pre(original[1]))
            rows = []
            for attack in example["attacks"]:
                hit = record["by_attack"][attack]
                code = str(hit["code"])
                shown = html.escape(SAME) if original is not None and code == original[1] else _pre(code)
                rows.append(
                    f'<tr><td style="text-align:left"><code>{html.escape(attack)}</code> '
                    f"(seed {example['seeds'][attack]})</td>"
                    f'<td style="text-align:left">{html.escape(str(hit["hypothesis"]), quote=False)}</td>'
                    f'<td style="text-align:left">{shown}</td></tr>'
                )
            head = "<tr><th>attack</th><th>hypothesis (the model's summary)</th><th>code the model read</th></tr>"
            parts.append(f"<table><thead>{head}</thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody></table>")
    return html_page(TITLE, "\n".join(parts))


def _fence(code: str) -> str:
    """``code`` as a Markdown fenced block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code}\n{fence}"


def _md_inline(text: str) -> str:
    """One line of Markdown text: newlines as spaces, Markdown's special characters escaped."""
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", " ".join(text.split()))


def examples_markdown(examples: list[dict], n: int = N_EXAMPLES) -> str:
    """The examples as Markdown: a section per group and record, each attack's hypothesis and code."""
    lines = [f"# {TITLE}", "", CAPTION.format(n=n), ""]
    for example in examples:
        lines += [f"## {_group_title(example)}", ""]
        if len(example["ids"]) < n:
            lines += [f"Only {len(example['ids'])} test records are common to every attack's run.", ""]
        for record in example["records"]:
            original = record["original"]
            lines += [f"### test record `{record['id']}`", "", f"**Reference:** {_md_inline(record['reference'])}", ""]
            if original is None:
                lines += ["**Original code:** n/a (no `none` or `no_comment` run)", ""]
            else:
                lines += [f"**Original code** (attack `{original[0]}`):", "", _fence(original[1]), ""]
            for attack in example["attacks"]:
                hit = record["by_attack"][attack]
                code = str(hit["code"])
                lines += [
                    f"#### `{attack}` (seed {example['seeds'][attack]})",
                    "",
                    f"**Hypothesis:** {_md_inline(str(hit['hypothesis']))}",
                    "",
                    SAME if original is not None and code == original[1] else _fence(code),
                    "",
                ]
    return "\n".join(lines)


def write_examples(out_dir: Path, run_dirs: Sequence[Path], n: int = N_EXAMPLES) -> list[Path]:
    """Write ``out_dir``/tables/summarization_examples.html and .md when the study has
    summarization runs; remove them (left by an earlier build) when it has none. The files written."""
    directory = Path(out_dir) / TABLES_DIR
    page, markdown = directory / f"{EXAMPLES}{PAGE_SUFFIX}", directory / f"{EXAMPLES}.md"
    examples = collect_examples(run_dirs, n)
    if not examples:
        for stale in (page, markdown):
            stale.unlink(missing_ok=True)
        return []
    write_text(page, examples_html(examples, n))
    write_text(markdown, examples_markdown(examples, n))
    return [page, markdown]
