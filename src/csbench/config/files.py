"""The config files: read one, merge overlays as snakemake does, and find where a key is set (``file:line``
for every error message; with overlays, the last file that sets it)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from csbench.config.model import Config, ConfigError


def merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict update, as snakemake merges --configfile into the config (lists replace)."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{path}:{where} not valid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return data


def _key_lines(path: str) -> tuple[dict[tuple[Any, ...], int], Any] | None:
    """The 1-based line of every mapping key and list item of a YAML config file, by key path
    (list items by index), and the file's data; None when the file cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except (OSError, yaml.YAMLError):
        return None
    lines: dict[tuple[Any, ...], int] = {}
    stack: list[tuple[Any, tuple[Any, ...]]] = [(root, ())]
    while stack:
        node, prefix = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                lines[(*prefix, str(key.value))] = key.start_mark.line + 1
                stack.append((value, (*prefix, str(key.value))))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines[(*prefix, i)] = item.start_mark.line + 1
                stack.append((item, (*prefix, i)))
    return lines, data


def _value_at(data: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        found = key in data if isinstance(data, dict) else isinstance(data, list) and isinstance(key, int)
        if not found or (isinstance(data, list) and key >= len(data)):
            return None
        data = data[key]
    return data


def locate(config: Config, *keys: Any) -> str:
    """``file:line`` where the config sets ``keys`` (the last of its files that sets it, as overlays
    override), or the files joined by ``+`` when no file sets it as the config has it."""
    for source in reversed(config.sources):
        found = _key_lines(source)
        if found is None or keys not in found[0]:
            continue
        mine, merged = _value_at(found[1], keys), _value_at(config.raw, keys)
        if isinstance(merged, dict) or mine == merged:  # else the config was changed after reading
            return f"{source}:{found[0][keys]}"
        break
    return "+".join(config.sources)
