"""Tests of function extraction (``csbench.code.extract``), tokenisers, local corpora
(``csbench.datasets.local``) and the ``none`` / ``no_comment`` attacks.

SPEC "Building a corpus from source": CodeSearchNet filters, near-duplicate removal and an
80/10/10 split by file path hash.
"""

from __future__ import annotations

import ast
import os
import sysconfig
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from projects import unreadable_directory

from csbench.attacks import run_attack
from csbench.code.comments import python_docstring_node, remove_comments
from csbench.code.extract import (
    FilterSettings,
    Function,
    first_paragraph,
    normalized_code_key,
    python_docstring_text,
    python_functions,
    rejection_reason,
)
from csbench.code.parsing import parse
from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, SPLITS
from csbench.datasets.local import SourceError, SplitSettings, build_local_corpus, resolve_source, split_of


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def functions_by_name(source: str) -> dict[str, Function]:
    return {fn.func_name: fn for fn in python_functions(src(source))}


# --------------------------------------------------------------------------- first_paragraph


@pytest.mark.parametrize(
    ("docstring", "expected"),
    [
        ("One line.", "One line."),
        ("First line\ncontinues here.\n\nSecond paragraph.", "First line continues here."),
        ("\n\n  Leading blank lines.\n\nRest.", "Leading blank lines."),
        ("Break on a blank line\n   \t \nwith white space only.", "Break on a blank line"),
        ("Tabs\tand   runs  of\n  spaces.", "Tabs and runs of spaces."),
        ("", ""),
        ("   \n  ", ""),
    ],
)
def test_first_paragraph(docstring, expected):
    assert first_paragraph(docstring) == expected


# --------------------------------------------------------------------------- python_docstring_text


def docstring_literal_text(literal: str) -> str | None:
    """python_docstring_text of ``literal`` used as the first statement of a function."""
    code = "def f():\n    " + literal + "\n    return 1\n"
    function_node = parse(code, "python").root_node.children[0]
    statement = python_docstring_node(function_node)
    if statement is None:  # not a docstring literal at all (bytes, f-string)
        return None
    return python_docstring_text(statement.named_children[0])


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ('"""Plain."""', "Plain."),
        ("'single quoted'", "single quoted"),
        ("'''triple single'''", "triple single"),
        ('r"""Raw \\d+ and \\n stay."""', "Raw \\d+ and \\n stay."),
        ('"""Escapes \\u00e9 and \\x41."""', "Escapes é and A."),
        ('"implicit " "concatenation"', "implicit concatenation"),
        ('u"unicode prefix"', "unicode prefix"),
        (
            '"""Summary line.\n\n        Indented body.\n            Deeper.\n        """',
            "Summary line.\n\nIndented body.\n    Deeper.",
        ),
        ('"""\n    Starts on the second line.\n    """', "Starts on the second line."),
    ],
)
def test_python_docstring_text(literal, expected):
    assert docstring_literal_text(literal) == expected


@pytest.mark.parametrize("literal", ['f"formatted {x}"', 'b"bytes"', 'rb"raw bytes"'])
def test_python_docstring_text_rejects_non_docstring_literals(literal):
    assert docstring_literal_text(literal) is None


# --------------------------------------------------------------------------- python_functions

SAMPLE = """
import functools


def top(a):
    '''Top level function.

    Second paragraph.
    '''
    def inner():
        \"\"\"Nested functions are part of their parent.\"\"\"
        return 1
    class Local:
        def method(self):
            \"\"\"Nor are classes inside functions.\"\"\"
            return 2
    return inner


class Outer:
    \"\"\"Class docstrings are not functions.\"\"\"

    @staticmethod
    @functools.cache
    def decorated(x):
        \"\"\"A decorated static method.\"\"\"
        return x

    async def coroutine(self):
        \"\"\"An async method.\"\"\"
        await self.other()

    class Inner:
        def deep(self):
            r\"\"\"Method of a nested class, \\d raw.\"\"\"
            return 3

    if True:
        def conditional(self):
            '''Defined under an if block.'''
            pass


if __name__ == "__main__":
    def main():
        "Entry point."
        return 0


def undocumented():
    return 4


def blank_docstring():
    \"\"\"   \"\"\"
    return 5


def fstring_first():
    f"not a docstring {top}"
    return 6


lam = lambda: "not a function definition"
"""


