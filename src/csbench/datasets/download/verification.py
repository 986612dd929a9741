"""Checksums: pins, trust on first use, quick re-measurement by size and mtime, and trees of extracted files."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from csbench.datasets.base import RemoteFile
from csbench.datasets.download.layout import _UNPINNED, CHUNK, ChecksumError, Layout, archive_kind, archive_stem
from csbench.io import sha256_file

# --------------------------------------------------------------------------- verification


def pins_of(remote: RemoteFile | None) -> tuple[str, ...]:
    """Every pinned checksum of a file, ``"sha256:<hex>"`` / ``"git-blob:<hex>"``; () when unpinned."""
    if remote is None:
        return ()
    main = (f"sha256:{remote.sha256.lower()}",) if remote.sha256 else ()
    return main + tuple(pin.lower() for pin in getattr(remote, "pins", ()) or ())


def git_blob_id(path: Path) -> str:
    """The git object id of a file's content (``git hash-object``): SHA-1 of ``blob <size>\\0<bytes>``."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def unpinned_reason(remote: RemoteFile) -> str:
    """Why a file has no pinned checksum, from its note ("Not pinned: <reason>")."""
    match = _UNPINNED.search(remote.note or "")
    return match.group(1).strip() if match else "no reason recorded"


def _describe_pins(pins: tuple[str, ...]) -> str:
    return ", ".join(pin.replace("git-blob:", "git blob id ").replace("sha256:", "sha256 ") for pin in pins)


def _downloaded_record(remote: RemoteFile, path: Path, digest: str, how: str) -> dict[str, Any]:
    """The MANIFEST record of a file this run downloaded to ``path`` (verified by ``how``)."""
    status = path.stat()
    record = {
        "sha256": digest,
        "size": status.st_size,
        "mtime_ns": status.st_mtime_ns,
        "pinned": bool(pins_of(remote)),
        "verified": how,
    }
    if how == "pinned git blob id":
        record["git_blob"] = git_blob_id(path)
    return record


@dataclass(frozen=True)
class Expected:
    """What a file must be: its pinned checksums, or the sha256 recorded earlier (trust on first
    use); ``accept``: a recorded checksum may change (``--accept-changed``)."""

    remote: RemoteFile | None
    recorded: str | None = None
    accept: bool = False

    @property
    def how(self) -> str:
        if pins_of(self.remote):
            return "pinned checksum"
        return "recorded checksum" if self.recorded else "first use"

    def check(
        self, path: Path, sha256: str | None = None, git_blob: str | None = None
    ) -> tuple[str | None, str | None, str]:
        """(why ``path`` is not the expected file or None, its sha256, how it was verified). The
        size comes first (cheap); ``sha256`` / ``git_blob`` are known digests of the file (not
        measured again)."""
        size = self.remote.size if self.remote is not None else None
        actual_size = path.stat().st_size
        if size is not None and actual_size != size:
            return f"size {actual_size:,} bytes, expected {size:,}", None, self.how
        digest = sha256 or sha256_file(path)
        pins = pins_of(self.remote)
        if pins:
            if f"sha256:{digest}" in pins:
                return None, digest, "pinned checksum"
            blobs = [pin.split(":", 1)[1] for pin in pins if pin.startswith("git-blob:")]
            if blobs and (git_blob or git_blob_id(path)) in blobs:
                return None, digest, "pinned git blob id"
            if len(pins) == 1 and pins[0].startswith("sha256:"):
                return f"sha256 {digest} does not match the pinned checksum {pins[0][7:]}", digest, self.how
            return f"sha256 {digest} matches none of the pinned checksums ({_describe_pins(pins)})", digest, self.how
        if self.recorded and digest != self.recorded:
            if self.accept:
                return None, digest, "accepted change"
            return f"sha256 {digest} does not match the recorded checksum {self.recorded}", digest, self.how
        return None, digest, "recorded checksum" if self.recorded else "first use"


def _same_stat(path: Path, record: dict[str, Any] | None) -> bool:
    """Whether ``path`` has the size and modification time ``record`` noted (its sha256 then stands)."""
    if not record or not record.get("sha256") or record.get("mtime_ns") is None:
        return False
    status = path.stat()
    return status.st_size == record.get("size") and status.st_mtime_ns == record.get("mtime_ns")


def quick_sha256(path: Path, record: dict[str, Any] | None, rehash: bool = False) -> str:
    """The recorded sha256 where size and mtime are unchanged (and not ``rehash``), else measured."""
    return str(record["sha256"]) if record and not rehash and _same_stat(path, record) else sha256_file(path)


