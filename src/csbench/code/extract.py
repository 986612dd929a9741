"""Extraction of documented functions from source files, following the CodeSearchNet method.

See SPEC "Building a corpus from source": query = first paragraph of the documentation; drop
short queries, short functions, test functions, constructors and standard extension methods.
Deduplication and splitting work on the whole corpus and live in ``csbench.datasets.local``.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from csbench.code.comments import python_docstring_node, remove_comments
from csbench.code.parsing import parse, walk
from csbench.code.tokens import docstring_tokens

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_DUNDER = re.compile(r"^__\w+__$")


@dataclass(frozen=True)
class Function:
    """A documented function found in a source file, before corpus-level filtering."""

    func_name: str  # qualified: Class.method
    code: str  # the definition, dedented, as in the file
    code_no_comment: str
    docstring: str  # cleaned documentation
    query: str  # first paragraph of the documentation
    start_line: int  # 1-based
    end_line: int


@dataclass(frozen=True)
class FilterSettings:
    min_query_tokens: int = 3
    min_code_lines: int = 3


def first_paragraph(docstring: str) -> str:
    """The first paragraph of cleaned documentation, on one line."""
    paragraph = _PARAGRAPH_BREAK.split(docstring.strip(), maxsplit=1)[0]
    return " ".join(paragraph.split())


def python_docstring_text(string_node: Node) -> str | None:
    """The value of a Python docstring literal, cleaned as ``inspect.cleandoc`` does."""
    try:
        value = ast.literal_eval(string_node.text.decode("utf-8"))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None  # f-strings and the like are not docstrings
    if not isinstance(value, str):
        return None
    return inspect.cleandoc(value)


def _dedent_definition(data: bytes, node: Node) -> str:
    """The node's text with the indentation of its first line removed from every line of code;
    lines inside multi-line strings are left exactly as in the file (their text is data)."""
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    prefix = data[line_start : node.start_byte]
    text = data[node.start_byte : node.end_byte].decode("utf-8")
    if not prefix or prefix.strip():
        return text
    in_string: set[int] = set()
    for item in walk(node):
        if item.type == "string" and item.end_point[0] > item.start_point[0]:
            in_string.update(range(item.start_point[0] + 1, item.end_point[0] + 1))
    indent = prefix.decode("utf-8")
    first_row = node.start_point[0]
    lines = text.split("\n")
    return "\n".join(
        line[len(indent) :] if row and first_row + row not in in_string and line.startswith(indent) else line
        for row, line in enumerate(lines)
    )


def _python_definitions(root: Node) -> list[tuple[Node, str]]:
    """Top-level functions and methods (at any class depth) with qualified names; nested
    functions are part of their enclosing function and not listed."""
    found: list[tuple[Node, str]] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in reversed(node.children):
            if child.type == "function_definition":
                name = child.child_by_field_name("name")
                if name is not None:
                    found.append((child, ".".join((*scope, name.text.decode("utf-8")))))
            elif child.type == "class_definition":
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*scope, name.text.decode("utf-8"))))
            elif child.type not in ("lambda", "string", "comment"):
                stack.append((child, scope))
    found.sort(key=lambda item: item[0].start_byte)
    return found


def python_functions(source: str) -> list[Function]:
    """Every documented function and method in a Python source file (unfiltered)."""
    data = source.encode("utf-8")
    root = parse(data, "python").root_node
    functions = []
    for node, qualname in _python_definitions(root):
        doc_stmt = python_docstring_node(node)
        if doc_stmt is None:
            continue
        docstring = python_docstring_text(doc_stmt.named_children[0])
        if not docstring:
            continue
        code = _dedent_definition(data, node)
        functions.append(
            Function(
                func_name=qualname,
                code=code,
                code_no_comment=remove_comments(code, "python"),
                docstring=docstring,
                query=first_paragraph(docstring),
                start_line=node.start_point[0] + 1,
                end_line=node.end_point[0] + 1,
            )
        )
    return functions


def rejection_reason(function: Function, settings: FilterSettings) -> str | None:
    """Why CodeSearchNet's filters drop ``function``, or None if it is kept."""
    short_name = function.func_name.rsplit(".", 1)[-1]
    if "test" in short_name.lower():
        return "test_function"
    if _DUNDER.match(short_name):
        return "constructor_or_special_method"
    if len(docstring_tokens(function.query)) < settings.min_query_tokens:
        return "short_query"
    code_lines = [ln for ln in function.code_no_comment.splitlines() if ln.strip()]
    if len(code_lines) < settings.min_code_lines:
        return "short_code"
    return None


def normalized_code_key(code_no_comment: str, language: str) -> str:
    """Token sequence of comment-free code, white space and layout ignored, for near-duplicate
    detection: two functions that differ only in comments or formatting share this key."""
    root = parse(code_no_comment, language).root_node
    return " ".join(token.text.decode("utf-8", "replace") for token in _atoms(root))


def _atoms(root: Node) -> Iterator[Node]:
    """Leaves in document order, with string literals as single tokens (their text is not all in
    leaves: escape sequences split it) and comments left out."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "comment":
            continue
        if node.child_count == 0 or node.type == "string":
            yield node
        else:
            stack.extend(reversed(node.children))
