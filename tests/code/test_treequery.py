"""csbench.code.treequery: the walk gives exactly tree-sitter's captures for the analysis queries."""

from __future__ import annotations

import pytest
from corpora import local_functions, shared_functions

from csbench.code import identifiers, treequery
from csbench.code.comments import parse_snippet
from csbench.code.parsing import get_query
from csbench.code.treequery import QuerySyntaxError, WalkQuery

QUERY_LANGUAGES = ["php", "go", "javascript", "java", "ruby", "r"]  # Python has its own walk


def _grammar(language: str):
    return identifiers.tree_sitter_language(language)


def _reference(language: str, source: str, root) -> dict[str, list[tuple[int, int, str]]]:
    """tree-sitter's captures of ``source``, grouped by name, as (start, end, kind)."""
    names = WalkQuery(_grammar(language), source).names
    found: dict[str, list[tuple[int, int, str]]] = {name: [] for name in names}
    for node, name in get_query(language, source).captures(root):
        found[name].append((node.start_byte, node.end_byte, node.type))
    return found


def _walked(query: WalkQuery, root) -> dict[str, list[tuple[int, int, str]]]:
    return {name: [(n.start_byte, n.end_byte, n.type) for n in nodes] for name, nodes in query.captures(root).items()}


@pytest.fixture(autouse=True, params=["C", "Python"])
def walk(request, monkeypatch):
    """Every test of the walk twice: in C (csbench.code._tswalk, where built) and in Python."""
    if request.param == "C":
        if not treequery.C_WALK:
            pytest.skip("csbench.code._tswalk is not built (make setup builds it)")
    else:
        monkeypatch.setattr(treequery, "_C", None)
    return request.param


def test_the_walk_in_c_is_built_where_the_hot_modules_are(walk):
    """``make setup`` builds csbench.code._tswalk with the Cython modules: where they run compiled, it does."""
    from csbench import _native

    if walk != "C":
        pytest.skip("about the walk in C")

    if not _native.all_compiled():
        pytest.skip("the hot modules run from their sources here")
    assert treequery.C_WALK


def test_the_walk_in_c_makes_nodes_like_the_binding(walk):
    """The nodes the walk in C makes are tree_sitter nodes of the same tree: equal to the binding's own
    (same kind, span, parent), and they keep their tree alive."""
    if walk != "C":
        pytest.skip("about the walk in C")
    code = "function f(a) { return a + g(a); }"
    query = WalkQuery(_grammar("javascript"), "(identifier) @id")
    nodes = query.captures(parse_snippet(code, "javascript").tree.root_node)["id"]  # the tree: only theirs now
    root = parse_snippet(code, "javascript").tree.root_node
    expected = [node for node, _ in get_query("javascript", "(identifier) @id").captures(root)]
    assert [(n.type, n.start_byte, n.end_byte, n.parent.type) for n in nodes] == [
        (n.type, n.start_byte, n.end_byte, n.parent.type) for n in expected
    ]
    assert [code[n.start_byte : n.end_byte] for n in nodes] == ["f", "a", "a", "g", "a"]
    with pytest.raises(TypeError):
        treequery._C.walk("not a node", query.table, len(query.lists) + 1)
    with pytest.raises(ValueError):
        treequery._C.walk(root, b"short", 2)


