"""Extraction of documented functions from source files, following the CodeSearchNet method.

See SPEC "Building a corpus from source": query = first paragraph of the documentation; drop
short queries, short functions, test functions, constructors and standard extension methods.
Deduplication and splitting work on the whole corpus and live in ``csbench.datasets.local``.

``extract_functions(source, language)`` covers every registered language; each language's
conventions and its definition finder (``Language.definitions``: see its docstring for what it covers
and what not) are in its module ``csbench.code.languages.<name>``; the shared engine is here.
"""

from __future__ import annotations

import ast
import bisect
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from csbench.code import languages
from csbench.code.comments import comment_nodes, parse_snippet, python_docstring_node, remove_comments
from csbench.code.languages import C_BLOCK_LINE, LanguageSpec, language_spec
from csbench.code.languages.base import Definition
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
    language: str = "python"


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


def _dedent_definition(data: bytes, node: Node, string_types: frozenset[str] = frozenset({"string"})) -> str:
    """The node's text with the indentation of its first line removed from every line of code;
    lines inside multi-line strings (``string_types``) are left exactly as in the file (their text is data)."""
    line_start = data.rfind(b"\n", 0, node.start_byte) + 1
    prefix = data[line_start : node.start_byte]
    text = data[node.start_byte : node.end_byte].decode("utf-8")
    if not prefix or prefix.strip():
        return text
    in_string: set[int] = set()
    for item in walk(node):
        if item.type in string_types and item.end_point[0] > item.start_point[0]:
            in_string.update(range(item.start_point[0] + 1, item.end_point[0] + 1))
    indent = prefix.decode("utf-8")
    first_row = node.start_point[0]
    lines = text.split("\n")
    return "\n".join(
        line[len(indent) :] if row and first_row + row not in in_string and line.startswith(indent) else line
        for row, line in enumerate(lines)
    )


def python_functions(source: str) -> list[Function]:
    """Every documented function and method in a Python source file (unfiltered)."""
    data = source.encode("utf-8")
    root = parse(data, "python").root_node
    functions = []
    for node, qualname in language_spec("python").definitions(root):
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
    spec = language_spec(function.language if function.language in languages.LANGUAGES else "python")
    short_name = function.func_name.rsplit(".", 1)[-1] if spec.qualified_names else function.func_name
    if "test" in short_name.lower():
        return "test_function"
    if _is_special(function.func_name, short_name, spec):
        return "constructor_or_special_method"
    if len(docstring_tokens(function.query)) < settings.min_query_tokens:
        return "short_query"
    code_lines = [ln for ln in function.code_no_comment.splitlines() if ln.strip()]
    if len(code_lines) < settings.min_code_lines:
        return "short_code"
    return None


def _is_special(func_name: str, short_name: str, spec: LanguageSpec) -> bool:
    """Constructors and standard extension methods (Python dunders, Java ``toString``, Go ``String``, ...)."""
    parts = func_name.split(".")
    if spec.constructor_is_type_name and len(parts) >= 2 and parts[-1] == parts[-2]:
        return True
    if spec.special_only_methods and len(parts) < 2:
        return False
    if short_name in spec.special_names:
        return True
    return spec.special_pattern is not None and spec.special_pattern.match(short_name) is not None


def normalized_code_key(code_no_comment: str, language: str) -> str:
    """Token sequence of comment-free code, white space and layout ignored, for near-duplicate
    detection: two functions that differ only in comments or formatting share this key."""
    if language == "python":
        root = parse(code_no_comment, language).root_node
        return " ".join(token.text.decode("utf-8", "replace") for token in _atoms(root))
    spec = language_spec(language)
    snippet = parse_snippet(code_no_comment, language)
    tokens = []
    for token in _atoms(snippet.tree.root_node, spec.comment_types, spec.string_types):
        if token.start_byte < snippet.offset or token.end_byte > snippet.end:
            continue  # part of the wrapper a lone method is parsed in
        text = token.text.decode("utf-8", "replace")
        if text.strip():  # Go's and R's line breaks are tokens: layout, not code
            tokens.append(text)
    return " ".join(tokens)


