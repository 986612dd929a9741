"""BM25's query-by-query search (``runner._search_rows``) scores and ranks queries on several threads
(issue #28: the 1 M growth run's BM25 evaluation ran on one thread, 438 s) and records the same ranks,
top lists, run lines and pair scores as on one, on CodeSearchNet's real Ruby test split; a retriever
that does not declare ``concurrent_scores`` is still asked from the calling thread only."""

from __future__ import annotations

import json
import threading

import pandas as pd
import pytest
from corpora import SHARED_DATA

from csbench.evaluate import ranking
from csbench.evaluate.runner import evaluate_pool
from csbench.models.bm25 import BM25Retriever

PROTOCOLS = ["full-corpus", "csn-1000", "id-chunks-1000", "advtest"]


@pytest.fixture(scope="module")
def pool() -> pd.DataFrame:
    path = SHARED_DATA / "codesearchnet" / "ruby" / "test.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is absent (the shared data)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    frame = pd.DataFrame(
        {
            "id": [f"ruby-{i}" for i in range(len(rows))],
            "query": [" ".join(row["docstring_tokens"]) for row in rows],
            "code": [row["code"] for row in rows],
            "func_name": [row["func_name"] for row in rows],
            "url": [row["url"] for row in rows],
            "language": "ruby",
        }
    )
    return frame


class Spy(BM25Retriever):
    """BM25, noting the threads its ``scores`` ran on."""

    def __init__(self, concurrent: bool) -> None:
        super().__init__()
        self.concurrent_scores = concurrent
        self.threads: set[str] = set()

    def scores(self, query: str):
        self.threads.add(threading.current_thread().name)
        return super().scores(query)


def _searched(pool, threads: int, concurrent: bool, monkeypatch) -> tuple[str, set[str]]:
    monkeypatch.setattr(ranking, "work_threads", lambda: threads)
    retriever = Spy(concurrent)
    outcomes, _ = evaluate_pool(retriever, pool, PROTOCOLS, 10, "t", progress=False)
    record = {
        name: [o.query_ids, o.ranks, o.n_candidates, o.top1, list(o.run_lines), o.plan_note]
        for name, o in sorted(outcomes.items())
    }
    return json.dumps(record), retriever.threads


def test_bm25_search_on_threads_records_what_one_thread_records(pool, monkeypatch) -> None:
    one, one_threads = _searched(pool, 1, True, monkeypatch)
    three, three_threads = _searched(pool, 3, True, monkeypatch)
    assert three == one
    assert one_threads == {threading.current_thread().name}
    # (the calling thread also times a sample of queries alone: the run's latency figures)
    assert len({name for name in three_threads if name.startswith("csbench-search")}) >= 2
    # every query recorded once, in order; the argsort protocols' tie counts (323 queries tied) add up
    record = json.loads(three)
    assert record["full-corpus"][0] == pool["id"].tolist() == record["advtest"][0]
    assert len(record["csn-1000"][0]) == len(record["id-chunks-1000"][0]) == 1000  # the chunks of 1,000
    assert record["full-corpus"][5].startswith("323 queries' correct code scored exactly as another")


def test_a_retriever_without_concurrent_scores_is_asked_from_the_calling_thread(pool, monkeypatch) -> None:
    _, threads = _searched(pool, 3, False, monkeypatch)
    assert threads == {threading.current_thread().name}
