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
]


def _reference(node, actions) -> list:
    """What ``visit_children`` acts on below ``node``, in its order, walked as it walks in Python."""
    out = []
    for child in node.named_children:
        action = actions.get(child.kind_id, scopes._GENERIC)
        if action is scopes._GENERIC:
            if child.named_child_count:
                out += _reference(child, actions)
        elif action is not scopes._NO_NAMES:
            out.append(child)
    return out


def _spans(nodes) -> list[tuple[int, int, int]]:
    return [(node.kind_id, node.start_byte, node.end_byte) for node in nodes]


def _codes() -> list[str]:
    codes = local_functions("python", limit=600) + BROKEN
    if SHARED_DATA.is_dir():
        codes += shared_functions("python")
    return codes


def test_the_walk_in_c_meets_the_nodes_the_python_recursion_meets():
    """From every named node of every tree (the root, a handler's body, an ERROR node), the same nodes
    in the same order, each a node of the same tree (its parent and text reachable)."""
    actions, table = scopes._py_actions(), scopes._py_walk_table()
    errors = starts = 0
    for code in _codes():
        tree = parse_snippet(code, "python").tree
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            walked = scopes._NAMED_WALK(node, table)
            assert _spans(walked) == _spans(_reference(node, actions)), code
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
        scopes._NAMED_WALK("not a node", scopes._py_walk_table())
    with pytest.raises(ValueError):
        scopes._NAMED_WALK(root, b"short")
