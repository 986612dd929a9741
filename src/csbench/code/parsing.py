"""Tree-sitter parsers for the languages csbench handles."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable, Iterator

from tree_sitter import Node, Parser, Query, Tree

from csbench.code import languages

# the registry's names, re-exported: many modules import them from here
from csbench.code.languages import LANGUAGES as LANGUAGES


@functools.cache
def get_parser(language: str) -> Parser:
    """The tree-sitter parser for ``language`` from tree-sitter-languages (needs tree-sitter 0.21.3)."""
    if language not in languages.LANGUAGES:
        raise ValueError(f"unsupported language {language!r}; supported: {', '.join(languages.LANGUAGES)}")
    import tree_sitter_languages

    with warnings.catch_warnings():
        # tree-sitter 0.21 deprecates the Language(path, name) call tree-sitter-languages makes.
        warnings.simplefilter("ignore", FutureWarning)
        return tree_sitter_languages.get_parser(languages.language_spec(language).grammar)


def parse(code: str | bytes, language: str) -> Tree:
    data = code.encode("utf-8") if isinstance(code, str) else code
    return get_parser(language).parse(data)


@functools.cache
def get_query(language: str, source: str) -> Query:
    """A compiled tree-sitter query (captures run in C: far faster than walking nodes in Python)."""
    get_parser(language)
    import tree_sitter_languages

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return tree_sitter_languages.get_language(languages.language_spec(language).grammar).query(source)


def captures_by_name(query: Query, names: Iterable[str], node: Node) -> dict[str, list[Node]]:
    """The nodes ``query`` captures below ``node``, grouped by capture name (``names``: every name
    the query has), each list in tree-sitter's capture order."""
    found: dict[str, list[Node]] = {name: [] for name in names}
    for hit, name in query.captures(node):
        found[name].append(hit)
    return found


def captured(language: str, source: str, node: Node) -> list[Node]:
    """Nodes below ``node`` captured by the query ``source``, in document order, outermost first; a
    capture inside an earlier capture is dropped."""
    found: list[Node] = []
    for hit, _ in sorted(get_query(language, source).captures(node), key=lambda c: (c[0].start_byte, -c[0].end_byte)):
        if found and hit.end_byte <= found[-1].end_byte and hit.start_byte >= found[-1].start_byte:
            continue
        found.append(hit)
    return found


def walk(node: Node) -> Iterator[Node]:
    """All nodes below ``node`` (inclusive) in document order, iteratively."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def leaves(node: Node) -> Iterator[Node]:
    for item in walk(node):
        if item.child_count == 0:
            yield item


def has_syntax_error(code: str, language: str) -> bool:
    return parse(code, language).root_node.has_error
