"""CodeSearchNet Challenge: 99 natural-language queries and expert relevance annotations (0-3).

Not query/code pairs, so no reader: :func:`load_queries` and :func:`load_annotations` read the two
files of the CodeSearchNet repository's ``resources/`` folder; results are matched to the
annotations by GitHub URL (SPEC "Datasets").
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from csbench.datasets.base import DatasetSpec, ReaderError, RemoteFile

NAME = "csn-challenge"
QUERIES_FILE = "queries.csv"
ANNOTATIONS_FILE = "annotationStore.csv"
ANNOTATION_COLUMNS = ("Language", "Query", "GitHubUrl", "Relevance", "Notes")
RELEVANCE_RANGE = (0, 3)
EXPECTED_QUERIES = 99  # CodeSearchNet paper, section 3
EXPECTED_ANNOTATIONS = 4006  # rows of annotationStore.csv ("about 4k" in the paper)
_RAW = "https://raw.githubusercontent.com/github/CodeSearchNet/master/resources/"
# The commit of github/CodeSearchNet the pinned files were read at (the newest of the snapshot).
_COMMIT = "106e827405c968597da938f6b373d30183918869"
_RAW_AT = f"https://raw.githubusercontent.com/github/CodeSearchNet/{_COMMIT}/resources/"


def _read_text(path: Path) -> str:
    """The whole file as UTF-8 (both files are small); bad bytes raise naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise ReaderError(
            f"{path}: missing file of dataset {NAME!r}; `csbench download --dataset {NAME}` fetches it, "
            f"or put it there by hand (from {_RAW}{path.name})"
        )
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ReaderError(f"{path}:{line}: not UTF-8 (byte {error.start})") from error


def load_queries(path: str | Path) -> list[str]:
    """The Challenge queries, in file order (header ``query``, one query per row).

    Raises :class:`ReaderError` naming file and line for a wrong header or an empty query."""
    path = Path(path)
    rows = csv.reader(io.StringIO(_read_text(path), newline=""))
    header = next(rows, None)
    if header is None or [cell.strip().lower() for cell in header] != ["query"]:
        raise ReaderError(f"{path}:1: expected the header 'query', found {header!r}")
    queries: list[str] = []
    for row in rows:
        if not row or not "".join(row).strip():
            continue  # blank line
        if len(row) != 1:
            raise ReaderError(f"{path}:{rows.line_num}: expected one column, found {len(row)}")
        queries.append(row[0].strip())
    if not queries:
        raise ReaderError(f"{path}: no queries")
    return queries


def load_annotations(path: str | Path) -> pd.DataFrame:
    """The expert annotations: columns Language, Query, GitHubUrl, Relevance (int 0-3), Notes.

    Raises :class:`ReaderError` naming file and line for a wrong header, a wrong number of columns,
    an empty query or URL, or a relevance that is not an integer from 0 to 3."""
    path = Path(path)
    rows = csv.reader(io.StringIO(_read_text(path), newline=""))
    header = next(rows, None)
    if header is None or tuple(cell.strip() for cell in header) != ANNOTATION_COLUMNS:
        raise ReaderError(f"{path}:1: expected the header {','.join(ANNOTATION_COLUMNS)}, found {header!r}")
    records: list[tuple[str, str, str, int, str]] = []
    low, high = RELEVANCE_RANGE
    for row in rows:
        line = rows.line_num
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(ANNOTATION_COLUMNS):
            raise ReaderError(f"{path}:{line}: expected {len(ANNOTATION_COLUMNS)} columns, found {len(row)}")
        language, query, url, relevance, notes = row
        if not query.strip():
            raise ReaderError(f"{path}:{line}: empty Query")
        if not url.strip():
            raise ReaderError(f"{path}:{line}: empty GitHubUrl")
        try:
            value = int(relevance.strip())
        except ValueError:
            raise ReaderError(f"{path}:{line}: Relevance {relevance!r} is not an integer") from None
        if not low <= value <= high:
            raise ReaderError(f"{path}:{line}: Relevance {value} is outside {low}-{high}")
        records.append((language.strip(), query, url.strip(), value, notes))
    frame = pd.DataFrame.from_records(records, columns=list(ANNOTATION_COLUMNS))
    return frame.astype({"Relevance": "int64"})


SPEC = DatasetSpec(
    name=NAME,
    kind="release",
    languages=("go", "java", "javascript", "php", "python", "ruby"),
    description=(
        "CodeSearchNet Challenge: 99 queries and 4,006 expert relevance annotations (0-3) of GitHub functions; "
        "read with load_queries / load_annotations, results matched by GitHub URL (NDCG evaluation)"
    ),
    licence="MIT (CodeSearchNet repository); annotated code under its repositories' licences",
    citation=(
        "Husain, Wu, Gazit, Allamanis, Brockschmidt. CodeSearchNet Challenge: Evaluating the State of "
        "Semantic Code Search. arXiv:1909.09436, 2019."
    ),
    homepage="https://github.com/github/CodeSearchNet",
    splits=("test",),
    files=(
        RemoteFile(
            path=QUERIES_FILE,
            urls=(_RAW_AT + QUERIES_FILE, _RAW + QUERIES_FILE),
            sha256="037509c717c2e164721f0fd3ea45cb05f36669551af643f53930a92b76b146cf",
            size=2493,
            note=(
                "resources/queries.csv of github/CodeSearchNet; sha256 of the blob at commit 106e827 and of the "
                "identical copy in shared/data"
            ),
        ),
        RemoteFile(
            path=ANNOTATIONS_FILE,
            urls=(_RAW_AT + ANNOTATIONS_FILE, _RAW + ANNOTATIONS_FILE),
            sha256="0340af32b551ceadb74fec147f97642b7fedf3ff039e38fb86baff49ee899846",
            size=677798,
            note=(
                "resources/annotationStore.csv of github/CodeSearchNet; sha256 of the blob at commit 106e827 and of "
                "the identical copy in shared/data"
            ),
        ),
    ),
    reader=None,
)
