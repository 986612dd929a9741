"""Shared fixtures. Tests run offline: no hub downloads, no DVC analytics."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
# One embedding cache for the session's studies (csbench.cache.embeddings; the drivers' jobs inherit it), as
# users share one between clones.
_EMBEDDING_CACHE = None
if not os.environ.get("CSBENCH_EMBEDDING_CACHE"):
    _EMBEDDING_CACHE = tempfile.mkdtemp(prefix="csbench-embedding-cache-")
    os.environ["CSBENCH_EMBEDDING_CACHE"] = _EMBEDDING_CACHE
# The two session runs of the tiny study (snakemake_tiny, dvc_first) share a cache of their own, empty before
# the first of them: test_shared_embedding_cache checks that the first encodes and the second encodes nothing,
# whichever other study ran before them in this test process (pytest-xdist spreads the modules).
TINY_STUDY_CACHE = tempfile.mkdtemp(prefix="csbench-tiny-study-cache-")


@contextlib.contextmanager
def _tiny_study_cache() -> Iterator[None]:
    """The drivers' jobs started inside use TINY_STUDY_CACHE (they inherit this process's environment)."""
    saved = os.environ.get("CSBENCH_EMBEDDING_CACHE")
    os.environ["CSBENCH_EMBEDDING_CACHE"] = TINY_STUDY_CACHE
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CSBENCH_EMBEDDING_CACHE", None)
        else:
            os.environ["CSBENCH_EMBEDDING_CACHE"] = saved

from api_fixtures import *  # noqa: E402, F403 (the loopback API servers of tests/api, issue #26)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark data beside the project; tests using it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA} (it sits beside the project checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def snakemake_tiny(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny study run once by snakemake for the whole session (test_drivers, test_study_outputs,
    test_moved_checkout): {"project", "jobs", "files"}. Do not change the project; copy it
    (`test_drivers.copy_run`)."""
    from test_drivers import run_tiny_study_with_snakemake

    with _tiny_study_cache():
        return run_tiny_study_with_snakemake(tmp_path_factory)


@pytest.fixture(scope="session")
def dvc_first(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny study run once by `dvc repro` for the whole session (test_drivers, test_dvc_remote,
    test_study_outputs): {"project", "jobs", "files"}. Do not change the project; copy it."""
    from test_drivers import run_tiny_study_with_dvc

    with _tiny_study_cache():
        return run_tiny_study_with_dvc(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_pushed(dvc_first: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`dvc_first`'s project copied and pushed to a local folder remote (test_dvc_remote,
    test_pull_verify). Do not change it; a test that tampers with the remote restores it."""
    from test_dvc_remote import push_tiny_study

    return push_tiny_study(dvc_first, tmp_path_factory)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the session's embedding caches (the general one when this session made it)."""
    if _EMBEDDING_CACHE is not None:
        shutil.rmtree(_EMBEDDING_CACHE, ignore_errors=True)
    shutil.rmtree(TINY_STUDY_CACHE, ignore_errors=True)
