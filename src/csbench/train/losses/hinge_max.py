"""Contrastive hinge loss on the hardest in-batch negative, J_MAX (COBE section III-A, eq. 3; VSE++).

Direction: bidirectional, as eq. 3 is written: for the aligned pair (query q, code c), the largest hinge
over contrastive queries q' (code as anchor, column ``i`` of ``scores``) plus the largest hinge over
contrastive codes c' (query as anchor, row ``i``), each ``[α − s(positive) + s(negative)]_+``.
``symmetric=False`` keeps only the query → code term. The gradient of each term reaches only its hardest
negative (and the positive), which is the point of the loss: "calculating gradients from the larger hinge
value" (section III-A).

Reduction: the two directions are summed per pair as in eq. 3; the per-pair values are averaged over the
batch's B pairs (the paper leaves the batch reduction open; the authors' code sums, B times our value).
"""

from __future__ import annotations

from typing import Any, ClassVar

from torch import Tensor, nn

from csbench.train.losses.hinge_sum import hinge_costs


def hinge_max_loss(scores: Tensor, margin: float = 0.2, *, symmetric: bool = True) -> Tensor:
    """J_MAX (eq. 3): per pair, the hinge of the hardest in-batch negative, in both directions when
    ``symmetric``; then the mean over the B pairs. 0 when B = 1 (no negatives).

    The max is taken over hinges that are >= 0 with the positive masked to 0, so a pair whose negatives
    all respect the margin contributes 0, as does a batch of one.
    """
    per_pair = sum(cost.max(dim=1).values for cost in hinge_costs(scores, margin, symmetric))
    return per_pair.mean()


class HingeMaxLoss(nn.Module):
    """Contrastive hinge loss on each pair's hardest in-batch negative; see :func:`hinge_max_loss`."""

    DEFAULTS: ClassVar[dict[str, Any]] = {"margin": 0.2, "symmetric": True}

    def __init__(self, margin: float = 0.2, symmetric: bool = True) -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = float(margin)
        self.symmetric = bool(symmetric)

    def forward(self, scores: Tensor, *, epoch: int = 0, step: int = 0) -> Tensor:
        """Scalar loss, averaged over the batch's pairs; ``epoch`` and ``step`` are not used."""
        return hinge_max_loss(scores, self.margin, symmetric=self.symmetric)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, symmetric={self.symmetric}"
