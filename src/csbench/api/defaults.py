"""The parameters of the API model families (plain data, no import beyond the stdlib).

- ``api``: an embedding endpoint (``POST {base_url}/embeddings``) used as a zero-shot bi-encoder:
  queries and codes are embedded, candidates ranked by cosine (GeCS section 5: OpenAI
  ``text-embedding-ada-002``, "Ada 2", cosine similarity, zero-shot).
- ``llm``: a chat endpoint (``POST {base_url}/chat/completions``) answering GeCS's match / no-match
  prompt (Appendix A.3.2) for each (query, code) pair of the ``matching`` protocol (GeCS: GPT-3.5
  Turbo, default parameters except at most 10 output tokens).

Both speak the OpenAI HTTP API, which OpenAI and the local servers labs run (vLLM,
text-embeddings-inference, infinity, llama.cpp, Ollama, ``transformers serve``) share. A config
adds any other endpoint as a model of these families:
``models: {my-emb: {family: api, model: <server's model name>, base_url: http://host:port/v1}}``.

Prices are what OpenAI listed for these models (US dollars per million tokens, checked 2026-11); they
only feed the dry-run estimate (``csbench api-estimate``): set your own with ``price_per_mtok`` /
``price_in_per_mtok`` / ``price_out_per_mtok``, or null for no cost line.
"""

from __future__ import annotations

from typing import Any

_NULLABLE_STRING = {"type": ["string", "null"], "minLength": 1}
_NULLABLE_POSITIVE_INT = {"type": ["integer", "null"], "minimum": 1}
_NULLABLE_PRICE = {"type": ["number", "null"], "minimum": 0}

# What every endpoint model has: where, how, and the client's limits (csbench.api.settings.ApiSettings).
ENDPOINT_DEFAULTS: dict[str, Any] = {
    "base_url": "https://api.openai.com/v1",
    "model": None,  # the model's name on the server (required)
    "api_key_env": "OPENAI_API_KEY",  # the NAME of the variable holding the key; null: the server needs none
    "revision": None,  # a model revision you pin: part of the cache key (a new revision asks again)
    "timeout_s": 60.0,
    "max_retries": 6,
    "backoff_s": 1.0,
    "backoff_max_s": 60.0,
    "concurrency": 4,  # requests in flight at once
    # input length, enforced as the provider does: truncated by the model's tokenizer where known
    # ("hf:<hub id or folder>", "tiktoken:<encoding>"), else cut at max_input_chars; counted per run
    "tokenizer": None,
    "max_input_tokens": None,
    "max_input_chars": None,
}

ENDPOINT_PARAMS: dict[str, dict[str, Any]] = {
    "base_url": {"type": "string", "pattern": "^https?://"},
    "model": _NULLABLE_STRING,
    "api_key_env": {"type": ["string", "null"], "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "revision": _NULLABLE_STRING,
    "timeout_s": {"exclusiveMinimum": 0},
    "max_retries": {"minimum": 0},
    "backoff_s": {"minimum": 0},
    "backoff_max_s": {"minimum": 0},
    "concurrency": {"minimum": 1},
    "tokenizer": {"type": ["string", "null"], "pattern": "^(hf|tiktoken):.+"},
    "max_input_tokens": _NULLABLE_POSITIVE_INT,
    "max_input_chars": _NULLABLE_POSITIVE_INT,
}

API_DEFAULTS: dict[str, Any] = {
    **ENDPOINT_DEFAULTS,
    "batch_size": 256,  # inputs per embedding request (OpenAI accepts up to 2048)
    "similarity": "cosine",
    "price_per_mtok": None,
}
API_PARAMS: dict[str, dict[str, Any]] = {
    **ENDPOINT_PARAMS,
    "batch_size": {"minimum": 1},
    "similarity": {"enum": ["cosine", "dot"]},
    "price_per_mtok": _NULLABLE_PRICE,
}

LLM_DEFAULTS: dict[str, Any] = {
    **ENDPOINT_DEFAULTS,
    "max_tokens": 10,  # GeCS: "default parameters, except for limit of 10 output tokens"
    "temperature": None,  # null: left out of the request (the server's default, as GeCS used)
    "prompt": None,  # null: the dataset's GeCS prompt (csbench.api.prompts); else a prompt's name
    "price_in_per_mtok": None,
    "price_out_per_mtok": None,
}
LLM_PARAMS: dict[str, dict[str, Any]] = {
    **ENDPOINT_PARAMS,
    "max_tokens": _NULLABLE_POSITIVE_INT,
    "temperature": {"type": ["number", "null"], "minimum": 0, "maximum": 2},
    "prompt": _NULLABLE_STRING,
    "price_in_per_mtok": _NULLABLE_PRICE,
    "price_out_per_mtok": _NULLABLE_PRICE,
}

# The registered models: name -> the parameters that differ from the family's defaults.
API_MODELS: dict[str, dict[str, Any]] = {
    "ada-2": {
        "model": "text-embedding-ada-002",
        "tokenizer": "tiktoken:cl100k_base",
        "max_input_tokens": 8191,
        "price_per_mtok": 0.10,
    },
}
LLM_MODELS: dict[str, dict[str, Any]] = {
    "gpt-3.5-turbo": {
        "model": "gpt-3.5-turbo",
        "tokenizer": "tiktoken:cl100k_base",
        "max_input_tokens": 16375,  # gpt-3.5-turbo-0125's 16,385-token context less the 10 output tokens
        "price_in_per_mtok": 0.50,
        "price_out_per_mtok": 1.50,
    },
}
