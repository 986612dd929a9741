"""Character-level perturbations: ``case`` (csbench's own) and nlpaug's ``replace``, ``noise``, ``typo``."""

from __future__ import annotations

import math
import random

from csbench.perturbations.augmenters import NlpaugSpec, register_nlpaug
from csbench.perturbations.base import WORD_SHARE, Perturbation, register

# nlpaug lifts no cap on how many words / characters it changes (csbench.perturbations' docstring)
_UNCAPPED = {"aug_word_p": WORD_SHARE, "aug_word_max": None, "aug_char_max": None}


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


def _fix_keyboard_of(augmenter: object) -> None:
    fix_keyboard(augmenter.model.model)  # type: ignore[attr-defined]


register(
    Perturbation(
        "case",
        "flip the case of n of the case-flippable characters",
        "char",
        True,
        lambda ratio, rng: lambda text: flip_case(text, ratio, rng),
    )
)
register_nlpaug(
    "replace",
    "random character substitution (n of the characters in 30% of the words)",
    "char",
    NlpaugSpec("nlpaug.augmenter.char.RandomCharAug", {"action": "substitute", **_UNCAPPED}, "aug_char_p"),
)
register_nlpaug(
    "noise",
    "random character insertion (n · length characters in 30% of the words)",
    "char",
    NlpaugSpec("nlpaug.augmenter.char.RandomCharAug", {"action": "insert", **_UNCAPPED}, "aug_char_p"),
)
register_nlpaug(
    "typo",
    "keyboard-neighbour substitution (n of the characters in 30% of the words)",
    "char",
    NlpaugSpec("nlpaug.augmenter.char.KeyboardAug", dict(_UNCAPPED), "aug_char_p", adjust=_fix_keyboard_of),
)
