"""Retrieval protocols (SPEC "Retrieval protocols") and the evaluation runner.

``id-chunks-1000`` (csbench's own chunking) gives the same chunks whatever order the test pool comes
in; ``csn-1000`` and ``gecs-100`` follow their reference scripts' file order instead (their twins:
tests/evaluate/test_twin_csn_gecs.py); ranks count ties against the model; the TREC run files are
byte-reproducible.
"""

from __future__ import annotations

import gzip
import math
import random

import numpy as np
import pandas as pd
import pytest

from csbench.evaluate.metrics import rank_of_correct
from csbench.evaluate.protocols import (
    PROTOCOLS,
    Chunked,
    FullCorpus,
    IdChunked,
    Matching,
    SampledDistractors,
    best_threshold,
)
from csbench.evaluate.runner import LATENCY_SAMPLE, build_index, evaluate_pool, search, top_k, trec_bytes

# ---------------------------------------------------------------------------------------------
# the registry and the plans


def _ids(n: int, seed: int = 7) -> list[str]:
    """n unique ids, in an order that is not sorted."""
    ids = [f"fn-{k:05d}" for k in range(n)]
    random.Random(seed).shuffle(ids)
    return ids


def test_registered_protocols() -> None:
    assert PROTOCOLS.names() == [
        "full-corpus", "csn-1000", "csn-funcname", "id-chunks-1000", "advtest", "gecs-100", "matching", "qrels"
    ]  # fmt: skip
    full, csn = PROTOCOLS.get("full-corpus"), PROTOCOLS.get("csn-1000")
    assert isinstance(full, FullCorpus)
    assert full.mrr_cutoff == 1000 and full.uses_codebase
    assert isinstance(csn, Chunked)
    assert (csn.size, csn.seed, csn.distance, csn.mrr_cutoff, csn.texts) == (1000, 0, "cosine", None, "test")
    funcname = PROTOCOLS.get("csn-funcname")
    assert isinstance(funcname, Chunked) and (funcname.size, funcname.texts) == (1000, "funcname")
    own = PROTOCOLS.get("id-chunks-1000")
    assert isinstance(own, IdChunked) and (own.size, own.seed, own.mrr_cutoff) == (1000, 0, None)
    advtest = PROTOCOLS.get("advtest")  # CodeXGLUE AdvTest: the test set is the codebase, MRR@100
    assert isinstance(advtest, FullCorpus) and advtest.mrr_cutoff == 100 and not advtest.uses_codebase
    gecs = PROTOCOLS.get("gecs-100")
    assert isinstance(gecs, SampledDistractors)
    assert (gecs.distractors, gecs.seed, gecs.mrr_cutoff, gecs.kind) == (99, 42, None, "ranking")
    matching = PROTOCOLS.get("matching")
    assert isinstance(matching, Matching) and (matching.seed, matching.kind) == (42, "matching")


def test_full_corpus_plans_every_query_against_all_candidates() -> None:
    ids = _ids(2300)
    plan = PROTOCOLS.get("full-corpus").plan(ids)
    assert plan.note == ""
    assert len(plan.groups) == 1
    np.testing.assert_array_equal(plan.groups[0], np.arange(2300))
    assert (plan.group_of == 0).all()
    for query in (0, 1, 1234, 2299):
        np.testing.assert_array_equal(plan.candidates(query), np.arange(2300))


def test_id_chunks_1000_drops_the_last_partial_chunk() -> None:
    ids = _ids(2500)
    plan = PROTOCOLS.get("id-chunks-1000").plan(ids)
    assert len(plan.groups) == 2
    assert [len(g) for g in plan.groups] == [1000, 1000]
    members = np.concatenate(plan.groups)
    assert len(set(members.tolist())) == 2000  # disjoint chunks
    assert int((plan.group_of == -1).sum()) == 500
    assert "500" in plan.note
    assert "not evaluated" in plan.note
    dropped = np.flatnonzero(plan.group_of == -1)
    assert all(plan.candidates(int(i)) is None for i in dropped)
    assert set(dropped.tolist()).isdisjoint(members.tolist())


def test_id_chunks_1000_every_evaluated_query_is_in_its_own_chunk() -> None:
    ids = _ids(2500)
    plan = PROTOCOLS.get("id-chunks-1000").plan(ids)
    evaluated = np.flatnonzero(plan.group_of >= 0)
    assert evaluated.size == 2000
    for query in evaluated:
        candidates = plan.candidates(int(query))
        assert candidates is not None
        assert candidates.size == 1000
        assert int(query) in set(candidates.tolist())
        assert candidates is plan.groups[plan.group_of[query]]


