"""Download phase: make present and verify exactly the files a release's reader reads, under ``data/raw/<dataset>/``.

Layout below ``raw_root`` (``data/raw`` by default)::

    <dataset>/<path>                  a plain file of the release; only ever complete and verified
    <dataset>/.archives/<path>        an archive (``extract=True``) as downloaded, kept to restore from
    <dataset>/<its content>           what the archive unpacks to, beside where <path> would lie
    <dataset>/MANIFEST.json           what is there: measured sha256, size, mtime, source, pinned or not
    <dataset>/SHA256SUMS              the sha256 of every file the reader reads (``sha256sum -c`` format),
                                      written only when all of them are present and verified
    .partial/<dataset>/<path>.part    an unfinished download, resumed by the next attempt or run
    .partial/<dataset>/<path>.part.json   the URL and validator (ETag) that partial file came from

Partial files live outside ``<dataset>/``, so a final path never holds partial content, and they
are renamed into place only after their size and checksum are verified.

What is needed. A release declares ``DatasetSpec.needs``: from the reader's options and what lies in
the dataset directory, the paths its reader reads (:class:`~csbench.datasets.base.Need`); a file of
the release that yields none of them is neither downloaded nor required. A needed path already
present (downloaded earlier, or placed by hand) is used as it is; an absent one is made present from
its sources: a plain file downloaded, an archive verified (kept, or placed by hand as
``<dataset>/<path>``) or downloaded, then unpacked without overwriting any file that was there before
this run. A spec without ``needs`` needs every one of its files (an archive: the archive, or its
extracted content recognised by ``unpacks_to``; a file without URLs only where present).

Verification. A file with pinned checksums (``RemoteFile.sha256`` and ``RemoteFile.pins``: sha256 of
another published version, or the git object id of the file in a public repository) must match one
of them. Otherwise the first sha256 measured is recorded in MANIFEST.json (trust on first use). A file
whose size and modification time are those recorded keeps its recorded checksum; any other is hashed
again (``rehash`` hashes every file).

Changes. Once recorded, what the reader reads may not change unnoticed: a file whose content differs
from its record, a file the reader reads now and did not before (a new file in a directory it reads,
or a file it prefers over the ones it read: a derived jsonl instead of a URL list) or one it no longer
reads, with the same options, stop the download (:class:`ChangedError`) until the user puts the
recorded files back or accepts the new ones (``accept_changed``, ``csbench download
--accept-changed``). Missing files are not changes: they are downloaded or unpacked again.
:func:`raw_changes` is that test on its own: the Snakefile passes its answer as a parameter of the
download rule, so snakemake re-runs download (which then stops, or after an acceptance records the
new checksums, and SHA256SUMS triggers ``prepare``); dvc tracks ``data/raw/<dataset>`` as the
download stage's output and ``SHA256SUMS`` as the prepare stage's dependency.

Archives. A user may place either the archive (at ``<dataset>/<path>`` or ``<dataset>/.archives/<path>``;
it is verified, moved to ``.archives/`` and unpacked) or the extracted files the reader reads. Archives
of one dataset may unpack into the same directory: a file both contain belongs to the later one
unpacked in the same run. A ``RemoteFile`` without URLs (derived by a release's own script) is
verified when present; when needed and absent, the error says how to derive it.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import socket
import stat
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tqdm import tqdm

from csbench.datasets.base import DatasetSpec, Need, RemoteFile
from csbench.io import canonical_hash, sha256_file, temporary_beside, write_json, write_text

log = logging.getLogger(__name__)

MANIFEST_NAME = "MANIFEST.json"
SUMS_NAME = "SHA256SUMS"
MANIFEST_FORMAT = 2  # 2: per-file records of what the reader reads ("reads"), with size and mtime
ARCHIVES_DIR = ".archives"
PARTIAL_DIR = ".partial"
PLACED_BY_HAND = "placed by hand"
OFFLINE_ENV = "CSBENCH_OFFLINE"  # "1" / "true" / "yes": never touch the network (when offline=None)
USER_AGENT = "csbench-download/0.1 (+python-urllib)"
CHUNK = 1 << 20
ARCHIVE_SUFFIXES = {  # suffix -> kind, longest first so ".tar.gz" wins over ".gz"
    ".tar.gz": "tar",
    ".tar.bz2": "tar",
    ".tar.xz": "tar",
    ".tgz": "tar",
    ".tbz2": "tar",
    ".txz": "tar",
    ".tar": "tar",
    ".zip": "zip",
    ".gz": "gz",
}
SPECIAL_FILE = "is a device or special file; nothing was extracted"
RESERVED_NAMES = (MANIFEST_NAME, SUMS_NAME, ARCHIVES_DIR)  # top-level names an archive may not unpack to
PIN_KINDS = ("sha256", "git-blob")  # RemoteFile.pins: "<kind>:<lower-case hex>"
_UNPINNED = re.compile(r"\bnot pinned\b[:,]?\s*(.+?)(?:\.\s|\.?$)", re.IGNORECASE | re.DOTALL)


class DownloadError(RuntimeError):
    """A dataset file is missing and could not be downloaded, or is present but fails verification."""


class ChecksumError(DownloadError):
    """A file (present, or just downloaded) does not have the expected size or checksum."""


class UnsafeArchiveError(DownloadError):
    """An archive member would land outside the target directory, or is a device file."""


class ChangedError(DownloadError):
    """What the reader reads changed since MANIFEST.json recorded it (content, or which files)."""


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Where the files of one dataset live below ``raw_root``."""

    raw_root: Path
    name: str

    @property
    def dataset_dir(self) -> Path:
        return self.raw_root / self.name

    @property
    def manifest(self) -> Path:
        return self.dataset_dir / MANIFEST_NAME

    @property
    def sums(self) -> Path:
        return self.dataset_dir / SUMS_NAME

    def file_path(self, remote: RemoteFile) -> Path:
        """The final path of a plain file (or where a user may drop an archive by hand)."""
        return self.dataset_dir / remote.path

    def archive_path(self, remote: RemoteFile) -> Path:
        """Where a downloaded (or hand-placed, then moved) archive is kept."""
        return self.dataset_dir / ARCHIVES_DIR / remote.path

    def extract_dir(self, remote: RemoteFile) -> Path:
        """The directory an archive unpacks into: the one its ``path`` lies in."""
        return self.dataset_dir / PurePosixPath(remote.path).parent

    def partial_path(self, remote: RemoteFile) -> Path:
        return self.raw_root / PARTIAL_DIR / self.name / f"{remote.path}.part"

    def resolve(self, path: str) -> Path:
        """A path of a need or of MANIFEST.json's ``reads``: relative to the dataset directory, or absolute."""
        candidate = Path(path)
        return candidate if candidate.is_absolute() else self.dataset_dir / path

    def shown(self, path: str) -> str:
        return str(self.resolve(path))


def archive_kind(filename: str) -> str:
    """``"zip"``, ``"tar"`` (.tar.gz / .tgz / .tar and friends) or ``"gz"`` (one gzipped file)."""
    lower = filename.lower()
    for suffix, kind in ARCHIVE_SUFFIXES.items():
        if lower.endswith(suffix):
            return kind
    raise DownloadError(f"{filename}: not a supported archive (.zip, .tar.gz, .tgz, .tar, .gz)")


