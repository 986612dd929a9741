"""Reference twin of GenCodeSearchNet's (GeCS) MRR with 99 distractors, transcribed.

Sources: drndr/gencodesearchnet at commit 70db22a16e1111d7f66e2c0fa67b44e74a0a0e89:

* ``data/mrr/New_cbt_mrr_implementation.py`` (last changed in c2425ad507c20d5f01da26174ec6c2693fcd03ac),
  ``get_dataset_raw``: the GenBench task's distractors. ``random.seed(42)`` once, then for each test
  item in file order ``random.sample(other_items, n_distractors)`` with ``other_items`` the list without
  the item. :func:`get_dataset_raw` keeps that loop line for line; the items are the records' positions
  (the original samples the item dicts: ``random.sample`` picks by position, so the draws are the same)
  and it returns each item with its sampled items instead of writing the ``[CODESPLIT]`` pairs.
* ``experiments/eval_mrr_cosine.py`` (last changed in 466792bcd233bd28c28758df03e2c25325b581ae), ``mrr``:
  the zero-shot (cosine) evaluation. :func:`eval_mrr_cosine_chunks` is its chunk-building loop, verbatim,
  on positions instead of texts: note that ``codes = [code] + distractors`` rebinds ``codes`` inside the
  loop, so from the second item on ``codes_without_sample`` is sliced from the *previous item's chunk*
  (100 codes: the previous correct code and its distractors), not from the test set. Its
  ``random.seed(42)`` is called once in ``main`` before the eight test files, so each file's draws also
  depend on the files evaluated before it (``eval_mrr.py``, the cross-encoder twin, seeds once per file).
  :func:`mrr_of_chunks` is its ranking: ``rank = np.sum(np.array(scores) >= correct_score)`` with the
  correct score first in ``scores`` (so rank = 1 + the distractors scoring at least as high), and
  ``np.mean(1.0 / np.array(ranks))``. The model, tokenizer and device code are left out: the scores come
  from ``score(query position, code position)``, so the twin ranks exactly the scores csbench ranks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, List, Tuple  # noqa: UP035 (the original's annotations)

import numpy as np


def get_dataset_raw(dataset_list: List[Any], n_distractors: int, seed: int = 42) -> List[Tuple[Any, List[Any]]]:  # noqa: UP006
    """New_cbt_mrr_implementation.py's test split: each item with the items sampled as its distractors."""
    random.seed(seed)
    new_data = []
    for idx, item in enumerate(dataset_list):
        # Create other_items list once and then simply exclude the current item during sampling
        other_items = dataset_list[:idx] + dataset_list[idx + 1 :]
        random_items = random.sample(other_items, n_distractors)
        new_data.append((item, random_items))
    return new_data


def eval_mrr_cosine_chunks(comments: List[Any], codes: List[Any], distractors: int = 99) -> List[List[Tuple[Any, Any]]]:  # noqa: UP006
    """eval_mrr_cosine.py's ``mrr`` chunk loop, verbatim (``random.seed(42)`` is the caller's, as in
    its ``main``): chunk i = [(comment i, code i), (comment i, distractor), ...]."""
    chunks = []
    for i, sample in enumerate(zip(comments, codes)):  # noqa: B905
        comment, code = sample
        codes_without_sample = codes[:i] + codes[i + 1 :]
        # select 99 random codes
        distractors_ = random.sample(codes_without_sample, distractors)
        # create samples
        codes = [code] + distractors_  # noqa: RUF005 (verbatim: this rebinding is the script's)
        comments = [comment] * len(codes)

        chunks.append(list(zip(comments, codes)))  # noqa: B905
    return chunks


def mrr_of_chunks(chunks: List[List[Tuple[Any, Any]]], score: Callable[[Any, Any], float]) -> Tuple[float, List[int]]:  # noqa: UP006
    """eval_mrr*.py's ranking of the chunks: the first pair is the correct one; returns the mean
    reciprocal rank and the ranks."""
    ranks = []
    for chunk in chunks:
        # calc correct sample (always the first one)
        correct = chunk[0]
        correct_score = score(correct[0], correct[1])
        scores = []
        # add correct score to scores
        scores.append(correct_score)
        for comment, code in chunk[1:]:
            scores.append(score(comment, code))
        rank = np.sum(np.array(scores) >= correct_score)
        ranks.append(int(rank))
    mean_mrr = np.mean(1.0 / np.array(ranks))
    return float(mean_mrr), ranks


def task_chunks(n: int, n_distractors: int = 99, seed: int = 42) -> List[List[Tuple[int, int]]]:  # noqa: UP006
    """The GenBench task's chunks over ``n`` records (positions): record i's query against its own code
    first, then its sampled distractors' codes, as ``get_dataset_raw`` lays them out."""
    return [
        [(item, item)] + [(item, other) for other in others]
        for item, others in get_dataset_raw(list(range(n)), n_distractors, seed)
    ]
