"""PHP: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
The snippet is parsed with ``parse_snippet`` (a lone method gets a class wrapper). Names are stored
without the ``$``; a renaming changes the text after it. The first function / method definition's
name has role ``fun``; its occurrences are the declaration and the recursive calls ``name(...)``
(plain functions), ``$this->name(...)``, ``self::name(...)`` and ``static::name(...)`` (methods;
``parent::name(...)`` is another method and stays). Every ``$variable`` in the snippet is defined
(PHP has no free local variables): parameters of the function, closures and arrow functions are
``arg``, all other variables ``var`` (assignments, ``list()`` / ``[...]`` destructuring, ``foreach``
keys and values, ``catch`` variables, ``static`` variables, closure ``use`` variables, variables
interpolated in strings); a name is renamed in every scope of the snippet at once, which keeps
separate scopes separate. Left alone: ``$this``, superglobals and ``$GLOBALS``, names declared
``global`` anywhere in the snippet, promoted constructor parameters (they are properties), static
properties (``Class::$prop``), property and method names after ``->`` / ``::``, function, class and
constant names, and everything in strings other than interpolated variables. PHP 8 named arguments
(``f(depth: 1)``) in a recursive call name the function's parameters and follow their renaming; in a
call of a closure through a variable (``$fn(q: 1)``) one that names a closure's parameter leaves that
name alone; others stay. A function (not a method) is never renamed onto a PHP keyword.
Knowingly not handled: variable variables (``$$name``), ``compact()`` / ``extract()`` and other
access to variables through strings.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import WALK_INTO, Definition, node_text, walk_definitions
from csbench.code.identifiers import CallSyntax, any_kind, begin_analysis, called_names, is_name
from csbench.code.languages import DataFlowGrammar, Documentation, IdentifierRules, Language, SpecialMethods
from csbench.code.languages.base import Identifiers

# ------------------------------------------------------------------------------------- identifiers


# what a function calls on its object or by name (not its new name)
_PHP_OWN_CALLS = CallSyntax((b"$this", b"self", b"static"), (b"->", b"::"), parenthesized=True)

PHP_SPECIAL_VARIABLES = frozenset(
    {
        "this",
        "GLOBALS",
        "_GET",
        "_POST",
        "_SERVER",
        "_COOKIE",
        "_FILES",
        "_ENV",
        "_REQUEST",
        "_SESSION",
        "http_response_header",
        "argc",
        "argv",
        "php_errormsg",
    }
)
# PHP's reserved keywords (php.net "List of Keywords"): not a function's name, in any case (a
# method's, since PHP 7)
PHP_KEYWORDS = frozenset(
    [
        "__halt_compiler",
        "abstract",
        "and",
        "array",
        "as",
        "break",
        "callable",
        "case",
        "catch",
        "class",
        "clone",
        "const",
        "continue",
        "declare",
        "default",
        "die",
        "do",
        "echo",
        "else",
        "elseif",
        "empty",
        "enddeclare",
        "endfor",
        "endforeach",
        "endif",
        "endswitch",
        "endwhile",
        "enum",
        "eval",
        "exit",
        "extends",
        "final",
        "finally",
        "fn",
        "for",
        "foreach",
        "function",
        "global",
        "goto",
        "if",
        "implements",
        "include",
        "include_once",
        "instanceof",
        "insteadof",
        "interface",
        "isset",
        "list",
        "match",
        "namespace",
        "new",
        "or",
        "print",
        "private",
        "protected",
        "public",
        "readonly",
        "require",
        "require_once",
        "return",
        "static",
        "switch",
        "throw",
        "trait",
        "try",
        "unset",
        "use",
        "var",
        "while",
        "xor",
        "yield",
        "int",
        "float",
        "bool",
        "string",
        "true",
        "false",
        "null",
        "void",
        "iterable",
        "object",
        "mixed",
        "never",
    ]
)
_PHP_FUNCTIONS = ("function_definition", "method_declaration")
_PHP_CALLABLE_PARAMS = ("anonymous_function_creation_expression", "arrow_function", *_PHP_FUNCTIONS)


def query() -> str:
    parameters = "[(simple_parameter (variable_name (name) @param)) (variadic_parameter (variable_name (name) @param))]"
    return "\n".join(
        [
            "(comment) @comment",
            f"{any_kind('php', _PHP_FUNCTIONS)} @function",
            "(function_call_expression function: (name) @function_call)",
            "(member_call_expression name: (name) @member_call)",
            "(scoped_call_expression name: (name) @scoped_call)",
            "(global_declaration (variable_name) @global)",
            "(property_promotion_parameter name: _ @promoted)",
            "(scoped_property_access_expression name: (variable_name (name) @static))",
            # a parameter of a function, method, closure or arrow function (the name's role if it
            # is its first occurrence)
            *[f"({kind} (_ {parameters}))" for kind in _PHP_CALLABLE_PARAMS],
            "(variable_name (name) @variable)",
            "(argument name: (name) @named_argument)",  # PHP 8: f(depth: 1)
        ]
    )


_PHP_CALLS = (
    ("function_call", "function_call_expression"),
    ("member_call", "member_call_expression"),
    ("scoped_call", "scoped_call_expression"),
)


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end, _, data, found, _, function = begin_analysis(snippet, "php")
    spans: dict[str, list[tuple[int, int]]] = {}
    roles: dict[str, str] = {}
    reserved: set[str] = set()
    bad: set[str] = set(PHP_SPECIAL_VARIABLES)
    fun = function.child_by_field_name("name") if function is not None else None
    if not is_name(fun):
        fun = None
    fun_name = fun.text.decode("utf-8") if fun is not None else None
    fun_start = fun.start_byte if fun is not None else -1
    static = {node.start_byte for node in found["static"]}
    params = {node.start_byte for node in found["param"]}
    first_variable: dict[str, int] = {}  # name -> start of its first ``$name`` (the function name may share it)
    for node in found["variable"]:
        position, stop = node.start_byte, node.end_byte
        if position < start or stop > end or position in static or position == stop:
            continue
        name = data[position - start : stop - start].decode("utf-8")
        if name in spans:
            spans[name].append((position, stop))
        else:
            spans[name] = [(position, stop)]
            first_variable[name] = position
            roles[name] = "arg" if position in params else "var"
    if fun_name is not None:
        if fun_name not in first_variable or fun_start < first_variable[fun_name]:
            roles[fun_name] = "fun"  # the name's first occurrence
        spans.setdefault(fun_name, []).append((fun.start_byte, fun.end_byte))
    for capture, kind in _PHP_CALLS:
        for target in found[capture]:
            position, stop = target.start_byte, target.end_byte
            if position < start or stop > end:
                continue
            name = data[position - start : stop - start].decode("utf-8")
            if name == fun_name:
                call = target.parent
                if _php_recursive(call, kind, function):
                    call_start = call.start_byte
                    if call_start < fun_start and first_variable.get(name, call_start + 1) > call_start:
                        raise KeyError(name)  # a recursive call before the function's name (and any ``$name``)
                    spans[name].append((position, stop))
                    continue
            reserved.add(name)  # another function or method: renaming the function onto it would capture it
    if found["named_argument"]:
        _php_named_arguments(found["named_argument"], function, fun_name, found["param"], snippet, spans, bad)
    for node in found["global"]:
        if node.start_byte >= start and node.end_byte <= end:
            bad.add(_php_var(node))
    for node in found["promoted"]:
        if node.start_byte >= start and node.end_byte <= end:
            bad.add(_php_var(node))
    defined = [name for name in spans if name not in bad]
    occurrences = {name: tuple(sorted((a - start, b - start) for a, b in set(spans[name]))) for name in defined}
    names = tuple(sorted(defined, key=lambda name: occurrences[name][0]))
    used = reserved | {name for name in spans if name not in occurrences} | bad
    plain = function is not None and function.type == "function_definition" and fun_name in names
    return Identifiers(
        names=names,
        roles={name: roles[name] for name in names},
        occurrences={name: occurrences[name] for name in names},
        reserved=frozenset(used - set(names)),
        members=called_names(data, occurrences, fun_name, _PHP_OWN_CALLS, found["comment"], start)
        if fun_name in names
        else frozenset(),
        fun_keywords=PHP_KEYWORDS if plain else frozenset(),
    ), found["comment"]


def _php_parameters(function: Node) -> list[Node]:
    """The ``name`` nodes of the plain parameters of ``function`` (a call can name them: not variadic
    or promoted ones)."""
    params = function.child_by_field_name("parameters")
    out = []
    for param in params.named_children if params is not None else ():
        if param.type == "simple_parameter":
            variable = param.child_by_field_name("name")
            if variable is not None and variable.named_child_count:
                out.append(variable.named_children[-1])
    return out


def _php_named_arguments(
    names: list[Node],
    function: Node | None,
    fun_name: str | None,
    params: list[Node],
    snippet: Snippet,
    spans: dict[str, list[tuple[int, int]]],
    bad: set[str],
) -> None:
    """PHP 8 named arguments (``f(depth: 1)``, ``names``: their ``name`` nodes): one that names a
    parameter of the snippet's function in a recursive call (``f(...)``, ``$this->f(...)``,
    ``self::f(...)``, ``static::f(...)``) follows the parameter's renaming (an occurrence of the
    name); one in a call of a closure through a variable (``$fn(q: 1)``) that names a parameter of a
    closure or arrow function of the snippet leaves that name alone; the others are another
    function's parameters and stay."""
    start, end = snippet.offset, snippet.end
    own_nodes = _php_parameters(function) if function is not None else []
    own = {node.text.decode("utf-8") for node in own_nodes}
    closures: set[str] | None = None
    for node in names:
        position, stop = node.start_byte, node.end_byte
        if position < start or stop > end or position == stop:
            continue
        name = node.text.decode("utf-8")
        if name not in spans or name in bad:  # only a renamed variable can break a call
            continue
        arguments = node.parent.parent if node.parent is not None else None
        call = arguments.parent if arguments is not None else None
        if call is None:
            continue
        kind = call.type
        if kind == "function_call_expression":
            callee = call.child_by_field_name("function")
            if callee is not None and callee.type != "name":  # a closure called through a variable
                if closures is None:
                    starts = {item.start_byte for item in own_nodes}
                    closures = {item.text.decode("utf-8") for item in params if item.start_byte not in starts}
                if name in closures:
                    bad.add(name)
                continue
        elif kind in ("member_call_expression", "scoped_call_expression"):
            callee = call.child_by_field_name("name")
        else:  # ``new static(...)`` is the constructor, whatever the method's (renamed) name
            continue
        recursive = callee is not None and function is not None and callee.text.decode("utf-8") == fun_name
        if recursive and name in own and _php_recursive(call, kind, function):
            spans[name].append((position, stop))


