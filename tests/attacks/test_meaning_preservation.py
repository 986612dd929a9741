"""The renaming attacks keep what code does (issue #21, item 1).

The bugs and their neighbours, one test each, then the tests of the whole class on real code:

* renamed standard-library functions, run where Python's own tests run the originals, behave alike
  (``replay_stdlib.py``: a ``TypeError`` from a call keyword, a ``NameError`` from a renamed global);
* attacked code parses with the language's own compiler front end wherever the original does
  (``front_ends.py``: javac, gofmt, php, ruby, node, R), on the installed sources and the shared data;
* an attack changes whole identifier tokens only, each by its renaming, on every snippet, erroneous
  ones included (tree-sitter's MISSING nodes).

Tree-shape equality up to renaming is tested in tests/attacks/test_attacks.py (tree-sitter leaves, all
languages; Python's ``ast`` through ``corpora.AstRenamer``, which knows the attribute and keyword
positions renamed here).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from corpora import SHARED_DATA, local_functions, shared_functions
from front_ends import available, parses

from csbench.attacks import RENAMING_COLUMN, run_attack
from csbench.attacks import renaming as R
from csbench.code.comments import remove_comments
from csbench.code.identifiers import IMPLEMENTED, rename, snippet_identifiers

ROOT = Path(__file__).resolve().parents[2]
SPECS = ["ordered_id", "full_hash", "k_shift_snippet-3", "most_popular", "random_permutation", "k_shift_dataset-3"]
# two renamings composed: the second renames what the first renamed (most_popular gives many functions the
# same name, which k_shift_dataset then hands to a method that calls itself: it keeps its name)
SPECS += ["most_popular+k_shift_dataset-2"]


def ordered(code: str, language: str = "python") -> str:
    """``code`` under ``ordered_id`` (``rename`` with ``id1``, ``id2``, ... in order)."""
    code = textwrap.dedent(code)
    found = snippet_identifiers(code, language)
    return rename(code, language, {name: f"id{j}" for j, name in enumerate(found.names, 1)}, found)


def run(code: str, call: str, namespace: dict | None = None) -> object:
    """Define ``code`` and evaluate ``call`` in it (the result, or the exception's type name)."""
    scope = dict(namespace or {})
    exec(textwrap.dedent(code), scope)
    try:
        return eval(call, scope)
    except Exception as error:  # the outcome compared
        return type(error).__name__


# ------------------------------------------------------------------------------ python: method names


def test_a_methods_bare_name_is_a_global_not_the_method():
    # the example: ``copy`` in the body is the module
    code = "def copy(self):\n    return copy.copy(self)\n"
    assert snippet_identifiers(code, "python").names == ()  # copy is the module's; self shows a method
    assert ordered(code) == code
    # a method known by its decorator; a setter naming the property in its decorator
    static = "@staticmethod\ndef walk(node):\n    return walk(node.child)\n"
    assert "walk" not in snippet_identifiers(static, "python").names
    setter = "@size.setter\ndef size(self, value):\n    self._size = value\n"
    assert ordered(setter) == "@size.setter\ndef size(self, id1):\n    self._size = id1\n"  # (self: see below)
    # in a function nested in the method, too
    nested = "def copy(self):\n    def inner():\n        return copy.copy(self)\n    return inner()\n"
    assert "copy" not in snippet_identifiers(nested, "python").names
    # a plain function's bare name is the function itself (recursion), also from a nested function
    plain = "def fact(n):\n    def step(k):\n        return fact(k)\n    return n * step(n - 1) if n else 1\n"
    assert (
        ordered(plain)
        == "def id1(id2):\n    def id3(id4):\n        return id1(id4)\n    return id2 * id3(id2 - 1) if id2 else 1\n"
    )
    assert run(ordered(plain), "id1(5)") == run(plain, "fact(5)") == 120


def test_a_method_reaches_itself_through_its_receiver():
    code = """
    def visit(self, node, depth=0):
        for child in node:
            self.visit(child, depth=depth + 1)
    """
    # ``self.visit`` is the method: renamed with it; the receiver is kept, so the renamed code is
    # analysed alike (a composed attack, ``ordered_id+k_shift_dataset-3``)
    assert ordered(code) == textwrap.dedent("""
    def id1(self, id2, id3=0):
        for id4 in id2:
            self.id1(id4, id3=id3 + 1)
    """)
    again = snippet_identifiers(ordered(code), "python")
    assert again.names == ("id1", "id2", "id3", "id4")
    # another object's attribute of that name stays; an attribute the method assigns is not the method
    other = "def visit(self, node):\n    return node.visit(self)\n"
    assert ordered(other) == "def id1(id2, id3):\n    return id3.visit(id2)\n"
    stored = "def visit(self, node):\n    self.visit = node\n    return self.visit\n"
    assert "visit" not in snippet_identifiers(stored, "python").names


def test_a_method_never_takes_the_name_of_a_member_it_uses():
    code = "def set_next(self, frame):\n    self._set_stopinfo(frame, None)\n"
    found = snippet_identifiers(code, "python")
    assert "_set_stopinfo" in found.members
    settled = R.settle(found, "python", {"set_next": "_set_stopinfo", "frame": "stopframe"})
    assert settled["set_next"] == "_set_stopinfo_1" and settled["frame"] == "stopframe"
    with pytest.raises(ValueError, match="member"):
        rename(code, "python", {"set_next": "_set_stopinfo"}, found)
    rename(code, "python", {"frame": "_set_stopinfo"}, found)  # a parameter may: no capture
    js = "run(a) {\n  return this.step(a);\n}"
    assert snippet_identifiers(js, "javascript").members == {"step"}
    go = "func (s *Server) Run() error {\n\treturn s.Serve()\n}"
    assert snippet_identifiers(go, "go").members == {"Serve"}


# ----------------------------------------------------------------------------- python: call keywords


RECURSIVE = """
def walk(item, depth=0):
    if depth > 2 or not isinstance(item, list):
        return [depth]
    return [d for sub in item for d in walk(sub, depth=depth + 1)]
"""


def test_b_keywords_of_recursive_calls_follow_the_parameters():
    # the example: ``depth=`` must follow ``depth``, or the attacked function raises TypeError
    assert "id1(id5, id3=id3 + 1)" in ordered(RECURSIVE)
    assert run(ordered(RECURSIVE), "id1([[1, [2]], 3])") == run(RECURSIVE, "walk([[1, [2]], 3])") == [2, 3, 1]
    # a nested function, a named lambda, keyword-only parameters; other calls keep their keywords
    code = """
    def outer(n, *, key=None, **options):
        def inner(depth=0):
            return inner(depth=depth + 1) if depth < n else sorted([n], key=key)
        step = lambda count: count + 1
        return inner(depth=0) + [step(count=1)] + [outer(0, key=key, extra=n) if n else 0]
    """
    out = ordered(code)
    assert "id5(id6=id6 + 1)" in out and "sorted([id2], key=id3)" in out and "id7(id8=1)" in out
    assert "id1(0, id3=id3, extra=id2)" in out  # ``extra`` goes to **options
    assert run(out, "id1(3)") == run(code, "outer(3)")


def test_b_keywords_the_analysis_cannot_tie_leave_the_parameter_alone():
    # positional-only: the keyword goes to **kw; rebound callee; passed on to a function argument
    assert "id1(id2, a=id2)" in ordered("def f(a, /, **kw):\n    return f(a, a=a)\n")
    twice = "def f(x, depth=0):\n    g = lambda depth: depth\n    g = print\n    return g(depth=x)\n"
    assert "depth" not in snippet_identifiers(twice, "python").names
    partial = "def f(x, depth=0):\n    return functools.partial(f, depth=depth + 1)\n"
    assert "depth" not in snippet_identifiers(partial, "python").names
    # a first parameter ``cls`` makes a method whose bare name is a global: if it is a plain function
    # after all (``functools._c3_mro``), the call is recursive; the keyword's parameter stays
    c3 = "def _c3_mro(cls, abcs=None):\n    return [_c3_mro(base, abcs=abcs) for base in cls.__bases__]\n"
    assert "abcs" not in snippet_identifiers(c3, "python").names
    # an external callee's keyword never follows
    assert "print(id2, file=id3)" in ordered("def f(x, file):\n    print(x, file=file)\n")


# -------------------------------------------------------------------- named arguments, other languages


def test_b_php_named_arguments():
    code = "<?php\nfunction f($x, $depth = 0) { return f($x, depth: $depth + 1) + g(depth: $x); }"
    assert ordered(code, "php").endswith("return id1($id2, id3: $id3 + 1) + g(depth: $id2); }")
    method = "public function run($a, $b = 1) { return $this->run(b: 2) + self::run(a: 1) + $o->run(a: $a); }"
    assert ordered(method, "php") == (
        "public function id1($id2, $id3 = 1) { return $this->id1(id3: 2) + self::id1(id2: 1) + $id4->run(a: $id2); }"
    )
    closure = "function f($x) { $fn = fn($q) => $q; return $fn(q: $x); }"
    assert "q" not in snippet_identifiers(closure, "php").names


def test_b_r_named_arguments():
    code = "f <- function(x, depth = 0) {\n  if (depth > 2) x else f(x, depth = depth + 1)\n}"
    assert ordered(code, "r") == "id1 <- function(id2, id3 = 0) {\n  if (id3 > 2) id2 else id1(id2, id3 = id3 + 1)\n}"
    # another function's argument names stay; Recall(...) is the function itself
    assert "paste(id2, sep = id3)" in ordered('f <- function(x, sep = ",") {\n  paste(x, sep = sep)\n}', "r")
    assert "Recall(id2, id3 = 1)" in ordered("f <- function(x, depth) {\n  Recall(x, depth = 1)\n}", "r")
    # a partial name (R matches prefixes), and arguments passed on to a function of the snippet
    assert "depth" not in snippet_identifiers("f <- function(x, depth) {\n  f(x, dep = 1)\n}", "r").names
    helpers = """f <- function(xs, k) {
  helper <- function(v, w) v + w
  a <- lapply(xs, helper, w = k)
  b <- do.call(helper, list(v = 1, w = 2))
  sapply(xs, function(p, q) p + q, q = 2)
}"""
    kept = set(snippet_identifiers(helpers, "r").names)
    assert {"f", "xs", "k", "helper", "a", "b", "p"} <= kept and not {"v", "w", "q"} & kept


def test_b_ruby_keyword_arguments_and_super():
    code = "def f(a, depth: 1, **o)\n  f a, depth: 2, other: 3\n  self.f(a, :depth => 3)\n  g(depth: depth)\nend"
    assert ordered(code, "ruby") == (
        "def id1(id2, id3: 1, **id4)\n  id1 id2, id3: 2, other: 3\n  self.id1(id2, :id3 => 3)\n  g(depth: id3)\nend"
    )
    # an optional hash parameter takes ``depth:`` as data; ``super`` is the parent's method of this name
    assert "id1(id2, depth: 1)" in ordered("def f(a, depth = {})\n  f(a, depth: 1)\nend", "ruby")
    zsuper = "def f(a, depth: 1)\n  super\nend"
    assert snippet_identifiers(zsuper, "ruby").names == ("a",)  # f: super; depth: passed on by name
    assert ordered("def f(a, depth: 1)\n  super(a, depth: depth)\nend", "ruby") == (
        "def f(id1, id2: 1)\n  super(id1, depth: id2)\nend"
    )
    assert "k" not in snippet_identifiers("def f(a)\n  l = ->(k:) { k }\n  l.(k: a)\nend", "ruby").names


def test_a_php_function_never_takes_a_keyword_name():
    # found by php's own parser on the installed sources: ``most_popular`` named a function ``callable``
    code = "function sortPackages(&$packages) { return $packages; }"
    found = snippet_identifiers(code, "php")
    assert R.settle(found, "php", {"sortPackages": "callable", "packages": "list"}) == {
        "sortPackages": "callable_1",
        "packages": "list",  # ``$list`` is a variable: fine
    }
    with pytest.raises(ValueError, match="keyword"):
        rename(code, "php", {"sortPackages": "List"}, found)
    method = "public function sortPackages(&$packages) { return $packages; }"  # a method may (PHP 7)
    assert rename(method, "php", {"sortPackages": "list"}).startswith("public function list(")


# ------------------------------------------------------------------------------------- missing nodes


def test_c_missing_nodes_are_never_identifiers():
    # TL-CodeSum's tokenised Java writes ``>>`` as ``> >``: tree-sitter's error recovery then inserts a
    # zero-width MISSING name
    java = "public Session ( ) { int x = a > > 2; }"
    assert ordered(java, "java") == "public Session ( ) { int id1 = a > > 2; }"
    assert ordered("void f() { int = 1; }", "java") == "void id1() { int = 1; }"
    assert ordered("function f($x) { $ = 1; return $x; }", "php") == "function id1($id2) { $ = 1; return $id2; }"
    for language in IMPLEMENTED:  # no language reports an empty name
        for code in ("f(", "def (", "function (", "func (", "x <- function( {", "int f( { int = ; }"):
            assert "" not in snippet_identifiers(code, language).names


# ----------------------------------------------------------------------------- the class: real code

LIMITS = {"python": 700, "php": 400, "go": 400, "javascript": 400, "java": 400, "ruby": 400, "r": 400}


def corpus(language: str) -> list[str]:
    """Functions of the installed sources and the shared data (tests/corpora.py), with, where
    ``../shared/data`` has them, TL-CodeSum's tokenised Java (a deterministic sample of 1,500) and
    StatCodeSearch's flattened R."""
    codes = local_functions(language, LIMITS[language]) + shared_functions(language)
    tl = SHARED_DATA / "tl_codesum" / "valid.token.code"
    if language == "java" and tl.is_file():
        lines = [line.split("\t", 1)[-1] for line in tl.read_text(encoding="utf-8").splitlines()]
        codes += random.Random(21).sample(lines, 1500)
    stat = SHARED_DATA / "statcodesearch" / "sample.json"
    if language == "r" and stat.is_file():
        codes += [record["Code"] for record in json.loads(stat.read_text(encoding="utf-8"))]
    return list(dict.fromkeys(codes))


@pytest.fixture(scope="module", params=IMPLEMENTED)
def attacked(request) -> tuple[str, list[str], dict[str, tuple[list[str], list[dict]]]]:
    """(language, codes, spec -> (attacked codes, renamings))."""
    language = request.param
    codes = corpus(language)
    frame = pd.DataFrame({"id": range(len(codes)), "language": language, "code": codes})
    out = {}
    for spec in SPECS:
        result, _ = run_attack(spec, {"test": frame}, progress=False)
        out[spec] = (result["test"]["code"].tolist(), [json.loads(m) for m in result["test"][RENAMING_COLUMN]])
    return language, codes, out


WORD = {
    "python": r"(?<![\w$])[^\W\d]\w*",
    "javascript": r"(?<![\w$])[A-Za-z_$\x80-\uffff][\w$\x80-\uffff]*",
    "r": r"(?<![\w.])(?:[A-Za-z]|\.[A-Za-z_.])[\w.]*|(?<![\w.])\.(?![\w.])",
    "ruby": r"(?<![\w$])[^\W\d]\w*(?:[?!](?!=))?",  # method names ``add!``, ``empty?``
}


def words(code: str, language: str) -> list[str]:
    return re.findall(WORD.get(language, r"(?<![\w$])[^\W\d]\w*"), code)


def test_renaming_changes_whole_identifier_tokens_only(attacked):
    """On every snippet, erroneous ones included: the attacked code's words are the comment-free
    code's words, each kept or replaced by its new name (a MISSING name once made ``Sessionid1``)."""
    language, codes, out = attacked
    plain = [words(remove_comments(code, language), language) for code in codes]
    for spec, (new_codes, renamings) in out.items():
        bad = []
        for i, (new, mapping) in enumerate(zip(new_codes, renamings, strict=True)):
            got = words(new, language)
            if len(got) != len(plain[i]) or any(
                a != b and mapping.get(a) != b for a, b in zip(plain[i], got, strict=True)
            ):
                bad.append(codes[i][:120])
        print(f"{language} {spec}: {len(codes) - len(bad)}/{len(codes)} change whole identifier tokens only")
        assert not bad, (spec, bad[:3])


def test_attacked_code_parses_where_the_original_parses(attacked):
    """The language's own front end (javac, gofmt, php, ruby, node, R) parses each attacked snippet
    wherever it parses the original (Python: ``compile``, in tests/attacks/test_attacks.py)."""
    language, codes, out = attacked
    if language == "python":
        pytest.skip("Python's compiler runs on every attacked snippet in tests/attacks/test_attacks.py")
    reason = available(language)
    if reason is not None:
        pytest.skip(reason)
    wrappers = parses(language, codes)
    clean = sum(wrapper is not None for wrapper in wrappers)
    assert clean >= 100, f"only {clean} {language} snippets parse"
    # every spec's attacked snippets in one call (one front-end process per wrapper, not per spec)
    together = parses(language, [code for new_codes, _ in out.values() for code in new_codes], wrappers * len(out))
    for k, spec in enumerate(out):
        after = together[k * len(codes) : (k + 1) * len(codes)]
        failed = [codes[i][:120] for i, wrapper in enumerate(wrappers) if wrapper is not None and after[i] is None]
        print(
            f"{language} {spec}: {clean - len(failed)}/{clean} parse after the attack ({len(failed) / clean:.2%} fail)"
        )
        assert not failed, (spec, failed[:3])


def test_renamed_stdlib_functions_behave_like_the_originals():
    """``replay_stdlib.py``: the stdlib's own tests drive its functions; each renamed function, run
    where the original runs, returns or raises the same (call keywords, globals, ``self.name``)."""
    if importlib.util.find_spec("test.test_textwrap") is None:
        pytest.skip("Python's test package (test.test_textwrap, ...) is not installed")
    command = [sys.executable, str(ROOT / "tests" / "replay_stdlib.py"), *SPECS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), *sys.path])}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"functions"')]
    assert lines, done.stderr[-2000:]
    report = json.loads(lines[-1])
    assert report["functions"] >= 800 and report["stable_calls"] >= 2000, report["functions_by_module"]
    for spec in SPECS:
        result = report[spec]
        print(
            f"{spec}: {report['stable_calls']} calls of {report['functions']} functions; "
            f"{result['failed_calls']} differ ({result['failed_functions']} functions), "
            f"{result['functions_not_replayed']} functions not replayable, "
            f"**kwargs collisions (known limit): {result['kwargs_collisions']}"
        )
        assert not result["failures"], (spec, result["failures"][:3])
