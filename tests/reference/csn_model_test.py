"""Reference twin of CodeSearchNet's MRR test: ``src/model_test.py``, transcribed.

Source: github/CodeSearchNet, ``src/model_test.py`` at commit 106e827405c968597da938f6b373d30183918869
(the file last changed in e792e1caea20fbd4fba439565fe20c10d4798435, "Initial commit"): ``compute_ranks``,
``MrrSearchTester.evaluate`` and the FuncName part of ``get_dataset_from``, line for line; plus
``split_identifier_into_parts`` of dpu_utils (microsoft/dpu-utils,
``python/dpu_utils/codeutils/identifiersplitting.py`` at 08d7701728058445fbe937c7a4c3c6b8bb82d8ec) and
``Vocabulary.get_unk()`` (``'%UNK%'``), which the script imports.

What is left out or adapted, and why (none of it changes a rank):

* the model: ``evaluate`` asks ``self.__model`` for ``get_code_representations(batch_data)`` and
  ``get_query_representations(batch_data)``; here :class:`VectorModel` answers with vectors the caller
  gives per record (``code_vec``, ``query_vec``), so the twin scores exactly the vectors csbench ranks;
* wandb logging, ``error_log`` and the printed summary are dropped; the examples sample
  (``np.random.choice`` after the shuffle) is kept, since it draws from the same global generator;
* ``np.object`` (removed from numpy 1.24) is written ``object``; ``more_itertools.chunked`` is
  transcribed (:func:`chunked`: lists of ``n``, the last one shorter);
* ``evaluate`` also appends, per full batch, the ``(record index, rank)`` pairs to ``ranks_log`` (the
  original only sums ``np.mean(1.0 / ranks)``), so ranks can be compared record by record;
* ``get_dataset_from`` takes the records (dicts with ``func_name``, ``code_tokens``,
  ``docstring_tokens``) instead of reading the sorted data files, and copies them instead of editing
  them in place.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple  # noqa: UP035 (the original's annotations)

import numpy as np
from scipy.spatial.distance import cdist


def chunked(iterable: Iterable[Any], n: int) -> Iterator[List[Any]]:  # noqa: UP006
    """more_itertools.chunked: lists of ``n`` items, the last one possibly shorter."""
    chunk: List[Any] = []  # noqa: UP006
    for item in iterable:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


SPLIT_REGEX = re.compile(
    "(?<=[a-z0-9])(?=[A-Z])|"
    "(?<=[A-Z0-9])(?=[A-Z][a-z])|"
    "(?<=[0-9])(?=[a-zA-Z])|"
    "(?<=[A-Za-z])(?=[0-9])|"
    "(?<=[@$])(?=[a-zA-Z0-9])|"
    "(?<=[a-zA-Z0-9])(?=[@$])|"
    "_"
)


@lru_cache(maxsize=5000)
def split_identifier_into_parts(identifier: str) -> List[str]:  # noqa: UP006
    """
    Split a single identifier into parts on snake_case and camelCase
    """
    identifier_parts = list(s for s in SPLIT_REGEX.split(identifier) if len(s) > 0)

    if len(identifier_parts) == 0:
        return [identifier]
    return identifier_parts


def get_unk() -> str:
    return "%UNK%"


def compute_ranks(
    src_representations: np.ndarray, tgt_representations: np.ndarray, distance_metric: str
) -> Tuple[np.array, np.array]:  # noqa: UP006
    distances = cdist(src_representations, tgt_representations, metric=distance_metric)
    # By construction the diagonal contains the correct elements
    correct_elements = np.expand_dims(np.diag(distances), axis=-1)
    return np.sum(distances <= correct_elements, axis=-1), distances


class VectorModel:
    """Stands in for the restored model: the representations are the records' given vectors."""

    representation_size = 0

    def get_code_representations(self, batch_data: List[Dict[str, Any]]) -> List[np.ndarray]:  # noqa: UP006
        return [d["code_vec"] for d in batch_data]

    def get_query_representations(self, batch_data: List[Dict[str, Any]]) -> List[np.ndarray]:  # noqa: UP006
        return [d["query_vec"] for d in batch_data]