def _php_var(node: Node) -> str:
    return node.named_children[-1].text.decode("utf-8") if node.named_children else node.text.decode("utf-8")


def _php_recursive(call: Node, kind: str, function: Node) -> bool:
    if kind == "function_call_expression":
        return function.type == "function_definition"
    if function.type != "method_declaration":
        return False
    if kind == "member_call_expression":
        target = call.child_by_field_name("object")
        return target is not None and target.text == b"$this"
    scope = call.child_by_field_name("scope")
    return scope is not None and scope.text in (b"self", b"static")


# ------------------------------------------------------------------------------ function extraction

_PHP_TYPES = frozenset({"class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"})
_PHP_OPAQUE = {"anonymous_function_creation_expression", "arrow_function", "object_creation_expression"}


def definitions(root: Node) -> list[Definition]:
    """Functions (also inside namespaces and ``if (!function_exists(...))`` blocks) and methods with a
    body of classes, interfaces, traits and enums, as ``Class.method``. Not covered: closures, arrow
    functions, anonymous classes, functions declared inside function bodies."""
    return walk_definitions(root, _PHP_TYPES, _visit_statement)


def _visit_statement(child: Node, scope: tuple[str, ...]) -> str | bool | None:
    if child.type in ("function_definition", "method_declaration"):
        name = child.child_by_field_name("name")
        if name is not None and child.child_by_field_name("body") is not None:
            return ".".join((*scope, node_text(name)))
        return None
    return WALK_INTO if child.type not in _PHP_OPAQUE else None


