"""GenCodeSearchNet (GeCS, Diera et al. 2023) test files: StatCodeSearch (R) and CodeSearchNet.

The GeCS release (Zenodo 10.5281/zenodo.8310891) stores every test set as jsonl lines
``{"input": "<text> [CODESPLIT] <code>", "target": 0|1, "target_options": ["no_match", "match"]}``
(``test_{go,java,javascript,php,ruby,adv,cosqa,statcodesearch}.jsonl``, ``train_adv.jsonl``); the
sample files of the GeCS repository use ``[SEP]`` instead. Positive lines (target 1) become records;
target-0 lines are counted as "negative pair".

``statcodesearch``
    1,070 R comment / code pairs from OSF research projects. Read by default from the repository's
    ``statcodesearch.json`` (``ID, Comment, Code, Label, Source, File``; ``Label`` is a topic such as
    "Visualization", not a match label: every pair matches); ``options["format"] = "gecs"`` reads the
    Zenodo ``test_statcodesearch.jsonl`` instead. Code is whitespace-flattened as released.
``gecs-csn-{lang}``
    The CodeSearchNet test split of one language as GeCS ships it (no Python: GeCS uses AdvTest for it).
    ``options["file"]`` reads another file of the same format, e.g. a ``{lang}_test_sample.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import DatasetSpec, Reader, ReaderError, Record, RemoteFile, SkipReport
from csbench.datasets.releases._formats import (
    RecordChecker,
    iter_gecs,
    iter_json_array,
    make_record,
    missing,
    require_file,
    selected_splits,
)

ZENODO = "https://zenodo.org/record/8310891/files/"
GECS_DOI = "10.5281/zenodo.8310891"
_REPO = "https://raw.githubusercontent.com/drndr/gencodesearchnet/master/"
CITATION = (
    "Diera, Dahou, Galke, Karl, Sihler, Scherp. GenCodeSearchNet: A Benchmark Test Suite for Evaluating "
    "Generalization in Programming Language Understanding. GenBench workshop, EMNLP 2023. "
    "Data: doi:" + GECS_DOI
)


def _user_file(raw_dir: Path, options: dict[str, Any], default: str, dataset: str, source: str) -> Path:
    relative = options.get("file") or default
    path = Path(relative)
    if path.is_absolute():
        if not path.is_file():
            raise ReaderError(f"{path}: file of dataset {dataset!r} (options.file) not found")
        return path
    return require_file(raw_dir, str(relative), dataset, source)


def read_gecs_file(
    path: Path, *, dataset: str, language: str, split: str, report: SkipReport, checker: RecordChecker
) -> Iterator[Record]:
    """Records of the positive lines of one GeCS jsonl file (id ``<dataset>:<line>``)."""
    for line, text, code, target in iter_gecs(path, report):
        if target == 0:
            report.skip("negative pair", path, line)
            continue
        record = make_record(
            id=f"{dataset}:{line}",
            language=language,
            query=text.strip(),
            code=code,
            url=f"gecs://{dataset}/{line}",
            split=split,
            docstring=text,
        )
        if checker.ok(record, path, line):
            yield record


# --------------------------------------------------------------------------- statcodesearch

STAT_NAME = "statcodesearch"
STAT_JSON = "statcodesearch.json"
STAT_GECS = "test_statcodesearch.jsonl"


def _read_stat_json(path: Path, report: SkipReport, checker: RecordChecker) -> Iterator[Record]:
    for line, item in iter_json_array(path, report):
        if not isinstance(item, dict):
            report.skip("not a JSON object", path, line)
            continue
        absent = missing(item, ("ID", "Comment", "Code"))
        if absent:
            report.skip(f"missing field {absent!r}", path, line)
            continue
        if not isinstance(item["Comment"], str) or not isinstance(item["Code"], str):
            report.skip("'Comment' or 'Code' is not a string", path, line)
            continue
        record = make_record(
            id=f"{STAT_NAME}:{item['ID']}",
            language="r",
            query=item["Comment"].strip(),
            code=item["Code"],
            repo=item.get("Source"),
            path=item.get("File"),
            url=f"gecs://{STAT_NAME}/{item['ID']}",
            split="test",
            docstring=item["Comment"],
        )
        if checker.ok(record, path, line):
            yield record


def read_statcodesearch(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """StatCodeSearch pairs (split ``test``) from ``statcodesearch.json`` or, with
    ``options["format"] == "gecs"``, from the GeCS ``test_statcodesearch.jsonl``."""
    selected_splits(options, ("test",), STAT_NAME)
    checker = RecordChecker(report)
    fmt = options.get("format", "json")
    if fmt == "json":
        path = _user_file(raw_dir, options, STAT_JSON, STAT_NAME, _REPO + "data/statcodesearch_full/" + STAT_JSON)
        yield from _read_stat_json(path, report, checker)
    elif fmt == "gecs":
        path = _user_file(raw_dir, options, STAT_GECS, STAT_NAME, ZENODO + STAT_GECS)
        yield from read_gecs_file(path, dataset=STAT_NAME, language="r", split="test", report=report, checker=checker)
    else:
        raise ReaderError(f"dataset {STAT_NAME!r}: options.format must be 'json' or 'gecs', not {fmt!r}")


STATCODESEARCH = DatasetSpec(
    name=STAT_NAME,
    kind="release",
    languages=("r",),
    description=(
        "StatCodeSearch (GeCS): 1,070 comment / code pairs from R scripts of OSF research projects (statistics "
        "in social science and psychology); test only; code whitespace-flattened as released"
    ),
    licence="per record: each OSF project's licence (mostly CC-BY-4.0); see the Source column",
    citation=CITATION,
    homepage="https://github.com/drndr/gencodesearchnet",
    splits=("test",),
    files=(
        RemoteFile(
            path=STAT_GECS,
            urls=(ZENODO + STAT_GECS,),
            sha256=None,
            note=(
                f"GeCS release (doi:{GECS_DOI}), [CODESPLIT] format; read with options.format=gecs. "
                "Not pinned: shared/data holds only a 60-line sample"
            ),
        ),
        RemoteFile(
            path=STAT_JSON,
            urls=(_REPO + "data/statcodesearch_full/" + STAT_JSON,),
            sha256=None,
            note=(
                "GeCS repository data/statcodesearch_full/statcodesearch.json: JSON array of ID, Comment, Code, "
                "Label (topic), Source (OSF project), File. Not pinned: shared/data holds only a 60-record sample"
            ),
        ),
    ),
    reader=read_statcodesearch,
    expected_counts={"test": 1070},
    defaults={"format": "json", "file": None},
)


# --------------------------------------------------------------------------- gecs-csn-{lang}

GECS_LANGUAGES = ("go", "java", "javascript", "php", "ruby")
# Positive pairs per language, GeCS Table 1. PHP is left out: the paper prints 29,391, but the
# Hugging Face test split it was built from has 28,391 records.
GECS_COUNTS = {"go": 14291, "java": 26909, "javascript": 6483, "ruby": 2279}


def _gecs_reader(language: str, dataset: str) -> Reader:
    default = f"test_{language}.jsonl"

    def read(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
        """Positive pairs of the GeCS CodeSearchNet test file (``options["file"]`` to read another)."""
        selected_splits(options, ("test",), dataset)
        path = _user_file(raw_dir, options, default, dataset, ZENODO + default)
        yield from read_gecs_file(
            path, dataset=dataset, language=language, split="test", report=report, checker=RecordChecker(report)
        )

    read.__name__ = f"read_{dataset.replace('-', '_')}"
    return read


def gecs_csn_spec(language: str) -> DatasetSpec:
    """``gecs-csn-{language}``: the GeCS copy of one language's CodeSearchNet test split."""
    name = f"gecs-csn-{language}"
    return DatasetSpec(
        name=name,
        kind="release",
        languages=(language,),
        description=(
            f"GeCS CodeSearchNet {language} test set (cross-lingual generalisation): documentation / function "
            "pairs of the CodeSearchNet test split in GeCS jsonl; records are the matching (target 1) pairs"
        ),
        licence="as CodeSearchNet: per source repository",
        citation=CITATION,
        homepage="https://github.com/drndr/gencodesearchnet",
        splits=("test",),
        files=(
            RemoteFile(
                path=f"test_{language}.jsonl",
                urls=(ZENODO + f"test_{language}.jsonl",),
                sha256=None,
                note=(
                    f"GeCS release (doi:{GECS_DOI}), [CODESPLIT] format. Not pinned: shared/data holds only the "
                    f"repository's 100-line {language}_test_sample.jsonl ([SEP] format), readable with options.file"
                ),
            ),
        ),
        reader=_gecs_reader(language, name),
        defaults={"file": None},
        expected_counts={"test": GECS_COUNTS[language]} if language in GECS_COUNTS else {},
    )


GECS_CSN = tuple(gecs_csn_spec(language) for language in GECS_LANGUAGES)
