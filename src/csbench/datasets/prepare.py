"""Preparing a downloaded release: stream its records into per-split Parquet files.

Memory stays bounded whatever the input size: records are buffered per split in batches of
``batch_size`` and appended to Parquet row groups; statistics are running sums.

The card also records, per split and language, how the code sits on lines (``LayoutStats``): how many
snippets are on one line, how many are flattened (line breaks replaced by spaces, as some releases
ship them), and how many hold a line comment whose end is unknown, which comment removal keeps
(``csbench.code.comments``).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from csbench.code.comments import code_layout
from csbench.code.parsing import LANGUAGES
from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, Record
from csbench.io import temporary_beside

SCHEMA = pa.schema([(name, pa.string()) for name in RECORD_COLUMNS])
log = logging.getLogger("csbench")

# What a card's code layout counts mean (card.md prints it above the table).
LAYOUT_DEFINITION = (
    "*One line*: no line break in the code outside its comments. *Flattened*: one line that holds "
    "several statements or does not parse, or code with an undelimited comment -- code whose line "
    "breaks were most likely replaced by spaces. *Undelimited comment*: a line comment (`#` in Python, "
    "R, Ruby and PHP; `//` in Go, Java, JavaScript and PHP) whose real end is unknown: no line break "
    "precedes it (outside comments and strings) and none followed by code follows it, so it runs to "
    "the end of the snippet; or it swallowed the opener of a block comment (Python: a triple-quoted "
    "string) in such code. Comment removal (`no_comment` and every renaming attack) keeps it rather "
    "than delete the code it may hide, and the attack's `attack.json` counts the snippets "
    "(`comments_kept_undelimited`)."
)


@dataclass
class RunningStats:
    """Mean and population standard deviation without keeping the values (Welford)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        delta = value - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (value - self.mean)

    def as_dict(self) -> dict[str, float]:
        if self.n == 0:
            return {"mean": float("nan"), "std": float("nan")}
        return {"mean": round(self.mean, 2), "std": round(math.sqrt(self.m2 / self.n), 2)}


LAYOUT_KEYS = ("snippets", "one_line", "flattened", "undelimited_comment")


