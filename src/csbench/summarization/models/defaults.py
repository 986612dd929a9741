"""The parameters of the registered summarization models (family ``seq2seq``), as plain data.

Kept apart from the model modules (which import torch) so that validating a config never imports torch.
``SEQ2SEQ_DEFAULTS`` are shared by every model, ``SEQ2SEQ_MODELS[name]`` are a model's own, and
``SEQ2SEQ_PARAMS`` declares, per parameter, the JSON-schema keywords its default does not imply.
"""

from __future__ import annotations

from typing import Any

_POSITIVE = {"minimum": 1}

# Shared by every architecture: what is read, what is generated, how.
SEQ2SEQ_DEFAULTS: dict[str, Any] = {
    "max_source_len": 256,  # code tokens fed to the encoder (CodeXGLUE code-to-text: 256)
    "max_target_len": 128,  # summary tokens trained on (CodeXGLUE: 128)
    "max_code_chars": 100_000,  # longer code is a counted skip, never fed
    "beam": 10,  # beam size at test time (CodeXGLUE: 10); 1 = greedy
    "max_length": 128,  # generated summary tokens at most (EOS excluded)
    "length_penalty": 1.0,
    "decode_batch_size": 32,
}

# The training regime of every summarizer (csbench.train.summarizer.Seq2SeqTrainConfig), overlaid by
# SEQ2SEQ_MODELS[name]["training"], then by the config's models.<name>.training (the COBE regime under
# `training:` is for bi-encoders).
SEQ2SEQ_TRAINING: dict[str, Any] = {
    "optimizer": "adamw",
    "lr": 5e-5,  # CodeXGLUE code-to-text's run.py
    "epochs": 10,
    "batch_size": 32,
    "validations_per_epoch": 1,
    "patience": 3,
    "metric": "bleu",  # early stopping on validation smoothed BLEU-4 (greedy); or "loss"
}

# The from-scratch Transformer's own parameters (architecture ``transformer``): a small encoder-decoder
# (pre-norm, learned positions, tied output embedding) over CodeSearchNet-style vocabularies.
TRANSFORMER_DEFAULTS: dict[str, Any] = {
    "d_model": 256,
    "encoder_layers": 3,
    "decoder_layers": 3,
    "heads": 4,
    "ff_dim": 1024,
    "dropout": 0.1,
    "code_vocab_size": 10_000,  # code subtokens (WordLevel, most frequent first; CodeSearchNet: 10,000)
    "code_min_count": 2,
    "code_punctuation": True,  # keep punctuation / operator tokens in the code input
    "summary_vocab_size": 8_000,  # BPE pieces of the summaries (specials and alphabet included)
    "summary_min_count": 2,
    "tie_embeddings": True,  # the output projection is the summary embedding
}

SEQ2SEQ_MODELS: dict[str, dict[str, Any]] = {
    # from scratch: code subtokens in, BPE summary pieces out (vocabularies learnt on the train split)
    # trained from scratch: a higher lr with warm-up than fine-tuning's (measured on TL-CodeSum:
    # benchmarks/bench_summarizer_tlcodesum.py)
    "transformer-sum": {
        "architecture": "transformer",
        **TRANSFORMER_DEFAULTS,
        "training": {
            "lr": 1e-3,
            "weight_decay": 0.01,
            "schedule_params": {"warmup_steps": 100},
            "epochs": 30,
            "patience": 5,
            "label_smoothing": 0.1,
        },
    },
    # CodeXGLUE code-to-text (Code-Text/code-to-text/code/run.py): CodeBERT encoder + 6-layer decoder
    # (source 256 / target 128 / beam 10 / lr 5e-5 / batch 32 / 10 epochs: the shared defaults; max_length
    # 127: their 128 decoding steps, the EOS among them; the decoder as run.py builds it: 6 layers, the
    # encoder's heads, nn.TransformerDecoderLayer's feed-forward 2048 and dropout 0.1)
    "codebert-sum": {
        "architecture": "roberta-decoder",
        "model_id": "microsoft/codebert-base",
        "max_length": 127,
        "decoder_layers": 6,
        "decoder_heads": None,
        "decoder_ffn_dim": 2048,
        "decoder_dropout": 0.1,
        "beam_style": "hf",  # csbench's decoder (generate's search); "codexglue": their Beam class
    },
    # CodeT5 fine-tuned for summarization (CodeT5's own recipe: source 256, target 128)
    # (CodeT5's single-task fine-tuning feeds the code with no task prefix)
    "codet5-sum": {
        "architecture": "hf-seq2seq",
        "model_id": "Salesforce/codet5-base",
        "source_prefix": "",
        "trust_remote_code": False,
    },
    # released already fine-tuned on CodeSearchNet's six languages: evaluated zero-shot
    "codet5-multi-sum": {
        "architecture": "hf-seq2seq",
        "model_id": "Salesforce/codet5-base-multi-sum",
        "source_prefix": "",
        "trust_remote_code": False,
    },
}

SEQ2SEQ_PARAMS: dict[str, dict[str, Any]] = {
    "architecture": {"enum": ["transformer", "hf-seq2seq", "roberta-decoder"]},
    "max_source_len": _POSITIVE,
    "max_target_len": _POSITIVE,
    "max_code_chars": _POSITIVE,
    "beam": _POSITIVE,
    "max_length": _POSITIVE,
    "decode_batch_size": _POSITIVE,
    "model_id": {"type": ["string", "null"], "minLength": 1, "description": "hub id or local folder"},
    # architecture transformer
    "d_model": _POSITIVE,
    "encoder_layers": _POSITIVE,
    "decoder_layers": _POSITIVE,
    "heads": _POSITIVE,
    "ff_dim": _POSITIVE,
    "dropout": {"minimum": 0, "exclusiveMaximum": 1},
    "code_vocab_size": {"minimum": 3},
    "code_min_count": _POSITIVE,
    "code_punctuation": {"type": "boolean"},
    "summary_vocab_size": {"minimum": 5},
    "summary_min_count": _POSITIVE,
    "tie_embeddings": {"type": "boolean"},
    # architecture hf-seq2seq
    "source_prefix": {"type": "string"},  # prepended to every code ("summarize: " for a multi-task T5)
    "trust_remote_code": {"type": "boolean"},
    # architecture roberta-decoder (decoder_layers: above)
    "decoder_heads": {"type": ["integer", "null"], "minimum": 1},  # null: the encoder's attention heads
    "decoder_ffn_dim": _POSITIVE,
    "decoder_dropout": {"minimum": 0, "exclusiveMaximum": 1},
    "beam_style": {"enum": ["hf", "codexglue"]},  # csbench's decode (HF generate) or CodeXGLUE's Beam
}
