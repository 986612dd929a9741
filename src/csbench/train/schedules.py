"""Learning-rate schedules, registered by name: multipliers of the base lr per optimizer step.

Every schedule is a factory ``(optimizer, steps_per_epoch, total_steps, **params) -> LambdaLR``; the
lambda receives the number of optimizer steps already taken (``LambdaLR.last_epoch``), so step ``s``
trains with ``lr * factor(s)``. The multipliers are plain functions too, so they can be tested and
plotted without an optimizer.

- ``step_decay`` — COBE: lr divided by 10 every 3 epochs (``every_epochs``, ``gamma``).
- ``linear_decay`` — CodeBERT / GraphCodeBERT: linear warm-up over ``warmup_steps``, then linear decay
  to 0 at ``total_steps`` (Hugging Face's ``get_linear_schedule_with_warmup``).
- ``constant`` — the base lr throughout, after an optional linear warm-up.

The lambdas are closures, not callable objects, so ``LambdaLR.state_dict`` stores no lambda state
(``lr_lambdas: [None]``) and a checkpoint holds only counters: it loads with ``weights_only=True``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from csbench.registry import Registry

ScheduleFactory = Callable[..., LambdaLR]


def step_decay_factor(step: int, steps_per_epoch: int, every_epochs: int = 3, gamma: float = 0.1) -> float:
    """``gamma ** (epoch // every_epochs)`` for the epoch that optimizer step ``step`` (0-based) falls in."""
    epoch = step // steps_per_epoch
    return gamma ** (epoch // every_epochs)


def linear_decay_factor(step: int, total_steps: int, warmup_steps: int = 0) -> float:
    """Linear warm-up from 0 to 1 over ``warmup_steps``, then linear decay to 0 at ``total_steps``."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def constant_factor(step: int, warmup_steps: int = 0) -> float:
    """1, after a linear warm-up over ``warmup_steps``."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    return 1.0


def step_decay(
    optimizer: Optimizer, steps_per_epoch: int, total_steps: int, *, every_epochs: int = 3, gamma: float = 0.1
) -> LambdaLR:
    """COBE: the lr is multiplied by ``gamma`` (1/10) every ``every_epochs`` (3) epochs."""
    if steps_per_epoch < 1 or every_epochs < 1:
        raise ValueError(f"steps_per_epoch and every_epochs must be >= 1, got {steps_per_epoch}, {every_epochs}")

    def factor(step: int) -> float:
        return step_decay_factor(step, steps_per_epoch, every_epochs, gamma)

    return LambdaLR(optimizer, factor)


def linear_decay(optimizer: Optimizer, steps_per_epoch: int, total_steps: int, *, warmup_steps: int = 0) -> LambdaLR:
    """CodeBERT: linear warm-up over ``warmup_steps`` (default none), then linear decay to 0 at the last step."""
    if warmup_steps < 0 or total_steps < 1:
        raise ValueError(f"need warmup_steps >= 0 and total_steps >= 1, got {warmup_steps}, {total_steps}")

    def factor(step: int) -> float:
        return linear_decay_factor(step, total_steps, warmup_steps)

    return LambdaLR(optimizer, factor)


def constant(optimizer: Optimizer, steps_per_epoch: int, total_steps: int, *, warmup_steps: int = 0) -> LambdaLR:
    """The base lr on every step (after an optional linear warm-up)."""
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")

    def factor(step: int) -> float:
        return constant_factor(step, warmup_steps)

    return LambdaLR(optimizer, factor)


SCHEDULES: Registry[ScheduleFactory] = Registry("lr schedule")
for _factory in (step_decay, linear_decay, constant):
    SCHEDULES.register(_factory.__name__, _factory)


def schedule_params(name: str) -> dict[str, Any]:
    """The tunable parameters of schedule ``name`` with their defaults."""
    signature = inspect.signature(SCHEDULES.get(name))
    return {p.name: p.default for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def make_schedule(
    name: str,
    optimizer: Optimizer,
    steps_per_epoch: int,
    total_steps: int,
    params: dict[str, Any] | None = None,
) -> LambdaLR:
    """Schedule ``name`` over ``optimizer``; ``params`` override its defaults (unknown keys are an error)."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(schedule_params(name)))
    if unknown:
        valid = ", ".join(schedule_params(name)) or "none"
        raise ValueError(f"lr schedule {name!r} takes no parameter {', '.join(unknown)}; valid: {valid}")
    return SCHEDULES.get(name)(optimizer, steps_per_epoch, total_steps, **params)
