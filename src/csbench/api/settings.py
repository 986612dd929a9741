"""How to reach one OpenAI-compatible endpoint: :class:`ApiSettings`, built from a model's params."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiSettings:
    """One endpoint and model, and how hard to try. Holds the *name* of the key's environment variable,
    never the key (so a settings object can be logged, hashed and written to provenance)."""

    base_url: str  # "https://api.openai.com/v1", "http://127.0.0.1:8000/v1"
    model: str  # the server's model name ("text-embedding-ada-002")
    api_key_env: str | None = "OPENAI_API_KEY"  # NAME of the env var holding the key; None: no key
    timeout_s: float = 60.0  # per request
    max_retries: int = 6  # retries after the first attempt
    backoff_s: float = 1.0  # first wait; doubles each retry, full jitter, capped below
    backoff_max_s: float = 60.0
    concurrency: int = 4  # requests in flight at once
    revision: str | None = None  # the model revision the user pins (part of the cache key)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {self.base_url!r}")
        if not self.model:
            raise ValueError("model must name the server's model")
        if self.api_key_env is not None and not self.api_key_env.strip():
            raise ValueError("api_key_env must name an environment variable, or be null for a server without keys")
        for name in ("timeout_s", "backoff_max_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)!r}")
        if self.backoff_s < 0:
            raise ValueError(f"backoff_s must be >= 0, not {self.backoff_s!r}")
        if int(self.max_retries) != self.max_retries or self.max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, not {self.max_retries!r}")
        if int(self.concurrency) != self.concurrency or self.concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, not {self.concurrency!r}")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ApiSettings:
        """The settings among a model's ``params`` (other keys, such as ``batch_size``, are left out)."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in params.items() if name in names})

    def endpoint(self, path: str) -> str:
        """The full URL of ``path`` ("/embeddings") below ``base_url``."""
        return f"{self.base_url}/{path.lstrip('/')}"
