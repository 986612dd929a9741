"""Tests of ``csbench.code.comments.remove_comments`` (the ``no_comment`` transformation).

SPEC "Code attacks": ``no_comment`` removes all comments and docstrings and nothing else changes.
Hand-written cases pin the exact text; the property test checks the AST over the whole standard library.
"""

from __future__ import annotations

import ast
import multiprocessing
import os
import sysconfig
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from csbench.code.comments import python_docstring_node, remove_comments
from csbench.code.extract import python_functions
from csbench.code.parsing import parse, walk


def nc(code: str) -> str:
    return remove_comments(code, "python")


def assert_parses(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:  # pragma: no cover - failure path
        pytest.fail(f"no_comment output does not parse ({exc}):\n{code}")


# --------------------------------------------------------------------------- comments


COMMENT_CASES = [
    pytest.param(
        "# leading\nx = 1\n    # indented comment line\ny = 2\n# last\n", "x = 1\ny = 2\n", id="whole-lines-removed"
    ),
    pytest.param(
        "def f(a, b):\n    # explain\n    return foo(a,\n               # between arguments\n               b)\n",
        "def f(a, b):\n    return foo(a,\n               b)\n",
        id="whole-line-inside-a-body-and-inside-brackets",
    ),
    pytest.param("@a\n# c\n@b\ndef f():\n    pass\n", "@a\n@b\ndef f():\n    pass\n", id="between-decorators"),
    pytest.param(
        "x = 1  # one\ny = 2\t# two\nz = 3 # three\n", "x = 1\ny = 2\nz = 3\n", id="trailing-removed-spaces-dropped"
    ),
    pytest.param(
        's = "héllo wörld"  # commént ünïcode\nt = "ü"\n', 's = "héllo wörld"\nt = "ü"\n', id="after-non-ascii-text"
    ),  # (byte offsets used correctly)
    pytest.param("x = 1\n# bye", "x = 1\n", id="end-of-file-without-newline"),
    pytest.param("x = 1\ny = 2  # bye", "x = 1\ny = 2", id="end-of-file-trailing"),
    # one line: the comment may hide flattened code (see test_flattened_comments.py), so it stays
    pytest.param("x = 1  # bye", "x = 1  # bye", id="one-line-kept"),
    pytest.param("x = 1  # bye\n", "x = 1  # bye\n", id="one-line-and-break-kept"),  # no line structure either
    pytest.param("x = 1  # bye\ny = 2\n", "x = 1\ny = 2\n", id="break-then-code-ends-it"),
    pytest.param("x = 1  # c\r\ny = 2\r\n", "x = 1\r\ny = 2\r\n", id="trailing-on-crlf-keeps-line-ending"),
    pytest.param("# c\r\nx = 1\r\n", "x = 1\r\n", id="whole-line-on-crlf-removed-with-its-ending"),
]


@pytest.mark.parametrize(("code", "expected"), COMMENT_CASES)
def test_comments_removed(code: str, expected: str):
    assert nc(code) == expected


def test_hash_inside_string_literals_is_not_a_comment():
    code = (
        "def f():\n"
        "    a = '# not a comment'\n"
        '    b = "x # y"  # but this is\n'
        '    c = f"{a} # {b}"\n'
        "    d = '''\n# still a string\n'''\n"
        "    return a, b, c, d\n"
    )
    expected = (
        "def f():\n"
        "    a = '# not a comment'\n"
        '    b = "x # y"\n'
        '    c = f"{a} # {b}"\n'
        "    d = '''\n# still a string\n'''\n"
        "    return a, b, c, d\n"
    )
    assert nc(code) == expected


# --------------------------------------------------------------------------- docstrings


def test_function_docstring_removed():
    code = 'def f(x):\n    """Return x.\n\n    More text.\n    """\n    return x\n'
    assert nc(code) == "def f(x):\n    return x\n"


def test_docstring_quote_styles_removed():
    for literal in ["'''doc'''", "'doc'", '"doc"', 'r"""raw \\d"""', 'u"unicode"', '"implicit" "concatenation"']:
        code = f"def f():\n    {literal}\n    return 1\n"
        assert nc(code) == "def f():\n    return 1\n", literal


def test_docstrings_of_nested_class_and_nested_function_removed():
    code = (
        "class A:\n"
        '    """A doc."""\n'
        "    class B:\n"
        '        """B doc."""\n'
        "        def g(self):\n"
        '            """g doc."""\n'
        "            def h():\n"
        '                """h doc."""\n'
        "                return 1\n"
        "            return h\n"
    )
    expected = (
        "class A:\n"
        "    class B:\n"
        "        def g(self):\n"
        "            def h():\n"
        "                return 1\n"
        "            return h\n"
    )
    assert nc(code) == expected


def test_module_docstring_removed():
    assert nc('"""Module doc."""\nimport os\n') == "import os\n"
    assert nc('#!/usr/bin/env python\n"""Module doc."""\n') == ""


def test_async_and_decorated_function_docstrings_removed():
    assert nc('async def f():\n    """doc"""\n    await g()\n') == "async def f():\n    await g()\n"
    assert nc('@dec\ndef f():\n    """doc"""\n    return 1\n') == "@dec\ndef f():\n    return 1\n"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('def f():\n    """doc"""\n', "def f():\n    pass\n"),
        ('def f():\n\t"""doc"""\n', "def f():\n\tpass\n"),
        ('class A:\n    """doc"""\n', "class A:\n    pass\n"),
        (
            'class A:\n    def m(self):\n        """only a\n        docstring"""\n    x = 1\n',
            "class A:\n    def m(self):\n        pass\n    x = 1\n",
        ),
        ('def f():\n    """doc"""\n    # and a comment\n', "def f():\n    pass\n"),
        ('def f():\n    """doc"""', "def f():\n    pass"),
    ],
)
def test_body_with_only_a_docstring_becomes_pass_with_its_indentation(code, expected):
    assert nc(code) == expected
    assert_parses(nc(code))


