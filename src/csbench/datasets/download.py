"""Download phase: make every file of a release present and verified under ``data/raw/<dataset>/``.

Layout below ``raw_root`` (``data/raw`` by default)::

    <dataset>/<path>                  a plain file of the release; only ever complete and verified
    <dataset>/.archives/<path>        an archive (``extract=True``) as downloaded, kept to re-verify it
    <dataset>/<its content>           what the archive unpacks to, beside where <path> would lie
    <dataset>/MANIFEST.json           what is there: measured sha256, size, source, pinned or not
    .partial/<dataset>/<path>.part    an unfinished download, resumed by the next attempt or run
    .partial/<dataset>/<path>.part.json   the URL and validator (ETag) that partial file came from

Partial files live outside ``<dataset>/``, so a final path never holds partial content, and they
are renamed into place only after their size and sha256 are verified.

Verification. A pinned ``RemoteFile.sha256`` must match. Where none is pinned, the first
sha256 measured is recorded in MANIFEST.json (trust on first use) and every later call must
measure the same. A file already present, downloaded earlier or placed by hand, is verified
and used without any network access; one that fails verification is an error (it is never
overwritten or deleted: the user decides).

Archives. A user may place either the archive (at ``<dataset>/<path>`` or
``<dataset>/.archives/<path>``; it is verified, moved to ``.archives/`` and unpacked) or its
extracted content. Extracted content placed by hand is recognised, before any MANIFEST
records it, by ``unpacks_to``: the spec's ``RemoteFile.unpacks_to`` where declared, else the
name the official archives unpack to, ``<stem>/`` for ``<stem>.zip`` / ``<stem>.tar.gz`` /
``<stem>.tgz`` (a directory holding at least one file) and ``<stem>`` for ``<stem>.gz``. Its
files are hashed and recorded (trust on first use: a pinned checksum is of the archive, which
is then absent); later calls compare them. While the archive is kept, it is the reference:
extracted files found missing or changed are unpacked again. Archives of one dataset may unpack
into the same directory; a file both contain belongs to the later one in the spec.

A ``RemoteFile`` without URLs (derived by a release's own script) is verified when present and
otherwise listed in the error as to be obtained by hand.
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
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tqdm import tqdm

from csbench.datasets.base import DatasetSpec, RemoteFile
from csbench.io import sha256_file, write_json

log = logging.getLogger(__name__)

MANIFEST_NAME = "MANIFEST.json"
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
RESERVED_NAMES = (MANIFEST_NAME, ARCHIVES_DIR)  # top-level names an archive may not unpack to


class DownloadError(RuntimeError):
    """A dataset file is missing and could not be downloaded, or is present but fails verification."""


class ChecksumError(DownloadError):
    """A file (present, or just downloaded) does not have the expected size or sha256."""


class UnsafeArchiveError(DownloadError):
    """An archive member would land outside the target directory, or is a device file."""


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


def expected_sha256(remote: RemoteFile, recorded: dict[str, Any] | None) -> tuple[str | None, str]:
    """The checksum a file must have and why: pinned by the spec, recorded earlier, or none yet."""
    if remote.sha256:
        return remote.sha256.lower(), "pinned checksum"
    if recorded and recorded.get("sha256"):
        return str(recorded["sha256"]).lower(), "recorded checksum"
    return None, "first use"


def size_and_checksum_problem(path: Path, size: int | None, sha256: str | None, how: str = "expected") -> str | None:
    """Why ``path`` is not the expected file (size first: cheap), or None when it is."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        return f"size {actual_size:,} bytes, expected {size:,}"
    if sha256 is not None:
        actual = sha256_file(path)
        if actual != sha256:
            return f"sha256 {actual} does not match the {how} {sha256}"
    return None


