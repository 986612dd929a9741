"""Rank-based metrics (csbench.evaluate.metrics): ranks count ties against the model (SPEC
"Retrieval protocols"), MRR may be cut at a rank, nDCG@10 has binary relevance with one relevant
code, empty input has no metric values. Checked against trec_eval (pytrec_eval) where the
definitions coincide, and against hand-computed values where they differ (ties)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from csbench.evaluate.metrics import (
    NDCG_CUTOFF,
    RECALL_CUTOFFS,
    ndcg_at,
    rank_metrics,
    rank_of_correct,
    reciprocal_ranks,
)

# ---------------------------------------------------------------------------------------------
# rank_of_correct


@pytest.mark.parametrize(
    ("correct", "rank"),
    [(1, 2), (2, 2), (0, 3), (3, 4)],
)
def test_rank_of_correct_ties_count_against_the_model(correct: int, rank: int) -> None:
    scores = np.array([0.5, 0.9, 0.9, 0.1])
    assert rank_of_correct(scores, correct) == rank


def test_rank_of_correct_unique_best_is_rank_one() -> None:
    assert rank_of_correct(np.array([0.1, 0.2, 3.0, 0.3]), 2) == 1


def test_rank_of_correct_all_equal_is_last() -> None:
    assert rank_of_correct(np.zeros(7), 3) == 7


def test_rank_of_correct_nan_candidates_rank_below_everything() -> None:
    scores = np.array([np.nan, 0.5, 0.7, np.nan, -10.0])
    assert rank_of_correct(scores, 1) == 2  # only 0.7 and itself; NaNs do not count
    assert rank_of_correct(scores, 4) == 3  # even a very low score beats NaN


def test_rank_of_correct_nan_on_the_correct_answer_ranks_it_last() -> None:
    scores = np.array([np.nan, 0.5, 0.7, 0.1])
    assert rank_of_correct(scores, 0) == 4
    assert rank_of_correct(np.full(5, np.nan), 2) == 5


def test_rank_of_correct_returns_python_int() -> None:
    assert type(rank_of_correct(np.array([1.0, 2.0]), 0)) is int


# ---------------------------------------------------------------------------------------------
# reciprocal_ranks


def test_reciprocal_ranks_without_cutoff() -> None:
    np.testing.assert_allclose(reciprocal_ranks(np.array([1, 2, 4, 1001])), [1.0, 0.5, 0.25, 1 / 1001])


def test_reciprocal_ranks_cutoff_zeroes_ranks_beyond_it() -> None:
    rr = reciprocal_ranks(np.array([1, 1000, 1001, 5000]), cutoff=1000)
    np.testing.assert_allclose(rr, [1.0, 1 / 1000, 0.0, 0.0])  # rank 1000 still counts, 1001 does not


def test_reciprocal_ranks_does_not_modify_its_input() -> None:
    ranks = np.array([1.0, 2000.0])
    reciprocal_ranks(ranks, cutoff=1000)
    np.testing.assert_array_equal(ranks, [1.0, 2000.0])


# ---------------------------------------------------------------------------------------------
# rank_metrics on hand-computed rank lists


def test_rank_metrics_hand_computed() -> None:
    ranks = np.array([1, 2, 3, 5, 6, 10, 11])
    m = rank_metrics(ranks)
    assert m["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 5 + 1 / 6 + 1 / 10 + 1 / 11) / 7)
    assert m["r@1"] == pytest.approx(1 / 7)
    assert m["r@5"] == pytest.approx(4 / 7)  # 1, 2, 3, 5
    assert m["r@10"] == pytest.approx(6 / 7)  # all but 11
    # 1/log2(rank + 1) up to rank 10: 1, 0.6309, 0.5, 0.3869, 0.3562, 0.2891, and 0 for rank 11
    assert m["ndcg@10"] == pytest.approx((1 + 0.630930 + 0.5 + 0.386853 + 0.356207 + 0.289065 + 0) / 7, abs=1e-6)
    assert m["mean_rank"] == pytest.approx(38 / 7)
    assert m["median_rank"] == 5.0
    assert m["n_queries"] == 7


def test_rank_metrics_even_count_median_and_keys() -> None:
    m = rank_metrics(np.array([4, 1, 2, 8]))
    assert m["median_rank"] == 3.0
    assert m["mean_rank"] == 3.75
    assert m["mrr"] == pytest.approx((1 / 4 + 1 + 1 / 2 + 1 / 8) / 4)
    assert list(m) == ["mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "n_queries"]
    assert RECALL_CUTOFFS == (1, 5, 10)
    assert NDCG_CUTOFF == 10


def test_rank_metrics_cutoff_only_affects_mrr() -> None:
    ranks = np.array([1, 1001])
    cut = rank_metrics(ranks, cutoff=1000)
    uncut = rank_metrics(ranks)
    assert cut["mrr"] == pytest.approx(0.5)
    assert uncut["mrr"] == pytest.approx((1 + 1 / 1001) / 2)
    for key in ("r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank", "n_queries"):
        assert cut[key] == uncut[key]
    # nor does a cutoff below 10 cut nDCG@10: rank 3 still gains 1/log2(4)
    assert rank_metrics(np.array([3]), cutoff=2)["ndcg@10"] == pytest.approx(0.5)
    assert cut["mean_rank"] == 501.0


def test_rank_metrics_empty_input_has_no_values() -> None:
    m = rank_metrics(np.array([], dtype=np.int64), cutoff=1000)
    assert m == {
        "mrr": None,
        "r@1": None,
        "r@5": None,
        "r@10": None,
        "ndcg@10": None,
        "mean_rank": None,
        "median_rank": None,
        "n_queries": 0,
    }


def test_rank_metrics_values_are_plain_python_numbers() -> None:
    m = rank_metrics(np.array([1, 3]))
    assert all(type(m[k]) is float for k in ("mrr", "r@1", "r@5", "r@10", "ndcg@10", "mean_rank", "median_rank"))
    assert type(m["n_queries"]) is int


# ---------------------------------------------------------------------------------------------
# against an independent implementation (plain Python, from explicit score matrices)


def _reference_rank(row: list[float], correct: int) -> int:
    """Sort candidates best first, the correct one last among equal scores; NaN is the worst score."""

    def key(j: int) -> tuple[float, bool]:
        s = row[j]
        return (math.inf if math.isnan(s) else -s, j == correct)

    order = sorted(range(len(row)), key=key)
    if math.isnan(row[correct]):
        return len(row)
    return order.index(correct) + 1


def _reference_metrics(matrix: list[list[float]], correct: list[int], cutoff: int | None) -> dict[str, float]:
    ranks = [_reference_rank(row, c) for row, c in zip(matrix, correct, strict=True)]
    n = len(ranks)
    out = {"mrr": sum((1 / r if cutoff is None or r <= cutoff else 0.0) for r in ranks) / n}
    for k in (1, 5, 10):
        out[f"r@{k}"] = sum(1 for r in ranks if r <= k) / n
    out["mean_rank"] = sum(ranks) / n
    return out


def _csbench_metrics(matrix: list[list[float]], correct: list[int], cutoff: int | None) -> dict:
    ranks = [rank_of_correct(np.array(row, dtype=np.float64), c) for row, c in zip(matrix, correct, strict=True)]
    return rank_metrics(np.array(ranks), cutoff)


EXPLICIT_MATRIX = [
    # query 0: correct (col 0) is the unique best -> rank 1
    [0.9, 0.1, 0.2, 0.3, 0.4, 0.5],
    # query 1: correct (col 1) tied with two others at the top -> rank 3
    [0.7, 0.7, 0.7, 0.1, 0.0, 0.2],
    # query 2: correct (col 2) is the worst -> rank 6
    [0.9, 0.8, 0.0, 0.7, 0.6, 0.5],
    # query 3: correct (col 3) second, a NaN elsewhere does not count -> rank 2
    [float("nan"), 0.8, 0.1, 0.5, 0.2, 0.3],
    # query 4: correct (col 4) is NaN -> last, rank 6
    [0.1, 0.2, 0.3, 0.4, float("nan"), 0.6],
    # query 5: everything equal -> rank 6
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
]


def test_reference_ranks_of_the_explicit_matrix() -> None:
    ranks = [rank_of_correct(np.array(row), i) for i, row in enumerate(EXPLICIT_MATRIX)]
    assert ranks == [1, 3, 6, 2, 6, 6]
    assert ranks == [_reference_rank(row, i) for i, row in enumerate(EXPLICIT_MATRIX)]


@pytest.mark.parametrize("cutoff", [None, 2])
def test_metrics_match_reference_on_explicit_matrix(cutoff: int | None) -> None:
    correct = list(range(len(EXPLICIT_MATRIX)))
    ours = _csbench_metrics(EXPLICIT_MATRIX, correct, cutoff)
    ref = _reference_metrics(EXPLICIT_MATRIX, correct, cutoff)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value), key
    # hand check of the cut: ranks [1, 3, 6, 2, 6, 6]
    expected_mrr = (1 + 1 / 2) / 6 if cutoff == 2 else (1 + 1 / 3 + 1 / 6 + 1 / 2 + 1 / 6 + 1 / 6) / 6
    assert ours["mrr"] == pytest.approx(expected_mrr)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_reference_on_random_tied_matrices(seed: int) -> None:
    rnd = random.Random(seed)
    n_queries, n_candidates = 120, 40
    # few distinct values so that ties are frequent; a sprinkling of NaN
    matrix = [
        [float("nan") if rnd.random() < 0.03 else float(rnd.randint(0, 6)) for _ in range(n_candidates)]
        for _ in range(n_queries)
    ]
    correct = [rnd.randrange(n_candidates) for _ in range(n_queries)]
    for cutoff in (None, 3):
        ours = _csbench_metrics(matrix, correct, cutoff)
        ref = _reference_metrics(matrix, correct, cutoff)
        for key, value in ref.items():
            assert ours[key] == pytest.approx(value), (cutoff, key)
        assert ours["n_queries"] == n_queries


# ---------------------------------------------------------------------------------------------
# ndcg_at on hand-computed ranks


def test_ndcg_at_hand_computed() -> None:
    # one relevant code, binary relevance: ideal DCG = 1, DCG = 1 / log2(rank + 1) while rank <= 10
    gains = ndcg_at(np.array([1, 2, 3, 7, 10, 11, 500]))
    np.testing.assert_allclose(gains, [1.0, 1 / math.log2(3), 0.5, 1 / 3, 1 / math.log2(11), 0.0, 0.0])


def test_ndcg_at_other_cutoff_and_input_untouched() -> None:
    ranks = np.array([3, 4, 5])
    np.testing.assert_allclose(ndcg_at(ranks, k=4), [0.5, 1 / math.log2(5), 0.0])
    np.testing.assert_array_equal(ranks, [3, 4, 5])


# ---------------------------------------------------------------------------------------------
# against trec_eval (pytrec_eval) where the definitions coincide
#
# With one relevant document per query (relevance 1) and no tied scores, trec_eval's measures and
# ours coincide as follows:
#   recip_rank           == 1 / rank                    (our MRR without cutoff; trec_eval has no cut,
#                                                         so with a cutoff we zero ranks beyond it on its side)
#   success_1 / _5 / _10 == rank <= k                    == our r@1 / r@5 / r@10
#   recall_1 / _5 / _10  == rank <= k as well (one relevant document: found or not)
#   ndcg_cut_10          == 1 / log2(rank + 1), 0 beyond 10 == our ndcg@10 (trec_eval's gain is the
#                           relevance itself, ours 2^rel - 1 in the Challenge NDCG: equal for rel = 1)
# They differ on ties: trec_eval orders equal scores by docno (descending), we put the correct code
# last among them; see test_ties_differ_from_trec_eval.

TREC_MEASURES = {"recip_rank", "success.1,5,10", "recall.1,5,10", "ndcg_cut.10"}


@pytest.fixture(scope="module")
def pytrec_eval():
    return pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier (a dev dependency) is not installed")


def _trec(pytrec_eval, matrix: np.ndarray, correct: np.ndarray) -> dict[str, dict[str, float]]:
    """trec_eval's per-query measures: query i's qrels hold only its correct document."""
    qrels = {f"q{i}": {f"d{c:04d}": 1} for i, c in enumerate(correct)}
    run = {f"q{i}": {f"d{j:04d}": float(s) for j, s in enumerate(row)} for i, row in enumerate(matrix)}
    return pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_query_measures_match_trec_eval_without_ties(pytrec_eval, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_queries, n_candidates = 150, 60  # ranks spread over 1..60, so the cuts at 1, 5, 10 all matter
    matrix = rng.standard_normal((n_queries, n_candidates))
    assert all(np.unique(row).size == n_candidates for row in matrix)  # no ties: trec_eval's order is ours
    correct = rng.integers(0, n_candidates, n_queries)
    ranks = np.array([rank_of_correct(row, int(c)) for row, c in zip(matrix, correct, strict=True)])
    assert ranks.min() == 1 and ranks.max() > 10
    trec = _trec(pytrec_eval, matrix, correct)
    rr, rr_cut, ndcg = reciprocal_ranks(ranks), reciprocal_ranks(ranks, cutoff=7), ndcg_at(ranks)
    for i, rank in enumerate(ranks):
        measures = trec[f"q{i}"]
        assert rr[i] == pytest.approx(measures["recip_rank"])
        assert rr_cut[i] == pytest.approx(measures["recip_rank"] if rank <= 7 else 0.0)
        assert ndcg[i] == pytest.approx(measures["ndcg_cut_10"])
        for k in RECALL_CUTOFFS:
            assert float(rank <= k) == measures[f"success_{k}"] == measures[f"recall_{k}"]
    # and the means rank_metrics reports
    m = rank_metrics(ranks)
    for ours, theirs in [("mrr", "recip_rank"), ("ndcg@10", "ndcg_cut_10")] + [
        (f"r@{k}", f"success_{k}") for k in RECALL_CUTOFFS
    ]:
        assert m[ours] == pytest.approx(np.mean([trec[q][theirs] for q in trec])), ours


def test_ties_differ_from_trec_eval(pytrec_eval) -> None:
    # three candidates tie at 0.5 with the correct one (d0002): trec_eval breaks the tie by docno,
    # descending, and ranks d0002 first; we count the tie against the model: rank 3
    matrix = np.array([[0.5, 0.5, 0.5, 0.1]])
    trec = _trec(pytrec_eval, matrix, np.array([2]))["q0"]
    assert trec["recip_rank"] == 1.0 and trec["ndcg_cut_10"] == 1.0 and trec["success_1"] == 1.0
    m = rank_metrics(np.array([rank_of_correct(matrix[0], 2)]))
    assert m["mean_rank"] == 3.0
    assert m["mrr"] == pytest.approx(1 / 3)
    assert m["ndcg@10"] == pytest.approx(0.5)  # 1 / log2(3 + 1)
    assert m["r@1"] == 0.0 and m["r@5"] == 1.0


def test_all_tied_scores_rank_last_for_every_correct_candidate(pytrec_eval) -> None:
    # 12 equal scores: trec_eval's rank depends on the docno (12 - j for d000j), ours is always 12,
    # beyond the nDCG cut at 10
    matrix = np.zeros((12, 12))
    correct = np.arange(12)
    trec = _trec(pytrec_eval, matrix, correct)
    assert [round(1 / trec[f"q{j}"]["recip_rank"]) for j in correct] == [12 - j for j in correct]
    ranks = np.array([rank_of_correct(row, int(c)) for row, c in zip(matrix, correct, strict=True)])
    assert (ranks == 12).all()
    m = rank_metrics(ranks)
    assert m["ndcg@10"] == 0.0 and m["r@10"] == 0.0
    assert m["mrr"] == pytest.approx(1 / 12)
