"""Identifier analysis and consistent renaming (issue #4, item 1)."""

from __future__ import annotations

import ast
import symtable
import textwrap

import pytest
from corpora import THESIS_ORDERED_ID, THESIS_SNIPPET, AstRenamer, local_functions

from csbench.code.comments import comment_edits, comment_nodes, parse_snippet
from csbench.code.identifiers import (
    IMPLEMENTED,
    Identifiers,
    identifiers_and_comments,
    rename,
    rename_edits,
    snippet_identifiers,
    splice,
)
from csbench.code.languages import language_spec
from csbench.code.parsing import leaves


def ids(code: str) -> Identifiers:
    return snippet_identifiers(textwrap.dedent(code), "python")


def names(code: str) -> tuple[str, ...]:
    return ids(code).names


# ------------------------------------------------------------------------------------------- thesis


def test_thesis_snippet_order_and_roles():
    found = snippet_identifiers(THESIS_SNIPPET, "python")
    assert found.names == ("_check_series_localize_t", "s", "timezone", "tz")
    assert found.roles == {"_check_series_localize_t": "fun", "s": "arg", "timezone": "arg", "tz": "var"}
    assert {name: len(spans) for name, spans in found.occurrences.items()} == {
        "_check_series_localize_t": 1,
        "s": 4,
        "timezone": 2,
        "tz": 2,
    }
    # Imported and global names are used but not defined.
    assert {"is_datetime64tz_dtype", "_get_local_timezone", "pandas"} <= found.reserved


def test_thesis_ordered_id_mapping():
    code = "\n".join(line for line in THESIS_SNIPPET.splitlines() if "#handle" not in line) + "\n"
    found = snippet_identifiers(code, "python")
    mapping = {name: f"id{j + 1}" for j, name in enumerate(found.names)}
    assert rename(code, "python", mapping) == THESIS_ORDERED_ID


def test_thesis_k_shift_snippet_mapping():
    # Section 3.3.4: {_check_series_localize_t: s, s: timezone, timezone: tz, tz: _check_series_localize_t}
    found = snippet_identifiers(THESIS_SNIPPET, "python")
    order = found.names
    mapping = {name: order[(j + 1) % len(order)] for j, name in enumerate(order)}
    out = rename(THESIS_SNIPPET, "python", mapping)
    assert out.startswith("def s(timezone, tz):\n")
    assert "_check_series_localize_t = tz or _get_local_timezone()" in out
    assert "return timezone.dt.tz_convert(_check_series_localize_t).dt.tz_localize(None)" in out
    assert "#handle nested time case" in out  # comments untouched


# ------------------------------------------------------------------------------------------- python


def test_parameters_of_every_kind():
    code = """
    def f(a, b: int, c=1, d: str = "x", *args, e, g=2, **kwargs):
        return a
    """
    found = ids(code)
    assert found.names == ("f", "a", "b", "c", "d", "args", "e", "g", "kwargs")
    assert found.roles["f"] == "fun"
    assert all(found.roles[name] == "arg" for name in found.names[1:])
    assert {"int", "str"} <= found.reserved


def test_positional_only_and_star_separator():
    assert names("def f(a, /, b, *, c):\n    return a + b + c\n") == ("f", "a", "b", "c")


def test_defaults_and_annotations_resolve_outside():
    # The default ``x`` refers to the module, not to the parameter x: x is left alone.
    assert names("def f(y=x, x=1):\n    return x + y\n") == ("f", "y")


def test_locals_of_every_kind_in_order():
    code = """
    def f(p):
        a = 1
        b, (c, *d) = p
        [e, g] = p
        h: int = 2
        i += 1
        for j, k in p:
            pass
        with open(p) as fh, p as (m, n):
            pass
        try:
            pass
        except ValueError as err:
            pass
        comp = [q for q in p if (w := q)]
        del a
        return w
    """
    found = ids(code)
    expected = ("f", "p", "a", "b", "c", "d", "e", "g", "h", "i", "j", "k", "fh", "m", "n", "err", "comp", "q", "w")
    assert found.names == expected
    assert all(found.roles[name] == "var" for name in found.names[2:])
    assert {"open", "ValueError", "int"} <= found.reserved


def test_occurrence_order_is_first_occurrence_in_tree():
    code = """
    def f(x):
        return [y for y in x] + [z for z in x]
    """
    assert names(code) == ("f", "x", "y", "z")


