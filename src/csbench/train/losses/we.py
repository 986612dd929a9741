"""Exponentially weighted hinge loss, J_WE (COBE section III-A, eqs. 4–5).

``J_WE = λ(ε) · J_MAX + (1 − λ(ε)) · J_SUM`` with ``λ = 1 − η^ε``: all hinges early in training, more and
more weight on the hardest negative as ε grows; η is the "exponential growth resistance" (near 1: slow).
J_MAX and J_SUM are :mod:`~csbench.train.losses.hinge_max` and :mod:`~csbench.train.losses.hinge_sum`,
with the same margin, direction (bidirectional by default) and reduction (mean over the batch's pairs).

Default η = 0: COBE's experiments "set the margin to 0.2, and the exponential growth resistance to 0
(using hard-contrastives only)" (section IV-A), so with the defaults ``we`` is ``hinge_max``.

What ε is: ``schedule`` says whether ε counts epochs or optimiser steps, taken from ``forward``'s
``epoch`` / ``step`` keywords, which are 0-based counters. ε is the 1-based count, ``ε = epoch + 1`` (or
``step + 1``), so the first epoch or step already has ε = 1. Two reasons: the paper says η = 0 means hard
negatives only, which the literal formula breaks at ε = 0 (``0 ** 0 == 1`` gives λ = 0, i.e. pure J_SUM);
and the authors' implementation (jwehrmann/retrieval.pytorch, ``ContrastiveLoss.adjust_k``) increments its
iteration counter before computing ``1 − β^iteration``, so its first step uses exponent 1 as well. The pure
:func:`we_lambda` keeps the formula literal: ``we_lambda(η, 0) == 0`` for every η, including η = 0.
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from csbench.train.losses.hinge_sum import hinge_costs
from csbench.train.losses.spec import MARGIN, SYMMETRIC, loss_spec

SCHEDULES = ("epoch", "step")

SPEC = loss_spec(
    name="we",
    description="λ·hinge_max + (1 − λ)·hinge_sum with λ = 1 − η^ε, ε = epoch or step (eqs. 4–5)",
    factory="WELoss",
    defaults={"margin": 0.2, "eta": 0.0, "schedule": "epoch", "symmetric": True},
    params={
        "margin": MARGIN,
        "eta": {"minimum": 0, "maximum": 1, "description": "η of λ = 1 − η^ε (eq. 5)"},
        "schedule": {"enum": ["epoch", "step"], "description": "what ε counts"},
        "symmetric": SYMMETRIC,
    },
)


def we_lambda(eta: float, epsilon: float) -> float:
    """λ = 1 − η^ε (eq. 5), the weight of J_MAX. λ(ε = 0) = 0 for every η (Python's ``0.0 ** 0 == 1``)."""
    if not 0 <= eta <= 1:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return 1.0 - float(eta) ** epsilon


def we_loss(scores: Tensor, margin: float, eta: float, epsilon: float, *, symmetric: bool = True) -> Tensor:
    """J_WE (eq. 4) = λ·J_MAX + (1 − λ)·J_SUM with λ = ``we_lambda(eta, epsilon)``, ε taken literally.

    Both parts are per-pair losses (summed over negatives / hardest negative, both directions when
    ``symmetric``) averaged over the B pairs, so J_WE is too. 0 when B = 1.
    """
    weight = we_lambda(eta, epsilon)
    costs = hinge_costs(scores, margin, symmetric)
    hardest = sum(cost.max(dim=1).values for cost in costs)
    every = sum(cost.sum(dim=1) for cost in costs)
    return (weight * hardest + (1.0 - weight) * every).mean()


class WELoss(nn.Module):
    """J_WE with ε from ``forward``'s ``epoch`` or ``step`` (``schedule``), ε = counter + 1; see module doc."""

    DEFAULTS: ClassVar[dict[str, Any]] = dict(SPEC.defaults)

    def __init__(self, margin: float = 0.2, eta: float = 0.0, schedule: str = "epoch", symmetric: bool = True) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        if not 0 <= eta <= 1:
            raise ValueError(f"eta must be in [0, 1], got {eta}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
        self.margin = float(margin)
        self.eta = float(eta)
        self.schedule = schedule
        self.symmetric = bool(symmetric)

    def epsilon(self, *, epoch: int = 0, step: int = 0) -> int:
        """ε for the 0-based ``epoch`` / ``step`` counters: the chosen counter + 1."""
        counter = epoch if self.schedule == "epoch" else step
        if counter < 0:
            raise ValueError(f"{self.schedule} must be >= 0, got {counter}")
        return counter + 1

    def weight(self, *, epoch: int = 0, step: int = 0) -> float:
        """λ, the weight of J_MAX, at this epoch / step."""
        return we_lambda(self.eta, self.epsilon(epoch=epoch, step=step))

    def forward(self, scores: Tensor, *, epoch: int = 0, step: int = 0) -> Tensor:
        """Scalar loss averaged over the batch's pairs, with λ from the 0-based ``epoch`` or ``step``."""
        return we_loss(scores, self.margin, self.eta, self.epsilon(epoch=epoch, step=step), symmetric=self.symmetric)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, eta={self.eta}, schedule={self.schedule!r}, symmetric={self.symmetric}"
