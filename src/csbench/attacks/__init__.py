"""Code attacks: pure functions over a prepared dataset, registered by name (SPEC "Code attacks")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from tqdm import tqdm

from csbench.code.comments import remove_comments
from csbench.code.parsing import LANGUAGES
from csbench.registry import Registry

# An attack maps the records of one split (and its parameters, from `attack_params` in the
# config) to attacked records of the same schema.
AttackFn = Callable[..., pd.DataFrame]


@dataclass(frozen=True)
class Attack:
    name: str
    description: str
    languages: tuple[str, ...]  # languages the attack is implemented for
    apply: AttackFn  # (frame, params: dict | None = None) -> frame
    defaults: dict[str, Any] = field(default_factory=dict)  # parameters params.yaml may override


def _none(frame: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
    return frame.copy()


def _no_comment(frame: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
    out = frame.copy()
    out["code"] = [
        remove_comments(code, language)
        for code, language in tqdm(
            zip(frame["code"], frame["language"], strict=True),
            total=len(frame),
            desc="no_comment",
            unit="fn",
            mininterval=2,
        )
    ]
    return out


ATTACKS: Registry[Attack] = Registry("attack")
ATTACKS.register("none", Attack("none", "the original code, unchanged", ("*",), _none))
ATTACKS.register(
    "no_comment",
    Attack("no_comment", "all comments and docstrings removed; nothing else changes", LANGUAGES, _no_comment),
)


def _translation(frame: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
    from csbench.attacks.translation import Apertium, translate_frame

    return translate_frame(frame, Apertium(pair=(params or {}).get("pair", "eng-spa")))


ATTACKS.register(
    "translation",
    Attack(
        "translation",
        "comments and docstrings translated into another language through apertium (default eng-spa); code unchanged",
        LANGUAGES,
        _translation,
        defaults={"pair": "eng-spa"},
    ),
)


def check_languages(attack: Attack, languages: list[str]) -> None:
    """Fail early if the attack is not implemented for a language of the dataset."""
    if "*" in attack.languages:
        return
    missing = sorted(set(languages) - set(attack.languages))
    if missing:
        raise ValueError(
            f"attack {attack.name!r} is implemented for {', '.join(attack.languages)}, not for {', '.join(missing)}"
        )
