"""Vocabularies of the CodeSearchNet baselines, learned on the training split.

CodeSearchNet (Husain et al. 2019, section 4.1) preprocesses each modality by its semantics:
"identifiers appearing in code tokens are split into subtokens [...] and natural language tokens
are split using byte-pair encoding (BPE)". Both vocabularies are Hugging Face ``tokenizers``
objects, saved as their own ``tokenizer.json`` (no pickle):

* queries: lower-cased (and NFKC-normalised) words and punctuation runs, split by a BPE model
  trained on the training queries. A word never seen in training is spelt with learned pieces;
  only a character never seen becomes ``[UNK]``. No end-of-word suffix / continuing-subword
  prefix: with either, ``tokenizers``' ``BpeTrainer`` (0.23) numbers the suffixed alphabet in
  hash-map order, so ids and merge order change from run to run; without, training is a pure
  function of the queries (tested), which the seed-determinism of the model needs.
* code: tokens of the code (words and single punctuation characters), each word split into
  lower-cased subtokens (snake_case, camelCase, digits: :func:`csbench.code.tokens.subtokens`),
  then looked up in a ``WordLevel`` vocabulary of the most frequent subtokens (ties broken
  alphabetically, so the vocabulary is a pure function of the training codes). The splitting is
  done in Python before the lookup, because a ``tokenizers`` normaliser would lower-case the text
  before the camelCase split could see the capitals.

Id 0 is ``[PAD]`` and id 1 is ``[UNK]`` in both vocabularies.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from csbench.code.tokens import subtokens

PAD = "[PAD]"
UNK = "[UNK]"
SPECIAL_TOKENS = [PAD, UNK]  # ids 0 and 1
PAD_ID, UNK_ID = 0, 1

# A code token: a word (identifier, keyword, number) or one punctuation / operator character.
# Single characters, not operator runs, so ")):" gives ")", ")", ":" as tree-sitter's leaves would.
_CODE_TOKEN = re.compile(r"\w+|[^\w\s]")
# The same on ASCII text in one pass: subtokens (csbench.code.tokens' pattern; its lookahead never
# reaches past a word, so words need not be cut first) and, with punctuation, single characters.
_ASCII_SUBTOKEN_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_ASCII_SUBTOKEN = re.compile(_ASCII_SUBTOKEN_WORDS.pattern + r"|[^\w\s]")


def code_subtokens(code: str, keep_punctuation: bool = True) -> list[str]:
    """The code's tokens with every word split into lower-cased subtokens.

    CodeSearchNet keeps non-identifier tokens (punctuation, operators) as they are and splits only
    identifiers; ``keep_punctuation=False`` keeps the words alone.

    >>> code_subtokens("def getHTTPResponse_code(self, x2):")
    ['def', 'get', 'http', 'response', 'code', '(', 'self', ',', 'x', '2', ')', ':']
    >>> code_subtokens("a.b += 1", keep_punctuation=False)
    ['a', 'b', '1']
    """
    if code.isascii() and "\0" not in code:  # one regex pass: what the word-by-word split gives, 2-3x faster
        found = (_ASCII_SUBTOKEN if keep_punctuation else _ASCII_SUBTOKEN_WORDS).findall(code)
        return "\0".join(found).lower().split("\0") if found else []
    return word_by_word_subtokens(code, keep_punctuation)


def word_by_word_subtokens(code: str, keep_punctuation: bool = True) -> list[str]:
    """:func:`code_subtokens` token by token: each word split by :func:`csbench.code.tokens.subtokens`
    (any text; the reference its one-regex ASCII path is tested against)."""
    out: list[str] = []
    for token in _CODE_TOKEN.findall(code):
        if token[0].isalnum() or token[0] == "_":
            out.extend(subtokens(token))
        elif keep_punctuation:
            out.append(token)
    return out


def fit_query_tokenizer(queries: Iterable[str], vocab_size: int, min_count: int) -> Tokenizer:
    """A BPE tokenizer of ``vocab_size`` entries (specials and alphabet included) trained on
    ``queries``; merges seen fewer than ``min_count`` times are not learned."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+|[^\w\s]+, like CSN's docstring tokens
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_count,
        special_tokens=SPECIAL_TOKENS,
        show_progress=False,
    )
    tokenizer.train_from_iterator(queries, trainer=trainer)
    return tokenizer


def fit_code_tokenizer(
    codes: Iterable[str], vocab_size: int, min_count: int, keep_punctuation: bool = True
) -> Tokenizer:
    """A ``WordLevel`` vocabulary of the ``vocab_size - 2`` most frequent code subtokens seen at
    least ``min_count`` times (CodeSearchNet: 10,000 entries, count threshold 10)."""
    counts: Counter[str] = Counter()
    for code in codes:
        counts.update(code_subtokens(code, keep_punctuation))
    ranked = sorted((item for item in counts.items() if item[1] >= min_count), key=lambda kv: (-kv[1], kv[0]))
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for token, _ in ranked[: max(vocab_size - len(SPECIAL_TOKENS), 0)]:
        vocab[token] = len(vocab)
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # input arrives as subtoken lists
    return tokenizer


def encode_queries(tokenizer: Tokenizer, queries: Sequence[str], max_len: int) -> list[list[int]]:
    """Token ids of each query, cut to ``max_len``."""
    return [encoding.ids[:max_len] for encoding in tokenizer.encode_batch(list(queries), add_special_tokens=False)]


def encode_codes(tokenizer: Tokenizer, codes: Sequence[str], max_len: int, keep_punctuation: bool) -> list[list[int]]:
    """Subtoken ids of each code, cut to ``max_len`` (the first ``max_len`` subtokens)."""
    pieces = [code_subtokens(code, keep_punctuation)[:max_len] for code in codes]
    return [encoding.ids for encoding in tokenizer.encode_batch(pieces, is_pretokenized=True, add_special_tokens=False)]
