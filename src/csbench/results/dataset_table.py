"""GeCS Table 1: the test sets' token statistics and their shift from the fine-tuning set.

GenCodeSearchNet (Diera et al. 2023, section 3, Table 1) describes each test set by its number of
text-code pairs, the average number of text (query) and code tokens, and the *total variation
distance* of its text and of its code token distribution to the CodeSearchNet AdvTest train set (the
fine-tuning set): "The average number of tokens have been calculated using the pretrained RoBERTa
tokenizer sourced from HuggingFace ... We calculate the total variation distance to the CodeSearchNet
Adv train set (used for fine-tuning) on the tokenized samples." Only the positive (matching) pairs
count ("The numbers shown include only the positive (matching) examples").

The repository (drndr/gencodesearchnet at 70db22a16e1111d7f66e2c0fa67b44e74a0a0e89) holds no code for
these figures: its ``data/mrr/ds_statistics.py`` averages *characters* (``len`` of each side of the
``[CODESPLIT]`` split), not tokens, and nothing computes a total variation distance. So this module
follows the paper's words, with every choice stated:

* tokens: ``tokenizer(text, add_special_tokens=False)`` of the configured tokenizer (``roberta-base``
  for GeCS's numbers: byte-level BPE, a leading space is part of a token), no truncation;
* distribution: the unigram distribution of token ids over all tokens of a side (query or code) of a
  set, ``p(t) = count(t) / total``;
* total variation distance: ``TV(P, Q) = 1/2 * sum_t |p(t) - q(t)|`` over the union of tokens, in
  [0, 1] (0: the same distribution; the reference set has 0 against itself, as in Table 1);
* the "Combined Test set" row pools the pairs of every test set (averages per pair, distribution of
  the pooled counts), as its pair count (the sum) says Table 1 does.

The sets are the records csbench prepares (``data/prepared/<dataset>/<split>.parquet``: positives
only, query and code as each release's reader gives them), so where a reader keeps the code as
released and GeCS's files hold space-joined code tokens (AdvTest train, ``' '.join(code_tokens)``) the
code token counts differ from Table 1's; the caption says which tokenizer and which splits were used.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from csbench.io import write_json, write_text

GECS_TOKENIZER = "roberta-base"  # GeCS section 3: "the pretrained RoBERTa tokenizer sourced from HuggingFace"
TOKEN_BATCH = 1024  # texts tokenized per call
SIDES = ("query", "code")
COMBINED = "Combined test set"
TABLE_NAME = "gecs_datasets"
DIR_NAME = "dataset_table"  # below the study's folder (csbench.paths.study_dir)
SUFFIXES = (".md", ".csv", ".json")


@dataclass
class SetTokens:
    """The token statistics of one set of positive pairs: pairs, tokens per side, token id counts."""

    name: str
    split: str
    pairs: int = 0
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    counts: dict[str, Counter[int]] = field(default_factory=lambda: {side: Counter() for side in SIDES})

    def mean_tokens(self, side: str) -> float:
        """Average tokens per pair on ``side`` (NaN for an empty set)."""
        return self.totals[side] / self.pairs if self.pairs else math.nan

    def merged(self, other: SetTokens, name: str) -> SetTokens:
        """The pooled statistics of this set and ``other``."""
        out = SetTokens(name, "test", self.pairs + other.pairs)
        for side in SIDES:
            out.totals[side] = self.totals[side] + other.totals[side]
            out.counts[side] = self.counts[side] + other.counts[side]
        return out


def load_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer ``name`` (a hub id, a registered packaged model such as ``minilm``, or
    a folder), offline where the model is packaged (csbench.models.hf.resolve_model_id)."""
    from transformers import AutoTokenizer

    from csbench.models.hf import resolve_model_id

    registered = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
    source = resolve_model_id(registered.get(name, name))
    try:
        return AutoTokenizer.from_pretrained(source)
    except OSError as error:
        raise OSError(
            f"tokenizer {name!r} is not available ({error}); GeCS's Table 1 uses {GECS_TOKENIZER!r}: put it in the "
            "Hugging Face cache (or give a folder holding it) and run again"
        ) from None


def count_tokens(name: str, split: str, queries: Sequence[str], codes: Sequence[str], tokenizer: Any) -> SetTokens:
    """Tokenize every pair's query and code (no special tokens, no truncation) and count token ids."""
    return count_token_batches(name, split, [(queries, codes)], tokenizer)


