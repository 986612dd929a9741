"""JavaScript: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
Parsed with ``parse_snippet``. The function's name is ``fun`` (a method's name too, with recursive
``this.name`` accesses); parameters of every function, function expression, arrow function and method
are ``arg`` (plain, defaults, rest, array / object destructuring); locals are ``var``: ``var`` (function
scope), ``let`` / ``const`` (block scope), destructuring declarations, ``for`` / ``for-in`` / ``for-of``
declarations, ``catch`` parameters, nested function declarations and named function expressions.
Declarations are visible in their whole scope (hoisting / temporal dead zone). A name is left alone, in
all its occurrences, if any reference to it is outside every scope that declares it (globals such as
``Math``, ``require``, ``arguments``, ``undefined``, assignments to undeclared names), if it is
imported or a class name, if it appears as a shorthand property (``{a}`` or ``const {a} = o``: the name
is also a key), or if it occurs inside a ``with`` statement. Property names, labels and strings stay
(identifiers inside template-string substitutions are renamed).
"""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import Definition, in_document_order, node_text
from csbench.code.identifiers import Blocks, any_kind, assemble, begin_analysis, is_name, resolve
from csbench.code.languages import DataFlowGrammar, Documentation, IdentifierRules, Language, SpecialMethods
from csbench.code.languages.base import Identifiers, Scopes
from csbench.code.parsing import walk

# ------------------------------------------------------------------------------------- identifiers

_JS_NAME = re.compile(r"^[A-Za-z_$\x80-\U0010ffff][\w$\x80-\U0010ffff]*$")
JS_RESERVED = frozenset(
    [
        *[
            "break",
            "case",
            "catch",
            "class",
            "const",
            "continue",
            "debugger",
            "default",
            "delete",
            "do",
            "else",
            "enum",
            "export",
            "extends",
            "false",
        ],
        *[
            "finally",
            "for",
            "function",
            "if",
            "import",
            "in",
            "instanceof",
            "new",
            "null",
            "return",
            "super",
            "switch",
            "this",
            "throw",
            "true",
            "try",
        ],
        *[
            "typeof",
            "var",
            "void",
            "while",
            "with",
            "yield",
            "let",
            "static",
            "implements",
            "interface",
            "package",
            "private",
            "protected",
        ],
        *["public", "await", "arguments", "eval", "undefined", "NaN", "Infinity"],
    ]
)
_JS_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "function",
        "function_expression",
        "generator_function_declaration",
        "generator_function",
        "arrow_function",
        "method_definition",
    }
)
_JS_BLOCKS = frozenset({"statement_block", "for_statement", "for_in_statement", "switch_body", "program"})