def test_qualified_names_in_document_order():
    names = [fn.func_name for fn in python_functions(src(SAMPLE))]
    assert names == ["top", "Outer.decorated", "Outer.coroutine", "Outer.Inner.deep", "Outer.conditional", "main"]


def test_extracted_fields():
    fns = functions_by_name(SAMPLE)
    top = fns["top"]
    assert top.docstring == "Top level function.\n\nSecond paragraph."
    assert top.query == "Top level function."
    assert "def inner():" in top.code and "class Local:" in top.code
    assert fns["Outer.Inner.deep"].docstring == "Method of a nested class, \\d raw."
    assert fns["main"].query == "Entry point."
    assert fns["Outer.coroutine"].code.startswith("async def coroutine(self):")


def test_start_and_end_lines_match_the_python_ast():
    source = src(SAMPLE)
    defs = {
        node.name: node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    lines = source.splitlines()
    for fn in python_functions(source):
        node = defs[fn.func_name.rsplit(".", 1)[-1]]
        assert (fn.start_line, fn.end_line) == (node.lineno, node.end_lineno), fn.func_name
        assert lines[fn.start_line - 1].strip() == fn.code.splitlines()[0].strip()
        assert len(fn.code.splitlines()) == fn.end_line - fn.start_line + 1


def test_methods_are_dedented_and_parse():
    source = src(SAMPLE)
    for fn in python_functions(source):
        assert fn.code.startswith(("def ", "async def ")), fn.code
        tree = ast.parse(fn.code)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef | ast.AsyncFunctionDef)
        ast.parse(fn.code_no_comment)
    deep = functions_by_name(SAMPLE)["Outer.Inner.deep"]
    assert deep.code.splitlines() == [
        "def deep(self):",
        '    r"""Method of a nested class, \\d raw."""',
        "    return 3",
    ]


def test_decorators_are_not_part_of_the_code():
    fn = functions_by_name(SAMPLE)["Outer.decorated"]
    assert fn.code == 'def decorated(x):\n    """A decorated static method."""\n    return x'
    assert src(SAMPLE).splitlines()[fn.start_line - 1].strip() == "def decorated(x):"


def test_code_no_comment_is_remove_comments_of_code():
    for fn in python_functions(src(SAMPLE)):
        assert fn.code_no_comment == remove_comments(fn.code, "python")
        assert '"""' not in fn.code_no_comment and "'''" not in fn.code_no_comment


def test_dedent_keeps_multiline_string_contents():
    source = src(
        '''
        class Template:
            def render(self):
                """Return the template text."""
                return """first
            second
                third"""
        '''
    )
    (fn,) = python_functions(source)
    original = ast.parse(source).body[0].body[0].body[1].value.value
    extracted = ast.parse(fn.code).body[0].body[1].value.value
    assert extracted == original == "first\n    second\n        third"


# --------------------------------------------------------------------------- filters

FILTER_SAMPLE = """
def test_something(x):
    \"\"\"Check that something works as expected.\"\"\"
    y = x + 1
    z = y + 1
    return z


def latest_value(x):
    \"\"\"Return the latest value of the series.\"\"\"
    y = x + 1
    z = y + 1
    return z


class MyTESTCase:
    def runTest(self):
        \"\"\"Run the whole test case now.\"\"\"
        y = 1
        z = y + 1
        return z

    def helper(self):
        \"\"\"Help the test case along nicely.\"\"\"
        y = 1
        z = y + 1
        return z

    def __init__(self, x):
        \"\"\"Create the case with a value.\"\"\"
        self.x = x
        self.y = x + 1

    def __str__(self):
        \"\"\"Describe the case as text.\"\"\"
        text = "case"
        return text + str(self.x)

    def __private(self):
        \"\"\"Name mangled but not a special method.\"\"\"
        y = 1
        return y


def two_token_query(x):
    \"\"\"Compute it\"\"\"
    y = x + 1
    z = y + 1
    return z


def three_token_query(x):
    \"\"\"Compute it now

    A long second paragraph that does not count towards the query at all.
    \"\"\"
    y = x + 1
    z = y + 1
    return z


def short_code(x):
    \"\"\"Return the value plus one.\"\"\"
    # comments and blank lines do not count

    # at all
    return x + 1


def long_enough(x):
    \"\"\"Return the value plus two.\"\"\"
    # a comment
    y = x + 1  # trailing

    return y + 1
"""


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("test_something", "test_function"),
        ("latest_value", "test_function"),  # CodeSearchNet: the name *contains* "test"
        ("MyTESTCase.runTest", "test_function"),
        ("MyTESTCase.helper", None),  # only the function's own name counts
        ("MyTESTCase.__init__", "constructor_or_special_method"),
        ("MyTESTCase.__str__", "constructor_or_special_method"),
        ("MyTESTCase.__private", None),
        ("two_token_query", "short_query"),
        ("three_token_query", None),
        ("short_code", "short_code"),
        ("long_enough", None),
    ],
)
def test_rejection_reason(name, reason):
    fn = functions_by_name(FILTER_SAMPLE)[name]
    assert rejection_reason(fn, FilterSettings()) == reason


