"""GenCodeSearchNet (GeCS, Diera et al. 2023) test files: StatCodeSearch (R) and CodeSearchNet.

The GeCS release (Zenodo 10.5281/zenodo.8310891) stores every test set as jsonl lines
``{"input": "<text> [CODESPLIT] <code>", "target": 0|1, "target_options": ["no_match", "match"]}``
(``test_{go,java,javascript,php,ruby,adv,cosqa,statcodesearch}.jsonl``, ``train_adv.jsonl``); the
sample files of the GeCS repository use ``[SEP]`` instead. Positive lines (target 1) become records;
target-0 lines are counted as "negative pair". All lines, negatives included, are also the release's
matching pairs (:func:`read_gecs_pairs`, the specs' ``released_pairs``): prepare writes them as
``released_pairs.parquet`` and the ``matching`` protocol evaluates exactly those
(``csbench.datasets.released_pairs``).

``statcodesearch``
    1,070 R comment / code pairs from OSF research projects. Read by default from the repository's
    ``statcodesearch.json`` (``ID, Comment, Code, Label, Source, File``; ``Label`` is a topic such as
    "Visualization", not a match label: every pair matches); ``options["format"] = "gecs"`` reads the
    Zenodo ``test_statcodesearch.jsonl`` instead.
``gecs-csn-{lang}``
    The CodeSearchNet test split of one language as GeCS ships it (no Python: GeCS uses AdvTest for it).
    ``options["file"]`` reads another file of the same format, e.g. a ``{lang}_test_sample.jsonl``.

Flattened code: no GeCS file keeps the line structure of these two. StatCodeSearch's code was cut
from R scripts by GeCS's ``Extracting_comment_code_pairs.ipynb`` (repository root and
``data/statcodesearch_full/``): each code line stripped and appended with one space, so every file of
the release -- ``statcodesearch.json``, ``statcodesearch_1k_final.csv``, the ``.xlsx``,
``R-code-comment-after-filtering.csv`` and the jsonl files made from it -- holds one-line code; the
original R files are only on OSF (``Source`` / ``File``). Its ``;`` also arrive doubled (``;;``: the
notebook wrote its CSV with ``escapechar=';'``); they are read as released. The ``[CODESPLIT]``
files of ``gecs-csn-{lang}`` are ``" ".join(func_code_tokens)`` of the Hugging Face
``code_search_net`` test split (GeCS's ``data/{clf,mrr}/codesearchnet_*/create_ds_*.py``): one line of
tokens, comments among them (CodeSearchNet's tokens keep comments: its Ruby ``code_tokens`` do, 24 % of
the test functions); the line structure of the same functions is in CodeSearchNet itself
(``csn-{lang}``), and the repository's ``[SEP]`` sample files keep it (they hold
``func_code_string``). A ``#`` or ``//`` comment in one-line code runs to the end of the snippet:
comment removal keeps it (``csbench.code.comments``), and the dataset card counts such snippets
(``csbench.datasets.prepare.LayoutStats``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import (
    DatasetOption,
    DatasetSpec,
    Need,
    PairsReader,
    Reader,
    ReaderError,
    Record,
    RemoteFile,
    SkipReport,
)
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
# The commit of drndr/gencodesearchnet whose data/statcodesearch_full/statcodesearch.json is pinned
# (added in d56b7c3; the same blob at 70db22a, the newest commit read).
_REPO_COMMIT = "70db22a16e1111d7f66e2c0fa67b44e74a0a0e89"
_STAT_JSON_PATH = "data/statcodesearch_full/statcodesearch.json"
_ZENODO_ONLY = (
    "Not pinned: the file is only on Zenodo (doi:{doi}), in no repository a copy could be read from here; "
    "shared/data holds {sample}. "
)
CITATION = (
    "Diera, Dahou, Galke, Karl, Sihler, Scherp. GenCodeSearchNet: A Benchmark Test Suite for Evaluating "
    "Generalization in Programming Language Understanding. GenBench workshop, EMNLP 2023. "
    "Data: doi:" + GECS_DOI
)


def _file_read(options: dict[str, Any], default: str) -> str:
    """The path the reader reads: ``options["file"]`` (relative to the dataset directory, or
    absolute) or the release's ``default`` file."""
    return str(options.get("file") or default)


