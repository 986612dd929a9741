"""Batches of a CPU forward pass, each on one torch thread, several at once (issue #28).

A batch's numbers can depend on the number of threads torch splits its products over: the packaged
all-MiniLM-L6-v2 encoded 8 of 38 single real docstrings differently on 1 and 2 threads (last bits,
2026-11-27). Vectors, match scores and generated summaries would then depend on the cores a job got,
and one process, N worker processes and N cluster jobs would disagree. So every CPU batch whose numbers
reach a metric is computed on one torch thread, and the cores are used by computing as many batches at
once as the caller has torch threads (one Python thread each; torch releases the GIL in its kernels).
Measured faster than one batch at a time on all threads (docs/performance.md).

:func:`run_batches` is the one place that does it: the bi-encoders' encodings
(:func:`csbench.models.encoder.encode_chunks`), the cross-encoders' pair scores and the summarizers'
generation call it. A GPU runs the batches one after another, as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch

from csbench.ordered import in_order

T = TypeVar("T")

# A fast tokenizer (a Rust object behind a borrow check) must not be entered by two threads at once:
# ``compute`` functions hold this lock while they tokenize (cheap next to the forward pass).
tokenizer_lock = threading.Lock()

_lock = threading.Lock()
_depth = 0
_saved = 1


@contextlib.contextmanager
def one_torch_thread() -> Iterator[int]:
    """torch's CPU kernels on one thread inside the block; yields the caller's thread count (the
    batches to compute at once). Nested or concurrent blocks share one setting, restored by the last."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = torch.get_num_threads()
            torch.set_num_threads(1)
        _depth += 1
        threads = _saved
    try:
        yield threads
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                torch.set_num_threads(_saved)


def run_batches(
    compute: Callable[[int], T],
    count: int,
    sink: Callable[[int, T], None],
    device: torch.device | str = "cpu",
) -> None:
    """``sink(i, compute(i))`` for ``i`` in ``range(count)``, in that order and in the calling thread.

    On CPU each ``compute(i)`` runs on one torch thread, as many at once as the caller has torch
    threads (:func:`one_torch_thread`), so its numbers do not depend on that count; on another device
    one after another. ``compute`` runs under ``torch.inference_mode`` (thread-local, so entered in each
    thread); it must hold :data:`tokenizer_lock` while it calls a tokenizer."""

    def one(i: int) -> T:
        with torch.inference_mode():
            return compute(i)

    if torch.device(device).type != "cpu":
        for i in range(count):
            sink(i, one(i))
        return
    with one_torch_thread() as threads:
        in_order(one, count, sink, threads, name="csbench-batches")
