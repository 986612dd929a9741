"""Atomic file output and checksums: a killed job never leaves a file that looks finished.

A write that runs out of space (``ENOSPC``, or ``EDQUOT`` over a quota) raises :class:`DiskFullError`:
one line naming the file, the space it needs (its size when known beforehand, else how much of it
had been written when the disk filled) and the space free; its temporary file is removed, so the
file is either whole or absent (the file it would replace stays as it was).

Every temporary file or folder is created beside its final place and named for its writer,
``.<final name>.<pid>@<host>.<random>.tmp`` (:func:`temporary_beside`). A job killed outright
(``kill -9``, a node lost) cannot remove its own: the next writer in that folder removes every
temporary whose writer is gone (:func:`remove_stale_temporaries`: same host, no such process). A
temporary of a live process, or of another host (a project folder shared by a cluster's nodes, where
a pid means nothing here), is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import pandas as pd

log = logging.getLogger("csbench")


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` is a write that ran out of space (``ENOSPC``, ``EDQUOT``)."""
    return isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS


def human_size(n: int) -> str:
    """``812 B``, ``12.3 MiB``: a byte count for messages."""
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def free_space(path: str | os.PathLike[str]) -> int | None:
    """Bytes free to unprivileged users on the file system of ``path`` (or of its nearest existing
    parent), None when it cannot be told."""
    here = Path(path).absolute()
    for candidate in (here, *here.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


class DiskFullError(OSError):
    """Writing ``path`` ran out of space: what it needs and what is free, in one line. Nothing of the
    file was left behind (``atomic_path`` removed its temporary file)."""

    def __init__(
        self, path: str | os.PathLike[str], cause: OSError, needed: int | None = None, written: int | None = None
    ) -> None:
        super().__init__(cause.errno, os.strerror(cause.errno or errno.ENOSPC), str(path))
        self.path, self.needed, self.written, self.free = Path(path), needed, written, free_space(path)

    def __str__(self) -> str:
        if self.needed is not None:
            need = f"it needs {human_size(self.needed)}"
        elif self.written:
            need = f"it needs more than the {human_size(self.written)} written when the disk filled"
        else:
            need = "not one block of it could be written"
        free = f", {human_size(self.free)} free there" if self.free is not None else ""
        return f"{self.strerror} writing {self.path}: {need}{free}; nothing of it was left behind"


def disk_full_message(err: OSError, where: str | os.PathLike[str] = ".") -> str:
    """One line for a write that ran out of space: a :class:`DiskFullError`'s own, else the errno
    message with the file (when the error names one, else the folder ``where``) and the space free."""
    if isinstance(err, DiskFullError):
        return str(err)
    target = Path(err.filename) if isinstance(err.filename, (str, os.PathLike)) else Path(where).absolute()
    free = free_space(target)
    message = f"{os.strerror(err.errno or errno.ENOSPC)} writing {'' if err.filename else 'below '}{target}"
    message += f": {human_size(free)} free there" if free is not None else ""
    detail = err.strerror or ""
    return message + (f" ({detail})" if detail and detail != os.strerror(err.errno or errno.ENOSPC) else "")


def _temporary_size(tmp: Path) -> int | None:
    try:
        return tmp.stat().st_size
    except OSError:
        return None


# ------------------------------------------------------------------------------ temporaries


def _host_name() -> str:
    """This machine's name as it goes into a temporary's name: letters, digits, ``.`` and ``-``."""
    name = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:64].strip(".")
    return name or "localhost"


HOST = _host_name()
# .<final name>.<pid>@<host>.<random>.tmp; mkstemp / mkdtemp's random part is [a-z0-9_]
TEMPORARY_NAME = re.compile(r"^\.(?P<final>.+)\.(?P<pid>[0-9]+)@(?P<host>[A-Za-z0-9.-]+)\.[A-Za-z0-9_]+\.tmp$")
_SWEPT: set[str] = set()  # folders this process has swept already


def _writer_alive(pid: int, host: str) -> bool:
    """Whether the process that named a temporary ``pid@host`` may still be writing it: True for
    another host's (its pids cannot be checked from here) and whenever it cannot be told."""
    if host != HOST or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's live process
        return True
    try:  # a killed process its parent has not reaped yet: a zombie writes nothing
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries in ``directory`` (not below it) whose writer is gone: named
    ``.<name>.<pid>@<this host>.<random>.tmp`` by a process that no longer runs. Returns what it
    removed (each named in the log). Anything else, a live or another host's writer's included, stays."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = TEMPORARY_NAME.match(entry.name)
        if match is None or _writer_alive(int(match["pid"]), match["host"]):
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:  # another process removed it first
            continue
        except OSError as err:
            log.warning("cannot remove %s, left by a writer that is gone (pid %s): %s", path, match["pid"], err)
            continue
        log.info("removed %s, left by a writer that is gone (pid %s)", path, match["pid"])
        removed.append(path)
    return removed


