"""The embedding cache as the pipeline uses it (issue #28): one vector per key whatever order concurrent
jobs commit in, the identity of each kind of model (a checkpoint's weights, a model folder, an endpoint, a
user's class with a revision), and a robustness grid that re-encodes only the queries a perturbation
changed."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_csn_models import CODES, QUERIES, tiny_model

from csbench.cache.embeddings import EmbeddingCache, Namespace, from_setting
from csbench.models import ModelSpec
from csbench.models.build import attach_embedding_cache, encoder_identity, folder_identity

NS = Namespace("sha256:" + "ab" * 32, {"kind": "test"}, "query")


def constant(value: float):
    def encode(texts: list[str]) -> np.ndarray:
        return np.full((len(texts), 4), value, dtype=np.float32)

    return encode


def test_a_text_committed_first_is_the_vector_every_later_caller_gets(tmp_path: Path) -> None:
    """Two jobs encode an overlapping text at once (here with different values, as two batches can differ in
    the last bits); the first to commit wins: the other job gets that vector too, and the cache holds it once."""

    def slow_encode(texts: list[str]) -> np.ndarray:  # while this job encodes, another one commits "b"
        EmbeddingCache(tmp_path).get_or_encode(NS, ["a", "b"], constant(1.0))
        return constant(2.0)(texts)

    second = EmbeddingCache(tmp_path).get_or_encode(NS, ["b", "c", "b"], slow_encode)
    assert second[:, 0].tolist() == [1.0, 2.0, 1.0]  # b: the committed vector, not this job's
    assert EmbeddingCache(tmp_path).stats()["entries"] == 3
    assert EmbeddingCache(tmp_path).lookup(NS, ["a", "b", "c"]).vectors[:, 0].tolist() == [1.0, 1.0, 2.0]


def _race(root: str, texts: list[str], value: float, barrier, out) -> None:
    cache = EmbeddingCache(root, shard_rows=7)
    barrier.wait()
    vectors = cache.get_or_encode(NS, texts, constant(value))
    out.put((value, texts, vectors.tolist()))


def test_concurrent_jobs_each_use_the_vector_the_cache_keeps(tmp_path: Path) -> None:
    """Four processes encode overlapping texts at once, each giving its own values: every process's result
    equals what the cache serves afterwards, and no text is stored twice."""
    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(4), context.Queue()
    words = [f"text {i}" for i in range(60)]
    sets = [words[k * 10 : k * 10 + 30] for k in range(4)]  # neighbours share 20 texts
    workers = [context.Process(target=_race, args=(str(tmp_path), s, float(k + 1), barrier, out))
               for k, s in enumerate(sets)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    cache = EmbeddingCache(tmp_path)
    final = cache.lookup(NS, words)
    assert final.hit.all()
    served = dict(zip(words, final.vectors[:, 0].tolist(), strict=True))
    for _, texts, vectors in results:
        assert [row[0] for row in vectors] == [served[t] for t in texts]
    assert cache.stats()["entries"] == len(words)  # each text once


def _nbow_spec() -> ModelSpec:
    return ModelSpec("nbow", "test", "csn", zero_shot=False, trainable=True, defaults_fn=dict)


def test_a_checkpoint_identity_changes_with_its_weights_so_nothing_stale_is_served(tmp_path: Path) -> None:
    from csbench.models.encoder import DenseRetriever, load_encoder, save_encoder

    spec = _nbow_spec()
    one = save_encoder(tiny_model("nbow", seed=0), tmp_path / "a")
    two = save_encoder(tiny_model("nbow", seed=1), tmp_path / "b")
    again = save_encoder(load_encoder(one), tmp_path / "c")  # the same weights written again
    ids = [encoder_identity(spec, {}, folder) for folder in (one, two, again)]
    assert ids[0].startswith("checkpoint:sha256sums:") and ids[0] != ids[1] and ids[0] == ids[2]
    cache = EmbeddingCache(tmp_path / "cache")
    pool = pd.DataFrame({"code": CODES, "language": "python"})

    def index(folder: Path) -> DenseRetriever:
        retriever = DenseRetriever(load_encoder(folder), batch_size=4)
        attach_embedding_cache(retriever, cache, spec, {}, folder)
        retriever.index(pool)
        return retriever

    first, retrained, same = index(one), index(two), index(again)
    assert first.n_forward == retrained.n_forward == len(set(CODES)) and same.n_forward == 0
    assert not np.array_equal(first.code_vectors, retrained.code_vectors)
    assert np.array_equal(first.code_vectors, same.code_vectors)
    assert first.encoding_record()["embedding_cache"] == ids[0]


def test_model_folders_endpoints_and_user_classes_have_identities(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "weights.bin").write_bytes(b"\0" * 64)
    before = folder_identity(folder)
    assert before == folder_identity(folder) and before.startswith("folder:sha256:")
    (folder / "weights.bin").write_bytes(b"\1" * 64)
    assert folder_identity(folder) != before
    hf = ModelSpec("mine", "test", "hf", zero_shot=True, trainable=True, defaults_fn=dict)
    assert encoder_identity(hf, {"model_id": str(folder)}, None) == folder_identity(folder)
    api = ModelSpec("ada", "test", "api", zero_shot=True, trainable=False, defaults_fn=dict)
    params = {"base_url": "http://127.0.0.1:9/v1/", "model": "emb", "revision": "r1", "api_key_env": None}
    assert encoder_identity(api, params, None) == "api:http://127.0.0.1:9/v1/emb@r1"

    class User:
        def __init__(self, revision):
            self.source = {"class": "pkg:Model", "distribution": "pkg", "version": "1.0", "revision": revision}

        def model_source(self):
            return self.source

    python = ModelSpec("byo", "test", "python", zero_shot=True, trainable=False, defaults_fn=dict)
    assert encoder_identity(python, {}, None, User(None)) is None  # no revision: csbench cannot see a change
    assert '"revision":"v2"' in encoder_identity(python, {}, None, User("v2"))
    lexical = ModelSpec("bm25", "test", "lexical", zero_shot=True, trainable=False, defaults_fn=dict)
    assert attach_embedding_cache(object(), EmbeddingCache(tmp_path), lexical, {}, None) is not None


def test_the_config_switches_the_cache_and_places_it_under_the_project(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CSBENCH_EMBEDDING_CACHE", raising=False)
    assert from_setting({"dir": None}) is None
    assert from_setting({"dir": "default"}, tmp_path).root == tmp_path / "cache" / "embeddings"
    assert from_setting({"dir": "elsewhere", "max_gb": 0.5}, tmp_path).root == tmp_path / "elsewhere"
    assert from_setting({"dir": "elsewhere", "max_gb": 0.5}, tmp_path).max_bytes == 500_000_000
    monkeypatch.setenv("CSBENCH_EMBEDDING_CACHE", str(tmp_path / "shared"))
    assert from_setting({"dir": "default"}, tmp_path).root == tmp_path / "shared"


def test_a_robustness_grid_encodes_each_changed_query_once(tmp_path: Path) -> None:
    """The robust phase's query sets through a cached retriever: the clean set (ratio 0) is encoded once,
    and each perturbed set costs only the queries it changed; the vectors are those of a plain run where
    a query is unchanged."""
    from csbench.models.encoder import DenseRetriever

    model = tiny_model("nbow")
    pool = pd.DataFrame({"code": CODES, "language": "python"})
    retriever = DenseRetriever(model, batch_size=4)
    retriever.use_embedding_cache(EmbeddingCache(tmp_path), "sha256:" + "cd" * 32)
    retriever.index(pool)
    clean = list(QUERIES)
    retriever.prepare_queries(clean)
    encoded = retriever.n_forward
    seen = set(clean)
    changed = [q.upper() if i % 3 == 0 else q for i, q in enumerate(clean)]
    for queries in (clean, changed, [q + "?" for q in clean[:2]] + clean[2:], changed):
        before = retriever.n_forward
        retriever.prepare_queries(queries)
        assert retriever.n_forward - before == len(set(queries) - seen)  # only what no set had before
        seen |= set(queries)
    assert retriever.n_forward > encoded
    plain = DenseRetriever(model, batch_size=4)
    plain.index(pool)
    assert np.array_equal(retriever.query_matrix(clean), plain.query_matrix(clean))


def test_the_encoding_settings_are_validated_with_their_file_and_line(tmp_path: Path) -> None:

    from csbench.config import ConfigError, load_config

    params = Path(__file__).resolve().parents[2] / "params.yaml"
    overlay = tmp_path / "overlay.yaml"

    def load(text: str):
        overlay.write_text(text)
        return load_config([params, overlay])

    config = load("study: t\n")
    assert config.encoding == {"processes": 1, "shards": 1}
    assert config.embedding_cache == {"dir": "default", "max_gb": None}
    assert load("encoding:\n  shards: 4\n  processes: 2\n").encoding == {"processes": 2, "shards": 4}
    with pytest.raises(ConfigError, match=r"overlay\.yaml:4: 4 encode_shard jobs .* embedding_cache\.dir is null"):
        load("embedding_cache:\n  dir: null\nencoding:\n  shards: 4\n")
    for bad in ("encoding:\n  shards: 0\n", "encoding:\n  processes: two\n", "embedding_cache:\n  max_gb: -1\n",
                "embedding_cache:\n  where: x\n"):
        with pytest.raises(ConfigError):
            load(bad)


def test_query_latencies_time_the_model_not_a_cache_lookup(tmp_path: Path) -> None:
    """The latency figures encode each sampled query with the model (not a lookup in a warm cache), and
    those timing passes are not counted as the run's encodings."""
    from csbench.evaluate.runner import PoolIndex, _query_latencies
    from csbench.models.encoder import DenseRetriever

    cache = EmbeddingCache(tmp_path)
    retriever = DenseRetriever(tiny_model("nbow"), batch_size=4)
    retriever.use_embedding_cache(cache, "sha256:" + "77" * 32)
    retriever.index(pd.DataFrame({"code": CODES, "language": "python"}))
    retriever.prepare_queries(QUERIES)  # the queries are in the cache now
    retriever.prepare_queries([])  # as search does before it times them
    before, counts = retriever.n_forward, dict(cache._counts)
    calls = []
    original = retriever.model_vectors
    retriever.model_vectors = lambda *a, **k: calls.append(a[0]) or original(*a, **k)
    latencies = _query_latencies(PoolIndex({"test": retriever}, {"test": []}, 0.0), ["test"], QUERIES)
    assert len(latencies) == len(QUERIES) and len(calls) == len(QUERIES)  # each one through the model
    assert retriever.n_forward == before and cache._counts == counts  # not counted, not looked up
    assert retriever.embedding_cache[0] is cache  # and the cache is back for the search
