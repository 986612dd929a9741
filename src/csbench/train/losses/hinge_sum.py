"""Contrastive hinge loss summed over all in-batch negatives, J_SUM (COBE section III-A, eq. 2).

Direction: bidirectional, as eq. 2 is written. For the aligned pair (query q, code c) it has two sums,
one over contrastive queries q' with the code as anchor, ``Σ_q' [α − s(c, q) + s(c, q')]``, and one over
contrastive codes c' with the query as anchor, ``Σ_c' [α − s(q, c) + s(q, c')]``. On the in-batch matrix
``scores[i, j] = s(query_i, code_j)`` those are column ``i`` and row ``i`` without the diagonal. The
brackets are hinges, ``[x] = max(0, x)`` ("will not propagate gradients when the hinge value is below
the margin"). ``symmetric=False`` keeps only the query → code row term, for ablations.

Reduction: per pair, the hinges are *summed* over the negatives and over the two directions, as in the
paper's definition (so the loss grows with the batch size). Eq. 2 is a per-pair loss and the paper does
not say how pairs are combined; we average over the batch's B pairs. The authors' implementation
(jwehrmann/retrieval.pytorch, ``ContrastiveLoss``) sums over the batch instead, i.e. B times our value.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csbench.train.losses.ce import check_scores
from csbench.train.losses.spec import HINGE_DEFAULTS, HINGE_PARAMS, loss_spec

SPEC = loss_spec(
    name="hinge_sum",
    description="bidirectional hinge summed over all in-batch negatives, margin α (eq. 2)",
    factory="HingeSumLoss",
    defaults=HINGE_DEFAULTS,
    params=HINGE_PARAMS,
)


def hinge_costs(scores: Tensor, margin: float, symmetric: bool = True) -> list[Tensor]:
    """The hinge terms of eqs. 2–3 as (B, B) matrices, one per direction, row ``i`` for pair ``i``.

    ``q2c[i, j] = max(0, margin − scores[i, i] + scores[i, j])`` (query i against code j) and, when
    ``symmetric``, ``c2q[i, j] = max(0, margin − scores[i, i] + scores[j, i])`` (code i against query j).
    The diagonal, which is the positive and not a negative, is set to 0 in both.
    """
    check_scores(scores)
    positives = scores.diagonal().unsqueeze(1)  # (B, 1): s(q_i, c_i) for row i
    off_diagonal = ~torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    directions = [scores, scores.T] if symmetric else [scores]
    return [(margin - positives + other).clamp(min=0) * off_diagonal for other in directions]


def hinge_sum_loss(scores: Tensor, margin: float = 0.2, *, symmetric: bool = True) -> Tensor:
    """J_SUM (eq. 2): per pair, the sum of the hinges over every in-batch negative, in both directions
    when ``symmetric``; then the mean over the B pairs. 0 when B = 1 (no negatives)."""
    per_pair = sum(cost.sum(dim=1) for cost in hinge_costs(scores, margin, symmetric))
    return per_pair.mean()


class HingeLoss(nn.Module):
    """A contrastive hinge loss module: ``margin`` and ``symmetric`` around a pure core
    (``hinge_sum_loss`` here, ``hinge_max_loss`` in hinge_max.py)."""

    DEFAULTS: ClassVar[dict[str, Any]] = dict(HINGE_DEFAULTS)
    core = staticmethod(hinge_sum_loss)

    def __init__(self, margin: float = 0.2, symmetric: bool = True) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.symmetric = bool(symmetric)

    def forward(self, scores: Tensor, *, epoch: int = 0, step: int = 0) -> Tensor:
        """Scalar loss, averaged over the batch's pairs; ``epoch`` and ``step`` are not used."""
        return self.core(scores, self.margin, symmetric=self.symmetric)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, symmetric={self.symmetric}"


class HingeSumLoss(HingeLoss):
    """Contrastive hinge loss over all in-batch negatives; see :func:`hinge_sum_loss`."""

    core = staticmethod(hinge_sum_loss)
