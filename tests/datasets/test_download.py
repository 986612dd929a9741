"""End-to-end tests of the download phase (``csbench.datasets.download``) against a local HTTP
server on 127.0.0.1 serving real files from ../shared/data: checksums, resuming, mirrors, files
placed by hand, the offline error, archive extraction and unsafe archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import socket
import stat
import tarfile
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from csbench.datasets.base import DatasetSpec, RemoteFile
from csbench.datasets.download import (
    MANIFEST_NAME,
    SUMS_NAME,
    DownloadError,
    UnsafeArchiveError,
    fetch_dataset,
    parse_content_range,
)

NAME = "toy"
FAST = {"retries": 3, "timeout": 5, "backoff": 0.01, "progress": False}


# --------------------------------------------------------------------------- the local server


@dataclass
class Route:
    """What the server answers for one path."""

    file: Path
    ranges: bool = True  # honour Range (206); False: always 200 with the whole file
    truncate: int = 0  # this many responses announce the full length but stop after half of it


class Handler(BaseHTTPRequestHandler):
    server: LocalServer  # type: ignore[assignment]

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.requests.append({"path": self.path, "range": self.headers.get("Range")})
            route = srv.routes.get(self.path)
            cut = bool(route and route.truncate > 0)
            if cut:
                route.truncate -= 1
        if route is None:
            self.send_error(404)
            return
        data = route.file.read_bytes()
        start, wanted = 0, self.headers.get("Range")
        if wanted and route.ranges:
            start = int(re.fullmatch(r"bytes=(\d+)-", wanted)[1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest()[:16] + '"')
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if cut else body)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:  # keep the test output quiet
        pass


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.routes: dict[str, Route] = {}
        self.requests: list[dict[str, str | None]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def handle_error(self, request, client_address) -> None:  # a client closing early is expected
        pass

    def serve(self, path: str, file: Path, **options) -> str:
        self.routes[path] = Route(file, **options)
        return self.url(path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.shutdown()
            self.thread.join(timeout=5)
        self.server_close()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    srv = LocalServer()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _no_proxy_no_offline(monkeypatch) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "CSBENCH_OFFLINE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def no_network(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


# --------------------------------------------------------------------------- helpers


def spec_of(*files: RemoteFile) -> DatasetSpec:
    return DatasetSpec(name=NAME, kind="release", languages=("python",), description="", licence="", files=files)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pinned(path: str, source: Path, *urls: str, extract: bool = False) -> RemoteFile:
    return RemoteFile(path, urls, sha(source), source.stat().st_size, extract=extract)


def files_below(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink())


def corrupted_copy(source: Path, dest: Path) -> Path:
    """The same size, one byte different: only the checksum can tell."""
    data = bytearray(source.read_bytes())
    data[len(data) // 3] ^= 0x01
    dest.write_bytes(bytes(data))
    return dest


@pytest.fixture
def cosqa(shared_data) -> Path:
    return shared_data / "cosqa" / "cosqa-dev.json"


@pytest.fixture
def ruby(shared_data) -> dict[str, Path]:
    folder = shared_data / "codesearchnet" / "ruby"
    return {f"ruby/{name}": folder / name for name in ("test.jsonl", "valid.jsonl")}


def build_archive(path: Path, members: dict[str, Path]) -> Path:
    """A .zip, .tar.gz or (one member) .gz of real files."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, file in members.items():
                zf.write(file, name)
    elif path.name.endswith(".tar.gz"):
        with tarfile.open(path, "w:gz") as tf:
            for name, file in members.items():
                tf.add(file, name)
    else:
        (file,) = members.values()
        path.write_bytes(gzip.compress(file.read_bytes()))
    return path


# --------------------------------------------------------------------------- plain files


def test_parse_content_range():
    assert parse_content_range("bytes 100-199/1000") == (100, 1000)
    assert parse_content_range("bytes 0-9/*") == (0, None)
    assert parse_content_range("bytes */1000") == (None, 1000)
    assert parse_content_range(None) == (None, None)


