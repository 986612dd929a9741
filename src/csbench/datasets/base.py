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
# The kind of a config-defined dataset in BEIR's layout (``datasets.<name>.kind: beir``): a folder or a
# Hugging Face hub id, read by csbench.datasets.beir
BEIR_KIND = "beir"


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
    # further pins, any of which the file may match instead of ``sha256``: "sha256:<hex>" (another
    # published version the reader reads as well) or "git-blob:<hex>" (its git object id in a public
    # repository, where only that is known: the blob itself was not in any readable copy)
    pins: tuple[str, ...] = ()


@dataclass(frozen=True)
class Need:
    """A path a release's reader reads (``DatasetSpec.needs``), relative to data/raw/<dataset>/ or
    absolute (a user's file given by an option). A directory ends in "/": the reader reads the files
    in it (below it) whose names match ``pattern`` (every file where empty), and needs at least one.
    When it is absent, download makes it present from ``sources`` (``RemoteFile.path`` of the files
    that yield it, tried in order; empty: the RemoteFile of the same path, if any); ``derive`` says
    how a user makes it from them where csbench cannot (a kit's own script)."""

    path: str
    sources: tuple[str, ...] = ()
    pattern: str = ""
    derive: str = ""


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
# A release's labelled matching pairs, by record id: (query_id, code_id, label 0/1, file line) in
# release order, or None where the options select a file without labelled pairs.
PairsReader = Callable[[Path, dict[str, Any], SkipReport], "Iterator[tuple[str, str, int, int]] | None"]
# A dataset's graded relevance judgements (BEIR qrels): (split, query_id, doc_id, grade) in file order;
# query ids are ids of the split's records, doc ids of the POOL_SPLIT's (the corpus). Prepare writes
# them as qrels.parquet (csbench.evaluate.qrels.QRELS_COLUMNS) for the ``qrels`` protocol.
QrelsReader = Callable[[Path, dict[str, Any], SkipReport], Iterator[tuple[str, str, str, int]]]


OPTION_TYPES = ("choice", "list", "file", "directory", "text", "flag")


