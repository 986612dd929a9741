"""Digests of cached artefacts, checked before anything is loaded from them.

An artefact folder (a run's index, a checkpoint's ``best/``) carries a ``SHA256SUMS`` sidecar in
``sha256sum`` format (``<hex>  <relative path>``, sorted), written with the folder: the folder is
built beside its final place, the sidecar written last, and the whole folder renamed into place
(:func:`publish_dir`). A reader calls :func:`verify_dir` first: every listed file must exist and
match, and no other file may be there (a file planted beside the artefact, e.g. an ``index.pkl``, is
refused, never read; Snakemake's ``.snakemake_timestamp`` marker aside). A mismatch is one line
naming the file and how to re-make the artefact.

The sidecar guards against corruption and against a file changed after it was written (by hand, by a
half-finished copy, by another tool); what comes from a DVC remote is checked against ``dvc.lock``
by :mod:`csbench.dvc_verify` (``make pull``), since a remote that could rewrite a file could rewrite
its sidecar too. Nothing read from such a folder can run code: indexes hold ``.npy`` arrays (read
with ``allow_pickle=False``) and JSON, checkpoints safetensors and JSON.

``sha256sum -c SHA256SUMS`` inside the folder checks it by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from csbench.io import temporary_beside

SUMS_FILE = "SHA256SUMS"
# Snakemake marks a finished directory() output (checkpoints/.../best) with this empty file: not part
# of the artefact (.dvcignore leaves it out of DVC's hash too), never read.
DRIVER_MARKERS = frozenset({".snakemake_timestamp"})
_CHUNK = 1 << 20


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()
FILE_MODE = 0o666 & ~_UMASK  # what open() gives a new file: 0644 under the usual umask 022
DIR_MODE = 0o777 & ~_UMASK  # what mkdir() gives: 0755


class IntegrityError(ValueError):
    """A cached artefact whose files do not match its ``SHA256SUMS`` (or that has none)."""


def sha256_bytes_of(path: Path) -> tuple[str, bytearray]:
    """The SHA-256 of a file and its bytes, read once (a writable buffer: ``np.frombuffer`` over it
    gives a writable array without a copy)."""
    size = path.stat().st_size
    data = bytearray(size)
    view = memoryview(data)
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        done = 0
        while done < size:
            n = handle.readinto(view[done : done + _CHUNK])
            if not n:
                raise IntegrityError(f"{path}: shorter than when it was listed ({done} of {size} bytes read)")
            digest.update(view[done : done + n])
            done += n
        if handle.read(1):
            raise IntegrityError(f"{path}: grew while it was read")
    return digest.hexdigest(), data


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _files(directory: Path) -> Iterator[tuple[str, Path]]:
    """Every file below ``directory`` but the sidecar, as (posix relative path, path), sorted. A link
    to a file counts as that file (DVC's ``symlink`` / ``hardlink`` cache types check out links)."""
    found = []
    for path in directory.rglob("*"):
        if not path.is_file():
            continue
        name = path.relative_to(directory).as_posix()
        if name != SUMS_FILE and name not in DRIVER_MARKERS:
            found.append((name, path))
    return iter(sorted(found))


def write_sums(directory: Path) -> str:
    """Write ``directory/SHA256SUMS`` over every file below it; return the sidecar's own digest
    (one value that changes whenever any file of the artefact does)."""
    directory = Path(directory)
    lines = [f"{sha256_of(path)}  {name}\n" for name, path in _files(directory)]
    text = "".join(lines)
    (directory / SUMS_FILE).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_sums(directory: Path, remake: str) -> dict[str, str]:
    """The listed files of ``directory/SHA256SUMS`` (relative path -> hex digest)."""
    sums_file = Path(directory) / SUMS_FILE
    if not sums_file.is_file():
        raise IntegrityError(f"{sums_file} is missing (an unfinished or older artefact): {remake}")
    listed: dict[str, str] = {}
    for number, line in enumerate(sums_file.read_text(encoding="utf-8").splitlines(), start=1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name or name.startswith("/") or ".." in name.split("/"):
            raise IntegrityError(f"{sums_file}:{number}: not a '<sha256>  <relative path>' line: {remake}")
        listed[name] = digest
    return listed


def sums_digest(directory: Path) -> str | None:
    """The digest of ``directory/SHA256SUMS`` (None when there is none)."""
    sums_file = Path(directory) / SUMS_FILE
    return sha256_of(sums_file) if sums_file.is_file() else None


class VerifiedDir:
    """A folder whose files matched its ``SHA256SUMS`` (:func:`verify_dir`): readers of its files.
    ``array`` and ``json`` parse the very bytes that were hashed (read once)."""

    def __init__(self, directory: Path, listed: dict[str, str], kept: dict[str, bytearray]) -> None:
        self.directory = directory
        self.listed = listed
        self._kept = kept

    def path(self, name: str) -> Path:
        """A listed file or a folder of listed files (for a reader that opens them itself)."""
        if name not in self.listed and not any(n.startswith(f"{name}/") for n in self.listed):
            raise IntegrityError(f"{self.directory / name}: not listed in {self.directory / SUMS_FILE}")
        return self.directory / name

    def data(self, name: str) -> bytearray:
        if name not in self._kept:
            raise IntegrityError(f"{self.directory / name}: not listed in {self.directory / SUMS_FILE}")
        return self._kept[name]

    def array(self, name: str):
        """A ``.npy`` file's array, without pickle (:func:`array_from_npy`)."""
        return array_from_npy(self.data(name), str(self.directory / name))

    def json(self, name: str) -> Any:
        return json.loads(bytes(self.data(name)).decode("utf-8"))


def verify_dir(directory: Path, remake: str, keep: Callable[[str], bool] | None = None) -> VerifiedDir:
    """Check every file of ``directory`` against its ``SHA256SUMS`` before anything reads it.

    ``remake`` ends each message (how to re-make the artefact). Raises :class:`IntegrityError` on a
    missing sidecar, a missing, changed or unlisted file. The files whose relative path ``keep``
    accepts are read once, hashed and kept in memory (:meth:`VerifiedDir.array`, :meth:`VerifiedDir.json`),
    so a caller parses exactly the bytes that were verified."""
    directory = Path(directory)
    listed = read_sums(directory, remake)
    present = dict(_files(directory))
    unlisted = sorted(set(present) - set(listed))
    if unlisted:
        raise IntegrityError(f"{directory / unlisted[0]}: not listed in {directory / SUMS_FILE}: {remake}")
    kept: dict[str, bytearray] = {}
    for name, expected in listed.items():
        path = directory / name
        if name not in present:
            raise IntegrityError(f"{path} is missing (listed in {directory / SUMS_FILE}): {remake}")
        if keep is not None and keep(name):
            actual, kept[name] = sha256_bytes_of(path)
        else:
            actual = sha256_of(path)
        if actual != expected:
            raise IntegrityError(f"{path}: its SHA-256 does not match {directory / SUMS_FILE}: {remake}")
    return VerifiedDir(directory, listed, kept)


def normalise_modes(directory: Path) -> None:
    """Give a folder built in ``mkdtemp`` (0700) and its files (some writers make 0600) the modes of
    any other output: 0755 / 0644 under the usual umask."""
    directory = Path(directory)
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), DIR_MODE)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, FILE_MODE)
    os.chmod(directory, DIR_MODE)


