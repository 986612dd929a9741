"""A memory-mapped store of (code, summary) pairs: training on a split without holding it in memory.

Funcom's train split has about 2 M pairs (~1.5 GB of text): as Python strings that is several GB.
:class:`PairStore` instead copies a prepared split (a parquet file with at least the columns ``id``,
``code`` and ``query``; the reference summary is ``query``) once, row batch by row batch
(:meth:`pyarrow.parquet.ParquetFile.iter_batches`), into an uncompressed Arrow IPC file, and then
memory-maps that file (:func:`pyarrow.memory_map` + :func:`pyarrow.ipc.open_file`). Reading a pair
decodes only that pair; the operating system pages the file in and out as it likes, so what the
process holds does not grow with the split (its file-backed pages are clean and reclaimable).

The IPC file is written beside the cache path given, atomically (:func:`csbench.io.atomic_path`), and
a small JSON record beside it (``<cache>.source.json``) names the parquet it came from: its size,
mtime and SHA-256. Opening the store again reuses the file when size and mtime are unchanged; when
either changed, the parquet is hashed: the same SHA-256 (a copy, a ``touch``) reuses the file and
refreshes the record, another one rebuilds it. A store whose record is absent, unreadable, of another
format version or names another IPC size (a writer killed between the two files) is rebuilt too.

A :class:`PairStore` is a map-style ``torch.utils.data.Dataset`` (``len`` and ``store[i] -> (code,
summary)``) that pickles as its paths, so ``DataLoader`` workers reopen the mapping themselves.
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from csbench.io import atomic_path, sha256_file, write_json

FORMAT_VERSION = 1
SOURCE_COLUMNS = ("id", "code", "query")  # what the parquet must hold; ``query`` is the reference summary
STORE_COLUMNS = ("id", "code", "summary")
STORE_SCHEMA = pa.schema([(name, pa.large_string()) for name in STORE_COLUMNS])
DEFAULT_BATCH_ROWS = 4096


class PairStoreError(ValueError):
    """A parquet split that cannot become a pair store (missing column, null value); names the file."""


@dataclass(frozen=True)
class SourceStamp:
    """What identifies the parquet a store was built from."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, parquet: Path, sha256: str | None = None) -> SourceStamp:
        """The stamp of ``parquet`` now (hashing it unless ``sha256`` is given)."""
        stat = parquet.stat()
        return cls(str(parquet), stat.st_size, stat.st_mtime_ns, sha256 or sha256_file(parquet))


def record_path(cache: Path) -> Path:
    """The JSON record beside a store's IPC file: ``<cache>.source.json``."""
    return cache.with_name(cache.name + ".source.json")


