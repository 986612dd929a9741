"""The CodeSearchNet baselines (Husain et al. 2019, section 4.1) as trainable bi-encoders.

One encoder per modality, as in CodeSearchNet ("our architecture employs one encoder per input
(natural or programming) language"): a query encoder over BPE pieces and a code encoder over code
subtokens (:mod:`csbench.models.csn_vocab`), of the same architecture, each mapping a token
sequence to one vector of the 128-d joint space; a query's score for a code is their inner product.
Each encoder is an embedding layer, a token-contextualising body and a pooling:

=========  ================================================================================
nbow       no body: the (sub)token embeddings themselves
cnn        1D convolutions over learned-position-augmented embeddings; CodeSearchNet's
           ``1dcnn`` defaults: 3 layers of 128 filters of width 16, ``same`` padding, tanh,
           residual connections from the second layer on
birnn      a bidirectional GRU (the paper's cell; the released code's default is an LSTM),
           2 layers, ``dim / 2`` units per direction, so token states are ``dim`` wide
selfatt    a BERT-like Transformer encoder: learned positions, LayerNorm, 3 post-LN layers of
           8 heads, feed-forward 512, GELU (CodeSearchNet's ``self_attention_*`` defaults)
=========  ================================================================================

Pooling (the paper: "mean/max-pooling and an attention-like weighted sum mechanism"): ``mean``,
``max`` or ``attention``. ``attention`` is CodeSearchNet's ``weighted_mean``: a per-token gate
``sigmoid(w·h_t)`` (no bias) and the gate-weighted mean of the token states. It is the default of
every architecture in the released code (``nbow_pool_mode``, ``1dcnn_pool_mode``, ``rnn_pool_mode``,
``self_attention_pool_mode``), so it is the default here too.

Padding never changes a vector: pooling uses the mask, the convolutions see zeros past a
sequence's end whatever the batch, the GRU runs on packed sequences and the Transformer gets a key
padding mask. An empty text (no tokens after tokenisation) is encoded as the zero vector by every
architecture and pooling.

The network's width is the joint space (``dim``): there is no projection layer, as in
CodeSearchNet, where the embedding size, the last CNN layer, the two GRU directions and the
Transformer's hidden size all equal the 128-d representation size.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import Tensor, nn
from torch.nn import functional as F

from csbench.models.csn_vocab import (
    encode_codes,
    encode_queries,
    fit_code_tokenizer,
    fit_query_tokenizer,
)
from csbench.models.defaults import CSN_DEFAULTS
from csbench.models.encoder import BiEncoder, Features, register_kind

ARCHITECTURES = ("nbow", "cnn", "birnn", "selfatt")
POOLINGS = ("mean", "max", "attention")

WEIGHTS_FILE = "model.safetensors"
QUERY_TOKENIZER_FILE = "query_tokenizer.json"
CODE_TOKENIZER_FILE = "code_tokenizer.json"


def resolve_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` over the defaults of its ``architecture`` (default ``nbow``), checked."""
    architecture = params.get("architecture", "nbow")
    if architecture not in CSN_DEFAULTS:
        raise ValueError(f"unknown CodeSearchNet architecture {architecture!r}; valid: {', '.join(ARCHITECTURES)}")
    defaults = CSN_DEFAULTS[architecture]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, list(defaults), n=1, cutoff=0.6)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ValueError(
            f"unknown parameter(s) for the {architecture} baseline: {', '.join(hints)}; valid: {', '.join(defaults)}"
        )
    out = json.loads(json.dumps({**defaults, **params}))  # a deep, JSON-clean copy
    _check(out)
    return out


def _check(p: dict[str, Any]) -> None:
    if p["pooling"] not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {p['pooling']!r}")
    for key in ("dim", "max_query_len", "max_code_len", "query_vocab_size", "code_vocab_size"):
        if not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"{key} must be a positive integer, not {p[key]!r}")
    if not 0.0 <= p["dropout"] < 1.0:
        raise ValueError(f"dropout must be in [0, 1), not {p['dropout']!r}")
    if p["architecture"] == "cnn" and (
        not p["cnn_kernel_widths"] or not all(isinstance(w, int) and w >= 1 for w in p["cnn_kernel_widths"])
    ):
        raise ValueError(f"cnn_kernel_widths must be a non-empty list of positive integers: {p['cnn_kernel_widths']!r}")
    if p["architecture"] == "birnn" and (p["dim"] % 2 or p["rnn_layers"] < 1):
        raise ValueError("birnn needs an even dim (two directions of dim / 2) and rnn_layers >= 1")
    if p["architecture"] == "selfatt" and (p["dim"] % p["selfatt_heads"] or p["selfatt_layers"] < 1):
        raise ValueError(f"selfatt needs dim divisible by selfatt_heads ({p['selfatt_heads']}) and selfatt_layers >= 1")


