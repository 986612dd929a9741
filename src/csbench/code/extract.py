"""Extraction of documented functions from source files, following the CodeSearchNet method.

See SPEC "Building a corpus from source": query = first paragraph of the documentation; drop
short queries, short functions, test functions, constructors and standard extension methods.
Deduplication and splitting work on the whole corpus and live in ``csbench.datasets.local``.

``extract_functions(source, language)`` covers python, go, java, javascript, php, ruby and r; each
language's conventions are in ``csbench.code.languages``, its definitions are found by ``_DEFINITIONS``
below (see each finder's docstring for what it covers and what not).
"""

from __future__ import annotations

import ast
import bisect
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node

from csbench.code.comments import comment_nodes, parse_snippet, python_docstring_node, remove_comments
from csbench.code.languages import C_BLOCK_LINE, SPECS, LanguageSpec, language_spec
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
    spec = SPECS.get(function.language, SPECS["python"])
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
    for anchor, qualname in _DEFINITIONS[language](root):
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


Definition = tuple[Node, str]  # (the node the doc comment sits above and whose text is the code, name)


def _text(node: Node | None) -> str:
    return "" if node is None else node.text.decode("utf-8", "replace")


def _sorted(found: list[Definition]) -> list[Definition]:
    return sorted(found, key=lambda item: item[0].start_byte)


def _go_definitions(root: Node) -> list[Definition]:
    """Top-level ``func`` declarations, and methods as ``Type.Method`` (the receiver's type name,
    pointer and type parameters dropped). Function literals are not definitions."""
    found = []
    for child in root.children:
        name = child.child_by_field_name("name")
        if name is None:
            continue
        if child.type == "function_declaration":
            found.append((child, _text(name)))
        elif child.type == "method_declaration":
            receiver = child.child_by_field_name("receiver")
            type_name = next((n for n in walk(receiver) if n.type == "type_identifier"), None) if receiver else None
            qualname = f"{_text(type_name)}.{_text(name)}" if type_name is not None else _text(name)
            found.append((child, qualname))
    return found


_JAVA_TYPES = {
    "class_declaration",
    "interface_declaration",
    "enum_declaration",
    "record_declaration",
    "annotation_type_declaration",
}
_JAVA_BODIES = {"class_body", "interface_body", "enum_body", "enum_body_declarations", "annotation_type_body"}
_JAVA_METHODS = {"method_declaration", "constructor_declaration", "compact_constructor_declaration"}


def _java_definitions(root: Node) -> list[Definition]:
    """Methods and constructors with a body, as ``Class.method`` (``Outer.Inner.method`` for nested
    types), in classes, interfaces (default / static methods), enums, records and annotation types at
    any nesting. Not covered: methods of anonymous and local classes (inside method bodies or field
    initialisers) and of enum constants' bodies."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in node.children:
            if child.type in _JAVA_TYPES:
                name, body = child.child_by_field_name("name"), child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*scope, _text(name))))
            elif child.type in _JAVA_BODIES:
                stack.append((child, scope))
            elif child.type in _JAVA_METHODS and child.child_by_field_name("body") is not None:
                name = child.child_by_field_name("name")
                short = _text(name) if name is not None else (scope[-1] if scope else "")
                if short:
                    found.append((child, ".".join((*scope, short))))
    return _sorted(found)


_JS_FUNCTIONS = {"function", "function_expression", "arrow_function", "generator_function"}
_JS_DECLARATIONS = {"function_declaration", "generator_function_declaration"}


def _js_name(node: Node | None) -> str:
    text = _text(node)
    return text.strip("'\"") if node is not None and node.type == "string" else "".join(text.split())


def _javascript_definitions(root: Node) -> list[Definition]:
    """Covered: function declarations (also ``export``-ed), class methods (``Class.method``),
    ``const / let / var f = function / arrow / generator`` (one declarator), assignments
    ``a.b.c = function`` (lodash / express style; the name is the assigned path), and methods and
    function-valued properties of object literals (``obj.key`` when the object is assigned to a
    name). Definitions nested in function bodies are found too (modules wrapped in an IIFE, like
    lodash.js), with names restarting at the function boundary. Not covered: class fields holding
    arrow functions, functions passed as arguments, ``export default`` of an anonymous function."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]

    def value_scope(value: Node | None, anchor: Node, name: str, scope: tuple[str, ...]) -> None:
        if value is None:
            return
        if value.type in _JS_FUNCTIONS:
            found.append((anchor, ".".join((*scope, name))))
            stack.append((value, ()))
        elif value.type in ("object", "class"):
            stack.append((value, (*scope, name)))
        else:
            stack.append((value, scope))

    while stack:
        node, scope = stack.pop()
        for child in node.children:
            anchor, target = child, child
            if child.type == "export_statement":
                declaration = child.child_by_field_name("declaration")
                if declaration is None:
                    stack.append((child, scope))
                    continue
                target = declaration
            kind = target.type
            if kind in _JS_DECLARATIONS or kind == "method_definition":
                name = target.child_by_field_name("name")
                if name is not None:
                    found.append((anchor, ".".join((*scope, _js_name(name)))))
                stack.append((target, ()))
            elif kind in ("class_declaration", "class"):
                name = target.child_by_field_name("name")
                stack.append((target, (*scope, _text(name)) if name is not None else scope))
            elif kind in ("lexical_declaration", "variable_declaration"):
                declarators = [c for c in target.named_children if c.type == "variable_declarator"]
                if len(declarators) == 1:
                    declarator = declarators[0]
                    name = _text(declarator.child_by_field_name("name"))
                    value_scope(declarator.child_by_field_name("value"), anchor, name, scope)
                else:
                    stack.append((target, scope))
            elif kind == "expression_statement" and target.named_child_count == 1:
                expression = target.named_children[0]
                if expression.type == "assignment_expression":
                    left = expression.child_by_field_name("left")
                    value_scope(expression.child_by_field_name("right"), anchor, _js_name(left), ())
                else:
                    stack.append((target, scope))
            elif kind == "pair":
                name = _js_name(target.child_by_field_name("key"))
                value_scope(target.child_by_field_name("value"), anchor, name, scope)
            elif kind in _JS_FUNCTIONS:
                stack.append((target, ()))
            else:
                stack.append((target, scope))
    return _sorted(found)


