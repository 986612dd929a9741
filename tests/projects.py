"""Test projects shared by the end-to-end tests: copies of the checkout, the git + DVC project a
`dvc repro` test starts from, and the one-dataset mini study over a generated local corpus.

Plain helpers (no fixtures), imported as ``from projects import ...`` like ``corpora``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

BIN = Path(sys.executable).parent
# what a copy of the checkout leaves out: caches and the build's metadata
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
GIT_COMMIT = ["git", "-c", "user.email=ci@csbench", "-c", "user.name=ci", "commit", "-qm"]
INIT_TIMEOUT = 300


def driver_env() -> dict[str, str]:
    """The environment the drivers run in: this interpreter's bin first, no DVC analytics, offline hub."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(DVC_NO_ANALYTICS="1", HF_HUB_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def copy_paths(source: Path, dest: Path, names: Iterable[str], *, skip_missing: bool = False) -> Path:
    """Copies ``names`` (paths relative to ``source``) to the same places under ``dest``: a symbolic
    link as a link, a folder without caches (:data:`COPY_IGNORE`), a file with its times. With
    ``skip_missing``, a name that is not there is passed over; else it raises. Returns ``dest``."""
    for name in names:
        src = source / name
        if skip_missing and not src.exists() and not src.is_symlink():
            continue
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / name)
        elif src.is_dir():
            shutil.copytree(src, dest / name, ignore=COPY_IGNORE)
        else:
            shutil.copy2(src, dest / name)
    return dest


def place_raw(project: Path, files: dict[str, Path]) -> Path:
    """Copies each file of ``files`` (``data/raw``-relative path -> source, e.g. a release file of
    ../shared/data) to its place under ``project/data/raw``, as a download step would leave it.
    Returns ``project``."""
    for relative, source in files.items():
        target = project / "data/raw" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return project


def init_git_dvc(project: Path, params: dict[str, Any], message: str, *, analytics_off: bool = True) -> None:
    """Makes ``project`` a git + DVC project whose params.yaml is ``params`` (DVC has no config
    overlays): writes it, commits everything with ``message``, runs `dvc init` and, with
    ``analytics_off``, `dvc config core.analytics false`. Each command must succeed."""
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    commands = [["git", "init", "-q"], ["git", "add", "-A"], [*GIT_COMMIT, message], [str(BIN / "dvc"), "init", "-q"]]
    if analytics_off:
        commands.append([str(BIN / "dvc"), "config", "core.analytics", "false"])
    for cmd in commands:
        done = subprocess.run(cmd, cwd=project, env=driver_env(), capture_output=True, text=True, timeout=INIT_TIMEOUT)
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


# --------------------------------------------------------------------------- the mini study

MINI_DOC = '''
def {name}(values, factor):
    """Scale every value of the list by the factor given{doc_end}"""
    scaled = []
    for value in values:
        scaled.append(value * factor + {n})
    return scaled
'''


def documented_functions(stem: str, count: int, doc_end: str = ".") -> str:
    """Python source of ``count`` documented functions ``{stem}_0`` ... (each with a distinct body),
    their docstrings ending in ``doc_end``."""
    return "".join(MINI_DOC.format(name=f"{stem}_{i}", n=i, doc_end=doc_end).lstrip("\n") + "\n" for i in range(count))


def mini_config(path: Path, source: Path, study: str) -> Path:
    """Writes the mini study's config to ``path``: dataset ``mini`` (the Python corpus at ``source``,
    every function in test), BM25, no attack, full-corpus evaluation to depth 10. Returns ``path``."""
    config = {
        "study": study,
        "grid": {"datasets": ["mini"], "attacks": ["none"], "models": ["bm25"]},
        "datasets": {"mini": {"kind": "local-source", "language": "python", "source": str(source)}},
        "extraction": {"min_query_tokens": 3, "min_code_lines": 3, "split": {"train": 0, "valid": 0, "test": 100}},
        "models": {},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def bm25_study(study: str, dataset: str, entry: dict[str, Any], run_depth: int) -> dict[str, Any]:
    """A study overlay of ``dataset`` alone (defined by ``entry``), ranked by BM25 without attacks,
    training or robustness grid: full-corpus evaluation to ``run_depth``."""
    return {
        "study": study,
        "grid": {"datasets": [dataset], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
        "datasets": {dataset: entry},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": run_depth},
        "robustness": {"datasets": [], "attacks": []},
    }


# --------------------------------------------------------------------------- unreadable paths


@contextmanager
def unreadable_directory(path: Path) -> Iterator[Path]:
    """A new directory at ``path`` with mode 000 for the block (its mode restored after, so pytest can
    clean it up); the test is skipped where this process can still read it (root: CAP_DAC_OVERRIDE)."""
    path.mkdir()
    path.chmod(0)
    try:
        if os.access(path, os.R_OK | os.X_OK):
            pytest.skip("running with privileges that can read a mode-000 directory (root)")
        yield path
    finally:
        path.chmod(0o755)
