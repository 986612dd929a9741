"""Shared fixtures. Tests run offline: no hub downloads, no DVC analytics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark data beside the project; tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (it sits beside the project checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def dvc_first(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny study run once by `dvc repro` for the whole session (test_drivers, test_dvc_remote):
    {"project", "jobs", "files"}. Do not change the project; copy it."""
    from test_drivers import run_tiny_study_with_dvc

    return run_tiny_study_with_dvc(tmp_path_factory)