def test_rejection_reason_thresholds_come_from_settings():
    fns = functions_by_name(FILTER_SAMPLE)
    assert rejection_reason(fns["three_token_query"], FilterSettings(min_query_tokens=4)) == "short_query"
    assert rejection_reason(fns["two_token_query"], FilterSettings(min_query_tokens=2)) is None
    assert rejection_reason(fns["long_enough"], FilterSettings(min_code_lines=4)) == "short_code"
    assert rejection_reason(fns["short_code"], FilterSettings(min_code_lines=2)) is None


def test_short_code_counts_lines_without_comments_docstrings_and_blank_lines():
    fn = functions_by_name(FILTER_SAMPLE)["long_enough"]
    assert [ln.strip() for ln in fn.code_no_comment.splitlines() if ln.strip()] == [
        "def long_enough(x):",
        "y = x + 1",
        "return y + 1",
    ]


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("snake_case_name", ["snake", "case", "name"]),
        ("camelCaseName", ["camel", "case", "name"]),
        ("CamelCase", ["camel", "case"]),
        ("HTTPResponse", ["http", "response"]),
        ("getHTTPResponseCode", ["get", "http", "response", "code"]),
        ("parseJSON", ["parse", "json"]),
        ("ALL_CAPS", ["all", "caps"]),
        ("IOError", ["io", "error"]),
        ("x2", ["x", "2"]),
        ("utf8Decode", ["utf", "8", "decode"]),
        ("base64", ["base", "64"]),
        ("MyClass2Name", ["my", "class", "2", "name"]),
        ("__init__", ["init"]),
        ("self.assertEqual(x, y)", ["self", "assert", "equal", "x", "y"]),
        ("a+b-c*d/e", ["a", "b", "c", "d", "e"]),
        ("def getHTTPResponse_code(self, x2):", ["def", "get", "http", "response", "code", "self", "x", "2"]),
        ("", []),
        ("  ()[]{} ", []),
    ],
)
def test_subtokens(text, expected):
    assert subtokens(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Return the sum of a and b.", ["Return", "the", "sum", "of", "a", "and", "b", "."]),
        ("foo(bar) -> baz", ["foo", "(", "bar", ")", "-", ">", "baz"]),
        ("Call f() or g[] or h{}", ["Call", "f", "()", "or", "g", "[]", "or", "h", "{}"]),
        ("x=1; y[2]", ["x", "=", "1", ";", "y", "[", "2", "]"]),
        ("path/to/file, e.g. ...", ["path", "/", "to", "/", "file", "e", ".", "g", ".", "..."]),
        ("C++ and `code`", ["C", "++", "and", "code"]),
        ("Don't", ["Don", "t"]),
        ("a<b", ["a<b"]),
        ("", []),
    ],
)
def test_docstring_tokens(text, expected):
    assert docstring_tokens(text) == expected


# --------------------------------------------------------------------------- near-duplicate key


