"""A content-addressed embedding cache, shared by every run, study and driver on a machine (issue #28).

**The key** of a vector is (encoder identity, encoding parameters, role, text): :class:`Namespace`
holds the first three, the sha256 of the text's UTF-8 bytes the last.

- *identity*: a string the caller gives that changes whenever the encoder's weights do: the content hash
  of a checkpoint's weights file, a Hugging Face hub revision, the content hash of a resolved model folder.
- *params*: everything else that changes a vector (max length, pooling, normalisation, prefix, dtype...),
  a JSON object; it is keyed as canonical JSON (sorted keys, no spaces), so the order of its keys is moot.
- *role*: ``query`` or ``code``. A query and a code with the same text never share a vector (MTEB's
  cache once served a document's vector for a query of the same text): the role is part of the key.

**On disk**, ``<root>/<namespace key>/`` holds one namespace: ``namespace.json`` (its identity, params and
role, for ``csbench cache stats``) and immutable *shard files* ``<name>.emb``, each a batch of entries::

    bytes 0..88    magic b"CSBEMB01", rows (uint64), dim (uint32), 0 (uint32),
                   sha256 of the key block, sha256 of the vector block      (little-endian)
    bytes 88..120  sha256 of bytes 0..88 (the header checks itself)
    bytes 120..128 zeros
    key block      rows x 32 bytes: the texts' sha256 digests
    zeros          up to a multiple of 64 bytes
    vector block   rows x dim float32, little-endian, C order: memory-mapped as it lies
                   (``np.memmap(path, "<f4", "r", offset, (rows, dim))``)

A shard's name is derived from its header, so two writers of the same entries write the same file. It is
written to a temporary file beside its final place (``.<name>.<pid>@<host>.<random>.tmp``,
:func:`csbench.io.temporary_beside`), fsynced and ``os.replace``d onto its name: a reader sees no shard
or a whole one; writers never append to a file, so nothing is interleaved. One file per batch, not per
vector (:class:`csbench.api.cache.ResponseCache` keeps one file per entry, too many files for millions of
vectors), and nothing in it is unpickled. A process checks a shard's header, size and key block when it
first lists it, and its vector block (sha256) before it first serves a vector of it; a shard that fails
either reads as a miss and is removed, with a warning. Temporaries left by a killed writer are never read;
the next writer in that folder (or :meth:`EmbeddingCache.evict`) removes those whose process is gone.

**One vector per key, the first committed**: :meth:`EmbeddingCache.store` holds the namespace's lock file
(``<namespace key>/.lock``, an exclusive ``flock``) while it lists the shards, drops the texts already cached
and writes the rest, so two writers never store one text twice. :meth:`get_or_encode` then returns the
*cache's* vectors, not its own fresh ones: where another job committed a text first, its vector is used.
So every job and every later run reads one vector per key, whatever order concurrent jobs ran in (an
encoder's vector of a text can differ in the last bits with the batch it was encoded in). Where ``flock`` is
not supported (some network file systems) the lock is skipped with a warning; a duplicate can then be
written, and a lookup serves the copy in the shard whose name sorts first.

**Eviction** (``max_bytes``): least recently used shards first. A shard's last use is its file's access
time, set (``os.utime``, its modification time kept) when a lookup serves from it, at most once per
``touch_interval_s`` per shard and process, so a lookup rewrites no shard and no index. :meth:`evict` removes
the shards with the oldest access times until the shard files' total size is at most ``max_bytes``;
:meth:`store` calls it after each write when ``max_bytes`` is set. A process that still has an evicted
shard mapped reads it on (POSIX keeps an unlinked file's pages); others miss and re-encode.

**A failed write** (a full disk, a read-only folder) leaves its temporary removed and no shard; it is
counted (``stats()["write_errors"]``), logged, and raised (``errors="raise"``, the default; a full disk as
:class:`csbench.io.DiskFullError`) or warned about with ``store`` returning 0 (``errors="warn"``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import struct
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from csbench.io import DiskFullError, is_disk_full, remove_stale_temporaries, temporary_beside
from csbench.lock import NO_FLOCK_ERRNOS

logger = logging.getLogger("csbench.cache")

CACHE_ENV = "CSBENCH_EMBEDDING_CACHE"
# src/csbench/cache/embeddings.py -> the project root (as csbench.api.cache finds it)
PROJECT_ROOT = Path(__file__).resolve().parents[3]
ROLES = ("query", "code")
MAGIC = b"CSBEMB01"
SHARD_SUFFIX = ".emb"
NAMESPACE_FILE = "namespace.json"
LOCK_FILE = ".lock"  # a namespace's writers' flock (never read; hidden, so never taken for a shard)
HEADER_SIZE = 128
ALIGN = 64
DIGEST = 32
_HEAD = struct.Struct("<8sQII32s32s")  # magic, rows, dim, reserved, keys sha256, vectors sha256: 88 bytes
_HASH_CHUNK = 1 << 24  # bytes of the vector block hashed at a time


def default_cache_dir(root: Path | None = None) -> Path:
    """``$CSBENCH_EMBEDDING_CACHE`` when set, else ``<project root>/cache/embeddings``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return (root or PROJECT_ROOT) / "cache" / "embeddings"


