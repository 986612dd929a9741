"""Tokenisers shared by extraction filters, lexical models and statistics."""

from __future__ import annotations

import re

import regex

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


# Lucene's StandardTokenizer (ElasticSearch's default ``standard`` analyzer): Unicode text segmentation
# (UAX #29 word boundaries; the ``regex`` module's WORD flag implements them), keeping the segments that
# hold a letter, a decimal digit or an emoji. Lucene never starts a word with a quote or other
# punctuation that UAX #29 would only join *between* letters (``'auto`` is ``auto``), hence _LEADING.
_WORD_BOUNDARY = regex.compile(r"\b", flags=regex.WORD | regex.V1)
_TOKEN_CHAR = regex.compile(r"[\p{Alphabetic}\p{Nd}\p{Extended_Pictographic}]")
_LEADING = regex.compile(r"^[^\w\p{Extended_Pictographic}]+")
_MAX_TOKEN_LENGTH = 255  # Lucene's StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH: longer words are split


def _lower(word: str) -> str:
    """Lower case as Lucene's LowerCaseFilter (Java's ``Character.toLowerCase``, one code point for
    one): Python's ``str.lower`` turns U+0130 into two code points."""
    lowered = word.lower()
    return lowered if len(lowered) == len(word) else "".join(c.lower()[0] for c in word)


def standard_tokens(text: str) -> list[str]:
    """The tokens ElasticSearch's default ``standard`` analyzer gives (Lucene's StandardTokenizer,
    then LowerCaseFilter; no stop words): words are not split on case or underscores, and dots or
    apostrophes between letters stay inside a word (``os.path``, ``don't``). Checked token for token
    against Lucene 8.7's StandardAnalyzer (tests/reference/lucene_standard_analyzer.py).

    >>> standard_tokens("Return the getFileName of os.path, don't!")
    ['return', 'the', 'getfilename', 'of', 'os.path', "don't"]
    >>> standard_tokens("ReTuRn tHe GETfileNAME")
    ['return', 'the', 'getfilename']
    """
    out: list[str] = []
    for segment in _WORD_BOUNDARY.split(text):
        if _TOKEN_CHAR.search(segment):
            word = _lower(_LEADING.sub("", segment))
            out.extend(word[i : i + _MAX_TOKEN_LENGTH] for i in range(0, len(word), _MAX_TOKEN_LENGTH))
    return out