@pytest.mark.parametrize("n", [0, 1, 999])
def test_id_chunks_1000_fewer_than_1000_ids_gives_no_chunk_and_a_note(n: int) -> None:
    plan = PROTOCOLS.get("id-chunks-1000").plan(_ids(n))
    assert plan.groups == []
    assert (plan.group_of == -1).all()
    assert len(plan.group_of) == n
    assert f"{n} < 1000" in plan.note
    assert "nothing evaluated" in plan.note
    assert all(plan.candidates(i) is None for i in range(n))


def test_id_chunks_1000_exact_multiple_has_no_note() -> None:
    plan = PROTOCOLS.get("id-chunks-1000").plan(_ids(3000))
    assert len(plan.groups) == 3
    assert (plan.group_of >= 0).all()
    assert plan.note == ""


def _chunk_sets(ids: list[str], protocol: Chunked) -> tuple[set[frozenset[str]], set[str]]:
    plan = protocol.plan(ids)
    chunks = {frozenset(ids[j] for j in group) for group in plan.groups}
    dropped = {ids[i] for i in np.flatnonzero(plan.group_of == -1)}
    return chunks, dropped


@pytest.mark.parametrize("shuffle_seed", [1, 2, 3])
def test_id_chunks_1000_plan_is_invariant_to_input_order(shuffle_seed: int) -> None:
    ids = _ids(2500)
    shuffled = list(ids)
    random.Random(shuffle_seed).shuffle(shuffled)
    assert shuffled != ids
    protocol = PROTOCOLS.get("id-chunks-1000")
    chunks, dropped = _chunk_sets(ids, protocol)
    chunks_shuffled, dropped_shuffled = _chunk_sets(shuffled, protocol)
    assert chunks == chunks_shuffled
    assert dropped == dropped_shuffled
    # and reversing / sorting the input does not matter either
    assert _chunk_sets(sorted(ids), protocol) == (chunks, dropped)
    assert _chunk_sets(ids[::-1], protocol) == (chunks, dropped)


def test_id_chunks_1000_chunks_are_shuffled_not_contiguous_in_id_order() -> None:
    ids = _ids(2500)
    chunks, _ = _chunk_sets(ids, PROTOCOLS.get("id-chunks-1000"))
    first_sorted = frozenset(sorted(ids)[:1000])
    assert first_sorted not in chunks  # shuffled with seed 0 before chunking


def test_chunked_seed_changes_the_chunks() -> None:
    ids = _ids(2500)
    seed0 = _chunk_sets(ids, IdChunked("t", "t", None, size=1000, seed=0))
    seed1 = _chunk_sets(ids, IdChunked("t", "t", None, size=1000, seed=1))
    assert seed0[0] != seed1[0]
    assert seed0 == _chunk_sets(ids, PROTOCOLS.get("id-chunks-1000"))


# ---------------------------------------------------------------------------------------------
# top_k and trec_bytes


def test_top_k_puts_the_correct_answer_last_among_equal_scores() -> None:
    scores = np.array([0.5, 0.9, 0.9, 0.1])
    assert top_k(scores, 1, 4).tolist() == [2, 1, 0, 3]
    assert top_k(scores, 2, 4).tolist() == [1, 2, 0, 3]
    assert top_k(scores, 1, 2).tolist() == [2, 1]
    assert top_k(scores, 1, 1).tolist() == [2]  # correct answer (rank 2) falls outside k=1


def test_top_k_tie_extended_head_with_small_k() -> None:
    scores = np.array([1.0, 1.0, 1.0, 1.0, 0.0])
    assert top_k(scores, 0, 2).tolist() == [1, 2]
    assert top_k(scores, 0, 4).tolist() == [1, 2, 3, 0]
    assert top_k(scores, 4, 10).tolist() == [0, 1, 2, 3, 4]  # k beyond size


def test_top_k_nan_scores_come_last() -> None:
    scores = np.array([np.nan, 0.2, np.nan, 0.7])
    assert top_k(scores, 1, 4).tolist() == [3, 1, 0, 2]
    assert top_k(scores, 0, 4).tolist() == [3, 1, 2, 0]  # NaN correct: last, like its rank