def archive_stem(filename: str) -> str:
    """The name without its archive suffix: ``ruby.zip`` -> ``ruby``, ``a.jsonl.gz`` -> ``a.jsonl``."""
    lower = filename.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            return filename[: -len(suffix)]
    return filename


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
                "It is not the release's file: replace it with that file (or delete it to download it), "
                "then re-run."
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


# --------------------------------------------------------------------------- archives


def _is_absolute(name: str) -> bool:
    return name.startswith("/") or bool(re.match(r"^[A-Za-z]:", name))


def safe_member_path(name: str, archive: str) -> str:
    """The member's normalised relative path; ``UnsafeArchiveError`` for absolute paths and ``..``."""
    posix = name.replace("\\", "/")
    if "\0" in posix or _is_absolute(posix):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; nothing was extracted")
    parts = [p for p in posix.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} has a '..' component; nothing was extracted")
    return "/".join(parts)


def is_plain_relative(path: str) -> bool:
    """True for a relative POSIX path without ``.``, ``..``, empty components or backslashes."""
    parts = path.split("/")
    return bool(path) and "\\" not in path and not _is_absolute(path) and all(p not in ("", ".", "..") for p in parts)


def check_no_link_prefix(member: str, links: set[str], archive: str) -> None:
    """Reject a member below a symbolic link of the same archive (it would be written through it)."""
    parts = member.split("/")
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) in links:
            raise UnsafeArchiveError(
                f"{archive}: member {member!r} lies below the link {'/'.join(parts[:i])!r}; nothing was extracted"
            )


def check_link_target(member: str, target: str, links: set[str], archive: str, *, hard: bool = False) -> None:
    """A link must point inside the archive without passing through another link.

    A symbolic link's target is relative to the link's directory, a hard link's to the archive root.
    """
    kind = "hard link" if hard else "symbolic link"
    outside = UnsafeArchiveError(
        f"{archive}: member {member!r} is a {kind} to {target!r}, outside the archive; nothing was extracted"
    )
    posix = target.replace("\\", "/")
    if not posix or _is_absolute(posix):
        raise outside
    parts = [] if hard else member.split("/")[:-1]
    components = [c for c in posix.split("/") if c not in ("", ".")]
    for i, comp in enumerate(components):
        if comp == "..":
            if not parts:
                raise outside
            parts.pop()
            continue
        parts.append(comp)
        if i < len(components) - 1 and "/".join(parts) in links:
            raise UnsafeArchiveError(
                f"{archive}: member {member!r} is a {kind} through the link {'/'.join(parts)!r}; nothing was extracted"
            )


def _zip_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) if info.create_system == 3 else 0  # Unix mode only from Unix zips


def _check_zip(zf: zipfile.ZipFile, archive: str) -> list[tuple[zipfile.ZipInfo, str, str | None]]:
    """Validated members of a zip: (info, safe path, link target or None)."""
    infos = zf.infolist()
    names = {id(i): safe_member_path(i.filename, archive) for i in infos}
    links = {names[id(i)] for i in infos if stat.S_ISLNK(_zip_mode(i))}
    plan = []
    for info in infos:
        name, mode = names[id(info)], _zip_mode(info)
        check_no_link_prefix(name, links, archive)
        target = None
        if stat.S_ISLNK(mode):
            target = zf.read(info).decode("utf-8", "surrogateescape")
            check_link_target(name, target, links, archive)
        elif stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise UnsafeArchiveError(f"{archive}: member {info.filename!r} {SPECIAL_FILE}")
        if name:
            plan.append((info, name, target))
    return plan


def _check_tar(tf: tarfile.TarFile, archive: str) -> None:
    """Validate every member of a tar archive before anything is extracted."""
    members = tf.getmembers()
    names = {id(m): safe_member_path(m.name, archive) for m in members}
    links = {names[id(m)] for m in members if m.issym()}
    for member in members:
        name = names[id(member)]
        check_no_link_prefix(name, links, archive)
        if member.issym():
            check_link_target(name, member.linkname, links, archive)
        elif member.islnk():
            check_link_target(name, member.linkname, links, archive, hard=True)
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchiveError(f"{archive}: member {member.name!r} {SPECIAL_FILE}")


