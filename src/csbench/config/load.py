"""Loading a config: read the files, merge overlays as snakemake does, validate (schema, then the
package's checks), and what a loaded config means for ``dvc repro``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from csbench.config.checks import check_names, check_sections
from csbench.config.files import locate, merge, read_yaml
from csbench.config.model import NOT_CONFUSED_TRAIN_ATTACK, TRAINED_DEFAULTS, Config, ConfigError
from csbench.config.schema import schema, schema_error_message
from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND
from csbench.registry import UnknownNameError


def load_config(paths: list[str | Path] | str | Path) -> Config:
    """Read and merge config files (later ones overlay earlier ones), then validate."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not paths:
        raise ConfigError("no config file given")
    raw: dict[str, Any] = {}
    for path in paths:
        raw = merge(raw, read_yaml(path))
    return validate_config(raw, sources=tuple(str(p) for p in paths))




def validate_config(raw: dict[str, Any], sources: tuple[str, ...] = ("params.yaml",)) -> Config:
    """Check ``raw`` against the JSON schema and the registries; return the typed config."""
    where = "+".join(sources)
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (len(e.absolute_path), list(map(str, e.path))))
    if errors:
        error = errors[0]
        keys = tuple(error.absolute_path)
        if "propertyNames" in error.absolute_schema_path:  # a bad name: the line of that key, not its parent's
            keys = (*keys, error.instance)
        raise ConfigError(f"{locate(Config(raw=raw, sources=sources), *keys)}: " + schema_error_message(error))
    config = drop_keyless(Config(raw=raw, sources=sources))
    try:
        check_names(config)
    except ConfigError:
        raise  # already names its file and line
    except UnknownNameError as err:
        raise ConfigError(f"{where}: {err.message}") from None
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    check_sections(config)
    return config



def drop_keyless(config: Config) -> Config:
    """Apply ``api.missing_key`` to the endpoint models of ``grid.models`` whose key variable is not
    set: ``skip`` leaves their runs out (the returned config's ``grid.models`` lacks them and its
    ``keyless`` names them, for the warnings of ``csbench validate``, the Snakefile and ``csbench
    merge``, whose merged params.yaml for ``dvc repro`` lacks them too: merge again once the key is
    set); ``error`` refuses the config at the model's line. The key's value is never read here."""
    try:
        missing = [(name, config.api_key_missing(name)) for name in config.models]
    except (UnknownNameError, ValueError, KeyError):
        return config  # an unknown model: check_names says so, at its line
    missing = [(name, variable) for name, variable in missing if variable]
    if not missing:
        return config
    if config.api["missing_key"] != "skip":
        name, variable = missing[0]
        where = locate(config, "grid", "models", config.models.index(name))
        raise ConfigError(
            f"{where}: {name!r} reads its API key from ${variable}, which is not set: export it (the key is "
            "never written anywhere), or set api.missing_key: skip to leave its runs out of the study"
        )
    raw = {**config.raw, "grid": {**config.raw["grid"], "models": [m for m in config.models if m not in dict(missing)]}}
    return Config(raw=raw, sources=config.sources, keyless=tuple(missing))


def keyless_warnings(config: Config) -> list[str]:
    """One line per endpoint model left out because its key is not set (``api.missing_key: skip``)."""
    return [
        f"grid.models: {name!r} left out: ${variable} (its API key) is not set; export it to run it "
        "(under dvc repro: `csbench merge` again afterwards)"
        for name, variable in config.keyless
    ]


def check_sources(config: Config) -> None:
    """Fail before any job starts if a local corpus's source directory is missing or unreadable."""
    from csbench.datasets.local import SourceError, resolve_source

    for name in config.datasets:
        opts = config.dataset_options(name)
        if config.dataset_kind(name) == LOCAL_SOURCE_KIND:
            try:
                resolve_source(str(opts["source"]))
            except SourceError as err:
                hint = DATASETS.get(name).setup_hint if name in DATASETS else ""
                message = f"{'+'.join(config.sources)}: datasets.{name}.source: {err}" + (f"; {hint}" if hint else "")
                raise ConfigError(message) from None



