"""csbench: a reproducible benchmark pipeline for natural-language code search."""

__version__ = "0.1.0"
