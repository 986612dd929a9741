"""The part of Cython's ``cython`` module the compiled hot modules use (``csbench._native``), for when
Cython is not installed: they run as plain Python then, and these names do nothing.

Compiled, ``cython.locals(name=cython.Py_ssize_t, ...)`` gives a function's locals C types (integer
comparisons and byte slicing without Python objects); run as Python, it returns the function as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

compiled = False  # what ``cython.compiled`` says when the module runs as Python
Py_ssize_t = int


class _NoGil(contextlib.nullcontext):
    """``with cython.nogil:`` and ``@cython.nogil`` (the ranking kernel): release the GIL when compiled."""

    def __call__(self, function: Callable) -> Callable:
        return function


nogil = _NoGil()


def cfunc(function: Callable) -> Callable:
    """``@cython.cfunc``: a C function when compiled, the function unchanged in Python."""
    return function


inline = cfunc  # ``@cython.inline``


def exceptval(*_args: Any, **_kwargs: Any) -> Callable[[Callable], Callable]:
    """``@cython.exceptval(...)``: how a C function reports an exception; nothing in Python."""
    return lambda function: function


def locals(**types: Any) -> Callable[[Callable], Callable]:
    """Cython's ``@cython.locals``: types for the compiler, the function unchanged in Python."""
    return lambda function: function