def _user_file(raw_dir: Path, options: dict[str, Any], default: str, dataset: str, source: str) -> Path:
    relative = _file_read(options, default)
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


def read_gecs_pairs(path: Path, *, dataset: str, report: SkipReport) -> Iterator[tuple[str, str, int, int]]:
    """The labelled pairs of one GeCS jsonl file, as (query_id, code_id, label, line) over the
    records :func:`read_gecs_file` makes of it (id ``<dataset>:<line>`` of a positive line), in file
    order: what ``experiments/eval_clf*.py`` evaluates, released negatives included.

    A positive line is its own record's pair. A negative line (target 0) holds a query and a code
    that GeCS's ``create_ds_*`` scripts copied from positive lines (each negative follows its
    positive and pairs its query with another line's code): its query is the record of the nearest
    positive line above it with that text (else the first with it), its code the record of the first
    positive line with that code (equal texts encode equally). A negative whose query or code is in
    no positive line is skipped (counted as "released negative without a positive line"), and so is a
    line with more than one ``[CODESPLIT]``, which ``eval_clf*.py`` skips (its record, made from the
    first separator, still serves the ranking protocols). Two passes over the file; only a digest of
    each code is kept."""
    codes: dict[bytes, int] = {}
    queries: dict[str, int] = {}
    for line, text, code, target in iter_gecs(path, SkipReport()):  # the second pass counts the skips
        if target == 1:
            codes.setdefault(hashlib.sha1(code.encode("utf-8", "surrogatepass")).digest(), line)
            queries.setdefault(text, line)
    last_positive: dict[str, int] = {}
    for line, text, code, target in iter_gecs(path, report):
        if "[CODESPLIT]" in text or "[CODESPLIT]" in code:  # eval_clf*.py splits it in more than two parts
            report.skip("more than one [CODESPLIT] (eval_clf*.py skips the line)", path, line)
            continue
        if target == 1:
            last_positive[text] = line
            yield f"{dataset}:{line}", f"{dataset}:{line}", 1, line
            continue
        query_line = last_positive.get(text, queries.get(text))
        code_line = codes.get(hashlib.sha1(code.encode("utf-8", "surrogatepass")).digest())
        if query_line is None or code_line is None:
            side = "query" if query_line is None else "code"
            report.skip("released negative without a positive line", path, line, f"its {side} is in none")
            continue
        yield f"{dataset}:{query_line}", f"{dataset}:{code_line}", 0, line


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


def _stat_default(options: dict[str, Any]) -> str:
    fmt = options.get("format") or "json"
    if fmt not in ("json", "gecs"):
        raise ReaderError(f"dataset {STAT_NAME!r}: options.format must be 'json' or 'gecs', not {fmt!r}")
    return STAT_JSON if fmt == "json" else STAT_GECS


def statcodesearch_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """The one file the reader reads: ``options["file"]``, else the file of ``options["format"]``."""
    return (Need(_file_read(options, _stat_default(options))),)


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


def statcodesearch_pairs(
    raw_dir: Path, options: dict[str, Any], report: SkipReport
) -> Iterator[tuple[str, str, int, int]] | None:
    """The released matching pairs of ``test_statcodesearch.jsonl`` (``options.format: gecs``);
    None for ``statcodesearch.json``, which has no negatives (every pair matches)."""
    if (options.get("format") or "json") != "gecs":
        return None
    path = _user_file(raw_dir, options, STAT_GECS, STAT_NAME, ZENODO + STAT_GECS)
    return read_gecs_pairs(path, dataset=STAT_NAME, report=report)


