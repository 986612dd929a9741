"""The ranking engine's results do not depend on how many threads a job gets.

A snakemake job runs with its rule's threads (snakemake sets OMP_NUM_THREADS / OPENBLAS_NUM_THREADS
to them), a dvc stage with every core: the same config must give the same bits under both. A
multi-threaded OpenBLAS rounds some products differently with its thread count (a score's last bit),
which moved near-tied codes (tests/e2e/test_beir_study: MiniLM's rank of one CoSQA query 228 under
dvc, 230 under snakemake). ``rank_dense`` now runs each product on one BLAS thread over fixed parts of
``PRODUCT_ROWS`` query rows, spread over its own threads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

RANK = """
import hashlib, json, numpy as np
from csbench.evaluate.ranking import rank_dense
rng = np.random.default_rng(11)
codes = rng.standard_normal((1500, 384), dtype=np.float32)
codes /= np.linalg.norm(codes, axis=1, keepdims=True)
answers = np.arange(2600) % 1500
queries = codes[answers] + 0.3 * rng.standard_normal((2600, 384), dtype=np.float32)
found = []
for memory_mb in (256, 16):  # blocks of 2,600 queries (parts of 1,024 rows ranked in the threads), of 1,024 or fewer
    result = rank_dense(queries, codes, answers, 50, memory_mb=memory_mb)
    found += [hashlib.sha256(a.tobytes()).hexdigest() for a in (result.ranks, result.top, result.top_scores)]
print(json.dumps(found))
"""


def ran_with(code: str, threads: int):
    """What ``code`` prints (JSON) in a process given ``threads`` threads, as snakemake gives a job."""
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ranked_with(threads: int) -> list[str]:
    return ran_with(RANK, threads)


def test_one_two_and_three_threads_give_the_same_ranks_lists_and_scores() -> None:
    one = ranked_with(1)
    assert ranked_with(2) == one
    assert ranked_with(3) == one


SEARCH = """
import hashlib, json, zlib, numpy as np, pandas as pd
from csbench.evaluate.runner import evaluate_pool

def vector(text):  # a text's vector: the same in every process
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    v = rng.standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)

class Dense:  # a retriever with vectors: the ranking engine's path (runner._search_dense)
    def index(self, frame):
        self.code_vectors = np.stack([vector(code) for code in frame["code"]])
    def query_matrix(self, queries):
        return np.stack([vector(q.removeprefix("query for ")) * 0.4 + vector(q) for q in queries]).astype(np.float32)
    def scores(self, query):
        return self.code_vectors @ self.query_matrix([query])[0]

ids = [f"id{k:05d}" for k in range(2100)]
pool = pd.DataFrame({"id": ids, "query": [f"query for code {k}" for k in range(2100)],
                     "code": [f"code {k}" for k in range(2100)], "func_name": [f"f{k}" for k in range(2100)]})
outcomes, _ = evaluate_pool(Dense(), pool, PROTOCOLS, 10, "t", progress=False)
print(json.dumps({name: hashlib.sha256(json.dumps([o.ranks, o.top1, list(o.run_lines)]).encode()).hexdigest()
                  for name, o in sorted(outcomes.items())}))
"""


@pytest.mark.parametrize("protocols", [["full-corpus", "id-chunks-1000", "advtest", "csn-1000"]])
def test_every_dense_protocol_ranks_the_same_under_any_thread_count(protocols: list[str]) -> None:
    """The whole dense search (runner._search_dense: the engine, CodeXGLUE's argsort rows, CodeSearchNet's
    float64 chunk matrices) under the threads a snakemake job or a dvc stage gets."""
    code = f"PROTOCOLS = {protocols!r}\n" + SEARCH
    one = ran_with(code, 1)
    assert set(one) == set(protocols)
    assert ran_with(code, 2) == one


ROWS = """
import hashlib, json, zlib, numpy as np, pandas as pd
from csbench.evaluate.runner import evaluate_pool

def vectors(text, n):  # a text's n vectors: the same in every process
    return np.random.default_rng(zlib.crc32(text.encode())).standard_normal((n, 384)).astype(np.float32)

