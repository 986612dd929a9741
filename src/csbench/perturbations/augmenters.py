"""Perturbations that nlpaug runs: the augmenter each is built from, seeded per query, spacing kept.

:func:`register_nlpaug` registers one (``char.py``, ``word.py``) with its nlpaug class, keyword
arguments and the keyword its ratio goes to, plus optional hooks: ``prepare`` (before the augmenter
is built), ``guard`` (a context held while it is built and while it runs) and ``adjust`` (applied to
the new augmenter).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from csbench.perturbations.base import Applier, Perturbation, check_ratio, register
from csbench.perturbations.tokens import SpacedTokenizer


@dataclass(frozen=True)
class NlpaugSpec:
    """How to build the nlpaug augmenter of one perturbation (see the module docstring)."""

    cls: str  # dotted path of the nlpaug augmenter class
    kwargs: dict[str, Any]
    ratio_kw: str  # the keyword the ratio goes to
    prepare: Callable[[], object] | None = None
    guard: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
    adjust: Callable[[Any], object] | None = None


AUGMENTERS: dict[str, NlpaugSpec] = {}
# nlpaug class and keyword arguments per perturbation; the ratio goes to the keyword in `ratio_kw`.
NLPAUG_PARAMS: dict[str, dict[str, Any]] = {}


def register_nlpaug(name: str, description: str, level: str, spec: NlpaugSpec) -> Perturbation:
    """Register the perturbation ``name`` that nlpaug runs as ``spec`` says (at every ratio)."""
    AUGMENTERS[name] = spec
    NLPAUG_PARAMS[name] = {"cls": spec.cls, "kwargs": spec.kwargs, "ratio_kw": spec.ratio_kw}
    return register(Perturbation(name, description, level, True, _nlpaug_builder(name), spec.guard))


def _import(path: str) -> type:
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def make_augmenter(name: str, ratio: float, tokenizer: SpacedTokenizer | None = None) -> Any:
    """A new nlpaug augmenter for perturbation ``name`` at ``ratio`` with csbench's parameters
    (:data:`NLPAUG_PARAMS`) and its hooks; with ``tokenizer``, it tokenises through it (spacing kept).
    Randomness is nlpaug's (global ``random``) until :func:`seed_augmenter` gives it a generator."""
    if name not in AUGMENTERS:
        raise ValueError(f"{name!r} is not an nlpaug perturbation; those are {', '.join(NLPAUG_PARAMS)}")
    spec = AUGMENTERS[name]
    kwargs = {**spec.kwargs, spec.ratio_kw: check_ratio(ratio)}
    if tokenizer is not None:
        kwargs.update(tokenizer=tokenizer.tokenize, reverse_tokenizer=tokenizer.detokenize)
    if spec.prepare is not None:
        spec.prepare()
    with spec.guard():
        augmenter = _import(spec.cls)(**kwargs)
    if spec.adjust is not None:
        spec.adjust(augmenter)
    return augmenter


def seed_augmenter(augmenter: Any, rng: random.Random) -> Any:
    """Make ``augmenter`` draw from ``rng``: nlpaug's ``Augmenter.sample`` is ``random.sample`` for
    lists; its integer branch (numpy) is not used by csbench's augmenters and raises here."""

    def sample(population: Any, num: int | None = None) -> list:
        if not isinstance(population, list):
            raise TypeError(f"csbench: {type(augmenter).__name__} sampled from a {type(population).__name__}")
        return rng.sample(population, num)

    augmenter.sample = sample
    return augmenter


class NlpaugApplier:
    """Applies one seeded nlpaug augmenter to texts, keeping their spacing (and their leading and
    trailing whitespace, which nlpaug strips). ``tokenizer`` holds the last text's tokens."""

    def __init__(self, name: str, ratio: float, rng: random.Random) -> None:
        self.tokenizer = SpacedTokenizer()
        self.augmenter = seed_augmenter(make_augmenter(name, ratio, self.tokenizer), rng)

    def __call__(self, text: str) -> str:
        self.tokenizer.tokenize("")
        core = text.strip()
        if not core:
            return text
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        return lead + self.augmenter.augment(core)[0] + trail


def _nlpaug_builder(name: str) -> Callable[[float, random.Random], Applier]:
    return lambda ratio, rng: NlpaugApplier(name, ratio, rng)