def verify_present(path: Path, remote: RemoteFile, recorded: dict[str, Any] | None, shown: str) -> dict[str, Any]:
    """Verify a file already on disk and return its manifest entry; ``ChecksumError`` names it."""
    expected, how = expected_sha256(remote, recorded)
    problem = size_and_checksum_problem(path, remote.size, expected, how)
    if problem:
        raise ChecksumError(
            f"{shown}: {problem}. It is not the expected file of the release: delete or replace it, then re-run."
        )
    digest = sha256_file(path) if expected is None else expected
    source = recorded.get("source") if recorded and recorded.get("sha256") == digest else None
    log.info("%s: present, verified (%s)", shown, how)
    return {
        "path": remote.path,
        "sha256": digest,
        "size": path.stat().st_size,
        "source": source or PLACED_BY_HAND,
        "pinned": bool(remote.sha256),
        "verified": how,
    }


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
    unpacks to: ``RemoteFile.unpacks_to`` where the spec declares it (a field base.py may add),
    else the archive's name without its suffix, as the official archives are laid out."""
    declared = getattr(remote, "unpacks_to", None)
    if declared:
        return tuple(declared)
    name = PurePosixPath(remote.path).name
    return (archive_stem(name) + ("" if archive_kind(name) == "gz" else "/"),)


def hand_extracted_files(layout: Layout, remote: RemoteFile) -> list[str] | None:
    """Files (relative to the dataset directory) a user placed instead of the archive, recognised
    by ``unpacks_to``: every path there, directories holding at least one file; else None."""
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


