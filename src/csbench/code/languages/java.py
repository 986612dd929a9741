"""Java: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
Parsed with ``parse_snippet`` (methods get a class wrapper). The method name is ``fun`` (with
recursive calls ``name(...)`` / ``this.name(...)``; a constructor's name is a type name and stays);
parameters (incl. varargs and lambda parameters) are ``arg``; locals are ``var``: local variable
declarators (also in ``for`` initialisers), enhanced-``for`` variables, ``catch`` parameters,
try-with-resources variables and ``instanceof`` pattern variables. A local is visible in its enclosing
block (or ``for`` / ``try`` / ``catch``) from its declarator on; parameters in the whole method or
lambda. A name is left alone, in all its occurrences, if any reference to it is outside the reach of a
declaration (fields used without ``this.``, constants, classes used as qualifiers like ``Math``).
Method names of calls, field names after ``.``, types, annotations, labels and package names stay.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import WALK_INTO, Definition, node_text, walk_definitions
from csbench.code.identifiers import (
    Blocks,
    CallSyntax,
    add_method_name,
    any_kind,
    assemble,
    begin_analysis,
    called_names,
    is_name,
    resolve,
)
from csbench.code.languages import DataFlowGrammar, Documentation, IdentifierRules, Language, SpecialMethods
from csbench.code.languages.base import Identifiers, Scopes

# ------------------------------------------------------------------------------------- identifiers


_JAVA_CALLS = CallSyntax((b"this",), (b".",), parenthesized=True)  # what a method calls (not its new name)

JAVA_KEYWORDS = frozenset(
    [
        "abstract",
        "assert",
        "boolean",
        "break",
        "byte",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extends",
        "final",
        "finally",
        "float",
        "for",
        "goto",
        "if",
        "implements",
        "import",
        "instanceof",
        "int",
        "interface",
        "long",
        "native",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "short",
        "static",
        "strictfp",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "transient",
        "try",
        "void",
        "volatile",
        "while",
        "true",
        "false",
        "null",
        "var",
        "record",
        "yield",
        "sealed",
        "permits",
    ]
)
_JAVA_CALLABLES = frozenset({"method_declaration", "constructor_declaration", "lambda_expression"})
_JAVA_BLOCKS = frozenset(
    {
        "block",
        "for_statement",
        "enhanced_for_statement",
        "catch_clause",
        "try_with_resources_statement",
        "switch_block_statement_group",
        "switch_rule",
        "constructor_body",
        *_JAVA_CALLABLES,
    }
)
# (parent type, field) of identifiers that are not variables
_JAVA_NOT_VARIABLES = {
    ("method_invocation", "name"),
    ("field_access", "field"),
    ("marker_annotation", "name"),
    ("annotation", "name"),
    ("method_declaration", "name"),
    ("constructor_declaration", "name"),
    ("class_declaration", "name"),
    ("interface_declaration", "name"),
    ("enum_declaration", "name"),
    ("record_declaration", "name"),
    ("annotation_type_declaration", "name"),
    ("enum_constant", "name"),
    ("element_value_pair", "key"),
}
_JAVA_NOT_VARIABLE_PARENTS = frozenset(
    {"labeled_statement", "break_statement", "continue_statement", "method_reference", "scoped_identifier"}
)


def query() -> str:
    """Comments, scopes, the method, parameter and local names, calls, and the identifiers in positions
    that are not variables (method and field names, labels, annotations, declarations)."""
    parameters = (
        "(formal_parameters [(formal_parameter name: (identifier) @param)"
        " (spread_parameter (variable_declarator name: (identifier) @param))])"
    )
    return "\n".join(
        [
            "[(line_comment) (block_comment)] @comment",
            f"{any_kind('java', _JAVA_BLOCKS - _JAVA_CALLABLES)} @block",
            "[(method_declaration) (constructor_declaration)] @function",
            "(lambda_expression) @lambda",
            "(identifier) @id",
            *[f"({kind} parameters: {parameters})" for kind in sorted(_JAVA_CALLABLES)],
            "(lambda_expression parameters: (inferred_parameters (identifier) @param))",
            "(lambda_expression parameters: (identifier) @param)",
            "(local_variable_declaration (variable_declarator) @declarator)",
            "[(enhanced_for_statement) (resource) (catch_formal_parameter) (instanceof_expression)] @binder",
            "(method_invocation name: (identifier) @call)",  # method names: not variables either
            *[f"({parent} (identifier) @nv)" for parent in sorted(_JAVA_NOT_VARIABLE_PARENTS)],
            *[
                f"({parent} {field}: (identifier) @nv)"
                for parent, field in sorted(_JAVA_NOT_VARIABLES)
                if parent != "method_invocation"
            ],
        ]
    )


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    # the first method or constructor (a wrapper adds none); callables bind their parameters
    start, _, root, data, found, functions, function = begin_analysis(snippet, "java", inside_only=False)
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    calls = found["call"]
    if calls:
        non_variables.update([node.start_byte for node in calls])  # method names of calls
    if found["param"]:
        callables = Blocks([*functions, *found["lambda"]], root)
        for node in found["param"]:
            position = node.start_byte
            if position == node.end_byte:  # MISSING
                continue
            begin, stop = callables.enclosing(node)
            name = data[position - start : node.end_byte - start].decode("utf-8")
            if name in scopes:
                scopes[name].append((begin, stop, begin))
            else:
                scopes[name] = [(begin, stop, begin)]
            binding_roles[position] = "arg"
    if found["declarator"] or found["binder"]:
        blocks = Blocks([*found["block"], *functions, *found["lambda"]], root)

        def bind(node: Node | None, scope: tuple[int, int], visible_from: int) -> None:
            if not is_name(node) or node.type != "identifier":
                return
            name = data[node.start_byte - start : node.end_byte - start].decode("utf-8")
            scopes.setdefault(name, []).append((scope[0], scope[1], visible_from))
            binding_roles[node.start_byte] = "var"

        for node in found["declarator"]:
            bind(node.child_by_field_name("name"), blocks.enclosing(node), node.start_byte)
        for node in found["binder"]:  # an enhanced for is the scope of its variable
            if node.type == "enhanced_for_statement":
                scope = (node.start_byte, node.end_byte)
            else:
                scope = blocks.enclosing(node)
            bind(node.child_by_field_name("name"), scope, node.start_byte)
    extra: list[Node] = []
    fun_name = None
    name_node = function.child_by_field_name("name") if function is not None else None
    if function is not None and function.type == "method_declaration" and is_name(name_node):
        fun_name = data[name_node.start_byte - start : name_node.end_byte - start].decode("utf-8")
        extra.append(name_node)
        encoded = fun_name.encode("utf-8")
        for node in calls:
            if data[node.start_byte - start : node.end_byte - start] == encoded:
                target = node.parent.child_by_field_name("object")
                if target is None or target.type == "this":
                    extra.append(node)
    bad: set[str] = set()
    used: set[str] = set()
    spans, roles, _ = resolve(found["id"], snippet, binding_roles, scopes, bad, used, non_variables)
    add_method_name(fun_name, extra, start, spans, roles, bad)
    members = called_names(data, spans, fun_name, _JAVA_CALLS, found["comment"], start) if fun_name else frozenset()
    return assemble(spans, roles, bad, used, JAVA_KEYWORDS, members=members), found["comment"]


# ------------------------------------------------------------------------------ function extraction

_JAVA_TYPES = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    }
)
_JAVA_BODIES = {"class_body", "interface_body", "enum_body", "enum_body_declarations", "annotation_type_body"}
_JAVA_METHODS = {"method_declaration", "constructor_declaration", "compact_constructor_declaration"}


def definitions(root: Node) -> list[Definition]:
    """Methods and constructors with a body, as ``Class.method`` (``Outer.Inner.method`` for nested
    types), in classes, interfaces (default / static methods), enums, records and annotation types at
    any nesting. Not covered: methods of anonymous and local classes (inside method bodies or field
    initialisers) and of enum constants' bodies."""
    return walk_definitions(root, _JAVA_TYPES, _visit_member)