def test_normalized_code_key_ignores_comments_and_layout_only():
    a = "def f(x):\n    y = x + 1\n    return y\n"
    b = "def f(x):   # comment\n\n    y  =  x+1\n    return (y)\n"
    assert normalized_code_key(a, "python") == normalized_code_key(
        "def f(x):\n    y = x+1  # c\n    return y", "python"
    )
    assert normalized_code_key(a, "python") != normalized_code_key(b, "python")  # the parentheses are tokens
    assert normalized_code_key(a, "python") != normalized_code_key(a.replace("y", "z"), "python")
    assert normalized_code_key('return "abc"', "python") != normalized_code_key('return "xyz"', "python")


def test_normalized_code_key_keeps_text_of_strings_with_escapes():
    a = 'def f():\n    return "abc\\n"\n'
    b = 'def f():\n    return "xyz\\n"\n'
    assert normalized_code_key(a, "python") != normalized_code_key(b, "python")


# --------------------------------------------------------------------------- local corpus

KEPT_TEMPLATE = '''
def {name}(values):
    """Return the {name} of the values given.

    More text that is not part of the query.
    """
    result = [v * {n} for v in values]
    result = sorted(result)
    return result
'''

ALPHA = '''
"""Alpha module."""


def compute_total(values):
    """Compute the total of all values.

    Details here.
    """
    total = 0
    for value in values:
        total += value
    return total


def test_compute_total():
    """Check that compute total works fine."""
    assert compute_total([1, 2]) == 3
    assert compute_total([]) == 0
    assert compute_total([5]) == 5


class Widget:
    """A widget."""

    def __init__(self, size):
        """Create a widget of the given size."""
        self.size = size
        self.area = size * size
        self.name = "widget"

    def __str__(self):
        """Describe the widget as text."""
        text = "Widget"
        text += str(self.size)
        return text

    def grow(self, amount):
        """Grow."""
        self.size += amount
        self.area = self.size * self.size
        return self.size

    def shrink(self, amount):
        """Shrink the widget by amount."""
        # only two code lines
        return self.size - amount

    def resize(self, factor):
        """Resize the widget by a factor."""
        self.size = self.size * factor
        self.area = self.size * self.size
        return self.area


def undocumented(a):
    b = a + 1
    c = b + 1
    return c
'''

# compute_total again, differing only in comments, white space and its docstring.
BETA = '''
def compute_total(values):
    """Add up the values and return the sum."""
    # start from zero
    total  =  0
    for value in values:   # iterate
        total += value

    return total


def parse_flag(text):
    """Parse a flag from the given text."""
    value = text.strip().lower()
    result = value in ("1", "yes", "true")
    return result
'''

TOP = '''
import os

if os.name == "posix":
    def posix_only(path):
        """Return the normalised posix path."""
        parts = path.split("/")
        parts = [p for p in parts if p]
        return "/" + "/".join(parts)
'''

N_MODULES = 12


