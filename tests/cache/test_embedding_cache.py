"""The embedding cache (csbench.cache.embeddings, issue #28): keys, bitwise round trips, concurrent and
killed writers, a full disk, torn shards, eviction, stats, and `csbench cache stats|clear`."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from csbench.cache.embeddings import (
    CACHE_ENV,
    PROJECT_ROOT,
    SHARD_SUFFIX,
    EmbeddingCache,
    Namespace,
    default_cache_dir,
)
from csbench.io import DiskFullError

DIM = 16
PARAMS = {"max_length": 256, "pooling": "mean", "normalize": True, "prefix": ""}


def vector_of(text: str, dim: int = DIM, salt: str = "") -> np.ndarray:
    """A vector that is a pure function of the text (what every writer of that text stores), with
    awkward bit patterns (a negative zero, tiny values) among ordinary ones."""
    seed = int.from_bytes(hashlib.sha256((salt + text).encode("utf-8", "surrogatepass")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    vector[0] = -0.0
    vector[1] = np.float32(1e-45)  # a subnormal
    return vector


def vectors_of(texts: list[str], dim: int = DIM, salt: str = "") -> np.ndarray:
    return np.stack([vector_of(t, dim, salt) for t in texts]) if texts else np.zeros((0, dim), np.float32)


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def shard_files(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*{SHARD_SUFFIX}"))


def temporaries(root: Path) -> list[Path]:
    return sorted(root.glob("*/.*.tmp"))


@pytest.fixture
def ns() -> Namespace:
    return Namespace("sha256:" + "ab" * 32, PARAMS, "code")


def test_round_trip_is_bitwise_in_a_new_process_object(tmp_path: Path, ns: Namespace) -> None:
    texts = [f"def f{i}(x):\n    return x + {i}" for i in range(300)] + ["", "ünïcødé \ud800 lone surrogate"]
    vectors = vectors_of(texts)
    assert EmbeddingCache(tmp_path).store(ns, texts, vectors) == len(texts)
    found = EmbeddingCache(tmp_path).lookup(ns, [*texts[::-1], "never stored"])
    assert found.hit.tolist() == [True] * len(texts) + [False]
    assert bitwise_equal(found.vectors[: len(texts)], vectors[::-1])
    assert not found.vectors[-1].any() and found.missing.tolist() == [len(texts)]
    # a float64 matrix is stored as float32 (the cache's one value type)
    other = Namespace("sha256:" + "cd" * 32, PARAMS, "code")
    EmbeddingCache(tmp_path).store(other, texts[:3], vectors[:3].astype(np.float64))
    assert bitwise_equal(EmbeddingCache(tmp_path).lookup(other, texts[:3]).vectors, vectors[:3])


def test_a_query_and_a_code_with_one_text_never_share_a_vector(tmp_path: Path) -> None:
    """MTEB's cache once served a document's vector for a query of the same text: the role is in the key."""
    cache = EmbeddingCache(tmp_path)
    query, code = (Namespace("rev:0123abcd", PARAMS, role) for role in ("query", "code"))
    assert query.key != code.key
    text = ["sort a list"]
    cache.store(code, text, vectors_of(text, salt="code"))
    assert not cache.lookup(query, text).hit.any()  # the code's vector is not served for the query
    cache.store(query, text, vectors_of(text, salt="query"))
    assert bitwise_equal(cache.lookup(query, text).vectors, vectors_of(text, salt="query"))
    assert bitwise_equal(cache.lookup(code, text).vectors, vectors_of(text, salt="code"))
    assert {n["role"] for n in cache.stats()["by_namespace"]} == {"query", "code"}
    assert cache.stats()["entries"] == 2
    with pytest.raises(ValueError, match="role"):
        Namespace("rev:0123abcd", PARAMS, "document")


def test_another_checkpoint_or_other_parameters_miss(tmp_path: Path, ns: Namespace) -> None:
    cache = EmbeddingCache(tmp_path)
    texts = ["a", "b", "c"]
    cache.store(ns, texts, vectors_of(texts))
    retrained = Namespace("sha256:" + "ef" * 32, PARAMS, "code")  # another weights file
    assert not cache.lookup(retrained, texts).hit.any()
    assert not cache.lookup(Namespace(ns.identity, {**PARAMS, "max_length": 512}, "code"), texts).hit.any()
    assert not cache.lookup(Namespace(ns.identity, {**PARAMS, "prefix": "passage: "}, "code"), texts).hit.any()
    same = Namespace(ns.identity, dict(reversed(list(PARAMS.items()))), "code")  # key order is moot
    assert same == ns and cache.lookup(same, texts).hit.all()
    with pytest.raises(ValueError, match="identity"):
        Namespace("", PARAMS, "code")


def test_store_skips_cached_texts_and_repeats_and_get_or_encode_encodes_each_miss_once(
    tmp_path: Path, ns: Namespace
) -> None:
    cache = EmbeddingCache(tmp_path)
    assert cache.store(ns, ["a", "b", "a"], vectors_of(["a", "b", "a"])) == 2
    assert cache.store(ns, ["a", "b"], vectors_of(["a", "b"])) == 0  # nothing new: no shard written
    assert len(shard_files(tmp_path)) == 1
    calls: list[list[str]] = []

    def encode(batch: list[str]) -> np.ndarray:
        calls.append(batch)
        return vectors_of(batch)

    texts = ["c", "a", "d", "c", "b"]
    assert bitwise_equal(cache.get_or_encode(ns, texts, encode), vectors_of(texts))
    assert calls == [["c", "d"]] and cache.stats()["encoded"] == 2
    again = EmbeddingCache(tmp_path)  # a second run: encodes nothing
    assert bitwise_equal(again.get_or_encode(ns, texts, encode), vectors_of(texts))
    assert calls == [["c", "d"]] and again.stats()["encoded"] == 0
    with pytest.raises(ValueError, match="one vector per text"):
        cache.store(ns, ["x"], np.zeros((2, DIM), np.float32))
    with pytest.raises(ValueError, match="-d vectors"):
        cache.store(ns, ["x"], np.zeros((1, DIM + 1), np.float32))


WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_embedding_cache import vectors_of
    from csbench.cache.embeddings import EmbeddingCache, Namespace
    root, first, last, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    order = sys.argv[5]
    cache = EmbeddingCache(root, shard_rows=7)
    ns = Namespace("sha256:" + "ab" * 32, {params!r}, "code")
    texts = [f"text {{i}}" for i in range(first, last)]
    if order == "backwards":
        texts.reverse()
    step = len(texts) if order == "at_once" else 25
    while time.time() < start_at:
        time.sleep(0.001)
    for i in range(0, len(texts), step):  # many small stores, each several shards: the writers interleave
        cache.store(ns, texts[i : i + step], vectors_of(texts[i : i + step]))
    """
)


