"""CodeXGLUE code-to-text's model (architecture ``roberta-decoder``, registered model ``codebert-sum``):
a RoBERTa / CodeBERT encoder and a 6-layer ``nn.TransformerDecoder``.

Transcribed from microsoft/CodeXGLUE at commit ac74a62802a0dd159b3258c78a2df8ad36cdf2b9 (files last
changed in bac029cb01c2d4476afa812c424439846b5c9920), ``Code-Text/code-to-text/code/``:

* ``model.py`` lines 23-32 and 54-73 (``Seq2Seq``): the decoder input is the *encoder's* embeddings
  of the target ids (word + RoBERTa positions + token type, LayerNorm, dropout); the decoder is
  post-norm, ReLU, ``dim_feedforward`` 2048, dropout 0.1 (``nn.TransformerDecoderLayer``'s defaults),
  causal self-attention with the additive mask ``-1e4 * (1 - tril)``, cross-attention with the source
  padding masked; then ``tanh(dense(.))`` and ``lm_head``, tied to the encoder's word embeddings, no bias.
  The loss (lines 63-70): cross-entropy of the shifted logits over the active target positions
  (``target_mask[..., 1:]``), their mean.
* ``run.py`` lines 258-263: ``d_model = hidden_size``, ``nhead = num_attention_heads`` (12 for CodeBERT),
  ``num_layers=6``; start token ``cls_token_id`` (``<s>``), end token ``sep_token_id`` (``</s>``).
* ``run.py`` lines 101-123 (``convert_examples_to_features``): ``<s> tokenize(x)[:max_len-2] </s>`` on
  both sides; lines 63-72 (``read_examples``): whitespace runs collapsed to one space (done here too).
* ``run.py`` lines 437-441: the prediction is cut at the first id 0 (``<s>``: their zero padding) and
  decoded with ``clean_up_tokenization_spaces=False``; the README's fine-tuning command: source 256,
  target 128, beam 10, lr 5e-5, batch 32, 10 epochs (``defaults.py``'s ``codebert-sum``).

Where this differs, and why:

* **Beam search.** Their ``Beam`` class (model.py lines 107-218) keeps finished hypotheses *in* the
  beam (an EOS row cannot extend but holds its slot), collects finishes from the top ``beam`` only,
  stops when the top row is EOS and ``beam`` hypotheses finished, and ranks by the raw sum of log
  probabilities. csbench decodes every architecture with :mod:`csbench.summarization.decode`
  (Hugging Face ``generate`` semantics: ``2 x beam`` candidates, finished hypotheses set aside,
  ``length_penalty``), so that a model's BLEU does not depend on which search its authors wrote;
  with ``length_penalty`` 0 the ranking is theirs (raw sums), the bookkeeping still Hugging Face's.
  ``beam_style: codexglue`` decodes with their search instead (:mod:`csbench.summarization.codexglue_beam`,
  tested token for token against a transcription of their code).
  Their loop generates at most ``max_target_length`` tokens, EOS included: ``max_length`` 127.
* **Incremental decoding.** Their loop recomputes the decoder over the whole prefix at every step;
  :meth:`RobertaDecoderSummarizer.step` caches each layer's input for the prefix and runs the new
  position only (the same function of the prefix: self-attention is causal, and the new row attends
  to every earlier one as their mask lets it).
* **No pooler, no 2048 x 2048 ``bias`` buffer.** The encoder's pooler is never used (dropped: no unused
  parameters under DDP); the causal mask is built per length instead of sliced from a 16 MB buffer.
  Parameter names are otherwise theirs (``encoder.*``, ``decoder.layers.N.*``, ``dense``, ``lm_head``).
* **Padding** to the longest sequence of the batch, not to the maximum length (masked either way).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from csbench.summarization.models.base import WEIGHTS_FILE, Decoding, Summarizer, read_manifest

ENCODER_DIR = "encoder"  # config.json and tokenizer files of the RoBERTa encoder
BEAM_STYLES = ("hf", "codexglue")


def causal_mask(length: int, device: torch.device) -> Tensor:
    """Their additive self-attention mask: ``-1e4 * (1 - tril(ones))`` (model.py line 58)."""
    return -1e4 * (1 - torch.tril(torch.ones(length, length, device=device)))


class CodeXGlueSeq2Seq(nn.Module):
    """CodeXGLUE's ``Seq2Seq`` (model.py): encoder, decoder, ``dense`` + tanh, tied ``lm_head``."""

    def __init__(self, encoder: nn.Module, layers: int, ffn_dim: int, dropout: float, heads: int | None) -> None:
        super().__init__()
        config = encoder.config
        self.encoder = encoder
        layer = nn.TransformerDecoderLayer(
            d_model=config.hidden_size,
            nhead=heads or config.num_attention_heads,
            dim_feedforward=ffn_dim,
            dropout=dropout,
        )
        self.decoder = nn.TransformerDecoder(layer, num_layers=layers)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.lm_head.weight = self.encoder.embeddings.word_embeddings.weight  # tie_weights (model.py 47-52)

    def encode(self, source_ids: Tensor, source_mask: Tensor) -> Tensor:
        """The encoder's output, sequence-first ``(source, batch, d)`` as their decoder takes it."""
        return self.encoder(source_ids, attention_mask=source_mask)[0].permute(1, 0, 2).contiguous()

    def logits(self, memory: Tensor, source_mask: Tensor, target_ids: Tensor) -> Tensor:
        """``(batch, target, vocab)`` logits of every target position (teacher forcing)."""
        mask = causal_mask(target_ids.shape[1], target_ids.device)
        embedded = self.encoder.embeddings(target_ids).permute(1, 0, 2).contiguous()
        out = self.decoder(embedded, memory, tgt_mask=mask, memory_key_padding_mask=(1 - source_mask).bool())
        return self.lm_head(torch.tanh(self.dense(out)).permute(1, 0, 2).contiguous())

    def forward(
        self, source_ids: Tensor, source_mask: Tensor, target_ids: Tensor, target_mask: Tensor, smoothing: float = 0.0
    ) -> Tensor:
        """Their training loss (model.py lines 63-70): the mean cross-entropy of the shifted logits over the
        active target positions; ``smoothing``: optional label smoothing (theirs: none)."""
        lm_logits = self.logits(self.encode(source_ids, source_mask), source_mask, target_ids)
        active = target_mask[..., 1:].ne(0).reshape(-1)
        shift_logits = lm_logits[..., :-1, :].reshape(-1, lm_logits.size(-1))
        shift_labels = target_ids[..., 1:].reshape(-1)
        logits, labels = shift_logits[active].float(), shift_labels[active]
        return nn.functional.cross_entropy(logits, labels, label_smoothing=smoothing)

    def step_layers(
        self, new: Tensor, inputs: list[Tensor] | None, memory: Tensor, memory_pad: Tensor
    ) -> tuple[Tensor, list[Tensor]]:
        """The decoder's output for one new position ``new`` ``(1, rows, d)`` given each layer's input
        for the earlier positions (``inputs[l]``: ``(t, rows, d)``, None at the first step); returns the
        top layer's output ``(1, rows, d)`` and the layer inputs extended by the new position."""
        extended: list[Tensor] = []
        x = new
        for index, layer in enumerate(self.decoder.layers):
            seen = x if inputs is None else torch.cat((inputs[index], x), dim=0)
            extended.append(seen)
            x = _layer_last(layer, x, seen, memory, memory_pad)
        if self.decoder.norm is not None:
            x = self.decoder.norm(x)
        return x, extended