def write_tree(root: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/alpha.py": ALPHA,
        "pkg/sub/beta.py": BETA,
        "pkg/broken.py": 'def broken(:\n    """Doc of a broken function."""\n    return 1\n',
        "top.py": TOP,
        "README.txt": KEPT_TEMPLATE.format(name="not_python", n=1),
        "vendor/gamma.py": KEPT_TEMPLATE.format(name="vendored", n=1),
        "pkg/vendor/delta.py": KEPT_TEMPLATE.format(name="vendored_too", n=2),
    }
    for i in range(N_MODULES):
        files[f"mods/mod_{i:02d}.py"] = KEPT_TEMPLATE.format(name=f"first_{i}", n=i) + KEPT_TEMPLATE.format(
            name=f"second_{i}", n=i
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"), encoding="utf-8")
    (root / "pkg/bad_utf8.py").write_bytes(b'def f():\n    """Caf\xe9 in latin-1, not UTF-8."""\n    return 1\n')


OPTIONS = {"language": "python", "exclude_dirs": ["vendor", "__pycache__"], "max_files": None}
EXPECTED_FOUND = 6 + N_MODULES  # pkg/{__init__,alpha,bad_utf8,broken}.py, pkg/sub/beta.py, top.py, mods
EXPECTED_KEPT = 2 + 1 + 1 + 2 * N_MODULES  # alpha: compute_total, Widget.resize; beta: parse_flag; top


def build(root: Path) -> tuple[pd.DataFrame, dict]:
    return build_local_corpus(
        "tiny", {**OPTIONS, "source": str(root)}, FilterSettings(), SplitSettings(), progress=False
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, pd.DataFrame, dict]:
    root = tmp_path_factory.mktemp("one") / "proj"
    write_tree(root)
    frame, card = build(root)
    return root, frame, card


def test_corpus_file_counts(corpus):
    _, _, card = corpus
    assert card["files"] == {"found": EXPECTED_FOUND, "undecodable": 1, "unparsable": 1}
    assert card["skipped_files"] == {"undecodable": ["pkg/bad_utf8.py"], "unparsable": ["pkg/broken.py"]}


def test_corpus_extraction_counts(corpus):
    _, frame, card = corpus
    assert card["extraction"] == {
        "documented_functions": EXPECTED_KEPT + 6,
        "dropped_constructor_or_special_method": 2,
        "dropped_duplicate": 1,
        "dropped_short_code": 1,
        "dropped_short_query": 1,
        "dropped_test_function": 1,
    }
    assert len(frame) == EXPECTED_KEPT
    assert sum(card["splits"][s]["pairs"] for s in SPLITS) == EXPECTED_KEPT


def test_corpus_records(corpus):
    root, frame, _ = corpus
    assert tuple(frame.columns) == RECORD_COLUMNS
    for record in frame.to_dict("records"):
        assert set(record) == set(RECORD_COLUMNS)
        assert all(isinstance(value, str) and value for value in record.values()), record
    assert frame["id"].is_unique
    assert set(frame["language"]) == {"python"}
    assert set(frame["repo"]) == {"proj"}
    assert not frame["path"].str.contains("vendor").any()
    by_name = frame.set_index("func_name")
    resize = by_name.loc["Widget.resize"]
    assert resize["path"] == "pkg/alpha.py"
    assert resize["query"] == "Resize the widget by a factor."
    assert resize["docstring"] == "Resize the widget by a factor."
    assert resize["code"].startswith("def resize(self, factor):")
    line = ALPHA.lstrip("\n").splitlines().index("    def resize(self, factor):") + 1
    assert resize["id"] == f"tiny/pkg/alpha.py#L{line}"
    assert resize["url"] == (root.resolve() / "pkg/alpha.py").as_uri() + f"#L{line}-L{line + 4}"
    assert by_name.loc["posix_only", "path"] == "top.py"


def test_duplicate_keeps_the_first_file_in_sorted_order(corpus):
    _, frame, _ = corpus
    totals = frame[frame["func_name"] == "compute_total"]
    assert list(totals["path"]) == ["pkg/alpha.py"]
    assert "parse_flag" in set(frame["func_name"])  # the rest of beta.py is kept


def test_functions_of_one_file_share_one_split(corpus):
    _, frame, _ = corpus
    assert (frame.groupby("path")["split"].nunique() == 1).all()
    for path, split in zip(frame["path"], frame["split"], strict=True):
        assert split == split_of(path, SplitSettings())
    assert frame["split"].nunique() >= 2, "the fixture should spread files over several splits"


def test_corpus_does_not_depend_on_where_the_tree_lives(corpus, tmp_path):
    _, frame, card = corpus
    other_root = tmp_path / "elsewhere" / "proj"
    write_tree(other_root)
    other_frame, other_card = build(other_root)
    pd.testing.assert_frame_equal(other_frame.drop(columns="url"), frame.drop(columns="url"))
    assert other_card["source_sha256"] == card["source_sha256"]
    assert other_card["splits"] == card["splits"]
    (other_root / "top.py").write_text(TOP + "\n# changed\n", encoding="utf-8")
    assert build(other_root)[1]["source_sha256"] != card["source_sha256"]


ESCAPED = '''
def describe(value):
    """Describe the value on its own line."""
    text = str(value)
    text = "{label}:\\t" + text
    return text + "\\n"
'''


def test_functions_differing_in_escaped_strings_are_not_duplicates(tmp_path):
    (tmp_path / "left.py").write_text(ESCAPED.replace("{label}", "Left"), encoding="utf-8")
    (tmp_path / "right.py").write_text(ESCAPED.replace("{label}", "Right"), encoding="utf-8")
    frame, card = build(tmp_path)
    assert card["extraction"].get("dropped_duplicate", 0) == 0
    assert sorted(frame["path"]) == ["left.py", "right.py"]


def test_corpus_without_source_files(tmp_path):
    (tmp_path / "only.txt").write_text("nothing here", encoding="utf-8")
    with pytest.raises(SourceError, match="no python files"):
        build(tmp_path)


def test_max_files_limits_the_sorted_file_list(tmp_path):
    write_tree(tmp_path)
    _, card = build_local_corpus(
        "tiny", {**OPTIONS, "source": str(tmp_path), "max_files": 3}, FilterSettings(), SplitSettings(), False
    )
    assert card["files"]["found"] == 3
    assert card["skipped_files"]["undecodable"] == []  # mods/ sort before pkg/


# --------------------------------------------------------------------------- split_of


def test_split_of_is_deterministic_and_80_10_10():
    paths = [f"pkg{i % 37}/sub{i % 11}/module_{i}.py" for i in range(20_000)]
    settings = SplitSettings()
    first = [split_of(p, settings) for p in paths]
    assert first == [split_of(p, SplitSettings(80, 10, 10)) for p in paths]
    share = pd.Series(first).value_counts(normalize=True)
    for split, target in (("train", 0.8), ("valid", 0.1), ("test", 0.1)):
        assert abs(share.get(split, 0.0) - target) <= 0.015, share.to_dict()


def test_split_of_follows_the_settings():
    paths = [f"m{i}.py" for i in range(500)]
    assert {split_of(p, SplitSettings(100, 0, 0)) for p in paths} == {"train"}
    assert {split_of(p, SplitSettings(0, 100, 0)) for p in paths} == {"valid"}
    assert {split_of(p, SplitSettings(0, 0, 100)) for p in paths} == {"test"}
    assert {split_of(p, SplitSettings(50, 50, 0)) for p in paths} == {"train", "valid"}


# --------------------------------------------------------------------------- resolve_source


def test_resolve_source_stdlib_and_existing_directory(tmp_path):
    assert resolve_source("stdlib") == Path(sysconfig.get_paths()["stdlib"])
    assert resolve_source(str(tmp_path)) == tmp_path


def test_resolve_source_missing_directory(tmp_path):
    missing = tmp_path / "does" / "not" / "exist"
    with pytest.raises(SourceError, match=str(missing)) as info:
        resolve_source(str(missing))
    assert "does not exist" in str(info.value)


def test_resolve_source_file_is_not_a_directory(tmp_path):
    file = tmp_path / "file.py"
    file.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SourceError, match=str(file)):
        resolve_source(str(file))