def _visit_member(child: Node, scope: tuple[str, ...]) -> str | bool | None:
    if child.type in _JAVA_BODIES:
        return WALK_INTO
    if child.type in _JAVA_METHODS and child.child_by_field_name("body") is not None:
        name = child.child_by_field_name("name")
        short = node_text(name) if name is not None else (scope[-1] if scope else "")
        return ".".join((*scope, short)) if short else None
    return None


# -------------------------------------------------------------------------------------- the language

_JAVA_NAME = re.compile(r"^[A-Za-z_$\x80-\U0010ffff][\w$\x80-\U0010ffff]*$")


LANGUAGE = Language(
    name="java",
    extensions=(".java",),
    comment_types=frozenset({"line_comment", "block_comment"}),
    string_types=frozenset({"string_literal", "character_literal"}),  # text blocks are string_literal here
    line_comment_markers=("//",),
    statement_lists=frozenset({"program", "block", "class_body", "constructor_body"}),
    documentation=Documentation(style="doc_block", prefixes=("/**",)),
    special=SpecialMethods(
        names=frozenset({"toString", "equals", "hashCode", "compareTo", "clone", "finalize"}),
        constructor_is_type_name=True,
    ),
    definitions=definitions,
    identifiers=IdentifierRules(analysis=analysis, name_syntax=_JAVA_NAME, reserved=JAVA_KEYWORDS | {"_"}, query=query),
    block_comments=True,
    snippet_wrappers=(("", ""), ("class __Snippet {\n", "\n}")),
    dataflow=DataFlowGrammar(
        definitions={"variable_declarator": ("name", "value")},
        assignments=frozenset({"assignment_expression"}),
        increments=frozenset({"update_expression"}),
        branches=frozenset({"if_statement", "else"}),
        keep_states="without_else",
        loops=frozenset({"while_statement"}),
        for_loops=frozenset({"for_statement"}),
        for_style="c",
        for_init="local_variable_declaration",
        foreach_loops=frozenset({"enhanced_for_statement"}),
        foreach_style="java",
    ),
)
