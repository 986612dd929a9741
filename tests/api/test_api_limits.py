"""InputLimit: truncation by the model's tokenizer as the server does, the character cap, token counts,
and clear errors for a tokenizer that is not there (tiktoken is not installed here)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from csbench.api.limits import InputLimit, LimitError

LONG = " ".join(f"token{i} value{i}" for i in range(400))  # far past 256 word pieces
SHORT = "sort a list of numbers"


def test_hf_truncation_cuts_at_the_nth_token(minilm_folder: str) -> None:
    limit = InputLimit(f"hf:{minilm_folder}", max_tokens=30)
    texts, truncated = limit.apply([LONG, SHORT, LONG])
    assert truncated == 2
    assert texts[1] == SHORT and texts[0] == texts[2]
    assert LONG.startswith(texts[0]) and len(texts[0]) < len(LONG)
    assert limit.count_tokens(texts) == [30, limit.count_tokens([SHORT])[0], 30]
    full = limit.count_tokens([LONG])[0]
    assert full > 256
    # the cut keeps the text's own characters: the tokens of the cut text are the first 30 of the whole
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder, local_files_only=True)
    whole = tokenizer(LONG, add_special_tokens=False)["input_ids"]
    assert tokenizer(texts[0], add_special_tokens=False)["input_ids"] == whole[:30]


def test_hf_truncation_matches_what_the_server_embeds(minilm_folder: str, embedding_server) -> None:
    """The server (max_seq_length 256) keeps 254 word pieces and its two special tokens: cut to 254
    tokens, a text embeds exactly as the whole one does."""
    limit = InputLimit(f"hf:{minilm_folder}", max_tokens=254)
    (cut,), truncated = limit.apply([LONG])
    assert truncated == 1 and len(cut) < len(LONG)
    whole, cut_vector = embedding_server.embed_direct([LONG, cut])
    np.testing.assert_allclose(cut_vector, whole, atol=1e-6)
    (shorter,), _ = InputLimit(f"hf:{minilm_folder}", max_tokens=100).apply([LONG])
    assert not np.allclose(embedding_server.embed_direct([shorter])[0], whole, atol=1e-3)


def test_hf_registered_name_resolves() -> None:
    assert InputLimit("hf:minilm").count_tokens(["hello world"]) == [2]


def test_character_cap_and_both() -> None:
    texts, truncated = InputLimit(max_chars=10).apply(["0123456789abc", "short", "0123456789"])
    assert texts == ["0123456789", "short", "0123456789"] and truncated == 1
    assert InputLimit(max_chars=10).count_tokens(["x"]) is None
    assert InputLimit().apply(["anything"]) == (["anything"], 0)


def test_token_then_character_cap(minilm_folder: str) -> None:
    texts, truncated = InputLimit(f"hf:{minilm_folder}", max_tokens=254, max_chars=50).apply([LONG, SHORT])
    assert texts == [LONG[:50], SHORT] and truncated == 1


def test_bad_specs_are_clear() -> None:
    with pytest.raises(LimitError, match="hf:<hub id or folder>"):
        InputLimit("sentencepiece:x")
    with pytest.raises(LimitError, match="needs a tokenizer"):
        InputLimit(max_tokens=10)
    with pytest.raises(LimitError, match="max_chars must be an integer >= 1"):
        InputLimit(max_chars=0)
    with pytest.raises(LimitError, match=r"from local files.*max_chars"):
        InputLimit("hf:no-such-org/no-such-model-xyz", max_tokens=5).apply(["text"])


def test_tiktoken_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from csbench.api import limits

    limits._tiktoken_encoding.cache_clear()
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # import tiktoken -> ImportError
    with pytest.raises(LimitError, match=r"tiktoken package, which is not installed.*pip install tiktoken.*max_chars"):
        InputLimit("tiktoken:cl100k_base", max_tokens=8191).apply(["text"])
    limits._tiktoken_encoding.cache_clear()


class _ByteEncoding:
    """A stand-in tiktoken encoding: one token per UTF-8 byte."""

    def encode(self, text: str, disallowed_special=()) -> list[int]:
        return list(text.encode())

    def decode_single_token_bytes(self, token: int) -> bytes:
        return bytes([token])


def test_tiktoken_truncation_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from csbench.api import limits

    limits._tiktoken_encoding.cache_clear()
    fake = types.SimpleNamespace(get_encoding=lambda name: _ByteEncoding())
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    limit = InputLimit("tiktoken:bytes", max_tokens=5)
    assert limit.count_tokens(["héllo wörld"]) == [13]
    texts, truncated = limit.apply(["héllo wörld", "abc"])
    assert texts == ["héll", "abc"] and truncated == 1  # 5 bytes: h, é (2 bytes), l, l
    limits._tiktoken_encoding.cache_clear()


def test_describe() -> None:
    assert InputLimit().describe() == "no limit"
    assert InputLimit("hf:x", 254, 1000).describe() == "254 tokens by hf:x, 1000 characters"
