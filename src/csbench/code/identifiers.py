"""Identifiers a code snippet defines, and consistent renaming of them (issue #4, item 1).

``snippet_identifiers(code, language)`` finds the names the snippet itself defines -- its function
name (role ``fun``), parameters (``arg``) and locals (``var``) -- in order of first occurrence in the
syntax tree (SPEC "Code attacks"; thesis section 3.3), with the byte span of every occurrence a
renaming must change. ``rename(code, language, mapping)`` applies a consistent renaming through those
spans.

All seven languages (python, go, java, javascript, php, ruby, r) are implemented; the rules per
language follow. Byte spans are offsets into ``code.encode("utf-8")``. In every language, the zero-width
MISSING nodes tree-sitter's error recovery inserts (an ``identifier`` where a name should be) are never
names, and a method's new name may not be a member of its class that it reaches through its receiver
(``Identifiers.members``: ``self.x``, ``this.x``, ``recv.X``), nor a PHP function's a PHP keyword.

How (speed matters: the code attacks analyse every function of a dataset): Python is analysed by a
walk over the named nodes that follows Python's scoping; the other languages by one tree-sitter query
each, which finds the identifiers, comments, scopes and binding constructs (and the identifiers in
positions that are not variables), so that Python code only touches those nodes. The query runs in
tree-sitter's query cursor, in C, except for R, where ``csbench.code.treequery`` matches it on a
walk of the tree with the same captures, when compiled (faster there: ``_WALKED``). Both also
collect the comment nodes comment removal needs (``identifiers_and_comments``), so an attack parses
and traverses each snippet once.

Python rules (tree-sitter based, scope aware)
---------------------------------------------
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

PHP rules
---------
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

Go rules
--------
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

JavaScript rules
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

Java rules
----------
Parsed with ``parse_snippet`` (methods get a class wrapper). The method name is ``fun`` (with
recursive calls ``name(...)`` / ``this.name(...)``; a constructor's name is a type name and stays);
parameters (incl. varargs and lambda parameters) are ``arg``; locals are ``var``: local variable
declarators (also in ``for`` initialisers), enhanced-``for`` variables, ``catch`` parameters,
try-with-resources variables and ``instanceof`` pattern variables. A local is visible in its enclosing
block (or ``for`` / ``try`` / ``catch``) from its declarator on; parameters in the whole method or
lambda. A name is left alone, in all its occurrences, if any reference to it is outside the reach of a
declaration (fields used without ``this.``, constants, classes used as qualifiers like ``Math``).
Method names of calls, field names after ``.``, types, annotations, labels and package names stay.

Ruby rules
----------
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

R rules
-------
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

import builtins
import functools
import keyword
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tree_sitter import Node, Query

try:  # C types for a few hot loops when compiled (csbench._native); no-ops as Python
    import cython
except ImportError:  # Cython not installed: run as Python
    from csbench import _cython_shim as cython

from csbench.code import treequery
from csbench.code.comments import Snippet, parse_snippet
from csbench.code.parsing import LANGUAGES, captures_by_name, get_parser, get_query, walk

ROLES = ("fun", "arg", "var")
IMPLEMENTED = ("python", "php", "go", "javascript", "java", "ruby", "r")
PYTHON_BUILTINS = frozenset(dir(builtins))


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


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"unsupported language {language!r}; supported: {', '.join(LANGUAGES)}")
    if language not in IMPLEMENTED:
        raise NotImplementedError(f"identifier analysis is not implemented for {language!r} yet")


def snippet_identifiers(code: str, language: str, snippet: Snippet | None = None) -> Identifiers:
    """The identifiers ``code`` defines (see the module docstring for the rules per language).

    ``snippet`` is ``parse_snippet(code, language)`` when the caller already has it.
    """
    return identifiers_and_comments(code, language, snippet)[0]


def identifiers_and_comments(
    code: str, language: str, snippet: Snippet | None = None
) -> tuple[Identifiers, list[Node] | None]:
    """``snippet_identifiers`` and, found by the same tree-sitter query, the nodes
    ``comments.comment_edits`` needs (its ``found`` argument; ``None`` where the analysis does not
    collect them)."""
    analysis = _ANALYSES.get(language)
    if analysis is None:
        _check_language(language)
    snippet = snippet if snippet is not None else parse_snippet(code, language)
    if analysis is not None:
        return analysis(snippet)
    analyzer = _PythonAnalyzer(snippet)
    return analyzer.run(), analyzer.comment_nodes()


_PHP_NAME = re.compile(r"^[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*$")


@functools.lru_cache(maxsize=1 << 16)  # the attacks check the same names over and over
def is_valid_name(name: str, language: str) -> bool:
    """Whether ``name`` can replace a defined name in ``language`` (PHP: without the ``$``; the
    snippet's function may not take every valid name: ``Identifiers.fun_may_take``)."""
    _check_language(language)
    if language == "php":
        return bool(_PHP_NAME.match(name)) and name != "this" and name not in PHP_SPECIAL_VARIABLES
    if language == "go":
        return name.isidentifier() and name not in GO_KEYWORDS and name != "_"
    if language == "javascript":
        return bool(_JS_NAME.match(name)) and name not in JS_RESERVED
    if language == "java":
        return bool(_JS_NAME.match(name)) and name not in JAVA_KEYWORDS and name != "_"
    if language == "ruby":
        return bool(_RUBY_NAME.match(name)) and name not in RUBY_KEYWORDS
    if language == "r":
        return bool(_R_NAME.match(name)) and name not in R_RESERVED
    return name.isidentifier() and not keyword.iskeyword(name)


def rename(code: str, language: str, mapping: dict[str, str], identifiers: Identifiers | None = None) -> str:
    """``code`` with every occurrence of each defined name ``old`` replaced by ``mapping[old]``.

    Names not in ``mapping`` keep their name. Raises ``ValueError`` unless all of these hold:

    * every key of ``mapping`` is a name the snippet defines (``identifiers.names``);
    * every new name is a valid identifier of the language and not a keyword;
    * the renaming is one-to-one on the defined names: with ``final(n) = mapping.get(n, n)`` for every
      defined ``n``, no two defined names get the same final name (so a name may move onto another
      defined name only if that one moves away too, as in a cyclic shift);
    * no new name is in ``identifiers.reserved``, the names the snippet uses without defining them
      (e.g. ``a -> len`` when ``len`` is called; ``a -> len`` is fine when ``len`` is not used);
    * a method's new name is not in ``identifiers.members`` (``self._helper`` when it calls it).

    ``identifiers`` defaults to ``snippet_identifiers(code, language)``.
    """
    ids = identifiers if identifiers is not None else snippet_identifiers(code, language)
    return splice(code.encode("utf-8"), rename_edits(language, mapping, ids)).decode("utf-8")


def rename_edits(
    language: str,
    mapping: dict[str, str],
    ids: Identifiers,
    edits: Sequence[tuple[int, int, bytes]] = (),
) -> list[tuple[int, int, bytes]]:
    """The edits ``(start, end, new name)`` that apply ``mapping`` to the spans of ``ids``, merged with
    ``edits`` (other edits of the same code that no span overlaps, e.g. comment removal) and sorted,
    for ``splice``. ``ValueError`` unless the renaming is valid (the rules ``rename`` lists)."""
    if language not in _ANALYSES:
        _check_language(language)
    roles = ids.roles
    if not roles.keys() >= mapping.keys():
        raise ValueError(f"not identifiers the snippet defines: {[old for old in mapping if old not in roles]}")
    occurrences = ids.occurrences
    out = list(edits)
    new_names = []  # one pass: the edits of every name that changes, and its new name for the checks
    for old, new in mapping.items():
        if new != old:
            new_names.append(new)
            encoded = new.encode()
            out += [(start, end, encoded) for start, end in occurrences[old]]
    if not new_names:
        return sorted(edits)
    invalid = [new for new in new_names if not is_valid_name(new, language)]
    if invalid:
        raise ValueError(f"not valid {language} identifiers: {invalid}")
    names = ids.names
    if len({mapping.get(name, name) for name in names}) != len(names):
        final: dict[str, str] = {}
        for name in names:
            new = mapping.get(name, name)
            if new in final:
                raise ValueError(f"renaming is not one-to-one: {final[new]!r} and {name!r} both become {new!r}")
            final[new] = name
    reserved = ids.reserved
    if not reserved.isdisjoint(new_names):
        captured = sorted({new for new in new_names if new in reserved})
        raise ValueError(f"renaming would capture names the snippet uses but does not define: {captured}")
    if ids.members or ids.fun_keywords:
        refused = sorted({new for old, new in mapping.items() if roles[old] == "fun" and not ids.fun_may_take(new)})
        if refused:
            raise ValueError(f"the function may not be named {refused}: a member of its class it uses, or a keyword")
    out.sort()
    return out


@cython.locals(data=bytes, cursor=cython.Py_ssize_t, start=cython.Py_ssize_t, end=cython.Py_ssize_t)
def splice(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """``data`` with sorted, non-overlapping edits ``(start, end, replacement)`` applied, in one pass."""
    if not edits:
        return data
    pieces = []
    add = pieces.append
    cursor = 0
    for start, end, replacement in edits:  # compiled: C integers, each slice copied straight from ``data``
        add(data[cursor:start])
        add(replacement)
        cursor = end
    add(data[cursor:])
    return b"".join(pieces)


# ----------------------------------------------------------------------------------------------- python


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
_RECEIVERS = frozenset({"self", "cls", "mcs", "mcls", "metacls"})
_METHOD_DECORATORS = frozenset(
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
_RECEIVER_AT = re.compile(rb"\(\s*(%s)(?![\w\x80-\xff])" % b"|".join(sorted(name.encode() for name in _RECEIVERS)))


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
                if last in _METHOD_DECORATORS:
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
        if receiver is not None and _is_name(name):
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
        return _assemble(spans, roles, bad, used, PYTHON_BUILTINS, in_order=False, members=members)

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
    language = _tree_sitter_language("python")
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


def _identifiers(node: Node) -> list[Node]:
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "identifier":
            found.append(current)
        stack.extend(current.children)
    return found


# ----------------------------------------------------------------------------------- query helpers


def _captures(language: str, root: Node) -> dict[str, list[Node]]:
    """The nodes the analysis query of ``language`` captures below ``root``, by capture name (each list
    in document order). One query per language: its traversal of the tree costs about the same for
    any set of patterns, and is most of the cost of a capture."""
    return _capturer(language)(root)


# Languages whose analysis query is matched by a walk of the tree (``csbench.code.treequery``) when that
# module runs compiled: same captures. Chosen by the attack's end-to-end time, not the captures' alone
# (benchmarks/bench_treequery.py times those): on R the captures take 0.54x of the parse against 0.73x
# with tree-sitter's query cursor, and `ordered_id` 2.60x against 2.78x; JavaScript's captures are
# faster walked too (0.63x against 0.71x) but its attacks were not (`full_hash` 2.67x against 2.61x:
# the walk allocates a node object for every node); Go and PHP capture slower walked, and as plain
# Python the walk is the slower one everywhere.
_WALKED = frozenset({"r"})


@functools.cache
def _capturer(language: str) -> Callable[[Node], dict[str, list[Node]]]:
    """``_captures`` for ``language``: tree-sitter's query, or the walk of ``_WALKED``."""
    if language in _WALKED and treequery.COMPILED:
        return treequery.WalkQuery(_tree_sitter_language(language), _QUERIES[language]()).captures
    return functools.partial(captures_by_name, *_analysis_query(language))


@functools.cache
def _analysis_query(language: str) -> tuple[Query, tuple[str, ...]]:
    """Tree-sitter's query of the analysis of ``language``, and its capture names in order."""
    source = _QUERIES[language]()
    return get_query(language, source), tuple(dict.fromkeys(re.findall(r"@(\w+)", source)))


@functools.cache
def _grammar_kinds(language: str) -> frozenset[str]:
    """The named node kinds of the language's tree-sitter grammar."""
    grammar = _tree_sitter_language(language)
    return frozenset(
        grammar.node_kind_for_id(kind_id)
        for kind_id in range(grammar.node_kind_count)
        if grammar.node_kind_is_named(kind_id)
    )


def _any(language: str, kinds: Iterable[str]) -> str:
    """A query alternation ``[(a) (b) ...]`` of the node kinds the grammar has (sorted)."""
    return "[" + " ".join(f"({kind})" for kind in sorted(set(kinds) & _grammar_kinds(language))) + "]"


def _tree_sitter_language(language: str):
    import warnings

    import tree_sitter_languages

    get_parser(language)  # checks the language
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # as in csbench.code.parsing
        return tree_sitter_languages.get_language(language)


# name -> the bindings of that name: (scope start, scope end, visible from), byte positions in the tree
Scopes = dict[str, list[tuple[int, int, int]]]
# name -> byte spans of its occurrences, relative to the snippet's first byte
Spans = dict[str, list[tuple[int, int]]]
# name -> (tree position, role) of the binding occurrence its role comes from
Roles = dict[str, tuple[int, str]]


@cython.locals(
    data=bytes, start=cython.Py_ssize_t, end=cython.Py_ssize_t, first=cython.Py_ssize_t, stop=cython.Py_ssize_t
)
def _resolve(
    ids: list[Node],
    snippet: Snippet,
    binding_roles: dict[int, str],
    scopes: Scopes,
    bad: set[str],
    used: set[str],
    not_variables: set[int] | frozenset[int] = frozenset(),
    method_name: str | None = None,
) -> tuple[Spans, Roles, list[Node]]:
    """The name resolution the query-based analysers share: every identifier occurrence ``ids`` (in
    document order) inside the snippet is a binding (its start in ``binding_roles``: ``arg`` /
    ``var`` / ``fun``, or ``""`` for an occurrence known to resolve) or a reference, which must be in
    reach of a binding of its name in ``scopes``. A reference out of reach puts its name in ``bad``
    (left alone in all its occurrences), except an occurrence of ``method_name``, returned for the
    caller to decide (Ruby: a bare recursive call). Occurrences at ``not_variables`` (method and
    field names, ...) and of names already ``bad`` are skipped. Every name met goes into ``used``.
    Returns the spans and roles of the names met (``bad`` ones included) and the occurrences left to
    the caller."""
    data = snippet.data
    start = snippet.offset
    end = start + len(data)
    spans: Spans = {}
    roles: Roles = {}
    undecided: list[Node] = []
    # the hot loop of the analyses (once per identifier): bound methods and locals only; compiled,
    # ``first`` / ``stop`` are C integers (bounds checks and the name's decoding without Python ints)
    add_used, role_at, bindings_of = used.add, binding_roles.get, scopes.get
    for node in ids:
        position = node.start_byte
        first = position
        stop = node.end_byte
        if first < start or stop > end or first == stop:  # in the wrapper, or a MISSING node
            continue
        name = data[first - start : stop - start].decode()
        add_used(name)
        if name in bad or position in not_variables:
            continue
        role = role_at(position)
        if role is None:
            for begin, finish, visible in bindings_of(name, ()):
                if begin <= position < finish and position >= visible:
                    break
            else:
                if name == method_name:
                    undecided.append(node)
                else:
                    bad.add(name)
                continue
        found = spans.get(name)
        if found is None:
            spans[name] = [(first - start, stop - start)]
        else:
            found.append((first - start, stop - start))
        if role and (name not in roles or position < roles[name][0]):
            roles[name] = (position, role)
    return spans, roles, undecided


def _add_method_name(
    fun_name: str | None, calls: list[Node], start: int, spans: Spans, roles: Roles, bad: set[str]
) -> None:
    """Java / Ruby: method names and locals are separate namespaces. The method's name (its
    declaration and recursive calls, ``calls``; ``start``: the snippet's first byte in the tree) is
    renamed only when no variable shares its text."""
    if fun_name is None:
        return
    if fun_name in spans or fun_name in bad:
        bad.add(fun_name)
    else:
        spans[fun_name] = sorted({(node.start_byte - start, node.end_byte - start) for node in calls})
        roles[fun_name] = (calls[0].start_byte, "fun")


@cython.locals(first=cython.Py_ssize_t, last=cython.Py_ssize_t)
def _assemble(
    spans: Spans,
    roles: Roles,
    bad: set[str],
    used: set[str],
    excluded: frozenset[str] = frozenset(),
    in_order: bool = True,
    members: frozenset[str] = frozenset(),
) -> Identifiers:
    """The result of an analysis: every name with spans and a binding role, unless it is in ``bad``
    or ``excluded`` (it also refers to something the snippet does not define, or is a keyword /
    predeclared name), ordered by first occurrence; the other used names are reserved. ``in_order``:
    each name's spans are in document order without repeats (as ``_resolve`` gives them), else they
    are sorted and de-duplicated here."""
    occurrences: dict[str, tuple[tuple[int, int], ...]] = {}
    in_document_order = True  # usually (``_resolve`` meets the names in order): then nothing to sort
    last = -1
    for name, found in spans.items():
        if name in bad or name in excluded or name not in roles:
            continue
        kept = occurrences[name] = tuple(found) if in_order or len(found) == 1 else tuple(sorted(set(found)))
        first = kept[0][0]
        if first < last:
            in_document_order = False
        last = first
    names = tuple(occurrences)
    if not in_document_order:  # by first occurrence (two names never share a span, nor its start)
        names = tuple(sorted(occurrences, key=occurrences.__getitem__))
        occurrences = {name: occurrences[name] for name in names}
    return Identifiers(
        names=names,
        roles={name: roles[name][1] for name in names},
        occurrences=occurrences,
        reserved=frozenset(used.difference(names)),
        members=members,
    )


def _is_name(node: Node | None) -> bool:
    """Whether ``node`` has text: tree-sitter's error recovery inserts zero-width MISSING nodes (an
    ``identifier`` where a name should have been), and those are never identifiers."""
    return node is not None and node.end_byte > node.start_byte


def _preorder(node: Node) -> tuple[int, int]:
    return node.start_byte, -node.end_byte


class _Blocks:
    """The byte ranges of a tree's scope nodes; ``enclosing(node)`` is the range of the innermost one
    around ``node`` (excluding ``node`` itself), or of ``root`` if none is. Built on first use."""

    __slots__ = ("nodes", "ranges", "root", "starts")

    def __init__(self, nodes: list[Node], root: Node) -> None:
        self.nodes = nodes
        self.root = root
        self.ranges: list[tuple[int, int, int]] | None = None
        self.starts: list[int] = []

    def enclosing(self, node: Node) -> tuple[int, int]:
        ranges = self.ranges
        if ranges is None:
            ranges = self.ranges = sorted([(item.start_byte, -item.end_byte, item.id) for item in self.nodes])
            self.starts = [item[0] for item in ranges]
        position, stop, ident = node.start_byte, node.end_byte, node.id
        i = bisect_right(self.starts, position)
        while i:
            i -= 1
            begin, negative_end, other = ranges[i]
            if -negative_end >= stop and other != ident:
                return begin, -negative_end
        return self.root.start_byte, self.root.end_byte


# -------------------------------------------------------------------------------------------------- php

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


def _php_query() -> str:
    parameters = "[(simple_parameter (variable_name (name) @param)) (variadic_parameter (variable_name (name) @param))]"
    return "\n".join(
        [
            "(comment) @comment",
            f"{_any('php', _PHP_FUNCTIONS)} @function",
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


def _php_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end = snippet.offset, snippet.end
    found = _captures("php", snippet.tree.root_node)
    functions = [node for node in found["function"] if node.start_byte >= start and node.end_byte <= end]
    function = (functions[0] if len(functions) == 1 else min(functions, key=_preorder)) if functions else None
    spans: dict[str, list[tuple[int, int]]] = {}
    roles: dict[str, str] = {}
    reserved: set[str] = set()
    bad: set[str] = set(PHP_SPECIAL_VARIABLES)
    fun = function.child_by_field_name("name") if function is not None else None
    if not _is_name(fun):
        fun = None
    fun_name = fun.text.decode("utf-8") if fun is not None else None
    fun_start = fun.start_byte if fun is not None else -1
    data = snippet.data
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


# --------------------------------------------------------------------------------------------------- go

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


def _go_query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{_any('go', _GO_BLOCKS - set(_GO_FUNCTIONS))} @block",
            f"{_any('go', _GO_FUNCTIONS[:2])} @function",
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


def _go_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end = snippet.offset, snippet.end
    root = snippet.tree.root_node
    data = snippet.data
    found = _captures("go", root)
    functions = [node for node in found["function"] if node.start_byte >= start and node.end_byte <= end]
    function = (functions[0] if len(functions) == 1 else min(functions, key=_preorder)) if functions else None
    # name -> list of (scope start, scope end, visible from)
    bindings: dict[str, list[tuple[int, int, int]]] = {}
    binding_nodes: dict[int, str] = {}  # start byte of a binding identifier -> role
    bad: set[str] = set()
    extra: list[Node] = []  # function-name occurrences that are not identifiers (method name, recursive selectors)
    blocks = _Blocks([*found["block"], *found["function"], *found["literal"]], root)

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
        if _is_name(name):
            fun_name = text(name)
            extra.append(name)
            bindings.setdefault(fun_name, []).append((0, root.end_byte - root.start_byte + 1, 0))
        recv = function.child_by_field_name("receiver")
        if recv is not None:
            for decl in recv.named_children:
                for item in names_in(decl.child_by_field_name("name")):
                    receiver = text(item)
    if found["arg"] or found["result"]:
        callables = _Blocks([*found["function"], *found["literal"]], root)
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
    spans, roles, _ = _resolve(found["id"], snippet, binding_nodes, bindings, bad, used)
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
    return _assemble(spans, roles, bad, used, _GO_EXCLUDED, members=members), found["comment"]


_GO_EXCLUDED = GO_PREDECLARED | {"_"}


# ------------------------------------------------------------------------------------------- javascript

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


def _js_query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{_any('javascript', _JS_BLOCKS - {'program'})} @block",  # the program is the root
            f"{_any('javascript', _JS_FUNCTIONS)} @function",
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


def _js_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end = snippet.offset, snippet.end
    root = snippet.tree.root_node
    found = _captures("javascript", root)
    in_range = [node for node in found["function"] if node.start_byte >= start and node.end_byte <= end]
    function = (in_range[0] if len(in_range) == 1 else min(in_range, key=_preorder)) if in_range else None
    scopes: Scopes = {}  # a JavaScript binding is visible in its whole scope
    binding_roles: dict[int, str] = {}
    bad: set[str] = set()
    extra: list[Node] = []
    blocks = _Blocks([*found["block"], *found["function"]], root)  # _JS_BLOCKS | _JS_FUNCTIONS
    functions = _Blocks(found["function"], root)  # _JS_FUNCTIONS | {"program"}: the root is the program
    data = snippet.data

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
                if node.start_byte == node.end_byte:  # MISSING
                    continue
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
        if _is_name(name):
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
    spans, roles, _ = _resolve(found["id"], snippet, binding_roles, scopes, bad, used)
    properties = [(node.start_byte - start, node.end_byte - start) for node in extra if node.type != "identifier"]
    if properties:  # a method's name and ``this.name``: property identifiers
        spans[fun_name] = sorted({*spans.get(fun_name, ()), *properties})
        roles.setdefault(fun_name, (extra[0].start_byte, "fun"))
    members = frozenset()
    if function is not None and function.type == "method_definition":
        members = frozenset(text(node) for node in found["this_property"] if start <= node.start_byte < end)
    return _assemble(spans, roles, bad, used, JS_RESERVED, members=members), found["comment"]


# ------------------------------------------------------------------------------------------------- java

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


def _java_query() -> str:
    """Comments, scopes, the method, parameter and local names, calls, and the identifiers in positions
    that are not variables (method and field names, labels, annotations, declarations)."""
    parameters = (
        "(formal_parameters [(formal_parameter name: (identifier) @param)"
        " (spread_parameter (variable_declarator name: (identifier) @param))])"
    )
    return "\n".join(
        [
            "[(line_comment) (block_comment)] @comment",
            f"{_any('java', _JAVA_BLOCKS - _JAVA_CALLABLES)} @block",
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


def _java_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start = snippet.offset
    data = snippet.data
    root = snippet.tree.root_node
    found = _captures("java", root)
    functions = found["function"]
    # the first method or constructor (a wrapper adds none); callables bind their parameters
    function = (functions[0] if len(functions) == 1 else min(functions, key=_preorder)) if functions else None
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    calls = found["call"]
    if calls:
        non_variables.update([node.start_byte for node in calls])  # method names of calls
    if found["param"]:
        callables = _Blocks([*functions, *found["lambda"]], root)
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
        blocks = _Blocks([*found["block"], *functions, *found["lambda"]], root)

        def bind(node: Node | None, scope: tuple[int, int], visible_from: int) -> None:
            if not _is_name(node) or node.type != "identifier":
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
    if function is not None and function.type == "method_declaration" and _is_name(name_node):
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
    spans, roles, _ = _resolve(found["id"], snippet, binding_roles, scopes, bad, used, non_variables)
    _add_method_name(fun_name, extra, start, spans, roles, bad)
    return _assemble(spans, roles, bad, used, JAVA_KEYWORDS), found["comment"]


# ------------------------------------------------------------------------------------------------- ruby

_RUBY_NAME = re.compile(r"^[a-z_][A-Za-z0-9_]*$")
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


def _ruby_query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{_any('ruby', _RUBY_SCOPES - {'program'})} @scope",  # the program is the root
            "[(method) (singleton_method)] @function",
            "(identifier) @id",
            f"{_any('ruby', _RUBY_PARAM_LISTS)} @parameters",
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


def _ruby_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end = snippet.offset, snippet.end
    root = snippet.tree.root_node
    found = _captures("ruby", root)
    functions = [node for node in found["function"] if node.start_byte >= start and node.end_byte <= end]
    function = (functions[0] if len(functions) == 1 else min(functions, key=_preorder)) if functions else None
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    extra: list[Node] = []
    enclosing = _Blocks(found["scope"], root).enclosing  # _RUBY_SCOPES; the root is the program
    data = snippet.data

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
        if _is_name(name) and name.type == "identifier":
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
    spans, roles, unresolved = _resolve(found["id"], snippet, binding_roles, scopes, bad, used, non_variables, fun_name)
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
    _add_method_name(fun_name, extra, start, spans, roles, bad)
    return _assemble(spans, roles, bad, used, RUBY_KEYWORDS), found["comment"]


def _ruby_keyword_names(parameters: Node | None) -> set[str]:
    """The names of the keyword parameters (``depth:``) of a parameter list."""
    names = set()
    for param in parameters.named_children if parameters is not None else ():
        if param.type == "keyword_parameter":
            name = param.child_by_field_name("name")
            if _is_name(name):
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


# ---------------------------------------------------------------------------------------------------- r

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


def _r_query() -> str:
    return "\n".join(
        [
            "(comment) @comment",
            f"{_any('r', _R_FUNCTIONS)} @function",
            f"{_any('r', _R_ASSIGNMENTS)} @assignment",
            "(identifier) @id",
            *[f"({kind} (formal_parameters) @parameters)" for kind in sorted(_R_FUNCTIONS)],
            "(super_assignment name: _ @super)",
            "(for) @for",
            "[(dollar) (slot)] @member",
            "[(namespace_get) (namespace_get_internal)] @namespace",
            "(default_argument name: _ @nv)",
        ]
    )


def _r_analysis(snippet: Snippet) -> tuple[Identifiers, list[Node]]:
    start, end = snippet.offset, snippet.end
    root = snippet.tree.root_node
    found = _captures("r", root)
    scopes: Scopes = {}
    binding_roles: dict[int, str] = {}
    non_variables = {node.start_byte for node in found["nv"]}
    bad: set[str] = set()
    enclosing = _Blocks(found["function"], root).enclosing  # _R_FUNCTIONS; else the root
    data = snippet.data

    def text(node: Node) -> str:
        return data[node.start_byte - start : node.end_byte - start].decode("utf-8")

    def bind(node: Node | None, role: str, scope: tuple[int, int], visible_from: int) -> None:
        if not _is_name(node) or node.type != "identifier":
            return
        scopes.setdefault(text(node), []).append((scope[0], scope[1], visible_from))
        binding_roles[node.start_byte] = role

    assignments = found["assignment"]
    if start or root.end_byte > end:  # (R code is parsed without a wrapper: every node is the snippet's)
        assignments = [node for node in assignments if node.start_byte >= start and node.end_byte <= end]
    top = min(assignments, key=_preorder) if assignments else None
    fun = None
    if top is not None and top.parent == root:
        value = top.child_by_field_name("value")
        if value is not None and value.type in _R_FUNCTIONS:
            fun = top.child_by_field_name("name")
            if _is_name(fun) and fun.type == "identifier":
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
    spans, roles, _ = _resolve(ids, snippet, binding_roles, scopes, bad, used, non_variables)
    if found["nv"]:
        _r_named_arguments(found["nv"], assignments, found, text, snippet, spans, bad)
    return _assemble(spans, roles, bad, used, _R_EXCLUDED), found["comment"]


def _r_formals(function: Node) -> list[str]:
    """The names of the formal parameters of an R ``function`` / ``\\(x)`` (``...`` included)."""
    names = []
    for child in function.named_children:
        if child.type == "formal_parameters":
            for param in child.named_children:
                target = param.child_by_field_name("name") if param.type == "default_parameter" else param
                if _is_name(target):
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
            _is_name(name) and data.count(data[name.start_byte - start : name.end_byte - start]) > 1
            for name in assigned
        ):
            return
    functions: dict[str, list[Node]] = {}
    bound: dict[str, int] = {}
    for node in assignments:
        name = node.child_by_field_name("name")
        if not _is_name(name) or name.type != "identifier":
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
        if call is None or call.type != "call" or not _is_name(node) or node.type != "identifier":
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


# language -> its query-based analysis (Python has its own walk)
_ANALYSES: dict[str, Callable[[Snippet], tuple[Identifiers, list[Node]]]] = {
    "php": _php_analysis,
    "go": _go_analysis,
    "javascript": _js_analysis,
    "java": _java_analysis,
    "ruby": _ruby_analysis,
    "r": _r_analysis,
}

# language -> the source of its analysis query (built on first use: the grammar decides which of the
# listed node kinds exist)
_QUERIES = {
    "php": _php_query,
    "go": _go_query,
    "javascript": _js_query,
    "java": _java_query,
    "ruby": _ruby_query,
    "r": _r_query,
}
