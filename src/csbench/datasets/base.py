"""The common record schema and dataset metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

# Every prepared dataset has exactly these columns (SPEC "Datasets").
RECORD_COLUMNS = ("id", "language", "query", "code", "func_name", "repo", "path", "url", "split", "docstring")
SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class DatasetSpec:
    """Declarative description of a dataset csbench can prepare."""

    name: str
    kind: str  # how it is prepared: "local-source" (extracted from code on this machine), ...
    languages: tuple[str, ...]
    description: str
    licence: str
    citation: str = ""
    defaults: dict[str, object] = field(default_factory=dict)  # options params.yaml may override