def test_one_line_def_with_docstring_stays_valid():
    assert nc('def f(): "doc"\n') == "def f(): pass\n"
    assert nc('class A: """doc"""\n') == "class A: pass\n"
    tree = assert_parses(nc('def f(): "doc"\n'))
    assert isinstance(tree.body[0].body[0], ast.Pass)


def test_comment_before_docstring_both_removed():
    code = 'def f():\n    # first a comment\n    """then the docstring"""\n    return 1\n'
    assert nc(code) == "def f():\n    return 1\n"
    code = 'def f():  # on the def line\n    """doc"""\n'
    assert nc(code) == "def f():\n    pass\n"


def test_later_string_statements_are_not_docstrings_and_survive():
    body = '    x = 1\n    """not a docstring"""\n    if x:\n        """nor this"""\n    return x\n'
    code = 'def f(x):\n    """doc"""\n' + body
    expected = "def f(x):\n" + body
    assert nc(code) == expected


def test_string_after_a_statement_is_not_a_docstring():
    code = 'def f():\n    x = 1\n    "not a doc"\n    return x\n'
    assert nc(code) == code


@pytest.mark.parametrize(
    "code",
    [
        'def f():\n    b"bytes are not docstrings"\n    return 1\n',
        'def f():\n    b"bytes are not docstrings"\n',
        'def f():\n    f"f-strings are not docstrings {g()}"\n    return 1\n',
        'class A:\n    rb"nor raw bytes"\n    x = 1\n',
    ],
)
def test_bytes_and_fstring_first_statements_are_not_docstrings(code):
    def docstring_of_first_def(source: str):
        return ast.get_docstring(ast.parse(source).body[0], clean=False)

    assert docstring_of_first_def(code) is None  # Python agrees: not a docstring
    assert nc(code) == code


def test_parenthesised_docstring_is_removed():
    code = 'def f():\n    ("doc")\n    return 1\n'
    assert ast.get_docstring(ast.parse(code).body[0]) == "doc"
    assert nc(code) == "def f():\n    return 1\n"


@pytest.mark.parametrize(
    "code",
    [
        'def f():\n    """doc"""  # comment\n    return 1\n',
        'def f():\n    """doc"""; return 1\n',
        'def f():\n    """a\n    b"""; x = 1\n    return x\n',
    ],
)
def test_docstring_sharing_its_line_adds_no_statement(code):
    expected = docstring_free_dump(ast.parse(code))
    assert ast.dump(ast.parse(nc(code))) == expected


