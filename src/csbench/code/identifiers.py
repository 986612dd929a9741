"""Identifiers a code snippet defines, and consistent renaming of them (issue #4, item 1).

``snippet_identifiers(code, language)`` finds the names the snippet itself defines -- its function
name (role ``fun``), parameters (``arg``) and locals (``var``) -- in order of first occurrence in the
syntax tree (SPEC "Code attacks"; thesis section 3.3), with the byte span of every occurrence a
renaming must change. ``rename(code, language, mapping)`` applies a consistent renaming through those
spans.

This module is the shared engine; each language's analysis, with its rules, is in its module
``csbench.code.languages.<name>`` (``Language.identifiers``), for every registered language. Byte
spans are offsets into ``code.encode("utf-8")``. In every language, the zero-width MISSING nodes
tree-sitter's error recovery inserts (an ``identifier`` where a name should be) are never names, and
a method's new name may not be a member of its class that it reaches through its receiver
(``Identifiers.members``: ``self.x``, ``this.x``, ``recv.X``), nor a PHP function's a PHP keyword.

How (speed matters: the code attacks analyse every function of a dataset): Python is analysed by a
walk over the named nodes that follows Python's scoping; the other languages by one tree-sitter query
each, which finds the identifiers, comments, scopes and binding constructs (and the identifiers in
positions that are not variables), so that Python code only touches those nodes. The query runs in
tree-sitter's query cursor, in C, except for R, where ``csbench.code.treequery`` matches it on a
walk of the tree with the same captures, when compiled (faster there: ``IdentifierRules.walked``).
Both also collect the comment nodes comment removal needs (``identifiers_and_comments``), so an attack
parses and traverses each snippet once.

What the query-based analyses share is here: the prologue (``begin_analysis``: the snippet's bounds,
captures and first function), the scope ranges (``Blocks``), the name resolution (``resolve``) and
the result (``assemble``).
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from tree_sitter import Node, Query

try:  # C types for a few hot loops when compiled (csbench._native); no-ops as Python
    import cython
except ImportError:  # Cython not installed: run as Python
    from csbench import _cython_shim as cython

from csbench.code import languages, treequery
from csbench.code.comments import Snippet, parse_snippet
from csbench.code.languages import LANGUAGES, language_spec
from csbench.code.languages.base import Identifiers as Identifiers  # the result type (re-exported)
from csbench.code.languages.base import Roles as Roles
from csbench.code.languages.base import Scopes as Scopes
from csbench.code.languages.base import Spans as Spans
from csbench.code.parsing import captures_by_name, get_parser, get_query

ROLES = ("fun", "arg", "var")
IMPLEMENTED = LANGUAGES  # every registered language has an identifier analysis (``Language.identifiers``)


def _check_language(language: str) -> None:
    if language not in languages.LANGUAGES:
        raise ValueError(f"unsupported language {language!r}; supported: {', '.join(languages.LANGUAGES)}")


def snippet_identifiers(code: str, language: str, snippet: Snippet | None = None) -> Identifiers:
    """The identifiers ``code`` defines (the rules: the docstring of ``csbench.code.languages.<language>``).

    ``snippet`` is ``parse_snippet(code, language)`` when the caller already has it.
    """
    return identifiers_and_comments(code, language, snippet)[0]


def identifiers_and_comments(
    code: str, language: str, snippet: Snippet | None = None
) -> tuple[Identifiers, list[Node] | None]:
    """``snippet_identifiers`` and, found by the same tree-sitter query, the nodes
    ``comments.comment_edits`` needs (its ``found`` argument; ``None`` where the analysis does not
    collect them)."""
    if language not in languages.LANGUAGES:
        _check_language(language)
    snippet = snippet if snippet is not None else parse_snippet(code, language)
    return language_spec(language).identifiers.analysis(snippet)


@functools.lru_cache(maxsize=64)
def receiver_names(language: str) -> frozenset[str]:
    """The names only a name that already is one may take in ``language`` where the renamed code is analysed
    again (``IdentifierRules.receivers``; ``csbench.attacks.renaming.settle``)."""
    _check_language(language)
    return language_spec(language).identifiers.receivers


@functools.lru_cache(maxsize=1 << 16)  # the attacks check the same names over and over
def is_valid_name(name: str, language: str) -> bool:
    """Whether ``name`` can replace a defined name in ``language`` (PHP: without the ``$``; the
    snippet's function may not take every valid name: ``Identifiers.fun_may_take``)."""
    _check_language(language)
    return language_spec(language).identifiers.is_valid_name(name)


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
    if language not in languages.LANGUAGES:
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
        # (a function that keeps its name captures nothing, even one it calls itself by: ``self.value`` in ``value``)
        refused = sorted(
            {new for old, new in mapping.items() if new != old and roles[old] == "fun" and not ids.fun_may_take(new)}
        )
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


# ----------------------------------------------------------------------------------- query helpers


def captures(language: str, root: Node) -> dict[str, list[Node]]:
    """The nodes the analysis query of ``language`` captures below ``root``, by capture name (each list
    in document order). One query per language: its traversal of the tree costs about the same for
    any set of patterns, and is most of the cost of a capture."""
    return _capturer(language)(root)


def query_source(language: str) -> str:
    """The source of the analysis query of ``language`` (``IdentifierRules.query``)."""
    query = language_spec(language).identifiers.query
    if query is None:
        raise ValueError(f"the identifier analysis of {language!r} has no query (it walks the tree itself)")
    return query()


# A language whose analysis query is matched by a walk of the tree (``csbench.code.treequery``) when that
# module runs compiled (``IdentifierRules.walked``): same captures. Chosen by the attack's end-to-end
# time, not the captures' alone (benchmarks/bench_treequery.py times those): on R the captures take
# 0.54x of the parse against 0.73x with tree-sitter's query cursor, and `ordered_id` 2.60x against
# 2.78x; JavaScript's captures are faster walked too (0.63x against 0.71x) but its attacks were not
# (`full_hash` 2.67x against 2.61x: the walk allocates a node object for every node); Go and PHP
# capture slower walked, and as plain Python the walk is the slower one everywhere.
#
# Where the walk in C is built (``treequery.C_WALK``: tree-sitter's own cursor, a Python node made only for
# what the query needs), a language's query is matched by it unless ``IdentifierRules.walked_in_c`` is
# False: JavaScript's captures cost 0.48x of the parse against 0.71x with the query cursor, Java's 0.47x
# against 0.70x, Ruby's 0.47x against 0.60x, R's 0.28x against 0.64x (docs/performance.md).
@functools.cache
def _capturer(language: str) -> Callable[[Node], dict[str, list[Node]]]:
    """``captures`` for ``language``: the walk in C, the walk in Python (``IdentifierRules.walked``) or
    tree-sitter's query."""
    rules = language_spec(language).identifiers
    if (treequery.C_WALK and rules.walked_in_c) or (rules.walked and treequery.COMPILED):
        return treequery.WalkQuery(tree_sitter_language(language), query_source(language)).captures
    return functools.partial(captures_by_name, *_analysis_query(language))


@functools.cache
def _analysis_query(language: str) -> tuple[Query, tuple[str, ...]]:
    """Tree-sitter's query of the analysis of ``language``, and its capture names in order."""
    source = query_source(language)
    return get_query(language, source), tuple(dict.fromkeys(re.findall(r"@(\w+)", source)))


@functools.cache
def _grammar_kinds(language: str) -> frozenset[str]:
    """The named node kinds of the language's tree-sitter grammar."""
    grammar = tree_sitter_language(language)
    return frozenset(
        grammar.node_kind_for_id(kind_id)
        for kind_id in range(grammar.node_kind_count)
        if grammar.node_kind_is_named(kind_id)
    )


def any_kind(language: str, kinds: Iterable[str]) -> str:
    """A query alternation ``[(a) (b) ...]`` of the node kinds the grammar has (sorted)."""
    return "[" + " ".join(f"({kind})" for kind in sorted(set(kinds) & _grammar_kinds(language))) + "]"


def tree_sitter_language(language: str):
    """The tree-sitter ``Language`` (the grammar) of ``language``."""
    import warnings

    import tree_sitter_languages

    get_parser(language)  # checks the language
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # as in csbench.code.parsing
        return tree_sitter_languages.get_language(language_spec(language).grammar)


@cython.locals(
    data=bytes, start=cython.Py_ssize_t, end=cython.Py_ssize_t, first=cython.Py_ssize_t, stop=cython.Py_ssize_t
)
def resolve(
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


def add_method_name(
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


class CallSyntax(NamedTuple):
    """How a language calls a method of the object a method runs on (``called_names``)."""

    receivers: tuple[bytes, ...]  # the receiver's spellings: ``this``, ``$this``, ``self``, ``static``
    access: tuple[bytes, ...]  # what joins it to the member: ``.``, ``->``, ``::``
    parenthesized: bool  # a member is a call only with ``(`` after it (Java, PHP: fields are another namespace)


_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$@")
_SPACE_BYTES = frozenset(b" \t\r\n\f\v")


@cython.locals(i=cython.Py_ssize_t, j=cython.Py_ssize_t, k=cython.Py_ssize_t, n=cython.Py_ssize_t)
def called_names(
    data: bytes, spans: Spans, fun_name: str | None, syntax: CallSyntax, comments: Sequence[Node], start: int
) -> frozenset[str]:
    """The names of ``spans`` (a snippet's names and their occurrences' byte spans in ``data``, the snippet's
    bytes) that the code also calls as a method of its own object or as a function (``this.name(``,
    ``$this->name(``, ``self.name``, a bare ``name(``), outside ``comments`` (nodes of the tree whose snippet
    starts at byte ``start``): its function's new name must not be one (``Identifiers.members``): Java
    ``int assign(int duration) { return this.duration(duration); }`` renamed ``duration`` (its parameter moving
    away) would call itself. A name the code calls but does not define is reserved anyway; a call inside a
    string counts too (a name refused to the function that it could have taken)."""
    out: list[str] = []
    size = len(data)
    for name, found in spans.items():
        if name == fun_name:
            continue
        word = name.encode("utf-8")
        n = len(word)
        if data.count(word) == len(found):  # every occurrence is the name's own
            continue
        own = {a for a, _ in found}
        i = data.find(word)
        while i != -1:
            j = i + n
            whole = (i == 0 or data[i - 1] not in _NAME_BYTES) and (j >= size or data[j] not in _NAME_BYTES)
            if whole and i not in own and _is_call(data, i, j, syntax) and not _in_comment(i, comments, start):
                out.append(name)
                break
            i = data.find(word, j)
    return frozenset(out)


@cython.locals(i=cython.Py_ssize_t, j=cython.Py_ssize_t, k=cython.Py_ssize_t, m=cython.Py_ssize_t)
def _is_call(data: bytes, i: int, j: int, syntax: CallSyntax) -> bool:
    """Whether the word ``data[i:j]`` is called on the code's own object or bare (``called_names``)."""
    k = j
    while k < len(data) and data[k] in _SPACE_BYTES:
        k += 1
    parenthesis = k < len(data) and data[k] == 40  # "("
    k = i - 1
    while k >= 0 and data[k] in _SPACE_BYTES:
        k -= 1
    if k < 0:
        return parenthesis
    for token in syntax.access:
        if data.endswith(token, 0, k + 1):
            m = k - len(token)
            while m >= 0 and data[m] in _SPACE_BYTES:
                m -= 1
            for receiver in syntax.receivers:
                r = m + 1 - len(receiver)
                if r >= 0 and data.startswith(receiver, r) and (r == 0 or data[r - 1] not in _NAME_BYTES):
                    return parenthesis or not syntax.parenthesized
            return False  # a member of another object
    return parenthesis and data[k] not in b":>\\"  # a bare call (not ``$obj->x(``, ``Foo::x(``, ``\\ns\\x(``)


def _in_comment(i: int, comments: Sequence[Node], start: int) -> bool:
    position = i + start
    return any(node.start_byte <= position < node.end_byte for node in comments)


@cython.locals(first=cython.Py_ssize_t, last=cython.Py_ssize_t)
def assemble(
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


class AnalysisStart(NamedTuple):
    """What every query-based analysis starts from (``begin_analysis``)."""

    start: int  # the snippet's first byte in the tree (after a wrapper)
    end: int  # the byte after its last
    root: Node
    data: bytes  # the snippet's own bytes
    found: dict[str, list[Node]]  # the analysis query's captures, by capture name
    functions: list[Node]  # the ``@function`` captures considered (see ``begin_analysis``)
    function: Node | None  # the outermost first of them, if any


def begin_analysis(
    snippet: Snippet, language: str, with_function: bool = True, inside_only: bool = True
) -> AnalysisStart:
    """The prologue the query-based analyses share: the snippet's bounds in its tree, the captures of
    the language's analysis query and (``with_function``) the snippet's function: the outermost first
    of the query's ``@function`` captures (with ``inside_only``: of those inside the snippet, not in
    its wrapper)."""
    start, end = snippet.offset, snippet.end
    root = snippet.tree.root_node
    found = captures(language, root)
    functions = found["function"] if with_function else []
    if inside_only and with_function:
        functions = [node for node in functions if node.start_byte >= start and node.end_byte <= end]
    function = (functions[0] if len(functions) == 1 else min(functions, key=preorder)) if functions else None
    return AnalysisStart(start, end, root, snippet.data, found, functions, function)


def is_name(node: Node | None) -> bool:
    """Whether ``node`` has text: tree-sitter's error recovery inserts zero-width MISSING nodes (an
    ``identifier`` where a name should have been), and those are never identifiers."""
    return node is not None and node.end_byte > node.start_byte


def preorder(node: Node) -> tuple[int, int]:
    return node.start_byte, -node.end_byte


class Blocks:
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
