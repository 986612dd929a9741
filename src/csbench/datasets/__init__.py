"""Dataset registry: declarative metadata plus a builder that writes the common record schema."""

from __future__ import annotations

from csbench.datasets.base import RECORD_COLUMNS, SPLITS, DatasetSpec
from csbench.datasets.local import DEBIAN_CORPORA, LOCAL_SOURCE_KIND, PYTHON_PACKAGES, PYTHON_STDLIB, R_CRAN
from csbench.datasets.releases import RELEASES
from csbench.registry import Registry

DATASETS: Registry[DatasetSpec] = Registry("dataset")
DATASETS.register(PYTHON_STDLIB.name, PYTHON_STDLIB)
DATASETS.register(PYTHON_PACKAGES.name, PYTHON_PACKAGES)
for _spec in (*DEBIAN_CORPORA, R_CRAN, *RELEASES):
    DATASETS.register(_spec.name, _spec)

__all__ = ["DATASETS", "LOCAL_SOURCE_KIND", "RECORD_COLUMNS", "SPLITS", "DatasetSpec"]
