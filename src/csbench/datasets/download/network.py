"""Downloading one file: resumable HTTP transfers with validators, retries over a file's URLs."""

from __future__ import annotations

import contextlib
import errno
import http.client
import json
import os
import re
import shutil
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from csbench.datasets.base import RemoteFile
from csbench.datasets.download.layout import CHUNK, PARTIAL_DIR, USER_AGENT, Layout
from csbench.datasets.download.verification import Expected
from csbench.io import temporary_beside, write_json

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
