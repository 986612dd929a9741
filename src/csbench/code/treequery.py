"""Tree-sitter query captures found by one walk of the tree, for the simple queries the identifier
analyses use (issue #4: speed).

``WalkQuery(language, source).captures(root)`` gives what ``Query.captures`` of tree-sitter gives for
the same query source, grouped by capture name: ``{name: [node, ...]}``, each list in tree-sitter's
capture order (by the captured node's start, then the pattern's index in the source, then the order
the walk meets them). tests/code/test_treequery.py checks the equality on real code of every language.

Why: tree-sitter's query cursor costs 0.4-0.5x of the parse on a tree for any pattern, even one
that matches nothing (it works out each node's fields and supertypes as it goes), and 0.7x for R's
analysis query; a ``TreeCursor`` walk that looks each node's kind up in a table costs some 0.4x, and
the patterns that look at children are matched only at the nodes they start at. Where the walk in C
is built (``csbench.code._tswalk``, compiled by ``make setup``; ``C_WALK``), tree-sitter's own cursor
walks the tree and a Python node is made only for the nodes the query needs (the walk alone: 0.17-0.31x
of the parse for the analysis queries; the patterns on children are matched here after it): the
languages whose captures it makes faster use it (``IdentifierRules.walked_in_c``,
``csbench.code.identifiers._capturer``); without it, the walk in Python pays only where the grammar
suits it (benchmarks/bench_treequery.py; ``IdentifierRules.walked``).

The query subset: node patterns ``(kind child ...)`` and ``(_ child ...)`` (any named node), the
wildcard ``_`` (any node), alternations ``[pattern ...]``, fields ``name: pattern`` and captures
``@name`` after any pattern. Several child patterns match children in that order (not necessarily
adjacent), as tree-sitter does. Anything else (predicates ``#eq?``, anchors ``.``, quantifiers,
negated fields, string literals, comments) raises ``QuerySyntaxError``. Every pattern must start at
named node kinds (not at a wildcard).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

try:  # Cython's pure Python mode: C types when compiled (csbench._native), nothing otherwise
    import cython
except ImportError:  # pragma: no cover - exercised in tests/package/test_native.py
    from csbench import _cython_shim as cython


COMPILED: bool = cython.compiled  # this module runs as a compiled extension (csbench._native)


def _load_c_walk():
    """``csbench.code._tswalk`` bound to the loaded tree_sitter binding, or None where it is not built, is
    stale or forced off (``csbench._native``: CSBENCH_PURE_PYTHON=1), or refuses this tree_sitter."""
    from csbench import _native

    if _native.c_module_plan().get("csbench.code._tswalk") != _native.COMPILED:
        return None
    try:
        import tree_sitter
        from tree_sitter import _binding

        from csbench.code import _tswalk

        _tswalk.bind(_binding.__file__, tree_sitter.Node)
    except (ImportError, AttributeError, OSError):
        return None
    return _tswalk


_C = _load_c_walk()
C_WALK: bool = _C is not None  # WalkQuery walks in C (csbench.code._tswalk)


class QuerySyntaxError(ValueError):
    """A query outside the subset ``WalkQuery`` implements (module docstring)."""


_TOKEN = re.compile(r"\s*(?:(?P<open>[(\[])|(?P<close>[)\]])|@(?P<capture>\w+)|(?P<field>\w+)\s*:|(?P<name>\w+))")


@dataclass(frozen=True)
class _Pattern:
    """A node pattern: the node's kind ids (``None``: any node; named ones only if ``named``), its
    child patterns with their field names (``None``: any child), and its capture name."""

    kinds: frozenset[int] | None
    named: bool
    children: tuple[tuple[str | None, _Pattern | _Alternation], ...]
    capture: str | None


@dataclass(frozen=True)
class _Alternation:
    alternatives: tuple[_Pattern | _Alternation, ...]
    capture: str | None


def _tokens(source: str) -> list[tuple[str, str]]:
    out = []
    position = 0
    source = source.rstrip()
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise QuerySyntaxError(f"unsupported query syntax at {source[position : position + 40].strip()!r}")
        position = match.end()
        kind = match.lastgroup
        out.append((kind, match[kind]))
    return out


class _Parser:
    """The patterns of a query source, with each kind name resolved to the grammar's kind ids."""

    def __init__(self, source: str, kind_ids: dict[str, frozenset[int]]) -> None:
        self.tokens = _tokens(source)
        self.at = 0
        self.kind_ids = kind_ids

    def patterns(self) -> list[_Pattern | _Alternation]:
        found = []
        while self.at < len(self.tokens):
            found.append(self.pattern())
        return found

    def next(self, what: str) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise QuerySyntaxError(f"query ends where {what} was expected")
        token = self.tokens[self.at]
        self.at += 1
        return token

    def pattern(self) -> _Pattern | _Alternation:
        kind, text = self.next("a pattern")
        if kind == "open" and text == "(":
            kind, name = self.next("a node kind")
            if kind != "name":
                raise QuerySyntaxError(f"expected a node kind after '(', found {name!r}")
            children = []
            while self.at < len(self.tokens) and self.tokens[self.at] != ("close", ")"):
                field = None
                if self.tokens[self.at][0] == "field":
                    field = self.next("a field")[1]
                children.append((field, self.pattern()))
            if self.next("')'") != ("close", ")"):
                raise QuerySyntaxError("unbalanced ')'")
            kinds = None if name == "_" else self.kind_ids.get(name, frozenset())
            found: _Pattern | _Alternation = _Pattern(kinds, True, tuple(children), None)
        elif kind == "open":  # "["
            alternatives = []
            while self.at < len(self.tokens) and self.tokens[self.at] != ("close", "]"):
                alternatives.append(self.pattern())
            if self.next("']'") != ("close", "]"):
                raise QuerySyntaxError("unbalanced ']'")
            found = _Alternation(tuple(alternatives), None)
        elif (kind, text) == ("name", "_"):
            found = _Pattern(None, False, (), None)
        elif kind == "close":
            raise QuerySyntaxError(f"unbalanced {text!r}")
        else:
            raise QuerySyntaxError(f"unsupported query syntax at {text!r}")
        if self.at < len(self.tokens) and self.tokens[self.at][0] == "capture":
            capture = self.next("a capture")[1]
            if isinstance(found, _Pattern):
                found = _Pattern(found.kinds, found.named, found.children, capture)
            else:
                found = _Alternation(found.alternatives, capture)
        return found