def query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{any_kind('javascript', _JS_BLOCKS - {'program'})} @block",  # the program is the root
            f"{any_kind('javascript', _JS_FUNCTIONS)} @function",
            "(identifier) @id",
            "(variable_declaration (variable_declarator name: _ @var_name))",
            "(lexical_declaration (variable_declarator name: _ @lexical_name))",
            "(for_in_statement) @for_in",
            "(catch_clause) @catch",
            "[(class_declaration) (class)] @class",
            "(import_statement) @import",
            "(shorthand_property_identifier) @shorthand",
            "(with_statement) @with",
            "(member_expression object: (this) property: _ @this_property)",
        ]
    )


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end, root, data, found, in_range, function = begin_analysis(snippet, "javascript")
    scopes: Scopes = {}  # a JavaScript binding is visible in its whole scope
    binding_roles: dict[int, str] = {}
    bad: set[str] = set()
    extra: list[Node] = []
    blocks = Blocks([*found["block"], *found["function"]], root)  # _JS_BLOCKS | _JS_FUNCTIONS
    functions = Blocks(found["function"], root)  # _JS_FUNCTIONS | {"program"}: the root is the program

    def text(node: Node) -> str:
        return data[node.start_byte - start : node.end_byte - start].decode("utf-8")

    def bind_pattern(pattern: Node | None, role: str, scope: tuple[int, int]) -> None:
        # iterative: a recursive closure would be a reference cycle, left for the cyclic garbage
        # collector (which the attacks pause) with everything it holds
        stack = [pattern]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            kind = node.type
            if kind == "identifier":
                if node.start_byte < node.end_byte:  # not MISSING
                    scopes.setdefault(text(node), []).append((scope[0], scope[1], scope[0]))
                    binding_roles[node.start_byte] = role
            elif kind in ("shorthand_property_identifier_pattern", "shorthand_property_identifier"):
                bad.add(text(node))
            elif kind in ("assignment_pattern", "object_assignment_pattern"):
                stack.append(node.child_by_field_name("left"))
            elif kind == "pair_pattern":
                stack.append(node.child_by_field_name("value"))
            elif kind in ("array_pattern", "object_pattern", "rest_pattern"):
                stack += reversed(node.named_children)

    fun_name = None
    if function is not None:
        name = function.child_by_field_name("name")
        if is_name(name):
            fun_name = text(name)
            extra.append(name)
            if name.type == "identifier":  # a method's name is a property, not a variable
                scopes.setdefault(fun_name, []).append((root.start_byte, root.end_byte + 1, root.start_byte))
                binding_roles[name.start_byte] = "fun"
    for node in in_range:
        scope = (node.start_byte, node.end_byte)
        params = node.child_by_field_name("parameters")
        if params is None:
            bind_pattern(node.child_by_field_name("parameter"), "arg", scope)
        else:
            for child in params.named_children:
                bind_pattern(child, "arg", scope)
        name = node.child_by_field_name("name")
        if node != function and name is not None and name.type == "identifier":
            if node.type.endswith("_declaration"):
                bind_pattern(name, "var", blocks.enclosing(node))
            else:
                bind_pattern(name, "var", scope)
    for node in found["var_name"]:
        bind_pattern(node, "var", functions.enclosing(node))
    for node in found["lexical_name"]:
        bind_pattern(node, "var", blocks.enclosing(node))
    for node in found["for_in"]:
        kind = node.child_by_field_name("kind")
        if kind is not None:
            scope = functions.enclosing(node) if kind.type == "var" else (node.start_byte, node.end_byte)
            bind_pattern(node.child_by_field_name("left"), "var", scope)
    for node in found["catch"]:
        bind_pattern(node.child_by_field_name("parameter"), "var", (node.start_byte, node.end_byte))
    for node in found["class"]:
        name = node.child_by_field_name("name")
        if name is not None and node.start_byte >= start and node.end_byte <= end:  # not a wrapper's class
            bad.add(text(name))
    for node in [*found["import"], *found["with"]]:
        bad.update(text(item) for item in walk(node) if item.type == "identifier")
    for node in found["shorthand"]:
        bad.add(text(node))
    if function is not None and function.type == "method_definition" and fun_name is not None:
        extra += [node for node in found["this_property"] if text(node) == fun_name]
    used = set(bad)
    spans, roles, _ = resolve(found["id"], snippet, binding_roles, scopes, bad, used)
    properties = [(node.start_byte - start, node.end_byte - start) for node in extra if node.type != "identifier"]
    if properties:  # a method's name and ``this.name``: property identifiers
        spans[fun_name] = sorted({*spans.get(fun_name, ()), *properties})
        roles.setdefault(fun_name, (extra[0].start_byte, "fun"))
    members = frozenset()
    if function is not None and function.type == "method_definition":
        members = frozenset(text(node) for node in found["this_property"] if start <= node.start_byte < end)
    return assemble(spans, roles, bad, used, JS_RESERVED, members=members), found["comment"]


# ------------------------------------------------------------------------------ function extraction

_JS_FUNCTION_VALUES = {"function", "function_expression", "arrow_function", "generator_function"}
_JS_DECLARATIONS = {"function_declaration", "generator_function_declaration"}


def _js_name(node: Node | None) -> str:
    text = node_text(node)
    return text.strip("'\"") if node is not None and node.type == "string" else "".join(text.split())


