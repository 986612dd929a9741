"""The `translation` attack: documentation translated through apertium, code byte for byte unchanged."""

from __future__ import annotations

import shutil
import sysconfig
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from csbench.attacks import ATTACKS
from csbench.attacks.translation import (
    Apertium,
    TranslationError,
    text_segments,
    translate_documentation,
    translate_frame,
)
from csbench.code.comments import parse_snippet, remove_comments
from csbench.code.extract import extract_functions, normalized_code_key

needs_apertium = pytest.mark.skipif(
    shutil.which("apertium") is None, reason="apertium is not installed (scripts/setup.sh installs it)"
)


class Upper:
    """A stand-in translator: upper-cases, so the tests see exactly what was sent."""

    def translate(self, lines: list[str], workers: int = 1) -> list[str]:
        return [line.upper() for line in lines]


def texts(code: str, language: str) -> list[str]:
    data = code.encode()
    return [data[s:e].decode() for s, e, _ in text_segments(code, language)]


def test_segments_are_the_human_text_without_markers_or_tags() -> None:
    java = "/**\n * Returns the size.\n *\n * @param index the index to read */\nint size() { return n; } // fast\n"
    assert texts(java, "java") == ["Returns the size.", "the index to read", "fast"]
    python = 'def f(a):\n    """Add one.\n\n    More text here.\n    """\n    # bump it\n    return a + 1  # done\n'
    assert texts(python, "python") == ["Add one.", "More text here.", "bump it", "done"]  # document order
    ruby = "=begin\nA block comment\n=end\ndef foo\n  # compute it\n  1\nend\n"
    assert texts(ruby, "ruby") == ["A block comment", "compute it"]
    r = "#' Glue strings together\n#' @param x a string\nglue <- function(x) {\n  x # the result\n}\n"
    assert texts(r, "r") == ["Glue strings together", "a string", "the result"]


def test_strings_that_are_not_documentation_are_left_alone() -> None:
    code = 'def f():\n    """Doc here."""\n    s = "not a comment # really"\n    return s\n'
    assert texts(code, "python") == ["Doc here."]
    assert "# really" in translate_documentation(code, "python", {"Doc here.": "Otro texto."})


def test_translations_cannot_close_a_comment_or_a_docstring() -> None:
    java = "/* Ends here. */\nint f() { return 1; }\n"
    out = translate_documentation(java, "java", {"Ends here.": "sneaky */ int x = 1; /*"})
    assert out.count("*/") == 1 and not parse_snippet(out, "java").tree.root_node.has_error
    python = 'def f():\n    """Doc."""\n    return 1\n'
    out = translate_documentation(python, "python", {"Doc.": 'quote """ and back\\slash'})
    compile(out, "<test>", "exec")
    assert '"""quote \'\'\' and back/slash"""' in out


@pytest.mark.parametrize(
    ("code", "language"),
    [
        (
            'def add(a, b):\n    """Return the sum.\n\n    Raise on None.\n    """\n    return a + b  # result\n',
            "python",
        ),
        ("// Open opens the file.\nfunc Open(name string) error {\n\treturn nil // nothing\n}\n", "go"),
        ("/** Returns the size. */\npublic int size() {\n  return size; // fast\n}\n", "java"),
        (
            "/**\n * Adds two numbers.\n * @param {number} a the first\n */\nfunction add(a, b) { return a + b; }\n",
            "javascript",
        ),
        ("<?php\n/** Formats the record. */\nfunction fmt($r) { return $r; } # done\n", "php"),
        ("# Computes the value.\ndef value\n  1 # one\nend\n", "ruby"),
        ("#' Glue things.\nglue <- function(x) {\n  x # it\n}\n", "r"),
    ],
)
def test_only_documentation_changes(code: str, language: str) -> None:
    out = translate_documentation(code, language, {t: t.upper() for t in texts(code, language)})
    assert out != code
    assert normalized_code_key(remove_comments(out, language), language) == normalized_code_key(
        remove_comments(code, language), language
    )


def test_a_missing_apertium_or_pair_names_what_to_install() -> None:
    with pytest.raises(
        TranslationError, match=r"needs the `csbench-no-such-apertium` command: install .*apertium-eng-spa"
    ):
        Apertium(command="csbench-no-such-apertium")
    if shutil.which("apertium"):
        with pytest.raises(TranslationError, match="no 'eng-xyz' language pair"):
            Apertium(pair="eng-xyz")