@pytest.mark.parametrize("seed", range(5))
def test_top_k_position_of_correct_equals_its_rank(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        scores = rng.integers(0, 5, size=n).astype(np.float64)
        scores[rng.random(n) < 0.05] = np.nan
        correct = int(rng.integers(0, n))
        k = int(rng.integers(1, n + 1))
        head = top_k(scores, correct, k)
        assert head.size == min(k, n)
        assert len(set(head.tolist())) == head.size
        rank = rank_of_correct(scores, correct)
        if rank <= k:
            assert head.tolist().index(correct) + 1 == rank
        else:
            assert correct not in head.tolist()
        # best first
        shown = np.where(np.isnan(scores[head]), -np.inf, scores[head])
        assert (shown[:-1] >= shown[1:]).all()


def test_trec_bytes_is_byte_identical_and_gzip_with_mtime_zero() -> None:
    lines = ["q1 Q0 d3 1 2.500000 run", "q1 Q0 d1 2 1.000000 run"]
    first, second = trec_bytes(lines), trec_bytes(list(lines))
    assert first == second
    assert first[:2] == b"\x1f\x8b"
    assert first[4:8] == b"\x00\x00\x00\x00"  # gzip MTIME field
    assert gzip.decompress(first).decode() == "q1 Q0 d3 1 2.500000 run\nq1 Q0 d1 2 1.000000 run\n"
    assert trec_bytes(lines[:1]) != first


def test_trec_bytes_of_no_lines_is_an_empty_file() -> None:
    assert gzip.decompress(trec_bytes([])) == b""


# ---------------------------------------------------------------------------------------------
# evaluate_pool with a fake retriever

POOL_SIZE = 2300
RUN_DEPTH = 20
RUN_NAME = "fake-run"


class FakeRetriever:
    """Scores from a fixed matrix over canonical ids, so the score of (query, code) does not depend
    on the order of the pool: ``matrix[q, d]`` for query id q and code id d."""

    def __init__(self, ids: list[str], matrix: np.ndarray) -> None:
        self.canonical = {id_: k for k, id_ in enumerate(ids)}
        self.matrix = matrix
        self.columns: np.ndarray | None = None
        self.calls = 0

    def index(self, frame: pd.DataFrame) -> None:
        self.columns = np.array([self.canonical[id_] for id_ in frame["id"]])

    def scores(self, query: str) -> np.ndarray:
        assert self.columns is not None, "scores() before index()"
        self.calls += 1
        return self.matrix[self.canonical[query.removeprefix("query for ")], self.columns]


def _score_matrix(n: int) -> np.ndarray:
    rng = np.random.default_rng(42)
    matrix = rng.integers(0, 40, size=(n, n)).astype(np.float64)  # many ties
    boosted = rng.random(n) < 0.5
    matrix[boosted, np.flatnonzero(boosted)] += 25  # half the queries find their code near the top
    matrix[rng.random((n, n)) < 0.01] = np.nan
    nan_correct = rng.choice(n, size=10, replace=False)
    matrix[nan_correct, nan_correct] = np.nan
    return matrix


def _pool(ids: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ids,
            "query": [f"query for {id_}" for id_ in ids],
            "code": [f"def f_{k}(): pass" for k in range(len(ids))],
            "func_name": [f"f_{k}" for k in range(len(ids))],
        }
    )


def _argsort_rank(row: np.ndarray, query: int) -> int:
    """full-corpus / advtest (CodeXGLUE's run.py): the position in the descending np.argsort of the
    row, NaN read as -inf (tests/evaluate/test_twin_codexglue.py checks these protocols against the scripts)."""
    order = np.argsort(np.where(np.isnan(row), -np.inf, row), kind="quicksort")[::-1]
    return int(np.flatnonzero(order == query)[0]) + 1


def _hand_rank(row: np.ndarray, candidates: np.ndarray, query: int) -> int:
    local = row[candidates]
    target = row[query]
    if math.isnan(target):
        return len(candidates)
    return int(np.sum(~np.isnan(local) & (local >= target)))


@pytest.fixture(scope="module")
def evaluated() -> dict:
    ids = _ids(POOL_SIZE)
    matrix = _score_matrix(POOL_SIZE)
    pool = _pool(ids)
    retriever = FakeRetriever(ids, matrix)
    outcomes, timings = evaluate_pool(retriever, pool, ["full-corpus", "id-chunks-1000"], RUN_DEPTH, RUN_NAME, False)
    plans = {name: PROTOCOLS.get(name).plan(ids) for name in ("full-corpus", "id-chunks-1000")}
    # rows of the matrix in pool order (pool order is the canonical order of the fake retriever here)
    hand = {}
    for name, plan in plans.items():
        hand[name] = {}
        for i in range(POOL_SIZE):
            candidates = plan.candidates(i)
            if candidates is not None and name == "full-corpus":
                hand[name][ids[i]] = _argsort_rank(matrix[i][candidates], i)
            elif candidates is not None:
                hand[name][ids[i]] = _hand_rank(matrix[i], candidates, i)
    return {
        "ids": ids,
        "matrix": matrix,
        "pool": pool,
        "retriever": retriever,
        "outcomes": outcomes,
        "timings": timings,
        "plans": plans,
        "hand": hand,
    }


