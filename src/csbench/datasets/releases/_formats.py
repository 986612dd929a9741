"""Streaming parsers for the file formats of the released benchmarks.

Everything here streams: lines are read one at a time, JSON arrays and objects are decoded one
element at a time (with their 1-based line numbers, so skips can name ``file:line``). A bad
record becomes a counted skip in the :class:`SkipReport`; a file that cannot be used at all (missing,
not the expected structure) raises :class:`ReaderError` naming the file and line.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from csbench.datasets.base import POOL_SPLIT, RECORD_COLUMNS, ReaderError, Record, SkipReport

# GeCS (GenCodeSearchNet) puts text and code in one "input" field. Its released test files use
# " [CODESPLIT] " (paper section 3.1); the sample files of its repository use " [SEP] ".
GECS_SEPARATORS = ("[CODESPLIT]", "[SEP]")
_CHUNK = 1 << 20  # bytes read at a time by the JSON streamers
_MAX_ELEMENT = 64 << 20  # a JSON element bigger than this is treated as a broken file, not buffered further
_LONE_SURROGATE = re.compile("[\udc80-\udcff]")  # what undecodable bytes become under "surrogateescape"


# --------------------------------------------------------------------------- files


def require_file(raw_dir: Path, relative: str, dataset: str, source: str = "") -> Path:
    """``raw_dir / relative`` if it is a file, else a :class:`ReaderError` saying how to get it."""
    path = Path(raw_dir) / relative
    if path.is_file():
        return path
    where = f" (official source: {source})" if source else ""
    raise ReaderError(
        f"{path}: missing file of dataset {dataset!r}; `csbench download --dataset {dataset}` fetches it, "
        f"or put it there by hand{where}"
    )


def selected_splits(options: dict[str, Any], available: Iterable[str], dataset: str) -> tuple[str, ...]:
    """The splits to read: ``options["splits"]`` (a subset of ``available``) or all of them."""
    available = tuple(available)
    wanted = options.get("splits")
    if wanted is None:
        return available
    if isinstance(wanted, str):
        wanted = [wanted]
    unknown = [s for s in wanted if s not in available]
    if unknown:
        raise ReaderError(f"dataset {dataset!r} has no split(s) {unknown}; it has {list(available)}")
    return tuple(s for s in available if s in wanted)


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def iter_lines(path: Path, report: SkipReport) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without the line break) of every non-blank line.

    Lines that are not valid UTF-8 are skipped as "non-UTF-8 bytes". ``.gz`` files are
    decompressed on the fly."""
    try:
        handle = _open_binary(path)
    except OSError as error:
        raise ReaderError(f"{path}: cannot open ({error})") from error
    with handle:
        try:
            for number, raw in enumerate(handle, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    report.skip("non-UTF-8 bytes", path, number, f"byte {error.start}")
                    continue
                text = text.rstrip("\r\n")
                if text.strip():
                    yield number, text
        except (OSError, EOFError, zlib.error) as error:  # truncated or corrupt .gz
            raise ReaderError(f"{path}: cannot be read to the end ({error})") from error


def iter_jsonl(path: Path, report: SkipReport) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of every line of a JSON-lines file; bad lines become skips."""
    for number, text in iter_lines(path, report):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            report.skip("bad JSON", path, number, error.msg)
            continue
        if not isinstance(value, dict):
            report.skip("not a JSON object", path, number, type(value).__name__)
            continue
        yield number, value


class _JsonStream:
    """Decodes one JSON element at a time from a (possibly huge) file, tracking line numbers.

    The file is decoded as UTF-8 with ``surrogateescape``, so undecodable bytes do not stop the
    stream: an element containing them is reported by :meth:`element` (``bad_bytes``)."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self.json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.line = 1  # line number at self.pos
        self.eof = False

    def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(_CHUNK)
        if not chunk:
            self.eof = True
            self.buf = self.buf[self.pos :] + self.decoder.decode(b"", final=True)
        else:
            self.buf = self.buf[self.pos :] + self.decoder.decode(chunk)
        self.pos = 0
        return True

    def _advance(self, new_pos: int) -> None:
        self.line += self.buf.count("\n", self.pos, new_pos)
        self.pos = new_pos

    def error(self, message: str, line: int | None = None) -> ReaderError:
        return ReaderError(f"{self.path}:{line or self.line}: {message}")

    def skip_ws(self) -> str:
        """The next non-white-space character (consumed only up to it), or "" at the end."""
        while True:
            end = len(self.buf)
            i = self.pos
            while i < end and self.buf[i] in " \t\r\n":
                i += 1
            self._advance(i)
            if i < end:
                return self.buf[i]
            if not self._fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        char = self.skip_ws()
        if not char or char not in chars:
            found = repr(char) if char else "end of file"
            raise self.error(f"expected {what}, found {found}")
        self._advance(self.pos + 1)
        return char

    def element(self) -> tuple[int, Any, bool]:
        """(line where it starts, value, whether it contained undecodable bytes)."""
        self.skip_ws()
        start_line = self.line
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as error:
                if not self.eof and len(self.buf) - self.pos < _MAX_ELEMENT and self._fill():
                    continue  # probably cut by the chunk boundary: read more
                raise self.error(f"invalid JSON ({error.msg})", start_line + error.lineno - 1) from error
            if end == len(self.buf) and not self.eof and isinstance(value, (int, float)):
                self._fill()  # a number may continue in the next chunk
                continue
            bad = _LONE_SURROGATE.search(self.buf, self.pos, end) is not None
            self._advance(end)
            return start_line, value, bad


def _open_json_stream(path: Path) -> tuple[_JsonStream, IO[bytes]]:
    try:
        handle = _open_binary(path)
    except OSError as error:
        raise ReaderError(f"{path}: cannot open ({error})") from error
    return _JsonStream(path, handle), handle


# opening bracket -> (closing bracket, what the container is, what its parts are called)
_CONTAINERS = {"[": ("]", "array", "element"), "{": ("}", "object", "member")}


def _json_members(path: Path, opener: str) -> Iterator[_JsonStream]:
    """The stream of a file holding one JSON container (``opener`` ``[`` or ``{``), yielded once
    before each of its members for the caller to read; the separators between members and the end
    of the file (nothing after the container) are checked here."""
    closer, kind, part = _CONTAINERS[opener]
    stream, handle = _open_json_stream(path)
    with handle:
        stream.expect(opener, f"a JSON {kind} '{opener}'")
        if stream.skip_ws() == closer:
            stream._advance(stream.pos + 1)
        else:
            while True:
                yield stream
                if stream.expect("," + closer, f"',' or '{closer}' after an {kind} {part}") == closer:
                    break
        if stream.skip_ws():
            raise stream.error(f"unexpected data after the JSON {kind}")


def iter_json_array(path: Path, report: SkipReport) -> Iterator[tuple[int, Any]]:
    """(line number, element) of every element of a file holding one JSON array.

    Elements with undecodable bytes are skipped as "non-UTF-8 bytes"; a syntax error ends the
    file (its structure cannot be trusted past it) with a :class:`ReaderError` naming the line."""
    for stream in _json_members(path, "["):
        line, value, bad = stream.element()
        if bad:
            report.skip("non-UTF-8 bytes", path, line)
        else:
            yield line, value


def iter_json_object(path: Path, report: SkipReport) -> Iterator[tuple[int, str, Any]]:
    """(line number, key, value) of every member of a file holding one JSON object."""
    for stream in _json_members(path, "{"):
        if stream.skip_ws() != '"':
            raise stream.error("expected a string key")
        line, key, bad_key = stream.element()
        stream.expect(":", "':' after an object key")
        _, value, bad_value = stream.element()
        if bad_key or bad_value:
            report.skip("non-UTF-8 bytes", path, line)
        else:
            yield line, key, value


# --------------------------------------------------------------------------- records


def make_record(**fields: Any) -> Record:
    """A record with exactly :data:`RECORD_COLUMNS`; missing or None columns become ""."""
    record: Record = dict.fromkeys(RECORD_COLUMNS, "")
    for column, value in fields.items():
        if column not in record:
            raise TypeError(f"not a record column: {column!r}")
        if value is not None:
            record[column] = value if isinstance(value, str) else str(value)
    return record


def text_field(item: dict[str, Any], key: str) -> str | None:
    """``item[key]`` as text: strings as they are, token lists joined by single spaces."""
    value = item.get(key)
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(token, str) for token in value):
        return " ".join(value)
    return None