def test_nested_closures_and_lambdas():
    code = """
    def outer(a):
        def inner(b, c=a):
            nonlocal_total = b
            return nonlocal_total + c
        key = lambda item, n=1: item[n]
        return inner(a), key
    """
    found = ids(code)
    assert found.names == ("outer", "a", "inner", "b", "c", "nonlocal_total", "key", "item", "n")
    assert found.roles["inner"] == "var"
    assert found.roles["b"] == found.roles["item"] == found.roles["n"] == "arg"


def test_nonlocal_of_snippet_name_is_renamed_everywhere():
    code = textwrap.dedent("""
    def counter():
        count = 0
        def bump():
            nonlocal count
            count += 1
            return count
        return bump
    """)
    found = snippet_identifiers(code, "python")
    assert found.names == ("counter", "count", "bump")
    assert len(found.occurrences["count"]) == 4
    out = rename(code, "python", {"count": "c0"})
    assert "nonlocal c0" in out and "c0 += 1" in out


def test_global_names_are_left_alone():
    code = """
    def f():
        global total
        total = total + 1
        local = total
        return local
    """
    found = ids(code)
    assert found.names == ("f", "local")
    assert "total" in found.reserved


def test_left_alone_imports_builtins_attributes_keywords_strings():
    code = """
    def f(obj, data):
        import os.path
        from json import loads as parse_json
        text = "data obj"  # data obj
        value = obj.data + len(data)
        call(data=value, obj=1)
        print(f"{value} obj")
        return os.path.join(parse_json(text), str(None))
    """
    found = ids(code)
    assert found.names == ("f", "obj", "data", "text", "value")
    assert {"os", "parse_json", "len", "call", "print", "str", "loads", "json"} <= found.reserved
    src = textwrap.dedent(code)
    out = rename(src, "python", {"obj": "o", "data": "d", "value": "v"})
    assert 'text = "data obj"  # data obj' in out
    assert "v = o.data + len(d)" in out
    assert "call(data=v, obj=1)" in out
    assert 'print(f"{v} obj")' in out


def test_builtins_are_never_defined_even_when_shadowed():
    code = """
    def f(id, x):
        list = [x]
        return id, list
    """
    assert names(code) == ("f", "x")


def test_name_free_in_one_scope_is_left_alone_everywhere():
    # ``n`` is a comprehension variable and also a free (global) name in the body.
    code = """
    def f(x):
        ys = [n for n in x]
        return n(ys)
    """
    assert names(code) == ("f", "x", "ys")


def test_self_and_cls_are_parameters():
    code = """
    def method(self, other):
        return self.value + other.value
    """
    found = ids(code)
    assert found.names == ("method", "self", "other")
    assert found.roles["self"] == "arg"


def test_class_bodies_and_class_names_are_left_alone():
    code = """
    def f(a):
        class Local:
            attr = a
            def method(self, b):
                return b + attr
        return Local
    """
    found = ids(code)
    # Methods are class attributes: their names stay, their parameters are renamed.
    assert found.names == ("f", "a", "self", "b")
    assert {"Local", "attr", "method"} <= found.reserved


def test_recursion_renames_the_function_name_everywhere():
    code = textwrap.dedent("""
    def fact(n):
        return 1 if n < 2 else n * fact(n - 1)
    """)
    out = rename(code, "python", {"fact": "g", "n": "m"})
    assert "def g(m):" in out and "m * g(m - 1)" in out


def test_comprehension_first_iterable_is_in_enclosing_scope():
    # The first iterable ``x`` is the parameter; the inner x shadows it inside the comprehension.
    code = textwrap.dedent("""
    def f(x):
        return [x for x in x]
    """)
    found = snippet_identifiers(code, "python")
    assert found.names == ("f", "x")
    assert len(found.occurrences["x"]) == 4


def test_match_case_patterns_are_left_alone():
    code = """
    def f(cmd):
        match cmd:
            case [name, arg]:
                return name
        return None
    """
    found = ids(code)
    assert found.names == ("f", "cmd")
    assert "name" in found.reserved