@pytest.mark.parametrize("language", QUERY_LANGUAGES)
def test_analysis_query_captures_equal_tree_sitter_on_real_code(language):
    source = identifiers.query_source(language)
    query = WalkQuery(_grammar(language), source)
    codes = local_functions(language) + shared_functions(language)
    # broken code too: every function cut in the middle (error recovery, MISSING nodes)
    codes += [code[: len(code) // 2] for code in codes[::7]]
    assert len(codes) > 100
    differing = []
    for code in codes:
        root = parse_snippet(code, language).tree.root_node
        if _walked(query, root) != _reference(language, source, root):
            differing.append(code[:80])
    assert not differing, f"{len(differing)} of {len(codes)} snippets differ, e.g. {differing[:3]}"


def test_order_nested_captures_by_start_then_pattern():
    """A capture below a pattern's root comes in document order, not in the order the walk meets its
    pattern's root: ``java.util.List`` is ``(java.util).List``, whose outer pattern captures ``List``
    before the inner one is walked; same for ``a.b.c``."""
    code = "import java.util.List;\nclass A { int f() { return a.b.c; } }"
    source = "(scoped_identifier (identifier) @nv)\n(field_access field: (identifier) @nv)\n(identifier) @id"
    root = parse_snippet(code, "java").tree.root_node
    walked = _walked(WalkQuery(_grammar("java"), source), root)
    assert walked == _reference("java", source, root)
    assert [code[s:e] for s, e, _ in walked["nv"]] == ["java", "util", "List", "b", "c"]
    assert [code[s:e] for s, e, _ in walked["id"]] == ["java", "util", "List", "A", "f", "a", "b", "c"]


def test_several_patterns_one_name_and_child_sequences():
    code = "function f(o) { this.a = o.b; var [x, y] = o; let z = 1; return this.c; }"
    source = "\n".join(
        [
            "(member_expression object: (this) property: _ @this_property)",  # two child patterns, in order
            "(variable_declaration (variable_declarator name: _ @name))",
            "(lexical_declaration (variable_declarator name: _ @name))",
            "[(function_declaration) (statement_block)] @block",
            "(formal_parameters [(identifier) @param (assignment_pattern left: (identifier) @param)])",
        ]
    )
    root = parse_snippet(code, "javascript").tree.root_node
    walked = _walked(WalkQuery(_grammar("javascript"), source), root)
    assert walked == _reference("javascript", source, root)
    assert [code[s:e] for s, e, _ in walked["this_property"]] == ["a", "c"]
    assert [code[s:e] for s, e, _ in walked["name"]] == ["[x, y]", "z"]
    assert [kind for _, _, kind in walked["block"]] == ["function_declaration", "statement_block"]
    assert [code[s:e] for s, e, _ in walked["param"]] == ["o"]


def test_unknown_kinds_match_nothing_like_a_query_of_absent_kinds():
    root = parse_snippet("x <- 1", "r").tree.root_node
    assert WalkQuery(_grammar("r"), "(no_such_kind) @x\n(identifier) @id").captures(root) == {
        "x": [],
        "id": [root.child(0).child_by_field_name("name")],
    }


@pytest.mark.parametrize(
    "source, message",
    [
        ('((identifier) @a (#eq? @a "x"))', "unsupported query syntax"),
        ("(call . (identifier) @a)", "unsupported query syntax"),
        ("(call (identifier)* @a)", "unsupported query syntax"),
        ("(call !arguments) @a", "unsupported query syntax"),
        ("(_) @any", "starting at a wildcard"),
        ("(call (identifier) @a", "query ends"),
        ("[(call) (identifier)) @a", "unbalanced"),
    ],
)
def test_queries_outside_the_subset_are_refused(source, message):
    with pytest.raises(QuerySyntaxError, match=message):
        WalkQuery(_grammar("r"), source)


def test_r_analysis_walks_when_compiled_and_queries_otherwise(monkeypatch, walk):
    """Without the walk in C, ``walked`` languages (R) take the walk only compiled (as plain Python it is
    the slower one), the others tree-sitter's query; with it, every language walks in C but those whose
    query cursor is as fast (``walked_in_c`` False: Go, PHP). The identifiers come out the same every way."""
    monkeypatch.setattr(treequery, "C_WALK", walk == "C")
    codes = local_functions("r", 60)
    results = {}
    for compiled in (True, False):
        monkeypatch.setattr(treequery, "COMPILED", compiled)
        identifiers._capturer.cache_clear()
        capturer = identifiers._capturer("r")
        assert isinstance(getattr(capturer, "__self__", None), WalkQuery) is (compiled or walk == "C")
        java_walks = isinstance(getattr(identifiers._capturer("java"), "__self__", None), WalkQuery)
        assert java_walks is (walk == "C")
        # Go's query is as fast on tree-sitter's query cursor (IdentifierRules.walked_in_c)
        assert not isinstance(getattr(identifiers._capturer("go"), "__self__", None), WalkQuery)
        results[compiled] = [identifiers.snippet_identifiers(code, "r") for code in codes]
    identifiers._capturer.cache_clear()
    assert results[True] == results[False]
    assert sum(bool(ids.names) for ids in results[True]) > 50