class RecordChecker:
    """Applies the checks every reader shares: required fields, non-empty query and code
    (the query may be empty in the retrieval pool), unique ids per split."""

    def __init__(self, report: SkipReport) -> None:
        self.report = report
        self.seen: dict[str, set[str]] = {}

    def ok(self, record: Record, path: Path, line: int | None) -> bool:
        """True if the record may be yielded; otherwise the reason is counted in the report."""
        if not record["code"].strip():
            self.report.skip("empty code", path, line)
            return False
        if record["split"] != POOL_SPLIT and not record["query"].strip():
            self.report.skip("empty query", path, line)
            return False
        ids = self.seen.setdefault(record["split"], set())
        if record["id"] in ids:
            self.report.skip("duplicate id", path, line, record["id"])
            return False
        ids.add(record["id"])
        return True


def missing(item: dict[str, Any], keys: Iterable[str]) -> str | None:
    """The first of ``keys`` that ``item`` lacks (or holds null), else None."""
    for key in keys:
        if item.get(key) is None:
            return key
    return None


# --------------------------------------------------------------------------- GeCS and labelled pairs


def split_gecs_input(text: str) -> tuple[str, str] | None:
    """(text, code) of a GeCS ``input`` field, or None without a separator.

    The separator is ``[CODESPLIT]`` (the released test files) or ``[SEP]`` (the repository's sample
    files), with the single spaces GeCS puts around it removed; the first occurrence splits."""
    for separator in GECS_SEPARATORS:
        index = text.find(separator)
        if index < 0:
            continue
        query, code = text[:index], text[index + len(separator) :]
        if query.endswith(" "):
            query = query[:-1]
        if code.startswith(" "):
            code = code[1:]
        return query, code
    return None


