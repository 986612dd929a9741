"""API models: OpenAI-compatible embedding and chat endpoints behind a cached, retrying client.

No torch is imported by this package (``limits`` loads a Hugging Face tokenizer only when asked), and
importing it imports nothing: the model registry reads :mod:`csbench.api.defaults` while a config is
validated (every job, every snakemake start), so the ``openai`` client (most of a second to import) is
loaded only when a name below is first used.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "ResponseCache": "cache",
    "cache_key": "cache",
    "default_cache_dir": "cache",
    "ApiClient": "client",
    "ApiError": "client",
    "ApiUsage": "client",
    "MissingKeyError": "client",
    "redact": "client",
    "Estimate": "estimate",
    "estimate_chat": "estimate",
    "estimate_embed": "estimate",
    "InputLimit": "limits",
    "LimitError": "limits",
    "ApiSettings": "settings",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'csbench.api' has no attribute {name!r}")
    return getattr(importlib.import_module(f"csbench.api.{_NAMES[name]}"), name)