def definitions(root: Node) -> list[Definition]:
    """Covered: function declarations (also ``export``-ed), class methods (``Class.method``),
    ``const / let / var f = function / arrow / generator`` (one declarator), assignments
    ``a.b.c = function`` (lodash / express style; the name is the assigned path), and methods and
    function-valued properties of object literals (``obj.key`` when the object is assigned to a
    name). Definitions nested in function bodies are found too (modules wrapped in an IIFE, like
    lodash.js), with names restarting at the function boundary. Not covered: class fields holding
    arrow functions, functions passed as arguments, ``export default`` of an anonymous function."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]

    def value_scope(value: Node | None, anchor: Node, name: str, scope: tuple[str, ...]) -> None:
        if value is None:
            return
        if value.type in _JS_FUNCTION_VALUES:
            found.append((anchor, ".".join((*scope, name))))
            stack.append((value, ()))
        elif value.type in ("object", "class"):
            stack.append((value, (*scope, name)))
        else:
            stack.append((value, scope))

    while stack:
        node, scope = stack.pop()
        for child in node.children:
            anchor, target = child, child
            if child.type == "export_statement":
                declaration = child.child_by_field_name("declaration")
                if declaration is None:
                    stack.append((child, scope))
                    continue
                target = declaration
            kind = target.type
            if kind in _JS_DECLARATIONS or kind == "method_definition":
                name = target.child_by_field_name("name")
                if name is not None:
                    found.append((anchor, ".".join((*scope, _js_name(name)))))
                stack.append((target, ()))
            elif kind in ("class_declaration", "class"):
                name = target.child_by_field_name("name")
                stack.append((target, (*scope, node_text(name)) if name is not None else scope))
            elif kind in ("lexical_declaration", "variable_declaration"):
                declarators = [c for c in target.named_children if c.type == "variable_declarator"]
                if len(declarators) == 1:
                    declarator = declarators[0]
                    name = node_text(declarator.child_by_field_name("name"))
                    value_scope(declarator.child_by_field_name("value"), anchor, name, scope)
                else:
                    stack.append((target, scope))
            elif kind == "expression_statement" and target.named_child_count == 1:
                expression = target.named_children[0]
                if expression.type == "assignment_expression":
                    left = expression.child_by_field_name("left")
                    value_scope(expression.child_by_field_name("right"), anchor, _js_name(left), ())
                else:
                    stack.append((target, scope))
            elif kind == "pair":
                name = _js_name(target.child_by_field_name("key"))
                value_scope(target.child_by_field_name("value"), anchor, name, scope)
            elif kind in _JS_FUNCTION_VALUES:
                stack.append((target, ()))
            else:
                stack.append((target, scope))
    return in_document_order(found)


# -------------------------------------------------------------------------------------- the language


LANGUAGE = Language(
    name="javascript",
    extensions=(".js",),
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string", "template_string", "regex"}),
    line_comment_markers=("//",),
    statement_lists=frozenset({"program", "statement_block", "class_body"}),
    documentation=Documentation(style="doc_block", prefixes=("/**",)),
    special=SpecialMethods(names=frozenset({"constructor", "toString", "valueOf"})),
    definitions=definitions,
    identifiers=IdentifierRules(analysis=analysis, name_syntax=_JS_NAME, reserved=JS_RESERVED, query=query),
    block_comments=True,
    block_comment_is_newline=True,
    snippet_wrappers=(("", ""), ("class __Snippet {\n", "\n}"), ("({\n", "\n})")),
    dataflow=DataFlowGrammar(
        definitions={"variable_declarator": ("name", "value")},
        assignments=frozenset({"assignment_pattern", "augmented_assignment_expression"}),
        increments=frozenset({"update_expression"}),
        branches=frozenset({"if_statement", "else", "else_clause"}),
        keep_states="always",
        loops=frozenset({"while_statement"}),
        for_loops=frozenset({"for_statement"}),
        for_style="c",
        for_init="variable_declaration",
    ),
)
