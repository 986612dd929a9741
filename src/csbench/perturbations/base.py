"""What a query perturbation is (:class:`Perturbation`), its registry, and the ratio and seed rules.

Each perturbation registers itself where it is defined, with :func:`register` (or
``csbench.perturbations.augmenters.register_nlpaug`` for one nlpaug runs): ``char.py``, ``word.py``,
``sentence.py``; ``csbench/perturbations/__init__.py`` imports each module once: that import is the
registration.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import random
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from csbench.registry import Registry, UnknownNameError

RATIO_DECIMALS = 6
DEFAULT_RATIOS = tuple(round(0.05 * i, 2) for i in range(11))  # 0.0 .. 0.5 (COBE section II-C)
QUESTION_RATIO = 1.0  # the one ratio at which ratio-free perturbations are evaluated (see ratios_for)
WORD_SHARE = 0.3  # character perturbations work on 30 % of the words

Applier = Callable[[str], str]


@dataclass(frozen=True)
class Perturbation:
    """A registered perturbation: ``build(ratio, rng)`` returns the text -> text function that
    ``perturb`` applies to each query after reseeding ``rng`` for it, inside ``guard()``."""

    name: str
    description: str
    level: str  # "char" | "word" | "sentence"
    has_ratio: bool  # False: the ratio only switches the perturbation on (> 0) or off (0)
    build: Callable[[float, random.Random], Applier]  # (ratio, generator reseeded per query) -> text -> text
    # held while the queries are perturbed (synonym: NLTK may not download anything)
    guard: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext


PERTURBATIONS: Registry[Perturbation] = Registry("perturbation")


def register(perturbation: Perturbation) -> Perturbation:
    """Register a perturbation beside the code that implements it; returns it."""
    return PERTURBATIONS.add(perturbation)


# ------------------------------------------------------------------------------------ validation


def get_perturbation(name: str) -> Perturbation:
    """The registered perturbation ``name``; ``ValueError`` listing the valid names otherwise."""
    try:
        return PERTURBATIONS.get(name)
    except UnknownNameError as err:
        raise ValueError(err.message) from None


def check_ratio(ratio: float) -> float:
    """``ratio`` as a float rounded to :data:`RATIO_DECIMALS`; ``ValueError`` unless it is a real
    number in [0, 1]."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not math.isfinite(float(ratio)):
        raise ValueError(f"noise ratio must be a number in [0, 1], not {ratio!r}")
    if not 0.0 <= float(ratio) <= 1.0:
        raise ValueError(f"noise ratio must be in [0, 1], not {ratio!r}")
    return round(float(ratio), RATIO_DECIMALS)


def query_seed(seed: int, perturbation: str, ratio: float, query_id: str) -> int:
    """The 64-bit seed of one query's perturbation: BLAKE2b of the seed, perturbation name, ratio
    (rounded, fixed 6 decimals) and query id. Stable across processes, platforms and Python
    versions (no ``hash()``)."""
    key = f"{int(seed)}\x1f{perturbation}\x1f{check_ratio(ratio):.{RATIO_DECIMALS}f}\x1f{query_id}"
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


def ratios_for(perturbation: str, ratios: Sequence[float] = DEFAULT_RATIOS) -> tuple[float, ...]:
    """The ratios to evaluate ``perturbation`` at: the sorted distinct ``ratios`` (rounded), or
    ``(QUESTION_RATIO,)`` for a perturbation without a ratio (``question``: one point)."""
    if not get_perturbation(perturbation).has_ratio:
        return (QUESTION_RATIO,)
    return tuple(sorted({check_ratio(r) for r in ratios}))
