"""Removal of comments and docstrings (the ``no_comment`` transformation) with tree-sitter."""

from __future__ import annotations

import re

from tree_sitter import Node

from csbench.code.parsing import parse, walk

# Python nodes whose body may open with a docstring.
_PY_DOC_OWNERS = {"module", "function_definition", "class_definition"}


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
    body = owner if owner.type == "module" else owner.child_by_field_name("body")
    if body is None:
        return None
    for child in body.named_children:
        if child.type == "comment":
            continue
        is_expression = child.type == "expression_statement" and child.named_child_count == 1
        return child if is_expression and is_docstring_literal(child.named_children[0]) else None
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


def _docstring_edit(data: bytes, owner: Node, doc: Node) -> tuple[int, int, bytes]:
    line_start, line_end = _line_of(data, doc.start_byte, doc.end_byte)
    before = data[line_start : doc.start_byte]
    after = data[doc.end_byte : line_end]
    body = doc.parent
    only_statement = body is not None and all(c.type == "comment" or c == doc for c in body.named_children)
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


def remove_comments(code: str, language: str) -> str:
    """Return ``code`` without comments and docstrings; everything else is left as it was.

    A line that held only a comment or docstring is removed; a Python body that held only a
    docstring gets ``pass`` so the code still parses.
    """
    if language != "python":
        raise NotImplementedError(f"comment removal is implemented for python only, not {language!r}")
    data = code.encode("utf-8")
    root = parse(data, language).root_node
    edits: list[tuple[int, int, bytes]] = []
    for node in walk(root):
        if node.type == "comment":
            edits.append(_comment_edit(data, node))
        elif node.type in _PY_DOC_OWNERS:
            doc = python_docstring_node(node)
            if doc is not None:
                edits.append(_docstring_edit(data, node, doc))
    return _apply(data, edits).decode("utf-8")


def _apply(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Apply non-overlapping (start, end, replacement) edits; nested or overlapping ones merge."""
    merged: list[tuple[int, int, bytes]] = []
    for start, end, repl in sorted(edits):
        if merged and start < merged[-1][1]:
            prev_start, prev_end, prev_repl = merged[-1]
            # A comment inside a removed docstring line range: the outer edit wins.
            merged[-1] = (prev_start, max(prev_end, end), prev_repl)
            continue
        merged.append((start, end, repl))
    out = bytearray()
    cursor = 0
    for start, end, repl in merged:
        out += data[cursor:start]
        out += repl
        cursor = end
    out += data[cursor:]
    return bytes(out)