def _root_kinds(pattern: _Pattern | _Alternation) -> frozenset[int]:
    if isinstance(pattern, _Alternation):
        return frozenset().union(*(_root_kinds(alternative) for alternative in pattern.alternatives))
    if pattern.kinds is None:
        raise QuerySyntaxError("a pattern starting at a wildcard (walked for every node) is not supported")
    return pattern.kinds


def _root_capture(pattern: _Pattern | _Alternation) -> str | None:
    """The capture name of a pattern that captures its root and nothing else, with no condition on
    its children (matching it needs no more than the root's kind); else None."""
    if isinstance(pattern, _Alternation):
        simple = all(
            isinstance(alternative, _Pattern) and not alternative.children and alternative.capture is None
            for alternative in pattern.alternatives
        )
        return pattern.capture if simple else None
    return pattern.capture if not pattern.children else None


def _child_capture(pattern: _Pattern | _Alternation) -> tuple[str | None, frozenset[int] | None, bool, str] | None:
    """For a pattern ``(kind field: child @name)`` (the field optional) whose child pattern has no
    children and whose only capture is ``@name``: (field, the child's kinds, named, name), what the
    walk matches without ``_matches``; else None."""
    if not isinstance(pattern, _Pattern) or pattern.capture is not None or len(pattern.children) != 1:
        return None
    field, child = pattern.children[0]
    if not isinstance(child, _Pattern) or child.children or child.capture is None:
        return None
    return field, child.kinds, child.named, child.capture


def _capture_names(pattern: _Pattern | _Alternation) -> list[str]:
    names = [pattern.capture] if pattern.capture else []
    if isinstance(pattern, _Alternation):
        inner = [name for alternative in pattern.alternatives for name in _capture_names(alternative)]
    else:
        inner = [name for _, child in pattern.children for name in _capture_names(child)]
    return names + inner


# a pattern starting at a node kind: (its index, its name if it captures only its root, else
# ``_child_capture``'s plan if it has one, the pattern)
_Entry = tuple[
    int, "str | None", "tuple[str | None, frozenset[int] | None, bool, str] | None", "_Pattern | _Alternation"
]

