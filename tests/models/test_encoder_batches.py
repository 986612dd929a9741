"""Length-sorted batching of texts for encoding (csbench.models.encoder.length_sorted_batches)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from csbench.models.encoder import length_sorted_batches

# CodeSearchNet-like query lengths: many short ones, a few long docstrings
LENGTHS = [12, 228, 9, 30, 31, 110, 8, 15, 15, 54, 4, 22, 20, 19, 95, 10, 11, 12, 13, 60]


def _padded(lengths: list[int], batches: list[np.ndarray]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


@pytest.mark.parametrize("ratio", [None, 1.0, 1.25, 2.0])
@pytest.mark.parametrize("batch_size", [1, 3, 128])
def test_every_text_is_in_exactly_one_batch_longest_first(ratio, batch_size):
    batches = length_sorted_batches(LENGTHS, batch_size, max_pad_ratio=ratio)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(LENGTHS)))
    assert all(1 <= len(b) <= batch_size for b in batches)
    ordered = [LENGTHS[i] for i in flat]
    assert ordered == sorted(ordered, reverse=True)


@pytest.mark.parametrize("ratio", [1.0, 1.25, 2.0])
def test_no_text_is_padded_beyond_the_ratio(ratio):
    for batch in length_sorted_batches(LENGTHS, 128, max_pad_ratio=ratio):
        longest = max(LENGTHS[i] for i in batch)
        assert all(LENGTHS[i] * ratio >= longest for i in batch)


def test_batches_are_only_cut_where_the_ratio_or_size_requires():
    """Greedy: a batch ends at the size limit or at the first text too short for it, never earlier."""
    batches = length_sorted_batches(LENGTHS, 4, max_pad_ratio=1.25)
    for batch, after in itertools.pairwise(batches):
        assert len(batch) == 4 or LENGTHS[after[0]] * 1.25 < LENGTHS[batch[0]]


def test_the_ratio_cuts_padding_of_a_long_tail():
    fixed = length_sorted_batches(LENGTHS, 128, max_pad_ratio=None)
    capped = length_sorted_batches(LENGTHS, 128)
    assert len(fixed) == 1 and _padded(LENGTHS, fixed) == 228 * len(LENGTHS)
    assert _padded(LENGTHS, capped) < 0.3 * _padded(LENGTHS, fixed)


def test_equal_lengths_keep_full_batches_in_input_order():
    batches = length_sorted_batches([7] * 10, 4)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_empty_input_and_invalid_arguments():
    assert length_sorted_batches([], 8) == []
    with pytest.raises(ValueError, match="batch_size"):
        length_sorted_batches([1, 2], 0)
    with pytest.raises(ValueError, match="max_pad_ratio"):
        length_sorted_batches([1, 2], 4, max_pad_ratio=0.5)
