"""Released benchmark datasets: declarative metadata (official URLs, checksums, counts) and streaming readers.

Registry names: ``csn-{lang}``, ``csn-filtered-{lang}``, ``csn-challenge``, ``advtest``, ``cosqa``,
``cosqa-retrieval``, ``cosqa-webquerytest``, ``statcodesearch``, ``gecs-csn-{lang}``, ``tl-codesum``,
``funcom``. Files lie under ``data/raw/<name>/`` as each :class:`~csbench.datasets.base.RemoteFile`
describes (archives unpacked in place, keeping the release's own relative paths).
"""

from __future__ import annotations

import importlib

from csbench.datasets.base import DatasetSpec
from csbench.registry import defined_in

# The release families, in registration order: one module each, one line each; every DatasetSpec a
# module defines at its top level (alone or in a tuple) is registered.
RELEASE_MODULES = (
    "codesearchnet",
    "csn_challenge",
    "advtest",
    "cosqa",
    "statcodesearch",
    "tl_codesum",
    "funcom",
)
RELEASES: tuple[DatasetSpec, ...] = tuple(
    spec
    for module in RELEASE_MODULES
    for spec in defined_in(importlib.import_module(f"{__name__}.{module}"), DatasetSpec)
)

__all__ = ["RELEASES", "RELEASE_MODULES"]
