# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The selection kernel of the ranking engine (``csbench.evaluate.ranking``): per query row of a float32
block of scores, one pass without a branch per score that gathers the columns which may count or
enter (at or above the lower of the correct score and the row's floor: about 2 % of them), then one
over those that counts the codes scoring at least as high as the query's correct code and appends the
row's top-list candidates to its packed key buffer, without the GIL. A buffer cut back to its best
``depth`` raises the row's floor to its worst kept score for the rest of the row.

Cython's pure Python mode (compiled by ``setup.py`` as a hot module of ``csbench._native``): the
types are annotations, so run as Python this file is the same algorithm, exact but far too slow for
real blocks. ``ranking`` uses it only when ``COMPILED`` (else its numpy path, which gives the same
results); the tests run it both ways. The buffers are ``ranking._Head``'s: per query ``cap`` slots of
packed keys (``ranking._pack``: order value descending with NaN as -inf and -0.0 as +0.0, then code
ascending: unique, one total order), the float32 score as computed beside each, the slots used, and
``worst``, the largest key kept when the buffer last filled (a key at or beyond it cannot enter).
"""

from __future__ import annotations

import struct as _struct

import numpy as _np

try:  # Cython's pure Python mode: C types when compiled (csbench._native), nothing otherwise
    import cython
except ImportError:  # pragma: no cover - exercised in tests/package/test_native.py
    from csbench import _cython_shim as cython

COMPILED: bool = cython.compiled  # this module runs as a compiled extension (csbench._native)


def scan_block(
    scores,
    bits,
    target,
    floor,
    counts,
    key,
    raw,
    fill,
    worst,
    answers,
    correct_col,
    sizes,
    offsets,
    codes,
    start: int,
    depth: int,
) -> bool:
    """Count and collect one block of scores (rows: queries, columns: score columns ``start`` on).

    ``scores`` (float32, C order) and ``bits`` (the same memory as uint32); per row: ``target`` the
    correct score as float32 (NaN: not counted), ``floor`` the lowest score a candidate may have
    (float32; -inf lets NaN in too), ``counts`` (int64, added to: the codes of the columns scoring
    >= target), ``key`` / ``raw`` / ``fill`` / ``worst`` the buffers (updated), ``answers`` the correct
    code, ``correct_col`` its column in this block (-1: elsewhere). ``sizes`` (int64 per score column:
    its codes) with ``offsets`` / ``codes`` (CSR of the codes of each column, ascending) when columns
    are shared by duplicates, else all three empty (column j scores code j). A full buffer keeps its
    ``depth`` smallest keys (quickselect) and raises ``worst`` (and, for the rest of the row, the floor
    to the worst kept score: a lower one could not enter). Returns whether a NaN or -0.0 score was
    packed (its key does not give the score back)."""
    cand = _np.empty(scores.shape[1], dtype=_np.intc)  # the columns of one row that may count or enter
    if COMPILED:
        return _scan(
            scores,
            bits,
            target,
            floor,
            counts,
            key,
            raw,
            fill,
            worst,
            answers,
            correct_col,
            sizes,
            offsets,
            codes,
            start,
            depth,
            cand,
        )
    views = [
        memoryview(a)
        for a in (
            scores,
            bits,
            target,
            floor,
            counts,
            key,
            raw,
            fill,
            worst,
            answers,
            correct_col,
            sizes,
            offsets,
            codes,
        )
    ]
    return _scan(*views, start, depth, memoryview(cand))


def _scan(
    scores: cython.float[:, ::1],
    bits: cython.uint[:, ::1],
    target: cython.float[::1],
    floor: cython.float[::1],
    counts: cython.longlong[::1],
    key: cython.ulonglong[:, ::1],
    raw: cython.float[:, ::1],
    fill: cython.longlong[::1],
    worst: cython.ulonglong[::1],
    answers: cython.longlong[::1],
    correct_col: cython.longlong[::1],
    sizes: cython.longlong[::1],
    offsets: cython.longlong[::1],
    codes: cython.longlong[::1],
    start: cython.longlong,
    depth: cython.longlong,
    cand: cython.int[::1],
) -> cython.bint:
    n_rows: cython.Py_ssize_t = scores.shape[0]
    width: cython.Py_ssize_t = scores.shape[1]
    cap: cython.Py_ssize_t = key.shape[1]
    alone: cython.bint = sizes.shape[0] == 0
    special: cython.bint = False
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    c: cython.Py_ssize_t
    n_cand: cython.Py_ssize_t
    m: cython.Py_ssize_t
    a: cython.Py_ssize_t
    n: cython.Py_ssize_t
    s: cython.float
    t: cython.float
    f: cython.float
    g: cython.float
    wf: cython.float
    hb: cython.uint
    zero_high: cython.uint = 0x80000000  # the high bits of +0.0's key
    positive: cython.uint = 0x7FFFFFFF  # a positive score's high bits are its bits xor this
    open_floor: cython.bint
    u: cython.ulonglong
    high: cython.ulonglong
    k: cython.ulonglong
    w: cython.ulonglong
    code: cython.longlong
    own: cython.longlong
    answer: cython.longlong
    count: cython.longlong
    at: cython.longlong
    free: cython.ulonglong = 0xFFFFFFFFFFFFFFFF  # a free slot's key
    with cython.nogil:
        for i in range(n_rows):
            t = target[i]
            f = floor[i]
            open_floor = f < -3.5e38  # -inf: every float32 is finite above -3.41e38
            own = correct_col[i]
            answer = answers[i]
            count = 0
            at = fill[i]
            w = worst[i]
            g = t if t < f else f  # below both the target and the floor nothing happens (NaN t: f)
            if open_floor:  # every column is a candidate (NaN too)
                n_cand = width
                for j in range(width):
                    cand[j] = j
            else:  # the common case: the columns at or above g, gathered without a branch
                n_cand = _at_least(scores, i, width, g, cand)
            for j in range(n_cand):
                c = cand[j]
                s = scores[i, c]
                if not (s >= g or open_floor):  # g rose since (a cut raised the floor)
                    continue
                if s >= t:
                    count += 1 if alone else sizes[start + c]
                if not (s >= f or open_floor):
                    continue
                if alone and c == own:  # the correct code stays out of its own list
                    continue
                u = bits[i, c]
                if s != s:
                    high = 0xFF800000  # the high bits of an order value of -inf (as -inf's key)
                    special = True
                elif s == 0:
                    high = 0x80000000  # +0.0's: -0.0 ties with it
                    if u:
                        special = True
                elif u >> 31:
                    high = u
                else:
                    high = u ^ 0x7FFFFFFF
                n = 1 if alone else offsets[start + c + 1] - offsets[start + c]
                for m in range(n):
                    if alone:
                        code = start + c
                    else:
                        code = codes[offsets[start + c] + m]
                        if code == answer:  # its duplicates stay in
                            continue
                    k = (high << 32) | code
                    if k >= w:
                        continue
                    if at == cap:  # keep the depth smallest keys, raise worst
                        _keep_smallest(key, raw, i, cap, depth)
                        w = 0
                        for a in range(depth):
                            if key[i, a] > w:
                                w = key[i, a]
                        for a in range(depth, cap):
                            key[i, a] = free
                        at = depth
                        # a score below the worst kept key's cannot enter now: raise the floor to it, so
                        # the rest of the row is passed over by the first comparison (same lists)
                        hb = w >> 32
                        if hb == zero_high:
                            wf = 0.0
                        elif hb >> 31:
                            wf = _float_of(hb)
                        else:
                            wf = _float_of(hb ^ positive)
                        if wf > f:
                            f = wf
                            open_floor = False
                            g = t if t < f else f
                        if k >= w:
                            continue
                    key[i, at] = k
                    raw[i, at] = s
                    at += 1
            counts[i] += count
            fill[i] = at
            worst[i] = w
    return special


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def _at_least(
    scores: cython.float[:, ::1],
    i: cython.Py_ssize_t,
    width: cython.Py_ssize_t,
    g: cython.float,
    cand: cython.int[::1],
) -> cython.Py_ssize_t:
    """Write the columns whose score in row ``i`` is at least ``g`` (not NaN) to the start of ``cand``,
    ascending; return how many. Without a branch per score: each column is written and the count
    advances by the comparison, where a loop that stops at each candidate mispredicts its exit (2 %
    of the scores are candidates: about 27 ns each on the development machine)."""
    n: cython.Py_ssize_t = 0
    j: cython.Py_ssize_t
    for j in range(width):
        cand[n] = j
        n += scores[i, j] >= g
    return n


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def _float_of(bits: cython.uint) -> cython.float:
    """The float32 whose bits are ``bits``."""
    if not cython.compiled:
        return _struct.unpack("<f", _struct.pack("<I", bits))[0]
    return cython.cast(cython.p_float, cython.address(bits))[0]


@cython.cfunc
@cython.inline
@cython.nogil
@cython.exceptval(check=False)
def _keep_smallest(
    key: cython.ulonglong[:, ::1],
    raw: cython.float[:, ::1],
    i: cython.Py_ssize_t,
    n: cython.Py_ssize_t,
    depth: cython.Py_ssize_t,
) -> cython.void:
    """Move the ``depth`` smallest of row ``i``'s first ``n`` keys to its first ``depth`` slots (Hoare
    quickselect; keys are unique), each score in ``raw`` moved along with its key."""
    lo: cython.Py_ssize_t = 0
    hi: cython.Py_ssize_t = n - 1
    kth: cython.Py_ssize_t = depth - 1
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    x: cython.ulonglong
    y: cython.ulonglong
    pivot: cython.ulonglong
    rf: cython.float
    while lo < hi:
        x = key[i, lo]
        y = key[i, (lo + hi) // 2]
        pivot = key[i, hi]
        if (x <= y) == (y <= pivot):
            pivot = y
        elif (y <= x) == (x <= pivot):
            pivot = x
        a = lo
        b = hi
        while a <= b:
            while key[i, a] < pivot:
                a += 1
            while key[i, b] > pivot:
                b -= 1
            if a <= b:
                x = key[i, a]
                key[i, a] = key[i, b]
                key[i, b] = x
                rf = raw[i, a]
                raw[i, a] = raw[i, b]
                raw[i, b] = rf
                a += 1
                b -= 1
        if kth <= b:
            hi = b
        elif kth >= a:
            lo = a
        else:
            break


def select_rows(key, raw, fill, depth: int) -> None:
    """Cut each buffer holding more than ``depth`` keys to its ``depth`` smallest (quickselect, the
    scores beside them moved along; ``fill`` set to ``depth``), and set the scores of the free slots
    below ``depth`` to -inf (they sort last), so that sorting the first ``depth`` keys and, where no
    NaN or -0.0 score was packed, the first ``depth`` scores descending gives aligned lists."""
    if COMPILED:
        _select_rows(key, raw, fill, depth)
    else:
        _select_rows(memoryview(key), memoryview(raw), memoryview(fill), depth)


def _select_rows(
    key: cython.ulonglong[:, ::1], raw: cython.float[:, ::1], fill: cython.longlong[::1], depth: cython.longlong
) -> None:
    n_rows: cython.Py_ssize_t = key.shape[0]
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    n: cython.Py_ssize_t
    free: cython.ulonglong = 0xFFFFFFFFFFFFFFFF  # a free slot's key
    lowest: cython.float = -float("inf")
    with cython.nogil:
        for i in range(n_rows):
            n = fill[i]
            if n > depth:
                _keep_smallest(key, raw, i, n, depth)
                for a in range(depth, n):
                    key[i, a] = free
                fill[i] = depth
            else:
                for a in range(n, depth):
                    raw[i, a] = lowest


def write_rows(key, raw, answers, correct, position, rows, top, top_scores, depth: int) -> None:
    """Write final top lists into rows ``rows`` of ``top`` (int64) and ``top_scores`` (float64): per
    query the first ``depth`` slots of its (sorted) buffer, codes from the keys' low 32 bits, scores
    ``raw`` as computed, with its correct code (``answers``, score ``correct``, float64) inserted at
    ``position`` (none when that is >= depth) and the entries after it shifted by one; a free slot
    gives -1 and NaN."""
    if COMPILED:
        _write_rows(key, raw, answers, correct, position, rows, top, top_scores, depth, float("nan"))
    else:
        views = [memoryview(a) for a in (key, raw, answers, correct, position, rows, top, top_scores)]
        _write_rows(*views, depth, float("nan"))


def _write_rows(
    key: cython.ulonglong[:, ::1],
    raw: cython.float[:, ::1],
    answers: cython.longlong[::1],
    correct: cython.double[::1],
    position: cython.longlong[::1],
    rows: cython.longlong[::1],
    top: cython.longlong[:, ::1],
    top_scores: cython.double[:, ::1],
    depth: cython.longlong,
    nan: cython.double,
) -> None:
    n_rows: cython.Py_ssize_t = key.shape[0]
    i: cython.Py_ssize_t
    a: cython.Py_ssize_t
    r: cython.Py_ssize_t
    slot: cython.Py_ssize_t
    at: cython.Py_ssize_t
    x: cython.ulonglong
    free: cython.ulonglong = 0xFFFFFFFFFFFFFFFF  # a free slot's key
    low: cython.ulonglong = 0xFFFFFFFF  # a key's code bits
    with cython.nogil:
        for i in range(n_rows):
            r = rows[i]
            at = position[i]
            for slot in range(depth):
                a = slot if slot < at else slot + 1
                if a >= depth:
                    break
                x = key[i, slot]
                if x == free:
                    top[r, a] = -1
                    top_scores[r, a] = nan
                else:
                    top[r, a] = x & low
                    top_scores[r, a] = raw[i, slot]
            if at < depth:
                top[r, at] = answers[i]
                top_scores[r, at] = correct[i]


def kth_largest(scores, rows, correct_col, rank: int, scratch, out) -> None:
    """``out[m]``: the ``rank``-th largest score (1 = the largest) of row ``rows[m]`` of ``scores``
    (float32), a NaN read as -inf and the row's correct column (``correct_col``, -1: none) as -inf
    (a quickselect on a copy of the row in ``scratch``, float32 of the block's width)."""
    if COMPILED:
        _kth_largest(scores, rows, correct_col, rank, scratch, out)
    else:
        views = [memoryview(a) for a in (scores, rows, correct_col)]
        _kth_largest(*views, rank, memoryview(scratch), memoryview(out))


def _kth_largest(
    scores: cython.float[:, ::1],
    rows: cython.longlong[::1],
    correct_col: cython.longlong[::1],
    rank: cython.Py_ssize_t,
    scratch: cython.float[::1],
    out: cython.double[::1],
) -> None:
    width: cython.Py_ssize_t = scores.shape[1]
    m: cython.Py_ssize_t
    i: cython.Py_ssize_t
    j: cython.Py_ssize_t
    a: cython.Py_ssize_t
    b: cython.Py_ssize_t
    lo: cython.Py_ssize_t
    hi: cython.Py_ssize_t
    kth: cython.Py_ssize_t = width - rank
    s: cython.float
    x: cython.float
    y: cython.float
    pivot: cython.float
    lowest: cython.float = -float("inf")
    with cython.nogil:
        for m in range(rows.shape[0]):
            i = rows[m]
            for j in range(width):
                s = scores[i, j]
                scratch[j] = s if s == s else lowest
            if correct_col[i] >= 0:
                scratch[correct_col[i]] = lowest
            lo = 0
            hi = width - 1
            while lo < hi:  # Hoare quickselect of position kth (ascending)
                x = scratch[lo]
                y = scratch[(lo + hi) // 2]
                pivot = scratch[hi]
                if (x <= y) == (y <= pivot):
                    pivot = y
                elif (y <= x) == (x <= pivot):
                    pivot = x
                a = lo
                b = hi
                while a <= b:
                    while scratch[a] < pivot:
                        a += 1
                    while scratch[b] > pivot:
                        b -= 1
                    if a <= b:
                        s = scratch[a]
                        scratch[a] = scratch[b]
                        scratch[b] = s
                        a += 1
                        b -= 1
                if kth <= b:
                    hi = b
                elif kth >= a:
                    lo = a
                else:
                    break
            out[m] = scratch[kth]