def _layer_last(
    layer: nn.TransformerDecoderLayer, x: Tensor, seen: Tensor, memory: Tensor, memory_pad: Tensor
) -> Tensor:
    """A post-norm ``nn.TransformerDecoderLayer`` (eval mode) for the last position ``x`` attending to
    ``seen`` (itself and every earlier position): the layer's own ``_sa_block`` / ``_mha_block`` /
    ``_ff_block`` arithmetic with the query restricted to the new row."""
    if layer.norm_first:
        raise ValueError("incremental decoding expects post-norm layers (CodeXGLUE's)")
    attended = layer.self_attn(x, seen, seen, need_weights=False)[0]
    x = layer.norm1(x + layer.dropout1(attended))
    crossed = layer.multihead_attn(x, memory, memory, key_padding_mask=memory_pad, need_weights=False)[0]
    x = layer.norm2(x + layer.dropout2(crossed))
    return layer.norm3(x + layer._ff_block(x))


@dataclass
class RobertaDecoderState:
    """Between steps: the encoder output ``(rows, source, d)`` (batch-first, so rows reorder on dim 0),
    its mask and each layer's cached inputs for the prefix ``(rows, t, d)`` (None before the first step)."""

    memory: Tensor
    mask: Tensor
    layer_inputs: list[Tensor] | None = None