def test_download_verifies_checksum_and_writes_manifest(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    remote = pinned("cosqa-dev.json", cosqa, server.serve("/cosqa-dev.json", cosqa))
    manifest = fetch_dataset(spec_of(remote), raw, **{**FAST, "progress": True})  # with a tqdm bar

    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()
    (entry,) = manifest["files"]
    assert entry == {
        "path": "cosqa-dev.json",
        "sha256": sha(cosqa),
        "size": cosqa.stat().st_size,
        "mtime_ns": (raw / NAME / "cosqa-dev.json").stat().st_mtime_ns,
        "source": remote.urls[0],
        "pinned": True,
        "verified": "pinned checksum",
    }
    assert manifest["complete"] and manifest["dataset"] == NAME
    assert manifest["reads"] == {"cosqa-dev.json": {k: v for k, v in entry.items() if k != "path"}}
    assert json.loads((raw / NAME / MANIFEST_NAME).read_text()) == manifest
    assert (raw / NAME / SUMS_NAME).read_text() == f"{sha(cosqa)}  cosqa-dev.json\n"
    assert not (raw / ".partial").exists()  # no leftovers
    assert files_below(raw) == [f"{NAME}/{MANIFEST_NAME}", f"{NAME}/{SUMS_NAME}", f"{NAME}/cosqa-dev.json"]

    # again: verified on disk, no request, the source remembered
    before = len(server.requests)
    again = fetch_dataset(spec_of(remote), raw, **FAST)
    assert len(server.requests) == before == 1
    assert again["files"][0]["source"] == remote.urls[0]


def test_unpinned_checksum_is_trusted_on_first_use_then_enforced(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    remote = RemoteFile("cosqa-dev.json", (server.serve("/c.json", cosqa),), None)
    first = fetch_dataset(spec_of(remote), raw, **FAST)
    assert first["files"][0]["verified"] == "first use"
    assert first["files"][0]["sha256"] == sha(cosqa) and first["files"][0]["pinned"] is False

    assert fetch_dataset(spec_of(remote), raw, **FAST)["files"][0]["verified"] == "recorded checksum"
    corrupted_copy(cosqa, raw / NAME / "cosqa-dev.json")
    with pytest.raises(DownloadError, match=r"cosqa-dev\.json.*does not match the recorded checksum"):
        fetch_dataset(spec_of(remote), raw, **FAST)
    assert json.loads((raw / NAME / MANIFEST_NAME).read_text())["files"][0]["sha256"] == sha(cosqa)  # kept
    assert len(server.requests) == 1


def test_resume_after_truncation(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    remote = pinned("cosqa-dev.json", cosqa, server.serve("/c.json", cosqa, truncate=1))
    fetch_dataset(spec_of(remote), raw, **FAST)

    size = cosqa.stat().st_size
    assert [r["range"] for r in server.requests] == [None, f"bytes={size // 2}-"]
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()
    assert not (raw / ".partial").exists()


def test_server_ignoring_range_restarts_cleanly(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    remote = pinned("cosqa-dev.json", cosqa, server.serve("/c.json", cosqa, ranges=False, truncate=1))
    fetch_dataset(spec_of(remote), raw, **FAST)

    assert len(server.requests) == 2 and server.requests[1]["range"]  # asked to resume, got 200
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()


def test_truncation_that_never_completes_is_rejected_then_resumed(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    remote = pinned("cosqa-dev.json", cosqa, server.serve("/c.json", cosqa, truncate=100))
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(spec_of(remote), raw, **FAST)

    assert len(server.requests) == 3  # retries
    assert not (raw / NAME / "cosqa-dev.json").exists()
    assert not (raw / NAME).exists()  # nothing verified: not even a MANIFEST
    kept = int(re.search(r"([\d,]+) bytes are kept in", str(failed.value))[1].replace(",", ""))
    partial = raw / ".partial" / NAME / "cosqa-dev.json.part"
    assert partial.stat().st_size == kept and 0 < kept < cosqa.stat().st_size
    assert str(partial) in str(failed.value)

    server.routes["/c.json"].truncate = 0  # the next run resumes where this one stopped
    fetch_dataset(spec_of(remote), raw, **FAST)
    assert server.requests[-1]["range"] == f"bytes={kept}-"
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()
    assert not (raw / ".partial").exists()


def test_complete_partial_file_is_finished_without_new_bytes(server, cosqa, tmp_path):
    """Killed after the last byte but before the rename: the server answers 416, the file is kept."""
    raw = tmp_path / "raw"
    url = server.serve("/c.json", cosqa)
    partial = raw / ".partial" / NAME / "cosqa-dev.json.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(cosqa.read_bytes())
    partial.with_name(partial.name + ".json").write_text(json.dumps({"url": url, "validator": None}))

    fetch_dataset(spec_of(pinned("cosqa-dev.json", cosqa, url)), raw, **FAST)
    assert server.requests == [{"path": "/c.json", "range": f"bytes={cosqa.stat().st_size}-"}]
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()
    assert not (raw / ".partial").exists()


def test_wrong_checksum_is_rejected_and_the_next_mirror_used(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    wrong = corrupted_copy(cosqa, tmp_path / "wrong.json")
    bad, good = server.serve("/bad.json", wrong), server.serve("/good.json", cosqa)

    with pytest.raises(DownloadError, match="wrong file, sha256") as failed:
        fetch_dataset(spec_of(pinned("cosqa-dev.json", cosqa, bad)), raw, **FAST)
    assert bad in str(failed.value)
    assert files_below(raw) == []  # no partial file anywhere, nothing at the final path

    missing = server.url("/missing.json")  # 404: not retried
    manifest = fetch_dataset(spec_of(pinned("cosqa-dev.json", cosqa, missing, bad, good)), raw, **FAST)
    assert manifest["files"][0]["source"] == good
    assert [r["path"] for r in server.requests] == ["/bad.json", "/missing.json", "/bad.json", "/good.json"]
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()


def test_file_placed_by_hand_is_used_without_network(server, cosqa, tmp_path, no_network):
    raw = tmp_path / "raw"
    remote = pinned("cosqa-dev.json", cosqa, server.url("/c.json"))
    server.stop()
    (raw / NAME).mkdir(parents=True)
    (raw / NAME / "cosqa-dev.json").write_bytes(cosqa.read_bytes())

    manifest = fetch_dataset(spec_of(remote), raw, **FAST)
    assert manifest["files"][0]["source"] == "placed by hand"
    assert manifest["files"][0]["verified"] == "pinned checksum"
    assert server.requests == []


def test_file_placed_by_hand_with_wrong_checksum_is_rejected(server, cosqa, tmp_path, no_network):
    raw = tmp_path / "raw"
    placed = raw / NAME / "cosqa-dev.json"
    placed.parent.mkdir(parents=True)
    corrupted_copy(cosqa, placed)
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(spec_of(pinned("cosqa-dev.json", cosqa, server.url("/c.json"))), raw, **FAST)

    assert str(placed) in str(failed.value)
    assert "does not match the pinned checksum" in str(failed.value)
    assert placed.exists()  # the user's file is not deleted
    assert server.requests == []


def test_offline_error_lists_missing_files_and_target_directory(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    files = (
        pinned("cosqa-dev.json", cosqa, "https://example.org/cosqa-dev.json", "https://mirror.example/c.json"),
        RemoteFile("sub/ruby.zip", ("https://example.org/ruby.zip",), None, extract=True),
    )
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(spec_of(*files), raw, offline=True, **FAST)
    message = str(failed.value)

    assert f"dataset {NAME!r}" in message and "no network connection" in message
    assert str((raw / NAME).resolve()) in message and "re-run" in message
    assert f"cosqa-dev.json  ({cosqa.stat().st_size:,} bytes, sha256 {sha(cosqa)})" in message
    assert "sub/ruby.zip  (size unknown, sha256 not pinned)" in message and "sub/ruby/" in message
    for url in (*files[0].urls, *files[1].urls):
        assert f"url: {url}" in message
    assert not raw.exists() or files_below(raw) == []
    assert server.requests == []


def test_offline_is_detected_by_the_connection_failing(cosqa, tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/cosqa-dev.json"
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(spec_of(pinned("cosqa-dev.json", cosqa, url)), tmp_path / "raw", **FAST)
    message = str(failed.value)
    assert "no network connection" in message and "cannot connect" in message and "cosqa-dev.json" in message
    assert not (tmp_path / "raw" / NAME).exists()


# --------------------------------------------------------------------------- archives


@pytest.mark.parametrize("archive", ["ruby.zip", "ruby.tar.gz"])
def test_archive_is_downloaded_kept_and_extracted(server, ruby, tmp_path, archive):
    raw = tmp_path / "raw"
    built = build_archive(tmp_path / archive, ruby)
    remote = pinned(archive, built, server.serve(f"/{archive}", built), extract=True)
    manifest = fetch_dataset(spec_of(remote), raw, **FAST)

    for name, source in ruby.items():
        assert (raw / NAME / name).read_bytes() == source.read_bytes()
    assert (raw / NAME / ".archives" / archive).read_bytes() == built.read_bytes()
    expected = [
        f"{NAME}/{MANIFEST_NAME}",
        f"{NAME}/{SUMS_NAME}",
        f"{NAME}/.archives/{archive}",
        *(f"{NAME}/{n}" for n in ruby),
    ]
    assert files_below(raw) == sorted(expected)
    (entry,) = manifest["files"]
    assert entry["sha256"] == sha(built) and entry["archive"] == f".archives/{archive}"
    assert entry["extracted"]["files"] == {name: sha(source) for name, source in ruby.items()}

    # again: nothing requested; without the archive the recorded extraction still serves
    fetch_dataset(spec_of(remote), raw, **FAST)
    (raw / NAME / ".archives" / archive).unlink()
    again = fetch_dataset(spec_of(remote), raw, **FAST)
    assert again["files"][0]["extracted"] == entry["extracted"]
    assert len(server.requests) == 1


def test_single_gz_file_is_extracted(server, cosqa, tmp_path):
    raw = tmp_path / "raw"
    built = build_archive(tmp_path / "cosqa-dev.json.gz", {"cosqa-dev.json": cosqa})
    remote = pinned("cosqa-dev.json.gz", built, server.serve("/c.json.gz", built), extract=True)
    fetch_dataset(spec_of(remote), raw, **FAST)
    assert (raw / NAME / "cosqa-dev.json").read_bytes() == cosqa.read_bytes()


def test_archive_placed_by_hand_is_verified_moved_and_extracted(ruby, tmp_path, no_network):
    raw = tmp_path / "raw"
    built = build_archive(tmp_path / "ruby.zip", ruby)
    remote = pinned("ruby.zip", built, "https://example.org/ruby.zip", extract=True)
    (raw / NAME).mkdir(parents=True)
    (raw / NAME / "ruby.zip").write_bytes(built.read_bytes())

    manifest = fetch_dataset(spec_of(remote), raw, **FAST)
    assert manifest["files"][0]["source"] == "placed by hand"
    assert not (raw / NAME / "ruby.zip").exists() and (raw / NAME / ".archives" / "ruby.zip").exists()
    for name, source in ruby.items():
        assert (raw / NAME / name).read_bytes() == source.read_bytes()


def test_extracted_content_placed_by_hand_is_recorded_then_enforced(ruby, tmp_path, no_network):
    raw = tmp_path / "raw"
    remote = RemoteFile("ruby.zip", ("https://example.org/ruby.zip",), "0" * 64, extract=True)
    for name, source in ruby.items():
        (raw / NAME / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / NAME / name).write_bytes(source.read_bytes())

    entry = fetch_dataset(spec_of(remote), raw, **FAST)["files"][0]
    assert entry["verified"] == "first use" and entry["source"] == "placed by hand" and entry["archive"] is None
    assert sorted(entry["extracted"]["files"]) == sorted(ruby)
    assert fetch_dataset(spec_of(remote), raw, **FAST)["files"][0]["verified"] == "recorded checksum"

    corrupted_copy(ruby["ruby/test.jsonl"], raw / NAME / "ruby" / "test.jsonl")
    with pytest.raises(DownloadError, match=r"ruby/test\.jsonl"):
        fetch_dataset(spec_of(remote), raw, **FAST)


@dataclass(frozen=True)
class DeclaredRemoteFile(RemoteFile):
    """RemoteFile with the ``unpacks_to`` field download.py reads where a spec declares it."""

    unpacks_to: tuple[str, ...] = ()


def test_declared_unpack_target_recognises_extracted_content(ruby, tmp_path, no_network):
    raw = tmp_path / "raw"
    kit = DeclaredRemoteFile("kit-dataset.zip", ("https://example.org/kit.zip",), None, extract=True)
    with pytest.raises(DownloadError, match="its extracted content as kit-dataset/"):
        fetch_dataset(spec_of(kit), raw, offline=True, **FAST)
    declared = DeclaredRemoteFile(
        "kit-dataset.zip", ("https://example.org/kit.zip",), None, extract=True, unpacks_to=("dataset/",)
    )
    with pytest.raises(DownloadError, match="its extracted content as dataset/"):
        fetch_dataset(spec_of(declared), raw, offline=True, **FAST)
    (raw / NAME / "dataset").mkdir(parents=True)
    (raw / NAME / "dataset" / "train.jsonl").write_bytes(ruby["ruby/test.jsonl"].read_bytes())
    entry = fetch_dataset(spec_of(declared), raw, **FAST)["files"][0]
    assert list(entry["extracted"]["files"]) == ["dataset/train.jsonl"] and entry["source"] == "placed by hand"


def test_archives_unpacking_over_each_other_settle(ruby, cosqa, tmp_path, no_network):
    """Two kits both unpack to dataset/ and share a file: the later one in the spec owns it, and a
    second run finds everything intact instead of unpacking again."""
    raw = tmp_path / "raw"
    kits = {
        "kit-a.zip": {"dataset/a.jsonl": ruby["ruby/test.jsonl"], "dataset/common.json": cosqa},
        "kit-b.tar.gz": {"dataset/b.jsonl": ruby["ruby/valid.jsonl"], "dataset/common.json": ruby["ruby/test.jsonl"]},
    }
    (raw / NAME).mkdir(parents=True)
    remotes = [
        RemoteFile(name, ("https://example.org/" + name,), None, extract=True)
        for name, members in kits.items()
        if build_archive(raw / NAME / name, members)
    ]
    first = fetch_dataset(spec_of(*remotes), raw, **FAST)
    assert (raw / NAME / "dataset" / "common.json").read_bytes() == ruby["ruby/test.jsonl"].read_bytes()
    assert sorted(first["files"][0]["extracted"]["files"]) == ["dataset/a.jsonl"]
    assert sorted(first["files"][1]["extracted"]["files"]) == ["dataset/b.jsonl", "dataset/common.json"]

    mtime = (raw / NAME / "dataset" / "a.jsonl").stat().st_mtime_ns
    again = fetch_dataset(spec_of(*remotes), raw, **FAST)
    assert [e["extracted"] for e in again["files"]] == [e["extracted"] for e in first["files"]]
    assert [e["verified"] for e in again["files"]] == ["recorded checksum"] * 2
    assert (raw / NAME / "dataset" / "a.jsonl").stat().st_mtime_ns == mtime  # not unpacked again


def _tar_member(tf: tarfile.TarFile, name: str, data: bytes = b"", **fields) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data) if fields.get("type", tarfile.REGTYPE) == tarfile.REGTYPE else 0
    for key, value in fields.items():
        setattr(info, key, value)
    tf.addfile(info, io.BytesIO(data) if info.size else None)


def _unsafe_archive(path: Path, good: Path, case: str, outside: Path) -> str:
    """An archive with one good member and one unsafe member; returns the unsafe member's name."""
    data = good.read_bytes()
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("ruby/test.jsonl", data)
            if case == "symlink":
                info = zipfile.ZipInfo("ruby/passwd")
                info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
                zf.writestr(info, "/etc/passwd")
                return "ruby/passwd"
            name = {"dotdot": "../evil.txt", "absolute": str(outside)}[case]
            zf.writestr(name, b"evil")
            return name
    with tarfile.open(path, "w:gz") as tf:
        _tar_member(tf, "ruby/test.jsonl", data)
        name = {
            "dotdot": "../evil.txt",
            "absolute": str(outside),
            "symlink": "ruby/passwd",
            "hardlink": "ruby/hard",
            "device": "ruby/null",
            "through-link": "deep/p/evil.txt",
        }[case]
        if case in ("dotdot", "absolute"):
            _tar_member(tf, name, b"evil")
        elif case == "symlink":
            _tar_member(tf, name, type=tarfile.SYMTYPE, linkname="/etc/passwd")
        elif case == "hardlink":
            _tar_member(tf, name, type=tarfile.LNKTYPE, linkname="../outside.txt")
        elif case == "device":
            _tar_member(tf, name, type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        else:  # a link to a shallower directory, then a member written through it
            _tar_member(tf, "deep/p", type=tarfile.SYMTYPE, linkname="..")
            _tar_member(tf, name, b"evil")
    return name


UNSAFE = [("evil.zip", c) for c in ("dotdot", "absolute", "symlink")] + [
    ("evil.tar.gz", c) for c in ("dotdot", "absolute", "symlink", "hardlink", "device", "through-link")
]


@pytest.mark.parametrize(("archive", "case"), UNSAFE, ids=[f"{a}-{c}" for a, c in UNSAFE])
def test_unsafe_archive_members_are_rejected_and_nothing_extracted(ruby, tmp_path, no_network, archive, case):
    raw, outside = tmp_path / "raw", tmp_path / "outside" / "evil"
    placed = raw / NAME / ".archives" / archive
    placed.parent.mkdir(parents=True)
    member = _unsafe_archive(placed, ruby["ruby/test.jsonl"], case, outside)
    remote = RemoteFile(archive, ("https://example.org/" + archive,), None, extract=True)

    with pytest.raises(DownloadError) as failed:
        fetch_dataset(spec_of(remote), raw, **FAST)
    assert archive in str(failed.value) and repr(member) in str(failed.value)
    assert "UnsafeArchiveError" not in str(failed.value)
    assert files_below(raw) == [f"{NAME}/.archives/{archive}"]  # nothing extracted, no temporary directory
    assert not (raw / NAME).joinpath("ruby").exists() and not outside.exists()
    assert not (tmp_path / "evil.txt").exists() and not (raw / "evil.txt").exists()


def test_spec_path_outside_the_dataset_directory_is_refused(tmp_path):
    with pytest.raises(DownloadError, match="not a plain relative path"):
        fetch_dataset(spec_of(RemoteFile("../x.json", ("https://example.org/x",), None)), tmp_path, offline=True)


def test_unsafe_archive_error_type(ruby, tmp_path):
    from csbench.datasets.download import extract_archive

    archive = tmp_path / "evil.tar.gz"
    _unsafe_archive(archive, ruby["ruby/test.jsonl"], "dotdot", tmp_path / "x")
    dest = tmp_path / "dest"
    with pytest.raises(UnsafeArchiveError, match=r"evil\.tar\.gz: member '\.\./evil\.txt'"):
        extract_archive(archive, dest, dest)
    assert list(dest.iterdir()) == []


def test_a_derived_file_without_url_is_optional_but_verified_when_present(tmp_path: Path) -> None:
    """Files a kit's preprocessing writes (no URL) do not block the download; the reader derives them."""
    from csbench.datasets.base import DatasetSpec, RemoteFile
    from csbench.datasets.download import DownloadError, fetch_dataset

    data = b"derived content\n"
    derived = RemoteFile("dataset/test.jsonl", (), hashlib.sha256(data).hexdigest(), note="derived")
    spec = DatasetSpec(name="toy", kind="release", languages=("python",), description="", licence="", files=(derived,))
    manifest = fetch_dataset(spec, tmp_path, progress=False, offline=True)
    assert manifest["complete"] and manifest["files"] == [
        {"path": "dataset/test.jsonl", "source": "derived by the reader", "present": False}
    ]
    placed = tmp_path / "toy" / "dataset" / "test.jsonl"
    placed.parent.mkdir(parents=True, exist_ok=True)
    placed.write_bytes(b"not the pinned content\n")
    with pytest.raises(DownloadError, match=r"dataset/test\.jsonl"):
        fetch_dataset(spec, tmp_path, progress=False, offline=True)
    placed.write_bytes(data)
    assert fetch_dataset(spec, tmp_path, progress=False, offline=True)["files"][0]["sha256"] == derived.sha256