def count_token_batches(
    name: str, split: str, batches: Iterable[tuple[Sequence[str], Sequence[str]]], tokenizer: Any
) -> SetTokens:
    """``count_tokens`` of a set read a batch of pairs at a time ((queries, codes) per batch): the same
    statistics, holding one batch (a text's tokens do not depend on the texts tokenized with it)."""
    stats = SetTokens(name, split, 0)
    for queries, codes in batches:
        if len(queries) != len(codes):
            raise ValueError(f"{name}: {len(queries)} queries but {len(codes)} codes")
        stats.pairs += len(queries)
        for side, texts in (("query", queries), ("code", codes)):
            texts = list(texts)
            for start in range(0, len(texts), TOKEN_BATCH):
                ids = tokenizer(texts[start : start + TOKEN_BATCH], add_special_tokens=False)["input_ids"]
                for row in ids:
                    stats.totals[side] += len(row)
                    stats.counts[side].update(row)
    return stats


def total_variation(p: Mapping[int, int], q: Mapping[int, int]) -> float:
    """``1/2 * sum_t |p(t) - q(t)|`` of the distributions the counts ``p`` and ``q`` define (NaN if
    either is empty)."""
    p_total, q_total = sum(p.values()), sum(q.values())
    if not p_total or not q_total:
        return math.nan
    tokens = set(p) | set(q)
    return 0.5 * math.fsum(abs(p.get(t, 0) / p_total - q.get(t, 0) / q_total) for t in tokens)


@dataclass(frozen=True)
class ShiftRow:
    """One row of GeCS Table 1."""

    group: str  # "Fine-tuning set" | "Test sets"
    name: str
    split: str
    pairs: int
    query_tokens: float
    code_tokens: float
    tv_query: float
    tv_code: float

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


def shift_rows(reference: SetTokens, tests: Iterable[SetTokens]) -> list[ShiftRow]:
    """Table 1's rows: the reference (fine-tuning) set, each test set, and the pooled test sets."""

    def row(group: str, stats: SetTokens) -> ShiftRow:
        return ShiftRow(
            group,
            stats.name,
            stats.split,
            stats.pairs,
            stats.mean_tokens("query"),
            stats.mean_tokens("code"),
            total_variation(stats.counts["query"], reference.counts["query"]),
            total_variation(stats.counts["code"], reference.counts["code"]),
        )

    tests = list(tests)
    rows = [row("Fine-tuning set", reference)] + [row("Test sets", t) for t in tests]
    if len(tests) > 1:
        pooled = tests[0]
        for other in tests[1:]:
            pooled = pooled.merged(other, COMBINED)
        rows.append(row("Test sets", pooled))
    return rows


def caption(tokenizer: str, reference: str, reference_split: str) -> str:
    return (
        f"GeCS Table 1: positive text-code pairs per set, average tokens per query and per code, and the total "
        f"variation distance (1/2 sum |p - q| of the unigram token distributions) of each set's queries and code "
        f"to those of the fine-tuning set, {reference} {reference_split}. Tokenizer: {tokenizer} (no special "
        f"tokens, no truncation){'' if tokenizer == GECS_TOKENIZER else f'; GeCS used {GECS_TOKENIZER}'}. Test "
        f"sets: the test split of each dataset as csbench prepares it; the combined row pools them."
    )


def to_markdown(rows: Sequence[ShiftRow], text: str) -> str:
    """The table as Markdown, GeCS's columns and 2 / 4 decimals, the caption below it."""
    lines = [
        "| set | split | # text-code pairs | avg # text tokens | avg # code tokens | TV distance text "
        "| TV distance code |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    group = None
    for r in rows:
        if r.group != group:
            lines.append(f"| *{r.group}* | | | | | | |")
            group = r.group
        lines.append(
            f"| {r.name} | {r.split} | {r.pairs:,} | {_num(r.query_tokens, 2)} | {_num(r.code_tokens, 2)} | "
            f"{_num(r.tv_query, 4)} | {_num(r.tv_code, 4)} |"
        )
    return "\n".join(lines) + f"\n\n{text}\n"


def _num(value: float, decimals: int) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{decimals}f}"


def to_csv(rows: Sequence[ShiftRow]) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0].as_dict()) if rows else [], lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r.as_dict())
    return buffer.getvalue()


def write_shift_table(out_dir: Path, rows: Sequence[ShiftRow], text: str, meta: Mapping[str, Any]) -> list[Path]:
    """``<out_dir>/gecs_datasets.{md,csv,json}``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / f"{TABLE_NAME}{suffix}" for suffix in SUFFIXES]
    write_text(files[0], to_markdown(rows, text))
    write_text(files[1], to_csv(rows))
    write_json(files[2], {**meta, "caption": text, "rows": [r.as_dict() for r in rows]})
    return files
