"""ResponseCache: atomic entries with a length + sha256 header; torn, corrupt, killed, concurrent and
full-disk writes never leave an entry that reads back wrong."""

from __future__ import annotations

import errno
import hashlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from csbench.api.cache import ResponseCache, cache_key, decode_entry, default_cache_dir, encode_entry

SRC = str(Path(__file__).resolve().parents[2] / "src")


def key_of(i: int) -> str:
    return hashlib.sha256(f"key {i}".encode()).hexdigest()


def payload_of(key: str, size: int) -> bytes:
    """A payload determined by its key (so any reader can tell a right one from a wrong one)."""
    block = hashlib.sha256(key.encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def test_round_trip_layout_and_stats(api_cache: ResponseCache) -> None:
    key = key_of(1)
    assert api_cache.get(key) is None
    assert api_cache.put(key, b'{"x": 1}')
    assert api_cache.get(key) == b'{"x": 1}'
    path = api_cache.directory / key[:2] / key
    assert path.is_file()
    assert path.read_bytes().startswith(b"csbench-api-cache 1 8 " + hashlib.sha256(b'{"x": 1}').hexdigest().encode())
    assert api_cache.stored_keys() == [key]
    stats = api_cache.stats()
    assert (stats["hits"], stats["misses"], stats["writes"], stats["write_errors"]) == (1, 1, 1, 0)
    assert api_cache.put(key, b"")  # empty payloads are entries too
    assert api_cache.get(key) == b""
    with pytest.raises(ValueError, match="hex digest"):
        api_cache.get("../../etc/passwd")


def test_cache_key_is_canonical() -> None:
    body = {"model": "m", "input": ["a"], "encoding_format": "float"}
    reordered = {"encoding_format": "float", "input": ["a"], "model": "m"}
    key = cache_key("http://h/v1", "m", None, body)
    assert len(key) == 64 and key == cache_key("http://h/v1/", "m", None, reordered)
    assert key != cache_key("http://other/v1", "m", None, body)
    assert key != cache_key("http://h/v1", "m2", None, body)
    assert key != cache_key("http://h/v1", "m", "rev1", body)
    assert key != cache_key("http://h/v1", "m", None, {**body, "input": ["b"]})


def test_default_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CSBENCH_API_CACHE", raising=False)
    assert default_cache_dir(tmp_path) == tmp_path / "cache" / "api"
    assert default_cache_dir().parts[-2:] == ("cache", "api")
    monkeypatch.setenv("CSBENCH_API_CACHE", str(tmp_path / "elsewhere"))
    assert default_cache_dir(tmp_path) == tmp_path / "elsewhere"


@pytest.mark.parametrize("damage", ["truncate", "flip", "header", "empty", "extra"])
def test_torn_or_corrupt_entry_is_a_removed_miss(api_cache: ResponseCache, damage: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    key = key_of(2)
    api_cache.put(key, payload_of(key, 5000))
    path = api_cache.directory / key[:2] / key
    data = path.read_bytes()
    damaged = {
        "truncate": data[: len(data) // 2],  # a torn write
        "flip": data[:-10] + bytes([data[-10] ^ 1]) + data[-9:],  # same length, wrong digest
        "header": b"garbage" + data[7:],
        "empty": b"",
        "extra": data + b"tail",  # a longer payload than the header says
    }[damage]
    path.write_bytes(damaged)
    with caplog.at_level(logging.WARNING, logger="csbench.api"), pytest.warns(RuntimeWarning, match="torn or corrupt"):
        assert api_cache.get(key) is None
    assert not path.exists()
    assert "torn or corrupt" in caplog.text
    assert api_cache.stats()["corrupt_removed"] == 1
    assert api_cache.put(key, b"again") and api_cache.get(key) == b"again"


def test_decode_entry_checks_everything() -> None:
    entry = encode_entry(b"abc")
    assert decode_entry(entry) == b"abc"
    assert decode_entry(entry[:-1]) is None
    assert decode_entry(entry.replace(b" 3 ", b" x ")) is None
    assert decode_entry(b"no newline") is None


# -- a writer killed with SIGKILL --------------------------------------------------------------------
PAUSED_WRITER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {src!r})
    from csbench.api.cache import ResponseCache
    if {where!r} == "mid-write":  # half the bytes are in the temporary file: say so, and wait to be killed
        real_fdopen = os.fdopen
        class Slow:
            def __init__(self, handle):
                self.handle = handle
            def write(self, data):
                self.handle.write(data[: len(data) // 2])
                self.handle.flush()
                print("PAUSED", flush=True)
                time.sleep(60)
            def __getattr__(self, name):
                return getattr(self.handle, name)
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                self.handle.close()
        os.fdopen = lambda fd, *a, **k: Slow(real_fdopen(fd, *a, **k))
    else:  # the temporary file is whole and fsynced: killed before the rename
        real_fsync = os.fsync
        def fsync_then_wait(fd):
            real_fsync(fd)
            print("PAUSED", flush=True)
            time.sleep(60)
        os.fsync = fsync_then_wait
    ResponseCache({directory!r}).put({key!r}, b"x" * 3_000_000)
""")

LOOPING_WRITER = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, {src!r})
    from csbench.api.cache import ResponseCache
    cache = ResponseCache({directory!r})
    print("STARTED", flush=True)
    for round in range(1000):
        for i in range(20):
            key = hashlib.sha256(f"key {{i}}".encode()).hexdigest()
            block = hashlib.sha256(key.encode()).digest()
            size = 200_000 + 50_000 * i + round
            cache.put(key, (block * (size // 32 + 1))[:size])
""")


@pytest.mark.parametrize("where", ["mid-write", "before-rename"])
def test_writer_killed_mid_write_or_before_rename_leaves_no_entry(tmp_path: Path, where: str) -> None:
    directory, key = tmp_path / "cache", key_of(3)
    code = PAUSED_WRITER.format(src=SRC, directory=str(directory), key=key, where=where)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "PAUSED"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    leftovers = list((directory / key[:2]).iterdir())
    assert leftovers and all(p.name.endswith(".tmp") for p in leftovers)  # only the temporary file
    size = leftovers[0].stat().st_size
    assert size > 1_000_000 if where == "before-rename" else 0 < size < 2_000_000
    cache = ResponseCache(directory)
    assert cache.get(key) is None and cache.stored_keys() == []
    assert cache.put(key, b"whole") and cache.get(key) == b"whole"
    assert cache.remove_stale_temporaries(older_than_s=3600) == 0  # a writer may still be at work
    assert cache.remove_stale_temporaries(older_than_s=-1) == 1
    assert [p.name for p in (directory / key[:2]).iterdir()] == [key]


def test_writer_killed_at_random_moments_leaves_only_whole_entries(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    code = LOOPING_WRITER.format(src=SRC, directory=str(directory))
    for delay in (0.05, 0.2, 0.35, 0.5):
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "STARTED"
            time.sleep(delay)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.wait(timeout=30)
    cache = ResponseCache(directory)
    keys = cache.stored_keys()
    assert keys, "the writer wrote nothing before it was killed"
    for key in keys:
        payload = cache.get(key)
        assert payload is not None and payload == payload_of(key, len(payload))
    assert cache.stats()["corrupt_removed"] == 0


# -- concurrent writers -----------------------------------------------------------------------------
def _write_keys(directory: str, seed: int) -> None:
    cache = ResponseCache(directory)
    for round in range(3):
        for i in range(40):
            key = key_of(i)
            cache.put(key, payload_of(key, 1000 + 997 * ((i + seed + round) % 50)))
            got = cache.get(key)
            assert got is not None and got == payload_of(key, len(got))


def test_concurrent_processes_writing_the_same_keys(tmp_path: Path) -> None:
    directory = str(tmp_path / "cache")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_keys, args=(directory, seed)) for seed in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    cache = ResponseCache(directory)
    assert cache.stored_keys() == sorted(key_of(i) for i in range(40))
    for key in cache.stored_keys():
        payload = cache.get(key)
        assert payload is not None and payload == payload_of(key, len(payload))
    assert not list(Path(directory).glob("*/*.tmp"))  # every temporary file was renamed or removed


# -- a full disk ------------------------------------------------------------------------------------
class _FullDiskFile:
    def __init__(self, handle) -> None:
        self.handle = handle

    def write(self, data: bytes) -> int:
        self.handle.write(data[: len(data) // 3])  # part of it reaches the disk, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name: str):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_full_disk_warns_once_and_leaves_nothing(api_cache: ResponseCache, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture, where: str) -> None:
    kept = key_of(10)
    api_cache.put(kept, b"written before the disk filled")
    if where == "write":
        real_fdopen = os.fdopen
        monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: _FullDiskFile(real_fdopen(fd, *a, **k)))
    else:
        def no_space(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", no_space)
    with caplog.at_level(logging.WARNING, logger="csbench.api"), \
            pytest.warns(RuntimeWarning, match="No space left on device") as caught:
        assert api_cache.put(key_of(11), b"a" * 10_000) is False
        assert api_cache.put(key_of(12), b"b" * 10_000) is False  # read-only now: not even tried
    monkeypatch.undo()
    assert len([w for w in caught if "cannot write" in str(w.message)]) == 1
    assert caplog.text.count("cannot write the API response cache") == 1
    assert "going on without caching" in caplog.text
    assert api_cache.get(key_of(11)) is None and api_cache.get(key_of(12)) is None
    assert api_cache.get(kept) == b"written before the disk filled"
    assert api_cache.stored_keys() == [kept]
    assert not [p for p in api_cache.directory.rglob("*") if p.is_file() and p.name != kept]
    stats = api_cache.stats()
    assert stats["write_errors"] == 1 and stats["writable"] is False
