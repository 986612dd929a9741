"""COBE's training losses (section III-A), registered by name; :func:`make_loss` builds one from params.

Every loss is an ``nn.Module`` whose ``forward(scores, *, epoch=0, step=0)`` takes the in-batch similarity
matrix ``scores[i, j] = s(query_i, code_j)`` of shape (B, B), positives on the diagonal, and returns a
scalar averaged over the batch's B query-code pairs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from csbench.params import check_params
from csbench.registry import Registry
from csbench.train.loss_params import LOSS_DEFAULTS, LOSS_PARAMS
from csbench.train.losses.ce import CELoss, ce_loss
from csbench.train.losses.hinge_max import HingeMaxLoss, hinge_max_loss
from csbench.train.losses.hinge_sum import HingeSumLoss, hinge_sum_loss
from csbench.train.losses.we import WELoss, we_lambda, we_loss

__all__ = [
    "LOSSES",
    "CELoss",
    "HingeMaxLoss",
    "HingeSumLoss",
    "LossSpec",
    "WELoss",
    "ce_loss",
    "hinge_max_loss",
    "hinge_sum_loss",
    "make_loss",
    "we_lambda",
    "we_loss",
]


@dataclass(frozen=True)
class LossSpec:
    name: str
    description: str
    factory: Callable[..., nn.Module]  # keyword params -> loss module
    defaults: dict[str, Any]
    # JSON-schema keywords per parameter beyond its default's type (csbench.params): ranges, values
    params: dict[str, dict[str, Any]] = field(default_factory=dict)


# Defaults and declared ranges come from csbench.train.loss_params (plain data: `csbench validate`
# checks loss_params with them without importing torch); tests keep the classes' DEFAULTS equal.
LOSSES: Registry[LossSpec] = Registry("loss")
for _name, _description, _factory in (
    ("ce", "in-batch cross-entropy over each query's row, temperature τ (eq. 1)", CELoss),
    ("hinge_sum", "bidirectional hinge summed over all in-batch negatives, margin α (eq. 2)", HingeSumLoss),
    ("hinge_max", "bidirectional hinge on the hardest in-batch negative, margin α (eq. 3, VSE++)", HingeMaxLoss),
    ("we", "λ·hinge_max + (1 − λ)·hinge_sum with λ = 1 − η^ε, ε = epoch or step (eqs. 4–5)", WELoss),
):
    LOSSES.register(
        _name, LossSpec(_name, _description, _factory, dict(LOSS_DEFAULTS[_name]), dict(LOSS_PARAMS[_name]))
    )


def make_loss(name: str, params: dict[str, Any] | None = None) -> nn.Module:
    """The loss ``name`` built from its defaults overridden by ``params``.

    Raises :class:`~csbench.registry.UnknownNameError` for an unknown name (with a close match) and
    ValueError for a parameter the loss does not take, listing the valid ones, or a value of the
    wrong type or out of its range (``csbench.params``; `csbench validate` refuses them first).
    """
    spec = LOSSES.get(name)
    params = dict(params or {})
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        hints = []
        for param in unknown:
            close = difflib.get_close_matches(param, list(spec.defaults), n=1, cutoff=0.5)
            if close:
                hints.append(f"did you mean {close[0]!r} for {param!r}?")
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for loss {name!r}; "
            f"valid parameters: {', '.join(spec.defaults)}" + (f" ({' '.join(hints)})" if hints else "")
        )
    problem = check_params(params, spec.defaults, spec.params)
    if problem:
        raise ValueError(f"loss {name!r}: {problem.describe('loss_params.' + name)}")
    return spec.factory(**{**spec.defaults, **params})
