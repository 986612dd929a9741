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
(:data:`NLPAUG_PARAMS`):

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
"""

from __future__ import annotations

import hashlib
import math
import numbers
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from csbench.perturbations.tokens import SpacedTokenizer, tokenize
from csbench.registry import Registry, UnknownNameError

RATIO_DECIMALS = 6
DEFAULT_RATIOS = tuple(round(0.05 * i, 2) for i in range(11))  # 0.0 .. 0.5 (COBE section II-C)
QUESTION_RATIO = 1.0  # the one ratio at which ratio-free perturbations are evaluated (see ratios_for)
QUESTION_PREFIX, QUESTION_SUFFIX = "How to ", "?"
WORD_SHARE = 0.3  # character perturbations work on 30 % of the words

Applier = Callable[[str], str]


@dataclass(frozen=True)
class Perturbation:
    """A registered perturbation: ``build(ratio, rng)`` returns the text -> text function that
    :func:`perturb` applies to each query after reseeding ``rng`` for it."""

    name: str
    description: str
    level: str  # "char" | "word" | "sentence"
    has_ratio: bool  # False: the ratio only switches the perturbation on (> 0) or off (0)
    build: Callable[[float, random.Random], Applier]  # (ratio, generator reseeded per query) -> text -> text


PERTURBATIONS: Registry[Perturbation] = Registry("perturbation")

# nlpaug class and keyword arguments per perturbation; the ratio goes to the keyword in `ratio_kw`.
NLPAUG_PARAMS: dict[str, dict[str, Any]] = {
    "replace": {
        "cls": "nlpaug.augmenter.char.RandomCharAug",
        "kwargs": {"action": "substitute", "aug_word_p": WORD_SHARE, "aug_word_max": None, "aug_char_max": None},
        "ratio_kw": "aug_char_p",
    },
    "noise": {
        "cls": "nlpaug.augmenter.char.RandomCharAug",
        "kwargs": {"action": "insert", "aug_word_p": WORD_SHARE, "aug_word_max": None, "aug_char_max": None},
        "ratio_kw": "aug_char_p",
    },
    "typo": {
        "cls": "nlpaug.augmenter.char.KeyboardAug",
        "kwargs": {"aug_word_p": WORD_SHARE, "aug_word_max": None, "aug_char_max": None},
        "ratio_kw": "aug_char_p",
    },
    "synonym": {
        "cls": "nlpaug.augmenter.word.SynonymAug",
        "kwargs": {"aug_src": "wordnet", "aug_max": None},
        "ratio_kw": "aug_p",
    },
    "swap": {
        "cls": "nlpaug.augmenter.word.RandomWordAug",
        "kwargs": {"action": "swap", "aug_max": None},
        "ratio_kw": "aug_p",
    },
}


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


# ---------------------------------------------------------------------------------- perturbations


def _flippable(char: str) -> bool:
    swapped = char.swapcase()
    return swapped != char and len(swapped) == 1


def flip_case(text: str, ratio: float, rng: random.Random) -> str:
    """Flip the case of ``round(ratio · C)`` (halves up) of the ``C`` characters of ``text`` whose
    case can be flipped one-to-one, chosen uniformly by ``rng``."""
    positions = [i for i, c in enumerate(text) if _flippable(c)]
    count = min(len(positions), math.floor(ratio * len(positions) + 0.5 + 1e-9))
    chosen = set(rng.sample(positions, count))
    return "".join(c.swapcase() if i in chosen else c for i, c in enumerate(text))


def make_question(text: str) -> str:
    """``"How to " + text + "?"`` (COBE's question transformation)."""
    return f"{QUESTION_PREFIX}{text}{QUESTION_SUFFIX}"


def _import(path: str) -> type:
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def make_augmenter(name: str, ratio: float, tokenizer: SpacedTokenizer | None = None) -> Any:
    """A new nlpaug augmenter for perturbation ``name`` at ``ratio`` with csbench's parameters
    (:data:`NLPAUG_PARAMS`); with ``tokenizer``, it tokenises through it (spacing kept). The
    ``synonym`` augmenter reads the offline WordNet (:func:`.wordnet.ensure_wordnet`) and tags with
    :func:`.wordnet.wordnet_pos_tag`. Randomness is nlpaug's (global ``random``) until
    :func:`seed_augmenter` gives it a generator."""
    if name not in NLPAUG_PARAMS:
        raise ValueError(f"{name!r} is not an nlpaug perturbation; those are {', '.join(NLPAUG_PARAMS)}")
    params = NLPAUG_PARAMS[name]
    kwargs = {**params["kwargs"], params["ratio_kw"]: check_ratio(ratio)}
    if tokenizer is not None:
        kwargs.update(tokenizer=tokenizer.tokenize, reverse_tokenizer=tokenizer.detokenize)
    if name == "typo":
        augmenter = _import(params["cls"])(**kwargs)
        fix_keyboard(augmenter.model.model)
        return augmenter
    if name != "synonym":
        return _import(params["cls"])(**kwargs)
    from csbench.perturbations.wordnet import ensure_wordnet, no_downloads, wordnet_pos_tag

    ensure_wordnet()
    with no_downloads():
        augmenter = _import(params["cls"])(**kwargs)
    augmenter.model.pos_tag = wordnet_pos_tag  # instead of nltk.pos_tag (a classmethod of nlpaug's WordNet)
    return augmenter


# nlpaug 1.1.11's res/char/keyboard/en.json lists " t" among the neighbours of "u", where "y" is missing.
KEYBOARD_FIXES = {" t": "y", " T": "Y"}


def fix_keyboard(model: dict[str, list[str]]) -> dict[str, list[str]]:
    """Correct nlpaug's QWERTY neighbour map in place so every neighbour is one character:
    :data:`KEYBOARD_FIXES` (``u``/``U`` -> ``y``/``Y`` instead of ``" t"``/``" T"``, which split
    the word), any other multi-character value dropped; values stay sorted and distinct."""
    for key, values in model.items():
        if any(len(v) != 1 for v in values):
            fixed = {KEYBOARD_FIXES.get(v, v) for v in values}
            model[key] = sorted(v for v in fixed if len(v) == 1 and v != key)
    return model


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


def _register(name: str, description: str, level: str, has_ratio: bool, build: Callable) -> None:
    PERTURBATIONS.register(name, Perturbation(name, description, level, has_ratio, build))


_register(
    "case",
    "flip the case of n of the case-flippable characters",
    "char",
    True,
    lambda ratio, rng: lambda text: flip_case(text, ratio, rng),
)
_register("replace", "random character substitution (n of the characters in 30% of the words)", "char", True,
          _nlpaug_builder("replace"))  # fmt: skip
_register("noise", "random character insertion (n · length characters in 30% of the words)", "char", True,
          _nlpaug_builder("noise"))  # fmt: skip
_register("typo", "keyboard-neighbour substitution (n of the characters in 30% of the words)", "char", True,
          _nlpaug_builder("typo"))  # fmt: skip
_register("synonym", "replace up to n of the words with WordNet synonyms", "word", True, _nlpaug_builder("synonym"))
_register("swap", "swap n of the words with a neighbour", "word", True, _nlpaug_builder("swap"))
_register("question", 'prefix "How to " and suffix "?" (no ratio)', "sentence", False,
          lambda ratio, rng: make_question)  # fmt: skip


# ------------------------------------------------------------------------------------------ running


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
    with _guard(perturbation)():
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


def _guard(perturbation: str) -> Callable:
    if perturbation == "synonym":
        from csbench.perturbations.wordnet import no_downloads

        return no_downloads
    import contextlib

    return contextlib.nullcontext


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
    "seed_augmenter",
    "trace_perturb",
]
