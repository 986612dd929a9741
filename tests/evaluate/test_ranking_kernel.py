"""The ranking engine's selection kernel (``csbench.evaluate._select``): every test of test_ranking.py
again with the kernel switched on, run as its Python source and (where ``make setup`` compiled it) as
the compiled module; and the kernel's parts against numpy: packed keys of special scores, the buffer
cut when it fills, the selection of the depth best, the k-th largest score of a row.

The compiled cases skip where the kernel is not built (no Cython at install time); the engine then
runs its numpy path, which test_ranking.py checks on its own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from test_ranking import *  # noqa: F403 - every engine test again, with the kernel

from csbench.evaluate import _select, ranking
from csbench.evaluate.ranking import rank_dense


def source_kernel():
    """The kernel's ``.py`` run as Python (the compiled module, where built, shadows it on import)."""
    path = Path(ranking.__file__).with_name("_select.py")
    spec = importlib.util.spec_from_file_location("csbench_select_as_python", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not module.COMPILED
    return module


SOURCE = source_kernel()


@pytest.fixture(autouse=True, params=["source", "compiled"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The engine with its float32 blocks through the kernel: its source, or its compiled module."""
    if request.param == "compiled":
        if not _select.COMPILED:
            pytest.skip("the selection kernel is not compiled here (make setup compiles it with Cython)")
        module = _select
    else:
        module = SOURCE
    monkeypatch.setattr(ranking, "_select", module)
    monkeypatch.setattr(ranking, "USE_KERNEL", True)
    return module


FREE = np.iinfo(np.uint64).max
SPECIAL = np.array(
    [np.nan, -np.inf, np.inf, -0.0, 0.0, 1e-45, -1e-45, 1.5, -1.5, 3.4028235e38, -3.4028235e38, 0.25],
    dtype=np.float32,
)


def scan(kernel, scores, depth, floor=None, target=None, cap=None, answers=None, correct=None):
    """``scan_block`` of float32 ``scores`` on fresh buffers (every column its own code); returns
    (counts, key, raw, fill, worst, special)."""
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    n = scores.shape[0]
    cap = 2 * depth if cap is None else cap
    key = np.full((n, cap), FREE, dtype=np.uint64)
    raw = np.zeros((n, cap), dtype=np.float32)
    fill = np.zeros(n, dtype=np.int64)
    worst = np.full(n, FREE, dtype=np.uint64)
    counts = np.zeros(n, dtype=np.int64)
    floor = np.full(n, -np.inf, dtype=np.float32) if floor is None else np.asarray(floor, dtype=np.float32)
    target = np.full(n, np.nan, dtype=np.float32) if target is None else np.asarray(target, dtype=np.float32)
    answers = np.full(n, -1, dtype=np.int64) if answers is None else np.asarray(answers, dtype=np.int64)
    correct = np.full(n, -1, dtype=np.int64) if correct is None else np.asarray(correct, dtype=np.int64)
    empty = np.empty(0, dtype=np.int64)
    special = kernel.scan_block(
        scores, scores.view(np.uint32), target, floor, counts, key, raw, fill, worst, answers, correct,
        empty, empty, empty, 0, depth,
    )  # fmt: skip
    return counts, key, raw, fill, worst, special


def test_packed_keys_of_special_scores_are_the_engines(kernel) -> None:
    # NaN reads -inf, -0.0 ties with +0.0 (one key), denormals and the float32 extremes keep their order
    _, key, raw, fill, _, special = scan(kernel, SPECIAL[None, :], depth=SPECIAL.size)
    order = np.where(np.isnan(SPECIAL), np.float32(-np.inf), SPECIAL)
    assert fill[0] == SPECIAL.size and special
    assert np.array_equal(key[0, : SPECIAL.size], ranking._pack(order, np.arange(SPECIAL.size)))
    assert np.array_equal(raw[0, : SPECIAL.size].view(np.uint32), SPECIAL.view(np.uint32))  # as computed
    assert not scan(kernel, np.array([[1.0, -2.0, 0.0]]), depth=3)[5]  # no NaN, no -0.0: not special


def test_counts_take_ties_against_the_model_and_never_count_nan(kernel) -> None:
    scores = np.array([[1.0, 2.0, 2.0, np.nan, 3.0, -np.inf], [1.0, 2.0, 2.0, np.nan, 3.0, -np.inf]])
    counts = scan(kernel, scores, depth=2, target=[2.0, np.nan])[0]
    assert counts.tolist() == [3, 0]  # a NaN target's count is not used (its rank is the pool's size)


def test_a_full_buffer_keeps_its_depth_smallest_keys(kernel) -> None:
    rng = np.random.default_rng(3)
    scores = np.round(rng.standard_normal((5, 400)), 1)  # many ties: the codes order them
    for depth, cap in ((1, 2), (7, 9), (40, 80)):
        _, key, raw, fill, worst, _ = scan(kernel, scores, depth, cap=cap)
        kernel.select_rows(key, raw, fill, depth)
        expected = np.sort(ranking._pack(scores.astype(np.float32), np.arange(400)[None, :].repeat(5, 0)), axis=1)
        assert (fill == depth).all() and (key[:, depth:] == FREE).all()
        assert np.array_equal(np.sort(key[:, :depth], axis=1), expected[:, :depth])
        assert (worst >= expected[:, depth - 1]).all()  # the cut's bound never drops a listed key
        # each score stayed beside its key
        assert np.array_equal(ranking._unpack_order(key[:, :depth]), raw[:, :depth].astype(np.float64))


def test_the_floor_and_the_correct_column_keep_scores_out(kernel) -> None:
    scores = np.array([[5.0, 1.0, 4.0, np.nan, 3.0, 2.0]])
    _, key, _, fill, _, special = scan(kernel, scores, depth=3, floor=[3.0], correct=[2], answers=[2])
    codes = sorted(int(k) & 0xFFFFFFFF for k in key[0, : fill[0]])
    assert codes == [0, 4] and not special  # 4.0 is the correct code's; NaN and below 3.0 stay out


def test_select_rows_pads_short_lists(kernel) -> None:
    key = np.full((1, 8), FREE, dtype=np.uint64)
    key[0, :2] = [7, 3]
    raw = np.ones((1, 8), dtype=np.float32)
    fill = np.array([2])
    kernel.select_rows(key, raw, fill, 4)
    assert fill[0] == 2 and key[0, :2].tolist() == [7, 3] and raw[0, 2:4].tolist() == [-np.inf, -np.inf]


@pytest.mark.parametrize("rank", [1, 2, 17, 63, 64])
def test_kth_largest_reads_nan_and_the_correct_column_as_minus_infinity(kernel, rank: int) -> None:
    rng = np.random.default_rng(rank)
    scores = np.round(rng.standard_normal((9, 64)), 1).astype(np.float32)
    scores[rng.random(scores.shape) < 0.1] = np.nan
    scores[0] = np.nan
    correct = rng.integers(-1, 64, size=9)
    rows = np.array([0, 2, 3, 5, 8])
    out = np.empty(rows.size)
    kernel.kth_largest(scores, rows, correct, rank, np.empty(64, dtype=np.float32), out)
    own = np.where(np.isnan(scores), -np.inf, scores)
    own[np.flatnonzero(correct >= 0), correct[correct >= 0]] = -np.inf
    assert np.array_equal(out, np.sort(own[rows], axis=1)[:, 64 - rank].astype(np.float64))


@pytest.mark.parametrize("seed", range(6))
def test_rank_dense_with_the_kernel_equals_the_numpy_path_bitwise(
    monkeypatch: pytest.MonkeyPatch, kernel, seed: int
) -> None:
    # random pools with duplicate codes, quantised ties, NaN / inf / -0.0 vectors, small blocks (many
    # code blocks: guesses, failed guesses, full buffers), 1-3 threads: the same bits either way
    rng = np.random.default_rng(100 + seed)
    monkeypatch.setenv("OMP_NUM_THREADS", str(1 + seed % 3))
    n, m, d = 400, 50, 3
    codes = rng.standard_normal((n, d)).astype(np.float32)
    queries = rng.standard_normal((m, d)).astype(np.float32)
    if seed % 2:
        codes, queries = np.round(codes), np.round(queries)
    codes[rng.integers(0, n, 20)] = codes[0]
    codes[rng.integers(0, n, 3), 0] = [np.nan, np.inf, -0.0]
    queries[rng.integers(0, m, 2), 1] = [np.inf, -0.0]
    answers = rng.integers(-1, n, size=m)
    for depth in (0, 1, 5, 60):
        with np.errstate(all="ignore"):
            got = rank_dense(queries, codes, answers, depth, memory_mb=0.004)
            monkeypatch.setattr(ranking, "USE_KERNEL", False)
            expected = rank_dense(queries, codes, answers, depth, memory_mb=0.004)
            monkeypatch.setattr(ranking, "USE_KERNEL", True)
        assert np.array_equal(got.ranks, expected.ranks) and np.array_equal(got.top, expected.top)
        assert np.array_equal(got.top_scores.view(np.uint64), expected.top_scores.view(np.uint64))
