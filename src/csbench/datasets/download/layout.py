"""Where a dataset's raw files lie (:class:`Layout`), the phase's constants and errors, and archive names."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from csbench.datasets.base import RemoteFile

log = logging.getLogger("csbench.datasets.download")  # one logger for the package, as for the module before

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