class SequenceEncoder(nn.Module):
    """One modality's encoder: token ids ``(B, T)`` and mask ``(B, T)`` → vectors ``(B, dim)``."""

    def __init__(self, params: dict[str, Any], vocab_size: int, max_len: int) -> None:
        super().__init__()
        self.architecture = params["architecture"]
        self.pooling = params["pooling"]
        dim, dropout = params["dim"], params["dropout"]
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
        nn.init.xavier_uniform_(self.embedding.weight)  # CSN: glorot_uniform token embeddings
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.dropout = nn.Dropout(dropout)
        self.positions: nn.Embedding | None = None
        if self.architecture == "cnn":
            if params["cnn_positions"]:
                self.positions = _position_embedding(max_len, dim)
            self.kernel_widths = list(params["cnn_kernel_widths"])
            self.residual = bool(params["cnn_residual"])
            self.convs = nn.ModuleList(nn.Conv1d(dim, dim, width) for width in self.kernel_widths)
        elif self.architecture == "birnn":
            layers = params["rnn_layers"]
            self.rnn = nn.GRU(
                dim,
                dim // 2,
                num_layers=layers,
                batch_first=True,
                bidirectional=True,
                dropout=dropout if layers > 1 else 0.0,
            )
        elif self.architecture == "selfatt":
            self.positions = _position_embedding(max_len, dim)
            self.embedding_norm = nn.LayerNorm(dim, eps=1e-12)  # BERT's embedding LayerNorm
            layer = nn.TransformerEncoderLayer(
                dim,
                params["selfatt_heads"],
                params["selfatt_ff_dim"],
                dropout=dropout,
                activation="gelu",
                batch_first=True,
                layer_norm_eps=1e-12,
            )
            self.transformer = nn.TransformerEncoder(layer, params["selfatt_layers"], enable_nested_tensor=False)
        if self.pooling == "attention":
            self.pool_gate = nn.Linear(dim, 1, bias=False)

    def forward(self, input_ids: Tensor, mask: Tensor) -> Tensor:
        mask = mask.bool()
        # An empty text keeps one (padding) position switched on inside the GRU / Transformer, so
        # they stay finite; the pooling below still sees the real, empty mask and yields zeros.
        nonempty = mask.any(dim=1)
        h = self.embedding(input_ids)
        if self.architecture == "nbow":
            h = self.dropout(h)
        elif self.architecture == "cnn":
            h = self._convolve(h, mask)
        elif self.architecture == "birnn":
            lengths = mask.sum(dim=1).clamp(min=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(self.dropout(h), lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=input_ids.shape[1])
        else:
            assert self.positions is not None
            h = h + self.positions.weight[: h.shape[1]]
            h = self.dropout(self.embedding_norm(h))
            attend = mask.clone()
            attend[:, 0] |= ~nonempty
            h = self.transformer(h, src_key_padding_mask=~attend)
        return self._pool(h, mask)

    def _convolve(self, h: Tensor, mask: Tensor) -> Tensor:
        keep = mask.unsqueeze(-1).to(h.dtype)
        if self.positions is not None:
            h = h + self.positions.weight[: h.shape[1]]
        h = h * keep  # positions past the end are zeros, exactly as the conv's own padding
        for i, (conv, width) in enumerate(zip(self.convs, self.kernel_widths, strict=True)):
            left = (width - 1) // 2  # 'same' padding; an even width pads one more on the right, like TF
            y = conv(F.pad(h.transpose(1, 2), (left, width - 1 - left))).transpose(1, 2)
            if self.residual and i > 0:
                y = y + h
            h = self.dropout(torch.tanh(y)) * keep
        return h

    def _pool(self, h: Tensor, mask: Tensor) -> Tensor:
        keep = mask.unsqueeze(-1)
        if self.pooling == "max":
            pooled = h.masked_fill(~keep, torch.finfo(h.dtype).min).max(dim=1).values
            return torch.where(mask.any(dim=1, keepdim=True), pooled, torch.zeros_like(pooled))
        weights = keep.to(h.dtype)
        if self.pooling == "mean":
            return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        weights = torch.sigmoid(self.pool_gate(h)) * weights  # CSN weighted_mean
        return (h * weights).sum(dim=1) / (weights.sum(dim=1) + 1e-8)


def _position_embedding(max_len: int, dim: int) -> nn.Embedding:
    positions = nn.Embedding(max_len, dim)
    nn.init.normal_(positions.weight, std=0.02)  # CSN / BERT: truncated normal, stddev 0.02
    return positions


def _pad(id_lists: list[list[int]]) -> Features:
    width = max([1, *(len(ids) for ids in id_lists)])  # one column even for empty texts
    input_ids = torch.zeros((len(id_lists), width), dtype=torch.long)
    mask = torch.zeros((len(id_lists), width), dtype=torch.long)
    for row, ids in enumerate(id_lists):
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask}


