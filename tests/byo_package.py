"""The bring-your-own model package of tests/fixtures/byo_model (``csbench-byo-example``: a user's encoder
class outside csbench, with the entry point ``hashing`` in the group ``csbench.models``), installed for
real by pip, for the tests of ``family: python`` (tests/models/test_python_model.py) and the BEIR study
end to end (tests/e2e/test_beir_study.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "byo_model"
PACKAGE = "csbench_byo_example"


def install_byo_package(root: Path) -> Path:
    """The fixture package installed by pip (offline, no build isolation: the venv's setuptools) into
    ``root/site``, as ``pip install`` puts a distribution in site-packages: the package and its
    ``.dist-info`` (metadata, entry points). Built from a copy, so no build/ lands in the checkout. Put
    the folder on ``sys.path`` / ``PYTHONPATH`` to use it."""
    pytest.importorskip("setuptools", reason="building the fixture package needs setuptools in the venv")
    source = shutil.copytree(FIXTURE, root / "source", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = root / "site"
    command = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"]
    command += ["--disable-pip-version-check", "--quiet", "--target", str(target), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return target
