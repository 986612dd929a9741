"""Tiny randomly initialised encoder-decoders for the summarization tests (no download): a T5 and a BART
for ``hf-seq2seq``, a RoBERTa encoder for ``roberta-decoder``, each with a byte-level BPE tokenizer trained
on the fly (RoBERTa's specials: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, as CodeBERT's; CodeT5's tokenizer is
the same kind) and saved to a folder that ``model_id`` names, as a downloaded checkpoint would be.

Texts come from TL-CodeSum's valid split beside the project when it is there, else from a few built-in
pairs (:func:`pairs`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tiny_models import byte_level_bpe

SHARED_TL = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tl_codesum"

_BUILTIN = [
    ("public int size ( ) { return count ; }", "returns the number of elements"),
    ("public void clear ( ) { items . clear ( ) ; count = 0 ; }", "removes all elements"),
    ("public boolean isEmpty ( ) { return count == 0 ; }", "returns true if empty"),
    ("public String getName ( ) { return name ; }", "returns the name"),
    ("public void setName ( String name ) { this . name = name ; }", "sets the name"),
    ("public void close ( ) throws IOException { stream . close ( ) ; }", "closes the stream"),
    ("public Object get ( int i ) { return items [ i ] ; }", "returns the element at the given index"),
    ("public void add ( Object o ) { items [ count ++ ] = o ; }", "adds an element"),
]


def pairs(n: int = 64) -> list[tuple[str, str]]:
    """``n`` (code, summary) pairs: TL-CodeSum valid lines when present, else the built-in ones repeated."""
    code_file, nl_file = SHARED_TL / "valid.token.code", SHARED_TL / "valid.token.nl"
    if code_file.is_file() and nl_file.is_file():
        out = []
        with code_file.open() as codes, nl_file.open() as summaries:
            for code, summary in zip(codes, summaries, strict=True):
                out.append((code.split("\t", 1)[1].strip(), summary.split("\t", 1)[1].strip()))
                if len(out) == n:
                    return out
    return [_BUILTIN[i % len(_BUILTIN)] for i in range(n)]


def _tokenizer(texts: list[str]):
    return byte_level_bpe(texts, vocab_size=300)


def tiny_t5_dir(folder: Path, texts: list[str], seed: int = 0) -> Path:
    """A random 2-layer T5 (d_model 32) with CodeT5's conventions (decoder starts at the pad id, EOS
    ``</s>``) and its tokenizer, saved to ``folder``."""
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer = _tokenizer(texts)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's RNG stream is left as it was
        torch.manual_seed(seed)
        model = T5ForConditionalGeneration(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_bart_dir(folder: Path, texts: list[str], seed: int = 0) -> Path:
    """A random 2+2-layer BART (d_model 32) and its tokenizer, saved to ``folder``; forced EOS is off
    (csbench's decoder applies no ``generation_config`` processors)."""
    from transformers import BartConfig, BartForConditionalGeneration

    tokenizer = _tokenizer(texts)
    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=160,
        init_std=0.2,  # tied output embeddings: 0.02 gives near-flat logits for long
        dropout=0.0,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's RNG stream is left as it was
        torch.manual_seed(seed)
        model = BartForConditionalGeneration(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_roberta_dir(folder: Path, texts: list[str], seed: int = 0) -> Path:
    """A random 2-layer RoBERTa encoder (hidden 32, 4 heads, 160 positions) and its tokenizer, saved to
    ``folder`` (what ``microsoft/codebert-base`` is, scaled down)."""
    from transformers import RobertaConfig, RobertaModel

    tokenizer = _tokenizer(texts)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=160,
        initializer_range=0.3,  # tanh(dense) feeds the tied lm_head: 0.02 gives near-flat logits for long
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):  # the caller's RNG stream is left as it was
        torch.manual_seed(seed)
        model = RobertaModel(config, add_pooling_layer=False)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def teach(summarizer, data: list[tuple[str, str]], steps: int = 40, lr: float = 3e-3, seed: int = 0) -> None:
    """A few Adam steps of teacher forcing on ``data`` so that the model emits EOS at varied lengths
    (a random model rarely ends: beam search's finished-hypothesis book-keeping would go untested)."""
    module = summarizer.module
    module.train()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(module.parameters(), lr=lr)
    for _ in range(steps):
        chosen = torch.randperm(len(data), generator=generator)[:16].tolist()
        batch = summarizer.collate([data[i][0] for i in chosen], [data[i][1] for i in chosen])
        loss = summarizer.loss(module, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    module.eval()


def short_pairs(n: int = 64) -> list[tuple[str, str]]:
    """:func:`pairs` with summaries cut to their first 1, 2 or 3 words: a tiny model learns to end them
    within a few dozen steps, so generations stop at varied lengths."""
    return [(code, " ".join(summary.split()[: 1 + i % 3])) for i, (code, summary) in enumerate(pairs(n))]


def tiny_summarizer(kind: str, folder: Path, taught: bool = True, **params):
    """A built summarizer of ``kind`` (``t5``, ``bart``: architecture hf-seq2seq; ``roberta``:
    roberta-decoder with a 2-layer decoder) whose ``model_id`` is a tiny model saved to ``folder``;
    ``taught``: after :func:`teach` on :func:`short_pairs`."""
    from csbench.summarization.models import build_summarizer

    data = pairs(64)
    texts = [code for code, _ in data] + [summary for _, summary in data]
    if kind == "roberta":
        base = {
            "architecture": "roberta-decoder",
            "model_id": str(tiny_roberta_dir(folder, texts)),
            "decoder_layers": 2,
            "decoder_ffn_dim": 64,
            "decoder_dropout": 0.0,
            "max_target_len": 32,
        }
    else:
        make = {"t5": tiny_t5_dir, "bart": tiny_bart_dir}[kind]
        base = {"architecture": "hf-seq2seq", "model_id": str(make(folder, texts))}
    summarizer = build_summarizer({**base, "max_source_len": 64, **params}, [], [], seed=0)
    if taught:
        teach(summarizer, short_pairs(), steps=60, lr=5e-3)
    return summarizer


def code_lines(start: int = 1000, n: int = 16) -> list[str]:
    """``n`` real code inputs (TL-CodeSum valid lines from ``start``; the built-in ones when absent)."""
    return [code for code, _ in pairs(start + n)[start:]]
