"""A from-scratch Transformer encoder-decoder summarizer (architecture ``transformer``, model
``transformer-sum``), with vocabularies learnt on the train split as the CodeSearchNet baselines learn theirs.

* **Code in**: the code's tokens, identifiers split into lower-cased subtokens, looked up in a
  ``WordLevel`` vocabulary of the most frequent subtokens, ties alphabetical
  (:func:`csbench.models.csn_vocab.fit_code_tokenizer`), cut to ``max_source_len``.
* **Summary out**: byte-pair pieces of the NFKC-normalised, lower-cased summary, learnt on the train
  summaries with ``tokenizers``' ``BpeTrainer`` (CodeSearchNet's query BPE, ``csn_vocab``), plus
  ``<s>`` / ``</s>``. Unlike the search tokenizer, words are marked by a leading ``▁`` (a
  ``Metaspace`` pre-tokenizer, then punctuation split off): a generated summary must be spelt back
  as words, which pieces without a word-boundary mark cannot do. The mark is a character of the
  alphabet, not a trainer suffix, so training stays a pure function of the summaries (tested across
  processes).
* **Network**: ``torch.nn.TransformerEncoder`` / ``TransformerDecoder`` layers, pre-norm (stabler on
  small data), learned positions, embeddings scaled by sqrt(d_model) and initialised N(0, 1/d_model),
  the output projection tied to the summary embedding (``tie_embeddings``).
* **Decoding** (:mod:`csbench.summarization.decode`): the encoder runs once; each decoder step runs
  the *same* layer weights on the new token only, with a key/value cache of the past tokens' self-
  attention and the memory's cross-attention keys / values computed once (``nn.TransformerDecoder``
  has no cache; recomputing it on the whole prefix at every step costs O(T) decoder passes per token).
  The step's logits equal the full decoder's (tested to 1e-5).

Saved as ``model.safetensors`` (safetensors' ``save_model``: the tied weight stored once),
``summarizer.json`` and ``code_tokenizer.json`` / ``summary_tokenizer.json``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_model, save_model
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from torch import Tensor, nn

from csbench.models.csn_vocab import PAD, PAD_ID, SPECIAL_TOKENS, UNK, UNK_ID, encode_codes, fit_code_tokenizer
from csbench.summarization.models.base import WEIGHTS_FILE, Summarizer, read_manifest
from csbench.summarization.models.defaults import TRANSFORMER_DEFAULTS

BOS, EOS = "<s>", "</s>"
SUMMARY_SPECIALS = [*SPECIAL_TOKENS, BOS, EOS]  # ids 0 [PAD], 1 [UNK], 2 <s>, 3 </s>
CODE_TOKENIZER_FILE = "code_tokenizer.json"
SUMMARY_TOKENIZER_FILE = "summary_tokenizer.json"
IGNORE = -100  # label of a padded position


def fit_summary_tokenizer(summaries: Iterable[str], vocab_size: int, min_count: int) -> Tokenizer:
    """A BPE tokenizer of ``vocab_size`` entries (specials and alphabet included) learnt on
    ``summaries``, which decodes ids back to words (see the module docstring)."""
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_count, special_tokens=SUMMARY_SPECIALS, show_progress=False
    )
    tokenizer.train_from_iterator(summaries, trainer=trainer)
    return tokenizer


def _check(p: dict[str, Any]) -> None:
    for key in ("d_model", "encoder_layers", "decoder_layers", "heads", "ff_dim", "max_source_len", "max_target_len"):
        if not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"transformer summarizer: {key} must be a positive integer, not {p[key]!r}")
    if p["d_model"] % p["heads"]:
        raise ValueError(f"transformer summarizer: d_model {p['d_model']} is not divisible by heads {p['heads']}")
    if not 0.0 <= p["dropout"] < 1.0:
        raise ValueError(f"transformer summarizer: dropout must be in [0, 1), not {p['dropout']!r}")


@dataclass
class DecoderState:
    """One decoding batch's rows: the memory's cross-attention keys / values and mask (computed once)
    and the self-attention cache of the tokens stepped so far, per decoder layer ``(rows, heads, t, dh)``."""

    memory_keys: tuple[Tensor, ...]
    memory_values: tuple[Tensor, ...]
    memory_mask: Tensor  # (rows, 1, 1, source_len), True where a real source token is
    self_keys: tuple[Tensor, ...]
    self_values: tuple[Tensor, ...]


class Seq2SeqTransformer(nn.Module):
    """The network: embeddings, a pre-norm encoder and decoder, the (tied) output projection."""

    def __init__(self, p: dict[str, Any], source_vocab: int, target_vocab: int) -> None:
        super().__init__()
        d, heads, ff, dropout = p["d_model"], p["heads"], p["ff_dim"], p["dropout"]
        self.d_model, self.heads, self.scale = d, heads, math.sqrt(d)
        self.source_embed = nn.Embedding(source_vocab, d, padding_idx=PAD_ID)
        self.target_embed = nn.Embedding(target_vocab, d, padding_idx=PAD_ID)
        self.source_pos = nn.Embedding(p["max_source_len"], d)
        self.target_pos = nn.Embedding(max(p["max_target_len"], p["max_length"]) + 1, d)
        for embedding in (self.source_embed, self.target_embed):
            nn.init.normal_(embedding.weight, std=d**-0.5)
            with torch.no_grad():
                embedding.weight[PAD_ID].zero_()
        encoder_layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(
            encoder_layer, p["encoder_layers"], norm=nn.LayerNorm(d), enable_nested_tensor=False
        )
        decoder_layer = nn.TransformerDecoderLayer(d, heads, ff, dropout, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(decoder_layer, p["decoder_layers"], norm=nn.LayerNorm(d))
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(d, target_vocab, bias=False)
        if p["tie_embeddings"]:
            self.output.weight = self.target_embed.weight

    def encode(self, source_ids: Tensor, source_mask: Tensor) -> Tensor:
        """The memory ``(batch, source_len, d)`` of padded source ids (``source_mask`` True on real tokens)."""
        positions = torch.arange(source_ids.shape[1], device=source_ids.device)
        x = self.dropout(self.source_embed(source_ids) * self.scale + self.source_pos(positions))
        return self.encoder(x, src_key_padding_mask=~source_mask)

    def forward(self, source_ids: Tensor, source_mask: Tensor, decoder_ids: Tensor) -> Tensor:
        """Teacher-forcing logits ``(batch, target_len, vocab)``."""
        memory = self.encode(source_ids, source_mask)
        length = decoder_ids.shape[1]
        positions = torch.arange(length, device=decoder_ids.device)
        y = self.dropout(self.target_embed(decoder_ids) * self.scale + self.target_pos(positions))
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=decoder_ids.device, dtype=y.dtype)
        h = self.decoder(y, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=~source_mask)
        return self.output(h)

    # ---------------------------------------------------------------------------------- incremental decoding
    def start_state(self, memory: Tensor, source_mask: Tensor) -> DecoderState:
        """The cross-attention keys / values of ``memory`` for every decoder layer, and empty caches."""
        keys, values = [], []
        for layer in self.decoder.layers:
            attention = layer.multihead_attn
            _, w_k, w_v = attention.in_proj_weight.chunk(3)
            _, b_k, b_v = attention.in_proj_bias.chunk(3)
            keys.append(self._heads(F.linear(memory, w_k, b_k)))
            values.append(self._heads(F.linear(memory, w_v, b_v)))
        rows, dh = memory.shape[0], self.d_model // self.heads
        empty = memory.new_zeros(rows, self.heads, 0, dh)
        n = len(self.decoder.layers)
        return DecoderState(tuple(keys), tuple(values), source_mask[:, None, None, :], (empty,) * n, (empty,) * n)

    def step(self, state: DecoderState, tokens: Tensor, position: int) -> tuple[Tensor, DecoderState]:
        """Logits ``(rows, vocab)`` after feeding ``tokens`` ``(rows,)`` at ``position``; the state with
        their keys / values cached. The same computation as :meth:`forward` (eval mode), one token at a time."""
        if position >= self.target_pos.num_embeddings:
            raise ValueError(
                f"decoder position {position} is beyond the model's {self.target_pos.num_embeddings} target positions "
                "(max(max_target_len, max_length) + 1): decode with a smaller max_length"
            )
        pos = torch.full_like(tokens, position)
        x = (self.target_embed(tokens) * self.scale + self.target_pos(pos))[:, None, :]
        new_keys, new_values = [], []
        for i, layer in enumerate(self.decoder.layers):
            h = layer.norm1(x)
            attention = layer.self_attn
            q, k, v = F.linear(h, attention.in_proj_weight, attention.in_proj_bias).chunk(3, dim=-1)
            keys = torch.cat((state.self_keys[i], self._heads(k)), dim=2)
            values = torch.cat((state.self_values[i], self._heads(v)), dim=2)
            new_keys.append(keys)
            new_values.append(values)
            x = x + attention.out_proj(self._merge(F.scaled_dot_product_attention(self._heads(q), keys, values)))
            h = layer.norm2(x)
            cross = layer.multihead_attn
            w_q, b_q = cross.in_proj_weight.chunk(3)[0], cross.in_proj_bias.chunk(3)[0]
            attended = F.scaled_dot_product_attention(
                self._heads(F.linear(h, w_q, b_q)), state.memory_keys[i], state.memory_values[i], state.memory_mask
            )
            x = x + cross.out_proj(self._merge(attended))
            x = x + layer.linear2(layer.activation(layer.linear1(layer.norm3(x))))
        logits = self.output(self.decoder.norm(x))[:, 0, :]
        state = DecoderState(
            state.memory_keys, state.memory_values, state.memory_mask, tuple(new_keys), tuple(new_values)
        )
        return logits, state

    def _heads(self, x: Tensor) -> Tensor:
        """``(rows, t, d)`` -> ``(rows, heads, t, d / heads)``."""
        rows, t, _ = x.shape
        return x.view(rows, t, self.heads, -1).transpose(1, 2)

    def _merge(self, x: Tensor) -> Tensor:
        """``(rows, heads, t, dh)`` -> ``(rows, t, d)``."""
        rows, _, t, _ = x.shape
        return x.transpose(1, 2).reshape(rows, t, self.d_model)


def _pad(id_lists: list[list[int]], value: int) -> Tensor:
    width = max(len(ids) for ids in id_lists)
    return torch.tensor([ids + [value] * (width - len(ids)) for ids in id_lists], dtype=torch.long)


class TransformerSummarizer(Summarizer):
    """The from-scratch summarizer: :class:`Seq2SeqTransformer` with its two vocabularies."""

    architecture = "transformer"
    DEFAULTS = TRANSFORMER_DEFAULTS

    def __init__(self, params: dict[str, Any], code_tokenizer: Tokenizer, summary_tokenizer: Tokenizer) -> None:
        self.params = self.resolve_params(params)
        _check(self.params)
        self.code_tokenizer, self.summary_tokenizer = code_tokenizer, summary_tokenizer
        vocab = summary_tokenizer.get_vocab()
        for token, expected in ((PAD, PAD_ID), (UNK, UNK_ID), (BOS, 2), (EOS, 3)):
            if vocab.get(token) != expected:
                raise ValueError(f"summary tokenizer: {token} must have id {expected}, has {vocab.get(token)}")
        self.module = Seq2SeqTransformer(
            self.params, code_tokenizer.get_vocab_size(), summary_tokenizer.get_vocab_size()
        )

    @classmethod
    def build(
        cls, params: dict[str, Any], codes: Iterable[str], summaries: Iterable[str], seed: int
    ) -> TransformerSummarizer:
        """Learn both vocabularies on the train split, then initialise the weights from ``seed``."""
        p = cls.resolve_params(params)
        code_tokenizer = fit_code_tokenizer(codes, p["code_vocab_size"], p["code_min_count"], p["code_punctuation"])
        summary_tokenizer = fit_summary_tokenizer(summaries, p["summary_vocab_size"], p["summary_min_count"])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return cls(p, code_tokenizer, summary_tokenizer)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        self.write_manifest(
            directory,
            code_vocab_size=self.code_tokenizer.get_vocab_size(),
            summary_vocab_size=self.summary_tokenizer.get_vocab_size(),
        )
        save_model(self.module, str(directory / WEIGHTS_FILE), metadata={"architecture": self.architecture})
        self.code_tokenizer.save(str(directory / CODE_TOKENIZER_FILE))
        self.summary_tokenizer.save(str(directory / SUMMARY_TOKENIZER_FILE))

    @classmethod
    def load(cls, directory: Path) -> TransformerSummarizer:
        directory = Path(directory)
        for name in (WEIGHTS_FILE, CODE_TOKENIZER_FILE, SUMMARY_TOKENIZER_FILE):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"{directory} is not a saved transformer summarizer (no {name})")
        summarizer = cls(
            read_manifest(directory)["params"],
            Tokenizer.from_file(str(directory / CODE_TOKENIZER_FILE)),
            Tokenizer.from_file(str(directory / SUMMARY_TOKENIZER_FILE)),
        )
        load_model(summarizer.module, str(directory / WEIGHTS_FILE))
        return summarizer

    # ------------------------------------------------------------------------------------------ training
    def source(self, codes: list[str]) -> tuple[Tensor, Tensor]:
        """Padded code subtoken ids and their mask; an empty code is one ``[UNK]`` (never an all-masked row)."""
        ids = encode_codes(self.code_tokenizer, codes, self.params["max_source_len"], self.params["code_punctuation"])
        ids = [row or [UNK_ID] for row in ids]
        source_ids = _pad(ids, PAD_ID)
        return source_ids, source_ids != PAD_ID

    def collate(self, codes: list[str], summaries: list[str]) -> dict[str, Tensor]:
        source_ids, source_mask = self.source(codes)
        limit = self.params["max_target_len"]
        pieces = [e.ids[:limit] for e in self.summary_tokenizer.encode_batch(summaries, add_special_tokens=False)]
        return {
            "source_ids": source_ids,
            "source_mask": source_mask,
            "decoder_ids": _pad([[self.decoder_start_id, *ids] for ids in pieces], PAD_ID),
            "labels": _pad([[*ids, self.eos_id] for ids in pieces], IGNORE),
        }

    def loss(self, module: nn.Module, batch: dict[str, Tensor], label_smoothing: float = 0.0) -> Tensor:
        device = next(module.parameters()).device
        batch = {key: value.to(device) for key, value in batch.items()}
        logits = module(batch["source_ids"], batch["source_mask"], batch["decoder_ids"])
        labels = batch["labels"].flatten()
        return F.cross_entropy(
            logits.float().flatten(0, 1), labels, ignore_index=IGNORE, label_smoothing=label_smoothing
        )

    # ------------------------------------------------------------------------------------------ decoding
    @property
    def decoder_start_id(self) -> int:
        return 2

    @property
    def eos_id(self) -> int:
        return 3

    @property
    def pad_id(self) -> int:
        return PAD_ID

    def encode(self, codes: list[str]) -> DecoderState:
        source_ids, source_mask = (t.to(self.device) for t in self.source(codes))
        return self.module.start_state(self.module.encode(source_ids, source_mask), source_mask)

    def step(self, state: DecoderState, prefix: Tensor) -> tuple[Tensor, DecoderState]:
        logits, state = self.module.step(state, prefix[:, -1], prefix.shape[1] - 1)
        return logits.float(), state

    def detokenize(self, ids: list[list[int]]) -> list[str]:
        return self.summary_tokenizer.decode_batch(ids, skip_special_tokens=True)


SUMMARIZER = TransformerSummarizer
