"""The programming languages csbench handles: one module per language, registered here.

Each ``csbench/code/languages/<name>.py`` defines ``LANGUAGE``, a frozen :class:`Language`: its
tree-sitter grammar name, file extensions, comment and documentation conventions, function
extraction, identifier analysis (query and rules), CodeSearchNet filter rules and GraphCodeBERT
data-flow grammar. The shared engines (``csbench.code.comments``, ``extract``, ``identifiers``,
``csbench.models.dataflow``, ``csbench.datasets.local``) read them through :func:`language_spec`.

Adding a language: write its module, add its name to ``LANGUAGES`` below, add its tests
(``docs/extending`` has the checklist). The module defines ``LANGUAGE = Language(...)`` with:

* ``name`` (= the module's name; ``grammar`` too when the tree-sitter-languages grammar is named
  otherwise) and ``extensions`` (the endings of its source files);
* comments: ``comment_types``, ``string_types`` (literals kept whole), ``line_comment_markers``,
  ``block_comments`` / ``block_comment_is_newline`` (``/* */``), ``statement_lists`` (block nodes);
* ``documentation``: a :class:`Documentation` (docstring, ``/** */`` block or comment-line block
  above the definition; prefixes, line marker, tool directives to drop);
* ``definitions(root) -> [(node, qualified name)]``: the functions extraction documents (the helpers
  of ``csbench.code.extract``: ``walk_definitions``, ``node_text``, ``in_document_order``);
* ``identifiers``: :class:`IdentifierRules`: ``analysis(snippet) -> (Identifiers, comment nodes)``
  (most languages: a tree-sitter ``query`` and the engine of ``csbench.code.identifiers``:
  ``begin_analysis``, ``Blocks``, ``resolve``, ``assemble``), ``name_syntax`` and ``reserved``
  (what a new name may be);
* optional: ``special`` (:class:`SpecialMethods` the filters drop), ``snippet_wrappers`` (how a
  lone method parses), ``qualified_names``, ``dataflow`` (GraphCodeBERT's :class:`DataFlowGrammar`).

A language module is imported on first use, not with this package: the modules use the shared
engines, and the engines use this registry (an import of all of them here would be a cycle).
"""

from __future__ import annotations

import functools
import importlib

from csbench.code.languages.base import (
    C_BLOCK_LINE,
    DataFlowGrammar,
    Documentation,
    IdentifierRules,
    Language,
    SpecialMethods,
)

# The registry: one line per language, in this order everywhere a list of languages is shown.
LANGUAGES: tuple[str, ...] = (
    "python",
    "go",
    "java",
    "javascript",
    "php",
    "ruby",
    "r",
)

LanguageSpec = Language  # the name of earlier versions

__all__ = [
    "C_BLOCK_LINE",
    "LANGUAGES",
    "DataFlowGrammar",
    "Documentation",
    "IdentifierRules",
    "Language",
    "LanguageSpec",
    "SpecialMethods",
    "all_languages",
    "language_spec",
]


@functools.cache
def language_spec(language: str) -> Language:
    """The :class:`Language` of ``language``; NotImplementedError for one csbench does not handle."""
    if language not in LANGUAGES:
        raise NotImplementedError(f"no language spec for {language!r}; supported: {', '.join(sorted(LANGUAGES))}")
    spec = importlib.import_module(f"{__name__}.{language}").LANGUAGE
    if not isinstance(spec, Language) or spec.name != language:
        raise TypeError(f"{__name__}.{language}.LANGUAGE must be the Language named {language!r}")
    return spec


def all_languages() -> dict[str, Language]:
    """Every registered language by name, in registry order."""
    return {name: language_spec(name) for name in LANGUAGES}
