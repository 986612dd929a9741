"""Rank-based metrics (csbench.evaluate.metrics): ranks count ties against the model (SPEC
"Retrieval protocols"), MRR may be cut at a rank, empty input has no metric values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from csbench.evaluate.metrics import RECALL_CUTOFFS, rank_metrics, rank_of_correct, reciprocal_ranks

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
    assert m["mean_rank"] == pytest.approx(38 / 7)
    assert m["median_rank"] == 5.0
    assert m["n_queries"] == 7


def test_rank_metrics_even_count_median_and_keys() -> None:
    m = rank_metrics(np.array([4, 1, 2, 8]))
    assert m["median_rank"] == 3.0
    assert m["mean_rank"] == 3.75
    assert m["mrr"] == pytest.approx((1 / 4 + 1 + 1 / 2 + 1 / 8) / 4)
    assert list(m) == ["mrr", "r@1", "r@5", "r@10", "mean_rank", "median_rank", "n_queries"]
    assert RECALL_CUTOFFS == (1, 5, 10)


def test_rank_metrics_cutoff_only_affects_mrr() -> None:
    ranks = np.array([1, 1001])
    cut = rank_metrics(ranks, cutoff=1000)
    uncut = rank_metrics(ranks)
    assert cut["mrr"] == pytest.approx(0.5)
    assert uncut["mrr"] == pytest.approx((1 + 1 / 1001) / 2)
    for key in ("r@1", "r@5", "r@10", "mean_rank", "median_rank", "n_queries"):
        assert cut[key] == uncut[key]
    assert cut["mean_rank"] == 501.0


def test_rank_metrics_empty_input_has_no_values() -> None:
    m = rank_metrics(np.array([], dtype=np.int64), cutoff=1000)
    assert m == {
        "mrr": None,
        "r@1": None,
        "r@5": None,
        "r@10": None,
        "mean_rank": None,
        "median_rank": None,
        "n_queries": 0,
    }


def test_rank_metrics_values_are_plain_python_numbers() -> None:
    m = rank_metrics(np.array([1, 3]))
    assert all(type(m[k]) is float for k in ("mrr", "r@1", "r@5", "r@10", "mean_rank", "median_rank"))
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
