"""The part of Cython's ``cython`` module the compiled hot modules use (``csbench._native``), for when
Cython is not installed: they run as plain Python then, and these names do nothing.

Compiled, ``cython.locals(name=cython.Py_ssize_t, ...)`` gives a function's locals C types (integer
comparisons and byte slicing without Python objects); run as Python, it returns the function as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

compiled = False  # what ``cython.compiled`` says when the module runs as Python
Py_ssize_t = int


def locals(**types: Any) -> Callable[[Callable], Callable]:
    """Cython's ``@cython.locals``: types for the compiler, the function unchanged in Python."""
    return lambda function: function