def test_concurrent_writers_of_overlapping_texts_leave_every_entry_bitwise_right(tmp_path: Path, ns: Namespace) -> None:
    script = WRITER.format(tests=str(Path(__file__).parent), params=PARAMS)
    start_at = time.time() + 3.0  # every writer imports csbench first, then they start together
    plans = [(0, 400, "forwards"), (200, 600, "forwards"), (100, 500, "backwards"), (0, 600, "backwards"),
             (0, 600, "at_once")]
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(a), str(b), str(start_at), order])
        for a, b, order in plans
    ]
    assert [w.wait(timeout=300) for w in writers] == [0] * len(writers)
    texts = [f"text {i}" for i in range(600)]
    cache = EmbeddingCache(tmp_path)
    found = cache.lookup(ns, texts)
    assert found.hit.all() and bitwise_equal(found.vectors, vectors_of(texts))
    assert temporaries(tmp_path) == []
    stats = cache.stats()
    assert stats["corrupt_removed"] == 0 and stats["namespaces"] == 1
    assert stats["entries"] >= 600  # texts two writers stored at once are stored twice, never torn


KILLED_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    from test_embedding_cache import vectors_of
    import csbench.cache.embeddings as embeddings
    where = sys.argv[2]
    if where == "before_rename":
        os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)
    else:  # mid-write: half of the vector block written, then kill -9
        def half_then_kill(handle, data):
            if len(data) > 1000:
                handle.write(data[: len(data) // 2])
                handle.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            handle.write(data)
        embeddings._write_all = half_then_kill
    cache = embeddings.EmbeddingCache(sys.argv[1])
    ns = embeddings.Namespace("sha256:" + "ab" * 32, {params!r}, "code")
    texts = [f"new {{i}}" for i in range(200)]
    cache.store(ns, texts, vectors_of(texts))
    sys.exit(3)  # not reached
    """
)


@pytest.mark.parametrize("where", ["mid_write", "before_rename"])
def test_a_writer_killed_by_sigkill_leaves_no_entry_that_reads_back_wrong(
    tmp_path: Path, ns: Namespace, where: str
) -> None:
    old = [f"old {i}" for i in range(50)]
    EmbeddingCache(tmp_path).store(ns, old, vectors_of(old))
    script = KILLED_WRITER.format(tests=str(Path(__file__).parent), params=PARAMS)
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path), where], timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert len(temporaries(tmp_path)) == 1 and len(shard_files(tmp_path)) == 1  # its temporary, never read
    cache = EmbeddingCache(tmp_path)
    new = [f"new {i}" for i in range(200)]
    assert not cache.lookup(ns, new).hit.any()
    found = cache.lookup(ns, old)
    assert found.hit.all() and bitwise_equal(found.vectors, vectors_of(old))
    assert cache.stats()["temporaries"] == 1
    cache.evict()  # sweeps the temporaries of writers that are gone
    assert temporaries(tmp_path) == []
    assert cache.store(ns, new, vectors_of(new)) == 200
    assert bitwise_equal(EmbeddingCache(tmp_path).lookup(ns, new).vectors, vectors_of(new))


FSIZE_WRITER = textwrap.dedent(
    """
    import errno, resource, signal, sys
    sys.path.insert(0, {tests!r})
    from test_embedding_cache import vectors_of
    from csbench.cache.embeddings import EmbeddingCache, Namespace
    cache = EmbeddingCache(sys.argv[1])
    ns = Namespace("sha256:" + "ab" * 32, {params!r}, "code")
    texts = [f"new {{i}}" for i in range(2000)]
    vectors = vectors_of(texts)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))  # a file system with 40 kB left
    try:
        cache.store(ns, texts, vectors)
    except OSError as exc:
        print("ERRNO", exc.errno, exc, file=sys.stderr)
        sys.exit(7 if cache.stats()["write_errors"] == 1 else 8)
    sys.exit(0)
    """
)


def test_a_file_size_limit_mid_shard_is_reported_and_leaves_nothing_wrong(tmp_path: Path, ns: Namespace) -> None:
    """A real short write: RLIMIT_FSIZE makes the kernel stop the shard half-way (EFBIG)."""
    old = [f"old {i}" for i in range(50)]
    EmbeddingCache(tmp_path).store(ns, old, vectors_of(old))
    script = FSIZE_WRITER.format(tests=str(Path(__file__).parent), params=PARAMS)
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 7, run.stderr
    assert f"ERRNO {errno.EFBIG}" in run.stderr
    assert temporaries(tmp_path) == [] and len(shard_files(tmp_path)) == 1
    cache = EmbeddingCache(tmp_path)
    assert not cache.lookup(ns, [f"new {i}" for i in range(2000)]).hit.any()
    assert bitwise_equal(cache.lookup(ns, old).vectors, vectors_of(old))


def _fill_the_disk_half_way(monkeypatch: pytest.MonkeyPatch, after_parts: int = 0) -> None:
    """Every write after the first ``after_parts`` parts of files runs out of space half-way through."""
    import csbench.cache.embeddings as embeddings

    seen = {"parts": 0}

    def short_write(handle, data) -> None:
        seen["parts"] += 1
        if seen["parts"] > after_parts and len(data) > 64:
            handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        handle.write(data)

    monkeypatch.setattr(embeddings, "_write_all", short_write)


def test_a_full_disk_is_raised_and_leaves_no_entry(tmp_path: Path, ns: Namespace, monkeypatch) -> None:
    cache = EmbeddingCache(tmp_path)
    old = ["kept"]
    cache.store(ns, old, vectors_of(old))
    _fill_the_disk_half_way(monkeypatch)
    texts = [f"t{i}" for i in range(100)]
    with pytest.raises(DiskFullError) as raised:
        cache.store(ns, texts, vectors_of(texts))
    assert raised.value.errno == errno.ENOSPC and "nothing of it was left behind" in str(raised.value)
    assert cache.stats()["write_errors"] == 1
    monkeypatch.undo()
    assert temporaries(tmp_path) == [] and len(shard_files(tmp_path)) == 1
    fresh = EmbeddingCache(tmp_path)
    assert not fresh.lookup(ns, texts).hit.any()
    assert bitwise_equal(fresh.lookup(ns, old).vectors, vectors_of(old))


def test_a_full_disk_with_errors_warn_keeps_the_whole_shards_written_before(
    tmp_path: Path, ns: Namespace, monkeypatch, caplog
) -> None:
    cache = EmbeddingCache(tmp_path, shard_rows=10, errors="warn")
    # namespace.json (1 part), two shards of 4 parts each (header, keys, padding, vectors), then the disk is full
    _fill_the_disk_half_way(monkeypatch, after_parts=9)
    texts = [f"t{i}" for i in range(35)]
    with pytest.warns(RuntimeWarning, match="cannot write the embedding cache"):
        assert cache.store(ns, texts, vectors_of(texts)) == 20
    assert "No space left on device" in caplog.text
    monkeypatch.undo()
    found = EmbeddingCache(tmp_path).lookup(ns, texts)
    assert found.hit.tolist() == [True] * 20 + [False] * 15
    assert bitwise_equal(found.vectors[:20], vectors_of(texts[:20])) and temporaries(tmp_path) == []


@pytest.mark.parametrize("damage", ["vector_byte", "key_byte", "header_byte", "truncated", "extended"])
def test_a_torn_or_corrupt_shard_reads_as_a_removed_miss(tmp_path: Path, ns: Namespace, damage: str) -> None:
    texts = [f"t{i}" for i in range(40)]
    EmbeddingCache(tmp_path).store(ns, texts, vectors_of(texts))
    (shard,) = shard_files(tmp_path)
    data = bytearray(shard.read_bytes())
    if damage == "vector_byte":
        data[-5] ^= 0x01
    elif damage == "key_byte":
        data[128 + 3] ^= 0x80
    elif damage == "header_byte":
        data[9] ^= 0x01  # the row count
    elif damage == "truncated":
        del data[len(data) // 2 :]
    else:
        data += b"\0" * 64
    shard.write_bytes(bytes(data))
    cache = EmbeddingCache(tmp_path)
    with pytest.warns(RuntimeWarning, match="torn or corrupt"):
        found = cache.lookup(ns, texts)
    assert not found.hit.any() and not shard.exists() and cache.stats()["corrupt_removed"] == 1
    assert cache.store(ns, texts, vectors_of(texts)) == 40  # written again, whole
    assert bitwise_equal(EmbeddingCache(tmp_path).lookup(ns, texts).vectors, vectors_of(texts))


def test_eviction_keeps_the_total_under_max_bytes_least_recently_used_first(tmp_path: Path, ns: Namespace) -> None:
    cache = EmbeddingCache(tmp_path, touch_interval_s=0.0)
    batches = [[f"b{b} t{i}" for i in range(20)] for b in range(4)]
    for batch in batches:  # one shard each, written in this order
        cache.store(ns, batch, vectors_of(batch))
        time.sleep(0.05)
    sizes = {p.name: p.stat().st_size for p in shard_files(tmp_path)}
    assert len(sizes) == 4 and len(set(sizes.values())) == 1
    size = next(iter(sizes.values()))
    for b in (2, 0):  # used since: batch 2, then batch 0 (the most recent)
        assert cache.lookup(ns, batches[b]).hit.all()
        time.sleep(0.05)
    removed = cache.evict(max_bytes=2 * size + size // 2)
    assert len(removed) == 2
    assert sum(p.stat().st_size for p in shard_files(tmp_path)) <= 2 * size + size // 2
    fresh = EmbeddingCache(tmp_path)
    assert [bool(fresh.lookup(ns, batch).hit.all()) for batch in batches] == [True, False, True, False]
    assert [bool(fresh.lookup(ns, batch).hit.any()) for batch in batches] == [True, False, True, False]
    # a bounded cache evicts after each store on its own: the least recently used shard goes (batch 0's:
    # `fresh` used batch 0, then batch 2)
    bounded = EmbeddingCache(tmp_path, max_bytes=2 * size, touch_interval_s=0.0)
    time.sleep(0.05)
    bounded.store(ns, batches[1], vectors_of(batches[1]))
    assert bounded.stats()["bytes"] <= 2 * size and bounded.stats()["shards_evicted"] == 1
    assert [bool(bounded.lookup(ns, batch).hit.all()) for batch in batches] == [False, True, True, False]
    assert EmbeddingCache(tmp_path).evict() == []  # no limit: nothing removed


def test_stats_and_clear(tmp_path: Path, ns: Namespace) -> None:
    cache = EmbeddingCache(tmp_path / "cache", shard_rows=30)
    assert cache.stats()["namespaces"] == 0 and cache.stats()["entries"] == 0
    query = Namespace(ns.identity, PARAMS, "query")
    cache.store(ns, [f"c{i}" for i in range(70)], vectors_of([f"c{i}" for i in range(70)]))
    cache.store(query, ["q"], vectors_of(["q"]))
    stats = cache.stats()
    assert (stats["namespaces"], stats["shards"], stats["entries"]) == (2, 4, 71)
    assert stats["bytes"] == sum(p.stat().st_size for p in shard_files(tmp_path / "cache"))
    by_key = {n["key"]: n for n in stats["by_namespace"]}
    assert by_key[ns.key]["entries"] == 70 and by_key[ns.key]["shards"] == 3 and by_key[ns.key]["dim"] == DIM
    assert (by_key[query.key]["identity"], by_key[query.key]["params"], by_key[query.key]["role"]) == (
        ns.identity, PARAMS, "query")
    assert stats["rows_written"] == 71 and stats["shards_written"] == 4
    assert cache.clear(query.key[:10]) == 1
    assert not cache.lookup(query, ["q"]).hit.any() and cache.lookup(ns, ["c0"]).hit.all()
    with pytest.raises(ValueError, match="at least 8"):
        cache.clear("abc")
    assert cache.clear() == 3 and cache.stats()["namespaces"] == 0
    assert not cache.lookup(ns, ["c0"]).hit.any()


def test_default_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert default_cache_dir() == PROJECT_ROOT / "cache" / "embeddings"
    assert EmbeddingCache().root == PROJECT_ROOT / "cache" / "embeddings"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert default_cache_dir() == tmp_path


def test_the_module_imports_no_torch() -> None:
    code = "import sys, csbench.cache.embeddings; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


def test_cli_cache_stats_and_clear(tmp_path: Path, ns: Namespace, capsys) -> None:
    from csbench.cli import main

    cache = EmbeddingCache(tmp_path)
    cache.store(ns, ["a", "b"], vectors_of(["a", "b"]))
    cache.store(Namespace(ns.identity, PARAMS, "query"), ["a"], vectors_of(["a"]))
    assert main(["cache", "stats", "--root", str(tmp_path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["namespaces"], stats["entries"]) == (2, 3)
    assert main(["cache", "stats", "--root", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "2 namespace(s)" in text and ns.key[:16] in text and "code" in text
    assert main(["cache", "clear", "--root", str(tmp_path), "--namespace", ns.key[:12]]) == 0
    assert "1 shard file(s)" in capsys.readouterr().out
    assert EmbeddingCache(tmp_path).stats()["entries"] == 1
    assert main(["cache", "clear", "--root", str(tmp_path), "--namespace", "nothere00"]) == 2
    assert main(["cache", "evict", "--root", str(tmp_path)]) == 2  # needs --max-bytes
    assert main(["cache", "evict", "--root", str(tmp_path), "--max-bytes", "0"]) == 0
    assert "1 least recently used shard file(s)" in capsys.readouterr().out
    assert EmbeddingCache(tmp_path).stats()["entries"] == 0
    assert main(["cache", "clear", "--root", str(tmp_path)]) == 0
    assert EmbeddingCache(tmp_path).stats()["namespaces"] == 0


def test_a_dense_retriever_through_the_cache_encodes_nothing_the_second_time(tmp_path: Path) -> None:
    """The hook in DenseRetriever.encode: a second retriever over the same cache runs no forward pass and
    gets the same bytes; a query with a code's text gets the query vector; another identity misses."""
    import pandas as pd
    from test_csn_models import CODES, QUERIES, tiny_model

    from csbench.models.encoder import DenseRetriever

    model = tiny_model("nbow")
    pool = pd.DataFrame({"code": CODES, "language": "python"})
    queries = [*QUERIES, CODES[0]]  # a query whose text is a code's

    def run(identity: str | None) -> tuple[DenseRetriever, np.ndarray, np.ndarray]:
        retriever = DenseRetriever(model, batch_size=4)
        if identity is not None:
            retriever.use_embedding_cache(EmbeddingCache(tmp_path), identity)
        retriever.index(pool)
        return retriever, retriever.code_vectors, retriever.query_matrix(queries)

    plain, codes0, queries0 = run(None)
    first, codes1, queries1 = run("sha256:" + "12" * 32)
    assert first.n_forward == len(set(CODES)) + len(set(queries)) == plain.n_forward
    second, codes2, queries2 = run("sha256:" + "12" * 32)
    assert second.n_forward == 0
    for vectors in (codes1, codes2):
        assert bitwise_equal(vectors, codes0)
    for vectors in (queries1, queries2):
        assert bitwise_equal(vectors, queries0)
    assert not np.array_equal(queries2[-1], codes2[0])  # the code's text as a query: the query vector
    assert run("sha256:" + "34" * 32)[0].n_forward == first.n_forward  # another checkpoint: encoded again
    stats = EmbeddingCache(tmp_path).stats()
    assert sorted(n["role"] for n in stats["by_namespace"]) == ["code", "code", "query", "query"]
    assert {n["params"].get("language") for n in stats["by_namespace"] if n["role"] == "code"} == {"python"}
