"""Dataset registry: declarative metadata plus a builder that writes the common record schema.

A dataset is a frozen :class:`~csbench.datasets.base.DatasetSpec` (name, languages, source files with
checksums, licence, citation, options, reader) defined in its module: the local corpora in
``local.py``, each release family in a module of ``releases/`` (registered by one line of
``releases/__init__.py``'s ``RELEASE_MODULES``). Every spec a module defines at its top level is
registered, in definition order.
"""

from __future__ import annotations

from csbench.datasets import local
from csbench.datasets.base import RECORD_COLUMNS, SPLITS, DatasetSpec
from csbench.datasets.local import LOCAL_SOURCE_KIND
from csbench.datasets.releases import RELEASES
from csbench.registry import Registry, defined_in

DATASETS: Registry[DatasetSpec] = Registry("dataset")
for _spec in (*defined_in(local, DatasetSpec), *RELEASES):
    DATASETS.add(_spec)

__all__ = ["DATASETS", "LOCAL_SOURCE_KIND", "RECORD_COLUMNS", "SPLITS", "DatasetSpec"]
