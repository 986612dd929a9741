"""Comment removal on flattened code (issue #21, item 2).

StatCodeSearch and GeCS's ``[CODESPLIT]`` files ship code whose line breaks became spaces; a ``#`` or
``//`` comment then runs to the end of the snippet. Comment removal must never delete code past a
comment it cannot delimit (``csbench.code.comments``, module docstring). The class-level property:
comment removal never removes a non-comment word -- on real code of every language as written, and
flattened the two ways the releases did it (lines stripped and joined by spaces, as GeCS cut
StatCodeSearch; tokens joined by spaces, as GeCS wrote CodeSearchNet); on the real StatCodeSearch
sample; and on CodeSearchNet Ruby's own tokens joined as GeCS joined them. The ground truth of what
is code comes from the multi-line original, so a comment that swallows code is caught.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from corpora import SHARED_DATA, local_functions, shared_functions
from tree_sitter import Node

from csbench.attacks import parse_spec, removes_comments, run_attack
from csbench.code.comments import (
    CodeLayout,
    code_layout,
    has_undelimited_comment,
    parse_snippet,
    python_docstring_node,
    remove_comments,
)
from csbench.code.languages import language_spec
from csbench.code.parsing import LANGUAGES
from csbench.datasets.base import SkipReport
from csbench.datasets.prepare import (
    SplitWriter,
    code_layout_markdown,
    code_layout_of,
    log_code_layout,
    release_card_markdown,
)
from csbench.datasets.releases._formats import make_record
from csbench.datasets.releases.statcodesearch import read_statcodesearch

STAT_SAMPLE = SHARED_DATA / "statcodesearch" / "sample.json"
STAT_GECS_SAMPLE = SHARED_DATA / "statcodesearch" / "sample_gecs_format.jsonl"
CSN_RUBY = SHARED_DATA / "codesearchnet" / "ruby"


# --------------------------------------------------------------------------- helpers


def _leaves(code: str, language: str) -> Iterator[tuple[Node, bool]]:
    """(token node, is a comment) of ``code`` in document order: leaves, string literals and comments
    whole, Python docstrings left out, the parsing wrapper's own tokens left out."""
    spec = language_spec(language)
    snippet = parse_snippet(code, language)
    docstrings = set()
    stack = [snippet.tree.root_node]
    while stack:
        node = stack.pop()
        if language == "python" and node.type in ("module", "function_definition", "class_definition"):
            doc = python_docstring_node(node)
            if doc is not None:
                docstrings.add((doc.start_byte, doc.end_byte))
        if (node.start_byte, node.end_byte) in docstrings:
            continue
        is_comment = node.type in spec.comment_types
        if is_comment or node.child_count == 0 or node.type in spec.string_types:
            if node.start_byte >= snippet.offset and node.end_byte <= snippet.end and node.end_byte > node.start_byte:
                yield node, is_comment
            continue
        stack.extend(reversed(node.children))


def code_words(code: str, language: str) -> list[str]:
    """The white-space separated words of ``code``'s non-comment tokens, in order (Python: docstrings
    left out, as no_comment removes them)."""
    return [w for node, comment in _leaves(code, language) if not comment for w in node.text.decode().split()]


def first_missing(words: list[str], text: str) -> str | None:
    """The first of ``words`` that ``text`` does not hold in order after the previous one, else None."""
    position = 0
    for word in words:
        found = text.find(word, position)
        if found < 0:
            return word
        position = found + len(word)
    return None


def flatten_lines(code: str) -> str:
    """GeCS's StatCodeSearch extraction: each line stripped, blank lines dropped, each line followed by a space."""
    return "".join(line.strip() + " " for line in code.splitlines() if line.strip())


def flatten_tokens(code: str, language: str) -> str | None:
    """GeCS's CodeSearchNet files: the tokens (comments and string literals whole) joined by spaces.
    None where a string literal or heredoc holds a line break: a line break ends a line comment, so
    removal trusts it even there -- the one case the rule cannot tell (``csbench.code.comments``).
    Block comments keep theirs (a Javadoc among the joined tokens): that case it handles."""
    tokens = []
    for node, comment in _leaves(code, language):
        text = node.text.decode()
        if not text.strip():  # Go's and R's line breaks are tokens of their grammars: layout, not code
            continue
        if "\n" in text and not comment:
            return None
        if comment and not text.startswith("/*"):
            text = text.rstrip()  # (tree-sitter-php ends a `// ...?` comment with its line break)
        tokens.append(text)
    return " ".join(tokens)


