"""16-byte keys that stand for texts, for telling equal texts apart without holding them.

A key is the BLAKE2b-128 digest of a text's UTF-8 bytes. Two distinct texts of a set of n share one with
a probability of about n² / 2^129 (3e-27 for 6 million texts). The attack phase keys its snippets with
them (``csbench.attacks.stream``), GeCS's matching data its codes (``text_ids``, the negatives drawn in
``csbench.models.cross``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np


def text_key(text: str) -> bytes:
    """The 16 bytes that stand for ``text``."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def text_keys(texts: Iterable[str]) -> np.ndarray:
    """``text_key`` of each text, in order, as the rows of an (n, 2) uint64 array (16 bytes per text held)."""
    keys = bytearray()
    for text in texts:
        keys += text_key(text)
    return np.frombuffer(bytes(keys), dtype=np.uint64).reshape(-1, 2)


def text_ids(texts: Iterable[str]) -> np.ndarray:
    """One id per text, in order, equal for equal texts: the rank of its key among the distinct keys
    (0 .. distinct - 1). Holds 16 bytes per text, not the texts (an iterator may stream them)."""
    keys = text_keys(texts)
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)