@pytest.mark.parametrize(
    "code",
    [
        "",
        "x = 1\n",
        "def f(x):\n    y = x + 1\n    return y\n",
        "def f():\n    x = 1\n    'not a doc'\n    return '#' + x\n",
        's = \'a # b\'\nt = """\n# inside\n"""\n',
        "class A:\n    x = 1\n\n    def m(self):\n        return self.x\n",
        "def f():\n    if True:\n        'string in if'\n",
        "x = 1  \ny = 2\r\n",
    ],
)
def test_nothing_to_remove_returns_input_unchanged(code):
    assert nc(code) == code


def test_python_docstring_node_finds_the_docstring_statement():
    root = parse('def f():\n    # c\n    """doc"""\n    return 1\n', "python").root_node
    doc = python_docstring_node(root.children[0])
    assert doc is not None and doc.text == b'"""doc"""'
    root = parse("def f():\n    x = 1\n    'late'\n", "python").root_node
    assert python_docstring_node(root.children[0]) is None


# --------------------------------------------------------------------------- stdlib property


def docstring_free_dump(tree: ast.AST) -> str:
    """ast.dump of ``tree`` with the docstring removed from every module / class / function body."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def stdlib_files() -> list[Path]:
    """Every .py file of the running interpreter's standard library, site-packages excluded, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "site-packages")
        files.extend(Path(dirpath) / name for name in sorted(filenames) if name.endswith(".py"))
    return sorted(files)


def load_sources(paths: list[Path]) -> list[tuple[Path, str]]:
    """The files that decode as UTF-8 and that ``ast.parse`` accepts, with their text."""
    sources = []
    for path in paths:
        try:
            text = path.read_bytes().decode("utf-8")
            ast.parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError, OSError):
            continue
        sources.append((path, text))
    return sources


def check_files(paths: list[Path]) -> tuple[int, int, list[str]]:
    """(files checked, functions checked, failures) for one chunk of files; runs in a worker process."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old stdlib modules
        sources = load_sources(paths)
        checked, failures = check_no_comment(sources)
    return len(sources), checked, failures


def test_no_comment_over_the_standard_library():
    """Every documented stdlib function: no_comment code parses, has the original's AST minus docstrings,
    and has no tree-sitter comment node left. All functions are checked, split over up to 2 processes."""
    started = time.perf_counter()
    paths = stdlib_files()
    workers = max(1, min(2, os.cpu_count() or 1))
    chunks = [paths[i :: workers * 8] for i in range(workers * 8)]  # interleaved: similar work per chunk
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(check_files, chunks))
    n_files = sum(r[0] for r in results)
    checked = sum(r[1] for r in results)
    failures = [f for r in results for f in r[2]]
    elapsed = time.perf_counter() - started
    summary = (
        f"checked {checked} documented functions from {n_files} of {len(paths)} stdlib files "
        f"in {elapsed:.1f} s with {workers} processes"
    )
    print(summary)
    assert n_files > 500, summary
    assert checked > 5000, summary
    assert not failures, f"{summary}; {len(failures)} failures:\n" + "\n".join(sorted(failures)[:30])


def check_no_comment(sources: list[tuple[Path, str]]) -> tuple[int, list[str]]:
    checked = 0
    failures: list[str] = []
    for path, text in sources:
        for fn in python_functions(text):
            checked += 1
            where = f"{path}:{fn.start_line} {fn.func_name}"
            try:
                got = ast.parse(fn.code_no_comment)
            except SyntaxError as exc:
                failures.append(f"{where}: does not parse: {exc}")
                continue
            if ast.dump(got) != docstring_free_dump(ast.parse(fn.code)):
                failures.append(f"{where}: AST differs from the original without docstrings")
            if any(node.type == "comment" for node in walk(parse(fn.code_no_comment, "python").root_node)):
                failures.append(f"{where}: a comment node survives")
    return checked, failures


def test_stdlib_checker_detects_a_broken_transformation(monkeypatch):
    """The property check has teeth: with comment removal disabled, it reports each kind of failure."""
    source = 'def f(x):\n    """Doc."""\n    # a comment\n    return x\n'
    assert check_no_comment([(Path("ok.py"), source)]) == (1, [])
    monkeypatch.setattr("csbench.code.extract.remove_comments", lambda code, language: code)
    checked, failures = check_no_comment([(Path("broken.py"), source)])
    assert checked == 1
    assert any("AST differs" in f for f in failures)
    assert any("comment node survives" in f for f in failures)
