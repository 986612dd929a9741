"""Tokenisers shared by extraction filters, lexical models and statistics."""

from __future__ import annotations

import re

# CodeSearchNet's docstring tokeniser (github/CodeSearchNet function_parser, DOCSTRING_REGEX_TOKENIZER).
_DOCSTRING_TOKENIZER = re.compile(
    r"[^\s,'\"`.():\[\]=*;>{\}+-/\\]+|\\+|\.+|\(\)|{\}|\[\]|\(+|\)+|:+|\[+|\]+|{+|\}+|=+|\*+|;+|>+|\++|-+|/+"
)
# Words of an identifier: acronyms before a capitalised word, capitalised / lower words, digits.
_SUBTOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_WORD = re.compile(r"\w+")  # Unicode-aware: identifiers and prose may be non-ASCII


def docstring_tokens(text: str) -> list[str]:
    """Tokens of documentation text, as CodeSearchNet counted them for its length filter."""
    return _DOCSTRING_TOKENIZER.findall(text)


def subtokens(text: str) -> list[str]:
    """Lower-cased subtokens: split on punctuation and white space, then snake_case and camelCase.

    >>> subtokens("def getHTTPResponse_code(self, x2):")
    ['def', 'get', 'http', 'response', 'code', 'self', 'x', '2']
    >>> subtokens("Сортировка списка")
    ['сортировка', 'списка']
    """
    out: list[str] = []
    for word in _WORD.findall(text):
        for part in word.split("_"):
            if part.isascii():
                out.extend(piece.lower() for piece in _SUBTOKEN.findall(part))
            elif part:  # no ASCII case rules to split on: keep the word whole
                out.append(part.lower())
    return out