_ERROR = 65535  # the kind id of tree-sitter's ERROR nodes (``ts_builtin_sym_error``)

Match = list[tuple[str, Node]]  # the captures of one match


def _is_kind(node: Node, kinds: frozenset[int] | None, named: bool) -> bool:
    """Whether ``node`` is of one of ``kinds`` (None: of any kind; then a named node if ``named``)."""
    if kinds is not None:
        return node.kind_id in kinds
    return node.is_named or not named


def _matches(node: Node, pattern: _Pattern | _Alternation) -> list[Match]:
    """Every match of ``pattern`` at ``node``, as its captures (outer first)."""
    if isinstance(pattern, _Alternation):
        found = [match for alternative in pattern.alternatives for match in _matches(node, alternative)]
    else:
        if not _is_kind(node, pattern.kinds, pattern.named):
            return []
        if not pattern.children:
            found = [[]]
        elif len(pattern.children) == 1:
            field, child = pattern.children[0]
            candidates = node.children_by_field_name(field) if field is not None else node.children
            found = [match for candidate in candidates for match in _matches(candidate, child)]
        else:
            found = _in_sequence(node, node.children, pattern.children, 0, 0)
    if pattern.capture is not None:
        return [[(pattern.capture, node), *match] for match in found]
    return found


def _in_sequence(
    node: Node, children: list[Node], patterns: tuple[tuple[str | None, _Pattern | _Alternation], ...], i: int, at: int
) -> list[Match]:
    """Matches of ``patterns[i:]`` on children ``at`` on of ``node``, each after the one before."""
    if i == len(patterns):
        return [[]]
    field, pattern = patterns[i]
    found = []
    for k in range(at, len(children)):
        if field is not None and node.field_name_for_child(k) != field:
            continue
        for match in _matches(children[k], pattern):
            found.extend([*match, *rest] for rest in _in_sequence(node, children, patterns, i + 1, k + 1))
    return found


class WalkQuery:
    """A query (the subset of the module docstring) over one grammar, matched by walking the tree."""

    def __init__(self, language, source: str) -> None:
        """``language``: a tree-sitter ``Language``; ``source``: the query."""
        kind_ids: dict[str, set[int]] = {}
        for kind_id in range(language.node_kind_count):
            if language.node_kind_is_named(kind_id):  # every id of a kind: aliases have several
                kind_ids.setdefault(language.node_kind_for_id(kind_id), set()).add(kind_id)
        kind_ids.setdefault("ERROR", set()).add(_ERROR)
        patterns = _Parser(source, {name: frozenset(ids) for name, ids in kind_ids.items()}).patterns()
        self.names = tuple(dict.fromkeys(name for pattern in patterns for name in _capture_names(pattern)))
        sources: dict[str, int] = {}  # capture name -> how many patterns capture it
        for pattern in patterns:
            for name in set(_capture_names(pattern)):
                sources[name] = sources.get(name, 0) + 1
        # names in walk order as they are: captured at the root of their only pattern
        in_order = {
            name
            for pattern in patterns
            if (name := _root_capture(pattern)) is not None and sources[name] == 1 and _capture_names(pattern) == [name]
        }
        self.sorted_names = tuple(name for name in self.names if name not in in_order)
        self.direct: dict[int, str] = {}  # kind id -> the in-order name its node is captured under
        general: dict[int, list[_Entry]] = {}
        for index, pattern in enumerate(patterns):
            name = _root_capture(pattern)
            for kind_id in sorted(_root_kinds(pattern)):
                if name in in_order and kind_id not in self.direct:
                    self.direct[kind_id] = name
                else:
                    general.setdefault(kind_id, []).append((index, name, _child_capture(pattern), pattern))
        # kind id -> the other patterns starting at its nodes (a list: faster than a dict); ERROR nodes
        # (kind id 65535) only when a pattern starts at one
        size = max(language.node_kind_count, max(general, default=0)) + 1
        self.general: list[tuple[_Entry, ...] | None] = [None] * size
        for kind_id, entries in general.items():
            self.general[kind_id] = tuple(entries)
        self._c_plan()

    def _c_plan(self) -> None:
        """The kind table of the walk in C (``csbench.code._tswalk.walk``): a kind captured under an
        in-order name goes to that name's list, a kind with other patterns to list 0, matched here in walk
        order. An in-order name that a pattern of list 0 also captures (two patterns capture one kind
        under two names) has all its nodes matched here, so that its list stays in walk order."""
        fed = {entry[1] for entries in self.general if entries for entry in entries if entry[1] is not None}
        self.demoted = {kind_id: name for kind_id, name in self.direct.items() if name in fed}
        kept = [name for name in dict.fromkeys(self.direct.values()) if name not in fed]
        lists = {name: k for k, name in enumerate(kept, start=1)}
        self.lists = lists
        self.table: bytes | None = None
        if len(lists) > 126:  # the table holds list numbers in 7 bits: such a query walks in Python
            return
        table = bytearray(65536)
        for kind_id, name in self.direct.items():
            table[kind_id] = lists.get(name, 0x80)
        for kind_id, entries in enumerate(self.general):
            if entries is not None:
                table[kind_id] |= 0x80
        self.table = bytes(table)

    def captures(self, root: Node) -> dict[str, list[Node]]:
        """The nodes the query captures at or below ``root``, by capture name (module docstring)."""
        found: dict[str, list[Node]] = {name: [] for name in self.names}
        if _C is not None and self.table is not None:  # the walk in C: the in-order names' lists come made
            lists = _C.walk(root, self.table, len(self.lists) + 1)
            for name, k in self.lists.items():
                found[name] = lists[k]
            return self._matched(lists[0], found, self.demoted)
        return self._matched(_preorder(root), found, self.direct)

    @cython.locals(seq=cython.Py_ssize_t)
    def _matched(self, nodes, found: dict[str, list[Node]], direct: dict[int, str]) -> dict[str, list[Node]]:
        """``found`` with the captures of ``nodes`` (in walk order): a node of a kind in ``direct`` goes to
        that in-order name's list, the patterns starting at its kind (``general``) are matched."""
        keyed: dict[str, list[tuple[int, int, int, Node]]] = {name: [] for name in self.sorted_names}
        targets = {kind_id: found[name] for kind_id, name in direct.items()}
        general = self.general
        size = len(general)
        seq = 0
        for node in nodes:
            kind_id = node.kind_id
            target = targets.get(kind_id)
            if target is not None:
                target.append(node)
            entries = general[kind_id] if kind_id < size else None
            if entries is not None:
                seq = _match_entries(node, entries, found, keyed, seq)
        return _settled(found, keyed)


