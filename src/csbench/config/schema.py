"""The JSON schema of ``params.yaml``: ``workflow/schemas/params.schema.yaml`` plus the names the
package registers, and the messages its errors become.

The schema file does not list registered names: :func:`schema` fills every enum of names and every
per-component section (``attack_params.<attack>``, ``loss_params.<loss>``) from the registries, so a
new attack or loss is valid in a config as soon as it is registered, and the two cannot drift apart.
``csbench validate``, every job and the Snakefile (``workflow/rules/common.smk``: ``load_config``)
all validate through here; ``csbench.config.schema.schema()`` is the complete schema (e.g. for an
editor: ``python -c "import json, csbench.config.schema as s; print(json.dumps(s.schema()))"``).

Only registries that import no torch are read (validation runs before every job and every snakemake
start): the losses' declarations are read from their modules' sources (``csbench.train.losses.spec``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from csbench.config.model import INFERENCE_TYPES, ConfigError
from csbench.registry import UnknownNameError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = PROJECT_ROOT / "workflow" / "schemas" / "params.schema.yaml"


def _loss_names() -> list[str]:
    from csbench.train.losses import LOSSES

    return LOSSES.names()


def _loss_sections() -> dict[str, Any]:
    # each loss's parameters are checked against its own declarations (csbench.params), with did-you-mean
    return {name: {"type": "object"} for name in _loss_names()}


def _attack_sections() -> dict[str, Any]:
    from csbench.attacks import ATTACKS

    sections = {}
    for name in ATTACKS.names():
        section: dict[str, Any] = {"type": "object", "additionalProperties": False}
        if ATTACKS.get(name).params_schema:
            section["properties"] = ATTACKS.get(name).params_schema
        sections[name] = section
    return sections


def _protocol_names() -> list[str]:
    from csbench.evaluate.protocols import PROTOCOLS

    return PROTOCOLS.names()


def _model_families() -> list[str]:
    from csbench.models import FAMILIES

    return list(FAMILIES)


def _languages() -> list[str]:
    from csbench.code.parsing import LANGUAGES

    return list(LANGUAGES)


def _local_source_kind() -> list[str]:
    from csbench.datasets import LOCAL_SOURCE_KIND

    return [LOCAL_SOURCE_KIND]


# (path of keys in the schema, the key set there, what fills it): every registered name the schema knows
REGISTERED: tuple[tuple[tuple[str, ...], str, Callable[[], Any]], ...] = (
    (("properties", "grid", "properties", "trained", "properties", "losses", "items"), "enum", _loss_names),
    (
        ("properties", "grid", "properties", "trained", "properties", "inference", "items"),
        "enum",
        lambda: [kind for kind in INFERENCE_TYPES if kind != "zero_shot"],  # a trained run's inferences
    ),
    (
        ("properties", "grid", "properties", "summarization", "properties", "inference", "items"),
        "enum",
        lambda: [kind for kind in INFERENCE_TYPES if kind != "zero_shot"],  # a trained summarizer's inferences
    ),
    (("properties", "attack_params"), "properties", _attack_sections),
    (("properties", "evaluation", "properties", "protocols", "items"), "enum", _protocol_names),
    (("properties", "models", "additionalProperties", "properties", "family"), "enum", _model_families),
    (("properties", "loss_params"), "properties", _loss_sections),
    (("$defs", "local_source", "properties", "kind"), "enum", _local_source_kind),
    (("$defs", "local_source", "properties", "language"), "enum", _languages),
)


def schema_file() -> dict[str, Any]:
    """``workflow/schemas/params.schema.yaml`` as written (without the registered names)."""
    if not SCHEMA_PATH.is_file():
        raise ConfigError(f"schema {SCHEMA_PATH} is missing: csbench must run from its source checkout")
    try:
        return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"schema {SCHEMA_PATH} cannot be read: {err}") from None


def schema() -> dict[str, Any]:
    """The complete schema: the file with the registered names filled in (:data:`REGISTERED`)."""
    found = schema_file()
    for keys, key, fill in REGISTERED:
        node = found
        for part in keys:
            if not isinstance(node.get(part), dict):
                raise ConfigError(f"schema {SCHEMA_PATH}: no {'.'.join(keys)} to fill with registered names")
            node = node[part]
        node[key] = fill()
    return found


def _key_path(path: Any) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in path]
    return ".".join(parts).replace(".[", "[") or "(top level)"


def schema_error_message(error: jsonschema.ValidationError, prefix: tuple[Any, ...] = ()) -> str:
    """One schema error as the config's messages read: the key, valid names and the closest match."""
    key = _key_path((*prefix, *error.absolute_path))
    if error.validator == "enum":
        valid = [str(v) for v in error.validator_value]
        return UnknownNameError("value", error.instance, valid, where=key).message
    if error.validator == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        msgs = []
        for name in extra:
            hint = difflib.get_close_matches(name, allowed, n=1, cutoff=0.5)
            msgs.append(
                f"{key}: unknown key {name!r}; allowed keys: {', '.join(allowed)}"
                + (f". Did you mean {hint[0]!r}?" if hint else "")
            )
        if msgs:
            return "; ".join(msgs)
    return f"{key}: {error.message}"
