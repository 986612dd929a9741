"""A dry-run estimate of what an API run would send, before anything is sent: texts, how many are
already cached, requests, tokens (exact by the model's tokenizer, else about a quarter of the
characters, and said which) and, where a price is configured, the cost. Nothing here touches the
network or writes to the cache (it is read only to see what is already there)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from csbench.api.cache import ResponseCache
from csbench.api.client import chat_key, embedding_key
from csbench.api.limits import InputLimit
from csbench.api.settings import ApiSettings

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and code, when no tokenizer is known


@dataclass(frozen=True)
class Estimate:
    """What a run would send. ``tokens`` are the input tokens of the requests still to send;
    ``output_tokens`` the most the chat answers may hold (None for embeddings, or when max_tokens is
    None); ``cost`` None where no price is given (or the output's is unknown)."""

    kind: str  # "embeddings" or "chat"
    base_url: str
    model: str
    texts: int  # inputs in all (duplicates included)
    unique: int  # distinct inputs
    cached: int  # distinct inputs already answered in the cache
    requests: int  # HTTP requests to send (without retries)
    truncated: int  # inputs the limit cut
    tokens: int  # input tokens to send
    tokens_exact: bool  # by the model's tokenizer (True) or ~chars/4 (False)
    output_tokens: int | None = None
    cost: float | None = None

    @property
    def to_send(self) -> int:
        return self.unique - self.cached

    def as_dict(self) -> dict:
        return {**asdict(self), "to_send": self.to_send}

    def describe(self) -> str:
        """One line: ``embeddings ada-2 @ https://...: 1,000 texts (980 distinct, 900 cached): 2 requests,
        20,000 tokens (exact), 3 truncated, cost $0.0020``."""
        tokens = f"{self.tokens:,} input tokens ({'exact' if self.tokens_exact else f'~chars/{CHARS_PER_TOKEN}'})"
        if self.output_tokens is not None:
            tokens += f" + at most {self.output_tokens:,} output tokens"
        cost = f", cost ${self.cost:.4f}" + (" at most" if self.output_tokens else "") if self.cost is not None \
            else ", cost unknown (no price configured)"
        return (f"{self.kind} {self.model} @ {self.base_url}: {self.texts:,} inputs ({self.unique:,} distinct, "
                f"{self.cached:,} cached): {self.requests:,} requests to send, {tokens}, "
                f"{self.truncated:,} truncated{cost}")


def _tokens(limit: InputLimit | None, texts: list[str]) -> tuple[int, bool]:
    counts = limit.count_tokens(texts) if limit is not None else None
    if counts is not None:
        return sum(counts), True
    return sum(math.ceil(len(text) / CHARS_PER_TOKEN) for text in texts), False


def _apply(limit: InputLimit | None, texts: Sequence[str]) -> tuple[list[str], int]:
    return limit.apply(texts) if limit is not None else (list(texts), 0)


def estimate_embed(texts: Sequence[str], limit: InputLimit | None, batch_size: int, cache: ResponseCache | None,
                   settings: ApiSettings, price_per_mtok: float | None = None) -> Estimate:
    """What ``ApiClient.embed(limit.apply(texts)[0], batch_size)`` would send; ``price_per_mtok``: dollars
    per million input tokens."""
    sent, truncated = _apply(limit, texts)
    unique = list(dict.fromkeys(sent))
    misses = [t for t in unique if cache is None or not cache.contains(embedding_key(settings, t))]
    tokens, exact = _tokens(limit, misses)
    cost = tokens / 1e6 * price_per_mtok if price_per_mtok is not None else None
    return Estimate("embeddings", settings.base_url, settings.model, len(sent), len(unique),
                    len(unique) - len(misses), math.ceil(len(misses) / batch_size), truncated, tokens, exact,
                    None, cost)


def estimate_chat(prompts: Sequence[str], limit: InputLimit | None, max_tokens: int | None,
                  cache: ResponseCache | None, settings: ApiSettings, price_in: float | None = None,
                  price_out: float | None = None, temperature: float | None = None) -> Estimate:
    """What ``ApiClient.chat(prompts, max_tokens, temperature)`` would send (one request per distinct
    prompt not cached). Tokens are the prompts' text (the chat template adds a few per message);
    ``price_in`` / ``price_out``: dollars per million input / output tokens (the output priced at
    ``max_tokens`` per request: an upper bound; unknown when max_tokens is None)."""
    sent, truncated = _apply(limit, prompts)
    unique = list(dict.fromkeys(sent))
    misses = [p for p in unique
              if cache is None or not cache.contains(chat_key(settings, p, max_tokens, temperature))]
    tokens, exact = _tokens(limit, misses)
    output = max_tokens * len(misses) if max_tokens is not None else None
    cost = None
    if price_in is not None and (price_out is None or output is not None):
        cost = tokens / 1e6 * price_in + ((output or 0) / 1e6 * price_out if price_out is not None else 0.0)
    return Estimate("chat", settings.base_url, settings.model, len(sent), len(unique), len(unique) - len(misses),
                    len(misses), truncated, tokens, exact, output, cost)
