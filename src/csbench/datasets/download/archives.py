"""Safe unpacking of zip and tar archives: no absolute paths, no links out, no special files, nothing overwritten."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from csbench.datasets.download.layout import (
    CHUNK,
    RESERVED_NAMES,
    SPECIAL_FILE,
    DownloadError,
    UnsafeArchiveError,
    archive_kind,
    archive_stem,
)
from csbench.datasets.download.verification import _exists
from csbench.io import temporary_beside

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