def test_resolve_source_unreadable_directory(tmp_path):
    with unreadable_directory(tmp_path / "locked") as locked, pytest.raises(SourceError, match="not readable") as info:
        resolve_source(str(locked))
    assert str(locked) in str(info.value)


def test_resolve_source_unreadable_directory_message(tmp_path, monkeypatch):
    """The same check without relying on file permissions (which root ignores)."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == tmp_path else real_access(path, mode))
    with pytest.raises(SourceError, match="not readable") as info:
        resolve_source(str(tmp_path))
    assert str(tmp_path) in str(info.value)


# --------------------------------------------------------------------------- attacks


def test_no_comment_attack_changes_only_code(corpus):
    _, frame, _ = corpus
    before = frame.copy(deep=True)
    attacked = run_attack("no_comment", {"test": frame}, progress=False)[0]["test"]
    pd.testing.assert_frame_equal(frame, before)  # the input is not modified
    assert attacked is not frame
    pd.testing.assert_frame_equal(attacked.drop(columns=["code", "renaming"]), frame.drop(columns="code"))
    assert (attacked["renaming"] == "{}").all()
    assert list(attacked["code"]) == [remove_comments(code, "python") for code in frame["code"]]
    assert (attacked["code"] != frame["code"]).all()  # every record had a docstring
    assert not attacked["code"].str.contains('"""').any()


def test_none_attack_returns_an_equal_copy(corpus):
    _, frame, _ = corpus
    out = run_attack("none", {"test": frame}, progress=False)[0]["test"]
    assert out is not frame
    pd.testing.assert_frame_equal(out.drop(columns="renaming"), frame)
    out.loc[out.index[0], "code"] = "changed"
    assert frame.loc[frame.index[0], "code"] != "changed"
