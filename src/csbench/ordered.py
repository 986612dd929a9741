"""Work items computed on several threads, their results taken in order in the calling thread.

:func:`in_order` is the one loop that does it: the CPU forward passes (``csbench.models.threads``,
each on one torch thread) and the query-by-query search of a retriever without vectors (BM25,
``csbench.evaluate.runner``). A few items run ahead of the one the caller waits for, so the threads never
idle and neither the results nor, after an error, the work still to do piles up. Useful where the work
releases the GIL (numpy's sorts and products, torch's kernels); results do not depend on the number
of threads when each item's result depends on that item alone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def in_order(
    compute: Callable[[int], T], count: int, sink: Callable[[int, T], None], workers: int, name: str = "csbench"
) -> None:
    """``sink(i, compute(i))`` for ``i`` in ``range(count)``, in that order and in the calling thread;
    ``compute`` on ``workers`` threads (one: all in the calling thread). An error in ``compute`` or
    ``sink`` is raised here once the items already running end; those not started are dropped."""
    if workers < 2 or count < 2:
        for i in range(count):
            sink(i, compute(i))
        return
    workers = min(workers, count)
    pool = ThreadPoolExecutor(workers, thread_name_prefix=name)
    try:
        ahead: deque[Future[T]] = deque(pool.submit(compute, i) for i in range(min(count, 2 * workers)))
        for i in range(count):
            result = ahead.popleft().result()
            if i + len(ahead) + 1 < count:
                ahead.append(pool.submit(compute, i + len(ahead) + 1))
            sink(i, result)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