def _unpack(archive: Path, into: Path, label: str) -> None:
    """Unpack ``archive`` into the empty directory ``into`` after validating all its members."""
    kind = archive_kind(archive.name)
    if kind == "gz":
        with gzip.open(archive, "rb") as src, open(into / archive_stem(archive.name), "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
    elif kind == "zip":
        with zipfile.ZipFile(archive) as zf:
            for info, name, target in _check_zip(zf, label):
                dest = into / name
                if info.is_dir():
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                if target is not None:
                    os.symlink(target, dest)
                else:
                    with zf.open(info) as src, open(dest, "wb") as dst:
                        shutil.copyfileobj(src, dst, CHUNK)
    else:
        with tarfile.open(archive, "r:*") as tf:
            _check_tar(tf, label)
            tf.extractall(into, filter="data")  # the stdlib's own checks as a second line of defence


def _planned_moves(tmp: Path) -> list[str]:
    """Files and links below ``tmp`` (relative posix paths); links to directories are not followed."""
    moves = []
    for dirpath, dirnames, filenames in os.walk(tmp):
        here = Path(dirpath)
        for d in list(dirnames):
            if (here / d).is_symlink():
                moves.append((here / d).relative_to(tmp).as_posix())
                dirnames.remove(d)
        moves.extend((here / f).relative_to(tmp).as_posix() for f in filenames)
    return sorted(moves)


def _check_moves(moves: list[str], dest: Path, dataset_dir: Path, label: str) -> None:
    """Refuse, before moving anything, files that would replace a directory, go through a file or
    link, or take a name the download phase itself uses."""
    for rel in moves:
        target = dest / rel
        top = target.relative_to(dataset_dir).parts[0]
        if top in RESERVED_NAMES:
            raise UnsafeArchiveError(f"{label}: member {rel!r} would overwrite {top}; nothing was extracted")
        if target.is_dir() and not target.is_symlink():
            raise DownloadError(f"{label}: member {rel!r} would replace the directory {target}; nothing was extracted")
        for parent in PurePosixPath(rel).parents:
            p = dest / parent
            if str(parent) != "." and (p.is_symlink() or (p.exists() and not p.is_dir())):
                raise DownloadError(f"{label}: member {rel!r} would be written through {p}; nothing was extracted")


def extract_archive(
    archive: Path,
    dest: Path,
    dataset_dir: Path,
    label: str | None = None,
    *,
    keep: Callable[[Path], bool] | None = None,
) -> list[str]:
    """Unpack ``archive`` into ``dest`` (inside ``dataset_dir``); return the files placed, relative
    to ``dataset_dir``.

    Everything is unpacked into a temporary directory beside the target and each file is then renamed
    into place, after every member was checked (absolute paths, ``..``, links pointing outside,
    device files) and every destination was checked for conflicts, so a failure places nothing.
    An interrupted run may leave some complete files placed; MANIFEST.json does not record the
    extraction then, so the next run unpacks again. ``keep(path)`` True for an existing destination
    leaves it as it is (the member is not placed, nor returned).
    """
    label = label or archive.name
    dest.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(dest / f"extract-{archive.name}", directory=True)  # named for this process
    try:
        try:
            _unpack(archive, tmp, label)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
            if isinstance(exc, tarfile.FilterError):
                raise UnsafeArchiveError(f"{label}: {exc}; nothing was extracted") from exc
            raise DownloadError(f"{label}: cannot unpack ({type(exc).__name__}: {exc}); nothing was extracted") from exc
        moves = _planned_moves(tmp)
        if keep is not None:
            moves = [rel for rel in moves if not (_exists(dest / rel) and keep(dest / rel))]
        _check_moves(moves, dest, dataset_dir, label)
        for rel in moves:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / rel, dest / rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted((dest / rel).relative_to(dataset_dir).as_posix() for rel in moves)


# --------------------------------------------------------------------------- network


class _UrlFailure(Exception):
    """One attempt at one URL failed. ``permanent``: do not retry this URL; ``connection``: no
    HTTP response at all (as when offline)."""

    def __init__(self, message: str, *, permanent: bool = False, connection: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.connection = connection


class NotFetched(Exception):
    """A file is missing and no URL delivered it: ``reasons`` per URL, for the error message;
    ``offline``: every failure was a connection failure (or offline mode)."""

    def __init__(self, reasons: list[str], *, offline: bool = False) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons
        self.offline = offline


def parse_content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total length) of ``bytes a-b/total`` or ``bytes */total``; None where absent."""
    match = re.fullmatch(r"\s*bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)\s*", value or "")
    if not match:
        return None, None
    first, total = match.groups()
    return (int(first) if first else None), (int(total) if total and total != "*" else None)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def discard(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _sidecar(partial: Path) -> Path:
    return partial.with_name(partial.name + ".json")


def _open(url: str, offset: int, validator: str | None, timeout: float) -> Any:
    """Open ``url`` asking for the bytes from ``offset`` on; map failures to ``_UrlFailure``."""
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and offset:
            return exc  # the caller decides: complete already, or restart
        permanent = exc.code < 500 and exc.code not in (408, 425, 429)
        raise _UrlFailure(f"HTTP {exc.code} {exc.reason}", permanent=permanent) from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        unreachable = isinstance(reason, socket.gaierror) or getattr(reason, "errno", None) == errno.ENETUNREACH
        raise _UrlFailure(f"cannot connect: {reason}", permanent=unreachable, connection=True) from exc
    except (OSError, http.client.HTTPException) as exc:
        raise _UrlFailure(f"cannot connect: {exc}", connection=True) from exc


def transfer(url: str, partial: Path, *, timeout: float, size: int | None, progress: bool, label: str) -> None:
    """One attempt: fetch ``url`` into ``partial``, resuming with an HTTP Range request when the
    partial file came from the same URL (its ``.part.json`` says so). A server that ignores the
    range (200) restarts the file. Raises ``_UrlFailure``; returns when the transfer is complete."""
    meta_path = _sidecar(partial)
    meta = _read_json(meta_path) if partial.exists() else {}
    offset = partial.stat().st_size if meta.get("url") == url else 0
    response = _open(url, offset, meta.get("validator"), timeout)
    if isinstance(response, urllib.error.HTTPError):  # 416: nothing left from offset on
        if parse_content_range(response.headers.get("Content-Range"))[1] == offset:
            return
        discard(partial, meta_path)
        raise _UrlFailure(f"server refused to resume at byte {offset:,}; restarting")
    with response:
        status = getattr(response, "status", None) or 200
        length = response.headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        if status == 206:
            first, total = parse_content_range(response.headers.get("Content-Range"))
            if first != offset:
                discard(partial, meta_path)
                raise _UrlFailure(f"server resumed at byte {first}, not {offset:,}; restarting")
            if total is None and length is not None:
                total = offset + length
        else:
            offset, total = 0, length
        if size is not None and total is not None and total != size:
            if offset:
                discard(partial, meta_path)
            raise _UrlFailure(f"server announces {total:,} bytes, expected {size:,}", permanent=True)
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        if validator and validator.startswith("W/"):
            validator = response.headers.get("Last-Modified")  # If-Range needs a strong validator
        partial.parent.mkdir(parents=True, exist_ok=True)
        write_json(meta_path, {"url": url, "validator": validator, "total": total})
        written, interrupted = offset, None
        with (
            open(partial, "ab" if offset else "wb") as out,
            tqdm(
                total=total,
                initial=offset,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                desc=label,
                disable=not progress,
            ) as bar,
        ):
            try:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    written += len(chunk)
                    bar.update(len(chunk))
            except (OSError, http.client.HTTPException) as exc:
                interrupted = exc
            out.flush()
            os.fsync(out.fileno())
    if total is not None and written < total:
        raise _UrlFailure(f"connection closed after {written:,} of {total:,} bytes")
    if total is not None and written > total:
        discard(partial, meta_path)
        raise _UrlFailure(f"server sent {written:,} bytes, more than the {total:,} it announced")
    if interrupted is not None:
        raise _UrlFailure(f"transfer interrupted after {written:,} bytes: {interrupted}")


def move_into_place(src: Path, dest: Path) -> None:
    """Rename ``src`` onto ``dest`` (copying beside ``dest`` first if they are on different disks)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(src, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        tmp = temporary_beside(dest)
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
        finally:
            discard(Path(tmp))
        discard(src)


@dataclass(frozen=True)
class Fetcher:
    """Network settings of one ``fetch_dataset`` call."""

    retries: int = 3
    timeout: float = 60
    backoff: float = 1.0
    progress: bool = True
    offline: bool = False

    def download(self, remote: RemoteFile, layout: Layout, dest: Path, expected: Expected) -> tuple[str, str, str]:
        """Download ``remote`` to ``dest`` via its partial file: (URL used, sha256, how it was
        verified), or raise ``NotFetched``.

        URLs in order, each with ``retries`` attempts (a resumed transfer is an attempt) and
        exponential backoff. The size and checksum are verified before the rename into place; a
        mismatch deletes the partial file and moves on to the next URL.
        """
        partial = layout.partial_path(remote)
        if self.offline:
            raise NotFetched(["offline mode: the network was not used"], offline=True)
        if not remote.urls:
            raise NotFetched(["no URL known"])
        reasons, connection_only = [], True
        for url in remote.urls:
            failure, attempts = self._try(url, partial, remote)
            if failure is not None:
                connection_only = connection_only and failure.connection
                tries = f" (after {attempts} attempts)" if attempts > 1 else ""
                reasons.append(f"{url}: {failure}{tries}")
                continue
            problem, digest, how = expected.check(partial)
            if problem:
                discard(partial, _sidecar(partial))
                connection_only = False
                reasons.append(f"{url}: wrong file, {problem}; deleted it")
                continue
            move_into_place(partial, dest)
            discard(_sidecar(partial))
            _remove_empty_dirs(partial.parent, stop=layout.raw_root / PARTIAL_DIR)
            return url, digest, how
        if partial.exists():
            reasons.append(f"{partial.stat().st_size:,} bytes are kept in {partial} for resuming (re-run to continue)")
        raise NotFetched(reasons, offline=connection_only)

    def _try(self, url: str, partial: Path, remote: RemoteFile) -> tuple[_UrlFailure | None, int]:
        """Up to ``retries`` attempts at ``url`` with exponential backoff: (last failure or None, attempts)."""
        failure, label = None, remote.path
        for attempt in range(max(1, self.retries)):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                transfer(url, partial, timeout=self.timeout, size=remote.size, progress=self.progress, label=label)
                return None, attempt + 1
            except _UrlFailure as exc:
                failure = exc
                if exc.permanent:
                    return exc, attempt + 1
        return failure, max(1, self.retries)


def _remove_empty_dirs(start: Path, stop: Path) -> None:
    """Remove ``start`` and its parents up to and including ``stop`` while they are empty."""
    for directory in [start, *start.parents]:
        with contextlib.suppress(OSError):
            directory.rmdir()
        if directory == stop:
            break


# --------------------------------------------------------------------------- what the reader reads


def _owns(need_path: str, path: str) -> bool:
    """Whether ``path`` (a key of MANIFEST.json's ``reads``) belongs to the need at ``need_path``."""
    if not need_path.endswith("/"):
        return path == need_path
    return path.startswith(need_path) and "/" not in path[len(need_path) :]


def default_needs(spec: DatasetSpec, layout: Layout) -> tuple[Need, ...]:
    """Every file of a spec without ``needs``, by its own path (an archive: the archive or its
    extracted content); a file without URLs only where present (the reader derives it otherwise)."""
    return tuple(
        Need(remote.path)
        for remote in spec.files
        if remote.urls or remote.extract or layout.file_path(remote).exists()
    )


def resolve_needs(spec: DatasetSpec, options: dict[str, Any] | None, layout: Layout) -> tuple[Need, ...]:
    """What the reader of ``spec`` reads with ``options`` and what lies in the dataset directory now."""
    if spec.needs is None:
        return default_needs(spec, layout)
    try:
        declared = tuple(spec.needs(dict(options or {}), layout.dataset_dir))
    except ValueError as exc:  # a reader refusing an option (ReaderError): the config names it first
        raise DownloadError(f"dataset {spec.name!r}: {exc}") from exc
    remotes = {remote.path for remote in spec.files}
    needs: dict[str, Need] = {}
    for need in declared:
        unknown = [source for source in need.sources if source not in remotes]
        if unknown:
            raise DownloadError(f"dataset {spec.name!r}: need {need.path!r} names unknown source(s) {unknown}")
        needs.setdefault(need.path, need)
    return tuple(needs.values())


def need_files(layout: Layout, need: Need) -> list[str]:
    """The files of ``need`` present now, as MANIFEST.json's ``reads`` names them: the path itself,
    or for a directory the files directly in it whose names match its pattern."""
    target = layout.resolve(need.path)
    if not need.path.endswith("/"):
        return [need.path] if target.is_file() else []
    if not target.is_dir():
        return []
    pattern = re.compile(need.pattern) if need.pattern else None
    return sorted(
        need.path + entry.name
        for entry in target.iterdir()
        if entry.is_file() and (pattern is None or pattern.search(entry.name))
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def load_manifest(path: Path) -> dict[str, Any]:
    """An existing MANIFEST.json as a whole ({} when there is none)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("files", []), list):
            raise TypeError("not an object with a list of files")
        for entry in data.get("files", []):
            entry["path"]  # every entry names its file (KeyError otherwise)
    except (ValueError, KeyError, TypeError) as exc:
        raise DownloadError(f"{path}: not a valid MANIFEST ({exc}); delete it to record the files afresh") from exc
    return data


def recorded_reads(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What MANIFEST.json recorded of the files the reader reads; for a format-1 MANIFEST (no
    ``reads``), the checksums of its plain files and extracted files (no size or time: measured again)."""
    if manifest.get("format") == MANIFEST_FORMAT:
        return dict(manifest.get("reads") or {})
    reads: dict[str, dict[str, Any]] = {}
    for entry in manifest.get("files", []):
        if entry.get("extracted"):
            for rel, sha in entry["extracted"].get("files", {}).items():
                reads[rel] = {"sha256": sha, "source": entry.get("source")}
        elif entry.get("sha256") and not entry.get("archive"):
            reads[entry["path"]] = {"sha256": entry["sha256"], "source": entry.get("source")}
    return reads


def _content_change(rel: str, now: str, record: dict[str, Any]) -> str:
    return f"{rel}: content changed: sha256 {now} does not match the recorded checksum {record.get('sha256')}"


def raw_changes(
    spec: DatasetSpec,
    options: dict[str, Any] | None = None,
    raw_root: Path = Path("data/raw"),
    *,
    refresh: bool = False,
) -> list[str]:
    """How what the reader reads differs from what MANIFEST.json recorded ([] when it does not, or
    when nothing is recorded yet): files whose content changed (measured again only where size or
    modification time differ from the record), and, with the options of the record, files read now
    and not before or the other way round. Missing files are no change (download restores them).

    Cheap where nothing changed (a stat per file): the Snakefile calls it for every dataset, and
    download and prepare call it before they use the files. ``refresh``: note in MANIFEST.json the
    new size and time of files found unchanged in content (a copy of the project, a checkout), so
    that they are not measured again on every call."""
    layout = Layout(Path(raw_root), spec.name)
    manifest = load_manifest(layout.manifest)
    reads = recorded_reads(manifest) if manifest.get("format") == MANIFEST_FORMAT else {}
    if not reads:
        return []
    changes: list[str] = []
    same_content: list[str] = []  # measured again (size or time changed), the same content

    def compare(rel: str, record: dict[str, Any]) -> None:
        path = layout.resolve(rel)
        if _same_stat(path, record):
            return
        now = sha256_file(path)
        if now != record.get("sha256"):
            changes.append(_content_change(rel, now, record))
        else:
            same_content.append(rel)

    if spec.needs is None:
        for rel, record in sorted(reads.items()):
            if layout.resolve(rel).is_file():
                compare(rel, record)
    else:
        same_options = _canonical(manifest.get("options") or {}) == _canonical(dict(options or {}))
        needs = resolve_needs(spec, options, layout)
        current: dict[str, Need] = {}
        for need in needs:
            for rel in need_files(layout, need):
                current.setdefault(rel, need)
        for rel, record in sorted(reads.items()):
            if rel in current:
                compare(rel, record)
            elif same_options and not any(_owns(need.path, rel) for need in needs):
                read = ", ".join(n.path for n in needs)
                changes.append(f"{rel}: read before, no longer read (the reader reads {read})")
        if same_options:
            before = list(manifest.get("needs") or [])
            satisfied = {path for path in before if any(_owns(path, rel) for rel in reads)}
            for rel, need in sorted(current.items()):
                if rel in reads:
                    continue
                if need.path in satisfied:
                    changes.append(f"{rel}: a new file in {need.path}, which the reader reads whole")
                elif need.path not in before:
                    changes.append(f"{rel}: read now, not before (the reader prefers it where present)")
    if refresh and same_content:
        _note_stat(layout, manifest, same_content)
    return changes


def _note_stat(layout: Layout, manifest: dict[str, Any], paths: list[str]) -> None:
    """Record the present size and modification time of files whose content is as recorded."""
    for rel in paths:
        status = layout.resolve(rel).stat()
        manifest["reads"][rel].update(size=status.st_size, mtime_ns=status.st_mtime_ns)
        for entry in manifest.get("files", []):
            if entry.get("path") == rel and entry.get("sha256") == manifest["reads"][rel]["sha256"]:
                entry.update(size=status.st_size, mtime_ns=status.st_mtime_ns)
    with contextlib.suppress(OSError):  # a read-only copy of the data: measured again next time
        write_json(layout.manifest, manifest)
    log.info("%s: %d file(s) with a new modification time and the recorded content", layout.name, len(paths))


def changes_text(spec: DatasetSpec, options: dict[str, Any] | None = None, raw_root: Path = Path("data/raw")) -> str:
    """:func:`raw_changes` as one string for a snakemake parameter ("" when nothing changed; the
    size and time of files found unchanged in content are noted); an unreadable MANIFEST.json is a
    change too (download then names the problem)."""
    try:
        return "\n".join(raw_changes(spec, options, raw_root, refresh=True))
    except DownloadError as exc:
        return f"unreadable: {exc}"


def config_changes(config: Any, dataset: str, raw_root: Path = Path("data/raw")) -> str:
    """:func:`changes_text` for a dataset of an experiment config (:class:`csbench.config.Config`);
    "" for a local corpus (nothing downloaded). The Snakefile's download rule takes it as a parameter."""
    from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND

    if config.dataset_kind(dataset) == LOCAL_SOURCE_KIND:
        return ""
    return changes_text(DATASETS.get(dataset), config.dataset_options(dataset), raw_root)


def changed_message(spec: DatasetSpec, layout: Layout, changes: list[str], command: str) -> str:
    lines = [
        f"dataset {spec.name!r}: what its reader reads changed since {layout.manifest} recorded it:",
        *(f"  - {change}" for change in changes),
        "The prepared data, attacks and scores were made from the recorded files, and nothing is made from the",
        "changed ones until you decide: put the recorded files back (sha256 above), or accept them as they are:",
        f"    {command} --accept-changed",
        "which verifies them (a file with a pinned checksum must still match it) and records their checksums;",
        "snakemake and dvc repro then prepare the dataset again and re-run everything after it.",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- one run


class _Run:
    """One ``fetch_dataset`` call: the files it verified, downloaded or unpacked, and what failed."""

    def __init__(
        self, spec: DatasetSpec, layout: Layout, net: Fetcher, manifest: dict[str, Any], *, accept: bool, rehash: bool
    ) -> None:
        self.spec, self.layout, self.net = spec, layout, net
        self.accept, self.rehash = accept, rehash
        self.remotes = {remote.path: remote for remote in spec.files}
        self.previous = {entry["path"]: entry for entry in manifest.get("files", [])}
        self.prev_reads = recorded_reads(manifest)
        self.entries: dict[str, dict[str, Any]] = {}  # RemoteFile path -> its entry (this run)
        self.fresh: dict[str, dict[str, Any]] = {}  # file placed this run -> {source, size, mtime_ns, ...}
        self.placed: set[Path] = set()  # files unpacked this run: a later archive may replace them
        self.not_fetched: list[tuple[RemoteFile, NotFetched]] = []
        self.failures: list[str] = []

    # ---- sources

    def _recorded(self, remote: RemoteFile) -> dict[str, Any] | None:
        return self.previous.get(remote.path) or self.prev_reads.get(remote.path)

    def _expected(self, remote: RemoteFile | None, record: dict[str, Any] | None) -> Expected:
        return Expected(remote, str(record["sha256"]).lower() if record and record.get("sha256") else None, self.accept)

    @staticmethod
    def _entry(remote: RemoteFile, record: dict[str, Any], source: str) -> dict[str, Any]:
        return {"path": remote.path, **record, "source": source}

    def ensure_plain(self, remote: RemoteFile) -> dict[str, Any]:
        """A plain file: verify it if present, else download it; its manifest entry."""
        final = self.layout.file_path(remote)
        recorded = self._recorded(remote)
        expected = self._expected(remote, recorded)
        if final.is_file():
            record = check_file(final, str(final), expected, recorded, rehash=self.rehash)
            earlier = recorded.get("source") if recorded and recorded.get("sha256") == record["sha256"] else None
            log.info("%s: present, verified (%s)", final, record["verified"])
            return self._entry(remote, record, earlier or PLACED_BY_HAND)
        url, digest, how = self.net.download(remote, self.layout, final, expected)
        log.info("%s: downloaded from %s, verified (%s)", remote.path, url, how)
        record = _downloaded_record(remote, final, digest, how)
        self.fresh[remote.path] = {"source": url, **record}
        return self._entry(remote, record, url)

    def _archive_entry(self, remote: RemoteFile) -> dict[str, Any] | None:
        """The kept (or hand-placed, then kept) archive, verified; None when neither is there."""
        kept, loose = self.layout.archive_path(remote), self.layout.file_path(remote)
        recorded = self.previous.get(remote.path)
        expected = self._expected(remote, recorded)
        if not kept.is_file() and loose.is_file():
            record = check_file(loose, str(loose), expected, None, rehash=True)
            move_into_place(loose, kept)
            log.info("%s: moved the archive placed by hand to %s", loose, kept)
            status = kept.stat()
            record.update(size=status.st_size, mtime_ns=status.st_mtime_ns)
            source = PLACED_BY_HAND
        elif kept.is_file():
            record = check_file(kept, str(kept), expected, recorded, rehash=self.rehash)
            earlier = recorded.get("source") if recorded and recorded.get("sha256") == record["sha256"] else None
            source = earlier or PLACED_BY_HAND
        else:
            return None
        return {**self._entry(remote, record, source), "archive": kept.relative_to(self.layout.dataset_dir).as_posix()}

    def _download_archive(self, remote: RemoteFile) -> dict[str, Any]:
        kept = self.layout.archive_path(remote)
        expected = self._expected(remote, self.previous.get(remote.path))
        url, digest, how = self.net.download(remote, self.layout, kept, expected)
        log.info("%s: downloaded from %s, verified (%s)", remote.path, url, how)
        record = _downloaded_record(remote, kept, digest, how)
        return {**self._entry(remote, record, url), "archive": kept.relative_to(self.layout.dataset_dir).as_posix()}

    def _keep(self, path: Path) -> bool:
        """An extraction leaves a file alone unless this run placed it (a later archive wins)."""
        return path not in self.placed

    def _unpack(self, remote: RemoteFile, entry: dict[str, Any], *, keep_all: bool = False) -> list[str]:
        """Unpack a verified archive, never over a file that was there before this run; the files placed."""
        kept = self.layout.archive_path(remote)
        files = extract_archive(
            kept,
            self.layout.extract_dir(remote),
            self.layout.dataset_dir,
            f"{remote.path} ({kept})",
            keep=(lambda _path: True) if keep_all else self._keep,
        )
        for rel in files:
            path = self.layout.dataset_dir / rel
            self.placed.add(path)
            if path.is_file() and not path.is_symlink():
                status = path.stat()
                self.fresh[rel] = {"source": remote.path, "size": status.st_size, "mtime_ns": status.st_mtime_ns}
        return files

    def obtain_archive(self, remote: RemoteFile) -> dict[str, Any]:
        """An archive a need is absent without: verified (or downloaded) and unpacked."""
        entry = self._archive_entry(remote) or self._download_archive(remote)
        files = self._unpack(remote, entry)
        paths = [self.layout.dataset_dir / rel for rel in files]
        entry["unpacked"] = {"count": len(files), "bytes": sum(p.stat().st_size for p in paths if p.is_file())}
        return entry

    # ---- a spec without needs: every file

    def _current(self, files: dict[str, str]) -> dict[str, str]:
        """sha256 now of recorded extracted files (recorded sha256 kept where size and mtime are unchanged)."""
        now = {}
        for rel, sha in files.items():
            path = self.layout.dataset_dir / rel
            record = self.prev_reads.get(rel)
            if path.is_symlink():
                now[rel] = tree_digest(self.layout.dataset_dir, [rel])["files"][rel]
            else:
                now[rel] = quick_sha256(path, record if record and record.get("sha256") == sha else None, self.rehash)
        return now

    def ensure_archive(self, remote: RemoteFile) -> dict[str, Any]:
        """An archive of a spec without needs: the kept (or hand-placed) archive, verified and
        unpacked unless its recorded extraction is intact; else extracted content placed by hand;
        else download and unpack."""
        recorded = self.previous.get(remote.path)
        entry = self._archive_entry(remote)
        extracted = (recorded or {}).get("extracted")
        if entry is not None:  # the archive is here: it restores what is missing
            if extracted and (recorded or {}).get("sha256") == entry["sha256"]:
                missing = [rel for rel in extracted.get("files", {}) if not _exists(self.layout.dataset_dir / rel)]
                present = {rel: sha for rel, sha in extracted.get("files", {}).items() if rel not in missing}
                now = self._current(present)
                changed = [rel for rel, sha in present.items() if now[rel] != sha]
                if changed and not self.accept:
                    raise ChecksumError(
                        f"{remote.path}: extracted files in {self.layout.dataset_dir} differ from MANIFEST.json: "
                        f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. Delete them to unpack them "
                        "again "
                        f"from {entry['archive']}, or accept them with --accept-changed, then re-run."
                    )
                if not missing and not changed:
                    return {**entry, "extracted": extracted}
                if missing:
                    log.warning("%s: extracted files missing (%s); unpacking them again", remote.path, missing[0])
                    self._unpack(remote, entry, keep_all=True)
                return {**entry, "extracted": tree_digest(self.layout.dataset_dir, extracted["files"])}
            files = self._unpack(remote, entry)
            return {**entry, "extracted": tree_digest(self.layout.dataset_dir, files)}
        if extracted:  # no archive, but an extraction recorded earlier
            files = extracted.get("files", {})
            missing = [rel for rel in files if not _exists(self.layout.dataset_dir / rel)]
            now = self._current({rel: sha for rel, sha in files.items() if rel not in missing})
            changed = [rel for rel, sha in now.items() if files[rel] != sha]
            if changed and not self.accept:
                raise ChecksumError(
                    f"{remote.path}: extracted files in {self.layout.dataset_dir} differ from MANIFEST.json: "
                    f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. Put the recorded files back, or "
                    "accept them with --accept-changed, then re-run."
                )
            if not missing:
                earlier = recorded or {}
                return {
                    "path": remote.path,
                    "sha256": earlier.get("sha256"),  # of the archive, measured when it was here
                    "size": earlier.get("size"),
                    "source": earlier.get("source", PLACED_BY_HAND),
                    "pinned": bool(pins_of(remote)),
                    "verified": "accepted change" if changed else "recorded checksum",
                    "archive": None,
                    "extracted": tree_digest(self.layout.dataset_dir, files) if changed else extracted,
                }
        elif (files := hand_extracted_files(self.layout, remote)) is not None:
            log.warning("%s: using extracted files placed by hand (checksums recorded on first use)", remote.path)
            return {
                "path": remote.path,
                "sha256": None,
                "size": None,
                "source": PLACED_BY_HAND,
                "pinned": bool(pins_of(remote)),
                "verified": "first use",
                "archive": None,
                "extracted": tree_digest(self.layout.dataset_dir, files),
            }
        entry = self._download_archive(remote)
        files = self._unpack(remote, entry)
        return {**entry, "extracted": tree_digest(self.layout.dataset_dir, files)}

    def fetch_every_file(self) -> list[str]:
        """A spec without needs: every file present and verified; the files the reader reads."""
        for remote in self.spec.files:
            if not remote.urls and not remote.extract and not self.layout.file_path(remote).exists():
                # derived from other files of the release (a kit's preprocessing): the reader rebuilds it
                # when absent; a copy placed by hand is verified like any other file
                self.entries[remote.path] = {"path": remote.path, "source": "derived by the reader", "present": False}
                continue
            try:
                entry = self.ensure_archive(remote) if remote.extract else self.ensure_plain(remote)
            except NotFetched as exc:
                self.not_fetched.append((remote, exc))
                continue
            except DownloadError as exc:
                self.failures.append(str(exc))
                continue
            if entry.get("extracted"):  # archives unpacking to the same place: the later one owns a file
                placed = entry["extracted"]["files"]
                for path, other in self.entries.items():
                    if other.get("extracted"):
                        self.entries[path] = {**other, "extracted": without_files(other["extracted"], placed)}
            self.entries[remote.path] = entry
        reads = []
        for entry in self.entries.values():
            if entry.get("extracted"):
                reads.extend(entry["extracted"]["files"])
            elif entry.get("sha256") and not entry.get("archive"):
                reads.append(entry["path"])
        return reads

    # ---- a spec with needs: what the reader reads

    def _satisfied(self, need: Need, *, complete: bool = True) -> list[str] | None:
        """The files of a need, or None while it is absent (a directory: also while a file recorded
        in it is missing, which its sources restore)."""
        files = need_files(self.layout, need)
        if not files:
            return None
        if complete and need.path.endswith("/"):
            recorded = [rel for rel in self.prev_reads if _owns(need.path, rel)]
            if any(rel not in files for rel in recorded):
                return None
        return files

    def _sources(self, need: Need) -> tuple[str, ...]:
        if need.sources:
            return need.sources
        remote = self.remotes.get(need.path)
        return (need.path,) if remote is not None and (remote.urls or remote.extract) else ()

    def _obtain(self, remote: RemoteFile) -> None:
        if remote.path not in self.entries:
            entry = self.obtain_archive(remote) if remote.extract else self.ensure_plain(remote)
            self.entries[remote.path] = entry

    def fetch_needs(self, needs: tuple[Need, ...]) -> tuple[list[str], list[tuple[Need, list[RemoteFile], list[str]]]]:
        """Every need present (from its sources where absent): the files the reader reads, and the
        needs still absent with their sources and why."""
        reads: list[str] = []
        absent: list[tuple[Need, list[RemoteFile], list[str]]] = []
        for need in needs:
            files = self._satisfied(need)
            if files is None:
                sources = [self.remotes[path] for path in self._sources(need)]
                reasons: list[str] = []
                for remote in sources:
                    try:
                        self._obtain(remote)
                    except NotFetched as exc:
                        if all(remote is not r for r, _ in self.not_fetched):
                            self.not_fetched.append((remote, exc))
                        reasons.extend(f"{remote.path}: {reason}" for reason in exc.reasons)
                        continue
                    except DownloadError as exc:
                        self.failures.append(str(exc))
                        reasons.append(f"{remote.path}: fails verification")
                        continue
                    if not need.derive and self._satisfied(need) is not None:
                        break
                files = self._satisfied(need) or (self._satisfied(need, complete=False) if self.accept else None)
                if files is None:
                    if sources and not reasons and not need.derive:
                        names = ", ".join(remote.path for remote in sources)
                        reasons.append(f"not in {names}")
                    absent.append((need, sources, reasons))
                    continue
            reads.extend(rel for rel in files if rel not in reads)
        return reads, absent

    # ---- the files the reader reads

    def verify_reads(self, paths: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Records of the files the reader reads, each verified (pinned checksum, or the one recorded
        earlier, or first use); failures are collected."""
        reads: dict[str, dict[str, Any]] = {}
        for rel in sorted(dict.fromkeys(paths)):
            path = self.layout.resolve(rel)
            remote = self.remotes.get(rel)
            remote = None if remote is not None and remote.extract else remote
            record = self.prev_reads.get(rel)
            fresh = self.fresh.get(rel)
            entry = self.entries.get(rel)
            if entry is not None and entry.get("sha256") and not entry.get("archive"):
                verified = {k: entry[k] for k in ("sha256", "size", "mtime_ns", "pinned", "verified") if k in entry}
                verified.setdefault("mtime_ns", path.stat().st_mtime_ns)
                reads[rel] = {**verified, "source": entry.get("source", PLACED_BY_HAND)}
                continue
            known = record if record and _same_stat(path, record) else None
            try:
                verified = check_file(path, str(path), self._expected(remote, record), known, rehash=self.rehash)
            except ChecksumError as exc:
                self.failures.append(str(exc))
                continue
            if fresh and verified["verified"] == "first use":
                verified["verified"] = f"unpacked from {fresh['source']}"
            earlier = record.get("source") if record and record.get("sha256") == verified["sha256"] else None
            reads[rel] = {**verified, "source": (fresh or {}).get("source") or earlier or PLACED_BY_HAND}
        return reads


# --------------------------------------------------------------------------- the phase


def describe_missing(remote: RemoteFile, layout: Layout, *, content_hint: bool = True) -> str:
    """How a missing file is described in the error: relative path, size, checksum, where it goes,
    and why no checksum is pinned where none is. ``content_hint``: say that an archive's extracted
    content may stand in for it (for a spec without needs; with needs, the paths read say what)."""
    facts = [f"{remote.size:,} bytes" if remote.size is not None else "size unknown"]
    facts.append(f"sha256 {remote.sha256}" if remote.sha256 else "sha256 not pinned")
    line = f"  - {remote.path}  ({', '.join(facts)})"
    others = [pin for pin in pins_of(remote) if pin != f"sha256:{(remote.sha256 or '').lower()}"]
    if others:
        line += f"\n      pinned: {_describe_pins(tuple(others))}"
    elif not remote.sha256:
        line += f"\n      not pinned: {unpinned_reason(remote)}"
    if remote.extract:
        parent = PurePosixPath(remote.path).parent
        where = ", ".join((parent / top).as_posix() + ("/" if top.endswith("/") else "") for top in unpacks_to(remote))
        if content_hint:
            line += f"\n      an archive: put it there as {remote.path}, or its extracted content as {where}"
        else:
            line += f"\n      an archive, unpacked into {parent.as_posix()}/ (put it there as {remote.path})"
    if not remote.urls:
        line += "\n      no URL: it cannot be downloaded; obtain it by hand (see the note)"
    if remote.note:
        line += f"\n      note: {remote.note.strip()}"
    return line


def _why(failed: list[NotFetched]) -> str:
    if not failed:
        return "nothing downloads them"
    if all(f.reasons == ["no URL known"] for f in failed):
        return "they have no URL"
    if all(f.offline for f in failed if f.reasons != ["no URL known"]):
        return "no network connection"
    return "the download failed"


def missing_message(spec: DatasetSpec, layout: Layout, missing: list[tuple[RemoteFile, NotFetched]]) -> str:
    """The error for files that are neither present nor downloadable: what, from where, and where to put them."""
    target = layout.dataset_dir.resolve()
    why = _why([n for r, n in missing if r.urls]) if any(r.urls for r, _ in missing) else "they have no URL"
    lines = [
        f"dataset {spec.name!r}: {len(missing)} of {len(spec.files)} files are missing and could not be downloaded "
        f"({why}).",
        "Get them by hand (from one of their URLs, or as their notes say) and put them into this directory,",
        "keeping their relative paths, then re-run:",
        f"    {target}",
        "Missing files:",
    ]
    for remote, failed in missing:
        lines.append(describe_missing(remote, layout))
        lines.extend(f"      url: {url}" for url in remote.urls)
        lines.extend(f"      tried: {reason}" for reason in failed.reasons)
    return "\n".join(lines)


def absent_message(
    spec: DatasetSpec,
    layout: Layout,
    absent: list[tuple[Need, list[RemoteFile], list[str]]],
    not_fetched: list[tuple[RemoteFile, NotFetched]],
) -> str:
    """The error for paths the reader reads that are absent: each with the release files that yield
    it or how to derive it; then each of those files once (URLs, checksums or why none is pinned,
    what was tried), and where to put them."""
    target = layout.dataset_dir.resolve()
    tried = {remote.path: failed for remote, failed in not_fetched}
    why = _why([tried[s.path] for _, sources, _ in absent for s in sources if s.path in tried])
    lines = [
        f"dataset {spec.name!r}: {len(absent)} of the paths its reader reads are missing ({why}).",
        "Put them, or the release files they come from, into this directory by hand, keeping their relative",
        "paths, then re-run:",
        f"    {target}",
        "Missing (what the reader reads, and where it comes from):",
    ]
    sources: dict[str, RemoteFile] = {}
    for need, from_files, reasons in absent:
        kind = "a directory holding at least one file" if need.path.endswith("/") else "a file"
        if need.pattern:
            kind += f" whose name matches {need.pattern}"
        names = [remote.path for remote in from_files]
        if not names:
            origin = "no release file holds it: put it there by hand"
        elif need.derive:
            origin = "derived from " + " and ".join(names)
        else:
            origin = "from " + ", else ".join(names)
        lines.append(f"  * {need.path}  ({kind}): {origin}")
        if need.derive:
            lines.append(f"      derived: {need.derive}")
        lines.extend(f"      {reason}" for reason in reasons if not any(reason.startswith(n + ":") for n in names))
        sources.update((remote.path, remote) for remote in from_files)
    if sources:
        lines.append("Release files to download, or to put there by hand:")
    for remote in sources.values():
        lines.append(describe_missing(remote, layout, content_hint=False))
        lines.extend(f"      url: {url}" for url in remote.urls)
        failed = tried.get(remote.path)
        lines.extend(f"      tried: {reason}" for reason in (failed.reasons if failed else ()))
    return "\n".join(lines)


def _offline_requested(offline: bool | None) -> bool:
    if offline is not None:
        return offline
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes")


def sums_text(reads: dict[str, dict[str, Any]]) -> str:
    """SHA256SUMS: ``<sha256>  <path>`` per file the reader reads (``sha256sum -c`` checks them)."""
    return "".join(f"{reads[rel]['sha256']}  {rel}\n" for rel in sorted(reads))


def fetch_dataset(
    spec: DatasetSpec,
    raw_root: Path = Path("data/raw"),
    *,
    options: dict[str, Any] | None = None,
    accept_changed: bool = False,
    rehash: bool = False,
    command: str | None = None,
    retries: int = 3,
    timeout: float = 60,
    progress: bool = True,
    offline: bool | None = None,
    backoff: float = 1.0,
) -> dict[str, Any]:
    """Make present and verify what the reader of ``spec`` reads with ``options``, under
    ``raw_root/<spec.name>/`` (see the module docstring).

    Files already present (downloaded before or placed by hand; for archives, the archive or the
    extracted files) are verified and used without network access. Missing ones are downloaded:
    URLs in order, ``retries`` attempts each with exponential ``backoff`` (seconds), resumed with
    HTTP Range requests; ``timeout`` is per socket operation. ``offline=True`` never touches the
    network; ``None`` means offline only if the environment variable ``CSBENCH_OFFLINE`` is set,
    otherwise a failing connection reveals it. ``accept_changed`` records files that changed since
    MANIFEST.json recorded them instead of stopping; ``rehash`` measures every checksum again;
    ``command`` is how errors tell the user to run the download again.

    Returns the manifest ``{"format", "dataset", "complete", "options", "needs", "files", "reads"}``:
    ``files`` one entry per release file handled (``path``, ``sha256`` measured, ``size``,
    ``mtime_ns``, ``source``: URL or "placed by hand", ``pinned``, ``verified``: "pinned checksum",
    "pinned git blob id", "recorded checksum", "first use" or "accepted change"; archives also
    ``archive`` and ``extracted`` / ``unpacked``), ``reads`` the same per file the reader reads. It
    is also written atomically to ``raw_root/<name>/MANIFEST.json`` (``complete`` false, and the earlier
    records of unverified files kept, when some file fails), and ``SHA256SUMS`` beside it once complete.

    Raises :class:`ChangedError` when what the reader reads changed since it was recorded (see
    :func:`raw_changes`), else :class:`DownloadError` naming the dataset, each missing path with the
    files it comes from (relative path, size, checksum or why none is pinned, URLs) and the directory
    to put them in by hand, or the files that fail verification.
    """
    layout = Layout(Path(raw_root), spec.name)
    for remote in spec.files:  # a spec bug must not write outside the dataset directory
        if not is_plain_relative(remote.path):
            raise DownloadError(f"dataset {spec.name!r}: file path {remote.path!r} is not a plain relative path")
    options = dict(options or {})
    command = command or f"csbench download --dataset {spec.name}"
    manifest = load_manifest(layout.manifest)
    changes = raw_changes(spec, options, layout.raw_root)
    if changes and not accept_changed:
        discard(layout.sums)
        raise ChangedError(changed_message(spec, layout, changes, command))
    for change in changes:
        log.warning("%s: accepting a change: %s", spec.name, change)
    net = Fetcher(retries, timeout, backoff, progress, _offline_requested(offline))
    run = _Run(spec, layout, net, manifest, accept=accept_changed, rehash=rehash)
    needs = resolve_needs(spec, options, layout)
    absent: list[tuple[Need, list[RemoteFile], list[str]]] = []
    if spec.needs is None:
        read_paths = run.fetch_every_file()
    else:
        read_paths, absent = run.fetch_needs(needs)
    reads = run.verify_reads(read_paths)
    for rel, record in reads.items():  # release files read as they are: their entries too
        remote = run.remotes.get(rel)
        if remote is not None and not remote.extract and rel not in run.entries:
            run.entries[rel] = {"path": rel, **record}
    missing = run.not_fetched if spec.needs is None else []
    complete = not missing and not absent and not run.failures
    kept_reads = {
        rel: record
        for rel, record in run.prev_reads.items()
        if rel not in reads and not complete and any(_owns(need.path, rel) for need in needs)
    }
    entries = [run.entries.get(r.path) or run.previous.get(r.path) for r in spec.files]
    written = {
        "format": MANIFEST_FORMAT,
        "dataset": spec.name,
        "complete": complete,
        "options": options,
        "needs": [need.path for need in needs],
        "files": [entry for entry in entries if entry is not None],
        "reads": dict(sorted({**kept_reads, **reads}.items())),
    }
    if complete or run.entries or reads:
        write_json(layout.manifest, written)
    if complete:
        write_text(layout.sums, sums_text(reads))
        first = [rel for rel, record in reads.items() if record["verified"] == "first use"]
        for rel in first:
            remote = run.remotes.get(rel)
            why = unpinned_reason(remote) if remote is not None else "not a file of the release (placed by hand)"
            log.warning("%s: no pinned checksum (%s); its sha256 is recorded and checked from now on", rel, why)
        return written
    discard(layout.sums)
    parts = []
    if run.failures:
        failed = "\n".join(run.failures)
        parts.append(f"dataset {spec.name!r}: {len(run.failures)} file(s) fail verification:\n{failed}")
    if missing:
        parts.append(missing_message(spec, layout, missing))
    if absent:
        parts.append(absent_message(spec, layout, absent, run.not_fetched))
    raise DownloadError("\n\n".join(parts))


def verify_raw(
    spec: DatasetSpec,
    options: dict[str, Any] | None = None,
    raw_root: Path = Path("data/raw"),
    command: str | None = None,
) -> str:
    """Check, before a reader reads them, that the files of the last download are there as recorded:
    MANIFEST.json complete, SHA256SUMS present, no change (:func:`raw_changes`), no recorded file
    missing. Returns the sha256 of SHA256SUMS (the identity of what the reader reads); raises
    :class:`DownloadError` saying to run the download (again): ``command``. A MANIFEST.json of an
    older csbench (no record of what the reader reads) is let through with a warning, identified by
    its own hash: both drivers run the download again when its code changes, which records it."""
    layout = Layout(Path(raw_root), spec.name)
    command = command or f"csbench download --dataset {spec.name}"
    again = f"run `{command}`"
    manifest = load_manifest(layout.manifest)
    if not manifest:
        raise DownloadError(f"{layout.manifest} is missing: {again}")
    if manifest.get("format") != MANIFEST_FORMAT:
        log.warning("%s: written by an older csbench, without a record of the files read: %s", layout.manifest, again)
        return canonical_hash(manifest)
    changes = raw_changes(spec, options, layout.raw_root)
    if changes:
        raise ChangedError(changed_message(spec, layout, changes, command))
    if not manifest.get("complete") or not layout.sums.is_file():
        raise DownloadError(f"{layout.manifest}: the last download of {spec.name!r} did not complete: {again}")
    gone = [rel for rel in manifest.get("reads", {}) if not layout.resolve(rel).is_file()]
    if gone:
        raise DownloadError(
            f"dataset {spec.name!r}: {len(gone)} recorded file(s) are missing ({', '.join(gone[:5])}"
            f"{' ...' if len(gone) > 5 else ''}): {again} (it downloads or unpacks them again)"
        )
    expected = sums_text(manifest.get("reads", {}))
    if layout.sums.read_text(encoding="utf-8") != expected:
        raise DownloadError(f"{layout.sums} does not list what {layout.manifest} recorded: {again}")
    return hashlib.sha256(expected.encode()).hexdigest()
