"""COBE's losses against values computed by hand on small similarity matrices."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from csbench.registry import UnknownNameError
from csbench.train.losses import (
    LOSSES,
    CELoss,
    HingeMaxLoss,
    HingeSumLoss,
    WELoss,
    ce_loss,
    hinge_max_loss,
    hinge_sum_loss,
    make_loss,
    we_lambda,
    we_loss,
)

# scores[i, j] = s(query_i, code_j), positives on the diagonal. With margin α = 0.2 the hinges
# [α − S_ii + S_ij]_+ (query i against code j, row i) are, by hand:
#   row 0 (S_00 = 0.9): j=1: 0.2−0.9+0.1 = −0.6 → 0    j=2: 0.2−0.9+0.8 = 0.1
#   row 1 (S_11 = 0.6): j=0: 0.2−0.6+0.3 = −0.1 → 0    j=2: 0.2−0.6+0.1 = −0.3 → 0
#   row 2 (S_22 = 0.4): j=0: 0.2−0.4+0.5 = 0.3         j=1: 0.2−0.4+0.7 = 0.5
# and [α − S_ii + S_ji]_+ (code i against query j, column i):
#   col 0 (S_00 = 0.9): j=1: 0.2−0.9+0.3 = −0.4 → 0    j=2: 0.2−0.9+0.5 = −0.2 → 0
#   col 1 (S_11 = 0.6): j=0: 0.2−0.6+0.1 = −0.3 → 0    j=2: 0.2−0.6+0.7 = 0.3
#   col 2 (S_22 = 0.4): j=0: 0.2−0.4+0.8 = 0.6         j=1: 0.2−0.4+0.1 = −0.1 → 0
S3 = [[0.9, 0.1, 0.8], [0.3, 0.6, 0.1], [0.5, 0.7, 0.4]]
# sum, per pair (row + column): 0.1+0 = 0.1, 0+0.3 = 0.3, 0.8+0.6 = 1.4 → mean 1.8/3
HINGE_SUM_S3 = 0.6
HINGE_SUM_S3_ONE_WAY = 0.3  # rows only: 0.1, 0, 0.8 → 0.9/3
# max, per pair: 0.1+0 = 0.1, 0+0.3 = 0.3, 0.5+0.6 = 1.1 → mean 1.5/3
HINGE_MAX_S3 = 0.5
HINGE_MAX_S3_ONE_WAY = 0.2  # rows only: 0.1, 0, 0.5 → 0.6/3

# Cross-entropy by hand on S2 = [[2, 0], [1, 1]]:
#   τ = 1:   row 0: −log(e²/(e²+1)) = log(1+e⁻²) = 0.126928011;  row 1: −log(e/(2e)) = log 2 = 0.693147181
#   τ = 0.5: row 0 logits [4, 0]: log(1+e⁻⁴) = 0.018149928;  row 1 stays log 2 (a tie is a tie at any τ)
#   τ = 2:   row 0 logits [1, 0]: log(1+e⁻¹) = 0.313261688;  row 1 log 2
S2 = [[2.0, 0.0], [1.0, 1.0]]
CE_S2 = {1.0: 0.410037596, 0.5: 0.355648554, 2.0: 0.503204434}
# Transposed, [[2, 1], [0, 1]]: both rows are log(1+e⁻¹) = 0.313261688 (CE reads rows, not columns).
CE_S2_T = 0.313261688


def t(rows: list[list[float]], grad: bool = False) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64, requires_grad=grad)


# --- cross-entropy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_ce_hand_values_and_temperature(temperature: float) -> None:
    assert ce_loss(t(S2), temperature).item() == pytest.approx(CE_S2[temperature], abs=1e-8)
    assert CELoss(temperature)(t(S2)).item() == pytest.approx(CE_S2[temperature], abs=1e-8)


def test_ce_temperature_sharpens_when_the_positive_leads() -> None:
    # Lower τ sharpens: the loss falls for a row whose positive has the top score.
    values = [ce_loss(t(S2), tau).item() for tau in (2.0, 1.0, 0.5, 0.1)]
    assert values == sorted(values, reverse=True)
    assert values[0] > values[-1]


def test_ce_is_query_to_code_rows() -> None:
    assert ce_loss(t(S2).T.contiguous(), 1.0).item() == pytest.approx(CE_S2_T, abs=1e-8)


@pytest.mark.parametrize("temperature", [1.0, 0.05, 3.0])
def test_ce_agrees_with_torch_cross_entropy(temperature: float) -> None:
    scores = torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = F.cross_entropy(scores / temperature, torch.arange(6))
    assert ce_loss(scores, temperature).item() == pytest.approx(expected.item(), rel=1e-10)


def test_ce_rejects_bad_temperature() -> None:
    with pytest.raises(ValueError, match="temperature"):
        CELoss(0.0)
    with pytest.raises(ValueError, match="temperature"):
        ce_loss(t(S2), -1.0)


# --- hinge losses -----------------------------------------------------------------------------------


def test_hinge_sum_hand_values() -> None:
    assert hinge_sum_loss(t(S3), 0.2).item() == pytest.approx(HINGE_SUM_S3, abs=1e-12)
    assert hinge_sum_loss(t(S3), 0.2, symmetric=False).item() == pytest.approx(HINGE_SUM_S3_ONE_WAY, abs=1e-12)
    assert HingeSumLoss()(t(S3)).item() == pytest.approx(HINGE_SUM_S3, abs=1e-12)


def test_hinge_max_hand_values() -> None:
    assert hinge_max_loss(t(S3), 0.2).item() == pytest.approx(HINGE_MAX_S3, abs=1e-12)
    assert hinge_max_loss(t(S3), 0.2, symmetric=False).item() == pytest.approx(HINGE_MAX_S3_ONE_WAY, abs=1e-12)
    assert HingeMaxLoss()(t(S3)).item() == pytest.approx(HINGE_MAX_S3, abs=1e-12)


def test_margin_changes_the_hinges() -> None:
    # α = 0: row hinges 0.8−0.9 → 0; 0.5−0.4 = 0.1, 0.7−0.4 = 0.3; columns 0.7−0.6 = 0.1; 0.8−0.4 = 0.4.
    # sum per pair 0, 0.1, 0.1+0.3+0.4 = 0.8 → 0.9/3; max per pair 0, 0.1, 0.3+0.4 → 0.8/3
    assert hinge_sum_loss(t(S3), 0.0).item() == pytest.approx(0.3, abs=1e-12)
    assert hinge_max_loss(t(S3), 0.0).item() == pytest.approx(0.8 / 3, abs=1e-12)


def test_hinge_max_picks_the_hardest_negative() -> None:
    # Query 2's hardest code is code 1 (0.7 > 0.5). Raising S[2, 0] from 0.5 to 0.6 keeps it second:
    # hinge_max does not move; hinge_sum rises by 0.1 / 3 (row 2: 0.3 → 0.4; column 0 stays 0).
    moved = [row[:] for row in S3]
    moved[2][0] = 0.6
    assert hinge_max_loss(t(moved), 0.2).item() == pytest.approx(HINGE_MAX_S3, abs=1e-12)
    assert hinge_sum_loss(t(moved), 0.2).item() == pytest.approx(HINGE_SUM_S3 + 0.1 / 3, abs=1e-12)
    # Past 0.7 it becomes the hardest: row 2 max 0.2−0.4+0.9 = 0.7 instead of 0.5 (+0.2); and as query 2
    # it now also violates code 0's margin, column 0: 0.2−0.9+0.9 = 0.2 instead of 0 (+0.2) → mean + 0.4 / 3.
    moved[2][0] = 0.9
    assert hinge_max_loss(t(moved), 0.2, symmetric=False).item() == pytest.approx(
        HINGE_MAX_S3_ONE_WAY + 0.2 / 3, abs=1e-12
    )
    assert hinge_max_loss(t(moved), 0.2).item() == pytest.approx(HINGE_MAX_S3 + 0.4 / 3, abs=1e-12)


def test_hinge_max_gradient_reaches_only_the_hardest_negatives() -> None:
    scores = t(S3, grad=True)
    hinge_max_loss(scores, 0.2, symmetric=False).backward()
    # rows only: pair 0 hardest code 2, pair 1 inactive, pair 2 hardest code 1; each term / 3.
    expected = [[-1 / 3, 0, 1 / 3], [0, 0, 0], [0, 1 / 3, -1 / 3]]
    assert torch.allclose(scores.grad, t(expected), atol=1e-12)

    scores = t(S3, grad=True)
    hinge_max_loss(scores, 0.2).backward()
    # both ways: pair 0 row → S02; pair 1 column → S21; pair 2 row → S21, column → S02; positives −1 per
    # active term: S00 −1, S11 −1, S22 −2; all over 3. S01, S10, S12 and S20 (a non-hardest one) get 0.
    expected = [[-1 / 3, 0, 2 / 3], [0, -1 / 3, 0], [0, 2 / 3, -2 / 3]]
    assert torch.allclose(scores.grad, t(expected), atol=1e-12)


def test_hinge_sum_gradient_reaches_every_violating_negative() -> None:
    scores = t(S3, grad=True)
    hinge_sum_loss(scores, 0.2, symmetric=False).backward()
    # active row hinges: (0,2), (2,0), (2,1); S22 is the positive of two of them.
    expected = [[-1 / 3, 0, 1 / 3], [0, 0, 0], [1 / 3, 1 / 3, -2 / 3]]
    assert torch.allclose(scores.grad, t(expected), atol=1e-12)


@pytest.mark.parametrize("cls", [HingeSumLoss, HingeMaxLoss])
def test_hinge_rejects_negative_margin(cls: type) -> None:
    with pytest.raises(ValueError, match="margin"):
        cls(margin=-0.1)


# --- weighted exponential -----------------------------------------------------------------------------


def test_we_lambda_growth() -> None:
    assert we_lambda(0.9, 0) == 0.0  # η^0 = 1
    assert we_lambda(0.9, 1) == pytest.approx(0.1)
    assert we_lambda(0.9, 10) == pytest.approx(0.6513215599)  # 1 − 0.9^10 = 1 − 0.3486784401
    assert we_lambda(0.0, 0) == 0.0  # 0 ** 0 == 1: the literal formula, see WELoss for ε's offset
    assert we_lambda(0.0, 1) == 1.0
    assert we_lambda(1.0, 100) == 0.0
    with pytest.raises(ValueError, match="eta"):
        we_lambda(1.5, 1)
    with pytest.raises(ValueError, match="epsilon"):
        we_lambda(0.5, -1)


def test_we_matches_sum_at_lambda_0_and_max_at_lambda_1() -> None:
    assert we_loss(t(S3), 0.2, 0.9, 0).item() == pytest.approx(HINGE_SUM_S3, abs=1e-12)
    assert we_loss(t(S3), 0.2, 0.0, 1).item() == pytest.approx(HINGE_MAX_S3, abs=1e-12)
    # λ = 0.1: 0.1 · 0.5 + 0.9 · 0.6 = 0.59
    assert we_loss(t(S3), 0.2, 0.9, 1).item() == pytest.approx(0.59, abs=1e-12)


def test_we_module_schedule() -> None:
    by_epoch = WELoss(eta=0.9, schedule="epoch")
    # epoch 0 is ε = 1 → λ = 0.1 → 0.59; epoch 9 is ε = 10 → 0.6 − 0.1 · 0.6513215599 = 0.534867844
    assert by_epoch(t(S3), epoch=0, step=500).item() == pytest.approx(0.59, abs=1e-12)
    assert by_epoch(t(S3), epoch=9, step=0).item() == pytest.approx(0.53486784401, abs=1e-10)
    assert by_epoch.weight(epoch=9) == pytest.approx(0.6513215599)
    by_step = WELoss(eta=0.9, schedule="step")
    assert by_step(t(S3), epoch=9, step=0).item() == pytest.approx(0.59, abs=1e-12)
    assert by_step(t(S3), epoch=0, step=9).item() == pytest.approx(0.53486784401, abs=1e-10)


def test_we_defaults_are_cobe_hard_negatives_only() -> None:
    loss = make_loss("we", {})
    assert (loss.margin, loss.eta) == (0.2, 0.0)
    # η = 0 uses the hardest negatives from the very first epoch (ε = epoch + 1 ≥ 1).
    for epoch in (0, 1, 7):
        assert loss(t(S3), epoch=epoch).item() == pytest.approx(HINGE_MAX_S3, abs=1e-12)


def test_we_rejects_bad_params() -> None:
    with pytest.raises(ValueError, match="schedule"):
        WELoss(schedule="batch")
    with pytest.raises(ValueError, match="eta"):
        WELoss(eta=-0.1)
    with pytest.raises(ValueError, match="epoch"):
        WELoss()(t(S3), epoch=-1)


# --- edge cases, all losses ---------------------------------------------------------------------------

ALL_LOSSES = ["ce", "hinge_sum", "hinge_max", "we"]


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_batch_of_one_is_zero_with_zero_gradient(name: str) -> None:
    scores = t([[0.3]], grad=True)
    value = make_loss(name, {})(scores)
    value.backward()
    assert value.item() == 0.0
    assert scores.grad is not None and scores.grad.item() == 0.0


@pytest.mark.parametrize("name", ALL_LOSSES)
@pytest.mark.parametrize("shape", [(2, 3), (4,), (2, 2, 2), (0, 0)])
def test_bad_shapes_raise(name: str, shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="scores"):
        make_loss(name, {})(torch.zeros(shape))


@pytest.mark.parametrize("name", ALL_LOSSES)
def test_returns_scalar(name: str) -> None:
    assert make_loss(name, {})(t(S3)).shape == ()


@pytest.mark.parametrize(
    ("name", "params"),
    [("ce", {"temperature": 0.01}), ("hinge_sum", {}), ("hinge_max", {}), ("we", {"eta": 0.5})],
)
@pytest.mark.parametrize(
    "scores",
    [
        torch.full((4, 4), 0.5),  # every score tied: max and clamp at their kinks
        torch.randn(8, 8, generator=torch.Generator().manual_seed(1)) * 1e3,  # huge logits
        torch.eye(5) * 10,  # every margin respected: hinges inactive, CE saturated
    ],
)
def test_gradients_are_finite(name: str, params: dict, scores: torch.Tensor) -> None:
    scores = scores.clone().requires_grad_(True)
    value = make_loss(name, params)(scores, epoch=3, step=40)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(scores.grad).all()


# --- registry -------------------------------------------------------------------------------------------


def test_registry_names_and_defaults() -> None:
    assert LOSSES.names() == ALL_LOSSES
    assert LOSSES.get("ce").defaults == {"temperature": 1.0}
    assert LOSSES.get("hinge_max").defaults["margin"] == 0.2
    assert isinstance(make_loss("ce", {"temperature": 0.5}), CELoss)
    assert make_loss("ce", {"temperature": 0.5}).temperature == 0.5
    assert make_loss("hinge_sum", {"symmetric": False}).symmetric is False


def test_unknown_loss_name_suggests_a_close_one() -> None:
    with pytest.raises(UnknownNameError, match=r"Did you mean 'hinge_max'\?") as info:
        make_loss("hinge_mx", {})
    assert "valid names: ce, hinge_max, hinge_sum, we" in str(info.value)


def test_unknown_param_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) 'temp' for loss 'ce'; valid parameters: temperature"):
        make_loss("ce", {"temp": 1.0})
    with pytest.raises(ValueError, match="valid parameters: margin, eta, schedule, symmetric") as info:
        make_loss("we", {"margn": 0.1})
    assert "did you mean 'margin'" in str(info.value)


def test_hand_constants_are_consistent() -> None:
    # Guards the literals above against typos: log(1+e^-2) and log 2 averaged.
    assert CE_S2[1.0] == pytest.approx((math.log1p(math.exp(-2)) + math.log(2)) / 2, abs=1e-9)
