"""Python: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules: see ``csbench.code.languages._python_scopes`` (the analysis walks the tree itself).
"""

from __future__ import annotations

import keyword
import re

from tree_sitter import Node

from csbench.code.languages._python_scopes import METHOD_DECORATORS, RECEIVERS, analysis
from csbench.code.languages.base import DataFlowGrammar, Documentation, IdentifierRules, Language, SpecialMethods

__all__ = ["LANGUAGE", "METHOD_DECORATORS", "RECEIVERS"]


# ------------------------------------------------------------------------------ function extraction


def definitions(root: Node) -> list[tuple[Node, str]]:
    """Top-level functions and methods (at any class depth) with qualified names; nested
    functions are part of their enclosing function and not listed."""
    found: list[tuple[Node, str]] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in reversed(node.children):
            if child.type == "function_definition":
                name = child.child_by_field_name("name")
                if name is not None:
                    found.append((child, ".".join((*scope, name.text.decode("utf-8")))))
            elif child.type == "class_definition":
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*scope, name.text.decode("utf-8"))))
            elif child.type not in ("lambda", "string", "comment"):
                stack.append((child, scope))
    found.sort(key=lambda item: item[0].start_byte)
    return found


# -------------------------------------------------------------------------------------- the language


LANGUAGE = Language(
    name="python",
    extensions=(".py",),
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string"}),
    line_comment_markers=("#",),
    statement_lists=frozenset({"module", "block"}),
    documentation=Documentation(style="docstring", line_marker=re.compile(r"^")),
    special=SpecialMethods(pattern=re.compile(r"^__\w+__$")),
    definitions=definitions,
    # Where the renamed code is analysed again (a composed spec), only a receiver takes a receiver's name: a
    # plain function whose first parameter became ``self`` would read as a method, to this analysis, which
    # then takes ``self.name`` for the method and a bare ``name`` for a global (the next renaming changed what
    # the code does: tests/attacks/test_renamed_analysed_alike.py).
    identifiers=IdentifierRules(
        analysis=analysis, name_syntax=str.isidentifier, reserved=frozenset(keyword.kwlist), receivers=RECEIVERS
    ),
    dataflow=DataFlowGrammar(
        definitions={"default_parameter": ("name", "value")},
        paired_assignments=frozenset({"assignment", "augmented_assignment", "for_in_clause"}),
        branches=frozenset({"if_statement"}),
        branch_style="clauses",
        branch_clauses=frozenset({"elif_clause", "else_clause"}),
        keep_states="without_else",
        loops=frozenset({"while_statement"}),
        for_loops=frozenset({"for_statement"}),
        for_style="python",
        do_first=frozenset({"for_in_clause"}),
    ),
)