def test_the_attack_is_registered_for_all_languages_with_a_default_pair() -> None:
    attack = ATTACKS.get("translation")
    assert set(attack.languages) == {"python", "go", "java", "javascript", "php", "ruby", "r"}
    assert attack.defaults == {"pair": "eng-spa"}


@needs_apertium
def test_apertium_translates_a_batch_line_for_line() -> None:
    out = Apertium().translate(["Return the sum of two numbers.", "Open the file.", "Read every line."])
    assert len(out) == 3
    assert "suma" in out[0] and "números" in out[0]  # Debian bookworm's apertium-eng-spa 0.8.1
    assert all(line and not line.startswith("*") for line in out)  # -u: unknown words are not marked


@needs_apertium
def test_each_line_is_translated_as_it_is_alone_whatever_is_sent_with_it() -> None:
    """apertium translates a line after another as if it went on the sentence before ("Serializes un
    numpy variedad" after any line, "Serializes Un numpy variedad" alone): a comment's translation, so
    the attacked code, depended on the comments of the other snippets of the dataset and on their
    order, and ``translate_frame``'s one translation per distinct text was then wrong for the text's
    other places. Each line must come back as it does alone, in any batch, in any order."""
    lines = [
        line
        for code in _real_functions("python", limit=40)
        for line in dict.fromkeys(text for text in texts(code, "python") if text.strip())
    ][:60]
    assert len(lines) >= 40
    translator = Apertium()
    alone = [translator.translate([line])[0] for line in lines]
    assert translator.translate(lines) == alone
    assert translator.translate(lines[::-1]) == alone[::-1]
    assert (
        translator.translate(["Returns the thing of a", "Serializes a numpy array to a compressed base64 string"])[1]
        == translator.translate(["Serializes a numpy array to a compressed base64 string"])[0]
    )


