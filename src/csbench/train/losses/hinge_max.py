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

from torch import Tensor

from csbench.train.losses.hinge_sum import HingeLoss, hinge_costs
from csbench.train.losses.spec import HINGE_DEFAULTS, HINGE_PARAMS, loss_spec

SPEC = loss_spec(
    name="hinge_max",
    description="bidirectional hinge on the hardest in-batch negative, margin α"
    " (eq. 3, VSE++)",  # (J_SUM's twin: the hardest negative instead of all)
    factory="HingeMaxLoss",
    defaults=HINGE_DEFAULTS,
    params=HINGE_PARAMS,
)


def hinge_max_loss(scores: Tensor, margin: float = 0.2, *, symmetric: bool = True) -> Tensor:
    """J_MAX (eq. 3): per pair, the hinge of the hardest in-batch negative, in both directions when
    ``symmetric``; then the mean over the B pairs. 0 when B = 1 (no negatives).

    The max is taken over hinges that are >= 0 with the positive masked to 0, so a pair whose negatives
    all respect the margin contributes 0, as does a batch of one.
    """
    per_pair = sum(cost.max(dim=1).values for cost in hinge_costs(scores, margin, symmetric))
    return per_pair.mean()


class HingeMaxLoss(HingeLoss):
    """Contrastive hinge loss on each pair's hardest in-batch negative; see :func:`hinge_max_loss`."""

    core = staticmethod(hinge_max_loss)