def from_setting(setting: Mapping[str, Any], root: Path | None = None) -> EmbeddingCache | None:
    """The cache a config's ``embedding_cache`` names (``{"dir": "default" | path | None, "max_gb": float |
    None}``, :attr:`csbench.config.Config.embedding_cache`): None when ``dir`` is None (off); "default" is
    :func:`default_cache_dir` under ``root`` (the project: the working folder of every job); a relative
    path is under ``root`` too."""
    where = setting.get("dir", "default")
    if where is None:
        return None
    root = root if root is not None else Path.cwd()
    folder = default_cache_dir(root) if where == "default" else root / Path(str(where)).expanduser()
    max_gb = setting.get("max_gb")
    return EmbeddingCache(folder, None if max_gb is None else int(float(max_gb) * 1e9))


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def text_hash(text: str) -> bytes:
    """The 32-byte sha256 digest of ``text``'s UTF-8 bytes (lone surrogates passed through)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Namespace:
    """The part of a key shared by a batch of texts: encoder ``identity``, encoding ``params``, ``role``."""

    __slots__ = ("identity", "key", "params", "params_json", "role")

    def __init__(self, identity: str, params: Mapping[str, Any], role: str) -> None:
        if not isinstance(identity, str) or not identity:
            raise ValueError("an embedding cache namespace needs the encoder's identity (a non-empty string)")
        if role not in ROLES:
            raise ValueError(f"the role of an embedding cache namespace is one of {ROLES}, not {role!r}")
        self.identity, self.role = identity, role
        self.params_json = canonical_json(dict(params))
        self.params = json.loads(self.params_json)
        body = {"format": 1, "identity": identity, "params": self.params, "role": role}
        self.key = hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Namespace) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Namespace({self.identity!r}, {self.params_json}, {self.role!r})"

    def describe(self) -> dict[str, Any]:
        return {"key": self.key, "identity": self.identity, "params": self.params, "role": self.role}


@dataclass
class LookupResult:
    """``hit[i]``: whether text ``i`` was cached; ``vectors[i]`` its vector (zeros on a miss). ``vectors``
    has the namespace's dimension, 0 columns when nothing of it is cached."""

    hit: np.ndarray
    vectors: np.ndarray

    @property
    def missing(self) -> np.ndarray:
        """The indices of the texts not cached."""
        return np.flatnonzero(~self.hit)


# ------------------------------------------------------------------------------------------ shard files