def test_decorated_function_and_unicode_offsets():
    code = textwrap.dedent("""
    @decorator
    def ünï(ä, b="ß"):
        ö = ä + b
        return ö
    """)
    found = snippet_identifiers(code, "python")
    assert found.names == ("ünï", "ä", "b", "ö")
    out = rename(code, "python", {"ünï": "f", "ä": "a", "ö": "o"})
    assert 'def f(a, b="ß"):\n    o = a + b\n    return o' in out
    assert "@decorator" in out


def test_async_and_await():
    code = """
    async def fetch(session, url):
        async with session.get(url) as resp:
            async for chunk in resp:
                yield chunk
        result = await session.close()
        return result
    """
    assert names(code) == ("fetch", "session", "url", "resp", "chunk", "result")


# ------------------------------------------------------------------------------------------- rename


def test_rename_rejects_non_injective_mappings():
    code = "def f(a, b):\n    return a + b\n"
    with pytest.raises(ValueError, match="one-to-one"):
        rename(code, "python", {"a": "x", "b": "x"})
    with pytest.raises(ValueError, match="one-to-one"):
        rename(code, "python", {"a": "b"})  # b keeps its name
    # A cyclic permutation is fine.
    assert rename(code, "python", {"a": "b", "b": "a"}) == "def f(b, a):\n    return b + a\n"


def test_rename_rejects_capture_of_used_names():
    code = "def f(a):\n    return len(a) + total\n"
    with pytest.raises(ValueError, match="capture"):
        rename(code, "python", {"a": "len"})
    with pytest.raises(ValueError, match="capture"):
        rename(code, "python", {"a": "total"})
    # ``len`` is fine when the snippet does not use it.
    assert rename("def f(a):\n    return a\n", "python", {"a": "len"}) == "def f(len):\n    return len\n"


def test_rename_rejects_unknown_keys_and_invalid_names():
    code = "def f(a):\n    return len(a)\n"
    with pytest.raises(ValueError, match="not identifiers"):
        rename(code, "python", {"len": "x"})
    with pytest.raises(ValueError, match="valid"):
        rename(code, "python", {"a": "class"})
    with pytest.raises(ValueError, match="valid"):
        rename(code, "python", {"a": "1x"})


def test_rename_accepts_precomputed_identifiers_and_identity():
    code = "def f(a):\n    return a\n"
    found = snippet_identifiers(code, "python")
    assert rename(code, "python", {}, found) == code
    assert rename(code, "python", {"a": "a"}, found) == code
    assert rename(code, "python", {"a": "z"}, found) == "def f(z):\n    return z\n"


def test_unknown_language_is_a_value_error():
    with pytest.raises(ValueError):
        snippet_identifiers("x", "cobol")


# ---------------------------------------------------------------------------------------------- php

PHP_METHOD = """public function foo(array $a, $b = 1, ...$rest) {
    global $g;
    $x = $this->bar($a, $_GET);
    [$p, $q] = $a; list($r) = $a;
    foreach ($a as $k => $v) { $x .= "$v {$k} $g"; }
    $f = function ($z) use ($x) { return $z + $x; };
    $h = fn($w) => $w * $x;
    try {} catch (Exception $e) {}
    static::foo($x); self::foo(); foo(); parent::foo();
    return $x->y . self::$prop . strlen('$a');
}"""