def _collapse(text: str) -> str:
    """run.py ``read_examples`` (lines 69-72): newlines out, whitespace runs as one space."""
    return " ".join(text.replace("\n", " ").split())


class RobertaDecoderSummarizer(Summarizer):
    """CodeXGLUE code-to-text's Seq2Seq with its RoBERTa tokenizer (see the module docstring)."""

    architecture: ClassVar[str] = "roberta-decoder"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "decoder_layers": 6,  # run.py line 260
        "decoder_heads": None,  # None: the encoder's num_attention_heads (run.py line 259)
        "decoder_ffn_dim": 2048,  # nn.TransformerDecoderLayer's default, as they build it
        "decoder_dropout": 0.1,  # idem
        "beam_style": "hf",  # hf: csbench's decode (generate's search); codexglue: their Beam class
    }
    REQUIRED: ClassVar[tuple[str, ...]] = ("model_id",)

    def __init__(self, module: CodeXGlueSeq2Seq, tokenizer: Any, params: dict[str, Any]) -> None:
        self.params = self.resolve_params(params)
        self.module = module
        self.tokenizer = tokenizer
        for name in ("cls_token_id", "sep_token_id", "pad_token_id"):
            if getattr(tokenizer, name) is None:
                raise ValueError(
                    f"{self.params['model_id']}: the tokenizer has no {name[:-3]} (CodeXGLUE needs <s> </s> <pad>)"
                )
        if self.params["beam_style"] not in BEAM_STYLES:
            raise ValueError(f"beam_style must be one of {', '.join(BEAM_STYLES)}, not {self.params['beam_style']!r}")
        # RoBERTa's positions start after the pad id; the decoder embeds its inputs with them too
        self.positions = module.encoder.config.max_position_embeddings - tokenizer.pad_token_id - 1
        for key in ("max_source_len", "max_target_len"):
            if self.params[key] > self.positions:
                raise ValueError(f"{key} {self.params[key]} exceeds the encoder's {self.positions} positions")
        self._check_max_length(self.params["max_length"])

    def _check_max_length(self, max_length: int) -> None:
        """The start token and ``max_length`` generated tokens are embedded: they need the positions."""
        if max_length + 1 > self.positions:
            raise ValueError(f"max_length {max_length} + 1 exceeds the encoder's {self.positions} positions")

    # ----------------------------------------------------------------------------------- construction
    @classmethod
    def _module(cls, encoder: nn.Module, p: dict[str, Any]) -> CodeXGlueSeq2Seq:
        return CodeXGlueSeq2Seq(
            encoder, p["decoder_layers"], p["decoder_ffn_dim"], p["decoder_dropout"], p["decoder_heads"]
        )

    @classmethod
    def build(cls, params: dict[str, Any], codes: Iterable[str], summaries: Iterable[str], seed: int) -> Summarizer:
        """The pretrained encoder and tokenizer of ``model_id`` (hub id or folder) and a decoder, dense
        layer initialised from ``seed`` (``codes`` / ``summaries`` are not read)."""
        from transformers import AutoTokenizer, RobertaModel

        from csbench.models.hf import _not_available

        p = cls.resolve_params(params)
        try:
            tokenizer = AutoTokenizer.from_pretrained(p["model_id"])
            encoder = RobertaModel.from_pretrained(p["model_id"], add_pooling_layer=False, dtype=torch.float32)
        except OSError as error:
            raise _not_available(p["model_id"], error) from error
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            module = cls._module(encoder, p)
        return cls(module, tokenizer, p)

    def save(self, directory: Path) -> None:
        directory = Path(directory)
        (directory / ENCODER_DIR).mkdir(parents=True, exist_ok=True)
        self.module.encoder.config.save_pretrained(directory / ENCODER_DIR)
        self.tokenizer.save_pretrained(directory / ENCODER_DIR)
        save_model(self.module, str(directory / WEIGHTS_FILE))  # shared lm_head / embeddings stored once
        self.write_manifest(directory)

    @classmethod
    def load(cls, directory: Path) -> Summarizer:
        from transformers import AutoTokenizer, RobertaConfig, RobertaModel

        directory = Path(directory)
        manifest = read_manifest(directory)
        source = directory / ENCODER_DIR
        if not (source / "config.json").is_file() or not (directory / WEIGHTS_FILE).is_file():
            raise FileNotFoundError(
                f"{directory} is not a saved roberta-decoder summarizer (needs {ENCODER_DIR}/ and {WEIGHTS_FILE})"
            )
        p = cls.resolve_params(manifest["params"])
        config = RobertaConfig.from_pretrained(source)
        module = cls._module(RobertaModel(config, add_pooling_layer=False), p)
        missing, unexpected = load_model(module, str(directory / WEIGHTS_FILE), strict=True)
        if missing or unexpected:
            raise ValueError(f"{directory / WEIGHTS_FILE}: missing {missing}, unexpected {unexpected}")
        return cls(module.eval(), AutoTokenizer.from_pretrained(source), p)

    # ----------------------------------------------------------------------------------- training
    def _wrap(self, texts: list[str], max_len: int) -> tuple[Tensor, Tensor]:
        """``<s> tokens[:max_len-2] </s>`` per text, padded: ids and mask (run.py lines 105-123)."""
        tok = self.tokenizer
        pieces = [tok.convert_tokens_to_ids(tok.tokenize(_collapse(text))[: max_len - 2]) for text in texts]
        rows = [[tok.cls_token_id, *piece, tok.sep_token_id] for piece in pieces]
        width = max(len(row) for row in rows)
        ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        return ids, mask

    def collate(self, codes: list[str], summaries: list[str]) -> dict[str, Tensor]:
        source_ids, source_mask = self._wrap(codes, self.params["max_source_len"])
        target_ids, target_mask = self._wrap(summaries, self.params["max_target_len"])
        labels = target_ids[:, 1:].masked_fill(target_mask[:, 1:] == 0, -100)
        return {
            "source_ids": source_ids,
            "source_mask": source_mask,
            "target_ids": target_ids,
            "target_mask": target_mask,
            "labels": labels,
        }

    def loss(self, module: nn.Module, batch: dict[str, Tensor], label_smoothing: float = 0.0) -> Tensor:
        device = next(module.parameters()).device
        names = ("source_ids", "source_mask", "target_ids", "target_mask")
        return module(*(batch[name].to(device) for name in names), smoothing=label_smoothing)

    # ----------------------------------------------------------------------------------- decoding protocol
    @property
    def decoder_start_id(self) -> int:
        return int(self.tokenizer.cls_token_id)

    @property
    def eos_id(self) -> int:
        return int(self.tokenizer.sep_token_id)

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def encode(self, codes: list[str]) -> RobertaDecoderState:
        source_ids, source_mask = self._wrap(codes, self.params["max_source_len"])
        source_ids, source_mask = source_ids.to(self.device), source_mask.to(self.device)
        memory = self.module.encode(source_ids, source_mask).permute(1, 0, 2).contiguous()
        return RobertaDecoderState(memory=memory, mask=source_mask)

    def step(self, state: RobertaDecoderState, prefix: Tensor) -> tuple[Tensor, RobertaDecoderState]:
        module = self.module
        prefix = prefix.to(state.memory.device)
        # the RoBERTa embedding of the whole prefix (positions depend on pads in it), last row kept
        new = module.encoder.embeddings(prefix)[:, -1:, :].permute(1, 0, 2)
        inputs = None if state.layer_inputs is None else [x.permute(1, 0, 2) for x in state.layer_inputs]
        memory = state.memory.permute(1, 0, 2)
        out, extended = module.step_layers(new, inputs, memory, (1 - state.mask).bool())
        logits = module.lm_head(torch.tanh(module.dense(out[0]))).float()
        layer_inputs = [x.permute(1, 0, 2) for x in extended]
        return logits, RobertaDecoderState(memory=state.memory, mask=state.mask, layer_inputs=layer_inputs)

    def generate(self, codes: list[str], decoding: Decoding) -> list[str]:
        """``beam_style`` ``hf``: :mod:`csbench.summarization.decode` (batched); ``codexglue``: their own
        beam search (:mod:`csbench.summarization.codexglue_beam`, one code at a time, ``max_length + 1``
        steps, no length penalty)."""
        self._check_max_length(decoding.max_length)
        if self.params["beam_style"] == "codexglue":
            from csbench.summarization.codexglue_beam import codexglue_beam_search

            return self.detokenize(codexglue_beam_search(self, codes, decoding.beam, decoding.max_length + 1))
        return super().generate(codes, decoding)

    def detokenize(self, ids: list[list[int]]) -> list[str]:
        texts = []
        for row in ids:
            start = self.decoder_start_id
            row = row[: row.index(start)] if start in row else row  # their cut at the first 0 (<s>)
            texts.append(self.tokenizer.decode(row, clean_up_tokenization_spaces=False).strip())
        return texts


SUMMARIZER = RobertaDecoderSummarizer
