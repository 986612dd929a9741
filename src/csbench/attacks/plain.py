"""The attacks that rename nothing and translate nothing: ``none`` (the code unchanged) and
``no_comment`` (``csbench.code.comments.remove_comments``: comments and docstrings removed)."""

from __future__ import annotations

from csbench.attacks.spec import Attack, register
from csbench.code.parsing import LANGUAGES

register(Attack("none", "the original code, unchanged", ("*",), "none"))
register(Attack("no_comment", "all comments and docstrings removed; nothing else changes", LANGUAGES, "comments"))