def _read_record(cache: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(record_path(cache).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _is_current(parquet: Path, cache: Path) -> bool:
    """Whether ``cache`` holds the pairs of ``parquet`` as it is now (refreshing the record's stat
    fields when only they changed)."""
    record = _read_record(cache)
    if record is None or record.get("format") != FORMAT_VERSION:
        return False
    try:
        if cache.stat().st_size != record.get("ipc_bytes"):
            return False
        stat = parquet.stat()
    except OSError:
        return False
    source = record.get("source") or {}
    if stat.st_size == source.get("size") and stat.st_mtime_ns == source.get("mtime_ns"):
        return True
    sha = sha256_file(parquet)
    if sha != source.get("sha256"):
        return False
    write_json(record_path(cache), {**record, "source": vars(SourceStamp.of(parquet, sha))})
    return True


def _store_batch(batch: pa.RecordBatch, parquet: Path, first_row: int) -> pa.RecordBatch:
    """One parquet row batch as a store batch (``query`` renamed ``summary``, large strings); a null
    value raises :class:`PairStoreError` naming the file, the row and its id."""
    columns = []
    for source in SOURCE_COLUMNS:
        column = batch.column(source)
        nulls = column.null_count
        if nulls:
            row = pc.index(pc.is_null(column), True).as_py()
            ident = batch.column("id")[row].as_py()
            raise PairStoreError(f"{parquet}: row {first_row + row} (id {ident!r}) has no {source!r} value")
        columns.append(column.cast(pa.large_string()))
    return pa.RecordBatch.from_arrays(columns, schema=STORE_SCHEMA)


def build_store(parquet: Path, cache: Path, batch_rows: int = DEFAULT_BATCH_ROWS) -> SourceStamp:
    """Write ``parquet``'s (id, code, query) as an uncompressed Arrow IPC file at ``cache``, batch by
    batch, atomically; then its source record beside it. Returns the source's stamp."""
    parquet, cache = Path(parquet), Path(cache)
    try:
        # mapped, not read into buffers; pages decoded one at a time (pre_buffer would fetch whole column chunks)
        reader = pq.ParquetFile(parquet, memory_map=True, pre_buffer=False)
    except (OSError, pa.ArrowException) as error:
        raise PairStoreError(f"{parquet}: not a readable parquet file ({error})") from error
    absent = [name for name in SOURCE_COLUMNS if name not in reader.schema_arrow.names]
    if absent:
        raise PairStoreError(
            f"{parquet}: no column {', '.join(map(repr, absent))} (a pair store needs id, code, query)"
        )
    before = parquet.stat()  # before reading: a file replaced meanwhile is seen as changed at the next opening
    stamp = SourceStamp(str(parquet), before.st_size, before.st_mtime_ns, sha256_file(parquet))
    rows = 0
    with atomic_path(cache) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, STORE_SCHEMA) as writer:
            batches = reader.iter_batches(batch_size=batch_rows, columns=list(SOURCE_COLUMNS), use_threads=False)
            for batch in batches:
                writer.write_batch(_store_batch(batch, parquet, rows))
                rows += batch.num_rows
                pa.default_memory_pool().release_unused()  # the allocator would keep each batch's freed pages
        ipc_bytes = tmp.stat().st_size
    record = {"format": FORMAT_VERSION, "rows": rows, "ipc_bytes": ipc_bytes, "source": vars(stamp)}
    write_json(record_path(cache), record)
    return stamp


class Texts:
    """One column of a store as a re-iterable stream of strings (each pass decodes one batch at a
    time); ``len`` is the number of pairs, :meth:`batches` yields lists."""

    def __init__(self, store: PairStore, column: str) -> None:
        self.store, self.column = store, column

    def __len__(self) -> int:
        return len(self.store)

    def batches(self) -> Iterator[list[str]]:
        """The column's values, one list per stored batch."""
        index = STORE_COLUMNS.index(self.column)
        for batch in self.store._batches:
            yield batch.column(index).to_pylist()

    def __iter__(self) -> Iterator[str]:
        for values in self.batches():
            yield from values


class PairStore:
    """(code, summary) pairs of one prepared split, memory-mapped; see the module docstring.

    ``PairStore(parquet, cache)`` builds the IPC file at ``cache`` when it is absent or stale, then
    maps it. ``rebuilt`` says whether this opening wrote it."""

    def __init__(
        self, parquet: str | os.PathLike[str], cache: str | os.PathLike[str], batch_rows: int = DEFAULT_BATCH_ROWS
    ) -> None:
        self.parquet, self.cache, self.batch_rows = Path(parquet), Path(cache), batch_rows
        self.rebuilt = False
        if not _is_current(self.parquet, self.cache):
            build_store(self.parquet, self.cache, batch_rows)
            self.rebuilt = True
        self._map()

    def _map(self) -> None:
        self._source = pa.memory_map(str(self.cache), "r")
        reader = pa.ipc.open_file(self._source)
        if reader.schema != STORE_SCHEMA:
            raise PairStoreError(f"{self.cache}: not a pair store (schema {reader.schema})")
        self._batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        self._starts: list[int] = []
        total = 0
        for batch in self._batches:
            self._starts.append(total)
            total += batch.num_rows
        self._length = total

    def close(self) -> None:
        """Unmap the file (the store is unusable afterwards)."""
        self._batches = []
        self._source.close()

    def __enter__(self) -> PairStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._length

    def _locate(self, i: int) -> tuple[pa.RecordBatch, int]:
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(f"pair {i} out of range: {self.cache} holds {self._length}")
        k = bisect.bisect_right(self._starts, i) - 1
        return self._batches[k], i - self._starts[k]

    def __getitem__(self, i: int) -> tuple[str, str]:
        batch, j = self._locate(int(i))
        return batch.column(1)[j].as_py(), batch.column(2)[j].as_py()

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for batch in self._batches:
            yield from zip(batch.column(1).to_pylist(), batch.column(2).to_pylist(), strict=True)

    def ids(self, i: int) -> str:
        """The record id of pair ``i``."""
        batch, j = self._locate(int(i))
        return batch.column(0)[j].as_py()

    def codes(self) -> Texts:
        """Every code, streamed (re-iterable), e.g. for learning a vocabulary."""
        return Texts(self, "code")

    def summaries(self) -> Texts:
        """Every reference summary, streamed (re-iterable)."""
        return Texts(self, "summary")

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers: pickle the paths, not the mapping
        return {"parquet": self.parquet, "cache": self.cache, "batch_rows": self.batch_rows}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.parquet, self.cache, self.batch_rows = state["parquet"], state["cache"], state["batch_rows"]
        self.rebuilt = False
        self._map()

    def __repr__(self) -> str:
        return f"PairStore({self._length} pairs from {self.parquet}, mapped from {self.cache})"