# -------------------------------------------------------------------------------------- the language

_PHP_NAME = re.compile(r"^[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*$")


LANGUAGE = Language(
    name="php",
    extensions=(".php",),
    comment_types=frozenset({"comment"}),
    string_types=frozenset({"string", "encapsed_string", "heredoc", "nowdoc", "shell_command_expression"}),
    line_comment_markers=("#", "//"),
    statement_lists=frozenset({"program", "compound_statement", "declaration_list"}),
    documentation=Documentation(style="doc_block", prefixes=("/**",)),
    # __construct, __destruct, __toString, __get, ... (magic methods)
    special=SpecialMethods(pattern=re.compile(r"^__\w+$")),
    definitions=definitions,
    identifiers=IdentifierRules(
        analysis=analysis,
        name_syntax=_PHP_NAME,
        reserved=PHP_SPECIAL_VARIABLES | {"this"},
        query=query,
        walked_in_c=False,  # tree-sitter's query cursor is faster (IdentifierRules.walked_in_c)
    ),
    block_comments=True,
    # Code without the open tag is inline HTML to the grammar; methods need a class around them.
    snippet_wrappers=(("<?php\n", ""), ("<?php\nclass __Snippet {\n", "\n}")),
    dataflow=DataFlowGrammar(
        definitions={"simple_parameter": ("name", "default_value")},
        assignments=frozenset({"assignment_expression", "augmented_assignment_expression"}),
        increments=frozenset({"update_expression"}),
        branches=frozenset({"if_statement", "else_clause"}),
        keep_states="always",
        loops=frozenset({"while_statement"}),
        for_loops=frozenset({"for_statement"}),
        for_style="c",
        for_init="assignment_expression",
        foreach_loops=frozenset({"foreach_statement"}),
        foreach_style="php",
    ),
)
