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
@pytest.mark.parametrize("held", [None, 1, 4, 10])
def test_lines_and_file_are_those_of_the_strings(exact: bool, chunk: int, held: int | None, monkeypatch) -> None:
    """``held``: lines held before they are compressed to the temporary file (None: the default, more
    than these lines: nothing compressed before the write; 1: every query's lines as it is added)."""
    monkeypatch.setattr(outcomes_module, "TREC_CHUNK_LINES", chunk)
    rng = np.random.default_rng(3)
    run = outcomes_module.RunLines(exact=exact, held=held)
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
    assert run[::-3] == expected[::-3] and run[1::4] == expected[1::4] and run[-4:] == expected[-4:]
    with pytest.raises(IndexError):
        run[len(run)]
    assert (run._stored > 0) == (held is not None) == (run._compressor is not None)
    assert trec_bytes(run) == _old_trec_bytes(expected)
    assert trec_bytes(run) == _old_trec_bytes(expected)  # written twice: the same bytes
    run.add("late", ["d1", "d2"], np.float32([2.5, 1.0]), "r")  # and it can grow after a write
    expected += [_old_line("late", doc, k, score, "r", exact) for k, doc, score in [(1, "d1", 2.5), (2, "d2", 1.0)]]
    assert list(run) == expected and trec_bytes(run) == _old_trec_bytes(expected)
    assert trec_bytes(outcomes_module.RunLines()) == _old_trec_bytes([])
    assert trec_bytes(iter(expected)) == _old_trec_bytes(expected)  # any iterable of lines
    with pytest.raises(ValueError, match="2 documents and 3 scores"):
        run.add("q", ["a", "b"], np.zeros(3), "r")
    run.close()


def test_the_header_is_gzips_own() -> None:
    """write_trec writes gzip's header itself (to copy the stored part after it): GzipFile's bytes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=buffer, mode="wb", mtime=0):
        pass
    assert buffer.getvalue()[:10] == outcomes_module.GZIP_HEADER


def test_a_long_run_is_compressed_to_an_unnamed_file_as_it_grows(tmp_path, monkeypatch) -> None:
    """Past ``held`` lines the held queries' lines go to a temporary file with no name (nothing is left
    in TMPDIR, even by a killed process), compressed as the run file holds them."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    run = outcomes_module.RunLines(held=50)
    lines = []
    for q in range(40):
        docs = [f"doc{k}" for k in range(7)]
        run.add(f"q{q}", docs, np.arange(7, dtype=np.float64), "r")
        lines += [_old_line(f"q{q}", doc, k + 1, float(k), "r", False) for k, doc in enumerate(docs)]
    assert len(run._docs) < 50 and run._stored == len(lines) - len(run._docs) > 0
    assert list(tmp_path.iterdir()) == []
    assert run == lines and trec_bytes(run) == _old_trec_bytes(lines)
    assert run._compressor.written < sum(len(line) for line in lines[: run._stored]) / 3  # compressed
    thread = run._compressor._thread
    assert thread.is_alive()
    run.close()
    assert not thread.is_alive()


def test_a_runs_compressor_thread_ends_with_the_run() -> None:
    """The thread holds nothing of the run: an unreferenced run is collected, its thread ends, its file
    closes."""
    import gc

    run = outcomes_module.RunLines(held=3)
    run.add("q", ["a", "b", "c"], np.zeros(3), "r")
    compressor = run._compressor
    del run
    gc.collect()
    compressor._thread.join(timeout=10)
    assert not compressor._thread.is_alive() and compressor.file.closed


