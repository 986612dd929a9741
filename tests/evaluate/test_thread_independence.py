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
queries = codes[:700] + 0.3 * rng.standard_normal((700, 384), dtype=np.float32)
result = rank_dense(queries, codes, np.arange(700), 50)
print(json.dumps([hashlib.sha256(a.tobytes()).hexdigest() for a in (result.ranks, result.top, result.top_scores)]))
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
print(json.dumps({name: hashlib.sha256(json.dumps([o.ranks, o.top1, o.run_lines]).encode()).hexdigest()
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
