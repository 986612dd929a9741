"""Code attacks (SPEC "Code attacks"; thesis section 3.3): registered by name, composable, run over
all splits of a prepared dataset at once.

An attack *spec* in ``grid.attacks`` is one registered attack or several joined with ``+``
(``ordered_id+translation``); an attack that takes a variant parameter accepts it as a ``-<int>``
suffix (``k_shift_snippet-64`` is ``k_shift_snippet`` with ``k = 64``). Kinds:

* ``none``: the code unchanged (only on its own);
* comment attacks, at most one per spec: ``no_comment`` (remove comments and docstrings) and
  ``translation`` (translate them, keep them);
* renaming attacks (``csbench.attacks.renaming``): rename the identifiers each snippet defines
  (``advtest_normalize``, ``csbench.attacks.advtest``, instead rewrites each Python snippet by its
  tokens as CodeXGLUE AdvTest did). On their own, and composed with ``no_comment``, they rename the
  comment-free code, as in the thesis; composed with ``translation`` they rename the original code
  and the comments are translated. Several renamings in one spec apply left to right.

``run_attack`` attacks every split of a dataset in one go, because two renamings look across
snippets (``k_shift_dataset``, ``most_popular``). A dataset's snippets, in dataset order, are its
distinct (language, code) pairs in the order train, valid, test, codebase: the same function in
test and in the codebase is attacked once and identically. Every attacked record carries the
renaming it applied in the ``renaming`` column (JSON ``{old: new}`` over the identifiers the snippet
defines, in order of first occurrence; PHP names without ``$``; ``{}`` for attacks that rename
nothing; ``advtest_normalize``: every identifier whose text it changed).

Layout: ``spec.py`` (what an attack is, the registry ``ATTACKS``, spec parsing), ``engine.py``
(``run_attack``), and one module per family of attacks, each registering its attacks beside their
code. Adding an attack: a new module here that calls ``spec.register`` (or decorates a renaming
strategy with ``spec.renaming_attack``), plus its import line below.
"""

from __future__ import annotations

# The attacks, in registration order: each module registers its own (csbench.attacks.spec.register), so
# its import is the registration. One line per module.
# isort: off
from csbench.attacks import plain  # noqa: F401  none, no_comment
from csbench.attacks import translation  # noqa: F401  translation
from csbench.attacks import renaming  # noqa: F401  full_hash, k_shift_*, random_permutation, ordered_id, ...
from csbench.attacks import advtest  # noqa: F401  advtest_normalize
# isort: on

from csbench.attacks.engine import RENAMING_COLUMN, AttackReport, run_attack
from csbench.attacks.spec import (
    ATTACKS,
    SPEC_PATTERN,
    Attack,
    Component,
    check_languages,
    languages,
    parse_spec,
    register,
    removes_comments,
    renaming_attack,
    treats_comments,
)
from csbench.registry import UnknownNameError

__all__ = [
    "ATTACKS",
    "RENAMING_COLUMN",
    "SPEC_PATTERN",
    "Attack",
    "AttackReport",
    "Component",
    "UnknownNameError",
    "check_languages",
    "languages",
    "parse_spec",
    "register",
    "removes_comments",
    "renaming_attack",
    "run_attack",
    "treats_comments",
]
