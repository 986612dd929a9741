"""What a protocol's search leaves: a ranking protocol's per-query ranks and TREC lines
(:class:`ProtocolOutcome`, with its metrics), a matching protocol's decisions
(:class:`MatchingOutcome`), and the top-k order both share (ties against the model)."""

from __future__ import annotations

import os
import queue
import struct
import tempfile
import threading
import weakref
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import BinaryIO, NoReturn

import numpy as np

from csbench.evaluate.metrics import NDCG_CUTOFF, RECALL_CUTOFFS, ndcg_at, rank_metrics, reciprocal_ranks
from csbench.evaluate.protocols import PROTOCOLS, matching_metrics
from csbench.io import DiskFullError, is_disk_full


class _Held(Sequence):
    """What RunLines and QueryMeasures share: a sequence read item by item (``_item(k)`` for a
    non-negative index in range), equal to any sequence of the same items, unhashable like the list it
    stands for."""

    def _item(self, k: int):
        raise NotImplementedError

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._item(k) for k in range(*index.indices(len(self)))]
        k = index + len(self) if index < 0 else index
        if not 0 <= k < len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        return self._item(k)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


RUN_LINES_HELD = 1 << 20  # lines a RunLines holds (about 16 bytes each) before it compresses them to a file
TREC_CHUNK_LINES = 8192  # lines made into text and compressed at a time (under 1 MB of text)
# gzip's header as gzip.GzipFile(filename="", mtime=0) writes it at compresslevel 9: magic, deflate, no flags,
# mtime 0, "best compression", OS unknown (tests/evaluate/test_run_lines.py checks the bytes against GzipFile)
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


class _Gzip:
    """A gzip member's body and trailer for text given in pieces: the bytes ``gzip.GzipFile`` (level 9)
    writes for the same text, however it is cut (zlib's output does not depend on that)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
        self.crc, self.size = 0, 0

    def compress(self, data: bytes) -> bytes:
        self.crc, self.size = zlib.crc32(data, self.crc), self.size + len(data)
        return self._deflate.compress(data)

    def copy(self) -> _Gzip:
        twin = _Gzip.__new__(_Gzip)
        twin._deflate, twin.crc, twin.size = self._deflate.copy(), self.crc, self.size
        return twin

    def pending(self) -> bytes:
        """What the compressor holds, emitted so that a decompressor reads all it was given (on a copy:
        a sync flush changes the stream)."""
        return self.copy()._deflate.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        return self._deflate.flush() + struct.pack("<LL", self.crc, self.size & 0xFFFFFFFF)


def _text(lines: Iterable[str]) -> Iterator[bytes]:
    """``lines`` as UTF-8 text, a newline after each, TREC_CHUNK_LINES lines at a time."""
    remaining = iter(lines)
    while chunk := list(islice(remaining, TREC_CHUNK_LINES)):
        yield ("\n".join(chunk) + "\n").encode("utf-8")


def _write_gzip(handle: BinaryIO, stored: Iterable[bytes], stream: _Gzip, lines: Iterable[str]) -> None:
    """A gzip file: its header, ``stored`` (what ``stream`` already compressed), ``lines`` compressed
    through ``stream``, its trailer."""
    handle.write(GZIP_HEADER)
    handle.writelines(stored)
    for text in _text(lines):
        handle.write(stream.compress(text))
    handle.write(stream.finish())


def _raise_in_tmpdir(err: OSError, written: int | None = None) -> NoReturn:
    """Raise ``err``, met writing a run's temporary file; a full disk as DiskFullError naming TMPDIR."""
    if is_disk_full(err):
        raise DiskFullError(tempfile.gettempdir(), err, written=written) from err
    raise err


COMPRESS_QUEUE = 8  # text chunks (TREC_CHUNK_LINES lines each) waiting for a run's compressor thread


