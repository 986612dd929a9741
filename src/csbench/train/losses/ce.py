"""In-batch cross-entropy with temperature (COBE section III-A, eq. 1).

Each query is a softmax classification over the batch's codes, the aligned code being the right class
("we use the similarity matrix S as prediction scores", "the i-th query w.r.t the n_c code snippet
vectors"). The loss is one-directional, query → code, as eq. 1 is written: codes are not classified
over queries. Eq. 1 as printed is garbled (``s_i / Σ_j s_ijτ``); we read it as the softmax of the
scores divided by τ, the usual meaning of a temperature that "sharpens or softens" the distribution
(τ < 1 sharpens). The per-query losses are averaged over the batch, which is what CodeBERT's
``CrossEntropyLoss`` (the paper follows CodeBERT for τ = 1) does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from csbench.train.losses.spec import loss_spec

SPEC = loss_spec(
    name="ce",
    description="in-batch cross-entropy over each query's row, temperature τ (eq. 1)",
    factory="CELoss",
    defaults={"temperature": 1.0},
    params={"temperature": {"exclusiveMinimum": 0, "description": "softmax temperature τ (eq. 1)"}},
)


def check_scores(scores: Tensor) -> None:
    """Raise ValueError unless ``scores`` is a non-empty square (B, B) floating-point matrix."""
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(
            f"scores must be the square in-batch similarity matrix (B, B) with the positives on the diagonal; "
            f"got shape {tuple(scores.shape)}"
        )
    if scores.shape[0] == 0:
        raise ValueError("scores is empty: a batch needs at least one query-code pair")
    if not scores.is_floating_point():
        raise ValueError(f"scores must be a floating-point tensor, got {scores.dtype}")


def ce_loss(scores: Tensor, temperature: float = 1.0) -> Tensor:
    """Mean over queries of ``-log softmax(scores[i] / temperature)[i]`` (eq. 1).

    ``scores[i, j]`` is ``s(query_i, code_j)``; row ``i`` is query ``i``'s logits over the batch's codes
    and the diagonal holds the positives. With B = 1 the only code is the positive and the loss is 0.
    """
    check_scores(scores)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    log_probs = torch.log_softmax(scores / temperature, dim=1)
    return -log_probs.diagonal().mean()


class CELoss(nn.Module):
    """Cross-entropy over each query's row of the in-batch similarity matrix; see :func:`ce_loss`."""

    DEFAULTS: ClassVar[dict[str, Any]] = dict(SPEC.defaults)

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def forward(self, scores: Tensor, *, epoch: int = 0, step: int = 0) -> Tensor:
        """Scalar loss, averaged over the batch's queries; ``epoch`` and ``step`` are not used."""
        return ce_loss(scores, self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"
