"""Input length limits, enforced the way the provider does before anything is sent.

``InputLimit(tokenizer, max_tokens, max_chars)``: ``tokenizer`` names the model's tokenizer where it is
known, ``"hf:<hub id or folder>"`` (``AutoTokenizer`` from local files only; a csbench name such as
``hf:minilm`` is resolved to its packaged folder) or ``"tiktoken:<encoding>"`` (``cl100k_base`` for
Ada 2; needs the ``tiktoken`` package and its encoding file offline). A text longer than ``max_tokens``
tokens (the model's own tokens, without special tokens) is cut after its ``max_tokens``-th token, at the
character where that token ends, so the text sent keeps its own characters and re-tokenizes to the same
tokens (what a provider that truncates does, e.g. a sentence-transformers server with ``max_seq_length``
256 keeps 254 tokens plus its two special ones). ``max_chars`` cuts to that many characters (after the
token cut, when both are given). No torch is imported here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class LimitError(ValueError):
    """A tokenizer that cannot be loaded or named, with what to do about it."""


@functools.lru_cache(maxsize=8)
def _hf_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    folder = name
    if not Path(name).is_dir() and "/" not in name:
        try:  # a csbench name ("minilm"): its packaged folder (imports torch, only on this path)
            from csbench.models.hf import HF_MODELS, resolve_model_id

            if name in HF_MODELS:
                folder = resolve_model_id(name)
        except ImportError:
            pass
    try:
        return AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise LimitError(
            f"cannot load the tokenizer hf:{name} from local files ({type(exc).__name__}): download it once "
            "with network (huggingface-cli download <id>) or give a folder, or use max_chars instead"
        ) from None


@functools.lru_cache(maxsize=8)
def _tiktoken_encoding(name: str) -> Any:
    try:
        import tiktoken
    except ImportError:
        raise LimitError(
            f"tokenizer tiktoken:{name} needs the tiktoken package, which is not installed (it is not in "
            "csbench's lock): pip install tiktoken and put its encoding file in TIKTOKEN_CACHE_DIR for offline "
            "use, or drop `tokenizer` and set max_chars to cap inputs by characters"
        ) from None
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises ValueError for a name, network errors offline
        raise LimitError(
            f"tiktoken cannot load the encoding {name!r} ({type(exc).__name__}): offline it reads the file from "
            "TIKTOKEN_CACHE_DIR (download it once with network), or use max_chars"
        ) from None


@dataclass(frozen=True)
class InputLimit:
    """How long an input may be (see the module docstring). All None: no limit."""

    tokenizer: str | None = None
    max_tokens: int | None = None
    max_chars: int | None = None

    def __post_init__(self) -> None:
        if self.tokenizer is not None:
            kind, sep, name = self.tokenizer.partition(":")
            if not sep or kind not in ("hf", "tiktoken") or not name:
                raise LimitError(f"tokenizer must be 'hf:<hub id or folder>' or 'tiktoken:<encoding>', "
                                 f"not {self.tokenizer!r}")
        if self.max_tokens is not None and self.tokenizer is None:
            raise LimitError("max_tokens needs a tokenizer ('hf:...' or 'tiktoken:...'); without one use max_chars")
        for name in ("max_tokens", "max_chars"):
            value = getattr(self, name)
            if value is not None and (int(value) != value or value < 1):
                raise LimitError(f"{name} must be an integer >= 1, not {value!r}")

    # -- the tokenizer ----------------------------------------------------------------------------
    def _kind(self) -> tuple[str, str]:
        kind, _, name = self.tokenizer.partition(":")
        return kind, name

    def _token_ends(self, text: str) -> list[int]:
        """The character offset where each token of ``text`` ends (no special tokens)."""
        kind, name = self._kind()
        if kind == "hf":
            tok = _hf_tokenizer(name)
            if getattr(tok, "is_fast", False):
                enc = tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
                return [end for _, end in enc["offset_mapping"]]
            ids = tok(text, add_special_tokens=False, verbose=False)["input_ids"]
            return [len(tok.decode(ids[: i + 1])) for i in range(len(ids))]  # slow tokenizers: approximate
        encoding = _tiktoken_encoding(name)
        ids = encoding.encode(text, disallowed_special=())
        ends, total = [], b""
        for token in ids:  # byte offsets -> character offsets
            total += encoding.decode_single_token_bytes(token)
            ends.append(len(total.decode("utf-8", errors="ignore")))
        return ends

    def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens per text by the model's tokenizer (no special tokens), or None without a tokenizer."""
        if self.tokenizer is None:
            return None
        if not texts:
            return []
        kind, name = self._kind()
        if kind == "hf":
            tok = _hf_tokenizer(name)
            return [len(ids) for ids in tok(list(texts), add_special_tokens=False, verbose=False)["input_ids"]]
        encoding = _tiktoken_encoding(name)
        return [len(encoding.encode(text, disallowed_special=())) for text in texts]

    def apply(self, texts: Sequence[str]) -> tuple[list[str], int]:
        """``texts`` cut to the limit, and how many were cut."""
        out, truncated = [], 0
        counts = self.count_tokens(texts) if self.max_tokens is not None else None
        for i, text in enumerate(texts):
            cut = text
            if counts is not None and counts[i] > self.max_tokens:
                cut = text[: self._token_ends(text)[self.max_tokens - 1]]
            if self.max_chars is not None and len(cut) > self.max_chars:
                cut = cut[: self.max_chars]
            truncated += cut != text
            out.append(cut)
        return out, truncated

    def describe(self) -> str:
        parts = []
        if self.tokenizer is not None:
            parts.append(f"{self.max_tokens} tokens by {self.tokenizer}" if self.max_tokens else
                         f"tokens counted by {self.tokenizer}")
        if self.max_chars is not None:
            parts.append(f"{self.max_chars} characters")
        return ", ".join(parts) or "no limit"
