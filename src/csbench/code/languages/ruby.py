"""Ruby: everything csbench knows about the language (``csbench.code.languages``).

Identifier rules
----------------
The method name is ``fun`` (with recursive calls ``name(...)`` / ``self.name``; setter and operator
methods keep their name); parameters are ``arg`` (plain, optional, ``*rest``, keyword -- renaming a
keyword parameter renames it inside the snippet, as for Python keyword-only parameters --, ``**kw``,
``&blk``), block and lambda parameters too (incl. destructured ones); locals are ``var``: assignment
and operator-assignment targets, multiple assignment / destructuring, ``for`` variables and
``rescue => e``. As in Ruby, a local exists from its first assignment on, in its method, block or
lambda (blocks see the enclosing locals). A bare name that is not a local there is a method call: the
name is then left alone in all its occurrences. Method names of calls, constants, instance / class /
global variables (``@x``, ``@@x``, ``$x``), symbols and hash keys stay, except the keys of a recursive
call that name the method's keyword parameters (``f(x, depth: d)``, ``:depth => d``), which follow
them. A method that calls ``super`` keeps its name (``super`` is the parent's method of that name); a
bare ``super`` passes the keyword parameters on by name, which then keep theirs; a keyword parameter
of a block or lambda that any hash key of the snippet names keeps its name.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.comments import Snippet
from csbench.code.extract import Definition, in_document_order, node_text
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
from csbench.code.languages.base import Identifiers, Scopes, Spans
from csbench.code.parsing import walk

# ------------------------------------------------------------------------------------- identifiers

_RUBY_NAME = re.compile(r"^[a-z_][A-Za-z0-9_]*$")

_RUBY_CALLS = CallSyntax((b"self",), (b".",), parenthesized=False)  # what a method calls (not its new name)

RUBY_KEYWORDS = frozenset(
    [
        "BEGIN",
        "END",
        "alias",
        "and",
        "begin",
        "break",
        "case",
        "class",
        "def",
        "defined?",
        "do",
        "else",
        "elsif",
        "end",
        "ensure",
        "false",
        "for",
        "if",
        "in",
        "module",
        "next",
        "nil",
        "not",
        "or",
        "redo",
        "rescue",
        "retry",
        "return",
        "self",
        "super",
        "then",
        "true",
        "undef",
        "unless",
        "until",
        "when",
        "while",
        "yield",
        "__FILE__",
        "__LINE__",
        "__ENCODING__",
        "__method__",
        "binding",
        "block_given?",
        "loop",
    ]
)
_RUBY_SCOPES = frozenset({"method", "singleton_method", "block", "do_block", "lambda", "program"})
_RUBY_PARAM_LISTS = frozenset({"method_parameters", "block_parameters", "lambda_parameters"})


def query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{any_kind('ruby', _RUBY_SCOPES - {'program'})} @scope",  # the program is the root
            "[(method) (singleton_method)] @function",
            "(identifier) @id",
            f"{any_kind('ruby', _RUBY_PARAM_LISTS)} @parameters",
            "[(assignment left: _ @left) (operator_assignment left: _ @left)]",
            "(for) @for",
            "(exception_variable) @exception",
            "[(method name: _ @nv) (singleton_method name: _ @nv)]",
            "(call method: (identifier) @call)",
            "(super) @super",
        ]
    )


_RUBY_COMPOUND = frozenset(
    {
        "left_assignment_list",
        "destructured_left_assignment",
        "rest_assignment",
        "destructured_parameter",
        "splat_parameter",
        "hash_splat_parameter",
        "block_parameter",
        "optional_parameter",
        "keyword_parameter",
        "exception_variable",
    }
)


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end, root, data, found, _, function = begin_analysis(snippet, "ruby")
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    extra: list[Node] = []
    enclosing = Blocks(found["scope"], root).enclosing  # _RUBY_SCOPES; the root is the program

    def text(node: Node) -> str:
        return data[node.start_byte - start : node.end_byte - start].decode("utf-8")

    def bind(target: Node | None, role: str, scope: tuple[int, int], visible_from: int) -> None:
        # iterative: a recursive closure would be a reference cycle, left for the cyclic garbage
        # collector (which the attacks pause) with everything it holds
        stack = [(target, visible_from)]
        while stack:
            node, visible = stack.pop()
            if node is None:
                continue
            kind = node.type
            if kind == "identifier":
                if node.start_byte == node.end_byte:  # MISSING
                    continue
                scopes.setdefault(text(node), []).append((scope[0], scope[1], visible))
                binding_roles[node.start_byte] = role
            elif kind in _RUBY_COMPOUND:
                inner = visible if role == "var" else scope[0]
                parts = [
                    (child, inner)
                    for index, child in enumerate(node.children)
                    if node.field_name_for_child(index) in (None, "name") and child.is_named
                ]
                stack += reversed(parts)

    fun_name = None
    if function is not None:
        name = function.child_by_field_name("name")
        if is_name(name) and name.type == "identifier":
            fun_name = text(name)
            extra.append(name)
    for node in found["parameters"]:
        owner = node.parent
        if owner is None:
            owner = root
        scope = (owner.start_byte, owner.end_byte)
        for child in node.named_children:
            bind(child, "arg", scope, scope[0])
    for left in found["left"]:
        bind(left, "var", enclosing(left), left.start_byte)
    for node in found["for"]:
        bind(node.child_by_field_name("pattern"), "var", enclosing(node), node.start_byte)
    for node in found["exception"]:
        bind(node, "var", enclosing(node), node.start_byte)
    calls = found["call"]
    if calls:
        non_variables.update([node.start_byte for node in calls])
        if fun_name is not None:
            for method in calls:
                if text(method) == fun_name:
                    receiver = method.parent.child_by_field_name("receiver")
                    if receiver is None or receiver.type == "self":
                        extra.append(method)
    bad: set[str] = set()
    used: set[str] = set()
    spans, roles, unresolved = resolve(found["id"], snippet, binding_roles, scopes, bad, used, non_variables, fun_name)
    for node in unresolved:  # the method's name where no local is in reach: a bare recursive call?
        parent = node.parent
        if parent is not None and parent.type != "call":
            extra.append(node)  # a bare recursive call without arguments
        else:
            bad.add(fun_name)
    if function is not None or len(found["parameters"]) > 0:
        _ruby_keyword_arguments(function, extra, found, snippet, spans, bad)
    if fun_name is not None and any(start <= node.start_byte < end for node in found["super"]):
        bad.add(fun_name)  # ``super`` calls the parent's method of the method's own name
    add_method_name(fun_name, extra, start, spans, roles, bad)
    members = called_names(data, spans, fun_name, _RUBY_CALLS, found["comment"], start) if fun_name else frozenset()
    return assemble(spans, roles, bad, used, RUBY_KEYWORDS, members=members), found["comment"]


def _ruby_keyword_names(parameters: Node | None) -> set[str]:
    """The names of the keyword parameters (``depth:``) of a parameter list."""
    names = set()
    for param in parameters.named_children if parameters is not None else ():
        if param.type == "keyword_parameter":
            name = param.child_by_field_name("name")
            if is_name(name):
                names.add(name.text.decode("utf-8"))
    return names


def _ruby_hash_key(key: Node) -> tuple[str, int, int] | None:
    """The symbol a hash key names and the span of its name: ``depth:``, ``:depth =>``, ``"depth":``."""
    kind = key.type
    if kind == "hash_key_symbol":
        return key.text.decode("utf-8"), key.start_byte, key.end_byte
    if kind == "simple_symbol":
        return key.text.decode("utf-8")[1:], key.start_byte + 1, key.end_byte
    if kind in ("string", "delimited_symbol"):
        return key.text.decode("utf-8").strip(":\"'"), -1, -1  # (a name, never an occurrence)
    return None


def _ruby_keyword_arguments(
    function: Node | None,
    extra: list[Node],
    found: dict[str, list[Node]],
    snippet: Snippet,
    spans: Spans,
    bad: set[str],
) -> None:
    """Keyword arguments: in a recursive call (``extra``: the method's name in its calls), a key that
    names a keyword parameter of the method (``f(x, depth: d)``, ``:depth => d``) follows the
    parameter's renaming; other keys are data or another method's keywords and stay. Left alone: the
    keyword parameters of a method that calls ``super`` without arguments (Ruby passes them on by
    name), and a keyword parameter of a block or lambda that any hash key of the snippet names (a
    call of the lambda, ``l.(k: 1)``, cannot be told from other calls)."""
    start, end = snippet.offset, snippet.end
    own = _ruby_keyword_names(function.child_by_field_name("parameters")) if function is not None else set()
    if own:
        for node in found["super"]:
            parent = node.parent
            explicit = (
                parent is not None
                and parent.type == "call"
                and parent.child_by_field_name("method") == node
                and parent.child_by_field_name("arguments") is not None
            )
            if not explicit and start <= node.start_byte < end:
                bad.update(own)  # zsuper: passes the keyword parameters on under their names
        for node in extra:
            call = node.parent
            if call is None or call.type != "call" or call.child_by_field_name("method") != node:
                continue
            arguments = call.child_by_field_name("arguments")
            for pair in arguments.named_children if arguments is not None else ():
                key = pair.child_by_field_name("key") if pair.type == "pair" else None
                named = _ruby_hash_key(key) if key is not None else None
                if named is None or named[0] not in own or named[0] in bad or named[0] not in spans:
                    continue
                name, first, last = named
                if first < 0:
                    bad.add(name)
                else:
                    spans[name].append((first - start, last - start))
                    spans[name].sort()
    blocks: set[str] = set()
    for parameters in found["parameters"]:
        if parameters.type != "method_parameters":
            blocks |= _ruby_keyword_names(parameters)
    if blocks:
        for node in walk(snippet.tree.root_node):
            if node.type == "pair":
                key = node.child_by_field_name("key")
                named = _ruby_hash_key(key) if key is not None else None
                if named is not None and named[0] in blocks:
                    bad.add(named[0])


# ------------------------------------------------------------------------------ function extraction


def definitions(root: Node) -> list[Definition]:
    """``def`` methods in classes and modules (``Module.Class.method``, ``::`` written ``.``),
    ``def self.x`` / ``class << self`` singleton methods (``Class.x``), top-level methods, and
    methods defined in blocks or conditionals at class level. Not covered: ``define_method``, methods
    nested in method bodies, ``attr_*`` accessors."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in node.children:
            if child.type in ("class", "module"):
                name = node_text(child.child_by_field_name("name")).replace("::", ".")
                stack.append((child, (*scope, name) if name else scope))
            elif child.type == "method":
                found.append((child, ".".join((*scope, node_text(child.child_by_field_name("name"))))))
            elif child.type == "singleton_method":
                owner = child.child_by_field_name("object")
                prefix = scope if owner is None or owner.type == "self" else (node_text(owner).replace("::", "."),)
                found.append((child, ".".join((*prefix, node_text(child.child_by_field_name("name"))))))
            elif child.type != "comment":
                stack.append((child, scope))
    return in_document_order(found)


# -------------------------------------------------------------------------------------- the language


LANGUAGE = Language(
    name="ruby",
    extensions=(".rb",),
    comment_types=frozenset({"comment"}),  # =begin ... =end blocks are comment nodes too
    string_types=frozenset(
        {"string", "heredoc_body", "regex", "subshell", "character", "simple_symbol", "delimited_symbol"}
    ),
    line_comment_markers=("#",),
    statement_lists=frozenset({"program", "body_statement", "block_body", "then", "else", "do"}),
    documentation=Documentation(
        style="line_block",
        prefixes=("#",),
        line_marker=re.compile(r"^[ \t]*# ?"),
        directive=re.compile(r"^[ \t]*#[ \t]*(rubocop:|frozen_string_literal:|:nodoc:|--$|\+\+$)"),
    ),
    special=SpecialMethods(names=frozenset({"initialize", "to_s", "inspect", "==", "hash", "eql?", "<=>"})),
    definitions=definitions,
    identifiers=IdentifierRules(analysis=analysis, name_syntax=_RUBY_NAME, reserved=RUBY_KEYWORDS, query=query),
    dataflow=DataFlowGrammar(
        definitions={"keyword_parameter": ("name", "value")},
        paired_assignments=frozenset({"assignment", "operator_assignment"}),
        branches=frozenset({"if", "elsif", "else", "unless", "when"}),
        branch_style="clauses",
        branch_clauses=frozenset({"if", "elsif", "else", "unless", "when"}),
        keep_states="without_else",
        loops=frozenset({"while_modifier", "until"}),
        for_loops=frozenset({"for"}),
        for_style="ruby",
    ),
)