def _layout(rows: int, dim: int) -> tuple[int, int]:
    """(offset of the vector block, file size) of a shard."""
    keys_end = HEADER_SIZE + rows * DIGEST
    vectors_at = -(-keys_end // ALIGN) * ALIGN
    return vectors_at, vectors_at + rows * dim * 4


def _header(rows: int, dim: int, keys_digest: bytes, vectors_digest: bytes) -> bytes:
    head = _HEAD.pack(MAGIC, rows, dim, 0, keys_digest, vectors_digest)
    return (head + hashlib.sha256(head).digest()).ljust(HEADER_SIZE, b"\0")


def _parse_header(data: bytes) -> tuple[int, int, bytes, bytes] | None:
    """(rows, dim, keys sha256, vectors sha256) of a shard's first 128 bytes, or None when they do not check."""
    if len(data) < HEADER_SIZE:
        return None
    head, digest = data[: _HEAD.size], data[_HEAD.size : _HEAD.size + DIGEST]
    if hashlib.sha256(head).digest() != digest or data[_HEAD.size + DIGEST : HEADER_SIZE].strip(b"\0"):
        return None
    magic, rows, dim, reserved, keys_digest, vectors_digest = _HEAD.unpack(head)
    if magic != MAGIC or reserved != 0 or rows < 1 or dim < 1:
        return None
    return rows, dim, keys_digest, vectors_digest


def _write_all(handle: Any, data: memoryview | bytes) -> None:
    """Write ``data`` to ``handle`` (a module function: the fault tests replace it)."""
    handle.write(data)


class _Shard:
    """A shard file this process has listed: its header and key block, checked; its vectors, mapped lazily."""

    def __init__(self, path: Path, rows: int, dim: int, vectors_digest: bytes, keys: np.ndarray) -> None:
        self.path, self.name, self.rows, self.dim = path, path.name, rows, dim
        self.vectors_digest, self.keys = vectors_digest, keys
        self.vectors_at, self.size = _layout(rows, dim)
        self.verified = False
        self._vectors: np.ndarray | None = None
        self.last_touch = 0.0

    @classmethod
    def open(cls, path: Path) -> _Shard | None:
        """The shard at ``path`` if its header, size and key block check, else None; raises OSError
        (FileNotFoundError when another process removed it)."""
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            parsed = _parse_header(handle.read(HEADER_SIZE))
            if parsed is None:
                return None
            rows, dim, keys_digest, vectors_digest = parsed
            if size != _layout(rows, dim)[1]:
                return None
            key_block = handle.read(rows * DIGEST)
        if hashlib.sha256(key_block).digest() != keys_digest:
            return None
        return cls(path, rows, dim, vectors_digest, np.frombuffer(key_block, dtype=f"S{DIGEST}"))

    def vectors(self) -> np.ndarray:
        if self._vectors is None:
            self._vectors = np.memmap(self.path, dtype="<f4", mode="r", offset=self.vectors_at,
                                      shape=(self.rows, self.dim))
        return self._vectors

    def verify(self) -> bool:
        """Whether the vector block matches its sha256 (hashed once per process)."""
        if not self.verified:
            digest, flat = hashlib.sha256(), self.vectors().reshape(-1).view(np.uint8)
            for start in range(0, flat.size, _HASH_CHUNK):
                digest.update(flat[start : start + _HASH_CHUNK])
            self.verified = digest.digest() == self.vectors_digest
        return self.verified


class _Index:
    """One namespace's shards as this process last listed them, and a sorted table of their keys."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.shards: dict[str, _Shard] = {}
        self.order: list[str] = []  # shard names in sorted order (the first copy of a key wins)
        self.keys = np.empty(0, dtype=f"S{DIGEST}")  # sorted, unique
        self.owner = np.empty(0, dtype=np.int32)  # index into self.order
        self.row = np.empty(0, dtype=np.int64)
        self.dim = 0

    def rebuild(self) -> None:
        self.order = sorted(self.shards)
        shards = [self.shards[name] for name in self.order]
        if not shards:
            self.keys, self.owner, self.row, self.dim = self.keys[:0], self.owner[:0], self.row[:0], 0
            return
        dims = {shard.dim for shard in shards}
        if len(dims) > 1:
            raise ValueError(f"embedding cache namespace {self.directory} holds vectors of several sizes {dims}")
        self.dim = dims.pop()
        keys = np.concatenate([shard.keys for shard in shards])
        owner = np.concatenate([np.full(shard.rows, i, dtype=np.int32) for i, shard in enumerate(shards)])
        row = np.concatenate([np.arange(shard.rows, dtype=np.int64) for shard in shards])
        self.keys, first = np.unique(keys, return_index=True)  # the first occurrence: the first shard's copy
        self.owner, self.row = owner[first], row[first]


# ------------------------------------------------------------------------------------------ the cache


class EmbeddingCache:
    """The embedding cache under ``root`` (default :func:`default_cache_dir`; created on the first write).
    Thread- and process-safe; the module docstring gives the format, the eviction policy and the faults."""

    def __init__(
        self,
        root: Path | str | None = None,
        max_bytes: int | None = None,
        *,
        shard_rows: int = 65536,
        touch_interval_s: float = 60.0,
        errors: str = "raise",
    ) -> None:
        if errors not in ("raise", "warn"):
            raise ValueError(f"errors is 'raise' or 'warn', not {errors!r}")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes, self.shard_rows, self.errors = max_bytes, max(1, int(shard_rows)), errors
        self.touch_interval_s = touch_interval_s
        self._lock = threading.RLock()
        self._indexes: dict[str, _Index] = {}
        self._counts = dict.fromkeys(
            ("hits", "misses", "rows_written", "shards_written", "corrupt_removed", "write_errors",
             "shards_evicted", "encoded"), 0)

    # -- namespaces

    def _directory(self, namespace: Namespace) -> Path:
        return self.root / namespace.key

    def _index(self, namespace: Namespace) -> _Index:
        index = self._indexes.get(namespace.key)
        if index is None:
            index = self._indexes[namespace.key] = _Index(self._directory(namespace))
        return index

    def _refresh(self, index: _Index) -> None:
        """Bring ``index`` up to the shard files in its folder now (new ones opened and checked)."""
        try:
            names = {e.name for e in os.scandir(index.directory) if e.name.endswith(SHARD_SUFFIX)
                     and not e.name.startswith(".")}
        except FileNotFoundError:
            names = set()
        changed = False
        for name in list(index.shards):
            if name not in names:
                del index.shards[name]
                changed = True
        for name in sorted(names - index.shards.keys()):
            path = index.directory / name
            try:
                shard = _Shard.open(path)
            except FileNotFoundError:  # evicted or cleared meanwhile
                continue
            except OSError as exc:
                logger.warning("cannot read embedding cache shard %s (%s): treated as a miss", path, exc)
                continue
            if shard is None:
                self._remove_corrupt(path, "header, size or key block")
                continue
            index.shards[name] = shard
            changed = True
        if changed:
            index.rebuild()

    def _remove_corrupt(self, path: Path, what: str) -> None:
        self._counts["corrupt_removed"] += 1
        message = f"embedding cache shard {path} is torn or corrupt ({what} does not check): removed"
        logger.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)
        with contextlib.suppress(OSError):
            path.unlink()

    # -- reading

    def lookup(self, namespace: Namespace, texts: Sequence[str], count: bool = True) -> LookupResult:
        """The cached vectors of ``texts`` in ``namespace`` (:class:`LookupResult`: a hit mask and a matrix);
        ``count``: add to the hit and miss counts (not for a re-read of what was just stored)."""
        hashes = np.array([text_hash(text) for text in texts], dtype=f"S{DIGEST}")
        with self._lock:
            index = self._index(namespace)
            self._refresh(index)
            while True:
                result = self._gather(index, hashes)
                if result is not None:
                    break
            if count:
                hits = int(result.hit.sum())
                self._counts["hits"] += hits
                self._counts["misses"] += len(hashes) - hits
        return result

    def _gather(self, index: _Index, hashes: np.ndarray) -> LookupResult | None:
        """The lookup of ``hashes`` in ``index``; None when a shard failed its check (removed: look again)."""
        n = len(hashes)
        if not len(index.keys) or not n:
            return LookupResult(np.zeros(n, dtype=bool), np.zeros((n, index.dim), dtype=np.float32))
        at = np.minimum(np.searchsorted(index.keys, hashes), len(index.keys) - 1)
        hit = index.keys[at] == hashes
        vectors = np.zeros((n, index.dim), dtype=np.float32)
        owners = index.owner[at[hit]]
        rows = index.row[at[hit]]
        where = np.flatnonzero(hit)
        now = time.time()
        for owner in np.unique(owners):
            shard = index.shards[index.order[owner]]
            try:
                valid = shard.verify()
            except (OSError, ValueError) as exc:  # removed between listing and mapping: a miss
                logger.warning("cannot map embedding cache shard %s (%s): treated as a miss", shard.path, exc)
                valid = False
                if not shard.path.exists():
                    del index.shards[shard.name]
                    index.rebuild()
                    return None
            if not valid:
                self._remove_corrupt(shard.path, "the sha256 of its vector block")
                del index.shards[shard.name]
                index.rebuild()
                return None
            mine = owners == owner
            vectors[where[mine]] = shard.vectors()[rows[mine]]
            self._touch(shard, now)
        return LookupResult(hit, vectors)

    def _touch(self, shard: _Shard, now: float) -> None:
        """Record a use of ``shard`` (its access time; see the eviction policy), at most once an interval."""
        if now - shard.last_touch < self.touch_interval_s:
            return
        shard.last_touch = now
        with contextlib.suppress(OSError):
            os.utime(shard.path, ns=(time.time_ns(), os.stat(shard.path).st_mtime_ns))

    def get_or_encode(
        self, namespace: Namespace, texts: Sequence[str], encode: Callable[[list[str]], np.ndarray]
    ) -> np.ndarray:
        """The vectors of ``texts``: cached ones looked up, the others (each distinct text once) computed by
        ``encode`` (texts -> float32 matrix) and stored. ``stats()["encoded"]`` counts the texts encoded."""
        found = self.lookup(namespace, texts)
        missing = found.missing
        if not len(missing):
            return found.vectors
        unique = list(dict.fromkeys(texts[i] for i in missing))
        fresh = np.ascontiguousarray(np.asarray(encode(unique)), dtype="<f4")
        if fresh.ndim != 2 or fresh.shape[0] != len(unique):
            raise ValueError(f"encode returned an array of shape {fresh.shape} for {len(unique)} texts")
        with self._lock:
            self._counts["encoded"] += len(unique)
        if found.vectors.shape[1] not in (0, fresh.shape[1]):
            raise ValueError(f"encode returned {fresh.shape[1]}-d vectors; the cache holds {found.vectors.shape[1]}-d")
        self.store(namespace, unique, fresh)
        # the cache's vectors, not the fresh ones: a text another job committed first reads as that job's
        # vector here and in every later run (one vector per key)
        committed = self.lookup(namespace, unique, count=False)
        fresh[committed.hit] = committed.vectors[committed.hit]
        vectors = found.vectors if found.vectors.shape[1] else np.zeros((len(texts), fresh.shape[1]), np.float32)
        position = {text: i for i, text in enumerate(unique)}
        vectors[missing] = fresh[[position[texts[i]] for i in missing]]
        return vectors

    # -- writing

    def store(self, namespace: Namespace, texts: Sequence[str], vectors: np.ndarray) -> int:
        """Store ``vectors[i]`` as the vector of ``texts[i]`` in ``namespace`` (as float32), skipping texts
        already cached and repeats; returns the number of entries written. A failed write: see the module
        docstring (raised, or warned about and 0 returned)."""
        matrix = np.ascontiguousarray(np.asarray(vectors), dtype="<f4")
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or (len(texts) and matrix.shape[1] < 1):
            raise ValueError(f"store needs one vector per text: {len(texts)} texts, an array of shape {matrix.shape}")
        hashes = np.array([text_hash(text) for text in texts], dtype=f"S{DIGEST}")
        _, first = np.unique(hashes, return_index=True)
        keep = np.sort(first)
        with self._lock, self._namespace_lock(namespace):
            index = self._index(namespace)
            self._refresh(index)
            if index.dim and len(texts) and index.dim != matrix.shape[1]:
                raise ValueError(f"{matrix.shape[1]}-d vectors for a namespace of {index.dim}-d vectors ({namespace})")
            if len(index.keys) and len(keep):
                at = np.minimum(np.searchsorted(index.keys, hashes[keep]), len(index.keys) - 1)
                keep = keep[index.keys[at] != hashes[keep]]
            if not len(keep):
                return 0
            written = 0
            try:
                self._write_namespace_file(namespace)
                for start in range(0, len(keep), self.shard_rows):
                    chunk = keep[start : start + self.shard_rows]
                    path = self._write_shard(index.directory, hashes[chunk], matrix[chunk])
                    written += len(chunk)
                    self._counts["shards_written"] += 1
                    self._counts["rows_written"] += len(chunk)
                    try:
                        shard = _Shard.open(path)
                    except FileNotFoundError:  # evicted or cleared by another process already
                        continue
                    if shard is not None:
                        shard.verified = True  # written from these bytes, fsynced
                        index.shards[shard.name] = shard
                        index.rebuild()
            except OSError as exc:
                self._counts["write_errors"] += 1
                where = exc.filename or index.directory
                message = (f"cannot write the embedding cache at {where} ({exc}); "
                           f"{written} of {len(keep)} new entries stored")
                logger.warning(message)
                if self.errors == "raise":
                    raise
                warnings.warn(message, RuntimeWarning, stacklevel=2)
                return written
        if self.max_bytes is not None:
            self.evict()
        return written

    @contextlib.contextmanager
    def _namespace_lock(self, namespace: Namespace):
        """Hold ``<namespace>/.lock`` exclusively (flock) while a writer lists, filters and writes: the
        entries of a namespace are then committed one writer at a time, each text once."""
        directory = self._directory(namespace)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if self.errors == "raise":
                raise
            logger.warning("cannot open the embedding cache's lock file in %s (%s): writing unlocked", directory, exc)
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:
                if exc.errno not in NO_FLOCK_ERRNOS:
                    raise
                logger.warning("flock is not supported in %s: embedding cache writes are not serialized", directory)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _write_namespace_file(self, namespace: Namespace) -> None:
        path = self._directory(namespace) / NAMESPACE_FILE
        if path.exists():
            return
        self._write_atomically(path, [canonical_json(namespace.describe()).encode("utf-8") + b"\n"])

    def _write_shard(self, directory: Path, hashes: np.ndarray, matrix: np.ndarray) -> Path:
        rows, dim = matrix.shape
        key_block = hashes.tobytes()
        vector_block = memoryview(matrix).cast("B")
        header = _header(rows, dim, hashlib.sha256(key_block).digest(), hashlib.sha256(vector_block).digest())
        vectors_at, size = _layout(rows, dim)
        path = directory / f"{hashlib.sha256(header).hexdigest()[:40]}{SHARD_SUFFIX}"
        padding = b"\0" * (vectors_at - HEADER_SIZE - len(key_block))
        self._write_atomically(path, [header, key_block, padding, vector_block], size)
        return path

    @staticmethod
    def _write_atomically(path: Path, parts: Iterable[bytes | memoryview], size: int | None = None) -> None:
        """Write ``parts`` to a temporary file beside ``path``, fsync, rename onto ``path``; on any failure
        the temporary file is removed (a full disk raises :class:`DiskFullError`)."""
        tmp: Path | None = None
        written = 0
        try:
            tmp = temporary_beside(path)
            with open(tmp, "wb") as handle:
                for part in parts:
                    _write_all(handle, part)
                    written += len(part)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            tmp = None
            with contextlib.suppress(OSError):  # the rename itself durable
                fd = os.open(path.parent, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()
                tmp = None
            if is_disk_full(exc) and not isinstance(exc, DiskFullError):
                raise DiskFullError(path, exc, size, written) from exc
            raise
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()

    # -- inspection and upkeep

    def _namespace_dirs(self) -> list[Path]:
        try:
            return sorted(Path(e.path) for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []

    @staticmethod
    def _shard_files(directory: Path) -> list[tuple[Path, os.stat_result]]:
        found = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(directory):
                if entry.name.endswith(SHARD_SUFFIX) and not entry.name.startswith("."):
                    with contextlib.suppress(FileNotFoundError):
                        found.append((Path(entry.path), entry.stat()))
        return found

    def stats(self) -> dict[str, Any]:
        """What is on disk (namespaces, shards, entries, bytes, temporaries; per namespace its identity,
        params and role) and this object's counts (hits, misses, rows and shards written, corrupt shards
        removed, write errors, shards evicted, texts encoded through :meth:`get_or_encode`). Entries are
        the rows of the shards whose header checks (a text stored twice at once by two writers counts twice)."""
        namespaces = []
        for directory in self._namespace_dirs():
            described: dict[str, Any] = {"key": directory.name}
            with contextlib.suppress(OSError, ValueError):
                described.update(json.loads((directory / NAMESPACE_FILE).read_text("utf-8")))
            shards = entries = size = 0
            dim = None
            for path, stat in self._shard_files(directory):
                size += stat.st_size
                shards += 1
                try:
                    with open(path, "rb") as handle:
                        parsed = _parse_header(handle.read(HEADER_SIZE))
                except OSError:
                    parsed = None
                if parsed is not None:
                    entries += parsed[0]
                    dim = parsed[1]
            temporaries = 0
            with contextlib.suppress(FileNotFoundError):  # cleared meanwhile
                temporaries = sum(e.name.startswith(".") and e.name.endswith(".tmp") for e in os.scandir(directory))
            namespaces.append({**described, "dim": dim, "shards": shards, "entries": entries, "bytes": size,
                               "temporaries": temporaries})
        with self._lock:
            counts = dict(self._counts)
        return {
            "root": str(self.root),
            "max_bytes": self.max_bytes,
            "namespaces": len(namespaces),
            "shards": sum(n["shards"] for n in namespaces),
            "entries": sum(n["entries"] for n in namespaces),
            "bytes": sum(n["bytes"] for n in namespaces),
            "temporaries": sum(n["temporaries"] for n in namespaces),
            "by_namespace": namespaces,
            **counts,
        }

    def resolve(self, namespace: Namespace | str) -> Path:
        """The folder of ``namespace``: a :class:`Namespace`, its key, or a prefix of at least 8 characters
        of one key on disk."""
        if isinstance(namespace, Namespace):
            return self._directory(namespace)
        text = namespace.strip().lower()
        if len(text) < 8 or any(c not in "0123456789abcdef" for c in text):
            raise ValueError(f"a namespace is its key (hex, at least 8 characters), not {namespace!r}")
        matches = [d for d in self._namespace_dirs() if d.name.startswith(text)]
        if len(matches) != 1:
            raise ValueError(f"{len(matches)} namespaces of {self.root} start with {namespace!r}")
        return matches[0]

    def clear(self, namespace: Namespace | str | None = None) -> int:
        """Remove one namespace (or every one); returns the number of shard files removed. For when no
        job writes there: a writer's shard renamed into a removed folder fails (and is reported)."""
        directories = [self.resolve(namespace)] if namespace is not None else self._namespace_dirs()
        removed = 0
        with self._lock:
            for directory in directories:
                removed += len(self._shard_files(directory))
                shutil.rmtree(directory, ignore_errors=True)
                self._indexes.pop(directory.name, None)
        return removed

    def evict(self, max_bytes: int | None = None) -> list[Path]:
        """Remove least recently used shards (oldest access time first) until the shard files total at most
        ``max_bytes`` (default: the cache's; no limit: nothing); also the temporaries of writers that are gone.
        Returns the shard files removed."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        files = []
        for directory in self._namespace_dirs():
            remove_stale_temporaries(directory)
            files.extend(self._shard_files(directory))
        if limit is None:
            return []
        total = sum(stat.st_size for _, stat in files)
        removed = []
        for path, stat in sorted(files, key=lambda item: (item[1].st_atime_ns, item[0].name)):
            if total <= limit:
                break
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
                logger.info("embedding cache: evicted %s (%d bytes, last used %s)", path, stat.st_size,
                            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stat.st_atime)))
            total -= stat.st_size
        with self._lock:
            self._counts["shards_evicted"] += len(removed)
        return removed


def format_stats(stats: dict[str, Any]) -> str:
    """``stats()`` as text: one line for the cache, then one per namespace (``csbench cache stats``)."""
    from csbench.io import human_size

    limit = human_size(stats["max_bytes"]) if stats["max_bytes"] is not None else "no limit"
    lines = [
        f"{stats['root']}: {stats['namespaces']} namespace(s), {stats['shards']} shard(s), "
        f"{stats['entries']} entries, {human_size(stats['bytes'])} ({limit})"
        + (f", {stats['temporaries']} temporary file(s)" if stats["temporaries"] else "")
    ]
    for n in stats["by_namespace"]:
        params = canonical_json(n["params"]) if "params" in n else "?"
        lines.append(
            f"  {n['key'][:16]}  {n.get('role', '?'):5}  {n['entries']:>9} x {n['dim'] or '?'}  "
            f"{human_size(n['bytes']):>10}  {n.get('identity', '?')}  {params}"
        )
    return "\n".join(lines) + "\n"