def test_a_full_temporary_folder_names_itself(monkeypatch) -> None:
    import errno
    import tempfile

    from csbench.io import DiskFullError

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **_: Full())
    run = outcomes_module.RunLines(held=2)
    with pytest.raises(DiskFullError, match=tempfile.gettempdir()):  # the compressor thread's error, raised here
        run.add("q", ["a", "b", "c"], np.zeros(3), "r")
        trec_bytes(run)
    run.close()

    def no_room(**_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    with pytest.raises(DiskFullError, match=tempfile.gettempdir()):  # the file itself
        outcomes_module.RunLines(held=2).add("q", ["a", "b", "c"], np.zeros(3), "r")


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


@pytest.mark.parametrize("held_lines", [None, 10_000])
def test_a_run_is_held_in_a_fraction_of_its_text_and_written_a_chunk_at_a_time(
    held_lines: int | None, tmp_path, monkeypatch
) -> None:
    """2,000 queries x 100 listed codes: 200,000 lines. On the code before, the search left 121 bytes
    a line (24 MB) and writing the run took 2.0 times its text (joined, then encoded); then 23 bytes
    and a fifth of its text. With at most 10,000 lines held (the rest compressed to a temporary file),
    what the search leaves no longer grows with the run's depth: under 5 bytes a line (3.5 here), the
    queries' ranks and best ids (23 bytes a line before)."""
    if held_lines is not None:
        monkeypatch.setattr(outcomes_module, "RUN_LINES_HELD", held_lines, raising=False)
    n = 2000
    ids = [f"function-{k:06d}" for k in range(n)]
    rng = np.random.default_rng(0)
    vectors = {id_: rng.standard_normal(8).astype(np.float32) for id_ in ids}
    pool = pd.DataFrame({"id": ids, "query": [f"query for {id_}" for id_ in ids], "code": ids, "language": "python"})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        searched, _ = evaluate_pool(_Vectors(vectors), pool, ["full-corpus"], RUN_DEPTH, "csbench-test", False)
        searched["full-corpus"].run_lines.drain()  # text chunks still queued for the compressor: at most 8 MB
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
    assert held / n_lines < (40 if held_lines is None else 5), f"{held / n_lines:.1f} bytes held per run line"
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


def test_a_search_that_keeps_no_run_holds_none_and_refuses_to_write_one() -> None:
    """robust's points write no TREC run: ``search(keep_runs=False)`` keeps none (a graded protocol's
    lists 1,000 documents a query), with the same ranks, best ids and measures."""
    from csbench.evaluate.runner import build_index, search

    n = 300
    ids = [f"f{k:04d}" for k in range(n)]
    rng = np.random.default_rng(2)
    vectors = {id_: rng.standard_normal(8).astype(np.float32) for id_ in ids}
    pool = pd.DataFrame({"id": ids, "query": [f"query for {id_}" for id_ in ids], "code": ids, "language": "python"})
    protocols = ["full-corpus", "qrels"]
    index = build_index(lambda: _Vectors(vectors), pool, protocols, None, None)
    kept, _ = search(index, pool, protocols, 1, "robust", progress=False, latency=False)
    dropped, _ = search(index, pool, protocols, 1, "robust", progress=False, latency=False, keep_runs=False)
    assert len(kept["qrels"].run_lines) == n * 300 and len(kept["full-corpus"].run_lines) == n
    for name in protocols:
        assert dropped[name].ranks == kept[name].ranks and dropped[name].top1 == kept[name].top1
        assert dropped[name].metrics() == kept[name].metrics()
        assert len(dropped[name].run_lines) == 0 and list(dropped[name].run_lines) == []
        with pytest.raises(ValueError, match="not kept"):
            trec_bytes(dropped[name].run_lines)
    assert dropped["qrels"].graded == kept["qrels"].graded


def test_the_per_query_files_are_written_line_by_line_with_the_same_bytes(tmp_path) -> None:
    """ranks.tsv and a graded protocol's qrels.<protocol>.tsv were built whole and written at once;
    they are written a line at a time now, the same bytes (the old expressions, transcribed)."""
    n = 120
    ids = [f"f{k:04d}" for k in range(n)]
    rng = np.random.default_rng(5)
    vectors = {id_: rng.standard_normal(8).astype(np.float32) for id_ in ids}
    pool = pd.DataFrame({"id": ids, "query": [f"query for {id_}" for id_ in ids], "code": ids, "language": "python"})
    searched, _ = evaluate_pool(_Vectors(vectors), pool, ["full-corpus", "qrels"], 10, "csbench-test", False)
    written, _, _ = _write_outcomes(tmp_path, RunKey("d", "a", "m"), searched)
    assert {"ranks.tsv", "qrels.qrels.tsv", "run.full-corpus.trec.gz", "run.qrels.trec.gz"} <= set(written)
    ranks_lines = ["protocol\tquery_id\trank\tcandidates\ttop1"]
    for name, o in searched.items():
        records = zip(o.query_ids, o.ranks, o.n_candidates, o.top1, strict=True)
        ranks_lines += [f"{name}\t{q}\t{r}\t{c}\t{t}" for q, r, c, t in records]
    assert (tmp_path / "ranks.tsv").read_bytes() == ("\n".join(ranks_lines) + "\n").encode()
    graded = searched["qrels"]
    columns = list(graded.graded[0])
    lines = ["\t".join(["query_id", *columns])]
    lines += [
        "\t".join([query, *(repr(float(row[c])) for c in columns)])
        for query, row in zip(graded.query_ids, graded.graded, strict=True)
    ]
    assert (tmp_path / "qrels.qrels.tsv").read_bytes() == ("\n".join(lines) + "\n").encode()
    assert len(lines) == n + 1 and len(columns) == 30
