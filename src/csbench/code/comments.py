"""Removal of comments and docstrings (the ``no_comment`` transformation) with tree-sitter.

Flattened code. Some releases ship code whose line breaks were replaced by spaces (StatCodeSearch's R;
GeCS's ``[CODESPLIT]`` files, CodeSearchNet tokens joined by spaces). A line comment (``#`` in
Python, R, Ruby and PHP; ``//`` in Go, Java, JavaScript and PHP) ends at a line break, so there it
runs to the end of the snippet, over whatever code followed it on the original lines. Such a
comment is *undelimited*: a line comment that no line break follows and none precedes (outside
comments, string literals and white space around the code; a backslash line continuation is no line
break either): its end is unknown. So is a line comment that holds the opener of a block comment
(Python: of a triple-quoted string) it does not close: where tokens were joined, a Javadoc's line
breaks survive, and the one that ends the comment may lie inside the block comment it swallowed.
Comment removal keeps such comments, whole, rather than delete the code they may hide; block
comments and docstrings, which are delimited, are still removed. One case stays out of reach: a line
break inside a later multi-line string or heredoc of joined tokens ends a line comment like any other.
``code_layout`` tells flattened snippets at preparation (the dataset card); ``has_undelimited_comment``
is what the attacks count (``AttackReport.kept_undelimited``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tree_sitter import Node, Tree

from csbench.code.languages import LanguageSpec, language_spec
from csbench.code.parsing import captured, get_query, parse

# Python nodes whose body may open with a docstring.
_PY_DOC_OWNERS = {"module", "function_definition", "class_definition"}
_PY_COMMENT_QUERY = "(comment) @c (module) @d (function_definition) @d (class_definition) @d"


def is_docstring_literal(node: Node) -> bool:
    """Whether an expression is a literal Python takes as a docstring: a str literal, possibly
    implicitly concatenated or parenthesised, with no bytes or f-string part."""
    if node.type == "parenthesized_expression" and node.named_child_count == 1:
        return is_docstring_literal(node.named_children[0])
    if node.type == "concatenated_string":
        return all(is_docstring_literal(part) for part in node.named_children)
    if node.type != "string":
        return False
    prefix = _STRING_PREFIX.match(node.text).group().lower()
    return b"b" not in prefix and b"f" not in prefix


_STRING_PREFIX = re.compile(rb"[A-Za-z]*")  # a string literal's prefix (``r``, ``b``, ``f``, ``u``, ...)
_SEMICOLON = re.compile(rb"[ \t]*;[ \t]*")  # a ``;`` after a docstring, with the spaces around it


def python_docstring_node(owner: Node) -> Node | None:
    """The docstring statement of a Python module / function / class node, if it has one."""
    found = _python_docstring(owner)
    return found[1] if found is not None else None


def _python_docstring(owner: Node) -> tuple[Node, Node] | None:
    """(body, docstring statement) of a module / function / class node that has a docstring."""
    body = owner if owner.type == "module" else owner.child_by_field_name("body")
    if body is None:
        return None
    for i in range(body.named_child_count):  # (named_child(i): no node built for the other statements)
        child = body.named_child(i)
        if child.type == "comment":
            continue
        is_expression = child.type == "expression_statement" and child.named_child_count == 1
        return (body, child) if is_expression and is_docstring_literal(child.named_child(0)) else None
    return None


def _line_of(data: bytes, start: int, end: int) -> tuple[int, int]:
    """Start of the line holding ``start`` and the end (past the newline) of the line holding ``end``."""
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", end)
    return line_start, len(data) if line_end == -1 else line_end + 1


def _comment_edit(data: bytes, node: Node) -> tuple[int, int, bytes]:
    line_start, line_end = _line_of(data, node.start_byte, node.end_byte)
    if data[line_start : node.start_byte].strip() == b"":  # a comment line: remove the line
        return line_start, line_end, b""
    start, end = node.start_byte, node.end_byte
    while start > 0 and data[start - 1 : start] in (b" ", b"\t"):  # and the spaces before it
        start -= 1
    while end > node.start_byte and data[end - 1 : end] == b"\r":  # keep a CRLF line ending whole
        end -= 1
    return start, end, b""


def _docstring_edit(data: bytes, owner: Node, doc: Node, body: Node) -> tuple[int, int, bytes]:
    """``body``: the block ``doc`` opens (its parent)."""
    line_start, line_end = _line_of(data, doc.start_byte, doc.end_byte)
    before = data[line_start : doc.start_byte]
    after = data[doc.end_byte : line_end]
    only_statement = True
    for i in range(body.named_child_count):
        child = body.named_child(i)
        if child.type != "comment" and child != doc:
            only_statement = False
            break
    semicolon = _SEMICOLON.match(after)
    rest = after[semicolon.end() :] if semicolon else after
    if semicolon and rest.strip() and not rest.strip().startswith(b"#"):
        # `"doc"; more()` — drop the docstring and its separator, keep the other statements
        return doc.start_byte, doc.end_byte + semicolon.end(), b""
    end = doc.end_byte + (semicolon.end() if semicolon else 0)
    if only_statement and owner.type != "module":  # the body must not become empty
        if before.strip() == b"":
            return line_start, end, before + b"pass"
        return doc.start_byte, end, b"pass"
    if before.strip() == b"" and rest.strip() == b"":  # alone on its lines
        return line_start, line_end, b""
    return doc.start_byte, end, b""  # a trailing comment after it is removed by its own edit


Edit = tuple[int, int, bytes]  # (start, end, replacement) over the UTF-8 bytes of the code


def remove_comments(code: str, language: str) -> str:
    """Return ``code`` without comments (and, for Python, docstrings); everything else is left as it was.

    A line that held only comments (or a docstring) is removed; a Python body that held only a
    docstring gets ``pass`` so the code still parses. In the other languages every comment node goes,
    documentation comments included; see ``_comment_span_edit`` for how the code around one is kept
    valid. ``code`` may be a whole file or one function / method: a lone method is parsed inside the
    minimal wrapper its grammar needs (``LanguageSpec.snippet_wrappers``), which is not part of the result.
    A line comment whose end cannot be told (flattened code: ``has_undelimited_comment``, module
    docstring) is kept, with whatever it may hide.
    """
    data, edits = comment_edits(code, language)
    return apply_edits(data, edits).decode("utf-8")


def comment_edits(
    code: str, language: str, snippet: Snippet | None = None, found: Sequence[Node] | None = None
) -> tuple[bytes, list[Edit]]:
    """``code`` as UTF-8 bytes and the sorted, non-overlapping edits ``remove_comments`` applies to them.

    ``snippet`` is ``parse_snippet(code, language)`` when the caller already has it (the code attacks
    parse once for comment removal and identifier analysis). ``found``: the nodes of that parse the
    comment query would find, when the caller's own query already captured them: the comment nodes
    in document order (Python: the comment nodes and the possible docstring owners -- ``module``,
    ``function_definition``, ``class_definition`` -- in any order).
    """
    snippet = snippet if snippet is not None else parse_snippet(code, language)
    if language != "python":
        if found is not None and not found:  # no comment
            return snippet.data, []
        spec = language_spec(language)
        nodes = found if found is not None else comment_nodes(snippet.tree.root_node, spec.comment_types, language)
        return snippet.data, _comment_edits_other(snippet, spec, nodes)
    data = snippet.data
    if found is None:
        found = [node for node, _ in get_query("python", _PY_COMMENT_QUERY).captures(snippet.tree.root_node)]
    kept = _python_kept(snippet, found)
    edits: list[Edit] = []
    for node in found:
        if node.type == "comment":
            if not kept or all(node is not other for other in kept):  # (`is`: tree-sitter's == is odd)
                edits.append(_comment_edit(data, node))
        else:
            docstring = _python_docstring(node)
            if docstring is not None:
                edits.append(_docstring_edit(data, node, docstring[1], docstring[0]))
    return data, _merge(edits)


@dataclass(frozen=True)
class Snippet:
    """A parse of ``data`` inside a wrapper: the code occupies bytes [offset, offset + len(data)) of the tree."""

    data: bytes
    tree: Tree
    offset: int

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


def parse_snippet(code: str | bytes, language: str) -> Snippet:
    """Parse a file or a lone function / method of ``language``: try the language's wrappers in order
    and keep the first parse without error (else the first one tried)."""
    data = code.encode("utf-8") if isinstance(code, str) else code
    spec = language_spec(language)
    wrappers = spec.snippet_wrappers
    if spec.name == "php" and data.lstrip().startswith(b"<?"):
        wrappers = (("", ""),)  # a whole PHP file (or a snippet that brings its own open tag)
    first: Snippet | None = None
    for prefix, suffix in wrappers:
        head, tail = prefix.encode("utf-8"), suffix.encode("utf-8")
        snippet = Snippet(data, parse(head + data + tail, language), len(head))
        if not snippet.tree.root_node.has_error:
            return snippet
        first = first or snippet
    assert first is not None
    return first


def comment_nodes(node: Node, comment_types: frozenset[str], language: str | None = None) -> list[Node]:
    """Comment nodes below ``node`` in document order (not descending into comments). With the
    ``language`` of the tree, a tree-sitter query finds them (in C, several times faster)."""
    if language is not None:
        return captured(language, " ".join(f"({kind}) @c" for kind in sorted(comment_types)), node)
    found = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in comment_types:
            found.append(current)
        else:
            stack.extend(reversed(current.children))
    return found


_SPACE = b" \t"
_NO_SPACE_AFTER = b"(["
_NO_SPACE_BEFORE = b")],;"


def _comment_spans(snippet: Snippet, nodes: Sequence[Node]) -> list[tuple[int, int]]:
    """The byte spans, in ``snippet.data``, of comment nodes in document order (without a trailing
    line break; a comment inside the previous one or outside the snippet dropped)."""
    data, offset = snippet.data, snippet.offset
    spans: list[tuple[int, int]] = []
    last_end = -1
    for node in nodes:
        if node.end_byte <= last_end:  # inside the previous comment (as ``captured`` drops it)
            continue
        last_end = node.end_byte
        start, end = max(node.start_byte, offset) - offset, min(last_end, snippet.end) - offset
        if start >= end:
            continue
        while end > start and data[end - 1 : end] in (b"\r", b"\n"):
            end -= 1
        spans.append((start, end))
    return spans


def _comment_edits_other(snippet: Snippet, spec: LanguageSpec, nodes: Sequence[Node]) -> list[Edit]:
    data = snippet.data
    found = _comment_spans(snippet, nodes)
    kept = _kept_spans(snippet, spec, found)
    spans: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(found):
        if kept and i in kept:
            continue
        if spans and data[spans[-1][1] : start].strip(_SPACE) == b"":  # comments side by side: one span
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return _merge([_comment_span_edit(data, start, end, spec) for start, end in spans])


# --------------------------------------------------------------------------- flattened code

# Comments that close themselves; every other comment node is a line comment (``#``, ``//``).
_BLOCK_OPENERS = (b"/*", b"=begin")
_BLOCK_COMMENT = re.compile(rb"/\*.*?\*/", re.DOTALL)
_NON_SPACE = re.compile(rb"\S")
_WHITE = b" \t\r\n\f\v"
_NOT_STATEMENTS = frozenset({"php_tag", "text_interpolation"})


def _undelimited(snippet: Snippet, spec: LanguageSpec, start: int, end: int, comments: list[tuple[int, int]]) -> bool:
    """Whether the comment at ``snippet.data[start:end]`` is undelimited (module docstring): a line
    comment that no line break followed by code follows, and that no line break precedes
    (``_broken_before``; ``comments``: the snippet's comment spans and what they swallowed)."""
    data = snippet.data
    if data.startswith(_BLOCK_OPENERS, start):
        return False
    after = data.find(b"\n", end)
    if after != -1 and _NON_SPACE.search(data, after) is not None:  # a line break, then code
        return False
    return not _broken_before(snippet, spec, start, comments)


def _broken_before(snippet: Snippet, spec: LanguageSpec, start: int, comments: list[tuple[int, int]]) -> bool:
    """Whether a line break precedes ``snippet.data[start]`` in the code, not counting those inside
    comments (``comments``: spans in ``snippet.data``, with what line comments swallowed), inside
    string literals, after a backslash (a line continuation), or in the white space before the code.
    String literals are looked up (one query) only when another line break precedes."""
    data = snippet.data
    first = _NON_SPACE.search(data).start()  # (there is a comment)
    breaks = []
    at = data.find(b"\n", first, start)
    while at != -1:
        if not _inside(at, comments) and not data.endswith((b"\\", b"\\\r"), 0, at):
            breaks.append(at)
        at = data.find(b"\n", at + 1, start)
    if not breaks:
        return False
    strings = _string_spans(snippet, spec)
    return not all(_inside(at, strings) for at in breaks)


def _inside(at: int, spans: Iterable[tuple[int, int]]) -> bool:
    return any(low <= at < high for low, high in spans)


def _breaks_in(data: bytes, spans: Iterable[tuple[int, int]], low: int, high: int) -> int:
    """Line breaks of ``data[low:high]`` inside the non-overlapping ``spans``."""
    return sum(data.count(b"\n", max(s, low), min(e, high)) for s, e in spans if s < high and e > low)


def _string_spans(snippet: Snippet, spec: LanguageSpec) -> list[tuple[int, int]]:
    """Byte spans, in ``snippet.data``, of the snippet's outermost string literals."""
    query = " ".join(f"({kind}) @s" for kind in sorted(spec.string_types))
    low, high = snippet.offset, snippet.end
    return [
        (max(n.start_byte, low) - low, min(n.end_byte, high) - low)
        for n in captured(spec.name, query, snippet.tree.root_node)
        if n.end_byte > low and n.start_byte < high
    ]


def _swallowed(data: bytes, start: int, end: int, language: str) -> tuple[int, int] | None:
    """For a line comment at ``data[start:end]`` that holds the opener of a block comment (Python: of a
    triple-quoted string) it does not close, the rest of what it swallowed: from its end to the
    closer (or the end of the code). In flattened code the line break that ends such a comment may be
    one inside that block comment or string, not the end of its line. None for any other comment."""
    if language == "python":
        for quote in (b'"""', b"'''"):
            if data.count(quote, start, end) % 2 == 1:
                close = data.find(quote, end)
                return end, len(data) if close == -1 else close + 3
        return None
    if not language_spec(language).block_comments or data.startswith(_BLOCK_OPENERS, start):
        return None
    opener = data.rfind(b"/*", start + 1, end)
    if opener == -1 or data.find(b"*/", opener + 2, end) != -1:
        return None
    close = data.find(b"*/", end)
    return end, len(data) if close == -1 else close + 2


def _kept_spans(snippet: Snippet, spec: LanguageSpec, spans: list[tuple[int, int]]) -> set[int]:
    """Indices of the comment ``spans`` (``_comment_spans``) whose end cannot be told: line comments
    that swallow an opener (``_swallowed``), and the last one if it is undelimited, the text they
    swallowed counted as comment."""
    data = snippet.data
    kept: set[int] = set()
    swallowed: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(spans):
        rest = _swallowed(data, start, end, spec.name)
        if rest is not None and not _broken_before(snippet, spec, start, spans + swallowed):
            kept.add(i)
            swallowed.append(rest)
    if spans and _undelimited(snippet, spec, *spans[-1], spans + swallowed):  # only the last can run to the end
        kept.add(len(spans) - 1)
    return kept


def _python_kept(snippet: Snippet, found: Sequence[Node]) -> list[Node]:
    """The comments of a Python parse (``found``: comment nodes and docstring owners, any order) whose
    end cannot be told: those that swallow a triple-quoted string's opener, and the last if it is
    undelimited (looked for only when the last line holds a ``#``)."""
    data = snippet.data
    spec = language_spec("python")
    comments = [node for node in found if node.type == "comment"]
    kept: list[Node] = []
    swallowed: list[tuple[int, int]] = []
    spans: list[tuple[int, int]] = []  # built on first need (most code needs none)
    for node in comments:
        rest = _swallowed(data, node.start_byte, node.end_byte, "python")
        if rest is not None:
            spans = spans or [(other.start_byte, other.end_byte) for other in comments]
            if not _broken_before(snippet, spec, node.start_byte, spans + swallowed):
                kept.append(node)
                swallowed.append(rest)
    end = len(data)
    while end and data[end - 1] in _WHITE:
        end -= 1
    if not comments or data.find(b"#", data.rfind(b"\n", 0, end) + 1, end) == -1:
        return kept
    last = max(comments, key=lambda node: node.start_byte)
    spans = spans or [(other.start_byte, other.end_byte) for other in comments]
    if _undelimited(snippet, spec, last.start_byte, last.end_byte, spans + swallowed):
        kept.append(last)
    return kept


# Cheap tests that code may hold a comment whose end cannot be told (``has_undelimited_comment``).
_SWALLOWED_BLOCK = re.compile(r"(?://|#)[^\n]*/\*")
_SWALLOWED_TRIPLE_QUOTE = re.compile(r"#[^\n]*(?:\"\"\"|''')")


def has_undelimited_comment(code: str, language: str, snippet: Snippet | None = None) -> bool:
    """Whether ``code`` holds a line comment whose end cannot be told, which comment removal keeps
    (module docstring): an undelimited one, or one that swallows the opener of a block comment (Python:
    of a triple-quoted string). Parses (unless given ``snippet``, its ``parse_snippet``) only code whose
    last line holds a line-comment marker or where a marker precedes such an opener on a line."""
    code_end = len(code.rstrip())
    last_line = code[code.rfind("\n", 0, code_end) + 1 : code_end]
    spec = language_spec(language)
    if not any(marker in last_line for marker in spec.line_comment_markers):
        if language == "python":
            swallowing = _SWALLOWED_TRIPLE_QUOTE.search(code)
        else:
            swallowing = spec.block_comments and _SWALLOWED_BLOCK.search(code)
        if not swallowing:
            return False
    snippet = snippet if snippet is not None else parse_snippet(code, language)
    if language == "python":
        found = [node for node, _ in get_query("python", _PY_COMMENT_QUERY).captures(snippet.tree.root_node)]
        return bool(_python_kept(snippet, found))
    spans = _comment_spans(snippet, comment_nodes(snippet.tree.root_node, spec.comment_types, language))
    return bool(_kept_spans(snippet, spec, spans))


@dataclass(frozen=True)
class CodeLayout:
    """How a snippet's code sits on lines (``code_layout``).

    ``one_line``: no line break outside comments (after stripping the white space around the code).
    ``flattened``: one line that holds several statements or does not parse, or code with an
    undelimited comment -- code whose line breaks were most likely replaced by spaces (a one-liner
    written with ``;`` counts too: it has no line structure either).
    ``undelimited_comment``: it holds a line comment whose end cannot be told, which comment removal
    keeps (``has_undelimited_comment``, module docstring); such code is ``flattened`` even where
    line breaks inside string literals or block comments make it not ``one_line``.
    """

    one_line: bool = False
    flattened: bool = False
    undelimited_comment: bool = False


_MULTI_LINE = CodeLayout()


def code_layout(code: str, language: str) -> CodeLayout:
    """The ``CodeLayout`` of ``code``. Code with a line break outside block comments is told without
    parsing (the usual case) unless its last line holds a line-comment marker; one-line code is
    parsed once."""
    data = code.encode("utf-8")
    core = data.strip()
    spec = language_spec(language)
    if b"\n" in core and (
        not spec.block_comments or b"/*" not in core or b"\n" in _BLOCK_COMMENT.sub(b"", core)
    ):  # several lines (``#`` comments end at line breaks, so they never hold one)
        if has_undelimited_comment(code, language):  # breaks only in strings, or a swallowed opener
            return CodeLayout(flattened=True, undelimited_comment=True)
        return _MULTI_LINE
    snippet = parse_snippet(data, language)
    root = snippet.tree.root_node
    spans = _comment_spans(snippet, comment_nodes(root, spec.comment_types, language))
    first, last = len(data) - len(data.lstrip()), len(data.rstrip())
    if data.count(b"\n", first, last) > _breaks_in(data, spans, first, last):
        return _MULTI_LINE
    undelimited = has_undelimited_comment(code, language, snippet)
    flattened = undelimited or root.has_error or _several_statements(snippet, spec.statement_lists, spec)
    return CodeLayout(one_line=True, flattened=flattened, undelimited_comment=undelimited)


def _several_statements(snippet: Snippet, lists: frozenset[str], spec: LanguageSpec) -> bool:
    """Whether a statement list of the parse holds two statements or more of the snippet (the
    parsing wrapper's own nodes and comments left out)."""
    low, high = snippet.offset, snippet.end
    stack = [snippet.tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in lists:
            statements = 0
            for i in range(node.named_child_count):
                child = node.named_child(i)
                if (
                    child.type not in spec.comment_types
                    and child.type not in _NOT_STATEMENTS
                    and child.start_byte >= low
                    and child.end_byte <= high
                    and child.end_byte > child.start_byte
                ):
                    statements += 1
            if statements > 1:
                return True
        stack.extend(node.named_children)
    return False


def _comment_span_edit(data: bytes, start: int, end: int, spec: LanguageSpec) -> tuple[int, int, bytes]:
    """The edit that removes the comment(s) at data[start:end].

    - alone on its lines: the lines go (with their line break);
    - code before it only (a trailing comment): the comment and the spaces before it go;
    - code after it only: the comment and the spaces after it go, the indentation stays;
    - code on both sides: the comment and the spaces around it become one space, or nothing next to
      a bracket or separator, so tokens never join; a multi-line block comment becomes a line break
      where the grammar treats it as one (Go, JavaScript), so no statement runs into the next.
    """
    line_start, line_end = _line_of(data, start, end)
    eol = data.find(b"\n", end)
    eol = len(data) if eol == -1 else eol
    code_before = data[line_start:start].strip() != b""
    code_after = data[end:eol].strip() != b""
    if not code_before and not code_after:
        return line_start, line_end, b""
    left = start
    while left > line_start and data[left - 1 : left] in (b" ", b"\t"):
        left -= 1
    right = end
    while right < eol and data[right : right + 1] in (b" ", b"\t"):
        right += 1
    if not code_after:
        return left, end, b""
    if not code_before:
        return start, right, b""
    if spec.block_comment_is_newline and b"\n" in data[start:end]:
        return left, right, b"\n"
    after_bracket = data[left - 1] in _NO_SPACE_AFTER  # left > line_start: there is code before
    before_bracket = data[right] in _NO_SPACE_BEFORE  # right < eol: there is code after
    return left, right, b"" if after_bracket or before_bracket else b" "


def _merge(edits: list[Edit]) -> list[Edit]:
    """Sort edits; nested or overlapping ones merge (a comment inside a removed docstring line range:
    the outer edit wins)."""
    merged: list[Edit] = []
    for start, end, repl in sorted(edits):
        if merged and start < merged[-1][1]:
            prev_start, prev_end, prev_repl = merged[-1]
            merged[-1] = (prev_start, max(prev_end, end), prev_repl)
            continue
        merged.append((start, end, repl))
    return merged


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    """Apply sorted, non-overlapping (start, end, replacement) edits (as ``comment_edits`` returns them)."""
    out = bytearray()
    cursor = 0
    for start, end, repl in edits:
        out += data[cursor:start]
        out += repl
        cursor = end
    out += data[cursor:]
    return bytes(out)
