"""nlpaug's tokenisation with the original spacing kept.

nlpaug's default ``Tokenizer.tokenizer`` splits a text into runs of word characters (``\\w+``) and
single non-space, non-word characters; its ``reverse_tokenizer`` joins the tokens with spaces and
then re-attaches some punctuation. That round trip rewrites queries even where no token changed:
``os.path.join() in python's C++ code`` comes back as ``os. path. join () in python ' s C + + code``.
:class:`SpacedTokenizer` produces exactly nlpaug's tokens but remembers the text between them, so
the untouched parts of a perturbed query are byte-identical to the original.
"""

from __future__ import annotations

import re

# Same tokens as nlpaug's `[t for t in re.split(r"(\W)", text) if t.strip()]`.
TOKEN = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """nlpaug's tokens of ``text``: runs of word characters and single punctuation characters."""
    return TOKEN.findall(text)


class SpacedTokenizer:
    """A tokenizer / reverse tokenizer pair for one nlpaug augmenter, used one text at a time.

    ``tokenize`` records the text around and between the tokens; ``detokenize`` puts the (possibly
    replaced) tokens back into those gaps. When the number of tokens changed (no augmenter csbench
    uses does that) it falls back to nlpaug's own reverse tokenizer. ``tokens`` and ``augmented``
    hold the last input and output tokens, for tracing what a perturbation changed.
    """

    def __init__(self) -> None:
        self.gaps: list[str] = [""]
        self.tokens: list[str] = []
        self.augmented: list[str] = []

    def tokenize(self, text: str) -> list[str]:
        tokens, gaps, end = [], [], 0
        for match in TOKEN.finditer(text):
            gaps.append(text[end : match.start()])
            tokens.append(match.group())
            end = match.end()
        gaps.append(text[end:])
        self.gaps, self.tokens, self.augmented = gaps, tokens, list(tokens)
        return list(tokens)

    def detokenize(self, tokens: list[str]) -> str:
        self.augmented = list(tokens)
        if len(tokens) != len(self.gaps) - 1:
            # imported here: nlpaug imports torch, which validating a config must not pay for
            from nlpaug.util.text.tokenizer import Tokenizer as _NlpaugTokenizer

            return _NlpaugTokenizer.reverse_tokenizer(tokens)
        parts = [self.gaps[0]]
        for token, gap in zip(tokens, self.gaps[1:], strict=True):
            parts += [token, gap]
        return "".join(parts)
