"""The client for OpenAI-compatible endpoints: cached, batched, concurrent embeddings and chat answers.

Built on the official ``openai`` client with ``max_retries=0``: the retry loop is ours, so every attempt
is counted and ``Retry-After`` is honoured. Retried: HTTP 429 and 5xx, connection errors (a dropped
connection), timeouts and 200 answers whose body is not JSON; waits double from ``backoff_s`` with full
jitter (a uniform draw below the doubled wait, capped at ``backoff_max_s``), or the server's
``Retry-After`` (seconds or an HTTP date; also ``retry-after-ms``) capped at ``backoff_max_s``. Other 4xx
(a wrong key, a missing model, a bad request) and answers of the wrong shape fail at once. Failures are
an :class:`ApiError` naming the URL, the model, the cause and the attempts.

The API key is read from the environment variable the settings name, once, when the client is built,
and is never written anywhere: every message this module raises or logs goes through :func:`redact`,
and a failure is raised without its ``openai`` exception attached (that one carries the request, and
a careless server may echo the key in its body).
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import openai

from csbench.api.cache import ResponseCache, cache_key
from csbench.api.settings import ApiSettings

logger = logging.getLogger("csbench.api")
# the HTTP layer under the openai client logs every request at INFO: thousands of lines a run (this
# client counts requests, retries and cache hits itself, and the runs record them in provenance)
for _name in ("httpx", "httpx2", "openai"):
    logging.getLogger(_name).setLevel(logging.WARNING)

NO_KEY_PLACEHOLDER = "no-key"  # sent as the key when api_key_env is None (the openai client wants one)
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
# Bearer tokens and OpenAI-style keys, redacted even when they are not the key this process read
_KEY_PATTERNS = re.compile(r"(?i)(bearer\s+)[^\s\"',]+|\bsk-[A-Za-z0-9_\-]{8,}")


class ApiError(RuntimeError):
    """A request that failed for good (after its retries, or at once for a non-retryable answer)."""


class MissingKeyError(ApiError):
    """The environment variable that should hold the API key is not set (or empty)."""


def register_secret(value: str) -> None:
    """Make :func:`redact` remove ``value`` from every message from now on."""
    if value:
        with _SECRETS_LOCK:
            _SECRETS.add(value)


def redact(text: object) -> str:
    """``str(text)`` with every registered key, bearer token and ``sk-...`` key replaced by ``***``."""
    out = str(text)
    with _SECRETS_LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        out = out.replace(secret, "***")
    return _KEY_PATTERNS.sub(lambda m: (m.group(1) or "") + "***", out)


def read_api_key(api_key_env: str | None) -> str:
    """The key from ``os.environ[api_key_env]`` (registered for redaction), or the placeholder when
    ``api_key_env`` is None. A missing or empty variable is a :class:`MissingKeyError`."""
    if api_key_env is None:
        return NO_KEY_PLACEHOLDER
    value = os.environ.get(api_key_env, "")
    if not value.strip():
        raise MissingKeyError(
            f"the API key is missing: set the environment variable {api_key_env} to the key "
            "(the model's api_key_env names it), or set api_key_env: null for a server that takes no key"
        )
    register_secret(value)
    register_secret(value.strip())
    return value.strip()


# -- request bodies (the cache keys are built from these; the dry-run estimate uses them too) --------
def embedding_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    """The body of ``POST /embeddings`` for ``texts`` (floats asked for explicitly: the openai client
    asks for base64 when ``encoding_format`` is left out)."""
    return {"model": model, "input": list(texts), "encoding_format": "float"}


def embedding_key(settings: ApiSettings, text: str) -> str:
    """The cache key of one text's embedding: the key of its single-input request."""
    return cache_key(settings.base_url, settings.model, settings.revision, embedding_body(settings.model, [text]))


def chat_body(model: str, prompt: str, max_tokens: int | None, temperature: float | None) -> dict[str, Any]:
    """The body of ``POST /chat/completions`` for one prompt; parameters that are None are left out."""
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if temperature is not None:
        body["temperature"] = temperature
    return body


def chat_key(settings: ApiSettings, prompt: str, max_tokens: int | None, temperature: float | None) -> str:
    return cache_key(settings.base_url, settings.model, settings.revision,
                     chat_body(settings.model, prompt, max_tokens, temperature))


@dataclass
class ApiUsage:
    """What a client did: HTTP ``requests`` answered (a valid answer), ``attempts`` (every HTTP try),
    ``retries``, per-item ``cache_hits`` / ``cache_misses``, the server's token counts summed over the
    answers received, and ``cached_tokens``: the stored token counts of the answers read from the cache."""

    requests: int = 0
    attempts: int = 0
    retries: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + int(value))

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {field.name: getattr(self, field.name) for field in fields(self)}