_PHP_TYPES = {"class_declaration", "interface_declaration", "trait_declaration", "enum_declaration"}
_PHP_OPAQUE = {"anonymous_function_creation_expression", "arrow_function", "object_creation_expression"}


def _php_definitions(root: Node) -> list[Definition]:
    """Functions (also inside namespaces and ``if (!function_exists(...))`` blocks) and methods with a
    body of classes, interfaces, traits and enums, as ``Class.method``. Not covered: closures, arrow
    functions, anonymous classes, functions declared inside function bodies."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in node.children:
            if child.type in _PHP_TYPES:
                name, body = child.child_by_field_name("name"), child.child_by_field_name("body")
                if name is not None and body is not None:
                    stack.append((body, (*scope, _text(name))))
            elif child.type in ("function_definition", "method_declaration"):
                name = child.child_by_field_name("name")
                if name is not None and child.child_by_field_name("body") is not None:
                    found.append((child, ".".join((*scope, _text(name)))))
            elif child.type not in _PHP_OPAQUE:
                stack.append((child, scope))
    return _sorted(found)


def _ruby_definitions(root: Node) -> list[Definition]:
    """``def`` methods in classes and modules (``Module.Class.method``, ``::`` written ``.``),
    ``def self.x`` / ``class << self`` singleton methods (``Class.x``), top-level methods, and
    methods defined in blocks or conditionals at class level. Not covered: ``define_method``, methods
    nested in method bodies, ``attr_*`` accessors."""
    found: list[Definition] = []
    stack: list[tuple[Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, scope = stack.pop()
        for child in node.children:
            if child.type in ("class", "module"):
                name = _text(child.child_by_field_name("name")).replace("::", ".")
                stack.append((child, (*scope, name) if name else scope))
            elif child.type == "method":
                found.append((child, ".".join((*scope, _text(child.child_by_field_name("name"))))))
            elif child.type == "singleton_method":
                owner = child.child_by_field_name("object")
                prefix = scope if owner is None or owner.type == "self" else (_text(owner).replace("::", "."),)
                found.append((child, ".".join((*prefix, _text(child.child_by_field_name("name"))))))
            elif child.type != "comment":
                stack.append((child, scope))
    return _sorted(found)


_R_ASSIGNMENTS = {"left_assignment", "equals_assignment", "super_assignment"}


def _r_definitions(root: Node) -> list[Definition]:
    """``name <- function(...)``, ``name = function(...)`` and ``name <<- function(...)`` outside
    function bodies (top level, or in ``if`` / ``local`` blocks); the name as written, backticks and
    quotes dropped (``print.foo`` is one name, not a method ``foo``). Not covered: ``function(...) -> name``,
    functions in lists (``list(f = function...)``), ``setMethod`` / ``R6Class`` methods."""
    found: list[Definition] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.type in _R_ASSIGNMENTS:
                value = child.child_by_field_name("value")
                if value is not None and value.type == "function_definition":
                    name = _text(child.child_by_field_name("name")).strip("`'\"")
                    if name:
                        found.append((child, name))
                    continue
            if child.type != "function_definition":
                stack.append(child)
    return _sorted(found)


_DEFINITIONS: dict[str, Callable[[Node], list[Definition]]] = {
    "go": _go_definitions,
    "java": _java_definitions,
    "javascript": _javascript_definitions,
    "php": _php_definitions,
    "ruby": _ruby_definitions,
    "r": _r_definitions,
}
