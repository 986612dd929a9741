"""What a language module defines: the frozen ``Language`` spec, and the pieces it is made of.

Standard library and tree-sitter types only: the shared engines (``csbench.code.comments``,
``extract``, ``identifiers``, ``csbench.models.dataflow``) import the registry, and each language
module imports those engines, so nothing here may import them at run time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engines' types: imported for annotations only (they import the registry)
    from tree_sitter import Node

    from csbench.code.comments import Snippet

C_BLOCK_LINE = re.compile(r"^[ \t]*\*(?!/) ?")  # the " * " starting a line inside /* ... */
NO_WRAP: tuple[tuple[str, str], ...] = (("", ""),)

Definition = tuple["Node", str]  # (the node the doc comment sits above and whose text is the code, name)
# A function-extraction finder: the definitions of a parsed source file, in document order.
DefinitionFinder = Callable[["Node"], list[Definition]]
# An identifier analysis: the identifiers a parsed snippet defines, and its comment nodes (``None``
# where the analysis does not collect them); see ``csbench.code.identifiers``.
Analysis = Callable[["Snippet"], "tuple[Identifiers, list[Node] | None]"]


# What an identifier analysis works with and returns (``csbench.code.identifiers`` is its engine).
# name -> the bindings of that name: (scope start, scope end, visible from), byte positions in the tree
Scopes = dict[str, list[tuple[int, int, int]]]
# name -> byte spans of its occurrences, relative to the snippet's first byte
Spans = dict[str, list[tuple[int, int]]]
# name -> (tree position, role) of the binding occurrence its role comes from
Roles = dict[str, tuple[int, str]]


@dataclass(frozen=True)
class Identifiers:
    """The names a snippet defines.

    ``names``: in order of first occurrence in the syntax tree. ``roles``: name -> ``fun`` / ``arg`` /
    ``var`` (role of the binding the name's first occurrence resolves to). ``occurrences``: name -> byte
    spans ``(start, end)`` in the UTF-8 encoded code of every occurrence a renaming must change, in order.
    ``reserved``: names the snippet uses but does not define (free names, builtins, imports, class-body
    names, ``global`` names, other functions); renaming onto one of them would capture it.
    ``members``: in a method (Python, JavaScript, Go), the names it reaches through its receiver
    (``self.x``, ``this.x``, ``recv.X``): members of its class, which the method's own name (role
    ``fun``) must not become (``def set_next(self): self._set_stopinfo()`` renamed ``_set_stopinfo``
    would call itself). ``fun_keywords``: keywords (lower case) that the function's name must not be
    in any case (a PHP function, ``function callable()``; a PHP method may be named so).
    """

    names: tuple[str, ...]
    roles: dict[str, str]
    occurrences: dict[str, tuple[tuple[int, int], ...]]
    reserved: frozenset[str] = field(default_factory=frozenset)
    members: frozenset[str] = field(default_factory=frozenset)
    fun_keywords: frozenset[str] = field(default_factory=frozenset)

    def fun_may_take(self, name: str) -> bool:
        """Whether the snippet's function (role ``fun``) may be renamed ``name`` (``members``,
        ``fun_keywords``; the rules every name follows aside)."""
        return name not in self.members and name.lower() not in self.fun_keywords


@dataclass(frozen=True)
class DataFlowGrammar:
    """The node types of one language that GraphCodeBERT's DFG.py treats specially (everything else:
    its children in order); ``csbench.models.dataflow`` walks a tree with it."""

    # declarations with an optional initialiser: node type -> (name field, value field); name comesFrom value
    definitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Python / Ruby assignments: left and right children paired when their counts agree
    paired_assignments: frozenset[str] = frozenset()
    # the other languages: every variable on the left is computedFrom every variable on the right
    assignments: frozenset[str] = frozenset()
    increments: frozenset[str] = frozenset()  # x++: x computedFrom x
    branches: frozenset[str] = frozenset()  # if statements (and their else parts)
    # "clauses": a child whose type is in ``branch_clauses`` starts from the states before the if (Python,
    # Ruby); "after_first": every child from the first one in ``branches`` on does (Java, Go, JS, PHP)
    branch_style: str = "after_first"
    branch_clauses: frozenset[str] = frozenset()
    # "without_else": the states before the if survive only when there is no else (Python, Java, Ruby);
    # "always": they always do (Go, JavaScript, PHP)
    keep_states: str = "without_else"
    loops: frozenset[str] = frozenset()  # while-like: the children twice
    for_loops: frozenset[str] = frozenset()
    for_style: str = ""  # python | c | go | ruby
    for_init: str = ""  # c style: children after this one are walked a second time
    foreach_loops: frozenset[str] = frozenset()
    foreach_style: str = ""  # java | php
    do_first: frozenset[str] = frozenset()  # walked before their siblings (Python comprehension clauses)


@dataclass(frozen=True)
class Documentation:
    """How a language writes the documentation of a function (CodeSearchNet's query)."""

    # "docstring" (Python), "doc_block" (one /** ... */ comment directly above the definition:
    # Javadoc, JSDoc, PHPDoc) or "line_block" (consecutive comment lines directly above the
    # definition: Go, Ruby, R).
    style: str
    # Comments that may be documentation start with one of these.
    prefixes: tuple[str, ...] = ()
    # The comment marker at the start of every documentation line, removed from it (inside a
    # /* ... */ block: the " * " margin, after the delimiters are gone).
    line_marker: re.Pattern[str] = C_BLOCK_LINE
    # Documentation lines to drop entirely (tool directives, not prose).
    directive: re.Pattern[str] | None = None


@dataclass(frozen=True)
class SpecialMethods:
    """Constructors and standard extension methods, which CodeSearchNet's filters drop."""

    names: frozenset[str] = frozenset()  # short names
    pattern: re.Pattern[str] | None = None  # a whole family (Python dunders, PHP magic methods)
    only_methods: bool = False  # ``names`` apply only to methods (a qualified name), e.g. Go's String
    constructor_is_type_name: bool = False  # a method named like its enclosing type (Java)


@dataclass(frozen=True)
class IdentifierRules:
    """The identifier analysis of a language (``csbench.code.identifiers`` runs it)."""

    analysis: Analysis
    # A name that may replace a defined name: one of this syntax (a pattern it matches, or a test) that
    # is not reserved (keywords, predeclared names the language forbids to rebind).
    name_syntax: re.Pattern[str] | Callable[[str], bool]
    reserved: frozenset[str]
    # Names only a name that already is one may take where the renamed code is analysed again, by a later
    # renaming of a composed spec (Python's receivers ``self``, ``cls``: a plain function whose first
    # parameter became ``self`` would be analysed as a method): ``settle(..., analysed_again=True)`` gives
    # another name proposed one a fresh name. A single renaming may give it (meaning is kept either way).
    receivers: frozenset[str] = frozenset()
    # The source of the analysis query (built on first use: the grammar decides which of the listed
    # node kinds exist); ``None`` for an analysis that walks the tree itself (Python).
    query: Callable[[], str] | None = None
    # Match the query on a walk of the tree in Python (``csbench.code.treequery``) when that module runs
    # compiled and the walk in C is not built (see ``csbench.code.identifiers._capturer``).
    walked: bool = False
    # Match the query with the walk in C where it is built (``treequery.C_WALK``). False where tree-sitter's
    # query cursor is as fast: the patterns that look at a node's children (fields) are matched in Python
    # after the walk, and Go's and PHP's queries have many (their captures cost 0.63x and 0.40x of the
    # parse walked in C, 0.62x and 0.37x with the query cursor).
    walked_in_c: bool = True

    def is_valid_name(self, name: str) -> bool:
        """Whether ``name`` can replace a defined name (PHP: without the ``$``)."""
        syntax = self.name_syntax
        valid = bool(syntax.match(name)) if isinstance(syntax, re.Pattern) else syntax(name)
        return valid and name not in self.reserved


@dataclass(frozen=True)
class Language:
    """Everything csbench knows about one programming language (tree-sitter-languages 1.10.2).

    The comment / documentation / filter fields are the ``LanguageSpec`` of earlier versions
    (``LanguageSpec`` is this class); the logic that uses them lives in the shared engines.
    """

    name: str  # the name configs, datasets and the registry use
    extensions: tuple[str, ...]  # file name endings of its source files (local corpora)
    # Node types that are comments (documentation comments included).
    comment_types: frozenset[str]
    # String-like literals: one token each in the near-duplicate key and in GraphCodeBERT's input
    # (their text is not all in leaves), and lines inside them are left as they are when a definition
    # is dedented (their text is data).
    string_types: frozenset[str]
    # What a line comment starts with (a cheap test before any parse).
    line_comment_markers: tuple[str, ...]
    # Nodes whose named children are statements (a line of several of them was several lines, or is a
    # one-liner written with ``;``): the snippet's root and the language's blocks.
    statement_lists: frozenset[str]
    documentation: Documentation
    # The documented functions of a parsed source file (function extraction).
    definitions: DefinitionFinder
    identifiers: IdentifierRules
    special: SpecialMethods = SpecialMethods()
    # ``/* ... */`` comments exist (they close themselves; every other comment is a line comment).
    block_comments: bool = False
    # A multi-line block comment between two tokens acts as a line break (Go's automatic semicolons,
    # JavaScript's automatic semicolon insertion): replacing it must keep one.
    block_comment_is_newline: bool = False
    # Ways to parse a lone function or method: (prefix, suffix) pairs tried in order; the first that
    # parses without error is used (else the first). PHP needs its open tag; methods need a class.
    snippet_wrappers: tuple[tuple[str, str], ...] = NO_WRAP
    # False: names are not qualified with a separator, e.g. R's ``print.default`` is one name.
    qualified_names: bool = True
    # GraphCodeBERT's data-flow grammar (``None``: the input has no data-flow nodes).
    dataflow: DataFlowGrammar | None = None
    # Its grammar in tree-sitter-languages ("": the same as ``name``).
    grammar: str = ""

    def __post_init__(self) -> None:
        if not self.grammar:
            object.__setattr__(self, "grammar", self.name)

    # The flat names of the earlier ``LanguageSpec`` (what the engines read).
    @property
    def doc_style(self) -> str:
        return self.documentation.style

    @property
    def doc_prefixes(self) -> tuple[str, ...]:
        return self.documentation.prefixes

    @property
    def doc_line_marker(self) -> re.Pattern[str]:
        return self.documentation.line_marker

    @property
    def doc_directive(self) -> re.Pattern[str] | None:
        return self.documentation.directive

    @property
    def special_names(self) -> frozenset[str]:
        return self.special.names

    @property
    def special_pattern(self) -> re.Pattern[str] | None:
        return self.special.pattern

    @property
    def special_only_methods(self) -> bool:
        return self.special.only_methods

    @property
    def constructor_is_type_name(self) -> bool:
        return self.special.constructor_is_type_name
