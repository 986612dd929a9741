"""COBE's training losses (section III-A), registered by name; :func:`make_loss` builds one from params.

Every loss is an ``nn.Module`` whose ``forward(scores, *, epoch=0, step=0)`` takes the in-batch similarity
matrix ``scores[i, j] = s(query_i, code_j)`` of shape (B, B), positives on the diagonal, and returns a
scalar averaged over the batch's B query-code pairs.

One module per loss, which declares it (``SPEC = loss_spec(...)``, :mod:`.spec`) beside its class, and one
line per loss in :data:`LOSS_MODULES` below: that line is the registration. This package imports no torch
(``csbench validate`` reads the declarations from the modules' sources); the classes and functions of the
loss modules are importable from here as before, loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from csbench.train.losses.spec import LOSSES, LossSpec, loss_spec, make_loss, register_module

# The losses, in registration order: one module of this package each, one line each.
LOSS_MODULES = (
    "ce",
    "hinge_sum",
    "hinge_max",
    "we",
)
for _module in LOSS_MODULES:
    register_module(f"{__name__}.{_module}")

# what `from csbench.train.losses import X` finds in the loss modules (imported, with torch, on first use)
_LAZY = {
    "CELoss": "ce",
    "ce_loss": "ce",
    "HingeSumLoss": "hinge_sum",
    "hinge_sum_loss": "hinge_sum",
    "HingeMaxLoss": "hinge_max",
    "hinge_max_loss": "hinge_max",
    "WELoss": "we",
    "we_lambda": "we",
    "we_loss": "we",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LOSSES",
    "LOSS_MODULES",
    "CELoss",
    "HingeMaxLoss",
    "HingeSumLoss",
    "LossSpec",
    "WELoss",
    "ce_loss",
    "hinge_max_loss",
    "hinge_sum_loss",
    "loss_spec",
    "make_loss",
    "we_lambda",
    "we_loss",
]
