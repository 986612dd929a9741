"""Python's identifier analysis: a walk over the named nodes of the tree that follows Python's
scoping (the other languages match one tree-sitter query instead). Part of
``csbench.code.languages.python``, in its own module for its size; the rules:

Scopes follow Python: the module (holds the snippet's own function name), functions, lambdas,
comprehensions and class bodies. Bindings are parameters (plain, typed, defaults, ``*args``,
``**kwargs``, keyword-only), assignment / annotated / augmented assignment targets including tuple and
list unpacking and starred targets, ``for`` targets, ``with ... as``, ``except ... as``, comprehension
variables, walrus targets (bound in the enclosing function, as Python does), ``del`` targets and the
names of nested functions (role ``var``, since they are locals of the outer function; their parameters
are ``arg``). Default values, annotations and decorators are resolved in the enclosing scope, and so is
the first iterable of a comprehension. Every occurrence of a name in a variable position is resolved
like Python does (local if bound in the scope, ``global`` -> module, ``nonlocal`` and free names ->
enclosing function scopes, class bodies skipped for nested scopes).

A name is *defined* (renameable) only if **every** occurrence of it in the snippet resolves to a
renameable binding inside the snippet. A name is left alone, with all its occurrences, if any
occurrence is: free (global, library call, builtin), bound by an import, bound in a class body or as a
class name (those are attributes / type names), declared ``global``, inside a ``case`` pattern of a
``match`` statement, or if the name is a builtin (``dir(builtins)``, even when shadowed locally).
Attributes (``x.attr``: only ``x`` can be renamed), keyword-argument names in calls (``f(key=1)``),
keywords, and text in strings and comments are not identifiers, with two exceptions below; names
inside f-string interpolations are ordinary occurrences and are renamed.

Methods: a top-level definition whose first parameter is ``self`` / ``cls`` (``mcs``, ``mcls``,
``metacls``), or that has a method decorator (``staticmethod``, ``classmethod``, ``property``,
``x.setter``, ...), is a method: its name is a class member, not a variable of its body, so a bare use
of the name (``def copy(self): return copy.copy(self)``) is a global and the name is left alone;
``receiver.name`` with the receiver parameter (``self.name(...)``) is the method itself and is renamed
with it (unless the snippet assigns such an attribute). ``self`` and ``cls`` are parameters and are
renamed like any parameter (the thesis renames "all function names, arguments, and variables",
section 3.3.2), except in a method whose body uses its own name: there the receiver keeps its name,
which is what shows the code is a method when the renamed code is analysed again (a composed attack).

Call keywords: a keyword argument that names a parameter of the snippet's function the call calls (a
recursive ``f(x, depth=d)``, ``self.f(depth=d)``, a nested function or a ``name = lambda``, the name
bound once in its scope) is an occurrence of that parameter's name; positional-only parameters and
``**kwargs`` take none. A keyword that names a parameter of a snippet function the analysis cannot tie
the call to (the name bound more than once; a method's own bare name, the global or, were the snippet
a plain function, itself; a call that gets the function as an argument, ``functools.partial(f,
depth=1)``) leaves that parameter's name alone.

Knowingly not handled: dynamic name access (``locals()``, ``vars()``, ``getattr(self, "name")``,
``eval``/``exec`` strings, ``**locals()`` formatting) -- renaming keeps the syntax tree equal up to
renaming but may change behaviour of such code; methods whose receiver is not named as above and
that carry no method decorator are analysed as plain functions; a method called through its class or
another object (``Class.f(depth=d)``); Python 2 only syntax that tree-sitter parses with errors is
analysed on the error-recovered tree (names in ``ERROR`` nodes are treated as references).
"""

from __future__ import annotations

import builtins
import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

from tree_sitter import Node

from csbench.code import treequery
from csbench.code.comments import Snippet
from csbench.code.identifiers import Identifiers, assemble, is_name, tree_sitter_language

PYTHON_BUILTINS = frozenset(dir(builtins))


def analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    """The identifiers ``snippet`` defines, and its comment nodes (``Language.identifiers``)."""
    analyzer = _PythonAnalyzer(snippet)
    return analyzer.run(), analyzer.comment_nodes()


