"""csbench: a reproducible benchmark pipeline for natural-language code search."""

from csbench import _blas, _native

# Before anything loads numpy: its OpenBLAS threads stop spinning ~0.4 ms after a product instead of
# ~0.1 s, so that other threads get the cores between products (csbench._blas).
_blas.set_default()

__version__ = "0.1.0"

# Before anything imports the Cython-compiled hot modules of the code attacks: run them from their
# .py sources when CSBENCH_PURE_PYTHON=1 or when a source changed since the build (csbench._native).
_native.guard()
