"""How long numpy's OpenBLAS threads spin after a product, set before numpy loads it.

OpenBLAS (numpy's BLAS: the scipy-openblas wheels, pthreads) keeps its worker threads spinning for
``2 ** OPENBLAS_THREAD_TIMEOUT`` CPU cycles after each product, waiting for the next one; its default,
28, is about 0.1 s. The ranking engine (``csbench.evaluate.ranking``) alternates a block's product with
its own threads' pass over the scores (counting, top lists), and that pass takes tens of milliseconds:
under the default the BLAS threads spun through it on the very cores the pass needs, and the pass ran
barely faster on 2 threads than on 1 (0.98 s in each against 1.2 s alone, 20,000 × 20,000 vectors).
``csbench/__init__.py`` therefore sets ``OPENBLAS_THREAD_TIMEOUT``
to :data:`THREAD_TIMEOUT` (2 ** 20 cycles, about 0.4 ms) unless the environment sets it: measured on
the 2-core development machine (docs/performance.md, "Ranking"), the engine on 20,000 × 20,000
vectors took about 2.5 s instead of 3.4 s, and a tight loop of small products (128³, where the
threads must stay awake between calls) was no slower (at 2 ** 16 it was 1.3x slower). Only the
scheduling changes: every product gives the same bits. (The engine has since run its products on one
BLAS thread, over parts its own threads share, so that its scores do not depend on the thread count:
csbench.evaluate.ranking; the setting still spares any other multi-threaded product's neighbours.)

OpenBLAS reads the variable once, when it is loaded: a program that imports numpy before csbench
keeps OpenBLAS's default (the same results); :func:`thread_timeout` says which
value the loaded library runs with. Standard library only at import (``csbench/__init__.py`` runs this
before anything loads numpy).
"""

from __future__ import annotations

import os

VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
THREAD_TIMEOUT = 20  # OpenBLAS's threads spin 2 ** 20 cycles after a product (OpenBLAS: 28; it clamps to 4..30)


def set_default() -> None:
    """``OPENBLAS_THREAD_TIMEOUT`` = :data:`THREAD_TIMEOUT` unless the environment sets it (a user's
    value stays); effective only where OpenBLAS is not loaded yet."""
    os.environ.setdefault(VARIABLE, str(THREAD_TIMEOUT))


def thread_timeout() -> int | None:
    """The spin setting numpy's loaded OpenBLAS runs with (its ``openblas_thread_timeout()``: the
    variable as read at load; 0 means unset, i.e. OpenBLAS's default 28), or None where numpy's BLAS
    is not an OpenBLAS that reports it (MKL, Accelerate, or threadpoolctl missing)."""
    import ctypes

    import numpy  # noqa: F401  (loads the BLAS, so that threadpoolctl finds it)

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    for library in threadpool_info():
        if library.get("internal_api") != "openblas":
            continue
        function = getattr(ctypes.CDLL(library["filepath"]), "openblas_thread_timeout", None)
        if function is not None:
            function.restype = ctypes.c_int
            return int(function())
    return None
