"""ApiClient through the real loopback server: embeddings equal the model's, per-text cache, batching,
duplicates, concurrency, every fault retried or failed clearly with nothing half-written, a killed run
re-sending only what was not cached, chat through the forwarding layer, and the key never written."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from openai_test_server import OpenAITestServer

from csbench.api.cache import ResponseCache
from csbench.api.client import (
    ApiClient,
    ApiError,
    MissingKeyError,
    embedding_key,
    parse_retry_after,
    redact,
)
from csbench.api.settings import ApiSettings

SRC = str(Path(__file__).resolve().parents[2] / "src")
TEXTS = ["how to sort a list", "def add(a, b):\n    return a + b", "read a file line by line",
         "class Stack:\n    def push(self, x):\n        self.items.append(x)", "parse json from a string"]


def cached_keys(cache: ResponseCache, settings: ApiSettings, texts: list[str]) -> set[str]:
    return {text for text in texts if cache.contains(embedding_key(settings, text))}


# -- the happy path ---------------------------------------------------------------------------------
def test_embed_equals_the_model_in_input_order(embedding_server: OpenAITestServer, make_settings, api_cache) -> None:
    client = ApiClient(make_settings(), api_cache)
    vectors = client.embed(TEXTS, batch_size=2)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 384)
    np.testing.assert_allclose(vectors, embedding_server.embed_direct(TEXTS), atol=1e-6)
    stats = embedding_server.stats()
    assert stats["requests"] == {"/v1/embeddings": 3} and stats["inputs"] == {"/v1/embeddings": 5}
    tokens = sum(len(ids) for ids in embedding_server._server.model.tokenizer(
        TEXTS, add_special_tokens=False)["input_ids"])
    usage = client.usage.as_dict()
    assert usage == {"requests": 3, "attempts": 3, "retries": 0, "cache_hits": 0, "cache_misses": 5,
                     "prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens, "cached_tokens": 0}
    # the second run is answered by the cache: no request, the stored tokens under cached_tokens
    embedding_server.reset()
    again = ApiClient(make_settings(), api_cache)
    np.testing.assert_array_equal(again.embed(TEXTS, batch_size=2), vectors)
    assert embedding_server.stats()["requests"] == {}
    assert again.usage.as_dict() | {} == {"requests": 0, "attempts": 0, "retries": 0, "cache_hits": 5,
                                          "cache_misses": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                          "total_tokens": 0, "cached_tokens": tokens}


def test_cache_is_per_text_and_duplicates_are_sent_once(embedding_server, make_settings, api_cache) -> None:
    settings = make_settings()
    ApiClient(settings, api_cache).embed(TEXTS[:2])
    embedding_server.reset()
    client = ApiClient(settings, api_cache)
    texts = [TEXTS[1], TEXTS[2], TEXTS[2], TEXTS[0], TEXTS[3], TEXTS[2]]  # a second pool sharing two texts
    vectors = client.embed(texts, batch_size=1)
    assert embedding_server.stats()["inputs"] == {"/v1/embeddings": 2}  # TEXTS[2] and TEXTS[3], once each
    assert client.usage.cache_hits == 2 and client.usage.cache_misses == 2
    np.testing.assert_allclose(vectors, embedding_server.embed_direct(texts), atol=1e-6)
    # the single-text body is the key: batching does not change what is cached
    assert cached_keys(api_cache, settings, TEXTS) == set(TEXTS[:4])


def test_batches_and_concurrency(embedding_server, make_settings) -> None:
    texts = [f"text number {i}" for i in range(23)]
    embedding_server.add_faults(*[{"kind": "slow", "seconds": 0.3}] * 6)  # requests overlap in time
    client = ApiClient(make_settings(concurrency=3), None)
    vectors = client.embed(texts, batch_size=4)
    stats = embedding_server.stats()
    assert stats["requests"] == {"/v1/embeddings": math.ceil(23 / 4)}
    assert stats["max_in_flight"] == 3
    np.testing.assert_allclose(vectors, embedding_server.embed_direct(texts), atol=1e-6)
    assert client.embed([]).shape == (0, 0)


def test_server_base64_answers_equal_float(embedding_server) -> None:
    def post(encoding: str) -> dict:
        body = json.dumps({"model": embedding_server.model_name, "input": TEXTS[:2], "encoding_format": encoding})
        request = urllib.request.Request(f"{embedding_server.base_url}/embeddings", body.encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    import base64

    floats = np.array([item["embedding"] for item in post("float")["data"]], dtype=np.float32)
    b64 = np.stack([np.frombuffer(base64.b64decode(item["embedding"]), "<f4") for item in post("base64")["data"]])
    np.testing.assert_array_equal(floats, b64)
    with urllib.request.urlopen(f"{embedding_server.base_url}/models", timeout=10) as response:
        assert json.load(response)["data"][0]["id"] == embedding_server.model_name
    with urllib.request.urlopen(f"{embedding_server.root}/_stats", timeout=10) as response:
        assert json.load(response)["requests"]["/v1/embeddings"] == 2


def test_progress_bar(embedding_server, make_settings, capsys) -> None:
    ApiClient(make_settings(), None, progress=True).embed(TEXTS)
    assert "text" in capsys.readouterr().err


# -- faults -----------------------------------------------------------------------------------------
FAULTS = {
    "429": {"kind": "status", "status": 429, "retry_after": "0"},
    "500": {"kind": "status", "status": 500},
    "503": {"kind": "status", "status": 503},
    "drop": {"kind": "drop"},
    "slow": {"kind": "slow", "seconds": 4.0},
    "malformed": {"kind": "malformed"},
}
# the timeout: past it for a slow answer, far from it for a normal one (a busy 2-core machine)
TIMEOUTS = {"slow": 1.5}
CAUSES = {"429": "HTTP 429", "500": "HTTP 500", "503": "HTTP 503", "drop": "connection error",
          "slow": "timed out", "malformed": "malformed JSON"}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_retried_then_succeeds(embedding_server, make_settings, api_cache, fault: str) -> None:
    embedding_server.add_faults(FAULTS[fault], FAULTS[fault])
    settings = make_settings(timeout_s=TIMEOUTS.get(fault, 20.0))
    client = ApiClient(settings, api_cache)
    vectors = client.embed(TEXTS[:3])
    np.testing.assert_allclose(vectors, embedding_server.embed_direct(TEXTS[:3]), atol=1e-6)
    assert embedding_server.stats()["requests"] == {"/v1/embeddings": 3}
    assert (client.usage.attempts, client.usage.retries, client.usage.requests) == (3, 2, 1)
    assert cached_keys(api_cache, settings, TEXTS) == set(TEXTS[:3])


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_fails_clearly_after_max_retries_and_caches_only_answered_batches(
        embedding_server, make_settings, api_cache, fault: str) -> None:
    settings = make_settings(timeout_s=TIMEOUTS.get(fault, 20.0), max_retries=2, concurrency=1)
    # batches 1 and 2 are answered, batch 3 fails three times (the first try and two retries)
    embedding_server.add_faults({"kind": "none"}, {"kind": "none"}, *[FAULTS[fault]] * 3)
    client = ApiClient(settings, api_cache)
    with pytest.raises(ApiError) as caught:
        client.embed(TEXTS, batch_size=1)
    message = str(caught.value)
    assert f"{embedding_server.base_url}/embeddings" in message
    assert repr(embedding_server.model_name) in message
    assert CAUSES[fault] in message and "after 3 attempts" in message
    assert caught.value.__cause__ is None  # the openai exception (it holds the request) is not attached
    # one request at a time: nothing is sent after batch 3 failed (CI once saw 7 requests here, when
    # jobs were only cancelled from the caller's thread, racing with the worker)
    stats = embedding_server.stats()
    assert stats["requests"]["/v1/embeddings"] == 5 and client.usage.retries == 2
    assert client.usage.attempts == stats["requests"]["/v1/embeddings"]
    cached = cached_keys(api_cache, settings, TEXTS)
    assert set(TEXTS[:2]) <= cached and TEXTS[2] not in cached and TEXTS[4] not in cached
    # every text answered is cached (a slow answer the client gave up on is answered too late)
    answered = stats["inputs"]["/v1/embeddings"]
    assert len(cached) == answered if fault != "slow" else len(cached) <= answered
    for text, vector in zip(TEXTS[:2], embedding_server.embed_direct(TEXTS[:2]), strict=True):
        np.testing.assert_allclose(ApiClient(settings, api_cache).embed([text])[0], vector, atol=1e-6)


def test_other_4xx_fail_at_once(embedding_server, make_settings, api_cache) -> None:
    embedding_server.add_faults({"kind": "status", "status": 400})
    client = ApiClient(make_settings(), api_cache)
    with pytest.raises(ApiError, match=r"after 1 attempt: HTTP 400"):
        client.embed(TEXTS[:1])
    with pytest.raises(ApiError, match=r"model 'no-such-model'.*after 1 attempt: HTTP 404: The model"):
        ApiClient(make_settings(model="no-such-model"), api_cache).embed(TEXTS[:1])
    assert embedding_server.stats()["requests"] == {"/v1/embeddings": 2}
    assert api_cache.stored_keys() == []


def test_wrong_answer_shape_fails_and_caches_nothing(embedding_server, make_settings, api_cache) -> None:
    embedding_server.add_faults({"kind": "wrong_count"})
    with pytest.raises(ApiError, match="invalid answer: 2 embeddings for 3 inputs"):
        ApiClient(make_settings(), api_cache).embed(TEXTS[:3])
    assert api_cache.stored_keys() == []


def test_retry_after_is_honoured_seconds_and_date(embedding_server, make_settings) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    embedding_server.add_faults({"kind": "status", "status": 429, "retry_after": "0.25"},
                                {"kind": "status", "status": 503, "retry_after": later})
    client = ApiClient(make_settings(backoff_s=0.001, backoff_max_s=5.0), None)
    delays: list[float] = []
    client._sleep = delays.append
    client.embed(TEXTS[:1])
    assert delays[0] == 0.25
    assert delays[1] == 5.0  # an HTTP date 30 s ahead, capped by backoff_max_s
    # through the real sleep: the 429's wait is observed
    embedding_server.add_faults({"kind": "status", "status": 429, "retry_after": "0.3"})
    start = time.perf_counter()
    ApiClient(make_settings(backoff_s=0.001), None).embed(TEXTS[1:2])
    assert time.perf_counter() - start >= 0.3


def test_parse_retry_after_and_full_jitter_backoff() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2026 07:28:10 GMT"},
                             now=datetime(2026, 10, 21, 7, 28, 0, tzinfo=UTC).timestamp()) == 10.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    client = ApiClient(ApiSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=None,
                                   backoff_s=1.0, backoff_max_s=5.0), None)
    client._random.seed(0)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        draws = [client._backoff(retry, None) for _ in range(200)]
        assert min(draws) >= 0 and max(draws) <= ceiling and max(draws) > ceiling / 2
    assert client._backoff(1, 30.0) == 5.0  # Retry-After capped by backoff_max_s


def test_killed_run_resends_only_what_was_not_cached(embedding_server, make_settings, tmp_path) -> None:
    texts = [f"function number {i} returns {i * 7 % 13}" for i in range(2000)]
    directory = tmp_path / "cache"
    settings = make_settings(concurrency=2)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from csbench.api import ApiClient, ApiSettings, ResponseCache
        settings = ApiSettings(base_url={settings.base_url!r}, model={settings.model!r}, api_key_env=None,
                               concurrency=2)
        texts = [f"function number {{i}} returns {{i * 7 % 13}}" for i in range(2000)]
        ApiClient(settings, ResponseCache({str(directory)!r})).embed(texts, batch_size=50)
        print("FINISHED", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(ResponseCache(directory).stored_keys()) < 6 * 50:
            assert child.poll() is None and time.monotonic() < deadline, "the child ended or stalled"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    cache = ResponseCache(directory)
    cached = cached_keys(cache, settings, texts)
    assert 6 * 50 <= len(cached) < 2000
    embedding_server.reset()
    client = ApiClient(settings, cache)
    vectors = client.embed(texts, batch_size=50)
    assert embedding_server.stats()["inputs"] == {"/v1/embeddings": 2000 - len(cached)}
    assert client.usage.cache_hits == len(cached) and cache.stats()["corrupt_removed"] == 0
    sample = list(range(0, 2000, 97))
    np.testing.assert_allclose(vectors[sample], embedding_server.embed_direct([texts[i] for i in sample]),
                               atol=1e-6)


def test_a_failing_cache_does_not_fail_the_run(embedding_server, make_settings, api_cache, monkeypatch) -> None:
    import errno

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.warns(RuntimeWarning, match="going on without caching"):
        vectors = ApiClient(make_settings(), api_cache).embed(TEXTS, batch_size=2)
    np.testing.assert_allclose(vectors, embedding_server.embed_direct(TEXTS), atol=1e-6)
    assert api_cache.stored_keys() == []


# -- chat through the forwarding layer ---------------------------------------------------------------
class _ChatUpstream(BaseHTTPRequestHandler):
    """A stand-in chat server (the real one, transformers serve, is the chat tests' own): answers
    "Yes" when the prompt holds "match", and echoes the parameters it was given."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatUpstream.seen.append(body)
        prompt = body["messages"][0]["content"]
        answer = {"choices": [{"index": 0, "message": {"role": "assistant",
                                                       "content": "Yes" if "match" in prompt else "No"},
                               "finish_reason": "stop"}],
                  "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": 1,
                            "total_tokens": len(prompt.split()) + 1}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def chat_upstream(embedding_server: OpenAITestServer) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatUpstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _ChatUpstream.seen = []
    embedding_server.upstream = f"http://127.0.0.1:{server.server_address[1]}"
    yield embedding_server.upstream
    server.shutdown()
    server.server_close()


def test_chat_through_the_forwarding_layer(embedding_server, chat_upstream, make_settings, api_cache) -> None:
    settings = make_settings(model="tiny-chat")
    prompts = ["does this match?", "no way", "does this match?", "third one"]
    embedding_server.add_faults(FAULTS["500"], FAULTS["drop"], FAULTS["malformed"])
    client = ApiClient(settings, api_cache)
    assert client.chat(prompts) == ["Yes", "No", "Yes", "No"]
    assert embedding_server.stats()["answered"] == {"/v1/chat/completions": 3}  # duplicates sent once
    assert client.usage.retries == 3 and client.usage.completion_tokens == 3
    assert all(seen["max_tokens"] == 10 and "temperature" not in seen for seen in _ChatUpstream.seen)
    embedding_server.reset()
    again = ApiClient(settings, api_cache)
    assert again.chat(prompts) == ["Yes", "No", "Yes", "No"]
    assert embedding_server.stats()["requests"] == {} and again.usage.cache_hits == 3
    assert again.usage.cached_tokens == client.usage.total_tokens
    # other parameters are other requests (other cache keys); None leaves them out of the body
    ApiClient(settings, api_cache).chat(prompts[:1], max_tokens=None, temperature=0.0)
    assert "max_tokens" not in _ChatUpstream.seen[-1] and _ChatUpstream.seen[-1]["temperature"] == 0.0


def test_chat_failure_is_clear(embedding_server, chat_upstream, make_settings, api_cache) -> None:
    embedding_server.add_faults(*[FAULTS["429"]] * 2)
    with pytest.raises(ApiError, match=r"chat completion failed at .*/chat/completions \(model 'tiny-chat'\) "
                                       r"after 2 attempts: HTTP 429"):
        ApiClient(make_settings(model="tiny-chat", max_retries=1), api_cache).chat(["a prompt"])
    assert api_cache.stored_keys() == []


# -- the key ------------------------------------------------------------------------------------------
def test_missing_key_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv("CSBENCH_TEST_NO_SUCH_KEY", raising=False)
    settings = ApiSettings(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="CSBENCH_TEST_NO_SUCH_KEY")
    with pytest.raises(MissingKeyError, match=r"CSBENCH_TEST_NO_SUCH_KEY.*api_key_env: null"):
        ApiClient(settings, None)
    monkeypatch.setenv("CSBENCH_TEST_NO_SUCH_KEY", "  ")
    with pytest.raises(MissingKeyError):
        ApiClient(settings, None)


def test_redact() -> None:
    from csbench.api.client import register_secret

    register_secret("plain-secret-value-123")
    assert redact("x plain-secret-value-123 y") == "x *** y"
    assert redact("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert redact("Incorrect API key provided: sk-proj-AbC123456789xyz.") == "Incorrect API key provided: ***."


def test_the_key_never_appears_anywhere(embedding_server, chat_upstream, make_settings, tmp_path, monkeypatch,
                                        caplog, capsys) -> None:
    fake_key = "sk-csbench-FAKE-KEY-7f3a9c21e4b8"
    fake_key_plain = "csbench-plain-FAKE-KEY-00c0ffee"  # not sk- shaped: found only through registration
    monkeypatch.setenv("CSBENCH_TEST_API_KEY", fake_key)
    caplog.set_level(logging.DEBUG)  # every logger, openai's and httpx's included
    cache = ResponseCache(tmp_path / "cache")
    texts_seen: list[str] = []

    def expect_failure(run: Callable[[], object]) -> None:
        with pytest.raises(Exception) as caught:
            run()
        texts_seen.append("".join(traceback.format_exception(caught.value)))
        texts_seen.append(repr(caught.value))

    embedding_server.api_key = fake_key
    settings = make_settings(api_key_env="CSBENCH_TEST_API_KEY", timeout_s=1.5, max_retries=1)
    client = ApiClient(settings, cache, progress=True)
    client.embed(TEXTS[:2])  # the key is accepted: answers are cached
    client.chat(["does this match?"])
    for fault in FAULTS.values():  # each fault, past the retries
        embedding_server.add_faults(fault, fault)
        expect_failure(lambda: client.embed([f"new text {len(texts_seen)}"]))
        embedding_server.add_faults(fault, fault)
        expect_failure(lambda: client.chat([f"new prompt {len(texts_seen)}"]))
    embedding_server.add_faults({"kind": "wrong_count"})
    expect_failure(lambda: client.embed(["x", "y"]))
    # a missing model
    expect_failure(lambda: ApiClient(make_settings(api_key_env="CSBENCH_TEST_API_KEY", model="no-model"),
                                     cache).embed(["z"]))
    # a 401: the server echoes the (wrong) key it received
    for key in (fake_key, fake_key_plain):
        monkeypatch.setenv("CSBENCH_TEST_API_KEY", key)
        embedding_server.api_key = "the-right-key"
        wrong = ApiClient(settings, cache)
        expect_failure(lambda w=wrong: w.embed(["401 text"]))
        expect_failure(lambda w=wrong: w.chat(["401 prompt"]))
    assert any("HTTP 401: Incorrect API key provided: ***" in text for text in texts_seen)
    # a missing key
    monkeypatch.delenv("CSBENCH_TEST_API_KEY")
    expect_failure(lambda: ApiClient(settings, cache))

    captured = capsys.readouterr()
    outputs = {"exceptions": "\n".join(texts_seen), "stdout": captured.out, "stderr": captured.err,
               "log": "\n".join(f"{r.name} {r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records)}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 3 and caplog.records
    for key in (fake_key, fake_key_plain):
        for name, text in outputs.items():
            assert key not in text, f"the key is in the {name}"
        for path in files:
            assert key.encode() not in path.read_bytes(), f"the key is in {path}"
    assert embedding_server.stats()["requests"]["/v1/embeddings"] > 10  # the server did see the requests
