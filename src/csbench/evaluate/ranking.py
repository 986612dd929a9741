"""Block-wise ranking engine: ranks and top lists of many queries without the full score matrix.

The per-query reference is ``metrics.rank_of_correct`` (the number of candidates scoring at least
as high as the correct one: ties count against the model; a NaN correct score ranks last; a NaN
elsewhere never counts) and ``runner.top_k`` (best first, NaN as -inf; among equal scores the
other candidates by ascending index, then the correct one, so its position equals its rank). The
engine gives the same numbers while holding only one block of scores (a block of queries × a block
of codes, sized from ``memory_mb``) and, per query, a count and a running top list:

* each query's correct score is read from the very block computation whose scores are counted
  against it, so its rank agrees with the scores it was compared with;
* codes with identical vectors share one score column (``code_column``): float32 BLAS does not give
  bitwise-equal products for equal vectors at different positions of a matmul (measured: ~3 % of
  such pairs differ by an ulp), which would let a duplicate of the correct code win or lose the tie
  at random; scored once, duplicates tie exactly and count against the model;
* the running top list holds the best ``depth`` codes other than the correct one, merged block
  after block (a block only contributes the scores that reach the list's current last entry); the
  correct code is inserted at the end, at position rank - 1 (top_k's order). With float32 blocks (all
  of ``rank_dense``'s) a list is a buffer of packed (score, code) keys, appended to and cut back to its
  best ``depth`` by a linear selection, sorted once at the end; a query only takes the scores at or
  above a threshold guessed from its first block (expected to leave ~1.4-2x ``depth`` candidates) and
  checked at the end: a query left short of ``depth`` is ranked again without it (exact either way);
* the work on a block (counting, top lists) is shared by threads, one part of the queries' rows each
  (``work_threads``: the BLAS threads the environment sets); a query's results depend on its own row
  only, so the thread count never changes them. ``rank_dense``'s products too: BLAS runs on one
  thread, over fixed parts of ``PRODUCT_ROWS`` query rows (a multi-threaded OpenBLAS rounds some
  scores' last bit differently with its thread count, so a snakemake job and a dvc stage, given
  different threads, ranked near-tied codes differently). Where a query block holds at least two such
  parts, each part runs through every code block in one thread, its products and its pass over the
  scores alternating there (``rank_blocks``'s ``row_parts``): no thread waits for another between code
  blocks, and the products are the same, so the same bits. There, every code block after a query
  block's first is scored and passed over in pieces of ``SCAN_COLUMNS`` columns, each while its scores
  are still in the core's cache (the first stays whole: its guess reads all of it).
* where the selection kernel is compiled (``csbench.evaluate._select``, Cython, built by ``make
  setup``; ``USE_KERNEL``), a float32 block is counted and its candidates appended in one pass per
  row in C without the GIL, a full buffer cut by quickselect as it fills, the guess read by
  quickselect, and the lists written into the result in place; without it the same steps run in
  numpy. The results are bitwise the same either way (tests/evaluate/test_ranking_kernel.py runs
  every engine test through the kernel's Python source and, where built, its compiled module).

``rank_blocks`` is the core (any scoring function); ``rank_dense`` ranks inner products of vectors
against one pool; ``rank_candidates`` ranks each query against its own candidate row.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from csbench.evaluate import _select

ScoreBlock = Callable[[np.ndarray, slice], np.ndarray]

# Whether float32 blocks go through the selection kernel (``_select.scan_block``: counting and top-list
# candidates in one pass per row, without the GIL) instead of the numpy path; same results either way.
# Only when the kernel is compiled: run as Python it is exact but far too slow (the tests switch it on).
USE_KERNEL: bool = _select.COMPILED

# Query rows per BLAS product of rank_dense, each on one BLAS thread: fixed, so that every score's bits
# are the same whatever the number of threads (work_threads) that computes the parts.
PRODUCT_ROWS = 1024

# Score columns a part of rank_blocks(row_parts=...) computes and passes over at a time, after its query
# block's first code block: 1,024 query rows x 1,024 float32 scores (4 MiB) are passed over while still in
# the core's cache, where a whole block's (17 MiB at the default 256 MB) came back from memory: on the
# development machine the pass took 0.67 ns a score against 1.38 (docs/performance.md, the ranking section).
SCAN_COLUMNS = 1024

# Bytes of working memory per entry of a score block beyond the scores: the comparison masks
# (1 byte each); the scores are counted three times (the block, a NaN-free or partitioned copy, slack).
_MASK_BYTES = 2
# Bytes per query and top-list slot: three head arrays (float64, float64, int64) and the merge's copies.
_TOP_BYTES = 64
# A query block may gather the queries whose correct codes lie in up to 1 + n_code_blocks // this many
# code blocks, at the price of computing all but one of those blocks twice (at most this share extra).
_RECOMPUTE_SHARE = 8


@dataclass
class RankResult:
    """Ranks and top lists of ``n_queries`` queries over ``n_candidates`` candidates each.

    ``ranks[i]``: the 1-based rank of query i's correct candidate, ties against the model
    (``rank_of_correct``); 0 when query i is not evaluated (its answer is -1).
    ``top[i]``: the indices of query i's best ``depth`` candidates in ``top_k`` order (code indices for
    ``rank_blocks``/``rank_dense``, positions in the query's candidate row for ``rank_candidates``);
    padded with -1 when there are fewer candidates than ``depth``, all -1 for a query not evaluated.
    ``top_scores[i]``: their scores as computed (float64; NaN where ``top`` is -1).
    ``block``: the (queries, score columns) shape of the score blocks used.
    """

    ranks: np.ndarray
    top: np.ndarray
    top_scores: np.ndarray
    n_candidates: int
    block: tuple[int, int] = (0, 0)

    @property
    def evaluated(self) -> np.ndarray:
        """Boolean mask of the queries that have a rank."""
        return self.ranks > 0


def block_shape(n_queries: int, n_codes: int, depth: int, memory_mb: float, bytes_per_score: float) -> tuple[int, int]:
    """(queries, codes) per score block so that a block, its temporaries and the top-list buffers of
    its queries fit in ``memory_mb`` (never below 1 × 1). Square-ish blocks, widened along codes when
    there are few queries: each query block streams every code once, so fewer query blocks is better."""
    budget = max(float(memory_mb), 0.0) * 2**20
    elements = max(1, int(budget // bytes_per_score))
    n_queries, n_codes = max(n_queries, 1), max(n_codes, 1)
    rows = max(1, min(n_queries, math.isqrt(elements)))
    cols = max(1, min(n_codes, elements // rows))
    rows = max(1, min(n_queries, elements // cols))
    per_row = cols * bytes_per_score + depth * _TOP_BYTES
    rows = max(1, min(rows, int(budget // per_row)))
    return rows, cols


def rank_blocks(
    score_block: ScoreBlock,
    n_queries: int,
    n_codes: int,
    answers: np.ndarray,
    depth: int,
    memory_mb: float = 256.0,
    progress: bool = False,
    *,
    code_column: np.ndarray | None = None,
    bytes_per_score: float = 8 * 3 + _MASK_BYTES,
    block: tuple[int, int] | None = None,
    row_parts: int | None = None,
) -> RankResult:
    """Rank ``n_queries`` queries over ``n_codes`` codes, one score block at a time.

    ``score_block(query_indices, column_slice)`` returns the float scores of those queries (an int64
    array, ascending) against a slice of score columns, shape (len(query_indices), slice length).
    Without ``code_column`` column j scores code j; with it, code c is scored by column
    ``code_column[c]`` (codes with identical vectors share a column, and so tie exactly); every column
    must score at least one code. ``score_block`` must be deterministic: when a query block's correct
    codes span several column blocks, all but one of those blocks are computed twice (first for the
    correct scores, then for counting), and a difference raises ``RuntimeError``.

    ``answers[i]`` is the code index of query i's correct code, -1 when query i is not evaluated;
    ``depth`` is the length of the top lists. ``bytes_per_score`` is the working memory one block
    entry costs (score and temporaries), which with ``memory_mb`` sizes the blocks; ``block`` =
    (queries, columns) sets the block shape instead (tests, tuning).

    ``row_parts``: ``score_block`` may be called from several threads at once, for rows of one query
    block only (it computes each row from that row alone, as ``rank_dense``'s products do). Each query
    block is then cut into parts of ``row_parts`` queries (from its start: the same parts whatever the
    threads), and each part runs through every column block in one thread, its product and its counting
    alternating there; no thread waits for the others between column blocks. At most ``rows //
    row_parts`` parts run at once, so the parts' scores stay within the block's memory; with fewer than
    two such parts, the block is worked on as without ``row_parts``.
    """
    answers = np.asarray(answers, dtype=np.int64).reshape(-1)
    if answers.size != n_queries:
        raise ValueError(f"{answers.size} answers for {n_queries} queries")
    if depth < 0:
        raise ValueError(f"depth must be >= 0, not {depth}")
    if np.any((answers < -1) | (answers >= n_codes)):
        raise ValueError(f"answers must be code indices in [0, {n_codes}) or -1")
    columns = _Columns.of(code_column, n_codes)
    ranks = np.zeros(n_queries, dtype=np.int64)
    # every evaluated query's row is written whole (writing -1 / NaN first would touch them twice)
    top = np.empty((n_queries, depth), dtype=np.int64)
    top_scores = np.empty((n_queries, depth))
    top[answers < 0], top_scores[answers < 0] = -1, np.nan
    evaluated = np.flatnonzero(answers >= 0)
    n_columns = columns.n
    if block is None:
        rows, cols = block_shape(evaluated.size, n_columns, depth, memory_mb, bytes_per_score)
    else:
        rows, cols = max(1, int(block[0])), max(1, min(max(n_columns, 1), int(block[1])))
    result = RankResult(ranks, top, top_scores, n_codes, (rows, cols))
    if evaluated.size == 0:
        return result
    slices = _cut(slice(0, n_columns), cols)
    answer_columns = columns.column_of(answers)
    blocks = _query_blocks(answer_columns, evaluated, rows, cols, len(slices))

    def rank(queries: np.ndarray, pool: ThreadPoolExecutor | None, stores: list[dict]) -> int:
        """Rank one query block, or one part of one (its results go into ``result``)."""
        ranks[queries] = _rank_query_block(
            score_block,
            queries,
            answers[queries],
            answer_columns[queries],
            slices,
            columns,
            n_codes,
            depth,
            pool,
            out=(top, top_scores),
            stores=stores,
        )
        return queries.size

    with tqdm(total=evaluated.size, desc="rank", unit="query", disable=not progress, mininterval=2) as bar:
        parts_at_once = min(work_threads(), rows // max(1, row_parts)) if row_parts is not None else 0
        if parts_at_once >= 2:
            _rank_in_parts(rank, blocks, parts_at_once, row_parts, bar)
            return result
        threads = min(work_threads(), rows)
        stores: list[dict] = [{} for _ in range(threads)]  # per part of a query block: its reused top-list buffers
        with ThreadPoolExecutor(threads) as pool:
            for queries in blocks:
                bar.update(rank(queries, pool, stores))
    return result


def _rank_in_parts(
    rank: Callable[[np.ndarray, ThreadPoolExecutor | None, list[dict]], int],
    blocks: list[np.ndarray],
    threads: int,
    row_parts: int,
    bar: tqdm,
) -> None:
    """``rank_blocks`` with ``row_parts`` (its docstring): each query block's parts ranked by ``rank``
    in ``threads`` threads, each part whole in one of them."""
    tasks = [block[start : start + row_parts] for block in blocks for start in range(0, block.size, row_parts)]
    # the largest parts first (a block's last part is short): no thread is left alone with a full one at the end
    tasks.sort(key=lambda part: -part.size)
    local = threading.local()  # each thread's reused top-list buffers (one part at a time per thread)

    def rank_part(queries: np.ndarray) -> int:
        store = getattr(local, "store", None)
        if store is None:
            store = local.store = {}
        return rank(queries, None, [store])

    with ThreadPoolExecutor(max(1, min(threads, len(tasks)))) as pool:
        for done in pool.map(rank_part, tasks):
            bar.update(done)


def work_threads() -> int:
    """Threads for the work on a score block (counting, top lists), by rows of queries: the BLAS threads
    the environment sets (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or ``MKL_NUM_THREADS``, as a
    snakemake job's threads set them), else the CPUs this process may use; at most 8. Each query's rank
    and list depend on its own row only: any number of threads gives the same results."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return min(int(value), 8)
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, min(available, 8))


def one_blas_thread():
    """A context in which numpy's BLAS computes every product on one thread (threadpoolctl; torch keeps
    its threads). A multi-threaded OpenBLAS rounds some products' last bit differently with its thread
    count (a score moved between 1 and 2 threads), so a snakemake job (its rule's threads) and a dvc
    stage (every core) ranked near-tied codes differently; every search runs inside it (``rank_dense``,
    and ``runner.search`` on each path, a retriever's own ``scores`` included), and so scores the same
    bits under any thread count
    (tests/evaluate/test_thread_independence.py)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _float32_matrices(queries: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``queries`` and ``codes`` as contiguous float32 matrices of the same width (ValueError if not)."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    c = np.ascontiguousarray(codes, dtype=np.float32)
    if q.ndim != 2 or c.ndim != 2 or q.shape[1] != c.shape[1]:
        raise ValueError(f"queries {q.shape} and codes {c.shape} must be matrices of the same width")
    return q, c


def rank_dense(
    queries: np.ndarray,
    codes: np.ndarray,
    answers: np.ndarray,
    depth: int,
    memory_mb: float = 256.0,
    progress: bool = False,
) -> RankResult:
    """Rank each query vector against all ``codes`` by inner product (float32 matmul of blocks).

    ``answers[i]``: row of ``codes`` holding query i's correct code, -1 = not evaluated. Codes with
    bitwise-identical vectors are scored once, so they tie exactly. See ``RankResult`` for what is
    returned (``top`` holds code rows)."""
    q, c = _float32_matrices(queries, codes)
    code_column, firsts = distinct_rows(c, memory_mb)
    # per calling thread (rank_blocks calls from several with row_parts): the current queries' vectors,
    # gathered once for all their code blocks, and the last block's scores (rank_blocks is done with them)
    local = threading.local()
    threads = work_threads()

    def score_block(rows: np.ndarray, columns: slice) -> np.ndarray:
        if getattr(local, "rows", None) is not rows:
            local.rows, local.vectors = rows, q[rows]
        # with duplicates, column j is the first code of its kind: gathered per block, no copy of all codes
        block = c[columns] if firsts is None else c[firsts[columns]]
        shape = (rows.size, block.shape[0])
        memory = getattr(local, "out", None)
        if memory is None or memory.size < shape[0] * shape[1]:
            memory = local.out = np.empty(shape[0] * shape[1], dtype=np.float32)
        # the products into the same memory (a block's, or a narrower piece's, in its first entries): a
        # fresh block of this size would be new pages (mmap) to fault in and zero, every block
        out = memory[: shape[0] * shape[1]].reshape(shape)
        vectors = local.vectors
        parts = _cut(slice(0, shape[0]), PRODUCT_ROWS)

        def product(part: slice) -> None:
            np.matmul(vectors[part], block.T, out=out[part])

        if len(parts) == 1:
            product(parts[0])
        else:
            list(products.map(product, parts))
        return out

    # each product on one BLAS thread, over PRODUCT_ROWS query rows: rank_blocks runs each part of a query
    # block through all code blocks in one of its threads (row_parts); a block too small for two parts is
    # cut here, its parts spread over the engine's threads. The same products either way: the same bits.
    with one_blas_thread(), ThreadPoolExecutor(threads) as products:
        return rank_blocks(
            score_block,
            q.shape[0],
            c.shape[0],
            answers,
            depth,
            memory_mb,
            progress,
            code_column=code_column,
            bytes_per_score=4 * 3 + _MASK_BYTES,
            row_parts=PRODUCT_ROWS,
        )


def rank_candidates(
    queries: np.ndarray,
    codes: np.ndarray,
    candidates: np.ndarray,
    answer_pos: np.ndarray,
    depth: int,
    memory_mb: float = 256.0,
    progress: bool = False,
) -> RankResult:
    """Rank each query against its own candidates: row i of ``candidates`` (n_queries, k) holds the
    rows of ``codes`` query i is ranked against (e.g. GeCS: its correct code and 99 distractors), and
    ``answer_pos[i]`` the position of its correct code in that row (-1 = not evaluated).

    Inner products in float32 (einsum: each pair is one dot product, so a code listed twice or two
    identical vectors tie exactly), for query chunks whose gathered candidate vectors fit
    ``memory_mb``. Ranks are among the k candidates; ``top`` holds *positions in the query's
    candidate row* (map them with ``candidates[i, top[i]]``)."""
    q, c = _float32_matrices(queries, codes)
    rows = np.asarray(candidates, dtype=np.int64)
    if rows.ndim != 2 or rows.shape[0] != q.shape[0]:
        raise ValueError(f"candidates {rows.shape} must have one row per query ({q.shape[0]})")
    if rows.size and (rows.min() < 0 or rows.max() >= c.shape[0]):
        raise ValueError(f"candidates must be code rows in [0, {c.shape[0]})")

    def score_block(members: np.ndarray, positions: slice) -> np.ndarray:
        return np.einsum("qd,qkd->qk", q[members], c[rows[members, positions]])

    # each block entry gathers a candidate vector (4 bytes a dimension) before it is scored
    cost = 4 * q.shape[1] + 4 * 3 + _MASK_BYTES
    return rank_blocks(
        score_block, q.shape[0], rows.shape[1], answer_pos, depth, memory_mb, progress, bytes_per_score=cost
    )


_HASH_ROWS = 8192  # rows hashed at a time by distinct_rows


def distinct_rows(vectors: np.ndarray, memory_mb: float = 256.0) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Group bitwise-identical rows: ``(code_column, firsts)`` where row r's column is
    ``code_column[r]`` and ``firsts[j]`` is the first row of column j (columns in order of first
    appearance); ``(None, None)`` when all rows differ. Rows are hashed (an exact 64-bit hash of their
    bits, in chunks bounded by ``memory_mb``), and rows sharing a hash are compared byte for byte."""
    rows = np.ascontiguousarray(vectors)
    n = rows.shape[0]
    if n < 2:
        return None, None
    bits = rows.reshape(n, -1).view(np.uint8)
    # the widest words the rows divide into: 64-bit words need no widened copy for the product below
    for word in (np.uint64, np.uint32):
        if bits.shape[1] % np.dtype(word).itemsize == 0:
            bits = bits.view(word)
            break
    multipliers = np.random.default_rng(0).integers(0, 2**63, size=bits.shape[1], dtype=np.uint64) * 2 + 1
    hashes = np.empty(n, dtype=np.uint64)
    # chunks of rows small enough that a narrower word's widened copy is reused memory, not fresh pages
    chunk = max(1, min(_HASH_ROWS, int(max(float(memory_mb), 1.0) * 2**20 // (8 * bits.shape[1]))))
    for start in range(0, n, chunk):  # integer matmul wraps modulo 2**64: a linear hash of the bits
        hashes[start : start + chunk] = bits[start : start + chunk] @ multipliers
    order = np.argsort(hashes, kind="stable")
    repeated = hashes[order][1:] == hashes[order][:-1]
    if not repeated.any():
        return None, None
    shared = np.zeros(n, dtype=bool)
    shared[1:] |= repeated
    shared[:-1] |= repeated
    suspects = order[shared]
    whole = np.ascontiguousarray(bits[suspects]).view(np.dtype((np.void, bits.shape[1] * bits.itemsize))).ravel()
    _, group = np.unique(whole, return_inverse=True)
    first = np.full(group.max() + 1, n, dtype=np.int64)
    np.minimum.at(first, group, suspects)
    representative = np.arange(n)
    representative[suspects] = first[group]
    is_first = representative == np.arange(n)
    if is_first.all():
        return None, None
    return (np.cumsum(is_first) - 1)[representative], np.flatnonzero(is_first)


@dataclass(frozen=True)
class _Columns:
    """The codes each score column scores (CSR: ``codes[offsets[j]:offsets[j + 1]]``, ascending), or
    the identity (``codes`` is None: column j scores code j)."""

    n: int
    offsets: np.ndarray | None = None
    codes: np.ndarray | None = None
    column: np.ndarray | None = None
    shared: np.ndarray | None = None  # columns scoring several codes, ascending
    extra: np.ndarray | None = None  # codes beyond the first of each shared column
    sizes: np.ndarray | None = None  # codes per column (int64)

    @classmethod
    def of(cls, code_column: np.ndarray | None, n_codes: int) -> _Columns:
        if code_column is None:
            return cls(n_codes)
        column = np.asarray(code_column, dtype=np.int64).reshape(-1)
        if column.size != n_codes:
            raise ValueError(f"code_column has {column.size} entries for {n_codes} codes")
        if n_codes == 0:
            return cls(0)
        if column.min() < 0:
            raise ValueError("code_column must hold column indices >= 0")
        sizes = np.bincount(column)
        if (sizes == 0).any():
            raise ValueError("every score column must score at least one code")
        offsets = np.r_[0, np.cumsum(sizes)]
        codes = np.argsort(column, kind="stable")  # by column, then code index
        shared = np.flatnonzero(sizes > 1)
        return cls(sizes.size, offsets, codes, column, shared, sizes[shared] - 1, sizes.astype(np.int64))

    def column_of(self, codes: np.ndarray) -> np.ndarray:
        """Column of each code (-1 stays -1)."""
        if self.column is None:
            return codes.copy()
        return np.where(codes >= 0, self.column[np.maximum(codes, 0)], -1)

    def extra_count(self, reached: np.ndarray, start: int) -> np.ndarray:
        """Per row, the codes beyond the first of the shared columns ``reached`` marks (block at ``start``)."""
        if self.shared is None or not self.shared.size:
            return np.zeros(reached.shape[0], dtype=np.int64)
        lo, hi = np.searchsorted(self.shared, [start, start + reached.shape[1]])
        if lo == hi:
            return np.zeros(reached.shape[0], dtype=np.int64)
        return reached[:, self.shared[lo:hi] - start].astype(np.int64) @ self.extra[lo:hi]

    def expand(self, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each entry of ``columns``: the codes it scores, and the entry each code comes from."""
        if self.codes is None:
            return columns, np.arange(columns.size)
        sizes = self.offsets[columns + 1] - self.offsets[columns]
        source = np.repeat(np.arange(columns.size), sizes)
        within = np.arange(source.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        return self.codes[self.offsets[columns][source] + within], source


def _query_blocks(answers: np.ndarray, evaluated: np.ndarray, rows: int, cols: int, n_blocks: int) -> list[np.ndarray]:
    """Query blocks of at most ``rows`` queries, each sorted by answer column. The queries whose
    answers share a column block stay together where possible, so most blocks have all their answers
    in one column block (processed first: its correct scores are then known before any counting); a
    block may gather the answers of a few column blocks when each has few queries (codebase
    protocols), so that the codes are not streamed once per handful of queries."""
    order = evaluated[np.argsort(answers[evaluated], kind="stable")]
    code_block = answers[order] // cols
    starts = np.flatnonzero(np.r_[True, code_block[1:] != code_block[:-1]])
    ends = np.r_[starts[1:], order.size]
    spread = 1 + n_blocks // _RECOMPUTE_SHARE
    blocks: list[np.ndarray] = []
    current: list[np.ndarray] = []
    size = spanned = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        group = order[start:end]
        while group.size:
            if size and (size + group.size > rows or spanned >= spread):
                blocks.append(np.concatenate(current))
                current, size, spanned = [], 0, 0
            taken = group[: rows - size]
            current.append(taken)
            size += taken.size
            spanned += 1
            group = group[taken.size :]
    if current:
        blocks.append(np.concatenate(current))
    return blocks


def _scores(score_block: ScoreBlock, queries: np.ndarray, columns: slice) -> np.ndarray:
    """One block of scores, checked for shape; integer scores become float64 (the lists use -inf)."""
    scores = np.asarray(score_block(queries, columns))
    expected = (queries.size, columns.stop - columns.start)
    if scores.shape != expected:
        raise ValueError(f"score_block returned shape {scores.shape}, expected {expected}")
    return scores if np.issubdtype(scores.dtype, np.floating) else scores.astype(np.float64)


def _rank_query_block(
    score_block: ScoreBlock,
    queries: np.ndarray,
    answers: np.ndarray,
    answer_columns: np.ndarray,
    slices: list[slice],
    columns: _Columns,
    n_codes: int,
    depth: int,
    pool: ThreadPoolExecutor | None = None,
    *,
    out: tuple[np.ndarray, np.ndarray],
    stores: list[dict] | None = None,
) -> np.ndarray:
    """Ranks of one query block (``answer_columns`` ascending), returned; its top lists and top scores
    are written into rows ``queries`` of ``out`` = (top, top_scores). The work on each score block
    (counting, top lists) runs in ``pool``, one part of the queries' rows per thread (numpy and the
    kernel release the GIL in their loops); a query's results depend on its own row only. ``stores``:
    one dict per part, where the parts' top-list buffers are kept for the next query block."""
    width = slices[0].stop - slices[0].start
    answer_block = answer_columns // width
    first = int(answer_block[-1])
    order = [first, *(b for b in range(len(slices)) if b != first)]
    # in one thread (row parts), a block after the first is scored and passed over in pieces of at most
    # SCAN_COLUMNS columns, each while its scores are still in the core's cache; the first stays whole
    # (its guess reads the whole block). The correct scores are read from the very same pieces.
    pieces = [
        piece
        for b in order
        for piece in ([slices[b]] if b == first or pool is not None else _cut(slices[b], SCAN_COLUMNS))
    ]
    targets = np.full(queries.size, np.nan)
    for piece in pieces[1:]:
        # correct scores from the pieces counted after the first block: computed here, and again in turn
        mine = np.flatnonzero((answer_columns >= piece.start) & (answer_columns < piece.stop))
        if mine.size:
            scores = _scores(score_block, queries, piece)
            targets[mine] = scores[mine, answer_columns[mine] - piece.start]
    counts = np.zeros(queries.size, dtype=np.int64)
    n_columns = slices[-1].stop
    n_parts = max(1, min(pool._max_workers if pool is not None else 1, queries.size))
    bounds = np.linspace(0, queries.size, n_parts + 1).astype(int)
    parts = [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]
    stores = stores if stores is not None and len(stores) >= len(parts) else [{} for _ in parts]
    heads = [
        _Head(p.stop - p.start, depth, answers[p], columns, n_codes, guess=True, store=stores[k])
        for k, p in enumerate(parts)
    ]

    def each(work: Callable[[int], object]) -> list:
        if pool is None or len(parts) == 1:
            return [work(k) for k in range(len(parts))]
        return list(pool.map(work, range(len(parts))))

    for at, columns_slice in enumerate(pieces):
        start = columns_slice.start
        scores = _scores(score_block, queries, columns_slice)
        mine = np.flatnonzero((answer_columns >= start) & (answer_columns < columns_slice.stop))
        got = scores[mine, answer_columns[mine] - start].astype(np.float64)
        if at == 0:
            targets[mine] = got
        elif not np.array_equal(got, targets[mine], equal_nan=True):
            raise RuntimeError("score_block gave different scores for the same block: it must be deterministic")
        correct_col = np.full(queries.size, -1, dtype=np.int64)
        correct_col[mine] = answer_columns[mine] - start

        def work(
            k: int, scores: np.ndarray = scores, start: int = start, correct_col: np.ndarray = correct_col
        ) -> None:
            p = parts[k]
            if depth and heads[k].kernel(scores):  # counting and candidates in one pass
                count = (targets[p].astype(np.float32), counts[p])
                heads[k].add(scores[p], start, correct_col[p], n_columns, count=count)
                return
            # scores >= NaN is False: a NaN target's count is unused (its rank is n_codes)
            reached = scores[p] >= targets[p].astype(scores.dtype)[:, None]
            # summing the mask's bytes into int32 is ~3x faster than count_nonzero(axis=1)
            counts[p] += reached.view(np.uint8).sum(axis=1, dtype=np.int32) + columns.extra_count(reached, start)
            del reached
            if depth:
                heads[k].add(scores[p], start, correct_col[p], n_columns)

        each(work)
    nan_target = np.isnan(targets)
    ranks = np.where(nan_target, n_codes, counts)
    if not depth:
        return ranks
    failed = np.concatenate([heads[k].finish() + p.start for k, p in enumerate(parts)])
    again = None
    if failed.size:
        # queries whose guessed threshold left fewer than depth candidates: their lists again, without
        # a guess, from the same blocks (score_block is deterministic: the very same scores)
        again = _Head(failed.size, depth, answers[failed], columns, n_codes)
        failed_columns = answer_columns[failed]
        for columns_slice in pieces:
            start = columns_slice.start
            scores = _scores(score_block, queries, columns_slice)[failed]
            mine = np.flatnonzero((failed_columns >= start) & (failed_columns < columns_slice.stop))
            got = scores[mine, failed_columns[mine] - start].astype(np.float64)
            if not np.array_equal(got, targets[failed][mine], equal_nan=True):
                raise RuntimeError("score_block gave different scores for the same block: it must be deterministic")
            correct_col = np.full(failed.size, -1, dtype=np.int64)
            correct_col[mine] = answer_columns[failed][mine] - start
            again.add(scores, start, correct_col, n_columns)
        again.finish()
    # position of the correct code in top_k order: rank - 1, except that top_k reads NaN as -inf, so a
    # NaN or -inf correct score comes after every other code (rank_of_correct does not count NaNs)
    position = np.where(nan_target | (targets == -np.inf), n_codes - 1, ranks - 1)
    each(lambda k: heads[k].write(targets[parts[k]], position[parts[k]], queries[parts[k]], out))
    if again is not None:  # the failed guesses' lists replace theirs
        again.write(targets[failed], position[failed], queries[failed], out)
    return ranks


def _cut(span: slice, width: int) -> list[slice]:
    """``span`` (a range of rows or columns) cut into consecutive slices of at most ``width``."""
    return [slice(a, min(a + width, span.stop)) for a in range(span.start, span.stop, width)]


_FREE = np.uint64(np.iinfo(np.uint64).max)  # the packed key of a free top-list slot


def _pack(order: np.ndarray, code: np.ndarray) -> np.ndarray:
    """uint64 keys ascending in ``top_k`` order, (order value descending, code ascending), of float32
    order values (NaN already read as -inf) and codes < 2**32; +0.0 merges -0.0 into 0.0 (they tie)."""
    bits = (-order.astype(np.float32) + np.float32(0.0)).view(np.uint32).astype(np.uint64)
    bits ^= np.where(bits >> np.uint64(31), np.uint64(0xFFFFFFFF), np.uint64(0x80000000))
    return (bits << np.uint64(32)) | code.astype(np.uint64)


def _unpack_order(key: np.ndarray) -> np.ndarray:
    """The order values (float64) of packed keys (a zero reads +0.0; a free key reads NaN)."""
    bits = (key >> np.uint64(32)).astype(np.uint32)
    bits ^= np.where(bits >> np.uint32(31), np.uint32(0x80000000), np.uint32(0xFFFFFFFF))
    return -bits.view(np.float32).astype(np.float64) + 0.0


def _guess_rank(depth: int, width: int, n_columns: int, z: float = 5.0) -> int:
    """The rank within the first score block (``width`` columns of ``n_columns``) whose score is a
    query's guessed threshold: the block should hold ``e = depth * width / n_columns`` of its best
    ``depth``; the score of rank g estimates the pool's quantile g / width to a relative error of about
    1 / sqrt(g), so g - z * sqrt(g) = e leaves ``depth`` candidates unless the block is z standard
    deviations off (with more columns than the block, the block is the query's answer block)."""
    expected = depth * width / max(n_columns, 1)
    root = (z + math.sqrt(z * z + 4 * expected)) / 2
    return max(1, min(depth, math.ceil(root * root)))


class _Head:
    """Running top lists of a query block: per query, the best ``depth`` codes other than its correct
    one, in ``top_k`` order (score descending, NaN as -inf; equal scores by ascending code index).

    While every block is float32 and the codes fewer than 2**32, a query's candidates are packed keys
    (order value and code in one uint64: unique, in a total order) appended unsorted to a buffer of
    ``2 * depth`` slots; a full buffer keeps its ``depth`` smallest keys (argpartition: linear), whose
    largest then bounds what may enter; the ``depth`` smallest are sorted once, at the end. A query's
    candidates are the scores at or above its *guess* as well: a threshold read from the first block
    (``guess=True`` and more columns than the block), the score there of rank ``_guess_rank``. The
    guess is a bet, checked at the end: a query that collected ``depth`` candidates at or above it has
    its exact list (every code of its best ``depth`` scores at least the ``depth``-th best candidate);
    one that did not is listed in ``failed`` and must be ranked again without a guess. Otherwise the
    lists are sorted float64 arrays merged with a two-key lexsort."""

    def __init__(
        self,
        n: int,
        depth: int,
        answers: np.ndarray,
        columns: _Columns,
        n_codes: int,
        guess: bool = False,
        store: dict | None = None,
    ) -> None:
        self.n = n
        self.depth = depth
        self.answers = answers
        self.columns = columns
        self.packed = n_codes < 2**32 and depth > 0
        self.guess = np.full(n, -np.inf)  # -inf: no guess
        self.guessing = guess and self.packed
        self.failed = np.zeros(n, dtype=bool)
        self.key: np.ndarray | None = None
        if self.packed:
            # the buffers of an earlier query block where ``store`` keeps them: fresh pages cost more to
            # fault in than to fill
            store = {} if store is None else store
            if store.get("key") is None or store["key"].shape[0] < n or store["key"].shape[1] != 2 * depth:
                store["key"] = np.empty((n, 2 * depth), dtype=np.uint64)
                store["raw"] = np.empty((n, 2 * depth), dtype=np.float32)
            self.key = store["key"][:n]
            self.key.fill(_FREE)
            self.raw = store["raw"][:n]  # the score as computed (unset where free)
            self.fill = np.zeros(n, dtype=np.int64)
            self.worst = np.full(n, _FREE)  # the largest of the depth keys kept when the buffer last filled
            self.special = False  # a NaN or -0.0 score was packed (its key reads -inf or +0.0)
            self.bound = np.full(n, -np.inf)  # a block's depth-th best other score: the list's floor at least
        else:
            self._unpack()

    def _unpack(self) -> None:
        """Leave the packed buffers for sorted float64 arrays (each query's best ``depth``, in
        ``top_k`` order), marking the queries whose guess failed."""
        n, depth = self.n, self.depth
        if self.key is None:
            self.order = np.full((n, depth), -np.inf)  # the score with NaN as -inf: what the order reads
            self.score = np.full((n, depth), np.nan)  # the score as computed
            self.code = np.full((n, depth), -1, dtype=np.int64)  # -1: free slot
        else:
            self.failed = (self.guess > -np.inf) & (self.worst == _FREE) & (self.fill < depth)
            used = max(depth, int(self.fill.max(initial=0)))  # the slots beyond are free in every buffer
            keys = self.key[:, :used]
            if self.special:  # a NaN or -0.0 score: the scores as computed follow their keys
                best = np.argpartition(keys, depth - 1, axis=1)[:, :depth]
                key = np.take_along_axis(keys, best, axis=1)
                by_key = np.argsort(key, axis=1)
                key = np.take_along_axis(key, by_key, axis=1)
                raw = np.take_along_axis(np.take_along_axis(self.raw, best, axis=1), by_key, axis=1)
            else:  # every score is its key's order value: sort the keys alone
                key = np.sort(keys if used == depth else np.partition(keys, depth - 1, axis=1)[:, :depth], axis=1)
                raw = None
            used = key != _FREE
            if used.all():  # the common case: every list full
                self.order = _unpack_order(key)
                self.score = self.order.copy() if raw is None else raw.astype(np.float64)
                self.code = (key & np.uint64(0xFFFFFFFF)).astype(np.int64)
            else:
                self.order = np.where(used, _unpack_order(key), -np.inf)
                self.score = np.where(used, self.order if raw is None else raw, np.nan)
                self.code = np.where(used, (key & np.uint64(0xFFFFFFFF)).astype(np.int64), -1)
            self.key = None
        self.packed = False

    def kernel(self, scores: np.ndarray) -> bool:
        """Whether ``add`` merges this block through the selection kernel (and can count with it)."""
        return USE_KERNEL and self.packed and scores.dtype == np.float32

    def add(
        self,
        scores: np.ndarray,
        start: int,
        correct_col: np.ndarray,
        n_columns: int = 0,
        count: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Merge a block of ``scores`` (its first column is column ``start``, of ``n_columns``) into the
        lists, leaving out each query's correct code (its column in the block: ``correct_col``, -1 if
        elsewhere). ``count`` = (float32 correct scores, int64 counts), only where ``kernel``: the codes
        scoring at least the correct score are added to the counts in the same pass."""
        if self.packed and scores.dtype != np.float32:
            self._unpack()  # a query short of its guess so far is marked failed (exact for the others)
        width = scores.shape[1]
        depth = self.depth
        if self.packed:
            full = self.worst != _FREE
            floor = np.maximum(self.bound, self.guess)
            floor[full] = np.maximum(floor[full], _unpack_order(self.worst[full]))
            full |= floor > -np.inf  # bounded already: no partition of the block
        else:
            full = self.code[:, -1] >= 0
            floor = np.where(full, self.order[:, -1], -np.inf)
        not_full = np.flatnonzero(~full)
        if not_full.size and width >= depth:
            # a list still filling would take every score: bound it by the block's depth-th best column
            # other than the correct one's (set to -inf: each other column scores at least one other code)
            guessing = self.guessing and n_columns > width
            # the guess is above the block's depth-th best: that bound is not needed then
            rank = _guess_rank(depth, width, n_columns) if guessing else depth
            if self.kernel(scores):
                nth = np.empty(not_full.size)
                _select.kth_largest(
                    np.ascontiguousarray(scores),
                    not_full.astype(np.int64),
                    np.ascontiguousarray(correct_col, dtype=np.int64),
                    rank,
                    np.empty(width, dtype=np.float32),
                    nth,
                )
            else:
                own = scores[not_full]
                own[np.isnan(own)] = -np.inf  # partition would place NaN above everything
                where = correct_col[not_full] >= 0
                own[np.flatnonzero(where), correct_col[not_full][where]] = -np.inf
                own.partition(width - rank, axis=1)
                nth = own[:, width - rank]
            if guessing:
                self.guess[not_full] = nth
                floor[not_full] = np.maximum(floor[not_full], self.guess[not_full])
            else:
                floor[not_full] = nth
                if self.packed:
                    self.bound[not_full] = floor[not_full]
        self.guessing = False
        if self.kernel(scores):
            self._scan(scores, start, correct_col, floor, count)
            return
        reach = scores >= floor.astype(scores.dtype)[:, None]  # NaN >= floor is False, as -inf would be...
        low = np.flatnonzero(floor == -np.inf)
        if low.size:  # ...except against a floor of -inf, which NaN (ordered as -inf) reaches
            reach[low] |= np.isnan(scores[low])
        alone = self.columns.codes is None  # every column scores one code: the correct one's column is its own
        if alone:
            mine = np.flatnonzero(correct_col >= 0)
            reach[mine, correct_col[mine]] = False
        # flatnonzero and divmod: several times faster than 2-D nonzero on a sparse mask
        flat = np.flatnonzero(reach)
        del reach
        if not flat.size:
            return
        row, col = np.divmod(flat, width)
        code, source = self.columns.expand(start + col)
        if alone:
            raw = scores.reshape(-1)[flat]
        else:
            row, col = row[source], col[source]
            raw = scores[row, col]
        if self.packed:
            nan = np.isnan(raw)
            if nan.any():
                self.special = True
                raw_order = np.where(nan, np.float32(-np.inf), raw)
            else:
                raw_order = raw
            self.special = self.special or bool(np.signbit(raw[raw == 0]).any())
            key = _pack(raw_order, code)
            # the correct code stays out (its duplicates stay in); a key at or beyond the largest of
            # a full list cannot enter it
            keep = None if alone else code != self.answers[row]
            if (self.worst != _FREE).any():
                below = key < self.worst[row]
                keep = below if keep is None else keep & below
            if keep is not None:
                row, key, raw = row[keep], key[keep], raw[keep]
            if row.size:
                self._append(row, key, raw)
            return
        raw = raw.astype(np.float64)
        value = np.where(np.isnan(raw), -np.inf, raw)
        # the correct code stays out (its duplicates stay in); a full list keeps its last entry against
        # a later tie with a larger code index
        keep = (code != self.answers[row]) & (~full[row] | (value > floor[row]) | (code < self.code[row, -1]))
        row, value, raw, code = row[keep], value[keep], raw[keep], code[keep]
        if row.size:
            self._merge(row, value, raw, code)

    def _scan(
        self,
        scores: np.ndarray,
        start: int,
        correct_col: np.ndarray,
        floor: np.ndarray,
        count: tuple[np.ndarray, np.ndarray] | None,
    ) -> None:
        """``add``'s candidates (and ``count``) through the kernel: one pass per row, the buffers updated
        in place, a full buffer cut back to its ``depth`` smallest keys as it fills."""
        scores = np.ascontiguousarray(scores)
        if count is None:
            target, counts = np.full(self.n, np.nan, dtype=np.float32), np.zeros(self.n, dtype=np.int64)
        else:
            target, counts = count
        columns = self.columns
        if columns.codes is None:
            sizes = offsets = codes = np.empty(0, dtype=np.int64)
        else:
            sizes, offsets, codes = columns.sizes, columns.offsets, columns.codes
        special = _select.scan_block(
            scores,
            scores.view(np.uint32),
            np.ascontiguousarray(target, dtype=np.float32),
            floor.astype(np.float32),
            counts,
            self.key,
            self.raw,
            self.fill,
            self.worst,
            np.ascontiguousarray(self.answers, dtype=np.int64),
            np.ascontiguousarray(correct_col, dtype=np.int64),
            sizes,
            offsets,
            codes,
            int(start),
            self.depth,
        )
        self.special = self.special or bool(special)

    def _append(self, row: np.ndarray, key: np.ndarray, raw: np.ndarray) -> None:
        """Append candidates (``row`` ascending, packed key, float32 score) to the buffers; a query
        whose buffer would overflow keeps the ``depth`` smallest keys of its buffer and candidates."""
        depth, cap = self.depth, self.key.shape[1]
        counts = np.bincount(row, minlength=self.n)
        over = self.fill + counts > cap
        if not over.any():  # the common case: flat positions in the buffers
            at = row * cap + (self.fill - (np.cumsum(counts) - counts))[row] + np.arange(row.size)
            self.key.reshape(-1)[at], self.raw.reshape(-1)[at] = key, raw
            self.fill += counts
            return
        within = np.arange(row.size) - np.repeat(np.cumsum(counts) - counts, counts)
        direct = ~over[row]
        if direct.any():
            at = (row[direct], self.fill[row[direct]] + within[direct])
            self.key[at], self.raw[at] = key[direct], raw[direct]
            self.fill += np.where(over, 0, counts)
        touched = np.flatnonzero(over)
        if not touched.size:
            return
        # per overflowing query, its buffer and its candidates side by side in one row of a 2-D array
        count = counts[touched]
        width = cap + int(count.max())
        extra = ~direct
        at = (np.repeat(np.arange(touched.size), count), cap + within[extra])
        keys = np.full((touched.size, width), _FREE)
        scores = np.empty((touched.size, width), dtype=np.float32)
        keys[:, :cap] = self.key[touched]
        scores[:, :cap] = self.raw[touched]
        keys[at], scores[at] = key[extra], raw[extra]
        best = np.argpartition(keys, depth - 1, axis=1)[:, :depth]
        kept = np.take_along_axis(keys, best, axis=1)
        self.key[touched, :depth] = kept
        self.key[touched, depth:] = _FREE
        self.raw[touched, :depth] = np.take_along_axis(scores, best, axis=1)
        self.fill[touched] = depth
        self.worst[touched] = kept.max(axis=1)

    def _merge(self, row: np.ndarray, value: np.ndarray, raw: np.ndarray, code: np.ndarray) -> None:
        """Merge candidates (``row`` ascending; order value, raw score, code) into the sorted lists: per
        touched query, its list and its candidates side by side in one row of a 2-D array, sorted
        row-wise by (order value descending, code ascending)."""
        depth = self.depth
        touched, first, count = np.unique(row, return_index=True, return_counts=True)
        width = depth + int(count.max())
        slot = depth + np.arange(row.size) - np.repeat(first, count)
        at = (np.searchsorted(touched, row), slot)
        order = np.full((touched.size, width), -np.inf)
        score = np.full((touched.size, width), np.nan)
        code2 = np.full((touched.size, width), -1, dtype=np.int64)
        order[:, :depth] = self.order[touched]
        score[:, :depth] = self.score[touched]
        code2[:, :depth] = self.code[touched]
        order[at], score[at], code2[at] = value, raw, code
        free = code2 < 0
        best = np.lexsort((code2, np.where(free, np.nan, -order)), axis=1)[:, :depth]
        self.order[touched] = np.take_along_axis(order, best, axis=1)
        self.score[touched] = np.take_along_axis(score, best, axis=1)
        self.code[touched] = np.take_along_axis(code2, best, axis=1)

    def finish(self) -> np.ndarray:
        """End the merging: the queries whose guess failed (to be ranked again without one). With the
        kernel the buffers stay packed (``write`` sorts them), else they become sorted arrays."""
        if self.packed and USE_KERNEL:
            self.failed = (self.guess > -np.inf) & (self.worst == _FREE) & (self.fill < self.depth)
        elif self.packed:
            self._unpack()
        return np.flatnonzero(self.failed)

    def write(
        self, correct_score: np.ndarray, position: np.ndarray, rows: np.ndarray, out: tuple[np.ndarray, np.ndarray]
    ) -> None:
        """Write the final top lists (``with_correct``) into rows ``rows`` of ``out`` = (top, top_scores)."""
        top, top_scores = out
        if self.packed and USE_KERNEL:
            depth = self.depth
            _select.select_rows(self.key, self.raw, self.fill, depth)
            keys, raw = self.key[:, :depth], self.raw[:, :depth]
            if self.special:  # a NaN or -0.0 score: the scores follow their keys
                by_key = np.argsort(keys, axis=1)
                keys[:] = np.take_along_axis(keys, by_key, axis=1)
                raw[:] = np.take_along_axis(raw, by_key, axis=1)
            else:  # every score is its key's order value: keys ascending are scores descending
                keys.sort(axis=1)
                np.negative(raw, out=raw)
                raw.sort(axis=1)
                np.negative(raw, out=raw)
            _select.write_rows(
                self.key,
                self.raw,
                np.ascontiguousarray(self.answers, dtype=np.int64),
                np.ascontiguousarray(correct_score, dtype=np.float64),
                np.ascontiguousarray(position, dtype=np.int64),
                np.ascontiguousarray(rows, dtype=np.int64),
                top,
                top_scores,
                depth,
            )
            return
        top[rows], top_scores[rows] = self.with_correct(correct_score, position)

    def with_correct(self, correct_score: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The final top lists (codes, scores): each query's correct code inserted at ``position``
        (dropped when that is beyond the list), the others shifted down by one after it."""
        self.finish()
        codes, scores = self.code.copy(), self.score.copy()
        # row by row: a few slice copies each, several times faster than gathers over the whole block
        for i in np.flatnonzero(position < self.depth).tolist():
            at = int(position[i])
            codes[i, at + 1 :], scores[i, at + 1 :] = self.code[i, at:-1], self.score[i, at:-1]
            codes[i, at], scores[i, at] = self.answers[i], correct_score[i]
        return codes, scores


def chunk_matrix(queries: np.ndarray, codes: np.ndarray, distance: str | None) -> np.ndarray:
    """The (codes × queries) matrix of one chunk, CodeSearchNet's ``compute_ranks`` layout (row i: code
    i, column j: query j, the diagonal correct): ``scipy.spatial.distance.cdist(codes, queries,
    distance)`` (float64, as the script computes it) for a metric, else the inner products in float64."""
    q = np.asarray(queries, dtype=np.float32)
    c = np.asarray(codes, dtype=np.float32)
    if q.shape != c.shape or q.ndim != 2:
        raise ValueError(f"a chunk needs as many query vectors {q.shape} as code vectors {c.shape}")
    if distance is None:
        return c.astype(np.float64) @ q.astype(np.float64).T
    from scipy.spatial.distance import cdist

    return cdist(c, q, metric=distance)


def rank_chunk(matrix: np.ndarray, depth: int, *, lower_is_better: bool) -> RankResult:
    """Ranks along the last axis of a square chunk matrix whose diagonal holds the correct entries
    (CodeSearchNet's ``compute_ranks``: ``np.sum(distances <= correct, axis=-1)``): row i's rank is the
    number of entries of row i at least as good as ``matrix[i, i]`` (``<=`` for distances, ``>=`` for
    scores), itself included, so ties count against the model. A NaN correct entry ranks last (the
    script would count 0 and divide by it); NaN elsewhere never counts. ``top[i]``: the columns of row
    i best first (NaN last; equal entries by ascending column, the correct one after them, so its
    position is rank - 1), ``top_scores`` their entries as scores (distances negated: higher is better)."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"a chunk matrix must be square, not {m.shape}")
    n = m.shape[0]
    correct = np.diag(m).copy()
    reached = m <= correct[:, None] if lower_is_better else m >= correct[:, None]
    ranks = reached.sum(axis=1).astype(np.int64)
    ranks[np.isnan(correct)] = n
    key = m if lower_is_better else -m
    key = np.where(np.isnan(key), np.inf, key)
    columns = np.broadcast_to(np.arange(n), (n, n))
    is_correct = np.eye(n, dtype=np.int8)
    depth = min(max(depth, 0), n)
    order = np.lexsort((columns, is_correct, key), axis=1)[:, :depth]
    scores = np.take_along_axis(m, order, axis=1)
    top_scores = -scores if lower_is_better else scores
    return RankResult(ranks, order.astype(np.int64), top_scores, n, (n, n))


# ------------------------------------------------------------------ argsort order (CodeXGLUE's run.py)
# CodeXGLUE's AdvTest ``run.py`` and GraphCodeBERT's / UniXcoder's code-search ``run.py`` compute the
# whole float32 score matrix ``np.matmul(nl_vecs, code_vecs.T)`` and read each query's candidates in the
# order ``np.argsort(scores, axis=-1, kind="quicksort")[:, ::-1]``: a candidate's rank is its position
# there, so among equal scores the order is whatever numpy's (unstable) quicksort leaves, reversed, not
# against the model. The functions below give the very same positions while holding one block of score
# rows at a time, and sort a whole row only when a tie makes the order matter.
#
# Deliberate difference: a NaN score is read as -inf (ranked last), where numpy sorts NaN after every
# number, so the reversed order would rank a NaN-scored code first (a broken model would be rewarded).

# Fewest query rows per matmul call: OpenBLAS computes a product with very few rows through other
# kernels (measured: 1 and 7 rows gave other float32 roundings than the whole-matrix call; 45 and more
# the same), so a block is never thinner than this unless all the queries are fewer.
ARGSORT_MIN_ROWS = 64
# Bytes per score-block entry: the float32 score, the answer mask and comparison masks, the argpartition
# indices (int64) and one float32 temporary.
_ARGSORT_BYTES = 4 + 3 + 8 + 4


@dataclass
class ArgsortRanks:
    """Ranks in the descending ``np.argsort`` order of each query's score row.

    ``ranks[i]``: 1-based position of query i's first answer (the first candidate carrying its key) in
    that order; ``n_candidates + 1`` when no candidate carries its key (the answer is absent: the
    reference scores it 0). ``top[i]``: the first ``depth`` candidates in that order (-1 padded when
    there are fewer), ``top_scores[i]`` their scores (float64, NaN where ``top`` is -1; a NaN score shows
    as NaN though it was ordered as -inf). ``tied[i]``: another candidate (not an answer) had exactly the
    answer's score, so the rank is argsort's tie order, not a fact of the scores."""

    ranks: np.ndarray
    top: np.ndarray
    top_scores: np.ndarray
    tied: np.ndarray
    n_candidates: int


def rank_rows_argsort(scores: np.ndarray, row_keys: np.ndarray, column_keys: np.ndarray, depth: int) -> ArgsortRanks:
    """Rank a block of score rows (``scores``: queries × candidates, as the model computed them) in
    the reference's argsort order. Query i's answers are the candidates j with
    ``column_keys[j] == row_keys[i]`` (its own code: the key is its index; a url-matched codebase: the
    url's number); its rank is the position of the first of them.

    Exact without sorting every row: the candidates scoring more than the best answer come before it
    in any correct sort, so when no other candidate ties with that answer its position is one plus
    their count; a row with such a tie is sorted whole, as the reference sorts it. The top list is read
    from the ``depth + 1`` best scores when they are all distinct (then every sort agrees on them),
    else from the whole sorted row."""
    s = np.asarray(scores)
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    if np.isnan(s).any():
        s = np.where(np.isnan(s), -np.inf, s)
    m, n = s.shape
    depth = max(int(depth), 0)
    row_keys = np.asarray(row_keys, dtype=np.int64).reshape(-1)
    column_keys = np.asarray(column_keys, dtype=np.int64).reshape(-1)
    if row_keys.size != m or column_keys.size != n:
        raise ValueError(f"{row_keys.size} row keys and {column_keys.size} column keys for scores of shape {s.shape}")
    answer = column_keys[None, :] == row_keys[:, None]
    present = answer.any(axis=1)
    target = np.where(answer, s, -np.inf).max(axis=1, initial=-np.inf) if n else np.full(m, -np.inf)
    above = (s > target[:, None]).sum(axis=1)
    tied = present & ((s == target[:, None]) & ~answer).any(axis=1)
    ranks = np.where(present, above + 1, n + 1).astype(np.int64)
    width = min(depth, n)
    top = np.full((m, depth), -1, dtype=np.int64)
    top_scores = np.full((m, depth), np.nan)
    whole = tied.copy()  # rows sorted whole
    if width and width < n:
        kth = n - width - 1
        best = np.argpartition(s, kth, axis=1)[:, kth:]  # the width + 1 best, unordered
        values = np.take_along_axis(s, best, axis=1)
        by_value = np.argsort(-values, axis=1, kind="stable")
        best = np.take_along_axis(best, by_value, axis=1)
        values = np.take_along_axis(values, by_value, axis=1)
        whole |= (values[:, 1:] == values[:, :-1]).any(axis=1)
        top[:, :width] = best[:, :width]
    elif width:
        whole[:] = True
    for i in np.flatnonzero(whole):
        order = np.argsort(s[i], kind="quicksort")[::-1]
        if tied[i]:
            ranks[i] = int(np.argmax(answer[i, order])) + 1
        top[i, :width] = order[:width]
    raw = np.asarray(scores)
    taken = top[:, :width]
    top_scores[:, :width] = np.take_along_axis(raw, taken, axis=1).astype(np.float64)
    return ArgsortRanks(ranks, top, top_scores, tied, n)


ARGSORT_PART_ROWS = 32  # rows of a score block ranked together in one thread (rank_dense_argsort)


def _rank_rows_argsort_parts(
    scores: np.ndarray,
    row_keys: np.ndarray,
    column_keys: np.ndarray,
    depth: int,
    pool: ThreadPoolExecutor | None,
    threads: int,
) -> ArgsortRanks:
    """:func:`rank_rows_argsort` of a score block, its rows cut into one contiguous part per thread
    (``threads`` of ``pool``; at least :data:`ARGSORT_PART_ROWS` rows each), ranked at once: numpy's
    comparisons, partitions and sorts run without the GIL. Each row's rank and list depend on that row
    alone, so the result is the same with any number of parts."""
    m = scores.shape[0]
    parts = 1 if pool is None else min(threads, m // ARGSORT_PART_ROWS)
    if parts < 2:
        return rank_rows_argsort(scores, row_keys, column_keys, depth)
    bounds = [m * k // parts for k in range(parts + 1)]
    found = list(
        pool.map(
            lambda k: rank_rows_argsort(
                scores[bounds[k] : bounds[k + 1]], row_keys[bounds[k] : bounds[k + 1]], column_keys, depth
            ),
            range(parts),
        )
    )
    return ArgsortRanks(
        np.concatenate([part.ranks for part in found]),
        np.concatenate([part.top for part in found]),
        np.concatenate([part.top_scores for part in found]),
        np.concatenate([part.tied for part in found]),
        found[0].n_candidates,
    )


def rank_dense_argsort(
    queries: np.ndarray,
    codes: np.ndarray,
    row_keys: np.ndarray,
    column_keys: np.ndarray,
    depth: int,
    memory_mb: float = 256.0,
    progress: bool = False,
) -> ArgsortRanks:
    """:func:`rank_rows_argsort` over the float32 inner products of ``queries`` with ``codes``, computed
    as the reference computes them (``queries[rows] @ codes.T``: the codes whole, in their order, so
    each score is the same float32 the reference's ``np.matmul(nl_vecs, code_vecs.T)`` gives), one
    block of at least :data:`ARGSORT_MIN_ROWS` query rows at a time, sized from ``memory_mb`` (not from
    the threads); each block's rows are ranked in parts over :func:`work_threads` threads
    (:func:`_rank_rows_argsort_parts`: the same results on any number)."""
    q, c = _float32_matrices(queries, codes)
    m, n = q.shape[0], c.shape[0]
    row_keys = np.asarray(row_keys, dtype=np.int64)
    ranks = np.zeros(m, dtype=np.int64)
    top = np.full((m, max(int(depth), 0)), -1, dtype=np.int64)
    top_scores = np.full(top.shape, np.nan)
    tied = np.zeros(m, dtype=bool)
    per_row = max(n, 1) * _ARGSORT_BYTES + max(int(depth), 0) * 24
    rows = max(min(ARGSORT_MIN_ROWS, m), int(max(float(memory_mb), 0.0) * 2**20 // per_row), 1)
    threads = min(work_threads(), max(1, rows // ARGSORT_PART_ROWS))
    with (
        tqdm(total=m, desc="rank", unit="query", disable=not progress, mininterval=2) as bar,
        ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext() as pool,
    ):
        for start in range(0, m, rows):
            stop = min(m, start + rows)
            low = max(0, stop - rows)  # the last block reaches back: never a thin matmul
            block = _rank_rows_argsort_parts(q[low:stop] @ c.T, row_keys[low:stop], column_keys, depth, pool, threads)
            keep = slice(start - low, stop - low)
            ranks[start:stop] = block.ranks[keep]
            top[start:stop], top_scores[start:stop] = block.top[keep], block.top_scores[keep]
            tied[start:stop] = block.tied[keep]
            bar.update(stop - start)
    return ArgsortRanks(ranks, top, top_scores, tied, n)