@dataclass(frozen=True)
class DatasetOption:
    """One option a release's reader takes from ``datasets.<name>`` of the experiment config.

    ``type`` is one of :data:`OPTION_TYPES`: ``choice`` (one of ``choices``), ``list`` (a non-empty
    list of distinct ``choices``), ``file`` (a path, relative to ``data/raw/<name>/`` unless
    absolute), ``directory`` (a path), ``text`` (a non-empty string: a hub id, a language, a field
    name), ``flag`` (true or false). ``default`` None means "not set" and lets the config give
    ``null``; the config validation (:func:`csbench.config.validate_config`) checks every given
    value with :meth:`problem` before anything runs, and the README's Datasets section documents
    every declaration (:func:`options_markdown`)."""

    name: str
    type: str
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option {self.name!r}: type must be one of {', '.join(OPTION_TYPES)}, not {self.type!r}")
        if (self.type in ("choice", "list")) != bool(self.choices):
            raise ValueError(f"option {self.name!r}: choices are given exactly for the choice and list types")
        if self.default is not None and self.problem(self.default) is not None:
            raise ValueError(f"option {self.name!r}: default {self.default!r}: {self.problem(self.default)}")

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not a valid setting of this option, or None when it is."""
        if value is None:
            return None if self.default is None else f"must be set ({self.expects()}); omit it for the default"
        if self.type == "choice":
            if isinstance(value, str) and value in self.choices:
                return None
            return f"{value!r} is not {self.expects()}"
        if self.type == "list":
            if not isinstance(value, list) or not value:
                example = f"[{self.choices[0]}]"
                return f"expected a non-empty list of {', '.join(self.choices)} (e.g. {example}), not {value!r}"
            bad = [item for item in value if not isinstance(item, str) or item not in self.choices]
            if bad:
                return f"{', '.join(map(repr, bad))} not among {', '.join(self.choices)}"
            if len(set(value)) != len(value):
                return f"lists an item twice ({value!r})"
            return None
        if self.type == "flag":
            return None if isinstance(value, bool) else f"expected true or false, not {value!r}"
        if self.type == "text":
            return None if isinstance(value, str) and value.strip() else f"expected a non-empty string, not {value!r}"
        if not isinstance(value, str) or not value.strip():
            return f"expected a {self.type} path, not {value!r}"
        return None

    def expects(self) -> str:
        """The values the option takes, in words."""
        if self.type == "choice":
            return "one of " + ", ".join(self.choices)
        if self.type == "list":
            return "a list of " + ", ".join(self.choices)
        if self.type == "file":
            return "a file path (relative to data/raw/<dataset>/, or absolute)"
        if self.type == "text":
            return "a non-empty string"
        if self.type == "flag":
            return "true or false"
        return "a directory path"


def splits_option(splits: tuple[str, ...]) -> DatasetOption:
    """The ``splits`` option of a release whose reader reads ``splits`` (``selected_splits``)."""
    return DatasetOption(
        "splits",
        "list",
        "read only these splits; runs evaluate `test`, trained models also need `train`",
        choices=tuple(splits),
    )


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
    # options params.yaml may override: a local corpus's keys (workflow/schemas/params.schema.yaml,
    # $defs/local_source); for a release, the defaults of its declared options (filled in below)
    defaults: dict[str, object] = field(default_factory=dict)
    options: tuple[DatasetOption, ...] = ()  # the options a release's reader takes (typed, validated)
    # exactly what the reader reads, from its options and what lies in data/raw/<dataset>/ (the
    # reader's own choices, e.g. a derived file where present); None: every file of ``files``
    needs: Callable[[dict[str, Any], Path], tuple[Need, ...]] | None = None
    # the release's own labelled matching pairs (GeCS clf files: positives and their released negatives),
    # for the matching protocol; None: the release has none (matching draws its negatives)
    released_pairs: PairsReader | None = None
    # graded relevance judgements (several relevant documents per query), for the ``qrels`` protocol;
    # None: each query's own code is its one relevant document
    qrels: QrelsReader | None = None

    def __post_init__(self) -> None:
        names = [option.name for option in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"dataset {self.name!r}: an option is declared twice ({', '.join(names)})")
        undeclared = sorted(set(self.defaults) - set(names)) if self.options else []
        if undeclared:
            raise ValueError(f"dataset {self.name!r}: defaults {undeclared} are not declared options")
        if self.options:
            object.__setattr__(self, "defaults", {o.name: o.default for o in self.options} | dict(self.defaults))

    def option(self, name: str) -> DatasetOption | None:
        """The declared option ``name``, or None."""
        return next((option for option in self.options if option.name == name), None)


_VALUES = {"text": "text", "flag": "`true`, `false`"}  # the values cell of the types without choices


def _default_text(option: DatasetOption) -> str:
    if isinstance(option.default, bool):
        return f"`{str(option.default).lower()}`"
    if option.default is not None:
        return f"`{option.default}`"
    return "all" if option.type == "list" else "none"


def options_markdown(specs: list[DatasetSpec] | tuple[DatasetSpec, ...]) -> str:
    """The README's table of release options, one row per declaration shared by several releases
    (``csn-go`` ... ``csn-ruby`` share theirs), generated from the specs' :class:`DatasetOption`s."""
    rows: dict[DatasetOption, list[str]] = {}  # equal declarations (a frozen dataclass) share a row
    for spec in specs:
        for option in spec.options:
            rows.setdefault(option, []).append(spec.name)
    lines = [
        "| datasets | option | type | values | default | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for option, datasets in rows.items():
        cells = (
            ", ".join(f"`{d}`" for d in datasets),
            f"`{option.name}`",
            option.type,
            ", ".join(f"`{c}`" for c in option.choices) if option.choices else _VALUES.get(option.type, "path"),
            _default_text(option),
            option.help,
        )
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
