"""Perturbing queries: each with its own generator, seeded from (seed, perturbation, ratio, query id)."""

from __future__ import annotations

import numbers
import random
from collections.abc import Sequence
from dataclasses import dataclass

from csbench.perturbations.augmenters import NlpaugApplier
from csbench.perturbations.base import check_ratio, get_perturbation, query_seed
from csbench.perturbations.tokens import tokenize


@dataclass(frozen=True)
class Traced:
    """One perturbed query with nlpaug's tokens before and after (for nlpaug perturbations, one
    output token per input token; for ``case`` and ``question`` the tokens of the output text)."""

    text: str
    tokens: tuple[str, ...]
    perturbed_tokens: tuple[str, ...]


def _run(
    queries: Sequence[str], ids: Sequence[str], perturbation: str, ratio: float, seed: int, trace: bool
) -> list[str] | list[Traced]:
    """Validate, then perturb each query with its own seed; ``Traced`` items when ``trace``."""
    spec = get_perturbation(perturbation)
    ratio = check_ratio(ratio)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, not {seed!r}")
    if len(queries) != len(ids):
        raise ValueError(f"{len(queries)} queries but {len(ids)} ids")
    if ratio == 0.0 or not queries:
        return [Traced(q, tuple(tokenize(q)), tuple(tokenize(q))) for q in queries] if trace else list(queries)
    rng = random.Random()
    apply = spec.build(ratio, rng)
    tokenizer = apply.tokenizer if isinstance(apply, NlpaugApplier) else None
    out: list = []
    with spec.guard():
        for query, query_id in zip(queries, ids, strict=True):
            rng.seed(query_seed(seed, perturbation, ratio, str(query_id)))
            text = apply(query)
            if not trace:
                out.append(text)
            elif tokenizer is not None and tokenizer.tokens:
                out.append(Traced(text, tuple(tokenizer.tokens), tuple(tokenizer.augmented)))
            else:
                out.append(Traced(text, tuple(tokenize(query)), tuple(tokenize(text))))
    return out


def trace_perturb(
    queries: Sequence[str], ids: Sequence[str], perturbation: str, ratio: float, seed: int
) -> list[Traced]:
    """:func:`perturb`, also returning each query's tokens before and after."""
    return _run(queries, ids, perturbation, ratio, seed, trace=True)  # type: ignore[return-value]


def perturb(queries: Sequence[str], ids: Sequence[str], perturbation: str, ratio: float, seed: int) -> list[str]:
    """Perturb each query (module docstring) at noise ratio ``ratio`` in [0, 1].

    Deterministic per ``(seed, perturbation, ratio, query id)``: a query's result does not depend
    on the other queries, their order or earlier calls. ``ratio == 0`` returns the queries
    unchanged. ``ValueError`` for an unknown perturbation, a ratio outside [0, 1], a non-integer
    seed or ``len(ids) != len(queries)``. The ``synonym`` perturbation needs WordNet offline
    (:func:`.wordnet.ensure_wordnet` raises with install instructions when it is missing)."""
    return _run(queries, ids, perturbation, ratio, seed, trace=False)  # type: ignore[return-value]
