"""Sentence-level perturbations: ``question`` (COBE's question transformation; no ratio)."""

from __future__ import annotations

from csbench.perturbations.base import Perturbation, register

QUESTION_PREFIX, QUESTION_SUFFIX = "How to ", "?"


def make_question(text: str) -> str:
    """``"How to " + text + "?"`` (COBE's question transformation)."""
    return f"{QUESTION_PREFIX}{text}{QUESTION_SUFFIX}"


register(
    Perturbation(
        "question", 'prefix "How to " and suffix "?" (no ratio)', "sentence", False, lambda ratio, rng: make_question
    )
)
