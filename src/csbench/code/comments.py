"""Removal of comments and docstrings (the ``no_comment`` transformation) with tree-sitter."""

from __future__ import annotations

import re
from collections.abc import Sequence
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
    prefix = re.match(rb"[A-Za-z]*", node.text).group().lower()
    return b"b" not in prefix and b"f" not in prefix


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
    semicolon = re.match(rb"[ \t]*;[ \t]*", after)
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
    edits: list[Edit] = []
    for node in found:
        if node.type == "comment":
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


def _comment_edits_other(snippet: Snippet, spec: LanguageSpec, nodes: Sequence[Node]) -> list[Edit]:
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
        if spans and data[spans[-1][1] : start].strip(_SPACE) == b"":  # comments side by side: one span
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
    return _merge([_comment_span_edit(data, start, end, spec) for start, end in spans])


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