# ------------------------------------------------------------------------------ studies under DVC


def merged_yaml(config: Config) -> str:
    """A loaded config (its files merged as snakemake merges ``--configfile`` overlays: later files
    override earlier ones key by key, lists replace; then validated) as one YAML document. DVC has no
    overlays: this is the ``params.yaml`` that runs a study of ``workflow/configs/`` under ``dvc repro``
    (see :func:`dvc_limitations` for what it cannot run)."""
    header = (
        f"# csbench experiment config: {' + '.join(config.sources)}, merged and validated by `csbench merge`.\n"
        "# Edit the source files and merge again; comments live there.\n"
    )
    return header + yaml.safe_dump(config.raw, sort_keys=False, allow_unicode=True, width=110)


def dvc_limitations(config: Config) -> list[str]:
    """What ``dvc repro`` cannot run as snakemake does for this config: dvc.yaml's ``matrix``
    stages are products of the ``grid.*`` and ``robustness.*`` lists as written, so a per-dataset
    narrowing or override of the grid has no DVC equivalent (one message per feature)."""
    notes = []
    trained = config.trained
    if trained["models"] and trained["datasets"] != config.datasets:
        notes.append(
            f"grid.trained.datasets ({', '.join(trained['datasets'])}): dvc.yaml's train / index-trained / "
            f"evaluate-trained stages iterate grid.datasets, so dvc repro would also train on "
            f"{', '.join(d for d in config.datasets if d not in trained['datasets'])}"
        )
    if trained["models"] and trained["evaluate_on"] is not None:
        notes.append(
            f"grid.trained.evaluate_on ({', '.join(trained['evaluate_on'])}): dvc.yaml's evaluate-trained stages "
            "evaluate each model on its training dataset only, not a model trained once on several datasets"
        )
    if trained["models"] and trained["seeds_by_dataset"]:
        given = (config.raw["grid"].get("trained") or {}).get("seeds", TRAINED_DEFAULTS["seeds"])
        notes.append(
            "grid.trained.seeds_by_dataset ("
            + "; ".join(f"{d}: {', '.join(map(str, s))}" for d, s in trained["seeds_by_dataset"].items())
            + f"): dvc.yaml's trained stages iterate grid.trained.seeds ({', '.join(map(str, given))}) on every "
            "dataset, so dvc repro would run other seeds there and aggregate would miss the runs of the others"
        )
    if trained["models"] and NOT_CONFUSED_TRAIN_ATTACK not in trained["attacks"]:
        notes.append(
            f"grid.trained.attacks ({', '.join(trained['attacks'])}) without {NOT_CONFUSED_TRAIN_ATTACK!r}: dvc.yaml's "
            "index-trained and evaluate-trained stages depend on the no_comment checkpoint of every trained run"
        )
    summary = config.summarization
    if summary["models"] and NOT_CONFUSED_TRAIN_ATTACK not in summary["attacks"]:
        notes.append(
            f"grid.summarization.attacks ({', '.join(summary['attacks'])}) without {NOT_CONFUSED_TRAIN_ATTACK!r}: "
            "dvc.yaml's summarize stages depend on the no_comment checkpoint of every trained summarizer"
        )
    rule = config.match_rule
    if config.matching_protocols and rule.kind == "borrowed":
        notes.append(
            f"evaluation.match_threshold borrows {rule.dataset}'s validation split: dvc.yaml's evaluate stages do "
            f"not depend on it, so run {rule.dataset}'s attack stages first (dvc repro attack) or evaluate says so"
        )
    outside = config.robustness_outside_grid()
    notes += [f"{note} (dvc.yaml's matrices read the robustness lists as they are)" for note in outside]
    outside = config.summarization_outside_grid()
    notes += [f"{note} (dvc.yaml's matrices read the summarization lists as they are)" for note in outside]
    return notes
