"""Typed parameters of the registries: a JSON schema per model and per loss, derived from its defaults.

A registry gives each parameter a default; the parameter's type follows from it (``True`` -> boolean,
``3`` -> integer, ``0.1`` -> number, ``"dot"`` -> string, ``[16, 16]`` -> array of integers). Where
the default cannot tell (``None``, an empty list), or where a range or a set of values applies, the
registry declares JSON-schema keywords for the parameter (``{"dim": {"minimum": 1}}``), which refine
or replace the derived ones. So every parameter a registry knows is typed, a parameter it does not
know is refused (with a close match), and ``csbench validate`` refuses a bad value before any job runs
instead of the train job after download, prepare and attack.

Plain data and jsonschema only: ``csbench validate`` (every job, every snakemake start) imports this
without torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

Declarations = Mapping[str, Mapping[str, Any]]  # parameter -> JSON-schema keywords

# JSON schema counts 128.0 as an integer; the models do not (`isinstance(dim, int)`), so neither does this.
_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
)
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)


def json_type(value: Any) -> dict[str, Any] | None:
    """The JSON-schema type a default implies (with its items' type for a list), None when it
    implies none (``None``, an empty list, a list of mixed types)."""
    if isinstance(value, bool):  # before int: bool is an int
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, dict):
        return {"type": "object"}
    if isinstance(value, (list, tuple)):
        items = [json_type(item) for item in value]
        if not items or None in items or any(item != items[0] for item in items):
            return None
        return {"type": "array", "items": items[0]}
    return None


def param_schema(defaults: Mapping[str, Any], declared: Declarations | None = None) -> dict[str, Any]:
    """The JSON schema of a parameter mapping: every key of ``defaults``, typed by its default and
    refined by ``declared``; no other key. Raises TypeError for a parameter whose type neither its
    default nor a declaration gives, and for a declaration of a parameter without a default (a
    registry bug, caught by the tests)."""
    declared = declared or {}
    extra = sorted(set(declared) - set(defaults))
    if extra:
        raise TypeError(f"declared parameters without a default: {', '.join(extra)}")
    properties: dict[str, Any] = {}
    for name, default in defaults.items():
        own = dict(declared.get(name, {}))
        if isinstance(default, (list, tuple)) and "items" in own:
            derived: dict[str, Any] = {"type": "array"}  # the declaration gives the items
        else:
            derived = json_type(default) or {}
        schema = {**derived, **own}
        if not {"type", "enum", "const", "anyOf", "oneOf"} & set(schema):
            raise TypeError(f"parameter {name!r}: its default {default!r} gives no type; declare one")
        if schema.get("type") == "array" and "items" not in schema:
            raise TypeError(f"parameter {name!r}: its default {default!r} gives no item type; declare items")
        properties[name] = schema
    return {"type": "object", "additionalProperties": False, "properties": properties}


@dataclass(frozen=True)
class ParamProblem:
    """What is wrong with one parameter: its path (the parameter, then an item's index), and the
    message without the key (``'abc' is not of type 'number'``; an unknown parameter's names the
    valid ones and a close match)."""

    path: tuple[str | int, ...]
    message: str
    unknown: bool = False

    def describe(self, prefix: str) -> str:
        """The message with its key below ``prefix``: ``loss_params.ce.temperature: 'abc' is not of
        type 'number'``, ``loss_params.ce: unknown parameter 'temprature'; ...``."""
        if self.unknown or not self.path:
            return f"{prefix}: {self.message}"
        return f"{prefix}.{self.path[0]}" + "".join(f"[{p}]" for p in self.path[1:]) + f": {self.message}"


def check_params(
    given: Mapping[str, Any], defaults: Mapping[str, Any], declared: Declarations | None = None
) -> ParamProblem | None:
    """The first problem of ``given`` against its parameters (an unknown one, a wrong type, a value
    out of range or not allowed), None when all is well."""
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        return ParamProblem((unknown[0],), unknown_message(unknown[0], list(defaults)), unknown=True)
    validator = Validator(param_schema(defaults, declared))
    errors = sorted(validator.iter_errors(dict(given)), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    return ParamProblem(tuple(errors[0].absolute_path), errors[0].message)


def unknown_message(name: str, valid: list[str]) -> str:
    """``unknown parameter 'temprature'; valid parameters: temperature. Did you mean 'temperature'?``"""
    message = f"unknown parameter {name!r}; valid parameters: {', '.join(valid) or 'none'}"
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    return message + (f". Did you mean {close[0]!r}?" if close else "")