def temporary_beside(path: str | os.PathLike[str], directory: bool = False) -> Path:
    """A new empty temporary file (or folder) beside ``path``, on its file system, named for this
    process (``.<name>.<pid>@<host>.<random>.tmp``), after the folder's stale temporaries are removed
    (:func:`remove_stale_temporaries`, once per folder per process). The caller renames it onto
    ``path`` or removes it; a file is created with mkstemp's mode 0600."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    folder = os.path.abspath(final.parent)
    if folder not in _SWEPT:
        remove_stale_temporaries(folder)
        _SWEPT.add(folder)
    tag = f".{os.getpid()}@{HOST}."
    name = final.name[: 255 - len(tag) - 14]  # within NAME_MAX with mkstemp's 8 random characters
    prefix, suffix = f".{name}{tag}", ".tmp"
    if directory:
        return Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=final.parent))
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=final.parent)
    os.close(fd)
    return Path(name)


# ------------------------------------------------------------------------------ atomic writes


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], size: int | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.
    ``size``: the bytes the block will write, when known (a disk-full error then says so)."""
    final = Path(path)
    try:
        tmp_path = temporary_beside(final)
    except OSError as err:
        if is_disk_full(err):
            raise DiskFullError(final, err, size, 0) from err
        raise
    try:
        os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        yield tmp_path
        os.replace(tmp_path, final)
    except OSError as err:
        if is_disk_full(err) and not isinstance(err, DiskFullError):
            written = _temporary_size(tmp_path)
            tmp_path.unlink(missing_ok=True)  # first: the space it held is free again (the message says how much)
            raise DiskFullError(final, err, size, written) from err
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces ``path`` when closed without error."""
    with atomic_path(path) as tmp:
        encoding = None if "b" in mode else "utf-8"
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` into ``path``, atomically (a disk-full error names its size)."""
    with atomic_path(path, size=len(data)) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    write_bytes(path, (json.dumps(data, indent=2, sort_keys=False, default=str) + "\n").encode("utf-8"))


def write_text(path: str | os.PathLike[str], text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def present_columns(source: Any, columns: Iterable[str]) -> list[str]:
    """``columns``, in their order, less those the Parquet file ``source`` (a path, or a pyarrow
    file such as a ``BufferReader``) lacks: its schema alone is read."""
    import pyarrow.parquet as pq

    names = set(pq.read_schema(source).names)
    return [column for column in columns if column in names]


def parquet_frames(handle: IO[bytes], rows: int, columns: list[str] | None = None) -> Iterator[pd.DataFrame]:
    """An open Parquet file (read from its start) as DataFrames of at most ``rows`` rows, in order; an
    empty file gives one empty frame, with its columns. pyarrow's pre-buffering is off: it kept what it
    read of every row group until the reader was done (the whole split, 490 MiB of the 1 M growth
    corpus's train split, against 60 MiB without)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    handle.seek(0)
    reader = pq.ParquetFile(handle, pre_buffer=False)
    empty = True
    for batch in reader.iter_batches(batch_size=rows, columns=columns, use_threads=False):
        empty = False
        yield pa.Table.from_batches([batch]).to_pandas()
    if empty:
        schema = reader.schema_arrow
        yield (schema if columns is None else pa.schema([schema.field(c) for c in columns])).empty_table().to_pandas()


class ParquetStream:
    """A Parquet file written a DataFrame at a time, each its own row group, made as ``write_parquet``
    makes a whole file (``Table.from_pandas`` without the index, snappy; one frame gives its very bytes),
    in a temporary file beside ``path`` that ``close`` renames into place (``abort``, or any error,
    removes it). Every frame takes ``schema`` where given, else the first frame's; ``types``: the Arrow
    types of columns that first frame may leave untyped (all values missing), e.g. the input file's
    schema. A full disk raises ``DiskFullError`` naming ``path``."""

    def __init__(self, path: str | os.PathLike[str], types: Any = None, schema: Any = None) -> None:
        self.path, self.types, self.schema = Path(path), types, schema
        self.tmp: Path | None = None
        self.writer: Any = None

    def write(self, frame: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if self.schema is None:
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if self.types is not None and any(pa.types.is_null(f.type) for f in table.schema):
                    known = {f.name: f.type for f in self.types}
                    fields = [
                        f.with_type(known[f.name]) if pa.types.is_null(f.type) and f.name in known else f
                        for f in table.schema
                    ]
                    table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
                self.schema = table.schema
            else:
                table = pa.Table.from_pandas(frame, schema=self.schema, preserve_index=False)
            if self.writer is None:
                self.tmp = temporary_beside(self.path)
                self.writer = pq.ParquetWriter(self.tmp, self.schema, compression="snappy")
            self.writer.write_table(table)
        except BaseException as err:
            written = _temporary_size(self.tmp) if self.tmp is not None else None
            self.abort()
            if isinstance(err, OSError) and is_disk_full(err) and not isinstance(err, DiskFullError):
                raise DiskFullError(self.path, err, None, written) from err
            raise

    def close(self) -> None:
        """Finish the file and rename it into place (a file without a frame is refused: nothing types it)."""
        if self.writer is None:
            raise ValueError(f"{self.path}: no rows were written, not even an empty frame to type the file")
        try:
            self.writer.close()
            os.chmod(self.tmp, 0o666 & ~_UMASK)
            os.replace(self.tmp, self.path)
            self.writer, self.tmp = None, None
        except OSError as err:
            written = _temporary_size(self.tmp) if self.tmp is not None else None
            self.abort()
            if is_disk_full(err) and not isinstance(err, DiskFullError):
                raise DiskFullError(self.path, err, None, written) from err
            raise

    def abort(self) -> None:
        """Remove the temporary file (what was written is lost; ``path`` is left as it was)."""
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
            self.writer = None
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
            self.tmp = None


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def canonical_hash(data: Any) -> str:
    """SHA-256 of a JSON-serialisable value in canonical form (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
