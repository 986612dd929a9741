"""Tree-sitter parsers for the languages csbench handles."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator

from tree_sitter import Node, Parser, Tree

LANGUAGES = ("python", "go", "java", "javascript", "php", "ruby", "r")


@functools.cache
def get_parser(language: str) -> Parser:
    """The tree-sitter parser for ``language`` from tree-sitter-languages (needs tree-sitter 0.21.3)."""
    if language not in LANGUAGES:
        raise ValueError(f"unsupported language {language!r}; supported: {', '.join(LANGUAGES)}")
    import tree_sitter_languages

    with warnings.catch_warnings():
        # tree-sitter 0.21 deprecates the Language(path, name) call tree-sitter-languages makes.
        warnings.simplefilter("ignore", FutureWarning)
        return tree_sitter_languages.get_parser(language)


def parse(code: str | bytes, language: str) -> Tree:
    data = code.encode("utf-8") if isinstance(code, str) else code
    return get_parser(language).parse(data)


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