@dataclass
class LayoutStats:
    """Per language: snippets, and how many are on one line, flattened, or hold an undelimited line
    comment (``csbench.code.comments.code_layout``; ``LAYOUT_DEFINITION``). Languages without a
    tree-sitter grammar are not counted."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, language: str, code: str) -> None:
        if language not in LANGUAGES:
            return
        layout = code_layout(code, language)
        row = self.counts.setdefault(language, dict.fromkeys(LAYOUT_KEYS, 0))
        row["snippets"] += 1
        row["one_line"] += layout.one_line
        row["flattened"] += layout.flattened
        row["undelimited_comment"] += layout.undelimited_comment

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {language: dict(row) for language, row in sorted(self.counts.items())}


def code_layout_of(languages: Iterable[str], codes: Iterable[str]) -> dict[str, dict[str, int]]:
    """``LayoutStats`` of (language, code) pairs, as a card records them per split."""
    stats = LayoutStats()
    for language, code in zip(languages, codes, strict=True):
        stats.add(language, code)
    return stats.as_dict()


@dataclass
class SplitStats:
    pairs: int = 0
    query_tokens: RunningStats = field(default_factory=RunningStats)
    code_tokens: RunningStats = field(default_factory=RunningStats)
    layout: LayoutStats = field(default_factory=LayoutStats)

    def add(self, record: Record) -> None:
        self.pairs += 1
        if record["query"]:
            self.query_tokens.add(len(docstring_tokens(record["query"])))
        self.code_tokens.add(len(subtokens(record["code"])))
        self.layout.add(record["language"], record["code"])

    def as_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "query_tokens": self.query_tokens.as_dict(),
            "code_tokens": self.code_tokens.as_dict(),
            "code_layout": self.layout.as_dict(),
        }


class SplitWriter:
    """Per-split Parquet files written in row groups, renamed into place only on success."""

    def __init__(self, out_dir: Path, splits: Iterable[str], batch_size: int = 20_000) -> None:
        self.out_dir = out_dir
        self.splits = tuple(splits)
        self.batch_size = batch_size
        out_dir.mkdir(parents=True, exist_ok=True)
        self._buffers: dict[str, list[Record]] = {s: [] for s in self.splits}
        self._temps: dict[str, Path] = {}
        self._writers: dict[str, pq.ParquetWriter] = {}
        for split in self.splits:
            tmp = temporary_beside(out_dir / f"{split}.parquet")  # named for this process (csbench.io)
            self._temps[split] = tmp
            self._writers[split] = pq.ParquetWriter(tmp, SCHEMA)
        self.stats = {s: SplitStats() for s in self.splits}

    def add(self, record: Record) -> None:
        split = record["split"]
        if split not in self._buffers:
            raise ValueError(f"record {record.get('id')!r} has split {split!r}; the release declares {self.splits}")
        self._buffers[split].append(record)
        self.stats[split].add(record)
        if len(self._buffers[split]) >= self.batch_size:
            self._flush(split)

    def _flush(self, split: str) -> None:
        rows = self._buffers[split]
        if rows:
            columns = {name: [row[name] for row in rows] for name in RECORD_COLUMNS}
            self._writers[split].write_table(pa.table(columns, schema=SCHEMA))
            rows.clear()

    def close(self) -> None:
        """Finish every split and rename the files into place."""
        for split in self.splits:
            self._flush(split)
            self._writers[split].close()
        for split in self.splits:
            os.chmod(self._temps[split], 0o644)
            os.replace(self._temps[split], self.out_dir / f"{split}.parquet")

    def abort(self) -> None:
        for split in self.splits:
            self._writers[split].close()
            self._temps[split].unlink(missing_ok=True)

    def __enter__(self) -> SplitWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def release_card_markdown(card: dict) -> str:
    """Preparation card of a downloaded release: counts against the published ones, skips."""
    lines = [
        f"# Dataset card: {card['name']}",
        "",
        f"- {card['description']}",
        f"- languages: {card['language']}; licence: {card['licence']}",
        f"- source: {card['source']}",
        "",
        "| split | pairs | published | query tokens (mean ± std) | code subtokens (mean ± std) |",
        "|---|---:|---:|---:|---:|",
    ]
    for split, s in card["splits"].items():
        q, c = s["query_tokens"], s["code_tokens"]
        published = card["expected_counts"].get(split, "")
        lines.append(f"| {split} | {s['pairs']} | {published} | {q['mean']} ± {q['std']} | {c['mean']} ± {c['std']} |")
    skipped = card["skipped_records"]
    lines += ["", "Records skipped by the reader:" if skipped["counts"] else "No record was skipped.", ""]
    lines += [f"- {reason}: {n}" for reason, n in skipped["counts"].items()]
    if skipped["examples"]:
        lines += ["", "First examples:", ""] + [f"- {example}" for example in skipped["examples"]]
    if card["count_mismatches"]:
        lines += ["", "Counts that differ from the published ones:", ""]
        lines += [
            f"- {s}: {v['prepared']} prepared, {v['expected']} published" for s, v in card["count_mismatches"].items()
        ]
    lines += code_layout_markdown(card)
    return "\n".join(lines) + "\n"


def code_layout_markdown(card: dict) -> list[str]:
    """The card's "Code layout" section (lines, led by a blank one): per split and language, the
    ``LayoutStats`` counts with their definition; nothing for a card written before they existed."""
    rows = [
        (split, language, row)
        for split, s in card.get("splits", {}).items()
        for language, row in (s.get("code_layout") or {}).items()
    ]
    if not any("code_layout" in s for s in card.get("splits", {}).values()):
        return []
    lines = ["", "## Code layout", "", LAYOUT_DEFINITION, ""]
    if not any(row["one_line"] for _, _, row in rows):
        total = sum(row["snippets"] for _, _, row in rows)
        return [*lines, f"All {total} snippets span several lines: none is flattened."]
    lines += [
        "| split | language | snippets | one line | flattened | undelimited comment |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for split, language, row in rows:
        cells = [str(row["snippets"])] + [_count_share(row[key], row["snippets"]) for key in LAYOUT_KEYS[1:]]
        lines.append(f"| {split} | {language} | " + " | ".join(cells) + " |")
    return lines


def _count_share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f} %)" if total and count else str(count)


def log_code_layout(name: str, card: dict) -> None:
    """Warn, per split and language, about flattened snippets and undelimited comments in a card."""
    for split, s in card.get("splits", {}).items():
        for language, row in (s.get("code_layout") or {}).items():
            if row["flattened"]:
                log.warning(
                    "%s %s: %d of %d %s snippets are flattened onto one line, %d of them hold a line comment "
                    "whose end is unknown (comment removal keeps it); see the dataset card",
                    name,
                    split,
                    row["flattened"],
                    row["snippets"],
                    language,
                    row["undelimited_comment"],
                )
