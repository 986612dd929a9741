"""CodeSearchNet Challenge submissions: rank the 99 queries over a corpus per language and write the
predictions file as CodeSearchNet's ``src/predict.py`` writes it (github/CodeSearchNet at commit
106e827405c968597da938f6b373d30183918869, blob 08690f46306fa8b7d08f3d77af2471d32ae573d5).

What is the same as ``predict.py``:

* languages in its order (:data:`CSN_LANGUAGES`: python, go, javascript, java, php, ruby), queries in
  the order of ``queries.csv``, for each (language, query) its top :data:`TOP_K` (100) results, best
  first, one row each;
* the file: ``pd.DataFrame(predictions, columns=['query', 'language', 'identifier', 'url'])`` written
  with ``to_csv(index=False)`` (header ``query,language,identifier,url``, pandas' minimal quoting,
  ``\\n`` line ends), ``identifier`` and ``url`` taken from the corpus record;
* the corpus per language: the released ``{language}_dedupe_definitions_v2.pkl`` (every function of the
  language's repositories, deduplicated), ``identifier`` / ``url`` / ``function`` of each definition.

Deliberate differences: any registered zero-shot model scores (``predict.py`` restores its own
neural baselines and ranks by cosine distance); the top 100 are the exact best 100 by score, ties
in corpus order (``predict.py`` asks Annoy's approximate index, 200 trees, for 100 neighbours); a
released pickle is opened only after its SHA-256 matches a pinned value and is then decoded by a
data-only reader (:func:`decode_data_pickle`: lists, dicts, strings and numbers; no import, no call),
never by ``pickle.load``; where no pickle is present a corpus built from local sources stands in
(``csbench.datasets.local``), whose URLs are not the GitHub URLs the annotations grade, so its NDCG is
close to zero: that run checks the file and the scorer, not the model.
"""

from __future__ import annotations

import csv
import io
import logging
import pickletools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from csbench.io import atomic_open, sha256_file

log = logging.getLogger(__name__)

CSN_LANGUAGES = ("python", "go", "javascript", "java", "php", "ruby")  # predict.py's loop order
TOP_K = 100  # query_model(..., topk=100)
SUBMISSION_COLUMNS = ("query", "language", "identifier", "url")
# The local corpus of each language where no released definitions are present (DATASETS registry).
LOCAL_CORPORA = {
    "python": "python-stdlib",
    "go": "go-stdlib",
    "javascript": "javascript-node",
    "java": "java-jdk",
    "php": "php-libs",
    "ruby": "ruby-stdlib",
}
RELEASE = "release"  # the corpus source name of the released definitions
DEFINITIONS_FILE = "{language}_dedupe_definitions_v2.pkl"
# The pinned SHA-256 of each released definitions file (inside the csn-{language} zip). None: no copy
# could be read to pin it (the zips are not pinned either: csbench.datasets.releases.codesearchnet);
# a user who verified a copy pins it with `csbench challenge-predict --pin LANGUAGE=SHA256`.
DEFINITIONS_SHA256: dict[str, str | None] = dict.fromkeys(CSN_LANGUAGES)
DEFINITION_KEYS = ("identifier", "url", "function")  # what is read of each definition


class DefinitionsError(ValueError):
    """A released definitions file that is unpinned, does not match its pin, or is not plain data."""


# ---------------------------------------------------------------------------------------------
# the released definitions: verified, then decoded without unpickling

# Opcodes that build plain data only. Everything else (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
# NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT*, buffers) imports or calls something and is refused.
_PUSH_ARG = frozenset(
    {
        "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
        "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
        "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    }
)  # fmt: skip
_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}


def _pop_mark(stack: list[Any], marks: list[int]) -> list[Any]:
    """The items above the last mark, removed from the stack with it."""
    start = marks.pop()
    items = stack[start:]
    del stack[start:]
    return items


