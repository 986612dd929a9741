"""Funcom (LeClair & McMillan 2019): ~2.1 million Java methods with their Javadoc comments.

Release layout (http://leclair.tech/data/funcom/):

- ``funcom_filtered.tar.gz`` unpacks to ``funcom_processed/functions.json`` and
  ``funcom_processed/comments.json``: each one big JSON object ``{"<fid>": "<text>", ...}``
  (the method's source code; its Javadoc comment).
- ``funcom_tokenized.tar.gz`` unpacks to ``funcom_tokenized/{train,valid,test}/{functions,comments}.{split}``
  (``fid<TAB>tokens`` lines): the official split by project. Its fid column assigns the splits; with
  ``options["query"] = "tokenized"`` the tokens of ``comments.{split}`` are the query.

Both JSON files are several GB in total, so neither side of the join is held in memory: the
comments and the split assignment are streamed (``ijson``) into a temporary on-disk SQLite file
keyed by fid, then the functions are streamed and each one is looked up. Peak memory does not grow
with the input. Query = the first paragraph of the Javadoc (comment markers and block tags removed);
``options["query"] = "comment"`` uses the whole comment on one line instead, and ``"tokenized"`` the
release's own tokenised comment (``comments.{split}``, ``<s>`` / ``</s>`` markers removed): the reference
of the Funcom papers' summarization scores (the same records in every mode; code is always the raw
method of ``functions.json``, which attacks can parse); ``options["tmp_dir"]``
chooses where the temporary SQLite file goes (default: the system temporary directory; it needs
about the size of ``comments.json``).
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import ijson

from csbench.datasets.base import (
    SPLITS,
    DatasetOption,
    DatasetSpec,
    Need,
    ReaderError,
    Record,
    RemoteFile,
    SkipReport,
    splits_option,
)
from csbench.datasets.releases._formats import iter_lines, javadoc_summary, make_record, require_file, selected_splits

NAME = "funcom"
FUNCTIONS = "funcom_processed/functions.json"
COMMENTS = "funcom_processed/comments.json"
_S3 = "https://s3.us-east-2.amazonaws.com/leclair.tech/data/funcom/"
QUERY_MODES = ("summary", "comment", "tokenized")
_BATCH = 5000
_SQLITE_CACHE_KIB = 8192  # SQLite page cache, bounded


def split_file(split: str) -> str:
    """The tokenized release's file whose fid column lists the methods of ``split``."""
    return f"funcom_tokenized/{split}/comments.{split}"


def _kvitems(path: Path) -> Iterator[tuple[str, Any]]:
    """(key, value) of a top-level JSON object, streamed; parse errors raise ReaderError."""
    try:
        with open(path, "rb") as handle:
            yield from ijson.kvitems(handle, "", use_float=True)
    except (ijson.JSONError, ijson.IncompleteJSONError, UnicodeDecodeError, ValueError) as error:
        raise ReaderError(f"{path}: not a valid JSON object of id -> text ({error})") from error


def _batched(items: Iterator[tuple], size: int = _BATCH) -> Iterator[list[tuple]]:
    while batch := list(islice(items, size)):
        yield batch


def _split_rows(raw_dir: Path, report: SkipReport, keep_tokens: bool) -> Iterator[tuple[str, str, str | None]]:
    """(fid, split, tokenised comment or None) of each split file line."""
    for split in SPLITS:
        path = require_file(raw_dir, split_file(split), NAME, _S3 + "funcom_tokenized.tar.gz")
        for line, text in iter_lines(path, report):
            fid, tab, tokens = text.partition("\t")
            if not tab or not fid.strip():
                report.skip("missing field 'fid' (no tab)", path, line)
                continue
            yield fid.strip(), split, tokenized_comment(tokens) if keep_tokens else None


def tokenized_comment(tokens: str) -> str:
    """A ``comments.{split}`` line's tokens without the sentence markers: ``<s> returns the sum . </s>``
    -> ``returns the sum .`` (single spaces; a line without markers stays as it is)."""
    words = tokens.split()
    if words and words[0] == "<s>":
        words = words[1:]
    if words and words[-1] == "</s>":
        words = words[:-1]
    return " ".join(words)


def _comment_rows(path: Path, report: SkipReport) -> Iterator[tuple[str, str]]:
    for fid, comment in _kvitems(path):
        if not isinstance(comment, str):
            report.skip("comment is not a string", path, None, f"id {fid}")
            continue
        yield fid.strip(), comment


def _query(comment: str, tokens: str | None, mode: str) -> str:
    if mode == "tokenized":
        return tokens or ""
    return " ".join(comment.split()) if mode == "comment" else javadoc_summary(comment)


def funcom_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """functions.json and comments.json, and every split file (they assign the splits), whatever
    ``options["splits"]`` selects."""
    selected_splits(options, SPLITS, NAME)
    processed = ("funcom_filtered.tar.gz",)
    return (
        Need(FUNCTIONS, sources=processed),
        Need(COMMENTS, sources=processed),
        *(Need(split_file(split), sources=("funcom_tokenized.tar.gz",)) for split in SPLITS),
    )


