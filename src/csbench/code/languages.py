"""One small description per language: what extraction, comment removal and the CodeSearchNet
filters need to know about its tree-sitter grammar (tree-sitter-languages 1.10.2) and conventions.

The logic that uses these specs lives in ``csbench.code.extract`` and ``csbench.code.comments``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    # Node types that are comments (documentation comments included).
    comment_types: frozenset[str]
    # String-like literals: one token each in the near-duplicate key (their text is not all in leaves),
    # and lines inside them are left as they are when a definition is dedented (their text is data).
    string_types: frozenset[str]
    # How documentation is written: "docstring" (Python), "doc_block" (one /** ... */ comment directly
    # above the definition: Javadoc, JSDoc, PHPDoc) or "line_block" (consecutive comment lines directly
    # above the definition: Go, Ruby, R).
    doc_style: str
    # Comments that may be documentation start with one of these.
    doc_prefixes: tuple[str, ...]
    # The comment marker at the start of every documentation line, removed from it (inside a
    # /* ... */ block: the " * " margin, after the delimiters are gone).
    doc_line_marker: re.Pattern[str]
    # Documentation lines to drop entirely (tool directives, not prose).
    doc_directive: re.Pattern[str] | None
    # Standard extension methods dropped by the filters (short names), and a pattern for whole families.
    special_names: frozenset[str]
    special_pattern: re.Pattern[str] | None
    # True: ``special_names`` only apply to methods (a qualified name), e.g. Go's String / Error.
    special_only_methods: bool
    # True: a method named like its enclosing type is a constructor (Java).
    constructor_is_type_name: bool
    # Ways to parse a lone function or method: (prefix, suffix) pairs tried in order; the first that
    # parses without error is used (else the first). PHP needs its open tag; methods need a class.
    snippet_wrappers: tuple[tuple[str, str], ...]
    # A multi-line block comment between two tokens acts as a line break (Go's automatic semicolons,
    # JavaScript's automatic semicolon insertion): replacing it must keep one.
    block_comment_is_newline: bool
    # False: names are not qualified with a separator, e.g. R's ``print.default`` is one name.
    qualified_names: bool = True


C_BLOCK_LINE = re.compile(r"^[ \t]*\*(?!/) ?")  # the " * " starting a line inside /* ... */
_NO_WRAP = (("", ""),)

PYTHON = LanguageSpec(
    name="python",
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string"}),
    doc_style="docstring",
    doc_prefixes=(),
    doc_line_marker=re.compile(r"^"),
    doc_directive=None,
    special_names=frozenset(),
    special_pattern=re.compile(r"^__\w+__$"),
    special_only_methods=False,
    constructor_is_type_name=False,
    snippet_wrappers=_NO_WRAP,
    block_comment_is_newline=False,
)

GO = LanguageSpec(
    name="go",
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"interpreted_string_literal", "raw_string_literal", "rune_literal"}),
    doc_style="line_block",
    doc_prefixes=("//", "/*"),
    doc_line_marker=re.compile(r"^[ \t]*// ?"),
    # //go:generate, //go:noinline, //line, //export (cgo) are directives, not documentation
    doc_directive=re.compile(r"^[ \t]*//(go:\w|line |export |nolint)"),
    special_names=frozenset({"String", "Error"}),
    special_pattern=None,
    special_only_methods=True,
    constructor_is_type_name=False,
    snippet_wrappers=_NO_WRAP,
    block_comment_is_newline=True,
)

JAVA = LanguageSpec(
    name="java",
    comment_types=frozenset({"line_comment", "block_comment"}),
    string_types=frozenset({"string_literal", "character_literal"}),  # text blocks are string_literal here
    doc_style="doc_block",
    doc_prefixes=("/**",),
    doc_line_marker=C_BLOCK_LINE,
    doc_directive=None,
    special_names=frozenset({"toString", "equals", "hashCode", "compareTo", "clone", "finalize"}),
    special_pattern=None,
    special_only_methods=False,
    constructor_is_type_name=True,
    snippet_wrappers=(("", ""), ("class __Snippet {\n", "\n}")),
    block_comment_is_newline=False,
)

JAVASCRIPT = LanguageSpec(
    name="javascript",
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string", "template_string", "regex"}),
    doc_style="doc_block",
    doc_prefixes=("/**",),
    doc_line_marker=C_BLOCK_LINE,
    doc_directive=None,
    special_names=frozenset({"constructor", "toString", "valueOf"}),
    special_pattern=None,
    special_only_methods=False,
    constructor_is_type_name=False,
    snippet_wrappers=(("", ""), ("class __Snippet {\n", "\n}"), ("({\n", "\n})")),
    block_comment_is_newline=True,
)

PHP = LanguageSpec(
    name="php",
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string", "encapsed_string", "heredoc", "nowdoc", "shell_command_expression"}),
    doc_style="doc_block",
    doc_prefixes=("/**",),
    doc_line_marker=C_BLOCK_LINE,
    doc_directive=None,
    special_names=frozenset(),
    special_pattern=re.compile(r"^__\w+$"),  # __construct, __destruct, __toString, __get, ... (magic methods)
    special_only_methods=False,
    constructor_is_type_name=False,
    # Code without the open tag is inline HTML to the grammar; methods need a class around them.
    snippet_wrappers=(("<?php\n", ""), ("<?php\nclass __Snippet {\n", "\n}")),
    block_comment_is_newline=False,
)

RUBY = LanguageSpec(
    name="ruby",
    comment_types=frozenset({"comment"}),  # =begin ... =end blocks are comment nodes too
    string_types=frozenset(
        {"string", "heredoc_body", "regex", "subshell", "character", "simple_symbol", "delimited_symbol"}
    ),
    doc_style="line_block",
    doc_prefixes=("#",),
    doc_line_marker=re.compile(r"^[ \t]*# ?"),
    doc_directive=re.compile(r"^[ \t]*#[ \t]*(rubocop:|frozen_string_literal:|:nodoc:|--$|\+\+$)"),
    special_names=frozenset({"initialize", "to_s", "inspect", "==", "hash", "eql?", "<=>"}),
    special_pattern=None,
    special_only_methods=False,
    constructor_is_type_name=False,
    snippet_wrappers=_NO_WRAP,
    block_comment_is_newline=False,
)

R = LanguageSpec(
    name="r",
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string"}),
    doc_style="line_block",
    doc_prefixes=("#",),
    doc_line_marker=re.compile(r"^[ \t]*#+'? ?"),  # roxygen #' and plain # / ## comments
    doc_directive=re.compile(r"^[ \t]*#[ \t]*nolint"),
    special_names=frozenset(),
    special_pattern=None,
    special_only_methods=False,
    constructor_is_type_name=False,
    snippet_wrappers=_NO_WRAP,
    block_comment_is_newline=False,
    qualified_names=False,
)

SPECS: dict[str, LanguageSpec] = {spec.name: spec for spec in (PYTHON, GO, JAVA, JAVASCRIPT, PHP, RUBY, R)}


def language_spec(language: str) -> LanguageSpec:
    """The spec of ``language``; NotImplementedError for a language csbench does not handle."""
    try:
        return SPECS[language]
    except KeyError:
        raise NotImplementedError(f"no language spec for {language!r}; supported: {', '.join(sorted(SPECS))}") from None