def decode_data_pickle(data: bytes, what: str = "data") -> Any:
    """The value of a pickle that holds plain data only: lists, dicts, tuples, sets, strings, bytes,
    numbers, booleans and None (what ``pickle.dump`` writes for such a value, protocols 0-5).

    The opcodes are read with ``pickletools.genops`` (which parses, never executes) and interpreted
    here; an opcode that would import a name or call anything raises :class:`DefinitionsError`
    naming it and its byte offset, so no code in the file can run."""
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    try:
        for opcode, arg, pos in pickletools.genops(data):
            name = opcode.name
            if name in _PUSH_ARG:
                stack.append(arg)
            elif name in _CONSTANTS:
                stack.append(_CONSTANTS[name])
            elif name in ("PROTO", "FRAME"):
                continue
            elif name == "STOP":
                if len(stack) != 1 or marks:
                    raise DefinitionsError(f"{what}: malformed (stack of {len(stack)} at STOP, byte {pos})")
                return stack[0]
            elif name == "MARK":
                marks.append(len(stack))
            elif name == "POP":
                stack.pop()
            elif name == "POP_MARK":
                _pop_mark(stack, marks)
            elif name == "DUP":
                stack.append(stack[-1])
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "EMPTY_SET":
                stack.append(set())
            elif name == "LIST":
                stack.append(_pop_mark(stack, marks))
            elif name == "TUPLE":
                stack.append(tuple(_pop_mark(stack, marks)))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                items = tuple(stack[-n:])
                del stack[-n:]
                stack.append(items)
            elif name == "DICT":
                items = _pop_mark(stack, marks)
                stack.append(dict(zip(items[::2], items[1::2], strict=True)))
            elif name == "FROZENSET":
                stack.append(frozenset(_pop_mark(stack, marks)))
            elif name == "APPEND":
                value = stack.pop()
                stack[-1].append(value)
            elif name == "APPENDS":
                items = _pop_mark(stack, marks)
                stack[-1].extend(items)
            elif name == "SETITEM":
                value, key = stack.pop(), stack.pop()
                stack[-1][key] = value
            elif name == "SETITEMS":
                items = _pop_mark(stack, marks)
                stack[-1].update(zip(items[::2], items[1::2], strict=True))
            elif name == "ADDITEMS":
                items = _pop_mark(stack, marks)
                stack[-1].update(items)
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo[int(arg)])
            else:
                raise DefinitionsError(
                    f"{what}: opcode {name} at byte {pos} would import or call code; only plain data "
                    "(lists, dicts, strings, numbers) is read"
                )
    except DefinitionsError:
        raise
    except (ValueError, IndexError, KeyError, TypeError, AttributeError) as err:
        raise DefinitionsError(f"{what}: not a plain-data pickle ({type(err).__name__}: {err})") from err
    raise DefinitionsError(f"{what}: no STOP opcode (truncated)")


def read_definitions(path: str | Path, sha256: str | None, language: str) -> pd.DataFrame:
    """The released definitions of ``language`` as a corpus frame (columns ``code``, ``func_name``,
    ``identifier``, ``url``, ``language``, in file order), after checking the file's SHA-256 against
    ``sha256``: an unpinned file (None) or a mismatch raises :class:`DefinitionsError` before one
    byte is decoded."""
    path = Path(path)
    if sha256 is None:
        raise DefinitionsError(
            f"{path}: no pinned SHA-256 for the {language} definitions, so it is not opened; pin the copy you "
            f"verified with --pin {language}=<sha256>, or leave it out (the local corpus "
            f"{LOCAL_CORPORA[language]!r} stands in)"
        )
    found = sha256_file(path)
    if found != sha256.lower():
        raise DefinitionsError(f"{path}: SHA-256 {found}, pinned {sha256.lower()}: not opened")
    value = decode_data_pickle(path.read_bytes(), str(path))
    if not isinstance(value, list | tuple):
        raise DefinitionsError(f"{path}: expected a list of definitions, found {type(value).__name__}")
    rows = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DefinitionsError(f"{path}: definition {i} is a {type(item).__name__}, not a dict")
        missing = [k for k in DEFINITION_KEYS if not isinstance(item.get(k), str)]
        if missing:
            raise DefinitionsError(f"{path}: definition {i} lacks the text field(s) {', '.join(missing)}")
        rows.append((item["function"], item["identifier"], item["identifier"], item["url"], language))
    return pd.DataFrame(rows, columns=["code", "func_name", "identifier", "url", "language"])


# ---------------------------------------------------------------------------------------------
# ranking and the file


