"""A run's pools encoded as N jobs through the embedding cache (csbench.models.shards; the encode_shard
rule): the index job then encodes nothing and its vectors are bitwise those of one job."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from corpora import local_functions
from test_csn_models import CODES, QUERIES

from csbench.cache.embeddings import EmbeddingCache
from csbench.evaluate.runner import build_index, index_frames
from csbench.models.csn import CSNEncoder
from csbench.models.encoder import DenseRetriever
from csbench.models.shards import encode_shard, encoding_plan, shard_of

IDENTITY = "checkpoint:sha256sums:" + "ef" * 32
PROTOCOLS = ["csn-1000", "full-corpus"]  # the test pool (its chunks) and the codebase


@pytest.fixture(scope="module")
def pools() -> dict[str, pd.DataFrame]:
    codes = local_functions("python", 420)  # real functions of the sources installed here
    languages = ["python" if i % 4 else "ruby" for i in range(len(codes))]  # two languages, interleaved
    test = pd.DataFrame({"id": [f"t{i}" for i in range(300)], "code": codes[:300], "language": languages[:300],
                         "query": [QUERIES[i % len(QUERIES)] for i in range(300)],
                         "url": [f"u{i}" for i in range(300)]})  # fmt: skip
    codebase = pd.DataFrame({"id": [f"c{i}" for i in range(240)], "code": codes[180:], "language": languages[180:],
                             "url": [f"u{i}" for i in range(180, 420)]})  # fmt: skip
    return {"test": test, "codebase": codebase}  # 120 codes in both: the codebase's are cache hits


@pytest.fixture(scope="module")
def model() -> CSNEncoder:
    return CSNEncoder.from_training_data(QUERIES * 5, CODES * 5, {"architecture": "nbow", "dim": 16}, seed=0).eval()


def index(model, pools, cache) -> dict[str, DenseRetriever]:
    def factory() -> DenseRetriever:
        retriever = DenseRetriever(model, batch_size=16)
        retriever.use_embedding_cache(cache, IDENTITY)
        return retriever

    return build_index(factory, pools["test"], PROTOCOLS, pools["codebase"]).retrievers


def test_the_plan_lists_each_code_once_per_language_in_the_index_jobs_order(pools) -> None:
    plan = encoding_plan(pools.values())
    assert [language for language, _ in plan] == ["ruby", "python", "ruby", "python"]
    assert sum(len(codes) for _, codes in plan) == len(set(zip(pd.concat(pools.values())["code"],
                                                                pd.concat(pools.values())["language"], strict=True)))
    batches = [np.arange(i, i + 2) for i in range(0, 14, 2)]
    parts = [shard_of(batches, k, 3) for k in range(3)]
    assert [len(p) for p in parts] == [2, 2, 3] and [b for p in parts for b in p] == batches
    with pytest.raises(ValueError, match=r"shard must be in 0\.\.2"):
        shard_of(batches, 3, 3)


@pytest.mark.parametrize("shards", [1, 3, 5])
def test_sharded_jobs_leave_index_nothing_to_encode_and_the_same_bits(tmp_path: Path, model, pools, shards) -> None:
    one_job = index(model, pools, EmbeddingCache(tmp_path / "one"))
    frames = list(index_frames(pools["test"], PROTOCOLS, pools["codebase"]).values())
    assert len(frames) == 2  # the test pool and the codebase
    assert sum(r.n_forward for r in one_job.values()) == sum(len(codes) for _, codes in encoding_plan(frames))
    cache = EmbeddingCache(tmp_path / "shards")
    done = [encode_shard(index_retriever(model, cache), frames, k, shards) for k in range(shards)]
    encoded = sum(r.n_forward for r in one_job.values())
    assert sum(d["planned"] for d in done) == sum(d["encoded"] for d in done) == encoded
    again = encode_shard(index_retriever(model, cache), frames, 0, shards)  # a re-run job: all cached
    assert again["encoded"] == 0
    sharded = index(model, pools, cache)
    assert sum(r.n_forward for r in sharded.values()) == 0
    for kind in one_job:
        assert np.array_equal(sharded[kind].code_vectors.view(np.uint32), one_job[kind].code_vectors.view(np.uint32))


def index_retriever(model, cache) -> DenseRetriever:
    retriever = DenseRetriever(model, batch_size=16)
    retriever.use_embedding_cache(cache, IDENTITY)
    return retriever


def test_shards_need_the_cache(model, pools) -> None:
    with pytest.raises(ValueError, match="needs the embedding cache"):
        encode_shard(DenseRetriever(model), pools.values(), 0, 2)