def _real_functions(language: str, limit: int = 150) -> list[str]:
    roots = {
        "python": Path(sysconfig.get_paths()["stdlib"]),
        "go": Path("/usr/share/go-1.19/src"),
        "java": Path("/usr/lib/jvm/openjdk-17/lib/src.zip"),
        "ruby": Path("/usr/lib/ruby/3.1.0"),
        "php": Path("/usr/share/php"),
        "javascript": Path("/usr/share/nodejs/lodash"),
        "r": Path(__file__).resolve().parents[2] / ".sources" / "r-cran-src",
    }
    suffix = {
        "python": ".py",
        "go": ".go",
        "java": ".java",
        "ruby": ".rb",
        "php": ".php",
        "javascript": ".js",
        "r": ".R",
    }[language]
    root = roots[language]
    if not root.exists():
        pytest.skip(f"no {language} source at {root}")
    if root.is_file():
        with zipfile.ZipFile(root) as archive:
            names = sorted(n for n in archive.namelist() if n.endswith(suffix) and n.startswith("java.base/"))
            sources = [archive.read(n).decode("utf-8", "replace") for n in names[::40][:60]]
    else:
        files = sorted(p for p in root.rglob(f"*{suffix}") if "site-packages" not in p.parts and "test" not in p.parts)
        sources = [f.read_text("utf-8", "replace") for f in files[:: max(1, len(files) // 60)][:60]]
    functions = [fn.code for text in sources for fn in extract_functions(text, language)]
    return functions[:limit]


@needs_apertium
@pytest.mark.parametrize("language", ["python", "go", "java", "javascript", "php", "ruby", "r"])
def test_real_code_translated_keeps_its_code_and_parses(language: str) -> None:
    codes = _real_functions(language)
    assert codes, f"no {language} function extracted"
    frame = pd.DataFrame({"code": codes, "language": [language] * len(codes)})
    out = translate_frame(frame, Apertium())
    changed = broken = documented = 0
    for before, after in zip(codes, out["code"], strict=True):
        documented += bool(text_segments(before, language))
        assert normalized_code_key(remove_comments(after, language), language) == normalized_code_key(
            remove_comments(before, language), language
        )
        changed += after != before
        if not parse_snippet(before, language).tree.root_node.has_error:
            broken += parse_snippet(after, language).tree.root_node.has_error
    assert broken == 0
    # Outside Python the doc comment sits above the definition and is not part of the code: only
    # inline comments are there to translate. Most snippets that have any must change; the rest hold
    # only what apertium keeps as it is (names, RDoc's `:nodoc:`, seen in 3 of 24 Ruby snippets).
    assert changed >= 0.8 * documented, (changed, documented, len(codes))
    if language == "python":  # docstrings are inside the code
        assert documented == len(codes)


def test_translate_frame_sends_each_distinct_text_once() -> None:
    class Counting(Upper):
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def translate(self, lines: list[str], workers: int = 1) -> list[str]:
            self.calls.append(lines)
            return super().translate(lines, workers)

    code = "# same comment\nx = 1\n"
    frame = pd.DataFrame({"code": [code, code, "# other\ny = 2\n"], "language": ["python"] * 3})
    translator = Counting()
    out = translate_frame(frame, translator)
    assert translator.calls == [["same comment", "other"]]
    assert out["code"].tolist() == ["# SAME COMMENT\nx = 1\n"] * 2 + ["# OTHER\ny = 2\n"]


def test_a_batch_apertium_misaligns_is_split_until_every_line_is_aligned() -> None:
    """apertium sometimes merges two lines of a batch; the translator must still answer line for line."""

    class Merging(Apertium):
        def __init__(self) -> None:  # no real apertium needed
            self.batch_lines, self.runs = 10, 0

        def _run(self, batch: list[str]) -> list[str]:  # as apertium answers lines sent with blank lines between
            self.runs += 1
            out: list[str] = []
            for line in batch:
                if line == "glue" and out:  # "glue" is merged into the line before it
                    out[-1] += " " + line.upper()
                else:
                    out.append(line.upper())
            return "\n\n".join(out).split("\n")

    translator = Merging()
    lines = ["one", "two", "glue", "three", "four", "five"]
    assert translator.translate(lines) == ["ONE", "TWO", "GLUE", "THREE", "FOUR", "FIVE"]
    assert translator.runs > 1
    assert translator.translate(["a\x0cb"]) == ["A B"]  # control characters never reach apertium


def test_concurrent_batches_give_the_same_lines_in_order() -> None:
    class Slow(Apertium):
        def __init__(self) -> None:  # no real apertium needed
            self.batch_lines = 3

        def _run(self, batch: list[str]) -> list[str]:
            import time

            time.sleep(0.01 * (len(batch[0]) % 3))  # batches finish out of order
            return "\n\n".join(line[::-1] for line in batch).split("\n")

    lines = [f"line {i} {'x' * (i % 5)}" for i in range(40)]
    assert Slow().translate(lines, workers=4) == Slow().translate(lines) == [line[::-1] for line in lines]


def test_a_comment_whose_end_is_unknown_is_not_translated_on_flattened_release_code(shared_data: Path) -> None:
    """StatCodeSearch's R comes flattened (line breaks became spaces): a `#` comment there may run over
    code. Comment removal keeps such a comment (tests/code/test_flattened_comments.py); translation must
    leave it too, or it rewrites the code hidden in it (`res = retrievalByAuthorID(...)` -> upper case
    here). Delimited comments of the same data are still translated."""
    import json

    from csbench.code.comments import has_undelimited_comment

    records = json.loads((shared_data / "statcodesearch" / "sample.json").read_text(encoding="utf-8"))
    codes = [record["Code"] for record in records]
    kept = [code for code in codes if has_undelimited_comment(code, "r")]
    assert len(kept) >= 10  # the sample has a dozen such snippets
    out = translate_frame(pd.DataFrame({"code": codes, "language": "r"}), Upper())["code"].tolist()
    assert [new for old, new in zip(codes, out, strict=True) if old in kept] == kept
    block = "x <- 1 # a delimited comment\ny <- 2 # and its code\n"
    assert translate_documentation(block, "r", {"a delimited comment": "UN COMENTARIO"}) == block.replace(
        "a delimited comment", "UN COMENTARIO"
    )
    flattened = "x <- 1 # a comment hiding code y <- f(x) "
    assert text_segments(flattened, "r") == []
