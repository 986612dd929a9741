"""The common record schema, dataset metadata, and the reader protocol."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Every prepared dataset has exactly these columns (SPEC "Datasets").
RECORD_COLUMNS = ("id", "language", "query", "code", "func_name", "repo", "path", "url", "split", "docstring")
SPLITS = ("train", "valid", "test")
# A release may also ship a retrieval pool bigger than its test split (CodeXGLUE's codebase.jsonl,
# CoSQA's code_idx_map.txt): prepared as the extra split "codebase"; test queries point into it by id.
POOL_SPLIT = "codebase"

Record = dict[str, Any]


@dataclass(frozen=True)
class RemoteFile:
    """One file of an official release, as it lies under data/raw/<dataset>/ once downloaded."""

    path: str  # relative to data/raw/<dataset>/
    urls: tuple[str, ...]  # the official source first, then mirrors
    sha256: str | None  # pinned checksum; None where no copy was available offline to pin it
    size: int | None = None  # bytes, where known
    extract: bool = False  # a .zip / .tar.gz / .jsonl.gz to unpack into data/raw/<dataset>/
    note: str = ""
    unpacks_to: tuple[str, ...] = ()  # top-level entries the archive unpacks to, where not its own stem


class SkipReport:
    """Records skipped by a reader, counted by reason, with the first examples as file:line."""

    def __init__(self, max_examples: int = 20) -> None:
        self.counts: Counter[str] = Counter()
        self.examples: list[str] = []
        self.max_examples = max_examples

    def skip(self, reason: str, file: str | Path, line: int | None = None, detail: str = "") -> None:
        self.counts[reason] += 1
        if len(self.examples) < self.max_examples:
            where = f"{Path(file).name}:{line}" if line is not None else Path(file).name
            self.examples.append(f"{where}: {reason}" + (f" ({detail})" if detail else ""))

    def as_dict(self) -> dict[str, Any]:
        return {"counts": dict(sorted(self.counts.items())), "examples": list(self.examples)}


class ReaderError(ValueError):
    """Input a reader cannot use at all (missing file, wrong format); names the file and line."""


# A reader turns the raw files of a dataset into common-schema records (any split order),
# skipping bad records into the report. It must stream: never hold the whole release in memory.
Reader = Callable[[Path, dict[str, Any], SkipReport], Iterator[Record]]


@dataclass(frozen=True)
class DatasetSpec:
    """Declarative description of a dataset csbench can prepare."""

    name: str
    kind: str  # "local-source" (extracted from code on this machine) or "release" (downloaded)
    languages: tuple[str, ...]
    description: str
    licence: str
    citation: str = ""
    homepage: str = ""
    splits: tuple[str, ...] = SPLITS  # splits the release has (may include POOL_SPLIT)
    files: tuple[RemoteFile, ...] = ()
    reader: Reader | None = None
    expected_counts: dict[str, int] = field(default_factory=dict)  # records per split, where published
    setup_hint: str = ""  # how to get a missing local source
    defaults: dict[str, object] = field(default_factory=dict)  # options params.yaml may override