def test_php_method_constructs_order_and_roles():
    found = snippet_identifiers(PHP_METHOD, "php")
    assert found.names == ("foo", "a", "b", "rest", "x", "p", "q", "r", "k", "v", "f", "z", "h", "w", "e")
    assert found.roles["foo"] == "fun"
    assert [name for name in found.names if found.roles[name] == "arg"] == ["a", "b", "rest", "z", "w"]
    assert {"g", "this", "_GET", "bar"} <= found.reserved
    out = rename(PHP_METHOD, "php", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith("public function id0(array $id1, $id2 = 1, ...$id3) {\n    global $g;\n")
    assert "$id4 = $this->bar($id1, $_GET);" in out
    assert "[$id5, $id6] = $id1; list($id7) = $id1;" in out
    assert 'foreach ($id1 as $id8 => $id9) { $id4 .= "$id9 {$id8} $g"; }' in out
    assert "$id10 = function ($id11) use ($id4) { return $id11 + $id4; };" in out
    assert "$id12 = fn($id13) => $id13 * $id4;" in out
    assert "catch (Exception $id14)" in out
    # Recursive calls through $this / self / static follow the method; parent:: and foo() do not.
    assert "static::id0($id4); self::id0(); foo(); parent::foo();" in out
    assert "return $id4->y . self::$prop . strlen('$a');" in out
    assert not parse_snippet(out, "php").tree.root_node.has_error


def test_php_function_recursion_static_promoted_and_capture():
    code = """function fib($n) {
    static $memo = [];
    return $n < 2 ? $n : fib($n - 1) + fib($n - 2) + $obj->fib();
}"""
    found = snippet_identifiers(code, "php")
    assert found.names == ("fib", "n", "memo", "obj")
    out = rename(code, "php", {"fib": "f", "n": "m"})
    assert "function f($m)" in out and "f($m - 1) + f($m - 2) + $obj->fib()" in out
    with pytest.raises(ValueError, match="valid"):
        rename(code, "php", {"n": "this"})
    ctor = "public function __construct(private $a, $b) { $this->c = $a . $b; }"
    found = snippet_identifiers(ctor, "php")
    assert found.names == ("__construct", "b")
    assert "a" in found.reserved
    with pytest.raises(ValueError, match="capture"):
        rename(ctor, "php", {"b": "a"})


# ----------------------------------------------------------------------------------------------- go

GO_METHOD = """func (r *Recv) Foo(a, b int, c ...string) (n int, err error) {
	x, y := a, b
	var z, w = 1, 2
	for i, v := range c { _ = v }
	switch t := r.(type) { case int: _ = t }
	select { case m := <-ch: _ = m }
	f := func(p int) int { return p + x }
	q := Point{X: x, name: y}
	path := path.Join(z, w)
	fmt.Println(r.Foo(n), f, q, len(path), err, i, "x y")
	return
}"""


def test_go_method_constructs_order_and_roles():
    found = snippet_identifiers(GO_METHOD, "go")
    expected = ("r", "Foo", "a", "b", "c", "n", "err", "x", "y", "z", "w", "v", "t", "m", "f", "p", "q")
    assert found.names == expected
    assert found.roles["Foo"] == "fun"
    assert [name for name in found.names if found.roles[name] == "arg"] == ["r", "a", "b", "c", "p"]
    assert found.roles["n"] == found.roles["err"] == "var"
    # fmt / ch: free; path: package used before the local shadows it; i: used out of its loop's scope;
    # name / X: composite-literal keys (may be fields); len and _ predeclared / blank.
    assert {"fmt", "ch", "path", "i", "name", "X", "len", "_"} <= found.reserved
    out = rename(GO_METHOD, "go", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith("func (id0 *Recv) id1(id2, id3 int, id4 ...string) (id5 int, id6 error) {")
    assert "for i, id11 := range id4 { _ = id11 }" in out
    assert "switch id12 := id0.(type) { case int: _ = id12 }" in out
    assert "case id13 := <-ch: _ = id13" in out
    assert "id14 := func(id15 int) int { return id15 + id7 }" in out
    assert "id16 := Point{X: id7, name: id8}" in out
    assert 'fmt.Println(id0.id1(id5), id14, id16, len(path), id6, i, "x y")' in out
    assert not parse_snippet(out, "go").tree.root_node.has_error


def test_go_function_recursion_scopes_and_capture():
    code = """func fact(n int) int {
	if m := n - 1; m > 0 {
		return n * fact(m)
	}
	return 1
}"""
    found = snippet_identifiers(code, "go")
    assert found.names == ("fact", "n", "m")
    assert rename(code, "go", {"fact": "f", "m": "k"}).count("f(k)") == 1
    # The if-initialiser's m is out of scope after the if: a later use is a free (global) m.
    shadow = code.replace("return 1", "return m")
    assert snippet_identifiers(shadow, "go").names == ("fact", "n")
    with pytest.raises(ValueError, match="valid"):
        rename(code, "go", {"n": "range"})
    with pytest.raises(ValueError, match="capture"):
        rename("func f(a int) int { return g(a) }", "go", {"a": "g"})


# ---------------------------------------------------------------------------------------- javascript

JS_FUNCTION = """function foo(a, b = 1, ...rest) {
  var x = 1, {p, q: r, s = 2} = a, [t, , ...u] = b;
  let y; const z = () => y;
  for (const k of a) {} for (var i = 0; i < 3; i++) {} for (key in obj) {}
  try {} catch (e) {}
  const f = function g(w) { return g(w); };
  const h = v => v + x + `${t}`;
  obj.x = {x, y: z};
  lbl: while (1) { break lbl; }
  class C {}
  return foo(i, this.foo, arguments, "a b");
}"""


def test_javascript_constructs_order_and_roles():
    found = snippet_identifiers(JS_FUNCTION, "javascript")
    expected = ("foo", "a", "b", "rest", "r", "t", "u", "y", "z", "k", "i", "e", "f", "g", "w", "h", "v")
    assert found.names == expected
    assert [name for name in found.names if found.roles[name] == "arg"] == ["a", "b", "rest", "w", "v"]
    assert found.roles["foo"] == "fun" and found.roles["g"] == "var"
    # p, s, x: shorthand properties (also keys); key / obj / arguments: undeclared; C: a class name.
    assert {"p", "s", "x", "key", "obj", "arguments", "C"} <= found.reserved
    out = rename(JS_FUNCTION, "javascript", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith(
        "function id0(id1, id2 = 1, ...id3) {\n  var x = 1, {p, q: id4, s = 2} = id1, [id5, , ...id6]"
    )
    assert "let id7; const id8 = () => id7;" in out
    assert "for (const id9 of id1) {} for (var id10 = 0; id10 < 3; id10++) {} for (key in obj) {}" in out
    assert "catch (id11)" in out
    assert "const id12 = function id13(id14) { return id13(id14); };" in out
    assert "const id15 = id16 => id16 + x + `${id5}`;" in out
    assert "obj.x = {x, y: id8};" in out and "break lbl;" in out
    assert 'return id0(id10, this.foo, arguments, "a b");' in out
    assert not parse_snippet(out, "javascript").tree.root_node.has_error


def test_javascript_block_scope_and_methods():
    # ``j`` is declared with let inside the block only: the later use is a global j.
    code = "function f(a) {\n  if (a) { let j = 1; }\n  return j;\n}"
    assert snippet_identifiers(code, "javascript").names == ("f", "a")
    hoisted = "function f(a) {\n  if (a) { var j = 1; }\n  return j;\n}"
    assert snippet_identifiers(hoisted, "javascript").names == ("f", "a", "j")
    method = "bar(a) { return this.bar(a); }"
    found = snippet_identifiers(method, "javascript")
    assert found.names == ("bar", "a")
    assert rename(method, "javascript", {"bar": "m", "a": "b"}) == "m(b) { return this.m(b); }"
    with pytest.raises(ValueError, match="valid"):
        rename(method, "javascript", {"a": "this"})
    with pytest.raises(ValueError, match="capture"):
        rename("function f(a) { return g(a); }", "javascript", {"a": "g"})


# ---------------------------------------------------------------------------------------------- java

JAVA_METHOD = """public int foo(int a, final String... b) {
  int x = 1, y[] = {2};
  for (int i = 0; i < 3; i++) {}
  for (String s : b) {}
  try (Reader r = open()) {} catch (IOException | E e) {}
  Function<Integer, Integer> f = (p) -> p + x; Runnable g = q -> {};
  if (o instanceof Foo z) { z.m(); }
  count++; this.bar(a).baz = x; return foo(x) + this.foo(y) + Math.max(a, A.B) + other.foo() + "x";
}"""


def test_java_constructs_order_and_roles():
    found = snippet_identifiers(JAVA_METHOD, "java")
    assert found.names == ("foo", "a", "b", "x", "y", "i", "s", "r", "e", "f", "p", "g", "q", "z")
    assert [name for name in found.names if found.roles[name] == "arg"] == ["a", "b", "p", "q"]
    assert found.roles["foo"] == "fun"
    assert {"count", "o", "Math", "A", "B", "max", "bar", "baz", "open", "other", "m"} <= found.reserved
    out = rename(JAVA_METHOD, "java", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith("public int id0(int id1, final String... id2) {\n  int id3 = 1, id4[] = {2};")
    assert "for (int id5 = 0; id5 < 3; id5++) {}" in out and "for (String id6 : id2) {}" in out
    assert "try (Reader id7 = open()) {} catch (IOException | E id8) {}" in out
    assert "id9 = (id10) -> id10 + id3; Runnable id11 = id12 -> {};" in out
    assert "if (o instanceof Foo id13) { id13.m(); }" in out
    assert (
        'count++; this.bar(id1).baz = id3; return id0(id3) + this.id0(id4) + Math.max(id1, A.B) + other.foo() + "x";'
        in out
    )
    assert not parse_snippet(out, "java").tree.root_node.has_error


def test_java_scopes_fields_and_capture():
    # ``n`` before its declaration is a field: left alone everywhere.
    code = "void f(int a) {\n  n = a;\n  int n = 2;\n  total += n;\n}"
    found = snippet_identifiers(code, "java")
    assert found.names == ("f", "a")
    assert {"n", "total"} <= found.reserved
    with pytest.raises(ValueError, match="capture"):
        rename(code, "java", {"a": "total"})
    with pytest.raises(ValueError, match="valid"):
        rename(code, "java", {"a": "int"})
    ctor = "public Foo(int a) { this.a = a; }"
    found = snippet_identifiers(ctor, "java")
    assert found.names == ("a",) and "Foo" not in found.roles


# ---------------------------------------------------------------------------------------------- ruby

RUBY_METHOD = """def foo(a, b = 1, *rest, key:, opt: 2, **kw, &blk)
  x = a
  y, (z, *w) = b
  x += 1
  list.each { |i, (j, k)| puts i + j }
  list.map do |m| m * 2 end
  for q in list do end
  l = ->(n) { n }
  begin; rescue StandardError => e; end
  "#{x} y" + 'x' + :x.to_s + @x + $x
  foo(x) + self.foo + bar + z.size + foo
end"""


def test_ruby_constructs_order_and_roles():
    found = snippet_identifiers(RUBY_METHOD, "ruby")
    expected = ("foo", "a", "b", "rest", "key", "opt", "kw", "blk", "x", "y", "z", "w")
    assert found.names == (*expected, "i", "j", "k", "m", "q", "l", "n", "e")
    assert found.roles["foo"] == "fun"
    assert [name for name in found.names if found.roles[name] == "arg"] == [
        *expected[1:8],
        *("i", "j", "k", "m", "n"),
    ]
    assert {"list", "puts", "bar", "each", "map", "size"} <= found.reserved
    out = rename(RUBY_METHOD, "ruby", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith("def id0(id1, id2 = 1, *id3, id4:, id5: 2, **id6, &id7)\n  id8 = id1\n")
    assert "id9, (id10, *id11) = id2" in out
    assert "list.each { |id12, (id13, id14)| puts id12 + id13 }" in out
    assert "list.map do |id15| id15 * 2 end" in out and "for id16 in list do end" in out
    assert "id17 = ->(id18) { id18 }" in out and "rescue StandardError => id19; end" in out
    assert "\"#{id8} y\" + 'x' + :x.to_s + @x + $x" in out
    assert "id0(id8) + self.id0 + bar + id10.size + id0" in out
    assert not parse_snippet(out, "ruby").tree.root_node.has_error


def test_ruby_locals_start_at_assignment_and_blocks():
    # ``v`` before its assignment is a method call: left alone everywhere.
    code = "def f(a)\n  puts v\n  v = a\n  [1].each { |t| u = t }\n  u\nend"
    found = snippet_identifiers(code, "ruby")
    assert found.names == ("f", "a", "t")
    assert {"v", "u"} <= found.reserved
    with pytest.raises(ValueError, match="capture"):
        rename(code, "ruby", {"a": "puts"})
    with pytest.raises(ValueError, match="valid"):
        rename(code, "ruby", {"a": "Const"})


# ------------------------------------------------------------------------------------------------- r

R_FUNCTION = """foo <- function(a, b = 1, ...) {
  x <- a; y = b; 3 -> z; w <<- 2
  for (i in seq_len(x)) print(i)
  g <- function(p) { x <<- p; p + x }
  h <- \\(q) q
  df$col + list(x = 1) + foo(x) + pkg::fn(y) + obj@slot + "x" + ..1 + z
}"""


def test_r_constructs_order_and_roles():
    found = snippet_identifiers(R_FUNCTION, "r")
    assert found.names == ("foo", "a", "b", "x", "y", "z", "i", "g", "p", "h", "q")
    assert [name for name in found.names if found.roles[name] == "arg"] == ["a", "b", "p", "q"]
    assert found.roles["foo"] == "fun"
    # w: <<- to a global; the rest: free, after $ / @ / ::.
    assert {"w", "seq_len", "print", "list", "df", "col", "pkg", "fn", "obj", "slot"} <= found.reserved
    out = rename(R_FUNCTION, "r", {name: f"id{j}" for j, name in enumerate(found.names)})
    assert out.startswith("id0 <- function(id1, id2 = 1, ...) {\n  id3 <- id1; id4 = id2; 3 -> id5; w <<- 2\n")
    assert "for (id6 in seq_len(id3)) print(id6)" in out
    assert "id7 <- function(id8) { id3 <<- id8; id8 + id3 }" in out
    assert "id9 <- \\(id10) id10" in out
    assert 'df$col + list(x = 1) + id0(id3) + pkg::fn(id4) + obj@slot + "x" + ..1 + id5' in out
    assert not parse_snippet(out, "r").tree.root_node.has_error


def test_r_free_before_assignment_backticks_and_capture():
    code = "f <- function(a) {\n  print(v)\n  v <- a\n  `my var` <- 1\n  a + `my var`\n}"
    found = snippet_identifiers(code, "r")
    assert found.names == ("f", "a")
    assert {"v", "print", "`my var`"} <= found.reserved
    with pytest.raises(ValueError, match="capture"):
        rename(code, "r", {"a": "print"})
    with pytest.raises(ValueError, match="valid"):
        rename(code, "r", {"a": "TRUE"})


# ------------------------------------------------------------------------------------------- property


def _renamed_symbols_are_never_global(tree: symtable.SymbolTable, new_names: set[str], fun: str) -> list[str]:
    problems = []
    stack = [tree]
    while stack:
        table = stack.pop()
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if name in new_names and name != fun and symbol.is_global() and table.get_type() != "module":
                problems.append(f"{name} is global in {table.get_name()}")
        stack.extend(table.get_children())
    return problems


def test_property_stdlib_renaming_is_equal_up_to_consistent_renaming():
    codes = local_functions("python")
    assert len(codes) > 300
    failures = []
    for code in codes:
        original = ast.parse(code)
        found = snippet_identifiers(code, "python")
        taken = {node.id for node in ast.walk(original) if isinstance(node, ast.Name)} | set(code.split())
        fresh = (f"v_{j}" for j in range(10**6))
        mapping = {}
        for name in found.names:
            new = next(fresh)
            while new in taken or any(new in token for token in taken):
                new = next(fresh)
            mapping[name] = new
        renamed = rename(code, "python", mapping, found)
        try:
            tree = ast.parse(renamed)  # (a) parses
            compile(renamed, "<renamed>", "exec")
        except SyntaxError as error:
            failures.append((code, f"syntax: {error}"))
            continue
        expected = ast.dump(AstRenamer(mapping).visit(ast.parse(code)))
        if ast.dump(tree) != expected:  # (b) equal up to renaming, (c) unmapped names unchanged
            failures.append((code, "ast differs"))
            continue
        fun = mapping.get(found.names[0], "") if found.names and found.roles[found.names[0]] == "fun" else ""
        problems = _renamed_symbols_are_never_global(
            symtable.symtable(renamed, "<renamed>", "exec"), set(mapping.values()), fun
        )
        if problems:
            failures.append((code, "; ".join(problems)))
            continue
        again = snippet_identifiers(renamed, "python")  # the analysis commutes with the renaming
        if again.names != tuple(mapping[name] for name in found.names):
            failures.append((code, "re-analysis differs"))
    share = 1 - len(failures) / len(codes)
    print(f"python stdlib property test: {len(codes) - len(failures)}/{len(codes)} functions pass ({share:.2%})")
    assert not failures, failures[:3]


def test_analysis_is_deterministic():
    assert snippet_identifiers(THESIS_SNIPPET, "python") == snippet_identifiers(THESIS_SNIPPET, "python")


def _tree_sitter_property(language: str, minimum: int) -> None:
    clean = passed = 0
    failures = []
    for code in local_functions(language):
        before = parse_snippet(code, language)
        if before.tree.root_node.has_error:
            continue
        clean += 1
        found = snippet_identifiers(code, language)
        fresh = (f"v_{j}" for j in range(10**6))
        mapping = {}
        for name in found.names:
            new = next(fresh)
            while new in code:
                new = next(fresh)
            mapping[name] = new
        renamed = rename(code, language, mapping, found)
        after = parse_snippet(renamed, language)
        same_shape = [leaf.type for leaf in leaves(before.tree.root_node)] == [
            leaf.type for leaf in leaves(after.tree.root_node)
        ]
        again = snippet_identifiers(renamed, language)
        consistent = again.names == tuple(mapping[name] for name in found.names)
        if not after.tree.root_node.has_error and same_shape and consistent:
            passed += 1
        else:
            failures.append((code[:80], after.tree.root_node.has_error, same_shape, consistent))
    assert clean >= minimum, f"only {clean} clean {language} snippets"
    share = passed / clean
    print(f"{language} property test: {passed}/{clean} clean snippets pass ({share:.2%})")
    assert share >= 0.995, failures[:5]


@pytest.mark.parametrize(
    ("language", "minimum"), [("php", 200), ("go", 300), ("javascript", 200), ("java", 300), ("ruby", 200), ("r", 100)]
)
def test_property_renaming_reparses(language: str, minimum: int):
    _tree_sitter_property(language, minimum)


# ------------------------------------------------------------------- query-based analysis, fused path


def test_wrapper_names_are_not_the_snippets():
    # a lone method is parsed inside `class __Snippet {...}`: the wrapper's class is not the snippet's
    js = "configure(opts) {\n    this.dir = opts.dir || 'x';\n}"
    assert parse_snippet(js, "javascript").offset > 0
    found = snippet_identifiers(js, "javascript")
    assert found.names == ("configure", "opts") and "__Snippet" not in found.reserved
    java = "int twice(int x) { return x * 2; }"
    assert "__Snippet" not in snippet_identifiers(java, "java").reserved


def test_go_specs_with_several_names_bind_each():
    # tree-sitter gives the comma between two `var` names the field `name` too: only identifiers bind
    code = "func f() int {\n\tvar a, b = 1, 2\n\tconst c, d = 3, 4\n\treturn a + b + c + d\n}"
    found = snippet_identifiers(code, "go")
    assert found.names == ("f", "a", "b", "c", "d")
    assert all(len(found.occurrences[name]) == 2 for name in "abcd")


@pytest.mark.parametrize("language", IMPLEMENTED)
def test_analysis_finds_the_comments_the_comment_query_finds(language):
    """The comment nodes the analysis collects (its query; Python: its walk) are the ones comment
    removal would look for itself, so the fused comment edits are the plain ones."""
    codes = local_functions(language, 150)
    assert codes
    for code in codes:
        snippet = parse_snippet(code, language)
        ids, found = identifiers_and_comments(code, language, snippet)
        assert ids == snippet_identifiers(code, language)
        assert comment_edits(code, language, snippet, found) == comment_edits(code, language)
        if found is not None and language != "python":
            spec = language_spec(language)
            assert [(n.start_byte, n.end_byte) for n in found] == [
                (n.start_byte, n.end_byte) for n in comment_nodes(snippet.tree.root_node, spec.comment_types)
            ]


@pytest.mark.parametrize(
    ("code", "falls_back"),
    [
        ("def f(a):  # after the colon\n    return a  # trailing\n", False),
        ('def f(a):\n    """Doc."""\n    # alone\n    return a\n', False),
        ('def f(a):\n    return "#" + a  # a # in a string\n', True),
        ("def f(a):\n    return (a  # inside an attribute\n            .b)\n", True),
    ],
)
def test_python_walk_collects_comments_or_hands_over_to_the_query(code, falls_back):
    snippet = parse_snippet(code, "python")
    _, found = identifiers_and_comments(code, "python", snippet)
    assert (found is None) == falls_back  # None: a `#` outside the comments met, the query decides
    assert comment_edits(code, "python", snippet, found) == comment_edits(code, "python")


def test_rename_edits_merge_other_edits_and_validate():
    code = "def f(a):  # c\n    return a\n"
    found = snippet_identifiers(code, "python")
    comment = (9, 14, b"")
    edits = rename_edits("python", {"a": "b"}, found, [comment])
    assert edits == [(6, 7, b"b"), comment, (26, 27, b"b")]
    assert splice(code.encode(), edits).decode() == "def f(b):\n    return b\n"
    assert rename(code, "python", {"a": "b"}) == "def f(b):  # c\n    return b\n"
    with pytest.raises(ValueError, match="one-to-one"):
        rename_edits("python", {"a": "f"}, found)