class MrrSearchTester:
    def __init__(self, test_batch_size: int = 1000, distance_metric: str = "cosine") -> None:
        self.__model = VectorModel()
        self.__test_batch_size = test_batch_size
        self.__distance_metric = distance_metric
        self.ranks_log: List[Tuple[int, int]] = []  # noqa: UP006 (added: (record index, rank) per query)

    @property
    def test_batch_size(self) -> int:
        return self.__test_batch_size

    def update_test_batch_size(self, test_batch_size: int) -> None:
        self.__test_batch_size = test_batch_size

    def evaluate(self, data: List[Dict[str, Any]], filter_language: Optional[str] = None) -> float:  # noqa: UP006, UP045
        assert len(data) > 0, "data must have more than 0 rows."
        np.random.seed(0)  # set random seed so that random things are reproducible

        if filter_language is None:
            idxs = np.arange(len(data))
        else:
            idxs = np.array([i for i in range(len(data)) if data[i]["language"] == filter_language])
        if len(idxs) == 0:
            print("Warning: Trying to test on empty dataset. Skipping.")
            return float("nan")
        data = np.array(data, dtype=object)
        np.random.shuffle(idxs)
        data = data[idxs]

        if len(data) < self.__test_batch_size:
            logging.warning(
                f"the size of the total data {len(data):,} is less than the batch_size: "
                f"{self.__test_batch_size:,} adjusting batch size to equal data size."
            )
            self.update_test_batch_size(len(data))

        def self_or_random_representation(representation: Optional[np.ndarray]) -> np.ndarray:  # noqa: UP045
            if representation is not None:
                return representation
            else:
                return np.random.randn(self.__model.representation_size)

        # Determine random sample of examples before chunking into batches.
        # sample only from full batches
        max_samples = 50
        full_batch_len = len(data) // self.__test_batch_size * self.__test_batch_size
        examples_sample = np.zeros(len(data), dtype=bool)
        examples_sample[
            np.random.choice(np.arange(full_batch_len), replace=False, size=min(full_batch_len, max_samples))
        ] = True

        sum_mrr = 0.0
        num_batches = 0
        batched_data = chunked(data, self.__test_batch_size)
        batched_sample = chunked(examples_sample, self.__test_batch_size)
        for batch_idx, (batch_data, _batch_sample) in enumerate(zip(batched_data, batched_sample)):  # noqa: B905
            if len(batch_data) < self.__test_batch_size:
                break  # the last batch is smaller than the others, exclude.
            num_batches += 1

            code_representations = self.__model.get_code_representations(batch_data)
            query_representations = self.__model.get_query_representations(batch_data)
            assert len(code_representations) == len(query_representations) == self.__test_batch_size

            # Design decision: If a representation cannot be computed assign a random representation. This keeps
            # the batch size identical across all models.
            batch_code_representations = np.array(
                [self_or_random_representation(code_representations[i]) for i in range(self.__test_batch_size)],
                dtype=np.float32,
            )
            batch_query_representations = np.array(
                [self_or_random_representation(query_representations[i]) for i in range(self.__test_batch_size)],
                dtype=np.float32,
            )

            ranks, distances = compute_ranks(  # noqa: RUF059 (verbatim: error_log read the distances)
                batch_code_representations, batch_query_representations, self.__distance_metric
            )

            sum_mrr += np.mean(1.0 / ranks)

            # added: the ranks of this batch's records (idxs maps the batch back to the input order)
            batch_sample_idxs = idxs[batch_idx * self.__test_batch_size : (batch_idx + 1) * self.__test_batch_size]
            self.ranks_log.extend(zip(batch_sample_idxs.tolist(), ranks.tolist()))  # noqa: B905

        eval_mrr = sum_mrr / num_batches
        return eval_mrr


def get_dataset_from(data: List[Dict[str, Any]], use_func_names: bool = False) -> List[Dict[str, Any]]:  # noqa: UP006
    data = copy.deepcopy(data)
    if use_func_names:
        # This task tries to match the function name to the code, by setting the function name as the query
        for sample in data:
            # Replace the query tokens with the function name, broken up into its sub-tokens:
            sample["docstring_tokens"] = split_identifier_into_parts(sample["func_name"])

            # In the code, replace the function name with the out-of-vocab token everywhere it appears:
            sample["code_tokens"] = [
                get_unk() if token == sample["func_name"] else token for token in sample["code_tokens"]
            ]
    return data
