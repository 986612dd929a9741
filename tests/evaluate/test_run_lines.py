"""A ranking protocol's TREC run is held compactly and written a chunk at a time (issue #28, item 3).

`evaluate` held each run as a list of Python strings, one per query and listed document (over 120
bytes a line: a 107 k-query run at the default `run_depth` 100 is 10.7 M lines, well over 1 GiB),
then joined and encoded it whole to write it (twice its text again). `RunLines` keeps per line a reference to
the document id and its score; `write_trec` makes lines into text and compresses them a chunk at a
time. What must not change: the lines and the file's bytes.
"""

from __future__ import annotations

import gzip
import io
import tracemalloc

import numpy as np
import pandas as pd
import pytest

from csbench.config import RunKey
from csbench.evaluate import outcomes as outcomes_module
from csbench.evaluate.runner import evaluate_pool, trec_bytes
from csbench.phases.evaluate import _write_outcomes

RUN_DEPTH = 100


def _old_trec_bytes(lines: list[str]) -> bytes:
    """The file as the code before wrote it: the whole text joined, encoded and compressed at once."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        handle.write(("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    return buffer.getvalue()


def _old_line(query: str, doc: str, position: int, score, run: str, exact: bool) -> str:
    """A line as the code before made it: ``runner._record`` (``%.6f`` of the score as the search gave
    it) and ``graded._record_graded`` (``repr`` of its float)."""
    shown = repr(float(score)) if exact else f"{score:.6f}"
    return f"{query} Q0 {doc} {position} {shown} {run}"


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("chunk", [1, 3, 8192])
def test_lines_and_file_are_those_of_the_strings(exact: bool, chunk: int, monkeypatch) -> None:
    monkeypatch.setattr(outcomes_module, "TREC_CHUNK_LINES", chunk)
    rng = np.random.default_rng(3)
    run = outcomes_module.RunLines(exact=exact)
    expected: list[str] = []
    lists = [
        np.float32([0.1, -0.0, 3.5e-8, np.inf, -np.inf, np.nan]),  # an encoder's float32 scores
        rng.standard_normal(7),  # float64 (BM25, a Python retriever)
        np.arange(4, dtype=np.int64)[::-1],  # integers
        np.float64([]),  # a query with nothing listed
        rng.standard_normal(1).astype(np.float32) * 1e6,
    ]
    for q, scores in enumerate(lists):
        docs = [f"doc-{q}-{k}" for k in range(scores.size)]
        name = "csbench-x" if q % 2 else "other"
        run.add(f"q{q}", docs, scores, name)
        listed = enumerate(zip(docs, scores, strict=True), start=1)
        expected += [_old_line(f"q{q}", doc, k, score, name, exact) for k, (doc, score) in listed]
    assert list(run) == expected and len(run) == len(expected)
    assert run == expected and expected == run and run != expected[:-1]
    assert [run[k] for k in range(len(run))] == expected and run[-1] == expected[-1] and run[2:9] == expected[2:9]
    with pytest.raises(IndexError):
        run[len(run)]
    assert trec_bytes(run) == _old_trec_bytes(expected)
    assert trec_bytes(outcomes_module.RunLines()) == _old_trec_bytes([])
    with pytest.raises(ValueError, match="2 documents and 3 scores"):
        run.add("q", ["a", "b"], np.zeros(3), "r")


class _Vectors:
    """Fixed float32 vectors per id, exposed as a ``DenseRetriever`` exposes them (the engine path)."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def index(self, frame: pd.DataFrame) -> None:
        self.code_vectors = np.stack([self.vectors[id_] for id_ in frame["id"]])

    def query_matrix(self, queries: list[str]) -> np.ndarray:
        return np.stack([self.vectors[q.removeprefix("query for ")] for q in queries])

    def scores(self, query: str) -> np.ndarray:
        return self.code_vectors @ self.query_matrix([query])[0]


def test_a_run_is_held_in_a_fraction_of_its_text_and_written_a_chunk_at_a_time(tmp_path) -> None:
    """2,000 queries x 100 listed codes: 200,000 lines. On the code before, the search left 121 bytes
    a line (24 MB) and writing the run took 2.0 times its text (joined, then encoded); now 23 bytes
    and a fifth of its text."""
    n = 2000
    ids = [f"function-{k:06d}" for k in range(n)]
    rng = np.random.default_rng(0)
    vectors = {id_: rng.standard_normal(8).astype(np.float32) for id_ in ids}
    pool = pd.DataFrame({"id": ids, "query": [f"query for {id_}" for id_ in ids], "code": ids, "language": "python"})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        searched, _ = evaluate_pool(_Vectors(vectors), pool, ["full-corpus"], RUN_DEPTH, "csbench-test", False)
        held = tracemalloc.get_traced_memory()[0] - before
        outcome = searched["full-corpus"]
        n_lines = len(outcome.run_lines)
        text_bytes = sum(len(line) + 1 for line in outcome.run_lines)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        run = RunKey("d", "a", "m")
        _write_outcomes(tmp_path, run, searched)
        writing = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    print(f"{held / n_lines:.1f} bytes held a line; writing {writing / 1e6:.2f} MB for {text_bytes / 1e6:.2f} MB")
    assert n_lines == n * RUN_DEPTH
    # what the search leaves (ranks, top ids, the run; the pool's ids and vectors are the caller's)
    assert held / n_lines < 40, f"{held / n_lines:.0f} bytes held per run line"
    assert writing < text_bytes / 4, f"writing took {writing / 1e6:.1f} MB for {text_bytes / 1e6:.1f} MB of text"
    data = (tmp_path / "run.full-corpus.trec.gz").read_bytes()
    assert data == _old_trec_bytes(list(outcome.run_lines))
    first = gzip.decompress(data).decode().splitlines()[0].split()
    assert first[:2] == [outcome.query_ids[0], "Q0"] and first[3] == "1" and first[5] == "csbench-test"


def test_a_graded_protocols_measures_read_as_the_dicts_and_are_held_as_floats() -> None:
    """A graded protocol's per-query trec_eval measures (30 a query) were kept as a dict per query,
    about 1.6 KB (measured apart: the dicts and their floats); now one float64 buffer under one list of
    names, about 240 bytes."""
    rng = np.random.default_rng(1)
    names = [f"{m}@{k}" for m in ("ndcg", "map", "recall", "p", "mrr") for k in (1, 3, 5, 10, 100, 1000)]
    rows = [dict(zip(names, rng.random(len(names)).tolist(), strict=True)) for _ in range(3000)]
    measures = outcomes_module.QueryMeasures()
    assert len(measures) == 0 and measures == [] and measures.column("ndcg@10").size == 0
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for row in rows:
            measures.append(row)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held / len(rows) < 400, f"{held / len(rows):.0f} bytes a query"
    assert measures == rows and list(measures) == rows and measures[-1] == rows[-1] and measures[5:7] == rows[5:7]
    assert measures.column("map@100").tolist() == [row["map@100"] for row in rows]
    with pytest.raises(ValueError, match="differ from the earlier queries"):
        measures.append({"ndcg@10": 1.0})
    with pytest.raises(IndexError):
        measures[len(rows)]
