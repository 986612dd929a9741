"""Provenance of a run: code version, config hash, input checksums, package versions, timings."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from csbench import __version__
from csbench.io import canonical_hash, sha256_file
from csbench.paths import code_digest

PACKAGES = ("numpy", "pandas", "pyarrow", "bm25s", "tree-sitter", "tree-sitter-languages", "torch", "transformers")


def git_state(cwd: str | Path = ".") -> dict[str, Any]:
    """Commit and dirty flag of the working tree, or None outside a git checkout."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "csbench": __version__}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def provenance(
    *,
    phase: str,
    params: dict[str, Any],
    inputs: list[str | Path],
    seed: int | None,
    timings: dict[str, float],
    device: str = "cpu",
    efficiency: dict[str, Any] | None = None,
    model_source: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of how an output was made. ``efficiency``: throughput and latency figures (COBE's
    efficiency axis), kept here with the timings so the metrics files stay byte-identical between
    runs. ``model_source``: a user's model's class, distribution, version and revision
    (csbench.models.python.ModelSource)."""
    return {
        "phase": phase,
        "code_sha256": code_digest(phase),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git": git_state(),
        "params": params,
        "params_sha256": canonical_hash(params),
        "inputs": {str(p): sha256_file(p) for p in inputs},
        "packages": package_versions(),
        "seed": seed,
        "device": device,
        "host": platform.node(),
        "argv": sys.argv,
        "timings_s": timings,
        **({"efficiency": efficiency} if efficiency is not None else {}),
        **({"model_source": model_source} if model_source is not None else {}),
    }