_SKIPPED = object()  # what a job not started after a failure returns (ApiClient._run)


class _Retryable(Exception):
    """One failed attempt worth another (the message is already redacted)."""

    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class _Fatal(Exception):
    """A failed attempt not worth another."""


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), or None."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ApiClient:
    """Embeddings and chat answers from one OpenAI-compatible endpoint (see the module docstring).

    ``cache``: answers are read from and written to it (None: no cache). ``progress``: a tqdm bar."""

    def __init__(self, settings: ApiSettings, cache: ResponseCache | None, progress: bool = False) -> None:
        self.settings = settings
        self.cache = cache
        self.progress = progress
        self.usage = ApiUsage()
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=read_api_key(settings.api_key_env),
                                     max_retries=0, timeout=settings.timeout_s)
        self._sleep: Callable[[float], None] = time.sleep
        self._random = random.Random()

    def __repr__(self) -> str:
        return f"ApiClient({self.settings!r})"

    def close(self) -> None:
        self._client.close()

    # -- the retry loop ---------------------------------------------------------------------------
    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.settings.backoff_max_s)
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (retry - 1))
        return self._random.uniform(0, ceiling)

    def _attempt(self, call: Callable[[], Any], url: str) -> Any:
        """One HTTP try: the decoded JSON body, or a _Retryable / _Fatal with a redacted cause."""
        self.usage.add(attempts=1)
        try:
            raw = call()
        except openai.APITimeoutError:
            raise _Retryable(f"timed out after {self.settings.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            detail = type(exc.__cause__).__name__ if exc.__cause__ is not None else "connection error"
            raise _Retryable(redact(f"connection error ({detail})")) from None
        except openai.APIStatusError as exc:
            message = redact(_error_message(exc))
            cause = f"HTTP {exc.status_code}: {message}"
            if exc.status_code == 429 or exc.status_code >= 500:
                raise _Retryable(cause, parse_retry_after(exc.response.headers)) from None
            raise _Fatal(cause) from None
        except openai.OpenAIError as exc:
            raise _Fatal(redact(f"{type(exc).__name__}: {exc}")) from None
        content = raw.http_response.content
        try:
            return json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "msg", None) or getattr(exc, "reason", None) or type(exc).__name__
            raise _Retryable(f"malformed JSON body ({len(content)} bytes: {reason})") from None

    def _request(self, path: str, call: Callable[[], Any], check: Callable[[Any], Any], what: str) -> Any:
        """``call`` with retries; ``check`` turns the JSON body into the result (or raises ValueError)."""
        url = self.settings.endpoint(path)
        attempts = 0
        for attempt in range(1, self.settings.max_retries + 2):
            attempts = attempt
            try:
                body = self._attempt(call, url)
            except _Fatal as exc:
                raise self._error(url, str(exc), attempts, what) from None
            except _Retryable as exc:
                if attempt > self.settings.max_retries:
                    raise self._error(url, exc.cause, attempts, what) from None
                delay = self._backoff(attempt, exc.retry_after)
                logger.info(redact(f"{url} ({self.settings.model}): {exc.cause}; retry {attempt} of "
                                   f"{self.settings.max_retries} in {delay:.2f} s"))
                self.usage.add(retries=1)
                self._sleep(delay)
                continue
            try:
                result = check(body)
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise self._error(url, f"invalid answer: {exc}", attempts, what) from None
            self.usage.add(requests=1)
            return result
        raise AssertionError("unreachable")

    def _error(self, url: str, cause: str, attempts: int, what: str) -> ApiError:
        message = redact(f"{what} failed at {url} (model {self.settings.model!r}) after {attempts} "
                         f"attempt{'s' if attempts != 1 else ''}: {cause}")
        logger.error(message)
        return ApiError(message)

    def _bar(self, total: int, initial: int, unit: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, unit=unit, disable=not self.progress,
                    desc=f"{self.settings.model} {unit}s", leave=False)

    def _run(self, jobs: list[Callable[[], Any]], on_done: Callable[[Any], None]) -> None:
        """Run ``jobs`` ``concurrency`` at a time; ``on_done`` gets each result as it arrives (in the
        caller's thread). The first failure stops every job not started (a worker checks before it
        sends: cancelling from the caller's thread alone would race with the workers, and a busy
        machine let two more batches out after a failure, seen in CI); those already running are
        waited for (what they answered is handed to ``on_done``: it was paid for), then it is raised."""
        if not jobs:
            return
        failed: BaseException | None = None
        stop = threading.Event()

        def guarded(job: Callable[[], Any]) -> Callable[[], Any]:
            def run() -> Any:
                if stop.is_set():
                    return _SKIPPED
                try:
                    return job()
                except BaseException:
                    stop.set()
                    raise

            return run

        with ThreadPoolExecutor(max_workers=min(self.settings.concurrency, len(jobs)),
                                thread_name_prefix="csbench-api") as pool:
            pending: set[Future] = {pool.submit(guarded(job)) for job in jobs}
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in done:
                        if future.cancelled():
                            continue
                        if future.exception() is None:
                            if future.result() is not _SKIPPED:
                                on_done(future.result())
                        elif failed is None:
                            failed = future.exception()
                    if failed is not None:
                        for future in pending:
                            future.cancel()
            finally:
                for future in pending:  # an interrupt (KeyboardInterrupt) in on_done or wait
                    future.cancel()
        if failed is not None:
            raise failed

    def _from_cache(self, unique: list[str], keys: dict[str, str], read: Callable[[str], tuple[Any, int] | None],
                    found: dict[str, Any]) -> tuple[list[str], int]:
        """Put the cached answer of each of ``unique`` into ``found`` (``read``: key -> (answer, tokens) or
        None) and count hits, misses and the cached answers' tokens; return (the misses in order, hits)."""
        misses = []
        hits = cached_tokens = 0
        for item in unique:
            entry = read(keys[item]) if self.cache is not None else None
            if entry is None:
                misses.append(item)
            else:
                found[item], tokens = entry
                hits += 1
                cached_tokens += tokens
        self.usage.add(cache_hits=hits, cache_misses=len(misses), cached_tokens=cached_tokens)
        return misses, hits

    # -- embeddings -------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """float32 ``(len(texts), dim)`` embeddings, rows in input order (``(0, 0)`` for no texts).

        Cached per text (the key of the single-input request); the texts not cached are sent once each,
        ``batch_size`` per request, ``concurrency`` requests at once; each answered batch is cached as it
        arrives, so a run killed mid-way re-sends only what was not cached."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} is a {type(text).__name__}, not a str")
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray] = {}
        keys = {text: embedding_key(self.settings, text) for text in unique} if self.cache is not None else {}
        misses, hits = self._from_cache(unique, keys, self._cached_embedding, vectors)

        batches = [misses[i:i + batch_size] for i in range(0, len(misses), batch_size)]
        bar = self._bar(len(unique), hits, "text")

        def answered(result: tuple[list[str], np.ndarray, list[int]]) -> None:
            batch, matrix, tokens = result
            for text, vector, n in zip(batch, matrix, tokens, strict=True):
                vectors[text] = vector
                if self.cache is not None:
                    self.cache.put(keys[text], _embedding_payload(vector, n))
            bar.update(len(batch))

        try:
            self._run([lambda b=batch: self._embed_batch(b) for batch in batches], answered)
        finally:
            bar.close()
        dims = {vector.shape[0] for vector in vectors.values()}
        if len(dims) != 1:
            raise ApiError(redact(f"embeddings of {self.settings.model!r} at {self.settings.base_url} have "
                                  f"several dimensions {sorted(dims)} (cached and new answers disagree?)"))
        return np.stack([vectors[text] for text in texts]).astype(np.float32, copy=False)

    def _cached_embedding(self, key: str) -> tuple[np.ndarray, int] | None:
        payload = self.cache.get(key)
        if payload is None:
            return None
        try:
            entry = json.loads(payload)
            vector = np.frombuffer(base64.b64decode(entry["embedding_f32le"]), dtype="<f4").astype(np.float32)
            if vector.shape[0] != entry["dim"] or vector.shape[0] == 0:
                raise ValueError("dimension")
            return vector, int(entry.get("prompt_tokens") or 0)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("cache entry %s is not an embedding (%s): treated as a miss", key, exc)
            return None

    def _embed_batch(self, batch: list[str]) -> tuple[list[str], np.ndarray, list[int]]:
        def call() -> Any:
            return self._client.embeddings.with_raw_response.create(
                model=self.settings.model, input=batch, encoding_format="float")

        def check(body: Any) -> tuple[np.ndarray, int]:
            return _check_embeddings(body, len(batch))

        matrix, tokens = self._request("/embeddings", call, check, f"embedding {len(batch)} texts")
        self.usage.add(prompt_tokens=tokens, total_tokens=tokens)
        return batch, matrix, _apportion(tokens, [len(text) for text in batch])

    # -- chat -------------------------------------------------------------------------------------
    def chat(self, prompts: Sequence[str], max_tokens: int | None = 10,
             temperature: float | None = None) -> list[str]:
        """The answer text (choice 0) to each prompt, one request per prompt (a single user message;
        ``max_tokens`` / ``temperature`` left out of the body when None: the server's defaults).
        Cached per request body; duplicate prompts are sent once; ``concurrency`` requests at once."""
        prompts = list(prompts)
        for i, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"prompt {i} is a {type(prompt).__name__}, not a str")
        unique = list(dict.fromkeys(prompts))
        answers: dict[str, str] = {}
        keys = ({p: chat_key(self.settings, p, max_tokens, temperature) for p in unique}
                if self.cache is not None else {})
        misses, hits = self._from_cache(unique, keys, self._cached_chat, answers)
        bar = self._bar(len(unique), hits, "prompt")

        def answered(result: tuple[str, str, dict[str, int]]) -> None:
            prompt, text, usage = result
            answers[prompt] = text
            if self.cache is not None:
                payload = json.dumps({"text": text, "usage": usage}, sort_keys=True).encode()
                self.cache.put(keys[prompt], payload)
            bar.update(1)

        try:
            self._run([lambda p=p: self._chat_one(p, max_tokens, temperature) for p in misses], answered)
        finally:
            bar.close()
        return [answers[prompt] for prompt in prompts]

    def _cached_chat(self, key: str) -> tuple[str, int] | None:
        payload = self.cache.get(key)
        if payload is None:
            return None
        try:
            entry = json.loads(payload)
            if not isinstance(entry["text"], str):
                raise TypeError("text")
            return entry["text"], int((entry.get("usage") or {}).get("total_tokens") or 0)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("cache entry %s is not a chat answer (%s): treated as a miss", key, exc)
            return None

    def _chat_one(self, prompt: str, max_tokens: int | None, temperature: float | None
                  ) -> tuple[str, str, dict[str, int]]:
        body = chat_body(self.settings.model, prompt, max_tokens, temperature)
        extra = {name: body[name] for name in ("max_tokens", "temperature") if name in body}

        def call() -> Any:
            return self._client.chat.completions.with_raw_response.create(
                model=self.settings.model, messages=body["messages"], **extra)

        text, usage = self._request("/chat/completions", call, _check_chat, "chat completion")
        self.usage.add(**usage)
        return prompt, text, usage