class _Scope:
    __slots__ = ("bindings", "globals", "kind", "nonlocals", "parent")

    def __init__(self, kind: str, parent: _Scope | None) -> None:
        self.kind = kind  # module | function | class | comprehension
        self.parent = parent
        self.bindings: dict[str, str] = {}  # name -> role, or "" for a binding that must be left alone
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()

    def bind(self, name: str, role: str) -> None:
        old = self.bindings.get(name)
        if old is None:
            self.bindings[name] = role
        elif old and not role:
            self.bindings[name] = ""

    def function_scope(self) -> _Scope:
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope


_PATTERN_CONTAINERS = frozenset(
    {"pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "expression_list", "parenthesized_expression"}
)
_SPLATS = frozenset({"list_splat_pattern", "list_splat", "dictionary_splat_pattern"})
# named nodes that never have a name below them
_PY_NO_NAMES = frozenset(
    {
        "comment",
        "integer",
        "float",
        "none",
        "true",
        "false",
        "ellipsis",
        "escape_sequence",
        "string_content",
        "string_start",
        "string_end",
        "type_conversion",
        "line_continuation",
    }
)
_COMPREHENSIONS = frozenset(
    {"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"}
)


# A top-level definition is a method (its name is not a variable of its body) if its first parameter
# has one of these names, or if a decorator's last name is one of the others (``@x.setter``).
RECEIVERS = frozenset({"self", "cls", "mcs", "mcls", "metacls"})
METHOD_DECORATORS = frozenset(
    {
        "staticmethod",
        "classmethod",
        "property",
        "cached_property",
        "abstractmethod",
        "abstractproperty",
        "abstractclassmethod",
        "abstractstaticmethod",
        "setter",
        "getter",
        "deleter",
    }
)
_PARAMETER_WITH_NAME = frozenset({"default_parameter", "typed_default_parameter", "typed_parameter"})
_RECEIVER_AT = re.compile(rb"\(\s*(%s)(?![\w\x80-\xff])" % b"|".join(sorted(name.encode() for name in RECEIVERS)))


class _Method(NamedTuple):
    """A top-level method of the snippet: its name, the name of its receiver parameter (``""`` for a
    static method), the scope of its body and its definition."""

    name: bytes
    receiver: str
    scope: _Scope
    node: Node


def _parameter_name(param: Node) -> Node | None:
    """The identifier a parameter binds (``None`` for splats, separators, tuple parameters)."""
    kind = param.type
    if kind == "identifier":
        return param
    if kind in _PARAMETER_WITH_NAME:
        name = param.child_by_field_name("name") or (param.named_children[0] if param.named_child_count else None)
        return name if name is not None and name.type == "identifier" else None
    return None


def _method_receiver(function: Node, params: Node | None, data: bytes) -> str | None:
    """For a top-level ``function_definition``: ``None`` if it is a plain function, else it is a method
    and this is the name of its receiver (first parameter ``self`` / ``cls``), or ``""`` for one known
    only by its decorator (``@staticmethod``)."""
    if params is None:
        return None
    found = _RECEIVER_AT.match(data, params.start_byte)  # ``(self``, ``(self: T``: the first parameter
    if found is not None:
        return found.group(1).decode("utf-8")
    if not data[: function.start_byte].strip():  # nothing before ``def``: no decorator
        return None
    first = params.named_child(0) if params.named_child_count else None
    parent = function.parent
    if parent is not None and parent.type == "decorated_definition":
        for decorator in parent.named_children:
            if decorator.type == "decorator":
                last = decorator.text.decode("utf-8").lstrip("@").strip().rsplit(".", 1)[-1]
                if last in METHOD_DECORATORS:
                    name = _parameter_name(first) if first is not None else None
                    if last == "staticmethod" or name is None:
                        return ""
                    return data[name.start_byte : name.end_byte].decode("utf-8")
    return None


def _keyword_parameters(function: Node, data: bytes, methods: Sequence[_Method]) -> frozenset[str]:
    """The names a call may pass by keyword to ``function`` (a ``function_definition`` or ``lambda``):
    its parameters except positional-only ones, splats and a method's receiver."""
    params = function.child_by_field_name("parameters")
    names: list[str] = []
    if params is None:
        return frozenset()
    for param in params.named_children:
        if param.type == "positional_separator":  # the ones before ``/`` are positional-only
            names.clear()
            continue
        name = _parameter_name(param)
        if name is not None:
            names.append(data[name.start_byte : name.end_byte].decode("utf-8"))
    receivers = {method.receiver for method in methods if method.node == function}
    return frozenset(names).difference(receivers)


class _PythonAnalyzer:
    # what calls need (``_follow_calls``), set up when a snippet has a method (most have none): its
    # top-level methods, their names and receivers, the spans of ``.x`` after a receiver, the
    # ``receiver.name`` accesses of a method's own name and the attributes assigned, the methods
    # reached through their receiver
    methods: list[_Method] = ()  # type: ignore[assignment]
    method_names: tuple[bytes, ...] = ()
    receivers: tuple[bytes, ...] = ()  # ``self.``
    members: list[tuple[int, int]] = ()  # type: ignore[assignment]
    receiver_attributes: list[tuple[Node, _Method, _Scope]] = ()  # type: ignore[assignment]
    stored_attributes: set[int] = frozenset()  # type: ignore[assignment]
    dependent: set[bytes] = frozenset()  # type: ignore[assignment]

    def __init__(self, snippet: Snippet) -> None:
        self.data = snippet.data
        self.root = snippet.tree.root_node
        # (node, scope, role or None for a reference, excluded-binding flag)
        self.occ: list[tuple[Node, _Scope, str | None]] = []
        self.excluded: set[str] = set()
        # met on the way, for the comment removal: comments, and the nodes that may own a docstring
        self.comments: list[Node] = []
        self.owners: list[Node] = [self.root]
        # the callables bound to a name (defs, ``name = lambda ...``): (scope, name, definition), and
        # the keyword arguments met, with their scope (``_follow_calls``)
        self.callables: list[tuple[_Scope, Node, Node]] = []
        self.keywords: list[tuple[Node, _Scope]] = []

    # -- collection

    def ref(self, node: Node, scope: _Scope) -> None:
        self.occ.append((node, scope, None))

    def bind(self, node: Node, scope: _Scope, role: str) -> None:
        """``role`` empty: a binding that must be left alone (import, class body, class name)."""
        if scope.kind == "class":
            role = ""
        scope.bind(self.data[node.start_byte : node.end_byte].decode("utf-8"), role)
        self.occ.append((node, scope, role))

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8")

    def leave_alone(self, node: Node) -> None:
        self.excluded.add(self.data[node.start_byte : node.end_byte].decode("utf-8"))

    def target(self, node: Node, scope: _Scope, role: str = "var") -> None:
        kind = node.type
        if kind == "identifier":
            self.bind(node, scope, role)
        elif kind in _PATTERN_CONTAINERS or kind in _SPLATS or kind == "as_pattern_target":
            for child in node.named_children:
                self.target(child, scope, role)
        else:  # attribute, subscript, anything else: its names are references
            if kind == "attribute" and self.methods:  # ``self.name = ...``: an attribute, not the method
                self.stored_attributes.add(node.start_byte)
            self.visit(node, scope)

    def visit_children(self, node: Node, scope: _Scope) -> None:
        # unnamed children are keywords and punctuation: no names below them (the hot loop of the
        # analysis: `visit` inlined, dispatch on the node's kind id, leaves without names skipped)
        actions = _py_actions()
        if _NAMED_WALK is not None:  # the same recursion in C: only the nodes acted on become objects
            occ = self.occ
            # ``_attribute`` walked in C only where the snippet has no method: ``self.methods`` is set by a
            # module-level definition, so a walk in the module scope hands its attributes to Python
            table, field = _py_walk_table(bool(self.methods) or scope.kind == "module")
            for child in _NAMED_WALK(node, table, field):
                action = actions[child.kind_id]
                if action is _IDENTIFIER:
                    occ.append((child, scope, None))
                elif action is _COMMENT:
                    self.comments.append(child)
                else:
                    action(self, child, scope)
            return
        for child in node.named_children:
            action = actions.get(child.kind_id, _GENERIC)
            if action is _IDENTIFIER:
                self.occ.append((child, scope, None))
            elif action is _GENERIC:
                if child.named_child_count:
                    self.visit_children(child, scope)
            elif action is _COMMENT:
                self.comments.append(child)
            elif action is not _NO_NAMES:
                action(self, child, scope)

    def visit(self, node: Node, scope: _Scope) -> None:
        action = _py_actions().get(node.kind_id, _GENERIC)
        if action is _IDENTIFIER:
            self.occ.append((node, scope, None))
        elif action is _GENERIC:
            if node.named_child_count:
                self.visit_children(node, scope)
        elif action is _COMMENT:
            self.comments.append(node)
        elif action is not _NO_NAMES:
            action(self, node, scope)

    def _string(self, node: Node, scope: _Scope) -> None:
        for child in node.named_children:  # only an f-string's interpolations hold names
            if child.type == "interpolation":
                self.visit_children(child, scope)

    def _attribute(self, node: Node, scope: _Scope) -> None:
        target = node.child_by_field_name("object")
        self.visit(target, scope)
        if not self.methods:
            return
        data = self.data
        stop = node.end_byte
        if self.receivers and data.startswith(self.receivers, node.start_byte):
            self.members.append((node.start_byte, stop))  # ``self.x``: a member of its class
        # ``self.name`` may be the method itself (checked in ``run``)
        if data.endswith(self.method_names, 0, stop):
            for method in self.methods:
                if self.data.endswith(method.name, 0, stop) and target.type == "identifier":
                    attribute = node.child_by_field_name("attribute")
                    if attribute is not None and attribute.start_byte == stop - len(method.name):
                        self.receiver_attributes.append((attribute, method, scope))

    def _keyword_argument(self, node: Node, scope: _Scope) -> None:
        self.visit(node.child_by_field_name("value"), scope)
        self.keywords.append((node, scope))

    def _import_statement(self, node: Node, scope: _Scope) -> None:
        for child in node.named_children:
            for item in _identifiers(child):
                self.leave_alone(item)

    _import_from_statement = _import_statement
    _future_import_statement = _import_statement

    def _global_statement(self, node: Node, scope: _Scope) -> None:
        for child in node.named_children:
            if child.type == "identifier":
                scope.globals.add(child.text.decode("utf-8"))
                self.leave_alone(child)

    def _nonlocal_statement(self, node: Node, scope: _Scope) -> None:
        for child in node.named_children:
            if child.type == "identifier":
                scope.nonlocals.add(child.text.decode("utf-8"))
                self.ref(child, scope)

    def _case_clause(self, node: Node, scope: _Scope) -> None:
        for child in node.children:
            if child.type == "case_pattern":
                for item in _identifiers(child):
                    self.leave_alone(item)
            else:
                self.visit(child, scope)

    def _assignment(self, node: Node, scope: _Scope) -> None:
        right = node.child_by_field_name("right")
        annotation = node.child_by_field_name("type")
        if annotation is not None:
            self.visit(annotation, scope)
        left = node.child_by_field_name("left")
        if right is not None:
            self.visit(right, scope)
            if right.kind_id in _PY_LAMBDAS and left.type == "identifier":  # a function with a name
                self.callables.append((scope, left, right))
        self.target(left, scope)

    def _augmented_assignment(self, node: Node, scope: _Scope) -> None:
        self.visit(node.child_by_field_name("right"), scope)
        self.target(node.child_by_field_name("left"), scope)

    def _named_expression(self, node: Node, scope: _Scope) -> None:
        self.visit(node.child_by_field_name("value"), scope)
        self.target(node.child_by_field_name("name"), scope.function_scope())

    def _for_statement(self, node: Node, scope: _Scope) -> None:
        left = node.child_by_field_name("left")
        for child in node.children:
            if child == left:
                self.target(child, scope)
            else:
                self.visit(child, scope)

    def _as_pattern(self, node: Node, scope: _Scope) -> None:
        alias = node.child_by_field_name("alias")
        for child in node.children:
            if child == alias:
                self.target(child, scope)
            else:
                self.visit(child, scope)

    def _delete_statement(self, node: Node, scope: _Scope) -> None:
        for child in node.named_children:
            self.target(child, scope)

    def _comprehension(self, node: Node, scope: _Scope) -> None:
        inner = _Scope("comprehension", scope)
        clauses = [child for child in node.named_children if child.type == "for_in_clause"]
        for child in node.named_children:
            if child.type == "for_in_clause":
                right = child.child_by_field_name("right")
                # The first iterable is evaluated in the enclosing scope.
                self.visit(right, scope if child == clauses[0] else inner)
                for index, grand in enumerate(child.children):
                    if child.field_name_for_child(index) == "left":
                        self.target(grand, inner)
            else:
                self.visit(child, inner)

    def _function_definition(self, node: Node, scope: _Scope) -> None:
        self.owners.append(node)
        name = node.child_by_field_name("name")
        inner = _Scope("function", scope)
        params = node.child_by_field_name("parameters")
        receiver = _method_receiver(node, params, self.data) if scope.kind == "module" else None
        if receiver is not None and is_name(name):
            # the snippet is a method: its name is a class attribute, reached through ``self`` /
            # ``cls`` / the class; a bare use of the name, inside the method or out, is a global
            self.occ.append((name, scope, "fun"))
            if not self.methods:
                self.methods, self.members, self.receiver_attributes = [], [], []
                self.stored_attributes, self.dependent = set(), set()
            encoded = self.data[name.start_byte : name.end_byte]
            self.methods.append(_Method(encoded, receiver, inner, node))
            self.method_names += (encoded,)
            if receiver:
                self.receivers += (receiver.encode("utf-8") + b".",)
        else:
            self.bind(name, scope, "fun" if scope.kind == "module" else "var")
            if scope.kind != "class":
                self.callables.append((scope, name, node))
        self.parameters(params, scope, inner)
        returns = node.child_by_field_name("return_type")
        if returns is not None:
            self.visit(returns, scope)
        body = node.child_by_field_name("body")
        header_end = (returns or params).end_byte
        if body is not None and self.data.find(b"#", header_end, body.start_byte) != -1:
            # a comment after the colon belongs to the definition, not to its body
            self.comments += [child for child in node.children if child.type == "comment"]
        self.visit(body, inner)

    def _lambda(self, node: Node, scope: _Scope) -> None:
        inner = _Scope("function", scope)
        params = node.child_by_field_name("parameters")
        if params is not None:
            self.parameters(params, scope, inner)
        self.visit(node.child_by_field_name("body"), inner)

    def parameters(self, params: Node, outer: _Scope, inner: _Scope) -> None:
        for param in params.named_children:
            kind = param.type
            if kind == "identifier":
                self.bind(param, inner, "arg")
            elif kind in _SPLATS:
                for child in param.named_children:
                    self.target(child, inner, "arg")
            elif kind in ("default_parameter", "typed_default_parameter", "typed_parameter"):
                for field_name in ("type", "value"):
                    child = param.child_by_field_name(field_name)
                    if child is not None:
                        self.visit(child, outer)
                name = param.child_by_field_name("name")
                if name is None:  # typed_parameter: identifier or splat, then ": type"
                    name = param.named_children[0]
                self.target(name, inner, "arg")
            elif kind == "tuple_pattern":  # Python 2 tuple parameters
                self.target(param, inner, "arg")
            else:
                self.visit(param, outer)

    def _class_definition(self, node: Node, scope: _Scope) -> None:
        self.owners.append(node)
        self.bind(node.child_by_field_name("name"), scope, "")
        inner = _Scope("class", scope)
        for child in node.children:
            if child.type == "block":
                self.visit(child, inner)
            elif child.type != "identifier" or child != node.child_by_field_name("name"):
                self.visit(child, scope)

    # -- resolution

    def resolve(self, name: str, scope: _Scope) -> tuple[_Scope | None, str | None]:
        """The scope binding ``name`` as seen from ``scope`` and its role; (None, None) if free."""
        if name in scope.globals:
            return None, None
        if name in scope.bindings and name not in scope.nonlocals:
            return scope, scope.bindings[name]
        current = scope.parent
        while current is not None:
            if (
                current.kind not in ("class", "module")
                and name in current.bindings
                and name not in current.nonlocals
                and name not in current.globals
            ):
                return current, current.bindings[name]
            current = current.parent
        module = scope
        while module.parent is not None:
            module = module.parent
        if name in module.bindings:
            return module, module.bindings[name]
        return None, None

    def run(self) -> Identifiers:
        module = _Scope("module", None)
        self.visit_children(self.root, module)
        spans: dict[str, list[tuple[int, int]]] = {}
        roles: dict[str, tuple[int, str]] = {}
        bad = set(self.excluded)
        used: set[str] = set(self.excluded)
        data = self.data
        resolved: dict[tuple[str, _Scope], str | None] = {}  # (name, scope of a reference) -> role
        builtin_names = PYTHON_BUILTINS
        method_names = _NO_NAMES_SET
        if self.methods:
            method_names = frozenset([name.decode("utf-8") for name in self.method_names])
        free_method_names = set()  # a method's name used bare: a global (for a plain function: itself)
        for node, scope, role in self.occ:
            position = node.start_byte
            stop = node.end_byte
            if position == stop:  # a MISSING node of tree-sitter's error recovery: no name
                continue
            name = data[position:stop].decode("utf-8")
            used.add(name)
            if name in bad or name in builtin_names:  # left alone whatever this occurrence is
                continue
            if role is None:
                key = (name, scope)
                role = resolved.get(key, _UNRESOLVED)
                if role is _UNRESOLVED:
                    role = resolved[key] = self.resolve(name, scope)[1]
            if not role:  # free, or bound where it must be left alone
                bad.add(name)
                if name in method_names and role is None:
                    free_method_names.add(name)
                continue
            if name in spans:
                spans[name].append((position, stop))
                if position < roles[name][0]:
                    roles[name] = (position, role)
            else:
                spans[name] = [(position, stop)]
                roles[name] = (position, role)
        if self.methods and method_names & builtin_names:  # ``def print(self, ...)``: bare ``print`` skipped above
            free_method_names.update(
                name
                for node, _, role in self.occ
                if role is None and (name := data[node.start_byte : node.end_byte].decode("utf-8")) in method_names
            )
        if self.receiver_attributes or (self.keywords and self._called_by_name(spans, bad, free_method_names)):
            self._follow_calls(spans, bad)
        for method in self.methods:
            # The analysis of a method whose name the body uses (bare, or ``self.name``) depends on it
            # being a method, which only its receiver's name shows: kept, so the renamed code is
            # analysed alike (an attack composed after this one, ``ordered_id+k_shift_dataset-3``).
            if method.receiver and (method.name.decode("utf-8") in free_method_names or method.name in self.dependent):
                bad.add(method.receiver)
        members = _NO_NAMES_SET
        if self.members:  # ``self.x``: the text after the dot
            members = frozenset([data[data.index(b".", a) + 1 : b].strip().decode("utf-8") for a, b in self.members])
        return assemble(spans, roles, bad, used, PYTHON_BUILTINS, in_order=False, members=members)

    # -- calls of the snippet's own functions

    def _follow_calls(self, spans: dict[str, list[tuple[int, int]]], bad: set[str]) -> None:
        """Occurrences of defined names outside variable positions, found once every name is resolved:

        * ``receiver.name`` in a method ``name`` (``self.name``, ``cls.name``, the receiver being the
          method's first parameter) is the method: renamed with it; if the snippet assigns such an
          attribute, it is an instance attribute too and the name is left alone;
        * a keyword argument that names a parameter of the snippet's function the call calls (a
          recursive call ``f(x, depth=d)``, ``self.f(depth=d)``, a nested function or a named lambda)
          follows that parameter's renaming; keywords of calls to anything else stay. Where the
          callee is not certain (the name is bound more than once) or the call passes its keywords on
          to a snippet function given as an argument (``functools.partial(f, depth=1)``), a keyword
          that names one of that function's parameters leaves the parameter's name alone.
        """
        counts: dict[tuple[_Scope, str], int] | None = None
        data = self.data
        found_functions: dict[tuple[_Scope, str], list[Node]] = {}  # (scope, name) -> definitions
        for where, name_node, definition in self.callables:
            found_functions.setdefault((where, self.text(name_node)), []).append(definition)
        named = {data[name.start_byte : name.end_byte] for _, name, _ in self.callables} | set(self.method_names)

        def certain(scope: _Scope, name: str) -> bool:  # the name is bound once in ``scope``
            nonlocal counts
            if counts is None:
                counts = {}
                for node, where, role in self.occ:
                    if role is not None:
                        key = (where, self.text(node))
                        counts[key] = counts.get(key, 0) + 1
            return counts.get((scope, name), 0) == 1

        def callable_of(expression: Node | None, scope: _Scope) -> tuple[list[Node], bool] | None:
            """The snippet's functions ``expression`` may be, and whether it is certainly that one."""
            if expression is None:
                return None
            if expression.type == "identifier":
                name = self.text(expression)
                where = self.resolve(name, scope)[0]
                if where is None:  # a global: the method's own bare name may be the function itself
                    # if the snippet is in fact a plain function (``def _c3_mro(cls, abcs=None)``)
                    encoded = name.encode("utf-8")
                    ambiguous = [method.node for method in self.methods if method.name == encoded]
                    return (ambiguous, False) if ambiguous else None
                functions = found_functions.get((where, name))
                if not functions:
                    return None
                return functions, len(functions) == 1 and certain(where, name)
            if expression.type == "attribute" and self.methods:
                target = expression.child_by_field_name("object")
                attribute = expression.child_by_field_name("attribute")
                if target is None or attribute is None or target.type != "identifier":
                    return None
                method = self._method_through(self.text(target), self.text(attribute), scope)
                if method is not None:
                    return [method.node], certain(method.scope, method.receiver)
            return None

        for attribute, method, scope in self.receiver_attributes:
            name = method.name.decode("utf-8")
            target = attribute.parent.child_by_field_name("object")
            if self._method_through(self.text(target), name, scope) is not method:
                continue
            self.dependent.add(method.name)
            if name in bad or name not in spans:
                continue
            if attribute.parent.start_byte in self.stored_attributes or not certain(method.scope, method.receiver):
                bad.add(name)
            else:
                spans[name].append((attribute.start_byte, attribute.end_byte))
        for node, scope in self.keywords:
            key = node.child_by_field_name("name")
            if key is None or key.start_byte == key.end_byte:
                continue
            name = self.text(key)
            if name in bad or name not in spans:  # only a renamed name can break a call
                continue
            arguments = node.parent
            call = arguments.parent if arguments is not None else None
            if call is None or call.type != "call":  # ``class C(metaclass=M)``
                continue
            found = callable_of(call.child_by_field_name("function"), scope)
            if found is not None:
                functions, sure = found
                if sure:
                    if name in _keyword_parameters(functions[0], self.data, self.methods):
                        spans[name].append((key.start_byte, key.end_byte))
                elif any(name in _keyword_parameters(function, self.data, self.methods) for function in functions):
                    bad.add(name)
                continue
            # keywords passed on to a function argument? (only if the call's text names a snippet function)
            if not any(data.find(other, call.start_byte, call.end_byte) != -1 for other in named):
                continue
            for argument in arguments.named_children:
                value = argument.child_by_field_name("value") if argument.type == "keyword_argument" else argument
                passed = callable_of(value, scope)
                if passed is not None and any(
                    name in _keyword_parameters(function, self.data, self.methods) for function in passed[0]
                ):
                    bad.add(name)
                    break

    def _called_by_name(self, spans: dict[str, list[tuple[int, int]]], bad: set[str], free: set[str]) -> bool:
        """Whether a function of the snippet may be called (or passed) by name: its name has a
        resolved occurrence besides its definition, or is left alone (a global, a builtin), or a
        method's name is used bare (``free``). Most snippets never name their functions."""
        if free:
            return True
        data = self.data
        for _, name, _ in self.callables:
            text = data[name.start_byte : name.end_byte].decode("utf-8")
            if len(spans.get(text, ())) > 1 or text in bad or text in PYTHON_BUILTINS:
                return True
        return False

    def _method_through(self, target: str, attribute: str, scope: _Scope) -> _Method | None:
        """The snippet's method that ``target.attribute`` in ``scope`` is: ``target`` resolves to the
        method's receiver parameter and ``attribute`` is the method's name."""
        for method in self.methods:
            if (
                method.receiver == target
                and method.name.decode("utf-8") == attribute
                and self.resolve(target, scope)[0] is method.scope
            ):
                return method
        return None

    def comment_nodes(self) -> list[Node] | None:
        """The comments and possible docstring owners met (``comment_edits``'s ``found``), or ``None``
        if a ``#`` of the code is in no comment met (a comment the walk does not reach, or a ``#`` in
        a string): the caller then runs the comment query."""
        data = self.data
        total = data.count(b"#")
        if total:
            comments = {node.start_byte: node for node in self.comments}
            if sum(data.count(b"#", start, node.end_byte) for start, node in comments.items()) != total:
                return None
            return [*comments.values(), *self.owners]
        return self.owners


# node type -> the _PythonAnalyzer method that handles it (`_assignment` handles `assignment`)
_PY_HANDLERS = {
    name[1:]: method
    for name, method in vars(_PythonAnalyzer).items()
    if name.startswith("_") and not name.startswith("__") and callable(method)
}


_IDENTIFIER, _GENERIC, _COMMENT, _NO_NAMES = "identifier", "generic", "comment", "no names"
_NO_NAMES_SET: frozenset[str] = frozenset()
_PY_LAMBDAS: set[int] = set()  # the kind ids of ``lambda`` nodes (filled by ``_py_actions``)
_UNRESOLVED = object()


@functools.cache
def _py_actions() -> dict[int, object]:
    """Node kind id -> what ``_PythonAnalyzer.visit`` does with such a node: its handler, or one of
    ``_IDENTIFIER`` (a reference), ``_COMMENT``, ``_NO_NAMES`` (a leaf kind without names below),
    ``_GENERIC`` (visit the named children; also for ids not listed, such as ``ERROR``). Kinds are
    matched by name, as ``node.type`` would be (a keyword token shares the name of a node kind)."""
    language = tree_sitter_language("python")
    actions: dict[int, object] = {}
    for kind_id in range(language.node_kind_count):
        name = language.node_kind_for_id(kind_id)
        if name == "lambda" and language.node_kind_is_named(kind_id):
            _PY_LAMBDAS.add(kind_id)  # (``id_for_node_kind`` of py-tree-sitter 0.21 crashes)
        if name == "identifier":
            actions[kind_id] = _IDENTIFIER
        elif name == "comment":
            actions[kind_id] = _COMMENT
        elif name in _PY_HANDLERS:
            actions[kind_id] = _PY_HANDLERS[name]
        elif name in _COMPREHENSIONS:
            actions[kind_id] = _PythonAnalyzer._comprehension
        elif name in _PY_NO_NAMES:
            actions[kind_id] = _NO_NAMES
    return actions


@functools.cache
def _py_walk_table(methods: bool) -> tuple[bytes, int]:
    """``_py_actions`` as the kind table of ``csbench.code._tswalk.named_walk`` and the field it needs (the
    ``object`` of an ``attribute``). Per kind id (65,536, ERROR's 65535 included): 0 to descend into the
    node (``_GENERIC``, also the ids not listed), 1 to return it (a reference, a comment, a handler's
    node), 2 to skip it (``_NO_NAMES``), 3 for ``_string`` (descend only into the children marked 8:
    ``interpolation``), 4 for ``_attribute`` (treat only its ``object``), unless the snippet may have a
    method (``methods``): ``_attribute`` then collects more, and its nodes are returned."""
    language = tree_sitter_language("python")
    table = bytearray(65536)
    for kind_id, action in _py_actions().items():
        if action is _NO_NAMES:
            table[kind_id] = 2
        elif action is _PythonAnalyzer._string:
            table[kind_id] = 3
        elif action is _PythonAnalyzer._attribute and not methods:
            table[kind_id] = 4
        elif action is not _GENERIC:
            table[kind_id] = 1
    for kind_id in range(language.node_kind_count):
        if language.node_kind_for_id(kind_id) == "interpolation" and language.node_kind_is_named(kind_id):
            table[kind_id] |= 8
    return bytes(table), language.field_id_for_name("object")


# ``visit_children``'s recursion in C (``csbench.code._tswalk``, where built: ``treequery.C_WALK``)
_NAMED_WALK = getattr(treequery._C, "named_walk", None)


def _identifiers(node: Node) -> list[Node]:
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "identifier":
            found.append(current)
        stack.extend(current.children)
    return found