def extracted_problem(layout: Layout, record: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(missing, changed) files of a recorded extraction."""
    files: dict[str, str] = record.get("files", {})
    missing = [rel for rel in files if not _exists(layout.dataset_dir / rel)]
    if missing:
        return missing, []
    now = tree_digest(layout.dataset_dir, files)["files"]
    return [], [rel for rel, sha in files.items() if now.get(rel) != sha]


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


def extract_archive(archive: Path, dest: Path, dataset_dir: Path, label: str | None = None) -> list[str]:
    """Unpack ``archive`` into ``dest`` (inside ``dataset_dir``); return the files placed, relative
    to ``dataset_dir``.

    Everything is unpacked into a temporary directory beside the target and each file is then renamed
    into place, after every member was checked (absolute paths, ``..``, links pointing outside,
    device files) and every destination was checked for conflicts, so a failure places nothing.
    An interrupted run may leave some complete files placed; MANIFEST.json does not record the
    extraction then, so the next run unpacks again.
    """
    label = label or archive.name
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".extract-{archive.name}.", dir=dest))
    try:
        try:
            _unpack(archive, tmp, label)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
            if isinstance(exc, tarfile.FilterError):
                raise UnsafeArchiveError(f"{label}: {exc}; nothing was extracted") from exc
            raise DownloadError(f"{label}: cannot unpack ({type(exc).__name__}: {exc}); nothing was extracted") from exc
        moves = _planned_moves(tmp)
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
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        os.close(fd)
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

    def download(self, remote: RemoteFile, layout: Layout, dest: Path, sha256: str | None, how: str) -> str:
        """Download ``remote`` to ``dest`` via its partial file; return the URL used or raise ``NotFetched``.

        URLs in order, each with ``retries`` attempts (a resumed transfer is an attempt) and
        exponential backoff. The size and sha256 are verified before the rename into place; a
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
            problem = size_and_checksum_problem(partial, remote.size, sha256, how)
            if problem:
                discard(partial, _sidecar(partial))
                connection_only = False
                reasons.append(f"{url}: wrong file, {problem}; deleted it")
                continue
            move_into_place(partial, dest)
            discard(_sidecar(partial))
            _remove_empty_dirs(partial.parent, stop=layout.raw_root / PARTIAL_DIR)
            return url
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


# --------------------------------------------------------------------------- one file


def _entry(remote: RemoteFile, path: Path, source: str, how: str, sha256: str | None) -> dict[str, Any]:
    """The manifest entry of a file just downloaded (``sha256``: already verified, or None to measure)."""
    return {
        "path": remote.path,
        "sha256": sha256 or sha256_file(path),
        "size": path.stat().st_size,
        "source": source,
        "pinned": bool(remote.sha256),
        "verified": how,
    }


def ensure_plain(remote: RemoteFile, layout: Layout, recorded: dict[str, Any] | None, net: Fetcher) -> dict[str, Any]:
    """A plain file: verify it if present, else download it; return its manifest entry."""
    final = layout.file_path(remote)
    if final.is_file():
        return verify_present(final, remote, recorded, str(final))
    expected, how = expected_sha256(remote, recorded)
    url = net.download(remote, layout, final, expected, how)
    log.info("%s: downloaded from %s, verified (%s)", remote.path, url, how)
    return _entry(remote, final, url, how, expected)


def ensure_archive(remote: RemoteFile, layout: Layout, recorded: dict[str, Any] | None, net: Fetcher) -> dict[str, Any]:
    """An archive: the kept (or hand-placed) archive, verified and unpacked unless its recorded
    extraction is intact; else extracted content placed by hand; else download and unpack."""
    kept, loose = layout.archive_path(remote), layout.file_path(remote)
    archive_label = f"{remote.path} ({kept})"
    if not kept.is_file() and loose.is_file():
        entry = verify_present(loose, remote, recorded, str(loose))
        move_into_place(loose, kept)
        log.info("%s: moved the archive placed by hand to %s", loose, kept)
    elif kept.is_file():
        entry = verify_present(kept, remote, recorded, str(kept))
    else:
        entry = None
    extracted = (recorded or {}).get("extracted")
    if entry is not None:  # the archive is here: it is the reference
        entry["archive"] = kept.relative_to(layout.dataset_dir).as_posix()
        if extracted and (recorded or {}).get("sha256") == entry["sha256"]:
            missing, changed = extracted_problem(layout, extracted)
            if not missing and not changed:
                return {**entry, "extracted": extracted}
            log.warning(
                "%s: extracted files missing or changed (%s); unpacking again", remote.path, (missing or changed)[0]
            )
        files = extract_archive(kept, layout.extract_dir(remote), layout.dataset_dir, archive_label)
        return {**entry, "extracted": tree_digest(layout.dataset_dir, files)}
    if extracted:  # no archive, but an extraction recorded earlier
        missing, changed = extracted_problem(layout, extracted)
        if changed:
            raise ChecksumError(
                f"{remote.path}: extracted files in {layout.dataset_dir} differ from MANIFEST.json: "
                f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. Delete or replace them, then re-run."
            )
        if not missing:
            earlier = recorded or {}
            return {
                "path": remote.path,
                "sha256": earlier.get("sha256"),  # of the archive, measured when it was here
                "size": earlier.get("size"),
                "source": earlier.get("source", PLACED_BY_HAND),
                "pinned": bool(remote.sha256),
                "verified": "recorded checksum",
                "archive": None,
                "extracted": extracted,
            }
    elif (files := hand_extracted_files(layout, remote)) is not None:
        log.warning("%s: using extracted files placed by hand (checksums recorded on first use)", remote.path)
        return {
            "path": remote.path,
            "sha256": None,
            "size": None,
            "source": PLACED_BY_HAND,
            "pinned": bool(remote.sha256),
            "verified": "first use",
            "archive": None,
            "extracted": tree_digest(layout.dataset_dir, files),
        }
    expected, how = expected_sha256(remote, recorded)
    url = net.download(remote, layout, kept, expected, how)
    entry = {**_entry(remote, kept, url, how, expected), "archive": kept.relative_to(layout.dataset_dir).as_posix()}
    files = extract_archive(kept, layout.extract_dir(remote), layout.dataset_dir, archive_label)
    return {**entry, "extracted": tree_digest(layout.dataset_dir, files)}


# --------------------------------------------------------------------------- the phase


def read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """Entries of an existing MANIFEST.json by file path ({} when there is none)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {e["path"]: e for e in data["files"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise DownloadError(f"{path}: not a valid MANIFEST ({exc}); delete it to record the files afresh") from exc


def describe_missing(remote: RemoteFile, layout: Layout) -> str:
    """How a missing file is described in the error: relative path, size, sha256, where it goes."""
    facts = [f"{remote.size:,} bytes" if remote.size is not None else "size unknown"]
    facts.append(f"sha256 {remote.sha256}" if remote.sha256 else "sha256 not pinned")
    line = f"  - {remote.path}  ({', '.join(facts)})"
    if remote.extract:
        parent = PurePosixPath(remote.path).parent
        where = ", ".join((parent / top).as_posix() + ("/" if top.endswith("/") else "") for top in unpacks_to(remote))
        line += f"\n      an archive: put it there as {remote.path}, or its extracted content as {where}"
    if not remote.urls:
        line += "\n      no URL: it cannot be downloaded; obtain it by hand (see the note)"
    if remote.note:
        line += f"\n      note: {remote.note}"
    return line


def missing_message(spec: DatasetSpec, layout: Layout, missing: list[tuple[RemoteFile, NotFetched]]) -> str:
    """The error for files that are neither present nor downloadable: what, from where, and where to put them."""
    downloadable = [n for r, n in missing if r.urls]
    if not downloadable:
        why = "they have no URL"
    elif all(n.offline for n in downloadable):
        why = "no network connection"
    else:
        why = "the download failed"
    target = layout.dataset_dir.resolve()
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


def _offline_requested(offline: bool | None) -> bool:
    if offline is not None:
        return offline
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes")


def fetch_dataset(
    spec: DatasetSpec,
    raw_root: Path = Path("data/raw"),
    *,
    retries: int = 3,
    timeout: float = 60,
    progress: bool = True,
    offline: bool | None = None,
    backoff: float = 1.0,
) -> dict[str, Any]:
    """Make every ``RemoteFile`` of ``spec`` present and verified under ``raw_root/<spec.name>/``.

    Files already present (downloaded before or placed by hand; for archives, the archive or its
    extracted content, see the module docstring) are verified and used without network access.
    Missing files are downloaded: URLs in order, ``retries`` attempts each with exponential
    ``backoff`` (seconds), resumed with HTTP Range requests; ``timeout`` is per socket operation.
    ``offline=True`` never touches the network; ``None`` means offline only if the environment
    variable ``CSBENCH_OFFLINE`` is set, otherwise a failing connection reveals it.

    Returns the manifest ``{"dataset", "complete", "files": [entry, ...]}``, one entry per file in
    spec order: ``path``, ``sha256`` (measured), ``size``, ``source`` (URL or "placed by hand"),
    ``pinned``, ``verified`` ("pinned checksum", "recorded checksum" or "first use"), and for
    archives ``archive`` and ``extracted`` (files with sha256, count, bytes, tree_sha256). It is
    also written atomically to ``raw_root/<name>/MANIFEST.json`` (with ``complete`` false and the
    earlier records of unverified files kept, when some file fails).

    Raises ``DownloadError`` naming the dataset, each missing file (relative path, size, sha256,
    URLs) and the directory to put them in by hand, or the files that fail verification.
    """
    layout = Layout(Path(raw_root), spec.name)
    for remote in spec.files:  # a spec bug must not write outside the dataset directory
        if not is_plain_relative(remote.path):
            raise DownloadError(f"dataset {spec.name!r}: file path {remote.path!r} is not a plain relative path")
    net = Fetcher(retries, timeout, backoff, progress, _offline_requested(offline))
    previous = read_manifest(layout.manifest)
    entries: dict[str, dict[str, Any]] = {}
    missing: list[tuple[RemoteFile, NotFetched]] = []
    failures: list[str] = []
    for remote in spec.files:
        if not remote.urls and not remote.extract and not layout.file_path(remote).exists():
            # derived from other files of the release (a kit's preprocessing): the reader rebuilds it
            # when absent; a copy placed by hand is verified like any other file
            entries[remote.path] = {"path": remote.path, "source": "derived by the reader", "present": False}
            continue
        ensure = ensure_archive if remote.extract else ensure_plain
        try:
            entry = ensure(remote, layout, previous.get(remote.path), net)
        except NotFetched as exc:
            missing.append((remote, exc))
            continue
        except DownloadError as exc:
            failures.append(str(exc))
            continue
        if entry.get("extracted"):  # archives unpacking to the same place: the later one owns a file
            placed = entry["extracted"]["files"]
            for path, other in entries.items():
                if other.get("extracted"):
                    entries[path] = {**other, "extracted": without_files(other["extracted"], placed)}
        entries[remote.path] = entry
    complete = not missing and not failures
    files = [entries.get(r.path) or previous.get(r.path) for r in spec.files]
    manifest = {"dataset": spec.name, "complete": complete, "files": [e for e in files if e is not None]}
    if complete or entries:
        write_json(layout.manifest, manifest)
    if complete:
        return manifest
    parts = []
    if failures:
        parts.append(f"dataset {spec.name!r}: {len(failures)} file(s) fail verification:\n" + "\n".join(failures))
    if missing:
        parts.append(missing_message(spec, layout, missing))
    raise DownloadError("\n\n".join(parts))