def _preorder(root: Node):
    """Every node at or below ``root``, in the order of a ``TreeCursor`` walk (tree-sitter's pre-order)."""
    cursor = root.walk()
    first_child, next_sibling, parent = cursor.goto_first_child, cursor.goto_next_sibling, cursor.goto_parent
    while True:
        yield cursor.node
        if first_child():
            continue
        while not next_sibling():
            if not parent():
                return


@cython.locals(seq=cython.Py_ssize_t)
def _match_entries(
    node: Node,
    entries: tuple[_Entry, ...],
    found: dict[str, list[Node]],
    keyed: dict[str, list[tuple[int, int, int, Node]]],
    seq: int,
) -> int:
    """The captures of the patterns ``entries`` that start at ``node``, into ``found`` (an in-order name)
    or ``keyed`` (with their sort key; ``seq``: the walk order so far, returned advanced)."""
    for index, name, child, pattern in entries:
        if name is not None:  # captures its root, whatever its children
            if name in keyed:
                keyed[name].append((node.start_byte, index, seq, node))
                seq += 1
            else:
                found[name].append(node)
        elif child is not None:  # (kind field: child @name): its children, filtered
            field, kinds, named, capture = child
            captured_under = keyed[capture]
            for captured in node.children_by_field_name(field) if field is not None else node.children:
                if not _is_kind(captured, kinds, named):
                    continue
                captured_under.append((captured.start_byte, index, seq, captured))
                seq += 1
        else:
            for match in _matches(node, pattern):
                for capture, captured in match:
                    keyed[capture].append((captured.start_byte, index, seq, captured))
                    seq += 1
    return seq


def _settled(
    found: dict[str, list[Node]], keyed: dict[str, list[tuple[int, int, int, Node]]]
) -> dict[str, list[Node]]:
    """``found`` with the names matched out of order put in tree-sitter's capture order."""
    for name, entries_of_name in keyed.items():
        entries_of_name.sort()  # (start, pattern index, walk order): seq is unique, nodes never compared
        found[name] = [entry[3] for entry in entries_of_name]
    return found
