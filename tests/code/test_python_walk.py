"""The recursion of Python's identifier analysis in C (``csbench.code._tswalk.named_walk``): the nodes it
meets are those ``_PythonAnalyzer.visit_children`` meets through ``node.named_children``, and the
analysis is the same with it and without it, on real code and on code tree-sitter parses with errors."""

from __future__ import annotations

import pytest
from corpora import SHARED_DATA, local_functions, shared_functions

from csbench.code.comments import parse_snippet
from csbench.code.languages import _python_scopes as scopes

pytestmark = pytest.mark.skipif(scopes._NAMED_WALK is None, reason="csbench.code._tswalk is not built (make setup)")

# tree-sitter's error recovery: ERROR and MISSING nodes, Python 2, cut in the middle
BROKEN = [
    "def f(a, b:\n    return a +\n",
    "def f(x):\n    print x, 'y'\n    exec 'x = 1'\n    return x\n",
    "def f(x):\n    return [y for y in x if\n",
    "def f(self, x):\n    try:\n        pass\n    except Exception, e:\n        raise e\n",
    "def f(a):\n    b = (a, # note\n    c = {a: b for\n",
    "lambda x: (x, y",
    "def f(a):\n    return .x + a.\n",
    "def f(a, w):\n    return f'{a.b!r:>{w}} {a[0].c(w)=}' + f\"{'x'.join(a)}\" 'plain' r'{a}'\n",
    "def f(self, a):\n    self.a = a.b\n    return self.f(a=a.c, b=f'{self.a}')\n",
    "@x.setter\ndef f(self, v):\n    self._v = v.real\n",
    "def f(a):\n    return a.b\ndef g(self):\n    return self.g.h\nx = y.z\n",
    "def g(self):\n    return self.h\nself.g\nself.h\n",  # module code after a method: its attributes too
]


def _reference(node, actions, methods: bool) -> list:
    """What ``visit_children`` acts on below ``node``, in its order, walked as Python walks it: through
    ``named_children``, with ``_string`` (an f-string's interpolations) and, in a snippet without a method,
    ``_attribute`` (its ``object``) done on the way, as the walk in C does them."""
    return [found for child in node.named_children for found in _dispatch(child, actions, methods)]


def _dispatch(node, actions, methods: bool) -> list:
    """What ``visit`` acts on for ``node``."""
    action = actions.get(node.kind_id, scopes._GENERIC)
    if action is scopes._GENERIC:
        return _reference(node, actions, methods) if node.named_child_count else []
    if action is scopes._NO_NAMES:
        return []
    if action is scopes._PythonAnalyzer._string:
        inside = [child for child in node.named_children if child.type == "interpolation"]
        return [found for child in inside for found in _reference(child, actions, methods)]
    if action is scopes._PythonAnalyzer._attribute and not methods:
        target = node.child_by_field_name("object")
        return [node] if target is None else _dispatch(target, actions, methods)
    return [node]


def _spans(nodes) -> list[tuple[int, int, int]]:
    return [(node.kind_id, node.start_byte, node.end_byte) for node in nodes]


def _codes() -> list[str]:
    codes = local_functions("python", limit=600) + BROKEN
    if SHARED_DATA.is_dir():
        codes += shared_functions("python")
    return codes


def test_the_walk_in_c_meets_the_nodes_the_python_recursion_meets():
    """From every named node of every tree (the root, a handler's body, an ERROR node), the same nodes
    in the same order, each a node of the same tree (its parent reachable), with both tables."""
    actions = scopes._py_actions()
    errors = starts = 0
    for code in _codes():
        tree = parse_snippet(code, "python").tree
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            for methods in (False, True):
                walked = scopes._NAMED_WALK(node, *scopes._py_walk_table(methods))
                assert _spans(walked) == _spans(_reference(node, actions, methods)), code
                assert all(found.parent is not None for found in walked)
            starts += 1
            errors += node.type == "ERROR"
            stack.extend(node.named_children)
    assert starts > 50_000 and errors > 0  # the error-recovered trees were walked too


def test_the_analysis_is_the_same_with_the_walk_in_c_and_without(monkeypatch):
    """Identifiers, roles, spans, reserved names and the comment nodes of each snippet are equal."""
    codes = _codes()
    with_c = [scopes.analysis(parse_snippet(code, "python")) for code in codes]
    monkeypatch.setattr(scopes, "_NAMED_WALK", None)
    without = [scopes.analysis(parse_snippet(code, "python")) for code in codes]
    for code, (ids, comments), (ids_py, comments_py) in zip(codes, with_c, without, strict=True):
        assert ids == ids_py, code
        assert (comments is None) == (comments_py is None), code
        if comments is not None:
            assert _spans(comments) == _spans(comments_py), code
    assert sum(bool(ids.names) for ids, _ in with_c) > len(codes) // 2


def test_the_walk_in_c_refuses_what_is_not_a_node_or_a_table():
    root = parse_snippet("def f(a):\n    return a\n", "python").tree.root_node
    with pytest.raises(TypeError):
        scopes._NAMED_WALK("not a node", *scopes._py_walk_table(False))
    with pytest.raises(ValueError):
        scopes._NAMED_WALK(root, b"short", 0)
    with pytest.raises(ValueError):
        scopes._NAMED_WALK(root, scopes._py_walk_table(False)[0], -1)