def test_evaluate_pool_ranks_equal_hand_computed_ranks(evaluated: dict) -> None:
    outcomes, hand = evaluated["outcomes"], evaluated["hand"]
    assert set(outcomes) == {"full-corpus", "id-chunks-1000"}
    for name in ("full-corpus", "id-chunks-1000"):
        outcome = outcomes[name]
        assert dict(zip(outcome.query_ids, outcome.ranks, strict=True)) == hand[name]
    assert len(outcomes["full-corpus"].ranks) == POOL_SIZE
    assert len(outcomes["id-chunks-1000"].ranks) == 2000
    assert set(outcomes["full-corpus"].n_candidates) == {POOL_SIZE}
    assert set(outcomes["id-chunks-1000"].n_candidates) == {1000}
    # the fixture is meaningful: ties, ranks beyond the cut, and NaN correct answers occur
    full = np.array(outcomes["full-corpus"].ranks)
    assert (full == 1).any()
    assert (full > 1000).any()
    # a NaN correct score comes after every number (full-corpus reads NaN as -inf, then argsort's order)
    matrix = evaluated["matrix"]
    nan_correct = [i for i in range(POOL_SIZE) if math.isnan(matrix[i, i])]
    assert len(nan_correct) >= 10
    for i in nan_correct:
        assert full[i] > np.sum(~np.isnan(matrix[i]))


def test_evaluate_pool_notes_and_metrics(evaluated: dict) -> None:
    outcomes = evaluated["outcomes"]
    assert "queries' correct code scored exactly as another candidate" in outcomes["full-corpus"].plan_note
    assert "300" in outcomes["id-chunks-1000"].plan_note
    full_ranks = list(evaluated["hand"]["full-corpus"].values())
    metrics = outcomes["full-corpus"].metrics()
    assert metrics["n_queries"] == POOL_SIZE
    assert metrics["mrr"] == pytest.approx(sum(1 / r if r <= 1000 else 0.0 for r in full_ranks) / POOL_SIZE)
    csn_ranks = list(evaluated["hand"]["id-chunks-1000"].values())
    assert outcomes["id-chunks-1000"].metrics()["mrr"] == pytest.approx(sum(1 / r for r in csn_ranks) / 2000)
    assert set(evaluated["timings"]) == {
        "index_s", "search_s", "indexed_codes", "index_codes_per_s", "query_latency_ms_p50", "query_latency_ms_p95"
    }  # fmt: skip
    assert evaluated["timings"]["query_latency_ms_p50"] <= evaluated["timings"]["query_latency_ms_p95"]


def test_evaluate_pool_scores_each_query_once(evaluated: dict) -> None:
    # once for the ranking, plus the queries answered alone for the latency figures
    assert evaluated["retriever"].calls == POOL_SIZE + LATENCY_SAMPLE


def test_search_without_latency_scores_each_query_once_and_ranks_the_same(evaluated: dict) -> None:
    # `csbench robust` discards the timings: timing 100 queries one by one was two thirds of a
    # MiniLM point's search time, for figures nobody reads
    retriever = FakeRetriever(evaluated["ids"], evaluated["matrix"])
    index = build_index(lambda: retriever, evaluated["pool"], ["full-corpus", "id-chunks-1000"], None, None)
    outcomes, timings = search(
        index, evaluated["pool"], ["full-corpus", "id-chunks-1000"], RUN_DEPTH, RUN_NAME, progress=False, latency=False
    )
    assert retriever.calls == POOL_SIZE
    assert not any(key.startswith("query_latency") for key in timings)
    for name in ("full-corpus", "id-chunks-1000"):
        assert outcomes[name].ranks == evaluated["outcomes"][name].ranks


def test_evaluate_pool_skips_queries_no_protocol_evaluates() -> None:
    ids = _ids(1500)
    retriever = FakeRetriever(ids, np.zeros((1500, 1500)))
    outcomes, _ = evaluate_pool(retriever, _pool(ids), ["id-chunks-1000"], 5, RUN_NAME, progress=False)
    assert retriever.calls == 1000 + LATENCY_SAMPLE
    assert len(outcomes["id-chunks-1000"].ranks) == 1000
    assert set(outcomes["id-chunks-1000"].ranks) == {1000}  # all tied: every correct answer is last


def test_evaluate_pool_rejects_duplicate_ids() -> None:
    ids = ["a", "b", "a"]
    pool = _pool(ids)
    with pytest.raises(ValueError, match="not unique"):
        evaluate_pool(FakeRetriever(["a", "b"], np.zeros((2, 2))), pool, ["full-corpus"], 5, RUN_NAME, False)