def check_file(
    path: Path, shown: str, expected: Expected, record: dict[str, Any] | None, *, rehash: bool = False
) -> dict[str, Any]:
    """Verify a file on disk; its record ``{sha256, size, mtime_ns, pinned, verified[, git_blob]}``.
    ``record``: what MANIFEST.json noted of it (a sha256 it keeps while size and mtime are unchanged).
    Raises :class:`ChecksumError` naming the file."""
    known = _same_stat(path, record) and not rehash
    sha = str(record["sha256"]) if known and record else None
    blob = record.get("git_blob") if known and record else None
    problem, digest, how = expected.check(path, sha, blob)
    if problem:
        if expected.how == "pinned checksum":
            advice = (
                "It is not the release's file: replace it with that file (or delete it to download it), then re-run."
            )
        else:
            advice = (
                "It changed since MANIFEST.json recorded it: put the recorded file back, or accept yours with "
                "--accept-changed, then re-run."
            )
        raise ChecksumError(f"{shown}: {problem}. {advice}")
    status = path.stat()
    entry: dict[str, Any] = {
        "sha256": digest,
        "size": status.st_size,
        "mtime_ns": status.st_mtime_ns,
        "pinned": bool(pins_of(expected.remote)),
        "verified": how,
    }
    if how == "pinned git blob id":
        entry["git_blob"] = blob or git_blob_id(path)
    return entry


def tree_digest(root: Path, files: Iterable[str]) -> dict[str, Any]:
    """Checksums of extracted files (paths relative to ``root``): per file, total bytes, and one
    sha256 over all of them. Symbolic links count by their target text."""
    per_file: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for rel in sorted(files):
        path = root / rel
        if path.is_symlink():
            data = os.readlink(path).encode()
            per_file[rel], sizes[rel] = hashlib.sha256(data).hexdigest(), len(data)
        else:
            per_file[rel], sizes[rel] = sha256_file(path), path.stat().st_size
    return _tree_record(per_file, sizes)


def _tree_record(per_file: dict[str, str], sizes: dict[str, int]) -> dict[str, Any]:
    combined = hashlib.sha256("".join(f"{rel}\0{sha}\n" for rel, sha in sorted(per_file.items())).encode())
    return {
        "tree_sha256": combined.hexdigest(),
        "count": len(per_file),
        "bytes": sum(sizes.values()),
        "files": dict(sorted(per_file.items())),
        "sizes": dict(sorted(sizes.items())),
    }


def without_files(record: dict[str, Any], overwritten: Iterable[str]) -> dict[str, Any]:
    """An extraction record without the files another archive of the dataset unpacked over it."""
    gone = set(overwritten)
    per_file = {rel: sha for rel, sha in record.get("files", {}).items() if rel not in gone}
    sizes = {rel: size for rel, size in record.get("sizes", {}).items() if rel in per_file}
    return _tree_record(per_file, sizes)


def _exists(path: Path) -> bool:
    return path.is_symlink() or path.exists()


def unpacks_to(remote: RemoteFile) -> tuple[str, ...]:
    """Top-level paths (relative to the archive's directory; directories end in ``/``) its content
    unpacks to: ``RemoteFile.unpacks_to`` where the spec declares it, else the archive's name without
    its suffix, as the official archives are laid out."""
    declared = getattr(remote, "unpacks_to", None)
    if declared:
        return tuple(declared)
    name = PurePosixPath(remote.path).name
    return (archive_stem(name) + ("" if archive_kind(name) == "gz" else "/"),)


def hand_extracted_files(layout: Layout, remote: RemoteFile) -> list[str] | None:
    """Files (relative to the dataset directory) a user placed instead of the archive, recognised
    by ``unpacks_to``: every path there, directories holding at least one file; else None. (Only for
    specs without ``needs``: with them, the reader's own paths say what must be there.)"""
    found: list[str] = []
    for top in unpacks_to(remote):
        target = layout.extract_dir(remote) / top.rstrip("/")
        if top.endswith("/"):
            inside = [p for p in target.rglob("*") if p.is_file() or p.is_symlink()] if target.is_dir() else []
        else:
            inside = [target] if target.is_file() else []
        if not inside:
            return None
        found.extend(p.relative_to(layout.dataset_dir).as_posix() for p in inside)
    return sorted(found)
