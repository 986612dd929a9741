"""Query perturbations (SPEC "Query perturbations"; COBE section II-B): registered by name, applied
to the query text only, at a noise ratio ``n`` in [0, 1].

============ ======== =================================================================================
name         level    definition
============ ======== =================================================================================
``case``     char     flip the case of ``round(n · C)`` of the query's ``C`` case-flippable characters
``replace``  char     nlpaug ``RandomCharAug(action="substitute")``: in 30 % of the words, replace n of
                      the characters by random ones (letters, digits, ``!@#$%^&*()_+``)
``noise``    char     nlpaug ``RandomCharAug(action="insert")``: in 30 % of the words, insert
                      n · length random characters
``typo``     char     nlpaug ``KeyboardAug``: in 30 % of the words, replace n of the characters by a
                      QWERTY neighbour (may be a digit, symbol or the other case; :func:`fix_keyboard`)
``synonym``  word     nlpaug ``SynonymAug(aug_src="wordnet")``: replace up to n of the words by a
                      WordNet synonym (a multi-word lemma such as ``round_eyed`` becomes ``round eyed``)
``swap``     word     nlpaug ``RandomWordAug(action="swap")``: n of the words each swap places with a
                      neighbour
``question`` sentence ``"How to " + query + "?"``; no ratio (any ratio > 0 applies it)
============ ======== =================================================================================

How nlpaug counts (version 1.1.11, read from its source), with csbench's parameters
(:data:`NLPAUG_PARAMS`, from the registrations in ``char.py`` and ``word.py``):

* Tokens are runs of word characters and single punctuation characters (``os.path`` is three
  tokens). "Words" in the counts below are these tokens, punctuation included.
* Character perturbations pick ``k = max(1, ceil(0.3 · T))`` of the query's ``T`` tokens, but only
  among tokens of at least 4 characters (nlpaug's ``min_char=4``): shorter words are never touched,
  and ``k`` shrinks to the number of such tokens. In each picked token of length ``L`` they change
  ``max(1, ceil(n · L))`` characters (``typo``: only among characters on its keyboard map).
  ``replace`` may draw the original character again (probability 1/74 for one of its 74 candidates).
* ``synonym`` picks ``max(1, ceil(n · T))`` tokens among those that are not punctuation and not
  tagged ``DT``; a picked token without a WordNet synonym stays as it is (hence "up to").
* ``swap`` picks ``max(1, ceil(n · T))`` non-punctuation tokens and swaps each, in turn, with its
  left or right neighbour (the first token always with the second); a later swap can undo an
  earlier one. A word moving to or from the front is re-capitalised.
* nlpaug caps every count at 10 by default (``aug_word_max``, ``aug_char_max``, ``aug_max``);
  csbench lifts the caps so long queries get the SPEC's shares too. The minimum of 1 stays, so any
  ratio > 0 changes at least one character / word when there is one to change.

Differences from calling nlpaug naively:

* the text between tokens is kept exactly (nlpaug's own detokeniser rewrites ``python's C++``
  as ``python ' s C + +``; see :mod:`.tokens`), and so are leading and trailing whitespace;
* ``typo``'s keyboard map is corrected: nlpaug's lists ``" t"`` as a neighbour of ``u``, which
  splits words (``return`` -> ``ret trn``); :func:`fix_keyboard`;
* parts of speech for ``synonym`` come from an offline WordNet-based tagger
  (:func:`.wordnet.wordnet_pos_tag`) instead of NLTK's perceptron tagger, which cannot be
  downloaded here;
* randomness is a private ``random.Random`` per query, seeded from ``(seed, perturbation, ratio,
  query id)`` (:func:`query_seed`) and handed to the augmenter's ``sample`` (nlpaug's only source
  of randomness on these code paths). Global ``random`` / ``numpy`` state is neither used nor
  changed, so a query's perturbation does not depend on the batch it is in or on its position;
  with the same augmenter, the result equals nlpaug run after ``random.seed(query_seed(...))``.

Ratio 0 returns every query unchanged. Ratios are rounded to 6 decimals first (``0.15000000000000002``
and ``0.15`` are the same ratio, in the seed and in nlpaug's counts).

Layout: ``base.py`` (what a perturbation is, the registry ``PERTURBATIONS``, ratios and seeds),
``augmenters.py`` (nlpaug augmenters, seeded, spacing kept), ``engine.py`` (``perturb``), and the
perturbations, each registered beside its code: ``char.py``, ``word.py``, ``sentence.py``. Adding a
perturbation: a module here that calls ``base.register`` (or ``augmenters.register_nlpaug``), plus
its import line below.
"""

from __future__ import annotations

# The perturbations, in registration order: each module registers its own, so its import is the
# registration. One line per module.
# isort: off
from csbench.perturbations import char  # noqa: F401  case, replace, noise, typo
from csbench.perturbations import word  # noqa: F401  synonym, swap
from csbench.perturbations import sentence  # noqa: F401  question
# isort: on

from csbench.perturbations.augmenters import NLPAUG_PARAMS, NlpaugApplier, make_augmenter, seed_augmenter
from csbench.perturbations.base import (
    DEFAULT_RATIOS,
    PERTURBATIONS,
    QUESTION_RATIO,
    Perturbation,
    check_ratio,
    get_perturbation,
    query_seed,
    ratios_for,
    register,
)
from csbench.perturbations.char import fix_keyboard, flip_case
from csbench.perturbations.engine import Traced, perturb, trace_perturb
from csbench.perturbations.sentence import QUESTION_PREFIX, QUESTION_SUFFIX, make_question

__all__ = [
    "DEFAULT_RATIOS",
    "NLPAUG_PARAMS",
    "PERTURBATIONS",
    "QUESTION_PREFIX",
    "QUESTION_RATIO",
    "QUESTION_SUFFIX",
    "NlpaugApplier",
    "Perturbation",
    "Traced",
    "check_ratio",
    "fix_keyboard",
    "flip_case",
    "get_perturbation",
    "make_augmenter",
    "make_question",
    "perturb",
    "query_seed",
    "ratios_for",
    "register",
    "seed_augmenter",
    "trace_perturb",
]