def test_run_lines_are_trec_format_and_top_k_matches_rank(evaluated: dict) -> None:
    ids, matrix = evaluated["ids"], evaluated["matrix"]
    position = {id_: k for k, id_ in enumerate(ids)}
    for name, outcome in evaluated["outcomes"].items():
        plan = evaluated["plans"][name]
        rank_of = dict(zip(outcome.query_ids, outcome.ranks, strict=True))
        per_query: dict[str, list[list[str]]] = {}
        for line in outcome.run_lines:
            fields = line.split(" ")
            assert len(fields) == 6, line
            per_query.setdefault(fields[0], []).append(fields)
        assert list(per_query) == outcome.query_ids
        for qid, rows in per_query.items():
            q = position[qid]
            candidates = {ids[j] for j in plan.candidates(q)}
            assert len(rows) == RUN_DEPTH
            assert [int(r[3]) for r in rows] == list(range(1, RUN_DEPTH + 1))
            previous = math.inf
            for _, q0, docid, _, score, run_name in rows:
                assert q0 == "Q0"
                assert run_name == RUN_NAME
                assert docid in candidates
                expected = matrix[q, position[docid]]
                value = float(score)
                if math.isnan(expected):
                    assert score == "nan"
                    value = -math.inf
                else:
                    assert score == f"{expected:.6f}"
                assert value <= previous
                previous = value
            docids = [r[2] for r in rows]
            assert len(set(docids)) == RUN_DEPTH
            if rank_of[qid] <= RUN_DEPTH:
                assert docids.index(qid) + 1 == rank_of[qid]
            else:
                assert qid not in docids


def test_trec_bytes_of_evaluate_pool_runs_are_reproducible(evaluated: dict) -> None:
    ids, matrix = evaluated["ids"], evaluated["matrix"]
    again, _ = evaluate_pool(
        FakeRetriever(ids, matrix), _pool(ids), ["full-corpus", "id-chunks-1000"], RUN_DEPTH, RUN_NAME, False
    )
    for name, outcome in evaluated["outcomes"].items():
        data = trec_bytes(outcome.run_lines)
        assert data == trec_bytes(again[name].run_lines)
        text = gzip.decompress(data).decode()
        assert text.endswith("\n")
        assert text.splitlines() == outcome.run_lines


def test_evaluate_pool_ranks_do_not_depend_on_pool_order(evaluated: dict) -> None:
    ids, matrix = evaluated["ids"], evaluated["matrix"]
    shuffled_pool = evaluated["pool"].sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert shuffled_pool["id"].tolist() != ids
    outcomes, _ = evaluate_pool(
        FakeRetriever(ids, matrix), shuffled_pool, ["full-corpus", "id-chunks-1000"], 3, RUN_NAME, False
    )
    # full-corpus follows the file order on ties, as run.py does: only its untied ranks stay
    for name in ("full-corpus", "id-chunks-1000"):
        got = dict(zip(outcomes[name].query_ids, outcomes[name].ranks, strict=True))
        if name == "full-corpus":
            untied = {ids[i] for i in range(len(ids)) if np.sum(matrix[i] == matrix[i, i]) == 1}
            assert len(untied) > 100
            got = {q: r for q, r in got.items() if q in untied}
            assert got == {q: r for q, r in evaluated["hand"][name].items() if q in untied}
            continue
        assert got == evaluated["hand"][name]


class _TokenOverlap:
    """A tiny retriever: score = number of query words found in the code."""

    def index(self, frame: pd.DataFrame) -> None:
        self.codes = [set(code.split()) for code in frame["code"]]

    def scores(self, query: str) -> np.ndarray:
        words = set(query.split())
        return np.array([len(words & code) for code in self.codes], dtype=float)


