"""The parameters of the training losses as plain data: defaults and declared ranges (no torch).

``csbench validate`` checks ``loss_params.<loss>`` against these (``csbench.params``) before any job
runs; the loss registry (``csbench.train.losses``, which imports torch) builds each loss from the
same defaults, and tests/test_config_types.py keeps them equal to the loss classes' own.
"""

from __future__ import annotations

from typing import Any

# loss -> parameter -> default (COBE section III-A)
LOSS_DEFAULTS: dict[str, dict[str, Any]] = {
    "ce": {"temperature": 1.0},
    "hinge_sum": {"margin": 0.2, "symmetric": True},
    "hinge_max": {"margin": 0.2, "symmetric": True},
    "we": {"margin": 0.2, "eta": 0.0, "schedule": "epoch", "symmetric": True},
}

_MARGIN = {"minimum": 0, "description": "margin α of the hinge"}
_SYMMETRIC = {"description": "also rank queries for each code (both directions of the hinge)"}

# loss -> parameter -> JSON-schema keywords beyond the type of its default (csbench.params)
LOSS_PARAMS: dict[str, dict[str, dict[str, Any]]] = {
    "ce": {"temperature": {"exclusiveMinimum": 0, "description": "softmax temperature τ (eq. 1)"}},
    "hinge_sum": {"margin": _MARGIN, "symmetric": _SYMMETRIC},
    "hinge_max": {"margin": _MARGIN, "symmetric": _SYMMETRIC},
    "we": {
        "margin": _MARGIN,
        "eta": {"minimum": 0, "maximum": 1, "description": "η of λ = 1 − η^ε (eq. 5)"},
        "schedule": {"enum": ["epoch", "step"], "description": "what ε counts"},
        "symmetric": _SYMMETRIC,
    },
}