def local_corpus_frame(splits: Iterable[pd.DataFrame], language: str) -> pd.DataFrame:
    """A prepared local corpus (its split frames, in order) as a Challenge corpus: every record, a
    URL once (the first record keeps it)."""
    frame = pd.concat(list(splits), ignore_index=True)
    if frame.empty:
        raise ValueError(f"the {language} corpus has no records")
    frame = frame.drop_duplicates("url", keep="first").reset_index(drop=True)
    return pd.DataFrame(
        {
            "code": frame["code"],
            "func_name": frame["func_name"],
            "identifier": frame["func_name"],
            "url": frame["url"],
            "language": language,
        }
    )


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best candidates, best first; equal scores in corpus order; NaN last."""
    scores = np.where(np.isnan(scores), -np.inf, np.asarray(scores, dtype=np.float64))
    return np.argsort(-scores, kind="stable")[:k]


def rank_language(retriever: Any, corpus: pd.DataFrame, queries: Sequence[str], k: int) -> list[np.ndarray]:
    """Per query, the indices into ``corpus`` of its top ``k`` by the retriever's scores (the
    retriever indexes ``corpus`` first, replacing what it indexed before)."""
    retriever.index(corpus)
    ranked = []
    for query in queries:
        scores = np.asarray(retriever.scores(query))
        if scores.shape != (len(corpus),):
            raise ValueError(f"the model scored {scores.shape} candidates for {query!r}, expected {len(corpus)}")
        ranked.append(top_indices(scores, k))
    return ranked


def predict(
    queries: Sequence[str], corpora: Mapping[str, pd.DataFrame], retriever: Any, k: int = TOP_K
) -> pd.DataFrame:
    """The predictions frame of ``predict.py``: for each language of ``corpora`` (in
    :data:`CSN_LANGUAGES` order) and each query (in order), its top ``k`` rows
    ``(query, language, identifier, url)``. ``retriever`` (``index`` / ``scores``) indexes each
    language's corpus in turn; a dense one encodes the queries once for all languages."""
    if k < 1:
        raise ValueError(f"k must be at least 1, found {k}")
    unknown = sorted(set(corpora) - set(CSN_LANGUAGES))
    if unknown:
        raise ValueError(f"not a CodeSearchNet language: {unknown} (languages: {', '.join(CSN_LANGUAGES)})")
    if hasattr(retriever, "prepare_queries"):
        retriever.prepare_queries(list(queries))
    predictions: list[tuple[str, str, str, str]] = []
    for language in (lang for lang in CSN_LANGUAGES if lang in corpora):
        corpus = corpora[language]
        identifiers, urls = corpus["identifier"].tolist(), corpus["url"].tolist()
        for query, order in zip(queries, rank_language(retriever, corpus, queries, k), strict=True):
            predictions.extend((query, language, identifiers[i], urls[i]) for i in order)
    return pd.DataFrame(predictions, columns=list(SUBMISSION_COLUMNS))


def write_submission(frame: pd.DataFrame, path: str | Path) -> None:
    """The predictions file, as ``df.to_csv(predictions_csv, index=False)`` writes it (``\\n`` line
    ends whatever the platform), atomically."""
    if list(frame.columns) != list(SUBMISSION_COLUMNS):
        raise ValueError(f"expected the columns {SUBMISSION_COLUMNS}, found {list(frame.columns)}")
    with atomic_open(path, "w") as handle:
        frame.to_csv(handle, index=False, lineterminator="\n")


@dataclass(frozen=True)
class SubmissionCheck:
    """What :func:`check_submission` found: data rows per language, and the file's line count."""

    rows: dict[str, int]
    lines: int


def check_submission(
    path: str | Path, queries: Sequence[str], corpus_sizes: Mapping[str, int], k: int = TOP_K
) -> SubmissionCheck:
    """Check a predictions file against the format ``predict.py`` writes: the header
    ``query,language,identifier,url``; the languages of ``corpus_sizes`` in :data:`CSN_LANGUAGES`
    order; in each, every query in order with min(k, corpus size) rows; no URL twice in one list;
    no empty cell. Raises ValueError naming the file and line of the first difference."""
    path = Path(path)
    text = path.read_bytes().decode("utf-8")  # not read_text: it would turn \r\n into \n
    if "\r" in text:
        raise ValueError(f"{path}: carriage returns in the file (predict.py writes \\n line ends)")
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if header != list(SUBMISSION_COLUMNS):
        raise ValueError(f"{path}:1: header {header!r}, expected {','.join(SUBMISSION_COLUMNS)}")
    expected = [
        (language, query, min(k, corpus_sizes[language]))
        for language in CSN_LANGUAGES
        if language in corpus_sizes
        for query in queries
    ]
    counts: dict[str, int] = {}
    block = iter(expected)
    current, left, seen = None, 0, set()
    line = 1
    for row in rows:
        line = rows.line_num
        if len(row) != len(SUBMISSION_COLUMNS) or not all(cell for cell in row):
            raise ValueError(f"{path}:{line}: expected 4 non-empty cells, found {row!r}")
        query, language, _, url = row
        while left == 0:
            current = next(block, None)
            if current is None:
                raise ValueError(f"{path}:{line}: a row beyond the expected {sum(n for *_, n in expected)}")
            left, seen = current[2], set()
        if (language, query) != current[:2]:
            raise ValueError(f"{path}:{line}: ({language!r}, {query!r}) where ({current[0]!r}, {current[1]!r}) is due")
        if url in seen:
            raise ValueError(f"{path}:{line}: URL {url} twice in the list of ({language!r}, {query!r})")
        seen.add(url)
        left -= 1
        counts[language] = counts.get(language, 0) + 1
    if left or next(block, None) is not None:
        raise ValueError(f"{path}: ends at line {line} before every (language, query) has its rows")
    return SubmissionCheck(counts, line)
