"""The `translation` attack (thesis section 3.3): comments and docstrings translated into another
natural language through apertium; the code itself is left byte for byte as it was. A line comment
whose end cannot be told (flattened code, ``csbench.code.comments.has_undelimited_comment``) may hide
code, so it is left as it is, like comment removal leaves it, and counted in the attack's report.

Every line of documentation is split into its markers (`#`, `//`, `/**`, ` * `, quotes, ...) and
its human text; only the text goes to apertium. All texts of a dataset are translated together,
one line per segment, in a few apertium calls (about 0.2 s of start-up each), and repeated lines
are translated once.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
from tree_sitter import Node, Query

from csbench.attacks.spec import Attack, register
from csbench.code.comments import (
    comment_edits,
    comment_nodes,
    has_undelimited_comment,
    is_docstring_literal,
    parse_snippet,
    python_docstring_node,
)
from csbench.code.languages import language_spec
from csbench.code.parsing import LANGUAGES, captures_by_name, get_query

INSTALL_HINT = "install Debian's apertium and apertium-eng-spa (scripts/setup.sh does when apt is usable)"
# Leading comment markers of one line of a comment, and the closing marker of a block comment.
_LEAD = re.compile(r"^[ \t]*(?:#'|#+|//+|/\*\*?|\*(?!/))?[ \t]*")
_TRAIL = re.compile(r"[ \t]*\*/[ \t]*$")
_HAS_WORD = re.compile(r"[A-Za-z]{2}")
_TAG = re.compile(rb"@\w+(?:[ \t]+(?:\{[^}]*\}[ \t]*)?(?:\$?\w+)?)?[ \t]*")  # @param {type} name
_PY_DOC_OWNERS = ("module", "function_definition", "class_definition")
_PY_DOC_OWNERS_QUERY = "[" + " ".join(f"({kind})" for kind in _PY_DOC_OWNERS) + "] @owner"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\x85]")  # never sent: apertium may break lines


class TranslationError(RuntimeError):
    """apertium is missing, lacks the language pair, or answered with a different number of lines."""


class Apertium:
    """A language pair of the apertium machine translation system, called as a subprocess."""

    def __init__(self, pair: str = "eng-spa", command: str = "apertium", batch_lines: int = 5000) -> None:
        executable = shutil.which(command)
        if executable is None:
            raise TranslationError(f"the translation attack needs the `{command}` command: {INSTALL_HINT}")
        modes = subprocess.run([executable, "-l"], capture_output=True, text=True, check=False).stdout.split()
        if pair not in modes:
            raise TranslationError(
                f"apertium has no {pair!r} language pair (installed: {', '.join(modes) or 'none'}): {INSTALL_HINT}"
            )
        self.executable, self.pair, self.batch_lines = executable, pair, batch_lines

    def translate(self, lines: list[str], workers: int = 1) -> list[str]:
        """Translate single-line texts, each on its own: the result has one line per input line, and a
        line's translation does not depend on the lines sent with it (``_run``). ``workers`` apertium
        pipelines run at once on different batches."""
        clean = [_CONTROL.sub(" ", line) for line in lines]
        batches = [clean[start : start + self.batch_lines] for start in range(0, len(clean), self.batch_lines)]
        if workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                done = list(pool.map(self._aligned, batches))
        else:
            done = [self._aligned(batch) for batch in batches]
        return [line for batch in done for line in batch]

    def _aligned(self, batch: list[str]) -> list[str]:
        """One output line per input line. apertium now and then merges or splits a line inside a
        batch; then the batch is halved until the culprit is alone (its lines joined back)."""
        output = self._run(batch)
        translated = unseparated(output, len(batch))
        if translated is not None:
            return translated
        if len(batch) == 1:
            return [" ".join(part.strip() for part in output if part.strip())]
        middle = len(batch) // 2
        return self._aligned(batch[:middle]) + self._aligned(batch[middle:])

    def _run(self, batch: list[str]) -> list[str]:
        """apertium's output lines for the batch sent with a blank line between every two lines: a blank
        line ends apertium's context (a line after another was translated as if it went on the sentence
        before: "Serializes Un numpy variedad" alone, "Serializes un numpy variedad" after another line,
        on 170 of 265 real comment lines), so each line comes back as it would alone, whichever lines
        it is sent with (tests/attacks/test_translation.py)."""
        result = subprocess.run(
            [self.executable, "-u", "-f", "txt", self.pair],
            input="\n\n".join(batch) + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise TranslationError(f"apertium {self.pair} failed: {result.stderr.strip()[:500]}")
        translated = result.stdout.split("\n")
        if translated and translated[-1] == "":
            translated.pop()
        return translated


def unseparated(output: list[str], lines: int) -> list[str] | None:
    """The translations of ``lines`` lines sent with blank lines between them, from apertium's output
    lines (``Apertium._run``): every other line, if the blank lines came back where they were; else
    (apertium merged or split a line) None."""
    if len(output) != 2 * lines - 1 or any(output[1::2]):
        return None
    return output[::2]


@functools.cache
def _python_documentation_query(comment_types: frozenset[str]) -> Query:
    comments = " ".join(f"({kind}) @comment" for kind in sorted(comment_types))
    return get_query("python", f"{comments} {_PY_DOC_OWNERS_QUERY}")


def _python_documentation(root: Node, comment_types: frozenset[str]) -> tuple[list[Node], list[Node]]:
    """The comment nodes (document order) and the nodes that may own a docstring (module, functions,
    classes, nested ones included) of a Python tree, found by one query (one traversal, in C)."""
    found = captures_by_name(_python_documentation_query(comment_types), ("comment", "owner"), root)
    return found["comment"], found["owner"]


def _docstring_bodies(owners: list[Node]) -> list[tuple[Node, bytes]]:
    """(string node, its closing delimiter) of the docstring of each of ``owners`` that has one."""
    bodies = []
    for node in owners:
        statement = python_docstring_node(node)
        if statement is None:
            continue
        literal = statement.named_children[0]
        while literal.type == "parenthesized_expression":
            literal = literal.named_children[0]
        strings = literal.named_children if literal.type == "concatenated_string" else [literal]
        bodies.extend((s, s.children[-1].text) for s in strings if is_docstring_literal(s) and s.child_count >= 2)
    return bodies


def text_segments(code: str, language: str) -> list[tuple[int, int, str]]:
    """Byte spans (in ``code``) of the human text of every documentation line, with a guard kind:
    "block" (inside /* */: must not produce */), a quote character (inside a docstring: must not
    produce it), or "line"."""
    snippet = parse_snippet(code, language)
    data, offset = snippet.data, snippet.offset
    found: list[tuple[int, int, str]] = []

    def add_lines(start: int, end: int, guard: str) -> None:
        """``start``/``end`` are tree positions: the snippet's own bytes begin at ``offset``."""
        start, end = start - offset, end - offset
        position = start
        for line in data[start:end].split(b"\n"):
            text = line.decode("utf-8", "replace")
            lead = _LEAD.match(text)
            body_start = len(text[: lead.end()].encode()) if lead else 0
            trail = _TRAIL.search(text)
            body_end = len(text[: trail.start()].encode()) if trail else len(line)
            tag = _TAG.match(line[body_start:body_end])  # keep `@param name` / `@return` as they are
            if tag:
                body_start += tag.end()
            body = line[body_start:body_end].rstrip()
            if body and _HAS_WORD.search(body.decode("utf-8", "replace")) and not body.startswith((b"=begin", b"=end")):
                found.append((position + body_start, position + body_start + len(body), guard))
            position += len(line) + 1

    spec = language_spec(language)
    root = snippet.tree.root_node
    if language == "python":
        comments, owners = _python_documentation(root, spec.comment_types)
    else:
        comments, owners = comment_nodes(root, spec.comment_types, spec.name), []
    if comments and has_undelimited_comment(code, language, snippet):
        comments = _delimited(code, language, snippet, comments)
    for node in comments:
        start, end = max(node.start_byte, offset), min(node.end_byte, snippet.end)
        if start < end:
            add_lines(start, end, "block" if data[start:end].startswith(b"/*") else "line")
    if owners:
        for string, closing in _docstring_bodies(owners):
            opening = string.children[0]
            quote = closing.decode()[-1:] or '"'
            add_lines(opening.end_byte, string.children[-1].start_byte, quote)
    found.sort()
    return found