def iter_gecs(path: Path, report: SkipReport) -> Iterator[tuple[int, str, str, int]]:
    """(line, text, code, target) of a GeCS jsonl file; malformed lines become skips. The code is
    returned as released: on one line in the ``[CODESPLIT]`` release files (CodeSearchNet's tokens
    joined by spaces; StatCodeSearch's lines joined by spaces), with its line breaks in the ``[SEP]``
    sample files (see ``csbench.datasets.releases.statcodesearch``). No GeCS file has the lines the
    release files lost; the dataset card counts the flattened snippets."""
    for line, item in iter_jsonl(path, report):
        absent = missing(item, ("input", "target"))
        if absent:
            report.skip(f"missing field {absent!r}", path, line)
            continue
        if not isinstance(item["input"], str):
            report.skip("'input' is not a string", path, line)
            continue
        parts = split_gecs_input(item["input"])
        if parts is None:
            report.skip("no [CODESPLIT] / [SEP] separator", path, line)
            continue
        target = item["target"]
        if isinstance(target, bool) or target not in (0, 1):
            report.skip("target is not 0 or 1", path, line, repr(target))
            continue
        yield line, parts[0], parts[1], int(target)


def _labelled_json_items(path: Path, report: SkipReport) -> Iterator[tuple[str, str, int, int]]:
    for line, item in iter_json_array(path, report):
        if not isinstance(item, dict):
            report.skip("not a JSON object", path, line)
            continue
        if "doc" in item or "label" in item:  # CoSQA / WebQueryTest pairs
            absent = missing(item, ("doc", "code", "label"))
            if absent:
                report.skip(f"missing field {absent!r}", path, line)
                continue
            label = item["label"]
            if isinstance(label, bool) or label not in (0, 1):
                report.skip("label is not 0 or 1", path, line, repr(label))
                continue
            yield str(item["doc"]), str(item["code"]), int(label), line
        else:  # StatCodeSearch: every released pair matches ("Label" is a topic, not a match label)
            absent = missing(item, ("Comment", "Code"))
            if absent:
                report.skip(f"missing field {absent!r}", path, line)
                continue
            yield str(item["Comment"]), str(item["Code"]), 1, line


def read_labelled_pairs(path: str | Path, report: SkipReport | None = None) -> Iterator[tuple[str, str, int, int]]:
    """(query, code, label, line) of every pair of a labelled pair file, for the matching protocol.

    Formats: GeCS jsonl (``.jsonl``: ``input`` with ``[CODESPLIT]`` / ``[SEP]``, ``target`` 0/1);
    CoSQA json arrays (``doc``, ``code``, ``label`` 0/1); StatCodeSearch json arrays (``Comment``,
    ``Code``: all pairs are matches, label 1; its ``Label`` field is a topic such as
    "Visualization"). Query and code are returned as released. Without a ``report``, the first
    malformed record raises :class:`ReaderError` naming file and line; with one, it is skipped."""
    path = Path(path)
    strict = report is None
    sink = _RaisingReport() if strict else report
    if not path.is_file():
        raise ReaderError(f"{path}: missing file")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        for line, query, code, target in iter_gecs(path, sink):
            yield query, code, target, line
    else:
        yield from _labelled_json_items(path, sink)


class _RaisingReport(SkipReport):
    """A report that turns the first skip into a :class:`ReaderError`."""

    def skip(self, reason: str, file: str | Path, line: int | None = None, detail: str = "") -> None:
        where = f"{file}:{line}" if line is not None else str(file)
        raise ReaderError(f"{where}: {reason}" + (f" ({detail})" if detail else ""))


# --------------------------------------------------------------------------- documentation text


# Comment markers: the opening "/**", the closing "*/", and the "*" that starts each inner line.
_JAVADOC_MARKERS = re.compile(r"\A\s*/\*+|\*+/\s*\Z|^[ \t]*\*+(?!/)[ \t]?", re.MULTILINE)
# The description ends at a blank line or at the first block tag (@param, @return, ...).
_JAVADOC_END = re.compile(r"\n[ \t]*(?:\n|@)")


def javadoc_summary(comment: str) -> str:
    """The first paragraph of a Javadoc comment, without comment markers or block tags, on one line.

    >>> javadoc_summary("/**\\n * Returns the sum.\\n * More text.\\n *\\n * @param a x\\n */")
    'Returns the sum. More text.'
    """
    text = "\n" + _JAVADOC_MARKERS.sub("", comment).strip()
    return " ".join(_JAVADOC_END.split(text, 1)[0].split())


__all__ = [
    "GECS_SEPARATORS",
    "RecordChecker",
    "iter_gecs",
    "iter_json_array",
    "iter_json_object",
    "iter_jsonl",
    "iter_lines",
    "javadoc_summary",
    "make_record",
    "missing",
    "read_labelled_pairs",
    "require_file",
    "selected_splits",
    "split_gecs_input",
    "text_field",
]
