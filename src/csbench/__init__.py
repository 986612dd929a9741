"""csbench: a reproducible benchmark pipeline for natural-language code search."""

from csbench import _native

__version__ = "0.1.0"

# Before anything imports the Cython-compiled hot modules of the code attacks: run them from their
# .py sources when CSBENCH_PURE_PYTHON=1 or when a source changed since the build (csbench._native).
_native.guard()