@register_kind
class CSNEncoder(BiEncoder):
    """CodeSearchNet's NBoW / 1D-CNN / biRNN / self-attention baseline: a query encoder and a code
    encoder of one ``architecture``, trained from scratch into one ``dim``-d space."""

    kind = "csn"

    def __init__(self, params: dict[str, Any], query_tokenizer: Tokenizer, code_tokenizer: Tokenizer, seed: int = 0):
        params = resolve_params(params)
        super().__init__(params["similarity"])
        self.params = params
        self.query_tokenizer = query_tokenizer
        self.code_tokenizer = code_tokenizer
        # Initialise from a private generator state: the same seed gives the same weights, and the
        # caller's global RNG stream is left as it was.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.query_encoder = SequenceEncoder(params, query_tokenizer.get_vocab_size(), params["max_query_len"])
            self.code_encoder = SequenceEncoder(params, code_tokenizer.get_vocab_size(), params["max_code_len"])

    @classmethod
    def from_training_data(
        cls, queries: Sequence[str], codes: Sequence[str], params: dict[str, Any], seed: int
    ) -> CSNEncoder:
        """Fit both vocabularies on the training pairs and build the network for ``seed``."""
        p = resolve_params(params)
        query_tokenizer = fit_query_tokenizer(queries, p["query_vocab_size"], p["query_min_count"])
        code_tokenizer = fit_code_tokenizer(codes, p["code_vocab_size"], p["code_min_count"], p["code_punctuation"])
        return cls(p, query_tokenizer, code_tokenizer, seed=seed)

    def query_features(self, queries: Sequence[str]) -> Features:
        return _pad(encode_queries(self.query_tokenizer, queries, self.params["max_query_len"]))

    def code_features(self, codes: Sequence[str], languages: Sequence[str]) -> Features:
        # One code encoder for every language (CodeSearchNet trained one per language in a
        # multi-language model; here a model is trained per dataset).
        ids = encode_codes(self.code_tokenizer, codes, self.params["max_code_len"], self.params["code_punctuation"])
        return _pad(ids)

    def encode(self, features: Features, side: str) -> Tensor:
        if side == "query":
            encoder = self.query_encoder
        elif side == "code":
            encoder = self.code_encoder
        else:
            raise ValueError(f"side must be 'query' or 'code', not {side!r}")
        return encoder(features["input_ids"], features["attention_mask"])

    def config(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.params))

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        state = {name: tensor.detach().cpu().contiguous() for name, tensor in self.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_FILE), metadata={"kind": self.kind, **_str_params(self.params)})
        self.query_tokenizer.save(str(directory / QUERY_TOKENIZER_FILE))
        self.code_tokenizer.save(str(directory / CODE_TOKENIZER_FILE))

    @classmethod
    def load(cls, directory: Path, params: dict[str, Any]) -> CSNEncoder:
        directory = Path(directory)
        for name in (WEIGHTS_FILE, QUERY_TOKENIZER_FILE, CODE_TOKENIZER_FILE):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"{directory} is not a CodeSearchNet baseline checkpoint (no {name})")
        encoder = cls(
            params,
            Tokenizer.from_file(str(directory / QUERY_TOKENIZER_FILE)),
            Tokenizer.from_file(str(directory / CODE_TOKENIZER_FILE)),
        )
        encoder.load_state_dict(load_file(str(directory / WEIGHTS_FILE)))
        return encoder


def _str_params(params: dict[str, Any]) -> dict[str, str]:
    """safetensors metadata is str → str: the parameters, for a reader without ``encoder.json``."""
    return {key: json.dumps(value) for key, value in params.items()}
