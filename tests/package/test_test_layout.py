"""The test tree's own rules: every test folder is on pytest's ``pythonpath`` (pyproject.toml), so its
modules are imported by their bare names, and two modules with one name in two folders make the
second fail to collect ("import file mismatch": seen when tests/summarization/test_metrics.py met
tests/evaluate/test_metrics.py, only in a full run). Checked here for the whole tree at once."""

from __future__ import annotations

import collections
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PROJECT = TESTS.parent


def test_every_python_module_under_tests_has_a_name_of_its_own() -> None:
    """Conftest files too: a second ``conftest.py`` (tests/api/conftest.py, issue #26) is imported as the
    module ``conftest``, and every ``from conftest import PROJECT_ROOT`` collected after it fails (seen:
    tests/e2e/test_gecs_transfer.py). Shared fixtures of a folder go in a module of their own, star-imported
    by tests/conftest.py."""
    names = collections.defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        names[path.stem].append(path.relative_to(PROJECT).as_posix())
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}


def test_every_test_folder_is_on_the_pythonpath() -> None:
    listed = set(tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["pythonpath"])
    folders = {path.parent.relative_to(PROJECT).as_posix() for path in TESTS.rglob("test_*.py")}
    assert folders - listed == set()
