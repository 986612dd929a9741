"""A run's pools encoded as N independent jobs (issue #28: a large pool over a cluster's jobs, the
``encode_shard`` rule under snakemake's SLURM profile), each job writing its part to the embedding
cache (csbench.cache.embeddings) and the ``index`` job then reading every vector from it.

The jobs split exactly the work one ``index`` job with an empty cache would do, so its vectors are
bitwise those of that job: :func:`encoding_plan` lists, per pool (in :func:`csbench.evaluate.runner.
index_frames`' order) and per language (in order of first appearance), the distinct codes that job
would encode (not those of an earlier pool: they would be cache hits); the plan's batches are those
:func:`csbench.models.encoder.encode_texts` forms over each list (``length_sorted_batches``), and job
``i`` of ``n`` computes a contiguous ``1/n`` of each list's batches with the same function
(``encode_chunks``). Where the cache already holds a code (another run of the same model), ``index``
reads it, as it would without shards."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd


def encoding_plan(frames: Iterable[pd.DataFrame]) -> list[tuple[str, list[str]]]:
    """(language, distinct codes) in the order an index job encodes them, each code once per language."""
    plan: list[tuple[str, list[str]]] = []
    seen: dict[str, set[str]] = {}
    for frame in frames:
        groups: dict[str, list[str]] = {}
        for code, language in zip(frame["code"].tolist(), frame["language"].tolist(), strict=True):
            groups.setdefault(language, []).append(code)
        for language, codes in groups.items():
            known = seen.setdefault(language, set())
            fresh = [code for code in dict.fromkeys(codes) if code not in known]
            known.update(fresh)
            if fresh:
                plan.append((language, fresh))
    return plan


def shard_of(batches: list[np.ndarray], shard: int, shards: int) -> list[np.ndarray]:
    """Job ``shard``'s contiguous run of ``batches`` (``shards`` jobs, as even as whole batches allow)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard must be in 0..{shards - 1}, not {shard}")
    start, stop = len(batches) * shard // shards, len(batches) * (shard + 1) // shards
    return batches[start:stop]


def encode_shard(retriever: Any, frames: Iterable[pd.DataFrame], shard: int, shards: int) -> dict[str, int]:
    """Encode job ``shard`` of ``shards``'s part of the pools ``frames`` with ``retriever`` (a dense
    retriever using the embedding cache) and store it in the cache; {"planned": codes in its part,
    "encoded": codes it computed (the others were cached already)}."""
    from csbench.models.encoder import encode_chunks, length_sorted_batches

    if retriever.embedding_cache is None:
        raise ValueError("encoding a pool in shards needs the embedding cache (embedding_cache.dir is null)")
    cache = retriever.embedding_cache[0]
    encoder = retriever.encoder
    encoder.eval()
    device = next(encoder.parameters()).device
    planned = encoded = 0
    for language, codes in encoding_plan(frames):
        namespace = retriever.cache_namespace("code", language)
        batches = shard_of(length_sorted_batches(encoder.lengths(codes, "code"), retriever.batch_size), shard, shards)
        mine = [codes[i] for batch in batches for i in batch]
        planned += len(mine)
        cached = cache.lookup(namespace, mine).hit if mine else np.zeros(0, dtype=bool)
        todo = [batch for batch, done in zip(batches, np.split(cached, np.cumsum([len(b) for b in batches])[:-1]),
                                             strict=True) if not done.all()]  # fmt: skip
        chunks = [[codes[i] for i in batch] for batch in todo]
        texts = [code for chunk in chunks for code in chunk]
        rows: list[np.ndarray] = []
        # the batches as an index job computes them (each on one torch thread, several at once): the same bits
        encode_chunks(encoder, [(chunk, [language] * len(chunk)) for chunk in chunks], "code", device,
                      lambda _, vectors, rows=rows: rows.append(vectors))  # fmt: skip
        if texts:  # one store per language: few, large shard files
            cache.store(namespace, texts, np.concatenate(rows))
            encoded += len(texts)
    return {"planned": planned, "encoded": encoded}
