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

The package, its modules in the order they build on each other: :mod:`.layout` (constants, errors,
where files lie), :mod:`.verification` (checksums), :mod:`.archives` (safe unpacking),
:mod:`.network` (resumable transfers), :mod:`.reads` (what the reader reads and its changes),
:mod:`.run` (one run of one dataset) and :mod:`.phase` (:func:`fetch_dataset`, :func:`verify_raw`).
Every public name is importable from ``csbench.datasets.download`` as before.
"""

from __future__ import annotations

from csbench.datasets.download.archives import (
    check_link_target,
    check_no_link_prefix,
    extract_archive,
    is_plain_relative,
    safe_member_path,
)
from csbench.datasets.download.layout import (
    ARCHIVE_SUFFIXES,
    ARCHIVES_DIR,
    CHUNK,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    OFFLINE_ENV,
    PARTIAL_DIR,
    PIN_KINDS,
    PLACED_BY_HAND,
    RESERVED_NAMES,
    SPECIAL_FILE,
    SUMS_NAME,
    USER_AGENT,
    ChangedError,
    ChecksumError,
    DownloadError,
    Layout,
    UnsafeArchiveError,
    archive_kind,
    archive_stem,
)
from csbench.datasets.download.network import (
    Fetcher,
    NotFetched,
    discard,
    move_into_place,
    parse_content_range,
    transfer,
)
from csbench.datasets.download.phase import (
    absent_message,
    describe_missing,
    fetch_dataset,
    missing_message,
    sums_text,
    verify_raw,
)
from csbench.datasets.download.reads import (
    changed_message,
    changes_text,
    config_changes,
    default_needs,
    load_manifest,
    need_files,
    raw_changes,
    recorded_reads,
    resolve_needs,
)
from csbench.datasets.download.verification import (
    Expected,
    check_file,
    git_blob_id,
    hand_extracted_files,
    pins_of,
    quick_sha256,
    tree_digest,
    unpacks_to,
    unpinned_reason,
    without_files,
)

__all__ = [
    "ARCHIVES_DIR",
    "ARCHIVE_SUFFIXES",
    "CHUNK",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "OFFLINE_ENV",
    "PARTIAL_DIR",
    "PIN_KINDS",
    "PLACED_BY_HAND",
    "RESERVED_NAMES",
    "SPECIAL_FILE",
    "SUMS_NAME",
    "USER_AGENT",
    "ChangedError",
    "ChecksumError",
    "DownloadError",
    "Expected",
    "Fetcher",
    "Layout",
    "NotFetched",
    "UnsafeArchiveError",
    "absent_message",
    "archive_kind",
    "archive_stem",
    "changed_message",
    "changes_text",
    "check_file",
    "check_link_target",
    "check_no_link_prefix",
    "config_changes",
    "default_needs",
    "describe_missing",
    "discard",
    "extract_archive",
    "fetch_dataset",
    "git_blob_id",
    "hand_extracted_files",
    "is_plain_relative",
    "load_manifest",
    "missing_message",
    "move_into_place",
    "need_files",
    "parse_content_range",
    "pins_of",
    "quick_sha256",
    "raw_changes",
    "recorded_reads",
    "resolve_needs",
    "safe_member_path",
    "sums_text",
    "transfer",
    "tree_digest",
    "unpacks_to",
    "unpinned_reason",
    "verify_raw",
    "without_files",
]