# -- answer checks --------------------------------------------------------------------------------
def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return str(exc.message)


def _usage(body: dict) -> dict[str, int]:
    usage = body.get("usage") or {}
    if not isinstance(usage, dict):
        return {}
    out = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = int(value)
    return out


def _check_embeddings(body: Any, n: int) -> tuple[np.ndarray, int]:
    """The ``(n, dim)`` matrix of an embeddings answer ordered by ``index``, and its prompt tokens."""
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise ValueError("no `data` list in the answer")
    data = body["data"]
    if len(data) != n:
        raise ValueError(f"{len(data)} embeddings for {n} inputs")
    rows: list[Any] = [None] * n
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None:
            raise ValueError(f"bad or repeated index {index!r}")
        embedding = item.get("embedding")
        if isinstance(embedding, str):  # a base64 answer although floats were asked for
            rows[index] = np.frombuffer(base64.b64decode(embedding), dtype="<f4")
        elif isinstance(embedding, list) and all(isinstance(x, int | float) and not isinstance(x, bool)
                                                 for x in embedding):
            rows[index] = np.asarray(embedding, dtype=np.float64)
        else:
            raise ValueError(f"embedding {index} is not a list of numbers")
    dims = {row.shape[0] for row in rows}
    if len(dims) != 1 or 0 in dims:
        raise ValueError(f"embeddings of several or no dimensions: {sorted(dims)}")
    matrix = np.stack(rows).astype(np.float32)
    if not np.isfinite(matrix).all():
        raise ValueError("non-finite values in the embeddings")
    usage = _usage(body)
    return matrix, usage.get("prompt_tokens", usage.get("total_tokens", 0))


def _check_chat(body: Any) -> tuple[str, dict[str, int]]:
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
        raise ValueError("no `choices` in the answer")
    choice = body["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ValueError("choice 0 has no message")
    content = message.get("content")
    if content is None:  # a refusal or a tool call: no text (reads as unparseable downstream)
        content = ""
    if not isinstance(content, str):
        raise ValueError("the message content is not text")
    usage = _usage(body)
    usage.setdefault("total_tokens", usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0))
    return content, usage


def _embedding_payload(vector: np.ndarray, prompt_tokens: int) -> bytes:
    data = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
    return json.dumps({"dim": int(vector.shape[0]), "embedding_f32le": data, "prompt_tokens": prompt_tokens},
                      sort_keys=True).encode()


def _apportion(total: int, weights: list[int]) -> list[int]:
    """``total`` split over the items in proportion to ``weights`` (largest remainders; sums to
    ``total``): a batch's prompt tokens shared over its texts by characters, stored with each entry."""
    if not weights:
        return []
    weight_sum = sum(weights)
    shares = [total / len(weights)] * len(weights) if weight_sum <= 0 else [total * w / weight_sum for w in weights]
    out = [math.floor(s) for s in shares]
    for i in sorted(range(len(shares)), key=lambda i: shares[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    return out