def test_full_corpus_ranks_against_the_codebase_matching_answers_by_url() -> None:
    from csbench.evaluate.protocols import codebase_plan
    from csbench.evaluate.runner import evaluate_pool

    test = pd.DataFrame(
        {
            "id": ["q0", "q1", "q2"],
            "query": ["alpha beta", "gamma", "zeta"],
            "code": ["alpha beta", "gamma", "zeta"],
            "url": ["u/a", "u/g", "u/missing"],
        }
    )
    codebase = pd.DataFrame(
        {
            "id": ["c0", "c1", "c2", "c3"],
            "code": ["alpha", "gamma delta", "alpha beta", "gamma"],
            "url": ["u/x", "u/g2", "u/a", "u/g"],
        }
    )
    outcomes, _ = evaluate_pool(
        _TokenOverlap(),
        test,
        ["full-corpus", "id-chunks-1000"],
        10,
        "t",
        progress=False,
        codebase=codebase,
        codebase_retriever=_TokenOverlap(),
    )
    full = outcomes["full-corpus"]
    # q0: "alpha beta" scores c2 = 2 (the answer), c0 = 1 -> rank 1
    # q1: "gamma" scores c1 = 1 and c3 = 1 (the answer): a tie, placed as np.argsort places it (run.py)
    # q2: its url is in no codebase entry: counted as not found (rank 5, reciprocal rank 0), as run.py does
    tied = np.argsort(np.array([0.0, 1.0, 0.0, 1.0]), kind="quicksort")[::-1].tolist().index(3) + 1
    assert full.query_ids == ["q0", "q1", "q2"] and full.ranks == [1, tied, 5] and full.n_candidates == [4, 4, 4]
    assert "1 queries whose url is not in the codebase count as not found" in full.plan_note
    assert full.metrics()["mrr"] == pytest.approx((1 + 1 / tied) / 3)
    assert full.run_lines[0].split()[:4] == ["q0", "Q0", "c2", "1"]
    assert outcomes["id-chunks-1000"].ranks == []  # the test-pair protocol still uses the test split
    plan = codebase_plan(["u/a", "u/a"], ["u/a", "u/a", "u/b"])
    assert plan.answer(1) == 0 and "1 codebase entries repeat a url" in plan.note


def test_an_empty_codebase_means_the_test_split_is_the_pool() -> None:
    from csbench.evaluate.runner import evaluate_pool

    test = pd.DataFrame({"id": ["q0", "q1"], "query": ["a", "b"], "code": ["a", "b"], "url": ["u0", "u1"]})
    empty = test.iloc[0:0]
    outcomes, _ = evaluate_pool(_TokenOverlap(), test, ["full-corpus"], 5, "t", progress=False, codebase=empty)
    assert outcomes["full-corpus"].ranks == [1, 1] and outcomes["full-corpus"].n_candidates == [2, 2]


# ---------------------------------------------------------------------------------------------
# gecs-100, advtest and matching


def test_gecs_100_each_query_gets_its_code_and_99_distinct_uniform_distractors() -> None:
    ids = _ids(500)
    plan = PROTOCOLS.get("gecs-100").plan(ids)
    assert plan.note == ""
    assert plan.per_query is not None and plan.per_query.shape == (500, 100)
    for query in range(500):
        row = plan.candidates(query)
        assert row[0] == query and plan.answer(query) == query
        assert len(set(row.tolist())) == 100  # distinct
        assert query not in set(row[1:].tolist())  # the distractors never include the answer
    # independent per query and uniform: every code is drawn about 99 times (500 queries x 99 / 500 codes)
    counts = np.bincount(plan.per_query[:, 1:].ravel(), minlength=500)
    assert counts.min() > 60 and counts.max() < 140
    # two queries almost never share their whole distractor set (independent draws)
    assert len({tuple(sorted(row[1:].tolist())) for row in plan.per_query}) == 500


def test_gecs_100_draws_by_pool_position_and_seed_matters() -> None:
    """GeCS draws in file order: the draws belong to positions, whatever the ids (the twin,
    tests/evaluate/test_twin_csn_gecs.py, checks them against GeCS's own code)."""
    ids = _ids(300)
    plan = PROTOCOLS.get("gecs-100").plan(ids)
    again = PROTOCOLS.get("gecs-100").plan([f"other-{k}" for k in range(300)])
    np.testing.assert_array_equal(again.per_query, plan.per_query)
    other = SampledDistractors("x", "", None, distractors=99, seed=43).plan(ids)
    assert not np.array_equal(other.per_query, plan.per_query)


def test_gecs_100_small_pool_uses_every_other_code_and_says_so() -> None:
    plan = PROTOCOLS.get("gecs-100").plan(_ids(40))
    assert plan.per_query.shape == (40, 40)
    assert "39 distractors per query instead of 99" in plan.note
    assert all(set(plan.candidates(q).tolist()) == set(range(40)) for q in range(40))


def test_matching_pairs_are_balanced_and_negatives_are_other_codes() -> None:
    ids = _ids(400)
    pairs = PROTOCOLS.get("matching").pairs(ids)
    assert pairs.labels.sum() == 400 and pairs.labels.size == 800
    positives, negatives = pairs.labels == 1, pairs.labels == 0
    np.testing.assert_array_equal(pairs.queries[positives], pairs.codes[positives])
    assert (pairs.queries[negatives] != pairs.codes[negatives]).all()
    assert sorted(pairs.queries[negatives].tolist()) == list(range(400))  # one negative per query
    again = PROTOCOLS.get("matching").pairs(ids)
    np.testing.assert_array_equal(again.codes, pairs.codes)
    assert not np.array_equal(Matching("m", "", None, seed=1).pairs(ids).codes, pairs.codes)
    order = np.random.default_rng(2).permutation(400)  # the same pairs whatever the pool order
    shuffled = PROTOCOLS.get("matching").pairs([ids[k] for k in order])
    assert {(ids[order[q]], ids[order[c]]) for q, c in zip(shuffled.queries, shuffled.codes, strict=True)} == {
        (ids[q], ids[c]) for q, c in zip(pairs.queries, pairs.codes, strict=True)
    }
    with pytest.raises(ValueError, match="at least 2"):
        PROTOCOLS.get("matching").pairs(["only"])
    with pytest.raises(TypeError, match="not a ranking protocol"):
        PROTOCOLS.get("matching").plan(ids)


