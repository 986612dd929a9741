"""What an attack is (:class:`Attack`), the registry of attacks, and attack specs (``ordered_id+translation``).

Each attack registers itself where it is defined, with :func:`register` (or :func:`renaming_attack`, a
decorator over a renaming strategy): ``attacks/plain.py`` (``none``, ``no_comment``),
``attacks/translation.py``, ``attacks/renaming.py`` (the renaming strategies), ``attacks/advtest.py``.
``csbench/attacks/__init__.py`` imports each of these modules once: that import is the registration.
The config schema's ``attack_params`` keys are filled from :data:`ATTACKS` (``Attack.params_schema``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from csbench.code.identifiers import IMPLEMENTED
from csbench.code.parsing import LANGUAGES
from csbench.registry import Registry

if TYPE_CHECKING:
    from csbench.attacks.renaming import Strategy
    from csbench.code.comments import Snippet

# (code, language, keep_comments, parsed snippet) -> (attacked code, renaming)
Rewrite = Callable[[str, str, bool, "Snippet | None"], tuple[str, dict[str, str]]]
# (attack name, its parameters) -> what is wrong with them, or None
ParamsCheck = Callable[[str, dict[str, Any]], "str | None"]


def _always(params: dict[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class Survey:
    """How a dataset-wide renaming runs when the dataset is attacked in chunks (``csbench.attacks.stream``:
    the distinct snippets in dataset order, cut into consecutive chunks that are never all in memory at
    once). A first pass analyses every chunk and keeps only ``gather(items, params)``, that chunk's
    statistics; ``contexts(statistics, params)`` turns the statistics of all chunks, in order, into one
    context per chunk; the second pass analyses each chunk again and renames it by
    ``propose(items, params, context)``. The attack's strategy over the whole dataset at once must equal
    ``propose(items, params, contexts([gather(items, params)], params)[0])`` (it is best written so), and
    the proposals of the chunks must together be the strategy's over all of them
    (tests/attacks/test_attack_stream.py checks both on real data). ``wanted(params)``: False when these
    parameters make the proposals local after all (``most_popular`` with a fixed ranking): no first
    pass, and every chunk's context is ``None``."""

    gather: Callable[[Sequence[Any], dict[str, Any]], Any]
    contexts: Callable[[list[Any], dict[str, Any]], list[Any]]
    propose: Callable[[Sequence[Any], dict[str, Any], Any], list[dict[str, str]]]
    wanted: Callable[[dict[str, Any]], bool] = _always


@dataclass(frozen=True)
class Attack:
    name: str
    description: str
    languages: tuple[str, ...]  # languages the attack is implemented for ("*": all)
    kind: str  # "none" | "comments" | "renaming"
    defaults: dict[str, Any] = field(default_factory=dict)  # parameters `attack_params` may override
    variant: str | None = None  # the parameter a `-<int>` suffix sets
    strategy: Strategy | None = None  # renaming attacks
    # a renaming whose proposal for a snippet depends on the other snippets (k_shift_dataset's donors,
    # most_popular's dataset ranking): how it runs over a dataset attacked in chunks (``Survey``); the
    # main process sees every analysis of a chunk before renaming it
    survey: Survey | None = None
    # a renaming attack that rewrites each snippet from its own tokens instead of proposing names for
    # the identifier analysis (advtest_normalize): (code, language, keep_comments, parsed snippet) ->
    # (attacked code, renaming); no settling, so nothing guarantees it is capture-free
    rewrite: Rewrite | None = None
    # False: the attack may change what the code does, on purpose (it reproduces a release that does)
    preserves_meaning: bool = True
    # the registered attack to name when this one is refused for a dataset's languages
    other_languages: str | None = None
    # JSON-schema of each parameter of `defaults` (the config's `attack_params.<name>` is checked
    # against it; csbench.config.schema builds attack_params from every registered attack)
    params_schema: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what is wrong with a spec's parameters beyond their schema (a relation between two of them)
    check: ParamsCheck | None = None

    def __post_init__(self) -> None:
        if set(self.params_schema) != set(self.defaults):
            raise ValueError(f"attack {self.name!r}: params_schema must describe exactly its defaults")

    @property
    def dataset_wide(self) -> bool:
        """Whether a snippet's names depend on the other snippets of the dataset (``survey`` given)."""
        return self.survey is not None


ATTACKS: Registry[Attack] = Registry("attack")


