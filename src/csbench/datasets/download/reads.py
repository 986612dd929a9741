"""What a release's reader reads (its needs) and whether that changed since MANIFEST.json recorded it."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from csbench.datasets.base import DatasetSpec, Need
from csbench.datasets.download.layout import MANIFEST_FORMAT, DownloadError, Layout, log
from csbench.datasets.download.verification import _same_stat
from csbench.io import sha256_file, write_json

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
        Need(remote.path) for remote in spec.files if remote.urls or remote.extract or layout.file_path(remote).exists()
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
    from csbench.datasets import LOCAL_SOURCE_KIND

    if config.dataset_kind(dataset) == LOCAL_SOURCE_KIND:
        return ""
    return changes_text(config.dataset_spec(dataset), config.dataset_options(dataset), raw_root)


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