class _Compressor:
    """Compresses a run's text chunks into its temporary file on a thread of its own, in the order they
    are given: zlib releases the GIL, so the search goes on meanwhile (a graded run's compression was
    about 40 % of its evaluation, on the one thread that records the queries). At most COMPRESS_QUEUE
    chunks wait; :meth:`drain` waits for the rest and raises the thread's error, if any."""

    def __init__(self, file, stream: _Gzip) -> None:
        self.file, self.stream = file, stream
        self.written = 0  # compressed bytes in the file
        self.error: BaseException | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=COMPRESS_QUEUE)
        self._thread = threading.Thread(target=self._run, name="csbench-run-gzip", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            chunk = self._queue.get()
            try:
                if chunk is None:
                    return
                if self.error is None:
                    data = self.stream.compress(chunk)
                    self.file.write(data)
                    self.written += len(data)
            except BaseException as err:  # raised again in the caller's thread by put / drain
                self.error = err
            finally:
                self._queue.task_done()

    def put(self, chunk: bytes) -> None:
        self._raise()
        self._queue.put(chunk)

    def drain(self) -> None:
        """Wait until every chunk given is in the file (flushed); the thread then waits for more."""
        self._queue.join()
        self._raise()
        self.file.flush()

    def compressed(self) -> Iterator[bytes]:
        """The file's bytes, a MiB at a time, once every chunk given is in it (waited for now, so the
        thread is idle when this returns: ``stream`` can be copied)."""
        self.drain()
        return self._read(self.written)

    def _read(self, end: int) -> Iterator[bytes]:
        offset = 0
        while offset < end:
            data = os.pread(self.file.fileno(), min(1 << 20, end - offset), offset)
            offset += len(data)
            yield data

    def stop(self) -> None:
        """End the thread (the chunks given before are compressed first)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _raise(self) -> None:
        if isinstance(self.error, OSError):
            _raise_in_tmpdir(self.error, self.written)
        if self.error is not None:
            raise self.error


def _close(compressor: _Compressor) -> None:
    compressor.stop()
    compressor.file.close()


class RunLines(_Held):
    """A ranking protocol's TREC run, ``<query> Q0 <doc> <position> <score> <run name>`` per listed
    document, held compactly and made into lines as it is read or written.

    Per query its id and run name, per listed document a reference to its id (the pool's own strings)
    and its score in one float64 buffer: about 16 bytes a line where a line as a Python string took
    over 120 (a 107 k-query run at ``run_depth`` 100 is 10.7 M lines, and its text was joined and
    encoded whole to be written: tests/evaluate/test_run_lines.py). Scores are written ``%.6f`` (a
    single-answer protocol's run) or ``exact`` (``repr``: a graded protocol's, so that trec_eval
    reading the file scores what csbench scored).

    At most ``held`` lines (:data:`RUN_LINES_HELD`) are held so: past that, the held queries' lines are
    made into text and compressed, as the run file will hold them, into an unnamed temporary file
    (``TMPDIR``; gone with the process, even a killed one) by a thread of the run's own while the search
    goes on (:class:`_Compressor`), and :func:`write_trec` copies those bytes. So a run's memory is
    bounded whatever its queries and depth (a graded protocol lists 1,000 documents a query: 16 KB a
    query held). Reads as the list of lines it stands for (``==`` compares lines with any sequence of
    them); a line already compressed is read by decompressing the file from its start.

    ``kept=False``: a run nobody writes (``search(keep_runs=False)``: robust's points); ``add`` checks
    its arguments and keeps nothing, and the run reads as empty but refuses to be written."""

    def __init__(self, exact: bool = False, held: int | None = None, kept: bool = True) -> None:
        held = RUN_LINES_HELD if held is None else held
        if held < 1:
            raise ValueError(f"held must be at least 1 line, not {held}")
        self.exact, self.held, self.kept = exact, held, kept
        self._queries: list[str] = []
        self._names: list[str] = []
        self._starts = array("q", [0])  # held query q's documents: [_starts[q], _starts[q + 1])
        self._docs: list[str] = []
        self._scores = array("d")
        self._compressor: _Compressor | None = None  # compresses the stored lines into its file, once any are
        self._stored = 0  # lines given to the compressor

    def add(self, query_id: str, docs: Sequence[str], scores: Sequence[float] | np.ndarray, run_name: str) -> None:
        """Append one query's listed documents (best first) with their scores."""
        values = np.ascontiguousarray(scores, dtype=np.float64).ravel()
        if values.size != len(docs):
            raise ValueError(f"{len(docs)} documents and {values.size} scores for query {query_id!r}")
        if not self.kept:
            return
        self._queries.append(query_id)
        self._names.append(run_name)
        self._docs.extend(docs)
        self._scores.frombytes(values.tobytes())
        self._starts.append(len(self._docs))
        # once a run is long enough to be stored, its lines go to the compressor a chunk at a time, so that
        # it compresses while the search goes on rather than in bursts the search waits for
        if len(self._docs) >= (min(self.held, TREC_CHUNK_LINES) if self._compressor is not None else self.held):
            self._store()

    def _store(self) -> None:
        """Give the held lines, as text, to the compressor thread and hold none."""
        if self._compressor is None:
            try:
                file = tempfile.TemporaryFile(prefix="csbench-run-")  # noqa: SIM115 - closed by close / the finalizer
            except OSError as err:
                _raise_in_tmpdir(err)
            self._compressor = _Compressor(file, _Gzip())  # zlib's compressor holds about 270 KB
            weakref.finalize(self, _close, self._compressor)  # its thread and file end with the run
        for text in _text(self._held_lines()):
            self._compressor.put(text)
        self._stored += len(self._docs)
        self._queries, self._names, self._docs = [], [], []
        self._starts, self._scores = array("q", [0]), array("d")

    def _line(self, query: int, k: int) -> str:
        score = self._scores[k]
        shown = repr(score) if self.exact else f"{score:.6f}"
        position = k - self._starts[query] + 1
        return f"{self._queries[query]} Q0 {self._docs[k]} {position} {shown} {self._names[query]}"

    def _held_lines(self) -> Iterator[str]:
        for query in range(len(self._queries)):
            for k in range(self._starts[query], self._starts[query + 1]):
                yield self._line(query, k)

    def _stored_lines(self) -> Iterator[str]:
        """The lines in the temporary file, decompressed from its start."""
        compressor = self._compressor
        if compressor is None:
            return
        inflate, rest = zlib.decompressobj(-zlib.MAX_WBITS), b""
        for data in compressor.compressed():
            *lines, rest = (rest + inflate.decompress(data)).split(b"\n")
            yield from (line.decode("utf-8") for line in lines)
        *lines, rest = (rest + inflate.decompress(compressor.stream.pending())).split(b"\n")
        yield from (line.decode("utf-8") for line in lines)

    def gzip_into(self, handle: BinaryIO) -> None:
        """Write the run as :func:`write_trec` does (the stored part copied as it was compressed)."""
        if not self.kept:
            raise ValueError("this run was not kept (search(keep_runs=False)): there is nothing to write")
        if (compressor := self._compressor) is None:
            _write_gzip(handle, (), _Gzip(), self._held_lines())
        else:  # the stored part copied, the rest through a copy of its stream: the run can be written again, or grow
            stored = compressor.compressed()
            _write_gzip(handle, stored, compressor.stream.copy(), self._held_lines())

    def drain(self) -> None:
        """Wait until the compressor thread has written every stored line (it raises the thread's error)."""
        if self._compressor is not None:
            self._compressor.drain()

    def close(self) -> None:
        """End the compressor thread and remove the temporary file now (else they end with the object)."""
        if self._compressor is not None:
            _close(self._compressor)

    def __len__(self) -> int:
        return self._stored + len(self._docs)

    def _item(self, k: int) -> str:
        if k < self._stored:
            return next(islice(self._stored_lines(), k, None))
        k -= self._stored
        return self._line(bisect_right(self._starts, k) - 1, k)

    def __getitem__(self, index):
        if isinstance(index, slice) and self._stored:
            start, stop, step = index.indices(len(self))
            return list(islice(self, start, stop, step)) if step > 0 else list(self)[index]
        return super().__getitem__(index)

    def __iter__(self) -> Iterator[str]:
        yield from self._stored_lines()
        yield from self._held_lines()

    def __repr__(self) -> str:
        if not self.kept:
            return "RunLines(not kept)"
        queries = f"{len(self._queries)} held queries" if self._stored else f"{len(self._queries)} queries"
        return f"RunLines({queries}, {len(self)} lines{f', {self._stored} compressed' if self._stored else ''})"


class QueryMeasures(_Held):
    """Per query, a graded protocol's trec_eval measures (``{name: value}``), held as one float64
    buffer under one list of names (about 240 bytes a query for 30 measures, where a dict of them took
    about 1.6 KB). Reads as the list of dicts it stands for; ``column(name)``: one measure of every
    query as an array."""

    def __init__(self) -> None:
        self.names: tuple[str, ...] | None = None
        self._values = array("d")

    def append(self, measures: dict[str, float]) -> None:
        names = tuple(measures)
        if self.names is None:
            self.names = names
        elif names != self.names:
            raise ValueError(f"measures {list(names)} differ from the earlier queries' {list(self.names)}")
        self._values.extend(float(value) for value in measures.values())

    def __len__(self) -> int:
        return len(self._values) // len(self.names) if self.names else 0

    def column(self, name: str) -> np.ndarray:
        if not self.names:
            return np.empty(0)
        return np.frombuffer(self._values, dtype=np.float64)[self.names.index(name) :: len(self.names)].copy()

    def _item(self, k: int) -> dict[str, float]:
        names = self.names or ()  # (in range: at least one query, so its names)
        return dict(zip(names, self._values[k * len(names) : (k + 1) * len(names)], strict=True))


def write_trec(handle: BinaryIO, lines: Iterable[str]) -> None:
    """Write ``lines`` to ``handle`` as a gzip-compressed TREC run file (each line and a newline; no
    name and mtime 0 in the gzip header: identical content gives identical bytes), a chunk of lines
    at a time: a run's text is never held whole. The bytes of ``gzip.GzipFile`` compressing the whole
    text at once (tests/evaluate/test_run_lines.py). A :class:`RunLines` copies what it already
    compressed."""
    if isinstance(lines, RunLines):
        lines.gzip_into(handle)
    else:
        _write_gzip(handle, (), _Gzip(), lines)


@dataclass
class ProtocolOutcome:
    protocol: str
    plan_note: str
    query_ids: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    n_candidates: list[int] = field(default_factory=list)
    top1: list[str] = field(default_factory=list)  # id of each query's best candidate
    run_lines: RunLines = field(default_factory=RunLines)

    def metrics(self) -> dict:
        ranks = np.asarray(self.ranks, dtype=np.int64)
        cutoff = PROTOCOLS.get(self.protocol).mrr_cutoff
        metrics = rank_metrics(ranks, cutoff)
        absent = ranks > np.asarray(self.n_candidates, dtype=np.int64)
        if absent.any():
            # a query whose answer is in no candidate (a url-matched codebase lacking its url) has rank
            # candidates + 1: reciprocal rank 0 and no hit at any cut, as run.py counts it; that rank
            # enters the mean and median rank
            metrics["mrr"] = float(np.where(absent, 0.0, reciprocal_ranks(ranks, cutoff)).mean())
            metrics.update({f"r@{k}": float(((ranks <= k) & ~absent).mean()) for k in RECALL_CUTOFFS})
            metrics[f"ndcg@{NDCG_CUTOFF}"] = float(np.where(absent, 0.0, ndcg_at(ranks)).mean())
        return metrics


@dataclass
class GradedOutcome(ProtocolOutcome):
    """A graded protocol's outcome (``Graded``: qrels): per query, trec_eval's measures of its top list
    (``graded``, keys as :func:`csbench.evaluate.qrels.query_metrics` names them) besides its rank
    (its first relevant document's, ``depth + 1`` when none is in the list)."""

    graded: QueryMeasures = field(default_factory=QueryMeasures)
    run_lines: RunLines = field(default_factory=lambda: RunLines(exact=True))

    def metrics(self) -> dict:
        protocol = PROTOCOLS.get(self.protocol)
        names = [f"{measure}@{k}" for measure in GRADED_MEASURES for k in protocol.cutoffs]
        if not self.query_ids:
            return {"mrr": None, **{name: None for name in names}, "n_queries": 0}
        ranks = np.asarray(self.ranks, dtype=np.int64)
        metrics: dict = {"mrr": float(reciprocal_ranks(ranks, protocol.depth).mean())}
        metrics.update({name: float(np.mean(self.graded.column(name))) for name in names})
        metrics["n_queries"] = len(self.query_ids)
        return metrics


GRADED_MEASURES = ("ndcg", "map", "recall", "p", "mrr")  # csbench.evaluate.qrels' metric names, before "@k"


def tie_note(n_tied: int) -> str:
    """The outcome note of an argsort protocol whose ranks ``n_tied`` ties decided."""
    return (
        f"{n_tied} queries' correct code scored exactly as another candidate: placed in np.argsort's order "
        "(quicksort, reversed), as the reference script places it, not against the model"
    )


def _with_ties(note: str, n_tied: int) -> str:
    return "; ".join(part for part in (note, tie_note(n_tied) if n_tied else "") if part)


@dataclass
class MatchingOutcome:
    """A matching protocol's decisions, one per pair (the release's own pairs, or one positive and
    one drawn negative per test query: ``pairs``), and how they were decided (``rule``)."""

    protocol: str
    plan_note: str
    query_ids: list[str]
    code_ids: list[str]
    labels: np.ndarray
    scores: np.ndarray
    threshold: float | None  # None: a cross-encoder's head decided (or nothing was evaluated)
    valid_accuracy: float | None  # accuracy of a chosen threshold on the validation pairs it was chosen on
    decisions: np.ndarray  # True: match
    pairs: str = "drawn"  # "released": the release's own labelled pairs; "drawn": negatives drawn here
    rule: str = ""  # how a score became a decision (MatchRule.describe, or the cross-encoder's head)
    n_queries: int | None = None  # distinct queries among the pairs (None: n_pairs // 2)
    # a chat LLM's pairs whose answer was unparseable (True), one per pair; None: a model that always
    # decides (every other kind), whose metrics are as they were
    unparseable: np.ndarray | None = None

    def metrics(self) -> dict:
        n = int(self.labels.size)
        metrics = {
            **matching_metrics(self.labels, self._scored_decisions()),
            "threshold": self.threshold,
            "valid_accuracy": self.valid_accuracy,
            "n_pairs": n,
            "n_positive": int(np.asarray(self.labels).astype(bool).sum()),
            "n_queries": n // 2 if self.n_queries is None else self.n_queries,
        }
        if self.unparseable is not None:
            metrics |= self._unparseable_metrics()
        return metrics

    def _scored_decisions(self) -> np.ndarray:
        """The decisions the metrics score. A chat LLM's unparseable answer is a wrong decision in
        ``accuracy``, ``precision``, ``recall`` and ``f1`` (a positive pair's counts as "no match", a
        negative pair's as "match"): the model earns nothing for not answering. (The run's decision for
        it, in ``decisions`` and matching.tsv, stays "no match".)"""
        if self.unparseable is None:
            return self.decisions
        failed = self._failed()
        return np.where(failed, ~np.asarray(self.labels).astype(bool), np.asarray(self.decisions).astype(bool))

    def _failed(self) -> np.ndarray:
        failed = np.asarray(self.unparseable, dtype=bool)
        if failed.shape != np.asarray(self.labels).shape:
            raise ValueError(f"{failed.size} unparseable flags for {np.asarray(self.labels).size} pairs")
        return failed

    def _unparseable_metrics(self) -> dict:
        """``n_unparseable``, ``unparseable_share`` (None with no pair) and ``accuracy_parsed``: the
        accuracy over the parsed pairs alone (None when none parsed)."""
        failed = self._failed()
        parsed = ~failed
        right = np.asarray(self.labels).astype(bool) == np.asarray(self.decisions).astype(bool)
        return {
            "accuracy_parsed": float(right[parsed].mean()) if parsed.any() else None,
            "n_unparseable": int(failed.sum()),
            "unparseable_share": float(failed.mean()) if failed.size else None,
        }

    def record(self) -> dict:
        """What the run record (``metrics.json`` ``protocols``) states of this matching: which pairs
        (released or drawn) and which decision rule."""
        return {"pairs": self.pairs, "rule": self.rule}

    def lines(self) -> list[str]:
        """``query_id<TAB>code_id<TAB>label<TAB>score<TAB>decision`` per pair (matching.tsv)."""
        return [
            f"{q}\t{c}\t{int(label)}\t{score:.6f}\t{int(decision)}"
            for q, c, label, score, decision in zip(
                self.query_ids, self.code_ids, self.labels, self.scores, self.decisions, strict=True
            )
        ]


def top_k(scores: np.ndarray, correct: int, k: int) -> np.ndarray:
    """Indices of the k best candidates; among equal scores the correct answer comes last, so its
    position in the list equals its protocol rank (ties against the model)."""
    scores = np.where(np.isnan(scores), -np.inf, scores)
    is_correct = np.zeros(scores.size, dtype=np.int8)
    is_correct[correct] = 1
    k = min(k, scores.size)
    if k < scores.size:  # partial sort first, then order the (tie-extended) head exactly
        threshold = np.partition(-scores, k - 1)[k - 1]
        head = np.flatnonzero(-scores <= threshold)
    else:
        head = np.arange(scores.size)
    order = np.lexsort((head, is_correct[head], -scores[head]))
    return head[order][:k]