def new_dir_beside(directory: Path) -> Path:
    """An empty folder beside ``directory`` (same file system), to build an artefact in: named for
    this process, after the temporaries of killed writers there are removed (``csbench.io``)."""
    return temporary_beside(directory, directory=True)


def publish_dir(tmp: Path, directory: Path) -> str:
    """Seal the artefact built in ``tmp`` (its ``SHA256SUMS`` written last, modes as any output's) and
    move it to ``directory``, replacing an older one without a moment where a half-written one is
    there (the old one is renamed aside first, then removed). Returns the sidecar's digest."""
    tmp, directory = Path(tmp), Path(directory)
    digest = write_sums(tmp)
    normalise_modes(tmp)
    if directory.exists():
        old = directory.with_name(f".{directory.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, directory)
    return digest


def array_from_npy(data: bytearray, where: str):
    """The array of a ``.npy`` file's bytes (as :func:`verify_dir` returned them), without a copy and
    without pickle: an object array (whose items ``np.load`` would unpickle) is refused, as
    ``np.load(allow_pickle=False)`` refuses it."""
    import io

    import numpy as np

    handle = io.BytesIO(memoryview(data)[: 1 << 16])  # the magic and the header (a few hundred bytes)
    try:
        major, _minor = np.lib.format.read_magic(handle)
        read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(handle)
    except ValueError as err:
        raise IntegrityError(f"{where}: not a .npy array ({err})") from None
    if dtype.hasobject:
        raise IntegrityError(f"{where}: an object array (it would need pickle): refused")
    count = int(np.prod(shape, dtype=np.int64))
    offset = handle.tell()
    if offset + count * dtype.itemsize != len(data):
        raise IntegrityError(f"{where}: {len(data)} bytes for a {dtype} array of shape {shape}")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)
