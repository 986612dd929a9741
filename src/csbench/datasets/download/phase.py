"""The download phase's entry points (:func:`fetch_dataset`, :func:`verify_raw`) and their messages."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

from csbench.datasets.base import DatasetSpec, Need, RemoteFile
from csbench.datasets.download.archives import is_plain_relative
from csbench.datasets.download.layout import MANIFEST_FORMAT, OFFLINE_ENV, ChangedError, DownloadError, Layout, log
from csbench.datasets.download.network import Fetcher, NotFetched, discard
from csbench.datasets.download.reads import _owns, changed_message, load_manifest, raw_changes, resolve_needs
from csbench.datasets.download.run import _Run
from csbench.datasets.download.verification import _describe_pins, pins_of, unpacks_to, unpinned_reason
from csbench.io import canonical_hash, write_json, write_text

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
    written = _manifest_record(spec, run, options, needs, reads, complete)
    if complete or run.entries or reads:
        write_json(layout.manifest, written)
    if complete:
        write_text(layout.sums, sums_text(reads))
        _warn_first_use(run, reads)
        return written
    discard(layout.sums)
    raise _incomplete_error(spec, layout, run, missing, absent)


def _manifest_record(
    spec: DatasetSpec,
    run: _Run,
    options: dict[str, Any],
    needs: tuple[Need, ...],
    reads: dict[str, dict[str, Any]],
    complete: bool,
) -> dict[str, Any]:
    """The MANIFEST.json of a run: its file entries (earlier ones kept for files not handled now),
    and its reads; an incomplete run keeps the earlier records of the needed files it did not verify."""
    kept_reads = {
        rel: record
        for rel, record in run.prev_reads.items()
        if rel not in reads and not complete and any(_owns(need.path, rel) for need in needs)
    }
    entries = [run.entries.get(r.path) or run.previous.get(r.path) for r in spec.files]
    return {
        "format": MANIFEST_FORMAT,
        "dataset": spec.name,
        "complete": complete,
        "options": options,
        "needs": [need.path for need in needs],
        "files": [entry for entry in entries if entry is not None],
        "reads": dict(sorted({**kept_reads, **reads}.items())),
    }


def _warn_first_use(run: _Run, reads: dict[str, dict[str, Any]]) -> None:
    """One warning per file read whose checksum was recorded on first use (nothing pins it), and why."""
    first = [rel for rel, record in reads.items() if record["verified"] == "first use"]
    for rel in first:
        remote = run.remotes.get(rel)
        why = unpinned_reason(remote) if remote is not None else "not a file of the release (placed by hand)"
        log.warning("%s: no pinned checksum (%s); its sha256 is recorded and checked from now on", rel, why)


def _incomplete_error(
    spec: DatasetSpec,
    layout: Layout,
    run: _Run,
    missing: list[tuple[RemoteFile, NotFetched]],
    absent: list[tuple[Need, list[RemoteFile], list[str]]],
) -> DownloadError:
    """The error of a run that left files unverified: those failing verification, the missing files
    of a spec without needs and the absent needs, each part with what to do."""
    parts = []
    if run.failures:
        failed = "\n".join(run.failures)
        parts.append(f"dataset {spec.name!r}: {len(run.failures)} file(s) fail verification:\n{failed}")
    if missing:
        parts.append(missing_message(spec, layout, missing))
    if absent:
        parts.append(absent_message(spec, layout, absent, run.not_fetched))
    return DownloadError("\n\n".join(parts))


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
