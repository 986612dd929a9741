"""Early stopping on a validation metric that should grow (COBE: MRR, patience 6 validations)."""

from __future__ import annotations

from typing import Any


class EarlyStopping:
    """Track the best validation value and count validations without a gain.

    A validation *gains* when its value exceeds the best so far by more than ``min_delta`` (a tie is no
    gain, so the first best checkpoint is kept). Training should stop once ``patience`` validations in
    a row brought no gain; ``patience=None`` never stops. The state is plain JSON-serialisable data
    (``state_dict`` / ``load_state_dict``) so a resumed run continues the count.
    """

    def __init__(self, patience: int | None = 6, min_delta: float = 0.0) -> None:
        if patience is not None and patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {patience}")
        if min_delta < 0:
            raise ValueError(f"min_delta must be >= 0, got {min_delta}")
        self.patience = patience
        self.min_delta = min_delta
        self.best: float | None = None
        self.best_step: int | None = None
        self.bad_validations = 0

    def update(self, value: float, step: int) -> bool:
        """Record one validation at optimizer step ``step``; True when it is a new best."""
        if self.best is None or value > self.best + self.min_delta:
            self.best, self.best_step, self.bad_validations = float(value), int(step), 0
            return True
        self.bad_validations += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.bad_validations >= self.patience

    def state_dict(self) -> dict[str, Any]:
        return {
            "patience": self.patience,
            "min_delta": self.min_delta,
            "best": self.best,
            "best_step": self.best_step,
            "bad_validations": self.bad_validations,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.patience = state["patience"]
        self.min_delta = state["min_delta"]
        self.best = state["best"]
        self.best_step = state["best_step"]
        self.bad_validations = state["bad_validations"]

    def __repr__(self) -> str:
        return (
            f"EarlyStopping(patience={self.patience}, best={self.best}, best_step={self.best_step}, "
            f"bad_validations={self.bad_validations})"
        )
