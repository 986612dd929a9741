"""The experiment config: load (with snakemake-style overlays), validate, and type it.

``params.yaml`` is validated against ``workflow/schemas/params.schema.yaml``, whose enums of names
are filled from the package registries (:mod:`.schema`; ``schema.schema()`` is the complete schema),
and against the registries' own checks (:mod:`.checks`) before any job runs; every error names the
file and the key (:mod:`.files`). :mod:`.model` holds the typed :class:`Config` and its keys,
:mod:`.load` loading and validating.
"""

from __future__ import annotations

from csbench.config.checks import matching_notes
from csbench.config.files import locate, merge, read_yaml
from csbench.config.load import (
    check_sources,
    dvc_limitations,
    keyless_warnings,
    load_config,
    merged_yaml,
    validate_config,
)
from csbench.config.model import (
    DATASET_TABLE_TOKENIZER,
    INFERENCE_TYPES,
    NOT_CONFUSED_TRAIN_ATTACK,
    STABILITY_DEFAULTS,
    SUMMARY_LOSS,
    SUMMARY_PROTOCOL,
    TRAINED_DEFAULTS,
    TRAINED_ON_SEP,
    Config,
    ConfigError,
    RunKey,
    StabilityKey,
    TrainKey,
)
from csbench.config.schema import PROJECT_ROOT, SCHEMA_PATH

__all__ = [
    "DATASET_TABLE_TOKENIZER",
    "INFERENCE_TYPES",
    "NOT_CONFUSED_TRAIN_ATTACK",
    "PROJECT_ROOT",
    "SCHEMA_PATH",
    "STABILITY_DEFAULTS",
    "SUMMARY_LOSS",
    "SUMMARY_PROTOCOL",
    "TRAINED_DEFAULTS",
    "TRAINED_ON_SEP",
    "Config",
    "ConfigError",
    "RunKey",
    "StabilityKey",
    "TrainKey",
    "check_sources",
    "dvc_limitations",
    "keyless_warnings",
    "load_config",
    "locate",
    "matching_notes",
    "merge",
    "merged_yaml",
    "read_yaml",
    "validate_config",
]