STATCODESEARCH = DatasetSpec(
    name=STAT_NAME,
    kind="release",
    languages=("r",),
    description=(
        "StatCodeSearch (GeCS): 1,070 comment / code pairs from R scripts of OSF research projects (statistics "
        "in social science and psychology); test only; code flattened onto one line as released (no release "
        "file keeps its line breaks: see the card's code layout)"
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
                + _ZENODO_ONLY.format(doi=GECS_DOI, sample="a 60-line sample")
            ),
        ),
        RemoteFile(
            path=STAT_JSON,
            urls=(
                f"https://raw.githubusercontent.com/drndr/gencodesearchnet/{_REPO_COMMIT}/{_STAT_JSON_PATH}",
                _REPO + _STAT_JSON_PATH,
            ),
            sha256="b516bc8701662be9cada93010587c378043ba6338852b4e837736f433cc6124b",
            size=664841,
            note=(
                "GeCS repository data/statcodesearch_full/statcodesearch.json: JSON array of ID, Comment, Code, "
                "Label (topic), Source (OSF project), File; 1,070 records. sha256 of the blob at "
                f"drndr/gencodesearchnet commit {_REPO_COMMIT[:7]} (its first 60 records are shared/data's sample)"
            ),
        ),
    ),
    reader=read_statcodesearch,
    needs=statcodesearch_needs,
    released_pairs=statcodesearch_pairs,
    expected_counts={"test": 1070},
    options=(
        DatasetOption(
            "format",
            "choice",
            "`json`: the repository's `statcodesearch.json`; `gecs`: the Zenodo `test_statcodesearch.jsonl` "
            "(`[CODESPLIT]` lines)",
            default="json",
            choices=("json", "gecs"),
        ),
        DatasetOption("file", "file", "read this file (in the `format`) instead of that format's release file"),
    ),
)


# --------------------------------------------------------------------------- gecs-csn-{lang}

GECS_LANGUAGES = ("go", "java", "javascript", "php", "ruby")
# Positive pairs per language, GeCS Table 1. PHP is left out: the paper prints 29,391, but the
# Hugging Face test split it was built from has 28,391 records.
GECS_COUNTS = {"go": 14291, "java": 26909, "javascript": 6483, "ruby": 2279}


def _gecs_needs(language: str) -> Callable[[dict[str, Any], Path], tuple[Need, ...]]:
    def needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
        """The one file the reader reads: ``options["file"]``, else ``test_<lang>.jsonl``."""
        return (Need(_file_read(options, f"test_{language}.jsonl")),)

    return needs


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


def _gecs_pairs(language: str, dataset: str) -> PairsReader:
    default = f"test_{language}.jsonl"

    def pairs(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[tuple[str, str, int, int]]:
        """The released matching pairs of the GeCS CodeSearchNet test file (``options["file"]``: another)."""
        path = _user_file(raw_dir, options, default, dataset, ZENODO + default)
        return read_gecs_pairs(path, dataset=dataset, report=report)

    pairs.__name__ = f"{dataset.replace('-', '_')}_pairs"
    return pairs


def gecs_csn_spec(language: str) -> DatasetSpec:
    """``gecs-csn-{language}``: the GeCS copy of one language's CodeSearchNet test split."""
    name = f"gecs-csn-{language}"
    return DatasetSpec(
        name=name,
        kind="release",
        languages=(language,),
        description=(
            f"GeCS CodeSearchNet {language} test set (cross-lingual generalisation): documentation / function "
            "pairs of the CodeSearchNet test split in GeCS jsonl; records are the matching (target 1) pairs; the "
            "release's code is its tokens joined by spaces on one line (the line structure is in csn-" + language + ")"
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
                    f"GeCS release (doi:{GECS_DOI}), [CODESPLIT] format. "
                    + _ZENODO_ONLY.format(
                        doi=GECS_DOI,
                        sample=f"only the repository's 100-line {language}_test_sample.jsonl ([SEP] format), "
                        "readable with options.file",
                    )
                ),
            ),
        ),
        reader=_gecs_reader(language, name),
        needs=_gecs_needs(language),
        released_pairs=_gecs_pairs(language, name),
        options=(
            DatasetOption(
                "file",
                "file",
                "read this GeCS jsonl file instead of `test_<lang>.jsonl`, e.g. the repository's "
                "`<lang>_test_sample.jsonl` (`[SEP]` lines)",
            ),
        ),
        expected_counts={"test": GECS_COUNTS[language]} if language in GECS_COUNTS else {},
    )


GECS_CSN = tuple(gecs_csn_spec(language) for language in GECS_LANGUAGES)
