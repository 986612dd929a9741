"""Removal of comments and docstrings (the ``no_comment`` transformation) with tree-sitter."""

from __future__ import annotations

from tree_sitter import Node

from csbench.code.parsing import parse, walk

# Python nodes whose body may open with a docstring.
_PY_DOC_OWNERS = {"module", "function_definition", "class_definition"}
_PY_STRINGS = {"string", "concatenated_string"}


def python_docstring_node(owner: Node) -> Node | None:
    """The docstring statement of a Python module / function / class node, if it has one."""
    body = owner if owner.type == "module" else owner.child_by_field_name("body")
    if body is None:
        return None
    for child in body.named_children:
        if child.type == "comment":
            continue
        is_string_statement = child.type == "expression_statement" and child.named_child_count == 1
        if is_string_statement and child.named_children[0].type in _PY_STRINGS:
            return child
        return None
    return None


def _line_bounds(data: bytes, start: int, end: int) -> tuple[int, int, bool]:
    """Extend [start, end) to whole lines when only whitespace surrounds it on those lines.

    Returns the new bounds and whether the span covered whole lines.
    """
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", end)
    line_end = len(data) if line_end == -1 else line_end + 1
    before = data[line_start:start]
    after = data[end:line_end]
    if before.strip() == b"" and after.strip() == b"":
        return line_start, line_end, True
    return start, end, False


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
            start, end, whole = _line_bounds(data, node.start_byte, node.end_byte)
            if not whole:  # trailing comment: drop it and the spaces before it
                start = node.start_byte
                while start > 0 and data[start - 1 : start] in (b" ", b"\t"):
                    start -= 1
            edits.append((start, end, b""))
        elif node.type in _PY_DOC_OWNERS:
            doc = python_docstring_node(node)
            if doc is None:
                continue
            start, end, whole = _line_bounds(data, doc.start_byte, doc.end_byte)
            body = doc.parent
            only_statement = body is not None and all(c.type == "comment" or c == doc for c in body.named_children)
            if whole and not (only_statement and node.type != "module"):
                edits.append((start, end, b""))
            elif whole:  # keep the body non-empty
                indent = data[start : doc.start_byte]
                newline = b"\n" if data[end - 1 : end] == b"\n" else b""
                edits.append((start, end, indent + b"pass" + newline))
            else:
                edits.append((doc.start_byte, doc.end_byte, b"pass"))
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
