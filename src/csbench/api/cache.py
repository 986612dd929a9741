"""An on-disk response cache for API requests, safe under concurrent jobs and kills.

One file per entry, ``<directory>/<key[:2]>/<key>``. A file is a one-line header and the payload::

    csbench-api-cache 1 <payload length> <payload sha256>\\n<payload bytes>

written to a temporary file in the same folder, flushed, fsynced and ``os.replace``d onto its name, so a
reader sees either no file or a whole one. A file whose header, length or digest does not match (a torn
write on a file system without atomic rename, a disk error, an edit) reads as a miss: it is removed,
with a warning. Two processes writing one key both succeed (the last rename wins; both wrote the same
answer to the same request). Payloads are bytes the caller decodes (JSON here): nothing is unpickled.

**A cache write failure does not fail the run**: a full disk or a read-only folder is warned about once
(:data:`logger`, and a ``RuntimeWarning``), the temporary file is removed, and the cache goes on
read-only (``stats()["write_errors"]`` counts the failed writes; later ``put`` calls do nothing). The
answers are still returned; they are simply not cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

logger = logging.getLogger("csbench.api")

MAGIC = b"csbench-api-cache 1"
_KEY = re.compile(r"^[0-9a-f]{16,128}$")
CACHE_ENV = "CSBENCH_API_CACHE"
# src/csbench/api/cache.py -> the project root (as csbench.config.schema finds it)
PROJECT_ROOT = Path(__file__).resolve().parents[3]


def default_cache_dir(root: Path | None = None) -> Path:
    """``$CSBENCH_API_CACHE`` when set, else ``<project root>/cache/api``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return (root or PROJECT_ROOT) / "cache" / "api"


def cache_key(base_url: str, model: str, revision: str | None, body: dict[str, Any]) -> str:
    """sha256 (hex) of the canonical JSON (sorted keys, no spaces) of the endpoint, model, revision and
    request body. The key's value is never part of it."""
    canonical = json.dumps(
        {"base_url": base_url.rstrip("/"), "model": model, "revision": revision, "body": body},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def encode_entry(payload: bytes) -> bytes:
    """The file content for ``payload``: the header line, then the payload."""
    digest = hashlib.sha256(payload).hexdigest()
    return MAGIC + b" %d %s\n" % (len(payload), digest.encode()) + payload


def decode_entry(data: bytes) -> bytes | None:
    """The payload of a file's content, or None when the header, length or digest does not match."""
    header, sep, payload = data.partition(b"\n")
    if not sep:
        return None
    parts = header.split(b" ")
    if len(parts) != 4 or b" ".join(parts[:2]) != MAGIC:
        return None
    try:
        length = int(parts[2])
    except ValueError:
        return None
    if len(payload) != length or hashlib.sha256(payload).hexdigest().encode() != parts[3]:
        return None
    return payload


class ResponseCache:
    """The cache in ``directory`` (created on the first write). Thread- and process-safe; see the module
    docstring for the file format and what happens on a torn entry or a failed write."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._counts = {"hits": 0, "misses": 0, "writes": 0, "corrupt_removed": 0, "write_errors": 0}
        self._writable = True

    def path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"a cache key is a lower-case hex digest, not {key!r}")
        return self.directory / key[:2] / key

    def _count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def _read(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("cannot read cache entry %s (%s): treated as a miss", path, exc.strerror or exc)
            return None
        payload = decode_entry(data)
        if payload is None:
            self._count("corrupt_removed")
            message = f"cache entry {path} is torn or corrupt (header, length or sha256 mismatch): removed"
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            with contextlib.suppress(OSError):
                path.unlink()
        return payload

    def get(self, key: str) -> bytes | None:
        """The payload stored under ``key``, or None (a miss; a torn or corrupt entry is removed)."""
        payload = self._read(key)
        self._count("hits" if payload is not None else "misses")
        return payload

    def contains(self, key: str) -> bool:
        """Whether a valid entry is stored under ``key`` (not counted as a hit or a miss)."""
        return self._read(key) is not None

    def put(self, key: str, payload: bytes) -> bool:
        """Store ``payload`` under ``key`` atomically. Returns False when the write failed (warned once;
        the cache is read-only from then on) or the cache is already read-only."""
        if not self._writable:
            return False
        path = self.path(key)
        tmp_name = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(encode_entry(payload))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, path)
            tmp_name = None
        except OSError as exc:
            self._write_failed(path, exc)
            return False
        finally:
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)
        self._count("writes")
        return True

    def _write_failed(self, path: Path, exc: OSError) -> None:
        with self._lock:
            self._counts["write_errors"] += 1
            first = self._writable
            self._writable = False
        if first:
            reason = exc.strerror or type(exc).__name__
            message = (f"cannot write the API response cache ({reason}, errno {exc.errno}) at {path.parent}: "
                       "going on without caching new answers (answers already cached are still read)")
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)

    @property
    def writable(self) -> bool:
        return self._writable

    def stats(self) -> dict[str, Any]:
        """This object's counts: ``hits``, ``misses``, ``writes``, ``corrupt_removed``, ``write_errors``,
        and ``writable`` and ``directory``."""
        with self._lock:
            return {**self._counts, "writable": self._writable, "directory": str(self.directory)}

    def remove_stale_temporaries(self, older_than_s: float = 3600.0) -> int:
        """Remove the temporary files of writers killed before their rename (never read as entries;
        only disk space) older than ``older_than_s``; returns how many were removed."""
        if not self.directory.is_dir():
            return 0
        cutoff, removed = time.time() - older_than_s, 0
        for path in self.directory.glob("??/.*.tmp"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
        return removed

    def stored_keys(self) -> list[str]:
        """The keys of the entries on disk (valid or not; temporary files excluded)."""
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.glob("??/*") if _KEY.match(p.name))