def word_losses(
    codes: list[str], language: str, flatten, words: dict[str, list[str]] | None = None
) -> tuple[int, list[str]]:
    """(snippets checked, failures): for each code, comment removal on its flattened form keeps every
    non-comment word of the original (``words``: ``code_words`` of each code, when known)."""
    checked, failures = 0, []
    for code in codes:
        flat = flatten(code)
        if flat is None:
            continue
        checked += 1
        expected = words[code] if words is not None else code_words(code, language)
        missing = first_missing(expected, remove_comments(flat, language))
        if missing is not None:
            failures.append(f"{missing!r} lost from {flat[:160]!r}")
    return checked, failures


def _stat_codes(path: Path) -> list[str]:
    return [item["Code"] for item in json.loads(path.read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def stat_codes(shared_data) -> list[str]:
    if not STAT_SAMPLE.is_file():
        pytest.skip(f"{STAT_SAMPLE} is missing")
    return _stat_codes(STAT_SAMPLE)


# --------------------------------------------------------------------------- hand-written cases

FLATTENED = {
    "r": "x <- read.csv(f) # add one y <- x[1, ] summary(y)",
    "python": "def f(x): # add one y = x + 1 return y",
    "ruby": "def f(x) # add one y = x + 1 y end",
    "go": "func f(x int) int { // add one y := x + 1 return y }",
    "java": "int f(int x) { // add one int y = x + 1; return y; }",
    "javascript": "function f(x) { // add one var y = x + 1; return y; }",
    "php": "function f($x) { # add one $y = $x + 1; return $y; }",
}


@pytest.mark.parametrize("language", sorted(FLATTENED))
def test_an_undelimited_line_comment_is_kept_with_the_code_after_it(language):
    code = FLATTENED[language]
    assert remove_comments(code, language) == code
    assert has_undelimited_comment(code, language)
    assert code_layout(code, language) == CodeLayout(one_line=True, flattened=True, undelimited_comment=True)


@pytest.mark.parametrize("language", sorted(FLATTENED))
def test_the_same_comment_ended_by_a_line_break_is_removed(language):
    code = FLATTENED[language].replace(" one ", " one\n", 1)
    stripped = remove_comments(code, language)
    assert "add one" not in stripped
    assert first_missing(code_words(code, language), stripped) is None
    assert not has_undelimited_comment(code, language)
    assert code_layout(code, language) == CodeLayout()


@pytest.mark.parametrize(
    ("language", "code", "expected"),
    [
        # a delimited block comment goes, the undelimited line comment after it stays
        ("java", "int f() { /* a */ int y = 1; // b return y; }", "int f() { int y = 1; // b return y; }"),
        ("go", "func f() int { y := 1 /* a */ // b return y }", "func f() int { y := 1 // b return y }"),
        (
            "javascript",
            "function f() { /* a */ var y = 1; // b return y; }",
            "function f() { var y = 1; // b return y; }",
        ),
        ("php", "function f() { /* a */ $y = 1; // b return $y; }", "function f() { $y = 1; // b return $y; }"),
        ("php", "function f() { $y = 1; /* a */ # b return $y; }", "function f() { $y = 1; # b return $y; }"),
        # a line break inside a block comment does not end a later line comment (a Javadoc token)
        (
            "java",
            "/** Doc.\n * More. */ int f() { int y = 1; // b return y; }",
            "int f() { int y = 1; // b return y; }",
        ),
        # a line comment that swallowed a block comment's opener ends at a line break inside it: kept (it
        # and the rest of that block comment), and a later comment is judged without those breaks
        (
            "javascript",
            "function f() { // a /**\n * b */ var y = 1; // c return y; }",
            "function f() { // a /**\n * b */ var y = 1; // c return y; }",
        ),
        ("python", 'def f(): # a """b\nc""" y = 1 return y', 'def f(): # a """b\nc""" y = 1 return y'),
        # ... but in code with lines, `// /*` is a commented-out opener: removed
        ("go", "func f() {\n\t// /*\n\t// */\n\tg()\n}", "func f() {\n\tg()\n}"),
        # nor does one inside a string literal
        ("ruby", 'def f log("a\nb") # b y = 1 end', 'def f log("a\nb") # b y = 1 end'),
        ("python", 'def f(): x = """a\nb""" # b return x', 'def f(): x = """a\nb""" # b return x'),
        # a Python docstring is delimited: it goes (for `pass`: as parsed, the body holds nothing
        # else), the comment stays
        ("python", 'def f(x): """Doc.""" # b return x', "def f(x): pass # b return x"),
        # a line comment on the last line of code that has lines is delimited by them
        ("python", "x = 1\ny = 2  # two", "x = 1\ny = 2"),
        ("r", "x <- 1\ny <- 2 # two", "x <- 1\ny <- 2"),
        ("ruby", "def f\n  1\nend # f", "def f\n  1\nend"),
        ("go", "func f() {\n}  // f", "func f() {\n}"),
        # white space around flattened code does not count as a line break
        ("r", "\n  x <- 1 # a y <- 2\n", "\n  x <- 1 # a y <- 2\n"),
        ("python", "x = 1  # a y = 2 \r\n", "x = 1  # a y = 2 \r\n"),
    ],
)
def test_delimited_comments_go_undelimited_ones_stay(language, code, expected):
    assert remove_comments(code, language) == expected
    assert has_undelimited_comment(code, language) == ("#" in expected or "//" in expected)


@pytest.mark.parametrize(
    ("language", "code", "layout"),
    [
        ("r", "Ls <- mean(standard.length, na.rm = TRUE) ", CodeLayout(one_line=True)),  # one statement
        ("r", "x <- read.csv(f) summary(x) ", CodeLayout(one_line=True, flattened=True)),  # two, side by side
        ("r", "f <- function(x) { a <- 1 b <- 2 }", CodeLayout(one_line=True, flattened=True)),
        ("python", "def f(x): return x", CodeLayout(one_line=True)),
        ("python", "def f ( x ) : y = x return y", CodeLayout(one_line=True, flattened=True)),  # parse error
        ("java", "int f ( ) { return x ; }", CodeLayout(one_line=True)),
        ("java", "int f ( ) { int x = 1 ; return x ; }", CodeLayout(one_line=True, flattened=True)),
        ("java", "/** Doc\n * more */ int f() { return 1; }", CodeLayout(one_line=True)),  # breaks in comments only
        ("ruby", "def f(x) x + 1 end", CodeLayout(one_line=True)),
        ("ruby", "items.map { |x| x + 1 }", CodeLayout(one_line=True)),  # parameters are no statement
        ("php", "function f() { return 1; }", CodeLayout(one_line=True)),
        ("go", "func f() int { return 1 }", CodeLayout(one_line=True)),
        ("javascript", "function f() { return 1 }", CodeLayout(one_line=True)),
        ("python", "def f(x):\n    return x\n", CodeLayout()),
        ("python", 'x = """a\nb""" # c y = 1', CodeLayout(flattened=True, undelimited_comment=True)),
    ],
)
def test_code_layout(language, code, layout):
    assert code_layout(code, language) == layout


def test_code_layout_parses_no_multi_line_code(monkeypatch):
    """Preparation stays cheap: code with line breaks (and no comment marker on its last line) is not parsed."""

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed")

    monkeypatch.setattr("csbench.code.comments.parse_snippet", no_parse)
    assert code_layout("def f(x):\n    # c\n    return x\n", "python") == CodeLayout()
    assert code_layout("int f() {\n  /* a */ return 1;\n}", "java") == CodeLayout()
    assert not has_undelimited_comment("x <- 1\ny <- 2", "r")


# --------------------------------------------------------------------------- the attacks report it


def test_attacks_report_the_comments_they_kept():
    flat = FLATTENED["r"]
    normal = "f <- function(x) {\n  # c\n  x\n}\n"
    frame = pd.DataFrame({"language": ["r", "r", "r"], "code": [flat, normal, flat]})
    attacked, report = run_attack("no_comment", {"test": frame}, progress=False)
    row = report.as_dict()["per_language"]["r"]
    assert row["snippets"] == 2 and row["comments_kept_undelimited"] == 1 and row["changed"] == 1
    assert attacked["test"]["code"].tolist() == [flat, "f <- function(x) {\n  x\n}\n", flat]
    _, report = run_attack("ordered_id", {"test": frame}, progress=False)  # renamings remove comments too
    assert report.as_dict()["per_language"]["r"]["comments_kept_undelimited"] == 1
    _, report = run_attack("none", {"test": frame}, progress=False)
    assert report.as_dict()["per_language"]["r"]["comments_kept_undelimited"] == 0


def test_which_specs_remove_comments():
    assert removes_comments(parse_spec("no_comment"))
    assert removes_comments(parse_spec("ordered_id"))
    assert removes_comments(parse_spec("no_comment+ordered_id"))
    assert not removes_comments(parse_spec("none"))
    assert not removes_comments(parse_spec("translation"))
    assert not removes_comments(parse_spec("ordered_id+translation"))


# --------------------------------------------------------------------------- the dataset card


def _records(codes: list[str], language: str, split: str = "test") -> list[dict]:
    return [
        make_record(id=f"x:{i}", language=language, query="find the thing", code=code, split=split)
        for i, code in enumerate(codes)
    ]


def test_the_card_counts_flattened_snippets_per_split_and_language(tmp_path):
    with SplitWriter(tmp_path, ("train", "test")) as writer:
        for record in _records([FLATTENED["r"], "x <- 1 ", "a <- 1 b <- 2"], "r") + _records(
            ["def f(x):\n    return x\n", FLATTENED["python"]], "python", "train"
        ):
            writer.add(record)
    splits = {s: writer.stats[s].as_dict() for s in ("train", "test")}
    assert splits["test"]["code_layout"] == {
        "r": {"snippets": 3, "one_line": 3, "flattened": 2, "undelimited_comment": 1}
    }
    assert splits["train"]["code_layout"] == {
        "python": {"snippets": 2, "one_line": 1, "flattened": 1, "undelimited_comment": 1}
    }
    card = {
        "name": "toy",
        "description": "d",
        "language": "r,python",
        "licence": "l",
        "source": "s",
        "splits": splits,
        "expected_counts": {},
        "skipped_records": {"counts": {}, "examples": []},
        "count_mismatches": {},
    }
    text = release_card_markdown(card)
    assert "## Code layout" in text and "*Flattened*" in text
    assert "| test | r | 3 | 3 (100.0 %) | 2 (66.7 %) | 1 (33.3 %) |" in text
    assert "| train | python | 2 | 1 (50.0 %) | 1 (50.0 %) | 1 (50.0 %) |" in text


def test_preparation_warns_about_flattened_snippets(caplog):
    splits = {"test": {"code_layout": code_layout_of(["r", "r"], [FLATTENED["r"], "x <- f(1)\ny <- 2\n"])}}
    with caplog.at_level("WARNING", logger="csbench"):
        log_code_layout("toy", {"splits": splits})
    assert "toy test: 1 of 2 r snippets are flattened onto one line, 1 of them hold a line comment" in caplog.text
    caplog.clear()
    log_code_layout("toy", {"splits": {"test": {"code_layout": code_layout_of(["r"], ["x <- 1\ny <- 2\n"])}}})
    assert not caplog.text


def test_a_card_without_flattened_code_says_so_and_an_old_card_has_no_section():
    splits = {"test": {"code_layout": code_layout_of(["python"], ["def f(x):\n    return x\n"])}}
    assert code_layout_markdown({"splits": splits})[-1] == "All 1 snippets span several lines: none is flattened."
    assert code_layout_markdown({"splits": {"test": {"pairs": 3}}}) == []
    assert code_layout_of(["cobol"], ["MOVE A TO B"]) == {}  # no grammar: not counted


# --------------------------------------------------------------------------- real StatCodeSearch


def test_statcodesearch_no_snippet_loses_code(stat_codes):
    """The released sample (R, every snippet on one line): comment removal keeps every word of every
    snippet -- its comments cannot be delimited -- and each kept comment is one the card and the
    attack count. (On the old code 12 of the 60 snippets lost on average 62 % of their characters.)"""
    losses = []
    for code in stat_codes:
        missing = first_missing(code.split(), remove_comments(code, "r"))
        if missing is not None:
            losses.append(f"{missing!r} lost from {code[:120]!r}")
    assert not losses, f"{len(losses)} of {len(stat_codes)} snippets lose code: {losses[:3]}"
    with_comment = [c for c in stat_codes if any(comment for _, comment in _leaves(c, "r"))]
    assert len(with_comment) >= 10  # the sample has comments to keep: the test can fail
    assert all(has_undelimited_comment(c, "r") for c in with_comment)
    assert all(code_layout(c, "r").one_line for c in stat_codes)


def test_statcodesearch_through_the_reader_card_and_attack(stat_codes, tmp_path):
    """Both released formats, read by the reader, give a card that counts the flattened snippets, and
    ``no_comment`` changes none of them and reports every comment it kept."""
    if not STAT_GECS_SAMPLE.is_file():
        pytest.skip(f"{STAT_GECS_SAMPLE} is missing")
    for options in ({"file": str(STAT_SAMPLE)}, {"format": "gecs", "file": str(STAT_GECS_SAMPLE)}):
        records = list(read_statcodesearch(tmp_path, options, SkipReport()))
        assert [r["code"].strip() for r in records] == [c.strip() for c in stat_codes]
        with SplitWriter(tmp_path / "out", ("test",)) as writer:
            for record in records:
                writer.add(record)
        layout = writer.stats["test"].as_dict()["code_layout"]["r"]
        assert layout["one_line"] == layout["snippets"] == len(records)
        assert 0 < layout["undelimited_comment"] < layout["flattened"] < layout["snippets"]
        frame = pd.DataFrame(records)
        attacked, report = run_attack("no_comment", {"test": frame}, progress=False)
        row = report.as_dict()["per_language"]["r"]
        assert row["changed"] == 0 and attacked["test"]["code"].tolist() == frame["code"].tolist()
        assert row["comments_kept_undelimited"] == len(
            {r["code"] for r in records if has_undelimited_comment(r["code"], "r")}
        )
        assert row["comments_kept_undelimited"] >= 10


def test_codesearchnet_ruby_tokens_joined_as_gecs_did_lose_no_code(shared_data):
    """GeCS's gecs-csn files are ``" ".join(func_code_tokens)``: with CodeSearchNet Ruby's real tokens
    (comments among them: the tokens starting with ``#``), comment removal keeps every other token."""
    if not (CSN_RUBY / "test.jsonl").is_file():
        pytest.skip(f"{CSN_RUBY}/test.jsonl is missing")
    checked = with_comment = 0
    failures = []
    with open(CSN_RUBY / "test.jsonl", encoding="utf-8") as lines:
        for line in lines:
            tokens = json.loads(line)["code_tokens"]
            comments = [i for i, token in enumerate(tokens) if token.startswith("#")]
            if comments and any("\n" in token for token in tokens[comments[0] + 1 :]):
                continue  # a line break after a comment ends it (see flatten_tokens)
            checked += 1
            with_comment += bool(comments)
            flat = " ".join(tokens)
            words = [w for token in tokens if not token.startswith("#") for w in token.split()]
            missing = first_missing(words, remove_comments(flat, "ruby"))
            if missing is not None:
                failures.append(f"{missing!r} lost from {flat[:160]!r}")
    print(f"ruby CodeSearchNet tokens joined: {checked} functions, {with_comment} with a comment")
    assert checked > 1200 and with_comment > 200
    assert not failures, f"{len(failures)} of {checked} lose code: {failures[:3]}"


# --------------------------------------------------------------------------- class-level property


def _real_codes(language: str) -> list[str]:
    codes = list(dict.fromkeys(shared_functions(language) + local_functions(language, limit=1500)))
    return [c for c in codes if c.strip()][:1500]


@pytest.mark.parametrize("language", LANGUAGES)
def test_comment_removal_never_removes_a_code_word(language):
    """On real functions of ``language`` (the sources installed here and the shared data), as written and
    flattened the two ways the releases did: comment removal keeps every non-comment word in order."""
    codes = _real_codes(language)
    words = {code: code_words(code, language) for code in codes}
    results = {
        "as written": word_losses(codes, language, lambda c: c, words),
        "lines joined": word_losses(codes, language, flatten_lines, words),
        "tokens joined": word_losses(codes, language, lambda c: flatten_tokens(c, language), words),
    }
    report = {way: (n, len(bad)) for way, (n, bad) in results.items()}
    print(f"{language}: {report}")
    assert results["tokens joined"][0] > 0.9 * len(codes)
    with_comment = sum(("#" in c or "//" in c) for c in codes)
    assert with_comment > 0.02 * len(codes)  # enough comments to swallow code if removal were wrong
    for way, (n, bad) in results.items():
        assert n > 0 and not bad, f"{language}, {way}: {len(bad)} of {n} lose code: {bad[:3]}"
