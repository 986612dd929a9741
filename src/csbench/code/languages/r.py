"""R: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
A snippet ``name <- function(...)`` (also ``=``) has ``fun`` = ``name`` (recursive calls included);
parameters of every ``function`` / ``\\(x)`` lambda are ``arg`` (plain and with defaults; ``...`` stays);
locals are ``var``: targets of ``<-``, ``=``, ``->`` and ``for`` variables, visible in their function from
the assignment on; ``<<-`` targets are renamed only if an enclosing function of the snippet defines
them. A name is left alone, in all its occurrences, if any reference to it is not in reach of a
binding (globals, library functions, ``T``/``F``, ...), or if it is ever written in backticks.
Names after ``$`` and ``@``, ``pkg::`` qualified names, argument names in calls (``f(x = 1)``),
``..1`` and strings stay, except argument names in a call of a function of the snippet bound once
(the snippet's function, a local ``helper <- function(...)``, ``Recall(...)``) that name one of its
formals: those follow the formal. Formals that a call's argument name is a strict prefix of (R matches
prefixes), and formals named by arguments passed on to a snippet function (``lapply(xs, helper, w =
k)``, ``do.call(helper, list(w = 1))``, ``sapply(x, function(v, k) v + k, k = 2)``) keep their names.
Knowingly not handled: non-standard evaluation (formulas, ``dplyr`` column names, ``with()``,
``match.call()``) and ``assign()`` / ``get()`` with names in strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import Definition, in_document_order, node_text
from csbench.code.identifiers import Blocks, any_kind, assemble, begin_analysis, is_name, preorder, resolve
from csbench.code.languages import Documentation, IdentifierRules, Language
from csbench.code.languages.base import Identifiers, Scopes, Spans

# ------------------------------------------------------------------------------------- identifiers

_R_NAME = re.compile(r"^(?:[A-Za-z]|\.[A-Za-z_.])[A-Za-z0-9._]*$|^[A-Za-z]$")
R_RESERVED = frozenset(
    [
        "if",
        "else",
        "repeat",
        "while",
        "function",
        "for",
        "next",
        "break",
        "TRUE",
        "FALSE",
        "NULL",
        "Inf",
        "NaN",
        "NA",
        "NA_integer_",
        "NA_real_",
        "NA_character_",
        "NA_complex_",
        "in",
    ]
)
_R_FUNCTIONS = frozenset({"function_definition", "lambda_function"})
_R_ASSIGNMENTS = frozenset({"left_assignment", "equals_assignment", "right_assignment"})


def query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{any_kind('r', _R_FUNCTIONS)} @function",
            f"{any_kind('r', _R_ASSIGNMENTS)} @assignment",
            "(identifier) @id",
            *[f"({kind} (formal_parameters) @parameters)" for kind in sorted(_R_FUNCTIONS)],
            "(super_assignment name: _ @super)",
            "(for) @for",
            "[(dollar) (slot)] @member",
            "[(namespace_get) (namespace_get_internal)] @namespace",
            "(default_argument name: _ @nv)",
        ]
    )


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end, root, data, found, _, _ = begin_analysis(snippet, "r", with_function=False)
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    bad: set[str] = set()
    enclosing = Blocks(found["function"], root).enclosing  # _R_FUNCTIONS; else the root

    def text(node: Node) -> str:
        return data[node.start_byte - start : node.end_byte - start].decode("utf-8")

    def bind(node: Node | None, role: str, scope: tuple[int, int], visible_from: int) -> None:
        if not is_name(node) or node.type != "identifier":
            return
        scopes.setdefault(text(node), []).append((scope[0], scope[1], visible_from))
        binding_roles[node.start_byte] = role

    assignments = found["assignment"]
    if start or root.end_byte > end:  # (R code is parsed without a wrapper: every node is the snippet's)
        assignments = [node for node in assignments if node.start_byte >= start and node.end_byte <= end]
    top = min(assignments, key=preorder) if assignments else None
    fun = None
    if top is not None and top.parent == root:
        value = top.child_by_field_name("value")
        if value is not None and value.type in _R_FUNCTIONS:
            fun = top.child_by_field_name("name")
            if is_name(fun) and fun.type == "identifier":
                bind(fun, "fun", (root.start_byte, root.end_byte), 0)
    for params in found["parameters"]:
        begin, _ = scope = enclosing(params)
        for child in params.named_children:
            target = child.child_by_field_name("name") if child.type == "default_parameter" else child
            bind(target, "arg", scope, begin)
    for node in assignments:
        if fun is not None and node == top:
            continue
        name = node.child_by_field_name("name")
        if name is not None and not (node.type == "equals_assignment" and node.parent.type == "arguments"):
            bind(name, "var", enclosing(node), name.start_byte)
    for node in found["for"]:
        bind(node.child_by_field_name("name"), "var", enclosing(node), node.start_byte)
    for node in found["member"]:
        children = node.named_children
        if len(children) >= 2 and children[-1].type == "identifier":
            non_variables.add(children[-1].start_byte)
    for node in found["namespace"]:
        non_variables.update([child.start_byte for child in node.named_children])
    ids = found["id"]
    tick = data.find(b"`")
    while tick != -1:  # a name ever written in backticks is left alone, with and without them
        # the identifier starting at the backtick, if any (most backticks are in roxygen comments)
        node = root.named_descendant_for_byte_range(start + tick, start + tick + 1)
        if node is not None and node.type == "identifier" and node.start_byte == start + tick and node.end_byte <= end:
            name = text(node)
            bad.update({name, name.strip("`")})
        tick = data.find(b"`", tick + 1)
    if found["super"]:
        _r_super_assignments(found["super"], ids, text, enclosing, scopes, binding_roles, non_variables, bad)
    used: set[str] = set()
    spans, roles, _ = resolve(ids, snippet, binding_roles, scopes, bad, used, non_variables)
    if found["nv"]:
        _r_named_arguments(found["nv"], assignments, found, text, snippet, spans, bad)
    return assemble(spans, roles, bad, used, _R_EXCLUDED), found["comment"]


def _r_formals(function: Node) -> list[str]:
    """The names of the formal parameters of an R ``function`` / ``\\(x)`` (``...`` included)."""
    names = []
    for child in function.named_children:
        if child.type == "formal_parameters":
            for param in child.named_children:
                target = param.child_by_field_name("name") if param.type == "default_parameter" else param
                if is_name(target):
                    names.append(target.text.decode("utf-8"))
            break
    return names


_R_ARGUMENT_LISTS = frozenset({"list", "c", "alist", "pairlist"})


def _r_named_arguments(
    names: list[Node],
    assignments: list[Node],
    found: dict[str, list[Node]],
    text: Callable[[Node], str],
    snippet: Snippet,
    spans: Spans,
    bad: set[str],
) -> None:
    """Named arguments in calls (``f(x, depth = d)``; ``names``: their names). R matches them to the
    callee's formals by exact name, then by unique prefix. In a call of a function the snippet defines
    (the snippet's function, a local ``helper <- function(...)``, ``Recall(...)``), bound once in the
    snippet: a name that is one of its formals follows the formal's renaming; formals that a name is a
    strict prefix of are left alone. Where such a function is bound more than once, or is an argument
    of the call, or of the call whose ``list(...)`` / ``c(...)`` holds the names (``lapply(xs, helper,
    depth = 1)``, ``do.call(helper, list(depth = 1))``, ``sapply(x, function(v, k) v + k, k = 2)``),
    its formals that a name matches are left alone. Other named arguments are another function's."""
    start = snippet.offset
    data = snippet.data
    if len(found["function"]) < 2 and b"Recall" not in data:  # no function but the snippet's own:
        # its named arguments matter only in calls of it, where its name occurs again
        assigned = [node.child_by_field_name("name") for node in assignments[:1]]
        if not any(
            is_name(name) and data.count(data[name.start_byte - start : name.end_byte - start]) > 1 for name in assigned
        ):
            return
    functions: dict[str, list[Node]] = {}
    bound: dict[str, int] = {}
    for node in assignments:
        name = node.child_by_field_name("name")
        if not is_name(name) or name.type != "identifier":
            continue
        key = text(name)
        bound[key] = bound.get(key, 0) + 1
        value = node.child_by_field_name("value")
        if value is not None and value.type in _R_FUNCTIONS:
            functions.setdefault(key, []).append(value)
    formals_of: dict[int, list[str]] = {}

    def formals(function: Node) -> list[str]:
        if function.id not in formals_of:
            formals_of[function.id] = _r_formals(function)
        return formals_of[function.id]

    def matched(name: str, function: Node) -> list[str]:  # the formals ``name`` matches
        return [formal for formal in formals(function) if formal.startswith(name) and formal != "..."]

    # a named argument matters only if it is (a prefix of) a formal of a function of the snippet
    prefixes = set()
    for params in found["parameters"]:
        for formal in _r_formals(params.parent):
            prefixes.update(formal[:cut] for cut in range(1, len(formal) + 1))
    passed_to: dict[int, list[Node]] = {}

    def passed(call: Node) -> list[Node]:  # the snippet's functions among the call's arguments
        if call.id in passed_to:
            return passed_to[call.id]
        arguments = call.child_by_field_name("arguments")
        out = passed_to[call.id] = []
        for argument in arguments.named_children if arguments is not None else ():
            value = argument.child_by_field_name("value") if argument.type == "default_argument" else argument
            if value is None:
                continue
            if value.type in _R_FUNCTIONS:
                out.append(value)
            elif value.type == "identifier":
                out += functions.get(text(value), [])
        return out

    for node in names:
        argument = node.parent
        arguments = argument.parent if argument is not None else None
        call = arguments.parent if arguments is not None else None
        if call is None or call.type != "call" or not is_name(node) or node.type != "identifier":
            continue
        name = text(node)
        if name not in prefixes:
            continue
        callee = call.child_by_field_name("function")
        own: list[Node] = []
        certain = False
        if callee is not None and callee.type == "identifier":
            called = text(callee)
            if called == "Recall":  # the function the call is in
                enclosing = call.parent
                while enclosing is not None and enclosing.type not in _R_FUNCTIONS:
                    enclosing = enclosing.parent
                own, certain = ([enclosing], True) if enclosing is not None else ([], False)
            elif called in functions:
                own = functions[called]
                certain = len(own) == 1 and bound.get(called) == 1
        if own:
            if certain and name in formals(own[0]):
                if name in spans and name not in bad:
                    spans[name].append((node.start_byte - start, node.end_byte - start))
                    spans[name].sort()
                continue
            for function in own:
                bad.update(matched(name, function))
            continue
        receivers = list(passed(call))
        outer = call.parent.parent if call.parent is not None else None  # arguments / default_argument
        if callee is not None and callee.type == "identifier" and text(callee) in _R_ARGUMENT_LISTS:
            while outer is not None and outer.type not in ("call", "program"):
                outer = outer.parent
            if outer is not None and outer.type == "call":
                receivers += passed(outer)
        for function in receivers:
            bad.update(matched(name, function))


def _r_super_assignments(
    targets: list[Node],
    ids: list[Node],
    text: Callable[[Node], str],
    enclosing: Callable[[Node], tuple[int, int]],
    scopes: Scopes,
    binding_roles: dict[int, str],
    non_variables: set[int],
    bad: set[str],
) -> None:
    """``<<-`` assigns in an enclosing function: the identifier starting where its target starts is
    renamed only if a function around this one (of the snippet) binds it: it then resolves (whatever
    the ordinary reach, ``binding_roles``), else its name is left alone (``bad``)."""
    by_start: dict[int, Node] | None = None
    for target in targets:
        position = target.start_byte
        if position in non_variables:
            continue
        if target.type == "identifier":
            node = target
        else:  # ``x$y <<- v``, ``names(x) <<- v``: the identifier it starts with, if any
            if by_start is None:
                by_start = {node.start_byte: node for node in ids}
            node = by_start.get(position)
            if node is None:
                continue
        name = text(node)
        own = enclosing(node)[0]
        if any(a <= position < b and a < own for a, b, _ in scopes.get(name, ())):
            binding_roles.setdefault(position, "")
        else:
            bad.add(name)


_R_EXCLUDED = R_RESERVED | {"..."}


# ------------------------------------------------------------------------------ function extraction

_R_DEFINING_ASSIGNMENTS = {"left_assignment", "equals_assignment", "super_assignment"}


def definitions(root: Node) -> list[Definition]:
    """``name <- function(...)``, ``name = function(...)`` and ``name <<- function(...)`` outside
    function bodies (top level, or in ``if`` / ``local`` blocks); the name as written, backticks and
    quotes dropped (``print.foo`` is one name, not a method ``foo``). Not covered: ``function(...) -> name``,
    functions in lists (``list(f = function...)``), ``setMethod`` / ``R6Class`` methods."""
    found: list[Definition] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.type in _R_DEFINING_ASSIGNMENTS:
                value = child.child_by_field_name("value")
                if value is not None and value.type == "function_definition":
                    name = node_text(child.child_by_field_name("name")).strip("`'\"")
                    if name:
                        found.append((child, name))
                    continue
            if child.type != "function_definition":
                stack.append(child)
    return in_document_order(found)


# -------------------------------------------------------------------------------------- the language


LANGUAGE = Language(
    name="r",
    extensions=(".R", ".r"),
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string"}),
    line_comment_markers=("#",),
    statement_lists=frozenset({"program", "brace_list", "braced_expression"}),
    documentation=Documentation(
        style="line_block",
        prefixes=("#",),
        line_marker=re.compile(r"^[ \t]*#+'? ?"),  # roxygen #' and plain # / ## comments
        directive=re.compile(r"^[ \t]*#[ \t]*nolint"),
    ),
    definitions=definitions,
    # the walk: see ``csbench.code.identifiers._capturer``
    identifiers=IdentifierRules(analysis=analysis, name_syntax=_R_NAME, reserved=R_RESERVED, query=query, walked=True),
    qualified_names=False,
)
