"""Go: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
Parsed with ``parse_snippet``. The function or method name is ``fun`` (its occurrences: the
declaration, plain recursive calls of a function, ``recv.Name`` selectors on the receiver of a
method); the receiver and parameters (incl. variadic) are ``arg``; named results and locals are
``var``: short variable declarations (also in ``if`` / ``for`` / ``switch`` initialisers), ``var`` /
``const`` specs, ``range`` keys and values, type-switch aliases, ``select`` receive variables, and
the parameters / locals of function literals (parameters of literals are ``arg``). References are
resolved lexically: a binding is visible inside its enclosing block (or ``if`` / ``for`` / ``switch`` /
case) from the end of its declaration on; parameters and results in the whole function. A name is
left alone, in all its occurrences, if any reference to it is not in reach of a binding (package
names such as ``fmt``, globals, other functions), if it is predeclared (``len``, ``nil``, ``error``,
...), if it is the blank ``_``, or if it appears as a bare key in a composite literal (``T{name: v}``:
the key may be a struct field). Field names after ``.``, types, labels and package names stay.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import Definition, node_text
from csbench.code.identifiers import Blocks, any_kind, assemble, begin_analysis, is_name, resolve
from csbench.code.languages import DataFlowGrammar, Documentation, IdentifierRules, Language, SpecialMethods
from csbench.code.languages.base import Identifiers
from csbench.code.parsing import walk

# ------------------------------------------------------------------------------------- identifiers

GO_KEYWORDS = frozenset(
    [
        "break",
        "case",
        "chan",
        "const",
        "continue",
        "default",
        "defer",
        "else",
        "fallthrough",
        "for",
        "func",
        "go",
        "goto",
        "if",
        "import",
        "interface",
        "map",
        "package",
        "range",
        "return",
        "select",
        "struct",
        "switch",
        "type",
        "var",
    ]
)
GO_PREDECLARED = frozenset(
    [
        "any",
        "append",
        "bool",
        "byte",
        "cap",
        "clear",
        "close",
        "comparable",
        "complex",
        "complex128",
        "complex64",
        "copy",
        "delete",
        "error",
        "false",
        "float32",
        "float64",
        "imag",
        "int",
        "int16",
        "int32",
        "int64",
        "int8",
        "iota",
        "len",
        "make",
        "max",
        "min",
        "new",
        "nil",
        "panic",
        "print",
        "println",
        "real",
        "recover",
        "rune",
        "string",
        "true",
        "uint",
        "uint16",
        "uint32",
        "uint64",
        "uint8",
        "uintptr",
    ]
)
_GO_FUNCTIONS = ("function_declaration", "method_declaration", "func_literal")
_GO_BLOCKS = frozenset(
    {
        "block",
        "if_statement",
        "for_statement",
        "expression_switch_statement",
        "type_switch_statement",
        "select_statement",
        "expression_case",
        "type_case",
        "default_case",
        "communication_case",
        *_GO_FUNCTIONS,
    }
)


def query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{any_kind('go', _GO_BLOCKS - set(_GO_FUNCTIONS))} @block",
            f"{any_kind('go', _GO_FUNCTIONS[:2])} @function",
            "(func_literal) @literal",
            "(identifier) @id",
            "(method_declaration receiver: (parameter_list (_ name: (identifier) @arg)))",
            *[f"({kind} parameters: (parameter_list (_ name: (identifier) @arg)))" for kind in _GO_FUNCTIONS],
            *[f"({kind} result: (parameter_list (_ name: (identifier) @result)))" for kind in _GO_FUNCTIONS],
            "[(short_var_declaration) (range_clause)] @declaration",
            "(receive_statement) @receive",
            "[(var_spec) (const_spec)] @spec",
            "(type_switch_statement) @type_switch",
            "(keyed_element) @keyed",
            "(selector_expression operand: (identifier) field: (field_identifier) @selector)",
        ]
    )


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end, root, data, found, _, function = begin_analysis(snippet, "go")
    # name -> list of (scope start, scope end, visible from)
    bindings: dict[str, list[tuple[int, int, int]]] = {}
    binding_nodes: dict[int, str] = {}  # start byte of a binding identifier -> role
    bad: set[str] = set()
    extra: list[Node] = []  # function-name occurrences that are not identifiers (method name, recursive selectors)
    blocks = Blocks([*found["block"], *found["function"], *found["literal"]], root)

    def text(node: Node) -> str:
        return data[node.start_byte - start : node.end_byte - start].decode("utf-8")

    def bind(node: Node, role: str, scope: tuple[int, int], visible_from: int) -> None:
        if node.type != "identifier" or node.start_byte == node.end_byte:
            return
        bindings.setdefault(text(node), []).append((scope[0], scope[1], visible_from))
        binding_nodes[node.start_byte] = role

    def names_in(node: Node | None) -> list[Node]:
        if node is None:
            return []
        if node.type == "identifier":
            return [node]
        return [child for child in node.named_children if child.type == "identifier"]

    fun_name = None
    receiver = None
    if function is not None:
        name = function.child_by_field_name("name")
        if is_name(name):
            fun_name = text(name)
            extra.append(name)
            bindings.setdefault(fun_name, []).append((0, root.end_byte - root.start_byte + 1, 0))
        recv = function.child_by_field_name("receiver")
        if recv is not None:
            for decl in recv.named_children:
                for item in names_in(decl.child_by_field_name("name")):
                    receiver = text(item)
    if found["arg"] or found["result"]:
        callables = Blocks([*found["function"], *found["literal"]], root)
        for role in ("arg", "result"):
            for node in found[role]:
                if node.start_byte == node.end_byte:  # MISSING
                    continue
                begin, stop = callables.enclosing(node)
                bindings.setdefault(text(node), []).append((begin, stop, begin))
                binding_nodes[node.start_byte] = "arg" if role == "arg" else "var"
    for node in found["declaration"]:
        for item in names_in(node.child_by_field_name("left")):
            bind(item, "var", blocks.enclosing(node), node.end_byte)
    for node in found["receive"]:
        if node.child_by_field_name("left") is not None and b":=" in node.text:
            for item in names_in(node.child_by_field_name("left")):
                bind(item, "var", blocks.enclosing(node), node.end_byte)
    for node in found["spec"]:
        for child in node.children_by_field_name("name"):
            bind(child, "var", blocks.enclosing(node), node.end_byte)
    for node in found["type_switch"]:
        value = node.child_by_field_name("value")
        visible_from = value.end_byte if value is not None else node.start_byte
        for item in names_in(node.child_by_field_name("alias")):
            bind(item, "var", (node.start_byte, node.end_byte), visible_from)
    for node in found["keyed"]:
        key = node.named_children[0] if node.named_child_count else None
        if key is not None and key.type == "literal_element" and key.named_child_count:
            key = key.named_children[0]
        if key is not None and key.type == "identifier":
            bad.add(text(key))
    if function is not None and function.type == "method_declaration" and fun_name is not None:
        encoded = fun_name.encode("utf-8")
        for node in found["selector"]:
            if data[node.start_byte - start : node.end_byte - start] == encoded:
                operand = node.parent.child_by_field_name("operand")
                if text(operand) == receiver:
                    extra.append(node)
    used: set[str] = set()
    spans, roles, _ = resolve(found["id"], snippet, binding_nodes, bindings, bad, used)
    # Plain recursive calls are identifiers, resolved through the function-name binding above.
    if extra:
        found_spans = spans.get(fun_name, [])
        found_spans += [(node.start_byte - start, node.end_byte - start) for node in extra]
        spans[fun_name] = sorted(set(found_spans))  # the name's identifier is among its occurrences
        roles[fun_name] = (extra[0].start_byte, "fun")
    members = frozenset()
    if function is not None and function.type == "method_declaration" and receiver is not None:
        members = frozenset(
            text(node)
            for node in found["selector"]
            if start <= node.start_byte < end and text(node.parent.child_by_field_name("operand")) == receiver
        )
    return assemble(spans, roles, bad, used, _GO_EXCLUDED, members=members), found["comment"]


_GO_EXCLUDED = GO_PREDECLARED | {"_"}


# ------------------------------------------------------------------------------ function extraction


def definitions(root: Node) -> list[Definition]:
    """Top-level ``func`` declarations, and methods as ``Type.Method`` (the receiver's type name,
    pointer and type parameters dropped). Function literals are not definitions."""
    found = []
    for child in root.children:
        name = child.child_by_field_name("name")
        if name is None:
            continue
        if child.type == "function_declaration":
            found.append((child, node_text(name)))
        elif child.type == "method_declaration":
            receiver = child.child_by_field_name("receiver")
            type_name = next((n for n in walk(receiver) if n.type == "type_identifier"), None) if receiver else None
            qualname = f"{node_text(type_name)}.{node_text(name)}" if type_name is not None else node_text(name)
            found.append((child, qualname))
    return found


# -------------------------------------------------------------------------------------- the language


LANGUAGE = Language(
    name="go",
    extensions=(".go",),
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"interpreted_string_literal", "raw_string_literal", "rune_literal"}),
    line_comment_markers=("//",),
    statement_lists=frozenset({"source_file", "block", "statement_list"}),
    documentation=Documentation(
        style="line_block",
        prefixes=("//", "/*"),
        line_marker=re.compile(r"^[ \t]*// ?"),
        # //go:generate, //go:noinline, //line, //export (cgo) are directives, not documentation
        directive=re.compile(r"^[ \t]*//(go:\w|line |export |nolint)"),
    ),
    special=SpecialMethods(names=frozenset({"String", "Error"}), only_methods=True),
    definitions=definitions,
    identifiers=IdentifierRules(
        analysis=analysis,
        name_syntax=str.isidentifier,
        reserved=GO_KEYWORDS | {"_"},
        query=query,
        walked_in_c=False,  # tree-sitter's query cursor is as fast (IdentifierRules.walked_in_c)
    ),
    block_comments=True,
    block_comment_is_newline=True,
    dataflow=DataFlowGrammar(
        definitions={"var_spec": ("name", "value")},
        assignments=frozenset({"assignment_statement"}),
        increments=frozenset({"inc_statement"}),
        branches=frozenset({"if_statement", "else"}),
        keep_states="always",
        for_loops=frozenset({"for_statement"}),
        for_style="go",
    ),
)
