"""Preparing a downloaded release: stream its records into per-split Parquet files.

Memory stays bounded whatever the input size: records are buffered per split in batches of
``batch_size`` and appended to Parquet row groups; statistics are running sums.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, Record

SCHEMA = pa.schema([(name, pa.string()) for name in RECORD_COLUMNS])


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


@dataclass
class SplitStats:
    pairs: int = 0
    query_tokens: RunningStats = field(default_factory=RunningStats)
    code_tokens: RunningStats = field(default_factory=RunningStats)

    def add(self, record: Record) -> None:
        self.pairs += 1
        if record["query"]:
            self.query_tokens.add(len(docstring_tokens(record["query"])))
        self.code_tokens.add(len(subtokens(record["code"])))

    def as_dict(self) -> dict:
        return {
            "pairs": self.pairs,
            "query_tokens": self.query_tokens.as_dict(),
            "code_tokens": self.code_tokens.as_dict(),
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
            fd, tmp = tempfile.mkstemp(prefix=f".{split}.", suffix=".parquet.tmp", dir=out_dir)
            os.close(fd)
            self._temps[split] = Path(tmp)
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
    return "\n".join(lines) + "\n"