def read_funcom(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """Funcom records in ``functions.json`` order (splits interleaved), id ``funcom:<fid>``."""
    raw_dir = Path(raw_dir)
    wanted = set(selected_splits(options, SPLITS, NAME))
    mode = options.get("query", "summary")
    if mode not in QUERY_MODES:
        raise ReaderError(f"dataset {NAME!r}: options.query must be one of {', '.join(QUERY_MODES)}, not {mode!r}")
    functions = require_file(raw_dir, FUNCTIONS, NAME, _S3 + "funcom_filtered.tar.gz")
    comments = require_file(raw_dir, COMMENTS, NAME, _S3 + "funcom_filtered.tar.gz")
    for split in SPLITS:
        require_file(raw_dir, split_file(split), NAME, _S3 + "funcom_tokenized.tar.gz")

    with tempfile.TemporaryDirectory(prefix="csbench-funcom-", dir=options.get("tmp_dir")) as tmp:
        db = sqlite3.connect(Path(tmp) / "join.sqlite")
        try:
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute(f"PRAGMA cache_size = -{_SQLITE_CACHE_KIB}")
            db.execute("PRAGMA temp_store = FILE")
            # One row per fid: its split (from the split files) and tokenised comment (kept only for query
            # "tokenized"), its comment, and how often a function with this fid has been seen (to catch
            # duplicate keys without a set in memory).
            db.execute(
                "CREATE TABLE item "
                "(fid TEXT PRIMARY KEY, split TEXT, tokens TEXT, comment TEXT, used INTEGER DEFAULT 0)"
            )
            for batch in _batched(_split_rows(raw_dir, report, keep_tokens=mode == "tokenized")):
                db.executemany("INSERT OR IGNORE INTO item (fid, split, tokens) VALUES (?, ?, ?)", batch)
            for batch in _batched(_comment_rows(comments, report)):
                db.executemany(
                    "INSERT INTO item (fid, comment) VALUES (?, ?) "
                    "ON CONFLICT (fid) DO UPDATE SET comment = excluded.comment",
                    batch,
                )
            db.commit()
            cursor = db.cursor()
            lookup = "UPDATE item SET used = used + 1 WHERE fid = ? RETURNING split, used, comment, tokens"
            for fid, code in _kvitems(functions):
                fid = fid.strip()
                row = cursor.execute(lookup, (fid,)).fetchone()
                split, used, comment, tokens = row if row is not None else (None, 0, None, None)
                if split is None:
                    report.skip("not in any split file", functions, None, f"id {fid}")
                    continue
                if split not in wanted:
                    continue
                if used > 1:
                    report.skip("duplicate id", functions, None, f"id {fid}")
                    continue
                if not isinstance(code, str) or not code.strip():
                    report.skip("empty code", functions, None, f"id {fid}")
                    continue
                if comment is None:
                    report.skip("no comment for function", functions, None, f"id {fid}")
                    continue
                query = _query(comment, tokens, mode)
                if not query:
                    source = raw_dir / split_file(split) if mode == "tokenized" else comments
                    report.skip("empty query", source, None, f"id {fid}")
                    continue
                yield make_record(
                    id=f"{NAME}:{fid}",
                    language="java",
                    query=query,
                    code=code,
                    url=f"{NAME}://{fid}",
                    split=split,
                    docstring=comment,
                )
        finally:
            db.close()


SPEC = DatasetSpec(
    name=NAME,
    kind="release",
    languages=("java",),
    description=(
        "Funcom: ~2.1 M Java methods with Javadoc comments (English comments only, auto-generated files removed), "
        "official train/valid/test split by project; streamed, never loaded whole"
    ),
    licence="research use; methods under their projects' licences (Sourcerer repository)",
    citation=(
        "LeClair, McMillan. Recommendations for Datasets for Source Code Summarization. NAACL-HLT 2019, pp. 3931-3937."
    ),
    homepage="http://leclair.tech/data/funcom/",
    splits=SPLITS,
    files=(
        RemoteFile(
            path="funcom_filtered.tar.gz",
            urls=(_S3 + "funcom_filtered.tar.gz",),
            sha256=None,
            extract=True,
            unpacks_to=("funcom_processed/",),
            note=(
                "unpacks to funcom_processed/functions.json and funcom_processed/comments.json (JSON objects "
                "fid -> text). Not pinned: the archive is only on the authors' S3 bucket, in no repository a copy "
                "could be read from here. "
            ),
        ),
        RemoteFile(
            path="funcom_tokenized.tar.gz",
            urls=(_S3 + "funcom_tokenized.tar.gz",),
            sha256=None,
            extract=True,
            note=(
                "unpacks to funcom_tokenized/{train,valid,test}/{functions,comments}.{split} (fid<TAB>tokens); only "
                "the split membership is used. Not pinned: the archive is only on the authors' S3 bucket, in no "
                "repository a copy could be read from here (Google's PLUR records its SHA-1 as "
                "5b25d3dfcf156ef48e1d6ab5c61029a67a6cf2a1, not verified here). "
            ),
        ),
    ),
    reader=read_funcom,
    needs=funcom_needs,
    options=(
        splits_option(SPLITS),
        DatasetOption(
            "query",
            "choice",
            "`summary`: the Javadoc's first paragraph without markers and block tags; `comment`: the whole "
            "comment on one line; `tokenized`: the release's tokenised comment (`comments.<split>`, without "
            "`<s>` / `</s>`), the Funcom papers' summarization reference",
            default="summary",
            choices=QUERY_MODES,
        ),
        DatasetOption(
            "tmp_dir",
            "directory",
            "where the temporary SQLite join file goes (it needs about the size of `comments.json`; default: the "
            "system's temporary directory)",
        ),
    ),
)