def _atoms(
    root: Node,
    comment_types: frozenset[str] = frozenset({"comment"}),
    string_types: frozenset[str] = frozenset({"string"}),
) -> Iterator[Node]:
    """Leaves in document order, with string literals as single tokens (their text is not all in
    leaves: escape sequences split it) and comments left out."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in comment_types:
            continue
        if node.child_count == 0 or node.type in string_types:
            yield node
        else:
            stack.extend(reversed(node.children))


# --------------------------------------------------------------------------- other languages

_BLOCK_TAG = re.compile(r"^@\w")  # @param, @return, @throws, @export ... start the tag section
_HTML_PARAGRAPH = re.compile(r"^<p\b", re.IGNORECASE)  # Javadoc's paragraph mark
_DECORATION = re.compile(r"^[\s*/=#~_+-]*$")  # blank, or a rule of ****, ----, ====
_LEADING_TAG = re.compile(r"^@(title|description|summary|brief)\s+")  # these tags introduce the text


def clean_doc_comments(comments: list[bytes], spec: LanguageSpec) -> str:
    """Documentation text of doc comments, comment markers (``//``, ``/** */``, ``*``, ``#``, ``#'``)
    removed, tool directives dropped, common indentation removed (as ``inspect.cleandoc``)."""
    lines: list[str] = []
    for raw in comments:
        text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
        if text.startswith("/*"):
            body = text[3:] if text.startswith("/**") else text[2:]
            body = body[:-2].rstrip("*") if body.endswith("*/") else body  # "**/" closes some blocks
            for line in body.split("\n"):
                line = C_BLOCK_LINE.sub("", line, count=1)
                lines.append("" if _DECORATION.match(line) else line)
            continue
        for line in text.split("\n"):
            if spec.doc_directive is not None and spec.doc_directive.match(line):
                continue
            line = spec.doc_line_marker.sub("", line, count=1)
            lines.append("" if _DECORATION.match(line) else line)
    return inspect.cleandoc("\n".join(lines)).strip()


def doc_summary(docstring: str, html_paragraphs: bool = False) -> str:
    """The first paragraph of cleaned documentation, on one line: it ends at a blank line, at a block
    tag (``@param``, ``@return``, ... at the start of a line) and, with ``html_paragraphs``, at a
    line starting with ``<p>``. A leading ``@title`` / ``@description`` tag introduces the text."""
    paragraph: list[str] = []
    for line in docstring.split("\n"):
        stripped = line.strip()
        if not paragraph:
            stripped = _LEADING_TAG.sub("", stripped)
            if not stripped:
                continue
        elif not stripped or (html_paragraphs and _HTML_PARAGRAPH.match(stripped)):
            break
        if _BLOCK_TAG.match(stripped):
            break
        paragraph.append(stripped)
    return " ".join(" ".join(paragraph).split())


def _doc_comment_nodes(data: bytes, anchor: Node, comments: list[Node], ends: list[int], spec: LanguageSpec):
    """The documentation comments directly above ``anchor``: no blank line and no code between.

    ``doc_block`` languages: the one ``/** ... */`` comment just above. ``line_block`` languages: the
    run of comments just above, each alone on its line(s), consecutive lines without a blank line.
    """
    found: list[Node] = []
    prefixes = tuple(prefix.encode("utf-8") for prefix in spec.doc_prefixes)
    position = anchor.start_byte
    index = bisect.bisect_right(ends, position) - 1
    while index >= 0:
        comment = comments[index]
        end = comment.end_byte
        while end > comment.start_byte and data[end - 1 : end] in (b"\r", b"\n"):
            end -= 1
        gap = data[end:position]
        if gap.strip() or gap.count(b"\n") > 1:
            break
        line_start = data.rfind(b"\n", 0, comment.start_byte) + 1
        if data[line_start : comment.start_byte].strip() or not comment.text.startswith(prefixes):
            break
        found.append(comment)
        if spec.doc_style == "doc_block":
            break
        position = comment.start_byte
        index -= 1
    found.reverse()
    return found


def extract_functions(source: str, language: str) -> list[Function]:
    """Every documented function and method of a source file in ``language`` (unfiltered).

    Python: docstrings (``python_functions``). Other languages: the doc comment directly above the
    definition; ``code`` is the definition without that comment, dedented; functions whose
    documentation has no text before its tags (e.g. only ``@private``) count as undocumented.
    """
    if language == "python":
        return python_functions(source)
    spec = language_spec(language)
    data = source.encode("utf-8")
    root = parse(data, language).root_node
    comments = comment_nodes(root, spec.comment_types, spec.name)
    ends = [node.end_byte for node in comments]
    functions = []
    for anchor, qualname in spec.definitions(root):
        doc_nodes = _doc_comment_nodes(data, anchor, comments, ends, spec)
        if not doc_nodes:
            continue
        docstring = clean_doc_comments([node.text for node in doc_nodes], spec)
        query = doc_summary(docstring, html_paragraphs=spec.doc_style == "doc_block")
        if not query:
            continue
        code = _dedent_definition(data, anchor, spec.string_types)
        functions.append(
            Function(
                func_name=qualname,
                code=code,
                code_no_comment=remove_comments(code, language),
                docstring=docstring,
                query=query,
                start_line=anchor.start_point[0] + 1,
                end_line=anchor.end_point[0] + 1,
                language=language,
            )
        )
    return functions


# ------------------------------------------------------------------ shared by the definition finders


def node_text(node: Node | None) -> str:
    """The text of ``node`` ("" for none)."""
    return "" if node is None else node.text.decode("utf-8", "replace")


def in_document_order(found: list[Definition]) -> list[Definition]:
    """``found`` sorted by position (stable)."""
    return sorted(found, key=lambda item: item[0].start_byte)


# what ``walk_definitions``' ``visit`` says of a child: walk into it (a definition: its name; skip: None)
WALK_INTO = True


def walk_definitions(
    root: Node, types: frozenset[str], visit: Callable[[Node, tuple[str, ...]], str | bool | None]
) -> list[Definition]:
    """The definitions below ``root`` in document order, found by a walk that keeps the qualified scope:
    a child whose type is in ``types`` (classes, interfaces, ...) with a name and a body opens the
    scope ``(*scope, name)`` in its body; of any other child, ``visit(child, scope)`` says whether it
    is a definition (its qualified name, a ``str``), to be walked into (``WALK_INTO``) or skipped."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in node.children:
            if child.type in types:
                name, body = child.child_by_field_name("name"), child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*scope, node_text(name))))
                continue
            what = visit(child, scope)
            if isinstance(what, str):
                found.append((child, what))
            elif what is WALK_INTO:
                stack.append((child, scope))
    return in_document_order(found)