def _delimited(code: str, language: str, snippet, comments: list[Node]) -> list[Node]:
    """The ``comments`` whose end can be told: those comment removal removes. A line comment of
    flattened code that may run over code (``csbench.code.comments.has_undelimited_comment``) is left
    untranslated, as comment removal leaves it, so no code it may hide is rewritten."""
    _, edits = comment_edits(code, language, snippet)
    removed = [(start + snippet.offset, end + snippet.offset) for start, end, _ in edits]
    return [node for node in comments if any(start <= node.start_byte < end for start, end in removed)]


def _guarded(text: str, guard: str) -> str:
    text = text.replace("\n", " ").replace("\r", " ").strip()
    if guard == "block":
        return text.replace("*/", "* /")
    if guard in ("'", '"'):  # a docstring: never end (or escape out of) its literal
        other = "'" if guard == '"' else '"'
        return text.replace("\\", "/").replace(guard, other)
    return text


def translate_documentation(
    code: str, language: str, translations: dict[str, str], segments: list[tuple[int, int, str]] | None = None
) -> str:
    """``code`` with each documentation text replaced by its translation (code untouched).
    ``segments``: ``text_segments(code, language)`` if the caller has them."""
    data = code.encode("utf-8")
    out, cursor = bytearray(), 0
    for start, end, guard in segments if segments is not None else text_segments(code, language):
        original = data[start:end].decode("utf-8", "replace")
        out += data[cursor:start] + _guarded(translations.get(original, original), guard).encode("utf-8")
        cursor = end
    out += data[cursor:]
    return out.decode("utf-8")


def translate_frame(frame: pd.DataFrame, translator: Apertium, workers: int = 1) -> pd.DataFrame:
    """The `translation` attack over a split: documentation translated, code unchanged."""
    codes, languages = frame["code"].tolist(), frame["language"].tolist()
    segments = [text_segments(code, language) for code, language in zip(codes, languages, strict=True)]
    texts = _unique(
        data[s:e].decode("utf-8", "replace")
        for data, spans in zip((code.encode("utf-8") for code in codes), segments, strict=True)
        for s, e, _ in spans
    )
    translations = dict(zip(texts, translator.translate(texts, workers), strict=True)) if texts else {}
    out = frame.copy()
    out["code"] = [  # each snippet parsed once: the segments found above
        translate_documentation(code, language, translations, spans) if spans else code
        for code, language, spans in zip(codes, languages, segments, strict=True)
    ]
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


register(
    Attack(
        "translation",
        "comments and docstrings translated into another language through apertium (default eng-spa); code unchanged",
        LANGUAGES,
        "comments",
        defaults={"pair": "eng-spa"},
        params_schema={
            "pair": {
                "type": "string",
                "pattern": "^[a-z_A-Z]+-[a-z_A-Z]+$",
                "description": "apertium language pair, e.g. eng-spa",
            }
        },
    )
)
