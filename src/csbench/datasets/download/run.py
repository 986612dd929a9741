"""One download run of one dataset: every needed file made present, verified and recorded."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from csbench.datasets.base import DatasetSpec, Need, RemoteFile
from csbench.datasets.download.archives import extract_archive
from csbench.datasets.download.layout import PLACED_BY_HAND, ChecksumError, DownloadError, Layout, log
from csbench.datasets.download.network import Fetcher, NotFetched, move_into_place
from csbench.datasets.download.reads import _owns, need_files, recorded_reads
from csbench.datasets.download.verification import (
    Expected,
    _downloaded_record,
    _exists,
    _same_stat,
    check_file,
    hand_extracted_files,
    pins_of,
    quick_sha256,
    tree_digest,
    without_files,
)

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

    def _extracted_changes(self, remote: RemoteFile, files: dict[str, str], remedy: str) -> tuple[list[str], list[str]]:
        """(missing, changed): the recorded extracted ``files`` (relative path -> sha256) of ``remote``
        that are gone, and those present whose content differs from the record. A change not accepted
        raises :class:`ChecksumError` naming up to five of them and ``remedy`` (a sentence's start)."""
        missing = [rel for rel in files if not _exists(self.layout.dataset_dir / rel)]
        present = {rel: sha for rel, sha in files.items() if rel not in missing}
        now = self._current(present)
        changed = [rel for rel, sha in present.items() if now[rel] != sha]
        if changed and not self.accept:
            raise ChecksumError(
                f"{remote.path}: extracted files in {self.layout.dataset_dir} differ from MANIFEST.json: "
                f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''}. {remedy}, or accept them with "
                "--accept-changed, then re-run."
            )
        return missing, changed

    def ensure_archive(self, remote: RemoteFile) -> dict[str, Any]:
        """An archive of a spec without needs: the kept (or hand-placed) archive, verified and
        unpacked unless its recorded extraction is intact; else extracted content placed by hand;
        else download and unpack."""
        recorded = self.previous.get(remote.path)
        entry = self._archive_entry(remote)
        extracted = (recorded or {}).get("extracted")
        if entry is not None:  # the archive is here: it restores what is missing
            if extracted and (recorded or {}).get("sha256") == entry["sha256"]:
                missing, changed = self._extracted_changes(
                    remote, extracted.get("files", {}), f"Delete them to unpack them again from {entry['archive']}"
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
            missing, changed = self._extracted_changes(remote, files, "Put the recorded files back")
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
