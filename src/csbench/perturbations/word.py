"""Word-level perturbations, both run by nlpaug: ``synonym`` (offline WordNet, :mod:`.wordnet`) and ``swap``."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from csbench.perturbations.augmenters import NlpaugSpec, register_nlpaug


def _ensure_wordnet() -> None:
    from csbench.perturbations.wordnet import ensure_wordnet

    ensure_wordnet()


def _no_downloads() -> AbstractContextManager[None]:
    from csbench.perturbations.wordnet import no_downloads

    return no_downloads()


def _offline_tagger(augmenter: Any) -> None:
    """Tag parts of speech with :func:`.wordnet.wordnet_pos_tag` instead of ``nltk.pos_tag`` (a
    classmethod of nlpaug's WordNet model), whose perceptron tagger cannot be downloaded here."""
    from csbench.perturbations.wordnet import wordnet_pos_tag

    augmenter.model.pos_tag = wordnet_pos_tag


register_nlpaug(
    "synonym",
    "replace up to n of the words with WordNet synonyms",
    "word",
    NlpaugSpec(
        "nlpaug.augmenter.word.SynonymAug",
        {"aug_src": "wordnet", "aug_max": None},
        "aug_p",
        prepare=_ensure_wordnet,
        guard=_no_downloads,
        adjust=_offline_tagger,
    ),
)
register_nlpaug(
    "swap",
    "swap n of the words with a neighbour",
    "word",
    NlpaugSpec("nlpaug.augmenter.word.RandomWordAug", {"action": "swap", "aug_max": None}, "aug_p"),
)