class MaxSim:  # no code_vectors / query_matrix: runner._search_rows asks it for one query's scores at a time
    def index(self, frame):
        self.codes = np.concatenate([vectors(code, 1) for code in frame["code"]])
    def scores(self, query):  # its own matrix product: 2,100 codes x 8 query vectors
        q = vectors(query.removeprefix("query for "), 8) + 0.5 * vectors(query, 8)
        return (self.codes @ q.T).max(axis=1)

ids = [f"id{k:05d}" for k in range(2100)]
pool = pd.DataFrame({"id": ids, "query": [f"query for code {k}" for k in range(2100)],
                     "code": [f"code {k}" for k in range(2100)], "func_name": [f"f{k}" for k in range(2100)]})
outcomes, _ = evaluate_pool(MaxSim(), pool, ["full-corpus", "id-chunks-1000"], 10, "t", progress=False)
print(json.dumps({name: hashlib.sha256(json.dumps([o.ranks, o.top1, list(o.run_lines)]).encode()).hexdigest()
                  for name, o in sorted(outcomes.items())}))
"""


def test_a_retrievers_own_products_score_the_same_under_any_thread_count() -> None:
    """A retriever scored query by query (runner._search_rows) whose ``scores`` runs its own numpy product
    (a late-interaction max over query vectors): OpenBLAS rounds that 2,100 x 384 x 8 product's last bits
    differently on 1 and 2 threads, so the search runs every product of any path on one BLAS thread."""
    one = ran_with(ROWS, 1)
    assert set(one) == {"full-corpus", "id-chunks-1000"}
    assert ran_with(ROWS, 2) == one


ARGSORT = """
import hashlib, json, numpy as np
from csbench.evaluate.ranking import rank_dense_argsort
rng = np.random.default_rng(5)
distinct = rng.integers(-3, 4, size=(700, 16)).astype(np.float32)  # small integers: many exact ties
codes = distinct[np.arange(1400) % 700]  # every code twice: tied answers and tied others
keys = np.arange(1400)
queries = codes[::2] + rng.integers(-1, 2, size=(700, 16)).astype(np.float32)
found = []
for memory_mb in (256, 2):  # one block of 700 rows, blocks of 77 rows
    result = rank_dense_argsort(queries, codes, keys[::2], keys, 20, memory_mb=memory_mb)
    arrays = (result.ranks, result.top, result.top_scores, result.tied)
    found += [hashlib.sha256(a.tobytes()).hexdigest() for a in arrays]
print(json.dumps(found))
"""


def test_codexglue_argsort_ranks_the_same_under_any_thread_count() -> None:
    """rank_dense_argsort (full-corpus's CodeXGLUE order) ranks each block's rows in parts over its
    threads: ranks, lists, scores and tie flags the same under 1, 2 and 3 threads, ties included."""
    one = ran_with(ARGSORT, 1)
    assert ran_with(ARGSORT, 2) == one
    assert ran_with(ARGSORT, 3) == one


def test_codexglue_argsort_parts_are_ranked_at_once_and_equal_one_pass(monkeypatch) -> None:
    """With 3 threads a block of 700 rows is ranked in 3 parts at once, and the parts put together are
    rank_rows_argsort over the whole score matrix."""
    import threading

    import numpy as np

    from csbench.evaluate import ranking

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    rng = np.random.default_rng(7)
    codes = rng.integers(-2, 3, size=(900, 8)).astype(np.float32)
    queries = codes[:700] + rng.integers(-1, 2, size=(700, 8)).astype(np.float32)
    keys = np.arange(900)
    real = ranking.rank_rows_argsort
    calls: list[tuple[int, int]] = []
    lock = threading.Lock()

    def counted(scores, row_keys, column_keys, depth):
        with lock:
            calls.append((threading.get_ident(), scores.shape[0]))
        return real(scores, row_keys, column_keys, depth)

    monkeypatch.setattr(ranking, "rank_rows_argsort", counted)
    parts = ranking.rank_dense_argsort(queries, codes, keys[:700], keys, 15)
    assert sorted(rows for _, rows in calls) == [233, 233, 234]
    whole = real(queries @ codes.T, keys[:700], keys, 15)
    for field in ("ranks", "top", "top_scores", "tied"):
        assert np.array_equal(getattr(parts, field), getattr(whole, field), equal_nan=field == "top_scores"), field
    assert parts.tied.any() and (parts.ranks > 1).any()
