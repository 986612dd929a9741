"""Robustness metrics (csbench.evaluate.robustness) on hand-computed examples."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from csbench.evaluate.robustness import (
    curve_ir_auc,
    flip_rate,
    ir_auc,
    macro_ir_auc,
    micro_curve,
    micro_ir_auc,
    relative_drop,
    robust_mrr,
    robustness_summary,
)

GRID = [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5]


# ------------------------------------------------------------------------------------------ IR-AUC


def test_flat_curve_scores_its_clean_mrr() -> None:
    assert ir_auc(GRID, [0.61] * len(GRID)) == pytest.approx(0.61)
    assert ir_auc([0.0, 0.5], [0.3, 0.3]) == pytest.approx(0.3)


def test_known_trapezoids() -> None:
    # 0.1 · (1.0 + 0.5) / 2 + 0.2 · (0.5 + 0.5) / 2 = 0.175 over a range of 0.3
    assert ir_auc([0.0, 0.1, 0.3], [1.0, 0.5, 0.5]) == pytest.approx(0.175 / 0.3)
    # a straight line from 0.8 to 0.4 averages 0.6, however finely it is sampled
    assert ir_auc([0.0, 0.5], [0.8, 0.4]) == pytest.approx(0.6)
    assert ir_auc(GRID, [0.8 - 0.8 * r for r in GRID]) == pytest.approx(0.6)
    # the range need not start at 0: 0.1 · (0.4 + 0.2) / 2 over 0.1
    assert ir_auc([0.1, 0.2], [0.4, 0.2]) == pytest.approx(0.3)
    # order of the points does not matter
    assert ir_auc([0.3, 0.0, 0.1], [0.5, 1.0, 0.5]) == pytest.approx(0.175 / 0.3)


def test_single_point_is_its_mrr() -> None:
    assert ir_auc([1.0], [0.784]) == pytest.approx(0.784)
    assert curve_ir_auc({1.0: 0.5}) == 0.5


@pytest.mark.parametrize(
    ("ratios", "mrrs", "message"),
    [
        ([], [], "at least one point"),
        ([0.0, 0.1], [0.5], "one MRR per ratio"),
        ([0.0, 0.1, 0.1], [0.5, 0.4, 0.3], "appears twice"),
        ([0.0, math.nan], [0.5, 0.4], "finite"),
        ([0.0, 0.1], [0.5, math.inf], "finite"),
    ],
)
def test_bad_curves_raise(ratios: list[float], mrrs: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ir_auc(ratios, mrrs)


# ----------------------------------------------------------------------------------- macro, micro


def test_macro_counts_single_point_curves_micro_leaves_them_out() -> None:
    curves = {
        "case": {0.0: 0.6, 0.5: 0.6},  # 0.6
        "typo": {0.0: 0.8, 0.5: 0.2},  # 0.5
        "question": {1.0: 0.7},  # 0.7
    }
    assert macro_ir_auc(curves) == pytest.approx((0.6 + 0.5 + 0.7) / 3)
    assert micro_curve(curves) == pytest.approx({0.0: 0.7, 0.5: 0.4})
    assert micro_ir_auc(curves) == pytest.approx(0.55)


def test_micro_equals_macro_on_a_common_grid() -> None:
    rng = np.random.default_rng(0)
    curves = {
        name: dict(zip(GRID, sorted(rng.uniform(0, 1, len(GRID)), reverse=True), strict=True)) for name in "abcdef"
    }
    assert micro_ir_auc(curves) == pytest.approx(macro_ir_auc(curves))


def test_micro_differs_from_macro_when_grids_differ() -> None:
    curves = {"a": {0.0: 0.8, 0.5: 0.4}, "b": {0.0: 0.6, 0.25: 0.2, 0.5: 0.6}}
    # micro curve: 0 -> 0.7, 0.25 -> 0.2 (only b), 0.5 -> 0.5
    assert micro_curve(curves) == pytest.approx({0.0: 0.7, 0.25: 0.2, 0.5: 0.5})
    assert micro_ir_auc(curves) == pytest.approx((0.25 * 0.9 / 2 + 0.25 * 0.7 / 2) / 0.5)  # 0.4
    assert macro_ir_auc(curves) == pytest.approx((0.6 + 0.4) / 2)


def test_cobe_overall_is_the_macro_over_all_seven_columns() -> None:
    """COBE Table V, CodeBERT row: Overall 0.524 is the mean of all seven columns, Question included."""
    table = {"case": 0.266, "noise": 0.415, "question": 0.784, "replace": 0.387, "swap": 0.765, "synonym": 0.672,
             "typo": 0.382}  # fmt: skip
    curves = {name: ({1.0: v} if name == "question" else {0.0: v, 0.5: v}) for name, v in table.items()}
    assert round(macro_ir_auc(curves), 3) == 0.524


def test_macro_and_micro_need_curves() -> None:
    with pytest.raises(ValueError, match="no robustness curves"):
        macro_ir_auc({})
    with pytest.raises(ValueError, match="two or more ratios"):
        micro_ir_auc({"question": {1.0: 0.5}})


# ---------------------------------------------------------------------------------- relative drop


def test_relative_drop() -> None:
    assert relative_drop([0.0, 0.1, 0.5], [0.5, 0.4, 0.25]) == pytest.approx([0.0, 0.2, 0.5])
    assert relative_drop([0.5, 0.0], [0.25, 0.5]) == pytest.approx([0.5, 0.0])  # in the order given
    assert relative_drop([0.0, 0.1], [0.4, 0.5]) == pytest.approx([0.0, -0.25])  # an improvement is negative
    assert all(math.isnan(d) for d in relative_drop([0.0, 0.1], [0.0, 0.0]))
    with pytest.raises(ValueError, match="ratio 0"):
        relative_drop([0.1, 0.2], [0.5, 0.4])


# --------------------------------------------------------------------------- robust MRR, flip rate


def test_robust_mrr_takes_each_querys_worst_variant() -> None:
    rr = [
        [1.0, 0.5, 1.0],  # worst 0.5
        [0.25, 0.25, 1 / 3],  # worst 0.25
        [0.0, 1.0, 1.0],  # worst 0 (cut off under the first variant)
    ]
    assert robust_mrr(rr) == pytest.approx(0.25)
    assert robust_mrr(np.array([[1.0], [0.5]])) == pytest.approx(0.75)  # one variant: the plain MRR
    assert robust_mrr(rr) <= min(np.mean(rr, axis=0))


@pytest.mark.parametrize("bad", [[], [1.0, 0.5], [[0.5, 1.5]], [[-0.1, 0.5]], [[math.nan, 0.5]]])
def test_robust_mrr_rejects_bad_tables(bad: list) -> None:
    with pytest.raises(ValueError):
        robust_mrr(bad)


def test_flip_rate() -> None:
    assert flip_rate(["a", "b", "c", "d"], ["a", "x", "c", "y"]) == 0.5
    assert flip_rate([3, 1], [3, 1]) == 0.0
    assert flip_rate(np.array([1, 2, 3]).tolist(), [2, 3, 1]) == 1.0
    with pytest.raises(ValueError, match="2 clean and 1 perturbed"):
        flip_rate(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no queries"):
        flip_rate([], [])


# ------------------------------------------------------------------------------------------ summary


def test_summary_is_json_ready() -> None:
    curves = {"typo": {0.0: 0.5, 0.25: 0.3, 0.5: 0.2}, "question": {1.0: 0.45}, "dead": {0.0: 0.0, 0.5: 0.0}}
    summary = robustness_summary(curves)
    json.dumps(summary, allow_nan=False)
    typo = summary["per_perturbation"]["typo"]
    assert typo["ir_auc"] == pytest.approx((0.25 * 0.8 / 2 + 0.25 * 0.5 / 2) / 0.5)
    assert typo["relative_drop"] == pytest.approx({"0.0": 0.0, "0.25": 0.4, "0.5": 0.6})
    assert "relative_drop" not in summary["per_perturbation"]["question"]
    assert summary["per_perturbation"]["dead"]["relative_drop"] == {"0.0": None, "0.5": None}
    assert summary["macro_ir_auc"] == pytest.approx((typo["ir_auc"] + 0.45 + 0.0) / 3)
    assert summary["micro_ir_auc"] == pytest.approx(micro_ir_auc(curves))
    assert robustness_summary({"question": {1.0: 0.45}})["micro_ir_auc"] is None