def test_best_threshold_maximises_accuracy() -> None:
    # positives 0.9, 0.8, 0.3; negatives 0.5, 0.2, 0.1: threshold 0.65 gets 5/6 (misses 0.3),
    # 0.25 gets 5/6 too (takes 0.5); the lower candidate wins ties
    scores = np.array([0.9, 0.8, 0.3, 0.5, 0.2, 0.1])
    labels = np.array([1, 1, 1, 0, 0, 0])
    threshold, accuracy = best_threshold(scores, labels)
    assert accuracy == pytest.approx(5 / 6)
    assert threshold == pytest.approx(0.25)
    separable = best_threshold(np.array([3.0, 2.0, 1.0, 0.0]), np.array([1, 1, 0, 0]))
    assert separable == (pytest.approx(1.5), 1.0)
    # all positives: a threshold below every score is perfect; NaN never matches
    assert best_threshold(np.array([0.2, 0.4]), np.array([1, 1]))[1] == 1.0
    nan_case = best_threshold(np.array([np.nan, 0.7, 0.1]), np.array([0, 1, 0]))
    assert nan_case[1] == 1.0 and 0.1 < nan_case[0] <= 0.7
    with pytest.raises(ValueError):
        best_threshold(np.array([]), np.array([]))


def test_matching_through_evaluate_pool_uses_the_validation_threshold() -> None:
    from csbench.evaluate.runner import MatchingOutcome, evaluate_pool

    # codes and queries share words: a pair matches when they share a word. Validation picks the
    # threshold between 0 and 1 shared words; the test decisions follow it.
    def frame(prefix: str, n: int) -> pd.DataFrame:
        words = [f"{prefix}w{k}" for k in range(n)]
        return pd.DataFrame({"id": [f"{prefix}{k}" for k in range(n)], "query": words, "code": words})

    test, valid = frame("t", 30), frame("v", 20)
    outcomes, _ = evaluate_pool(
        _TokenOverlap(),
        test,
        ["matching", "full-corpus"],
        5,
        "t",
        progress=False,
        valid=valid,
        valid_retriever=_TokenOverlap(),
    )
    assert list(outcomes) == ["matching", "full-corpus"]
    outcome = outcomes["matching"]
    assert isinstance(outcome, MatchingOutcome)
    metrics = outcome.metrics()
    assert metrics["accuracy"] == 1.0 and metrics["valid_accuracy"] == 1.0
    assert 0.0 < metrics["threshold"] <= 1.0
    assert (metrics["n_pairs"], metrics["n_queries"]) == (60, 30)
    lines = outcome.lines()
    assert lines[0] == "t0\tt0\t1\t1.000000\t1"
    assert sum(line.endswith("\t0\t0.000000\t0") for line in lines) == 30
    # a dataset without a validation split (GeCS's CodeSearchNet and StatCodeSearch sets): a
    # bi-encoder's matching stays empty with a note, the ranking protocols run as usual
    from csbench.evaluate.runner import NO_VALID_NOTE, build_index

    for no_valid in (None, valid.iloc[:1]):
        alone, _ = evaluate_pool(
            _TokenOverlap(), test, ["matching", "full-corpus"], 5, "t", progress=False, valid=no_valid
        )
        assert alone["matching"].plan_note == NO_VALID_NOTE
        assert alone["matching"].metrics() == {
            "accuracy": None, "precision": None, "recall": None, "f1": None, "threshold": None,
            "valid_accuracy": None, "n_pairs": 0, "n_positive": 0, "n_queries": 0,
        }  # fmt: skip
        assert alone["matching"].lines() == []
        assert alone["full-corpus"].ranks == outcomes["full-corpus"].ranks
    assert list(build_index(_TokenOverlap, test, ["matching"]).retrievers) == ["test"]  # no valid pool to encode


