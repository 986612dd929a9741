"""The dry-run estimate: counts, the cached share, requests, tokens (exact by the tokenizer, else
~chars/4) and cost; exact tokens equal what the server then bills."""

from __future__ import annotations

import json
import math

import pytest

from csbench.api.cache import ResponseCache
from csbench.api.client import ApiClient, chat_key
from csbench.api.estimate import Estimate, estimate_chat, estimate_embed
from csbench.api.limits import InputLimit
from csbench.api.settings import ApiSettings

TEXTS = [f"def function_{i}(x):\n    return x * {i}  # scale" for i in range(30)]


def test_embed_estimate_then_the_run_agrees(embedding_server, make_settings, api_cache, minilm_folder) -> None:
    settings = make_settings()
    limit = InputLimit(f"hf:{minilm_folder}", max_tokens=254)
    texts = TEXTS + TEXTS[:5]  # duplicates are counted once
    ApiClient(settings, api_cache).embed(TEXTS[:12], batch_size=8)  # 12 already cached
    estimate = estimate_embed(texts, limit, 8, api_cache, settings, price_per_mtok=0.10)
    assert (estimate.texts, estimate.unique, estimate.cached, estimate.to_send) == (35, 30, 12, 18)
    assert estimate.requests == math.ceil(18 / 8) and estimate.truncated == 0
    assert estimate.tokens_exact
    assert estimate.cost == pytest.approx(estimate.tokens / 1e6 * 0.10)
    assert api_cache.stats()["hits"] == 0  # the estimate reads the cache without counting
    embedding_server.reset()
    client = ApiClient(settings, api_cache)
    client.embed(limit.apply(texts)[0], batch_size=8)
    stats = embedding_server.stats()
    assert stats["requests"] == {"/v1/embeddings": estimate.requests}
    assert stats["inputs"] == {"/v1/embeddings": estimate.to_send}
    assert client.usage.prompt_tokens == estimate.tokens  # the server's count equals the estimate
    after = estimate_embed(texts, limit, 8, api_cache, settings)
    assert (after.cached, after.requests, after.tokens, after.cost) == (30, 0, 0, None)
    line = estimate.describe()
    assert "\n" not in line
    assert "35 inputs (30 distinct, 12 cached): 3 requests to send" in line and "(exact)" in line
    assert "cost $" in line
    assert json.dumps(estimate.as_dict())


def test_embed_estimate_without_tokenizer_is_approximate(tmp_path) -> None:
    settings = ApiSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=None)
    estimate = estimate_embed(["x" * 10, "y" * 7, "x" * 10], InputLimit(max_chars=8), 2, None, settings)
    assert (estimate.unique, estimate.truncated, estimate.tokens, estimate.tokens_exact) == (2, 2, 4, False)
    assert estimate.cost is None and "~chars/4" in estimate.describe() and "no price" in estimate.describe()
    assert estimate_embed([], None, 2, None, settings).requests == 0


def test_chat_estimate(tmp_path) -> None:
    settings = ApiSettings(base_url="http://127.0.0.1:9/v1", model="gpt-3.5-turbo", api_key_env=None)
    cache = ResponseCache(tmp_path / "cache")
    prompts = ["is this a match? yes or no" * 4, "another prompt", "another prompt", "third"]
    cache.put(chat_key(settings, "third", 10, None), json.dumps({"text": "Yes", "usage": {}}).encode())
    estimate = estimate_chat(prompts, None, 10, cache, settings, price_in=0.5, price_out=1.5)
    assert isinstance(estimate, Estimate)
    assert (estimate.texts, estimate.unique, estimate.cached, estimate.requests) == (4, 3, 1, 2)
    tokens = math.ceil(len(prompts[0]) / 4) + math.ceil(len(prompts[1]) / 4)
    assert estimate.tokens == tokens and estimate.output_tokens == 20
    assert estimate.cost == pytest.approx(tokens / 1e6 * 0.5 + 20 / 1e6 * 1.5)
    assert "at most 20 output tokens" in estimate.describe()
    # another temperature is another request: not cached
    assert estimate_chat(prompts, None, 10, cache, settings, temperature=0.0).cached == 0
    # no max_tokens: the output (and so the cost with an output price) is unknown
    open_ended = estimate_chat(prompts, None, None, cache, settings, price_in=0.5, price_out=1.5)
    assert open_ended.output_tokens is None and open_ended.cost is None
