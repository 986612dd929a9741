"""The block-wise ranking engine (csbench.evaluate.ranking) against the per-query reference the runner
uses (``rank_of_correct`` over a full score row, ``top_k`` of that row): same ranks, same top lists in
the same order, same scores, whatever the block shape. The data are built to break a wrong tie rule
or a wrong merge: integer scores with many exact ties, tie groups cut by block boundaries, NaN,
infinite and signed-zero scores, queries not evaluated, top lists deeper than the pool, 1 × 1 blocks;
both merge paths (float32 blocks: packed keys; float64: lexsort); codes sharing a score column
(identical vectors tie exactly); the correct score read from its own block; answer blocks computed
twice; blocks within ``memory_mb``."""

from __future__ import annotations

import numpy as np
import pytest

from csbench.evaluate.metrics import rank_of_correct
from csbench.evaluate.ranking import (
    RankResult,
    block_shape,
    distinct_rows,
    rank_blocks,
    rank_candidates,
    rank_dense,
)
from csbench.evaluate.runner import top_k


def reference(scores: np.ndarray, answers: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ranks, top lists and top scores of each row of a full score matrix, one query at a time."""
    n_queries = scores.shape[0]
    ranks = np.zeros(n_queries, dtype=np.int64)
    top = np.full((n_queries, depth), -1, dtype=np.int64)
    top_scores = np.full((n_queries, depth), np.nan)
    for i in range(n_queries):
        if answers[i] < 0:
            continue
        row = scores[i].astype(np.float64)
        ranks[i] = rank_of_correct(row, int(answers[i]))
        if depth:
            best = top_k(row, int(answers[i]), depth)
            top[i, : best.size] = best
            top_scores[i, : best.size] = row[best]
    return ranks, top, top_scores


def assert_same(result: RankResult, expected: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    ranks, top, top_scores = expected
    np.testing.assert_array_equal(result.ranks, ranks)
    np.testing.assert_array_equal(result.top, top)
    np.testing.assert_array_equal(result.top_scores, top_scores)  # NaN == NaN here


def matrix_scorer(scores: np.ndarray, calls: list | None = None, dtype: type = np.float64):
    """A ``score_block`` reading a precomputed matrix (recording the blocks asked for in ``calls``),
    as ``dtype``: float32 blocks take the engine's packed-key merge, float64 ones its lexsort merge."""
    scores = scores.astype(dtype)

    def score_block(queries: np.ndarray, codes: slice) -> np.ndarray:
        if calls is not None:
            calls.append((queries.copy(), codes))
        return scores[queries, codes]

    return score_block


def tied_scores(rng: np.random.Generator, n_queries: int, n_codes: int, levels: int = 3) -> np.ndarray:
    """Integer scores from very few levels: most scores tie with many others."""
    return rng.integers(0, levels, size=(n_queries, n_codes)).astype(np.float64)


def with_specials(rng: np.random.Generator, scores: np.ndarray, share: float = 0.15) -> np.ndarray:
    """Scores with NaN, -inf and +inf sprinkled in (including on correct codes)."""
    scores = scores.copy()
    for value in (np.nan, -np.inf, np.inf):
        scores[rng.random(scores.shape) < share / 3] = value
    return scores


BLOCKS = [(1, 1), (1, 3), (2, 2), (3, 5), (4, 1), (7, 4), (50, 50)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("depth", [0, 1, 3, 12, 40])
def test_rank_blocks_matches_the_reference_on_ties_and_special_scores(
    block: tuple[int, int], depth: int, dtype: type
) -> None:
    rng = np.random.default_rng([*block, depth])
    for trial in range(6):
        n_queries, n_codes = int(rng.integers(1, 14)), int(rng.integers(1, 30))
        scores = tied_scores(rng, n_queries, n_codes, levels=int(rng.integers(1, 5)))
        if trial % 2:
            scores = with_specials(rng, scores)
        answers = rng.integers(0, n_codes, size=n_queries)
        answers[rng.random(n_queries) < 0.2] = -1
        result = rank_blocks(matrix_scorer(scores, dtype=dtype), n_queries, n_codes, answers, depth, block=block)
        assert_same(result, reference(scores, answers, depth))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tie_groups_cut_by_block_boundaries(dtype: type) -> None:
    # one query, every code tied with the correct one, code blocks of 2: whatever block a tied code is
    # in, it counts against the model, and the top list takes them by ascending index, correct last
    scores = np.zeros((1, 9))
    for answer in (0, 4, 8):
        for depth in (3, 9, 12):
            result = rank_blocks(matrix_scorer(scores, dtype=dtype), 1, 9, np.array([answer]), depth, block=(1, 2))
            assert result.ranks.tolist() == [9]
            others = [j for j in range(9) if j != answer]
            assert result.top[0].tolist() == ([*others, answer] + [-1] * 3)[:depth]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tied_lists_merge_by_index_across_blocks(dtype: type) -> None:
    # the best scores form a tie group spread over every block; the list must keep the lowest indices
    # (a merge that favours the block seen first, or keeps the last entry's tie, fails here)
    scores = np.array([[1.0, 5.0, 5.0, 2.0, 5.0, 5.0, 0.0, 5.0, 5.0, 5.0]])
    for answer in (0, 8, 9):
        for block in [(1, 1), (1, 2), (1, 3), (1, 4), (1, 10)]:
            result = rank_blocks(matrix_scorer(scores, dtype=dtype), 1, 10, np.array([answer]), 4, block=block)
            assert_same(result, reference(scores, np.array([answer]), 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_negative_and_positive_scores_and_signed_zeros(dtype: type) -> None:
    # -0.0 == 0.0: they tie (by index in the list); negative scores order below positive ones (the
    # packed keys of float32 blocks flip the bits of negative numbers)
    scores = np.array([[0.0, -0.0, -1.5, 2.0, -0.0, 0.0, -3.0, 1e-30, -1e-30, 0.0]])
    for answer in range(10):
        for block in [(1, 1), (1, 3), (1, 10)]:
            for depth in (2, 6, 10):
                result = rank_blocks(matrix_scorer(scores, dtype=dtype), 1, 10, np.array([answer]), depth, block=block)
                assert_same(result, reference(scores.astype(dtype), np.array([answer]), depth))


@pytest.mark.parametrize("memory_mb", [1e-6, 2e-4, 1e-3, 0.05, 256.0])
def test_rank_dense_matches_the_reference_with_integer_embeddings(memory_mb: float) -> None:
    # integer vectors: every dot product is exact whatever the summation order, so the full matrix is
    # the reference; 3 dimensions of {-1, 0, 1} make duplicate codes and tied scores everywhere
    rng = np.random.default_rng(7)
    queries = rng.integers(-1, 2, size=(60, 3)).astype(np.float32)
    codes = rng.integers(-1, 2, size=(45, 3)).astype(np.float32)
    answers = rng.integers(0, 45, size=60)
    answers[::7] = -1
    scores = queries.astype(np.float64) @ codes.T.astype(np.float64)
    for depth in (1, 10, 50):
        result = rank_dense(queries, codes, answers, depth, memory_mb=memory_mb)
        assert_same(result, reference(scores, answers, depth))
    assert result.top.dtype == np.int64 and result.top_scores.dtype == np.float64


def test_rank_dense_on_random_floats_ties_duplicate_codes() -> None:
    # float32 BLAS may score a code and its exact duplicate differently by an ulp (a matmul's result
    # depends on the column's position): the engine scores identical vectors once, so a duplicate of
    # the correct code ties with it and counts against the model, as the reference does with
    # per-pair dot products (einsum: one loop per pair)
    rng = np.random.default_rng(3)
    codes = rng.standard_normal((300, 16)).astype(np.float32)
    queries = (codes[:200] + 2.0 * rng.standard_normal((200, 16))).astype(np.float32)
    codes[250:260] = codes[:10]
    codes[290:300] = codes[40]  # ten copies of one code
    answers = np.arange(200)
    result = rank_dense(queries, codes, answers, 20, memory_mb=0.01)
    assert result.block[0] < 200 and result.block[1] < 290  # several blocks both ways
    scores = np.einsum("qd,cd->qc", queries.astype(np.float64), codes.astype(np.float64))
    ranks, top, top_scores = reference(scores, answers, 20)
    np.testing.assert_array_equal(result.ranks, ranks)
    np.testing.assert_array_equal(result.top, top)
    np.testing.assert_allclose(result.top_scores, top_scores, rtol=1e-5)
    assert (result.ranks[:10] >= 2).all() and result.ranks[40] >= 11


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_score_columns_count_every_code(dtype: type) -> None:
    # rank_blocks over score columns: codes sharing a column tie exactly, each counted, listed by index
    rng = np.random.default_rng(8)
    for trial in range(20):
        n_columns = int(rng.integers(1, 12))
        code_column = np.r_[np.arange(n_columns), rng.integers(0, n_columns, size=int(rng.integers(0, 15)))]
        rng.shuffle(code_column)
        n_codes = code_column.size
        column_scores = tied_scores(rng, 9, n_columns, levels=3)
        if trial % 2:
            column_scores = with_specials(rng, column_scores)
        answers = rng.integers(-1, n_codes, size=9)
        for block in [(1, 1), (2, 3), (9, 12)]:
            for depth in (1, 4, 30):
                result = rank_blocks(
                    matrix_scorer(column_scores, dtype=dtype),
                    9,
                    n_codes,
                    answers,
                    depth,
                    code_column=code_column,
                    block=block,
                )
                assert_same(result, reference(column_scores[:, code_column], answers, depth))


def test_distinct_rows_groups_identical_vectors() -> None:
    vectors = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [5.0, 6.0], [3.0, 4.0], [1.0, 2.0]], dtype=np.float32)
    code_column, firsts = distinct_rows(vectors)
    assert code_column.tolist() == [0, 1, 0, 2, 1, 0]
    assert firsts.tolist() == [0, 1, 3]
    assert distinct_rows(vectors[:2]) == (None, None)
    assert distinct_rows(np.zeros((1, 3))) == (None, None)
    odd = np.zeros((4, 3), dtype=np.int8)  # 3 bytes a row: hashed byte by byte
    odd[1, 0] = 1
    assert distinct_rows(odd)[0].tolist() == [0, 1, 0, 0]


@pytest.mark.parametrize("dtype, width", [(np.float32, 384), (np.float32, 3), (np.float64, 5), (np.int16, 3)])
def test_distinct_rows_groups_like_unique_across_hash_chunks(
    monkeypatch: pytest.MonkeyPatch, dtype: type, width: int
) -> None:
    # rows hashed a chunk at a time in 64-bit, 32-bit or byte words (whichever the row's bytes divide
    # into), duplicates in other chunks than their first: the groups np.unique finds, in first-appearance
    # order; -0.0 and 0.0 (other bits) are not merged
    from csbench.evaluate import ranking

    monkeypatch.setattr(ranking, "_HASH_ROWS", 7)
    rng = np.random.default_rng([17, width])
    kinds = rng.standard_normal((13, width)).astype(dtype)
    if np.issubdtype(dtype, np.floating):
        kinds[0] = 0.0
        kinds[1] = -0.0
    vectors = kinds[rng.integers(0, 13, size=60)]
    code_column, firsts = distinct_rows(vectors)
    _, first_of_kind, kind_of_row = np.unique(
        vectors.view(np.dtype((np.void, vectors.itemsize * width))).ravel(), return_index=True, return_inverse=True
    )
    expected_firsts = np.sort(first_of_kind)
    assert firsts.tolist() == expected_firsts.tolist()
    column_of_kind = {int(kind_of_row[f]): column for column, f in enumerate(expected_firsts)}
    assert code_column.tolist() == [column_of_kind[int(k)] for k in kind_of_row.ravel()]


def test_depth_beyond_the_pool_pads_with_minus_one() -> None:
    scores = np.array([[3.0, 1.0, 2.0], [0.0, 0.0, 0.0]])
    result = rank_blocks(matrix_scorer(scores), 2, 3, np.array([2, 1]), 5, block=(1, 2))
    assert result.ranks.tolist() == [2, 3]
    assert result.top.tolist() == [[0, 2, 1, -1, -1], [0, 2, 1, -1, -1]]
    assert np.isnan(result.top_scores[:, 3:]).all()


def test_one_query_one_code() -> None:
    for score, rank in [(0.5, 1), (np.nan, 1), (-np.inf, 1)]:
        result = rank_dense(np.array([[score]]), np.array([[1.0]]), np.array([0]), 3)
        assert result.ranks.tolist() == [rank]
        assert result.top.tolist() == [[0, -1, -1]]
    result = rank_dense(np.ones((1, 2)), np.ones((1, 2)), np.array([-1]), 2)
    assert result.ranks.tolist() == [0] and result.top.tolist() == [[-1, -1]]
    assert not result.evaluated.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_and_infinite_correct_scores(dtype: type) -> None:
    # NaN correct: last (rank n, top_k puts it after everything); -inf correct: NaN elsewhere does not
    # count for the rank but does sort before it in the top list (top_k reads NaN as -inf)
    scores = np.array(
        [
            [np.nan, 1.0, np.nan, 2.0, -np.inf],
            [-np.inf, np.nan, 1.0, -np.inf, np.nan],
            [np.inf, np.inf, np.nan, 0.0, 1.0],
        ]
    )
    answers = np.array([0, 0, 1])
    for block in BLOCKS:
        result = rank_blocks(matrix_scorer(scores, dtype=dtype), 3, 5, answers, 5, block=block)
        assert_same(result, reference(scores, answers, 5))
    assert result.ranks.tolist() == [5, 3, 2]
    assert result.top[1].tolist() == [2, 1, 3, 4, 0]


def test_no_query_evaluated_and_no_code() -> None:
    result = rank_blocks(matrix_scorer(np.zeros((3, 0))), 3, 0, np.full(3, -1), 2)
    assert result.ranks.tolist() == [0, 0, 0] and (result.top == -1).all()
    with pytest.raises(ValueError, match="answers"):
        rank_blocks(matrix_scorer(np.zeros((1, 2))), 1, 2, np.array([2]), 1)


def test_correct_scores_come_from_the_counted_block() -> None:
    # a scorer whose value for a pair depends on the block it is computed in (as float sums may with
    # the shape of a matmul): the rank must be consistent with the scores actually compared, so the
    # correct score is read from its own code block, never from a separate computation
    base = np.zeros((4, 12))

    def shifted(queries: np.ndarray, codes: slice) -> np.ndarray:
        return base[queries, codes] + 1e-9 * (codes.start % 3)

    for block in [(1, 2), (2, 3), (4, 4), (4, 12)]:
        answers = np.array([0, 5, 11, 3])
        result = rank_blocks(shifted, 4, 12, answers, 12, block=block)
        seen = np.concatenate(
            [shifted(np.arange(4), slice(s, min(s + block[1], 12))) for s in range(0, 12, block[1])], 1
        )
        assert_same(result, reference(seen, answers, 12))


def test_query_blocks_spanning_several_code_blocks_recompute_them_consistently() -> None:
    # few queries with scattered answers over many code blocks: a query block gathers the answers of
    # several code blocks, computing those blocks twice; the ranks still match the reference
    rng = np.random.default_rng(11)
    scores = tied_scores(rng, 12, 200, levels=4)
    answers = rng.choice(200, size=12, replace=False)
    calls: list = []
    result = rank_blocks(matrix_scorer(scores, calls), 12, 200, answers, 15, block=(12, 10))
    assert_same(result, reference(scores, answers, 15))
    # 20 code blocks: up to 1 + 20 // 8 = 3 answer code blocks share a query block, not 12 separate passes
    n_query_blocks = len({tuple(q) for q, _ in calls})
    assert n_query_blocks < 12
    assert len(calls) > 20 * n_query_blocks  # the recomputed answer blocks

    flip = iter(range(10**6))

    def unstable(queries: np.ndarray, codes: slice) -> np.ndarray:
        return scores[queries, codes] + 1e-6 * next(flip)

    with pytest.raises(RuntimeError, match="deterministic"):
        rank_blocks(unstable, 12, 200, answers, 5, block=(12, 10))


@pytest.mark.parametrize("memory_mb", [1e-5, 3e-3, 256.0])
def test_rank_candidates_matches_the_reference(memory_mb: float) -> None:
    rng = np.random.default_rng(5)
    codes = rng.integers(-1, 2, size=(30, 4)).astype(np.float32)
    queries = rng.integers(-1, 2, size=(25, 4)).astype(np.float32)
    candidates = rng.integers(0, 30, size=(25, 9))
    candidates[:, 3] = candidates[:, 0]  # a code listed twice: an exact tie
    answer_pos = rng.integers(0, 9, size=25)
    answer_pos[::6] = -1
    scores = np.einsum("qd,qkd->qk", queries.astype(np.float64), codes[candidates].astype(np.float64))
    for depth in (1, 5, 9, 14):
        result = rank_candidates(queries, codes, candidates, answer_pos, depth, memory_mb=memory_mb)
        assert_same(result, reference(scores, answer_pos, depth))
        assert result.n_candidates == 9


def test_rank_candidates_checks_its_input() -> None:
    with pytest.raises(ValueError, match="one row per query"):
        rank_candidates(np.ones((2, 3)), np.ones((4, 3)), np.zeros((3, 2), dtype=int), np.zeros(2, dtype=int), 1)
    with pytest.raises(ValueError, match="code rows"):
        rank_candidates(np.ones((2, 3)), np.ones((4, 3)), np.full((2, 2), 4), np.zeros(2, dtype=int), 1)


def test_blocks_stay_within_memory() -> None:
    rng = np.random.default_rng(2)
    scores = rng.standard_normal((500, 800))
    calls: list = []
    memory_mb, depth = 0.5, 20
    result = rank_blocks(matrix_scorer(scores, calls), 500, 800, np.arange(500), depth, memory_mb=memory_mb)
    rows, cols = result.block
    assert 1 < rows < 500 and 1 < cols < 800
    budget = memory_mb * 2**20
    assert max(q.size * (c.stop - c.start) for q, c in calls) * 26 + rows * depth * 64 <= budget
    assert_same(result, reference(scores, np.arange(500), depth))
    assert block_shape(10, 10**6, 100, 256, 14)[0] == 10  # few queries: wide code blocks instead
    assert block_shape(10**6, 10**6, 100, 1e-9, 14) == (1, 1)


def test_progress_bar_does_not_change_the_result(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(4)
    queries, codes = rng.standard_normal((40, 8)), rng.standard_normal((40, 8))
    quiet = rank_dense(queries, codes, np.arange(40), 5, memory_mb=0.001)
    loud = rank_dense(queries, codes, np.arange(40), 5, memory_mb=0.001, progress=True)
    assert_same(loud, (quiet.ranks, quiet.top, quiet.top_scores))
    assert "rank" in capsys.readouterr().err


def record_failed(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record, per query block, how many queries the guessed threshold failed (ranked again); one
    thread, so one list of queries per block."""
    from csbench.evaluate import ranking

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    failed: list = []
    finish = ranking._Head.finish

    def recording(head: ranking._Head) -> np.ndarray:
        out = finish(head)
        failed.append(out.size)
        return out

    monkeypatch.setattr(ranking._Head, "finish", recording)
    return failed


@pytest.mark.parametrize("specials", [False, True])
def test_guessed_thresholds_and_full_buffers_keep_the_exact_lists(
    monkeypatch: pytest.MonkeyPatch, specials: bool
) -> None:
    # float32 blocks wider than the depth, more codes than a block: each query's candidates are the
    # scores at or above a threshold guessed from its first block, appended to a buffer of 2 * depth
    # that keeps its depth best when full; scores rounded to one decimal tie across blocks
    failed = record_failed(monkeypatch)
    rng = np.random.default_rng(11)
    scores = np.round(rng.standard_normal((16, 3000)), 1)
    if specials:
        scores = with_specials(rng, scores, share=0.03)
        scores[:, ::7] = np.where(rng.random((16, 429)) < 0.5, -0.0, 0.0)
    answers = rng.integers(0, 3000, size=16)
    answers[3] = -1
    for depth in (1, 50, 120):
        result = rank_blocks(matrix_scorer(scores, dtype=np.float32), 16, 3000, answers, depth, block=(8, 200))
        assert_same(result, reference(scores.astype(np.float32), answers, depth))
    assert not any(failed)


def test_a_guess_too_high_ranks_the_query_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # the answer block scores far above the rest (as a query's own neighbourhood may): the threshold
    # guessed there leaves fewer than depth candidates, and those queries are ranked again without it
    failed = record_failed(monkeypatch)
    rng = np.random.default_rng(12)
    scores = rng.standard_normal((8, 1000))
    scores[:, :100] += 10
    answers = rng.integers(0, 100, size=8)
    calls: list = []
    depth = 40
    result = rank_blocks(matrix_scorer(scores, calls, np.float32), 8, 1000, answers, depth, block=(8, 100))
    assert_same(result, reference(scores.astype(np.float32), answers, depth))
    assert failed[0] == 8 and len(calls) == 20  # every block computed again, for the failed queries


def test_a_score_block_changing_dtype_keeps_the_exact_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    # float32 first (a guessed threshold, packed keys), then float64 blocks (sorted lists): a query
    # short of depth candidates at its guess when the lists change form (here: every query, after one
    # block) is ranked again
    failed = record_failed(monkeypatch)
    rng = np.random.default_rng(13)
    scores = np.round(rng.standard_normal((6, 1000)) * 64) / 64  # the same in float32: many ties
    answers = np.array([5, 50, 99, 10, 60, 90])

    def score_block(queries: np.ndarray, codes: slice) -> np.ndarray:
        block = scores[queries, codes]
        return block.astype(np.float32) if codes.start == 0 else block

    for depth in (40, 50):
        result = rank_blocks(score_block, 6, 1000, answers, depth, block=(6, 100))
        assert_same(result, reference(scores, answers, depth))
        assert failed[0] == 6
        failed.clear()


@pytest.mark.parametrize("threads", ["1", "3"])
def test_threads_share_a_block_by_rows_without_changing_the_result(
    monkeypatch: pytest.MonkeyPatch, threads: str
) -> None:
    # the work on each score block runs one part of the queries' rows per thread (OMP_NUM_THREADS):
    # the same ranks, lists and scores as the reference, guessed thresholds and shared columns included
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    rng = np.random.default_rng(14)
    queries = rng.integers(-2, 3, size=(70, 4)).astype(np.float32)
    codes = rng.integers(-2, 3, size=(900, 4)).astype(np.float32)
    answers = rng.integers(0, 900, size=70)
    answers[::9] = -1
    for depth in (0, 30, 60):
        result = rank_dense(queries, codes, answers, depth, memory_mb=0.05)
        assert result.block[0] < 70 and result.block[1] < 900
        assert_same(result, reference(queries @ codes.T, answers, depth))


def row_parts_case(rng: np.random.Generator, specials: bool) -> tuple[np.ndarray, np.ndarray]:
    """61 x 700 scores rounded to 0.1 (ties), special scores with ``specials``; the answers of the first
    20 queries among the first 100 codes, which score 10 more for them (their guessed thresholds leave
    too few candidates: ranked again), every 11th query not evaluated."""
    n_queries, n_codes = 61, 700
    scores = np.round(rng.standard_normal((n_queries, n_codes)), 1)
    scores[:20, :100] += 10
    if specials:
        scores = with_specials(rng, scores, share=0.03)
    answers = rng.integers(0, n_codes, size=n_queries)
    answers[:20] = rng.integers(0, 100, size=20)
    answers[::11] = -1
    return scores, answers


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("specials", [False, True])
def test_row_parts_rank_each_part_through_every_block_in_one_thread(
    monkeypatch: pytest.MonkeyPatch, threads: str, specials: bool
) -> None:
    # rank_blocks(row_parts=...): each part of a query block runs through all code blocks in one thread
    # (rank_dense's mode): the same ranks, lists and scores as the reference with ties, special scores,
    # answers spread over many code blocks (blocks computed twice), guesses too high (ranked again) and
    # queries not evaluated; the score blocks asked for hold one part's rows, computed by at most
    # rows // row_parts threads at once (the parts' scores stay within the block's memory)
    import threading
    import time

    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    scores, answers = row_parts_case(np.random.default_rng([15, int(threads), specials]), specials)
    n_queries, n_codes = scores.shape
    calls: list = []
    matrix = matrix_scorer(scores, calls, np.float32)
    lock = threading.Lock()
    running = [0, 0]  # score blocks being computed now, the most at once

    def score_block(queries: np.ndarray, codes: slice) -> np.ndarray:
        with lock:
            running[0] += 1
            running[1] = max(running)
        time.sleep(5e-4)  # long enough for the threads' parts to overlap
        try:
            return matrix(queries, codes)
        finally:
            with lock:
                running[0] -= 1

    for depth in (0, 1, 40):
        for block in [(20, 70), (25, 700), (61, 33)]:
            calls.clear()
            running[1] = 0
            result = rank_blocks(score_block, n_queries, n_codes, answers, depth, block=block, row_parts=8)
            assert_same(result, reference(scores.astype(np.float32), answers, depth))
            if threads == "1":  # one thread: the blocks are worked on whole, as without row_parts
                assert running[1] == 1
            else:
                assert max(len(q) for q, _ in calls) <= 8
                assert 2 <= running[1] <= min(int(threads), block[0] // 8)


@pytest.mark.parametrize("scan_columns", [7, 16, 1024])
@pytest.mark.parametrize("specials", [False, True])
def test_row_parts_pass_over_a_block_in_pieces(
    monkeypatch: pytest.MonkeyPatch, scan_columns: int, specials: bool
) -> None:
    # in rank_dense's mode (row parts) every code block after a query block's first is scored and passed
    # over in pieces of at most SCAN_COLUMNS columns (while in the cache): the same ranks, lists and
    # scores as the reference, with ties, special scores, guesses too high (ranked again: through the
    # same pieces), answers in many blocks (their correct scores read from the pieces) and queries not
    # evaluated; the first block of each query block is asked for whole (its guess reads all of it)
    from csbench.evaluate import ranking

    monkeypatch.setattr(ranking, "SCAN_COLUMNS", scan_columns)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    scores, answers = row_parts_case(np.random.default_rng([16, scan_columns, specials]), specials)
    n_queries, n_codes = scores.shape
    calls: list = []
    score_block = matrix_scorer(scores, calls, np.float32)
    for depth in (0, 1, 5, 40):
        for block in [(20, 70), (25, 700), (61, 33)]:
            calls.clear()
            result = rank_blocks(score_block, n_queries, n_codes, answers, depth, block=block, row_parts=8)
            assert_same(result, reference(scores.astype(np.float32), answers, depth))
            widths = {codes.stop - codes.start for _, codes in calls}
            assert block[1] in widths  # the first block of a query block whole
            if scan_columns < block[1] < n_codes:
                assert min(widths) <= scan_columns  # the others in pieces
            else:
                assert widths == {block[1]} | {n_codes % block[1]} - {0}