def test_gecs_100_through_evaluate_pool_equals_hand_ranks(evaluated: dict) -> None:
    from csbench.evaluate.runner import evaluate_pool

    ids, matrix = evaluated["ids"], evaluated["matrix"]
    outcomes, _ = evaluate_pool(FakeRetriever(ids, matrix), evaluated["pool"], ["gecs-100"], 5, RUN_NAME, False)
    plan = PROTOCOLS.get("gecs-100").plan(ids)
    hand = {ids[i]: _hand_rank(matrix[i], plan.candidates(i), i) for i in range(POOL_SIZE)}
    got = outcomes["gecs-100"]
    assert dict(zip(got.query_ids, got.ranks, strict=True)) == hand
    assert set(got.n_candidates) == {100}
    assert max(got.ranks) == 100 and min(got.ranks) == 1


# ---------------------------------------------------------------------------------------------
# the block-wise engine path (retrievers with vectors) gives what the per-query path gives


class _VectorRetriever:
    """Inner products of fixed integer vectors per id (exact in float32, many ties); exposes them
    as a ``DenseRetriever`` does, so ``search`` takes the engine path."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.code_vectors: np.ndarray | None = None

    def index(self, frame: pd.DataFrame) -> None:
        self.code_vectors = np.stack([self.vectors[id_] for id_ in frame["id"]]).astype(np.float32)

    def query_matrix(self, queries: list[str]) -> np.ndarray:
        return np.stack([self.vectors[q.removeprefix("query for ")] for q in queries]).astype(np.float32)

    def scores(self, query: str) -> np.ndarray:
        return (self.code_vectors @ self.query_matrix([query])[0]).astype(np.float64)


class _RowsOnly:
    """The same retriever seen through ``index`` / ``scores`` only (the per-query path)."""

    def __init__(self, inner: _VectorRetriever) -> None:
        self.inner = inner

    def index(self, frame: pd.DataFrame) -> None:
        self.inner.index(frame)

    def scores(self, query: str) -> np.ndarray:
        return self.inner.scores(query)


@pytest.mark.parametrize("memory_mb", [0.05, 256.0])
def test_engine_path_equals_per_query_path(memory_mb: float) -> None:
    from csbench.evaluate.runner import _is_dense, evaluate_pool

    n = 2300
    ids = _ids(n)
    rng = np.random.default_rng(5)
    vectors = {id_: rng.integers(-2, 3, size=6) for id_ in ids}  # 5**6 values: plenty of exact ties
    valid_ids = [f"v{k}" for k in range(50)]
    vectors |= {id_: rng.integers(-2, 3, size=6) for id_ in valid_ids}
    pool, valid = _pool(ids), _pool(valid_ids)
    protocols = ["full-corpus", "id-chunks-1000", "advtest", "gecs-100", "matching"]
    runs = {}
    for path, wrap in (("engine", lambda r: r), ("rows", _RowsOnly)):
        test_r, valid_r = wrap(_VectorRetriever(vectors)), wrap(_VectorRetriever(vectors))
        runs[path], _ = evaluate_pool(
            test_r, pool, protocols, 7, RUN_NAME, False, valid=valid, valid_retriever=valid_r, memory_mb=memory_mb
        )
        assert _is_dense(test_r) == (path == "engine")  # each path was taken
    for name in protocols:
        engine, rows = runs["engine"][name], runs["rows"][name]
        if name == "matching":
            assert engine.metrics() == rows.metrics()
            assert engine.lines() == rows.lines()
            continue
        assert engine.ranks == rows.ranks, name
        assert engine.query_ids == rows.query_ids and engine.n_candidates == rows.n_candidates
        assert engine.top1 == rows.top1
        assert engine.run_lines == rows.run_lines, name
    ranks = np.array(runs["engine"]["full-corpus"].ranks)
    assert (ranks > 1).mean() > 0.5  # the fixture has real competition and ties


def _top_k_sorting_everything(scores: np.ndarray, correct: int, k: int) -> np.ndarray:
    """top_k's order by definition: every candidate sorted (score descending, NaN lowest; among equal
    scores by index, the correct answer after the others), the first k."""
    scores = np.where(np.isnan(scores), -np.inf, scores)
    is_correct = np.zeros(scores.size, dtype=np.int8)
    is_correct[correct] = 1
    every = np.arange(scores.size)
    return np.lexsort((every, is_correct, -scores))[:k]


@pytest.mark.parametrize("seed", range(4))
def test_top_k_is_the_first_k_of_every_candidate_sorted(seed: int) -> None:
    """Also where the k-th score is shared by most of the row (a BM25 row of zeros)."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 400))
        scores = np.where(rng.random(n) < rng.random(), 0.0, rng.integers(-3, 4, size=n)).astype(np.float64)
        scores[rng.random(n) < 0.03] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
        correct, k = int(rng.integers(0, n)), int(rng.integers(1, n + 2))
        assert top_k(scores, correct, k).tolist() == _top_k_sorting_everything(scores, correct, k).tolist()