def register(attack: Attack) -> Attack:
    """Register an attack beside the code that implements it; returns it."""
    return ATTACKS.add(attack)


def renaming_attack(
    name: str, description: str, languages: tuple[str, ...] = IMPLEMENTED, **options: Any
) -> Callable[[Strategy], Strategy]:
    """Decorator registering a renaming strategy as the attack ``name`` (kind ``renaming``; ``options``:
    the other :class:`Attack` fields). Returns the strategy itself, unchanged."""

    def decorate(strategy: Strategy) -> Strategy:
        register(Attack(name, description, languages, "renaming", strategy=strategy, **options))
        return strategy

    return decorate


# ------------------------------------------------------------------------------------------- specs

_COMPONENT = re.compile(r"^(?P<name>[a-z_]+)(?:-(?P<variant>[0-9]+))?$")
SPEC_PATTERN = r"^[a-z_]+(-[0-9]+)?(\+[a-z_]+(-[0-9]+)?)*$"  # the schema's pattern of grid.attacks


@dataclass(frozen=True)
class Component:
    """One attack of a spec with its parameters (registered defaults < ``attack_params`` < variant)."""

    attack: Attack
    params: dict[str, Any]


def parse_spec(
    spec: str, attack_params: dict[str, dict[str, Any]] | None = None, where: str | None = None
) -> list[Component]:
    """The components of an attack spec, validated (``csbench.attacks``' docstring). Raises
    ``ValueError`` / ``UnknownNameError`` with the offending part named."""
    at = f" (at {where})" if where else ""
    components = []
    for part in spec.split("+"):
        match = _COMPONENT.match(part)
        if not match:
            raise ValueError(f"attack {spec!r}{at}: {part!r} is not `name` or `name-<integer>`")
        attack = ATTACKS.get(match["name"], where=where)
        params = {**attack.defaults, **(attack_params or {}).get(attack.name, {})}
        if match["variant"] is not None:
            if attack.variant is None:
                raise ValueError(f"attack {spec!r}{at}: {attack.name!r} takes no `-<integer>` variant")
            params[attack.variant] = int(match["variant"])
        components.append(Component(attack, params))
    names = [c.attack.name for c in components]
    if len(set(names)) != len(names):
        raise ValueError(f"attack {spec!r}{at}: an attack appears twice")
    if "none" in names and len(names) > 1:
        raise ValueError(f"attack {spec!r}{at}: `none` does not compose")
    if sum(c.attack.kind == "comments" for c in components) > 1:
        raise ValueError(f"attack {spec!r}{at}: at most one of no_comment and translation")
    for c in components:
        problem = c.attack.check(c.attack.name, c.params) if c.attack.check is not None else None
        if problem:
            raise ValueError(f"attack {spec!r}{at}: {problem}")
    return components


def languages(components: Sequence[Component]) -> tuple[str, ...]:
    """Languages every component of a spec is implemented for."""
    langs = set(LANGUAGES)
    for c in components:
        if "*" not in c.attack.languages:
            langs &= set(c.attack.languages)
    return tuple(lang for lang in LANGUAGES if lang in langs)


def check_languages(spec: str, components: Sequence[Component], found: Sequence[str]) -> None:
    """Fail early if the attack is not implemented for a language of the dataset. An attack whose every
    component takes any language (``none``: the code as it is) runs on any, parsed or not (a BEIR
    dataset's SQL or C++)."""
    if all("*" in c.attack.languages for c in components):
        return
    missing = sorted(set(found) - set(languages(components)))
    if missing:
        hints = "".join(
            f"; {c.attack.other_languages} covers {', '.join(ATTACKS.get(c.attack.other_languages).languages)}"
            for c in components
            if c.attack.other_languages and "*" not in c.attack.languages and set(missing) - set(c.attack.languages)
        )
        raise ValueError(
            f"attack {spec!r} is implemented for {', '.join(languages(components))}, not for {', '.join(missing)}"
            + hints
        )


def removes_comments(components: Sequence[Component]) -> bool:
    """Whether a spec removes comments: ``no_comment``, or a renaming not composed with ``translation``."""
    names = {c.attack.name for c in components}
    renames = any(c.attack.kind == "renaming" for c in components)
    return "translation" not in names and ("no_comment" in names or renames)


def treats_comments(components: Sequence[Component]) -> bool:
    """Whether a spec removes or translates comments: both leave a comment whose end cannot be told."""
    return removes_comments(components) or any(c.attack.name == "translation" for c in components)
