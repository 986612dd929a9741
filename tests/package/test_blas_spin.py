"""numpy's OpenBLAS runs with csbench's short thread spin (csbench._blas) in every process that imports
csbench before numpy, as the ``csbench`` command does; a user's own setting stays; the ranking engine's
results do not depend on it (only the scheduling does: docs/performance.md, "Ranking")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from csbench import _blas

READ = "import csbench, csbench._blas as b; print(b.thread_timeout())"


def child(code: str, timeout: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != _blas.VARIABLE}  # this process's csbench set it
    if timeout is not None:
        env[_blas.VARIABLE] = timeout
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def reports_timeout() -> None:
    if child("import numpy, csbench._blas as b; print(b.thread_timeout())", "23").strip() != "23":
        pytest.skip("numpy's BLAS is not an OpenBLAS that reports its thread timeout (MKL, Accelerate?)")


def test_importing_csbench_first_sets_the_short_spin(reports_timeout) -> None:
    assert child(READ, None).strip() == str(_blas.THREAD_TIMEOUT)


def test_the_command_line_module_gets_it_too(reports_timeout) -> None:
    # what the `csbench` console script imports first: the package, then numpy through the CLI's modules
    code = "import csbench.cli, numpy, csbench._blas as b; print(b.thread_timeout())"
    assert child(code, None).strip() == str(_blas.THREAD_TIMEOUT)


def test_a_users_own_setting_stays(reports_timeout) -> None:
    assert child(READ, "25").strip() == "25"


RANK = """
import csbench, hashlib, json, numpy as np
from csbench.evaluate.ranking import rank_dense
rng = np.random.default_rng(7)
codes = rng.standard_normal((6000, 96), dtype=np.float32)
queries = codes[:3000] + rng.standard_normal((3000, 96), dtype=np.float32)
codes[100:110] = codes[0]  # exact ties too
result = rank_dense(queries, codes, np.arange(3000), 100, memory_mb=8)
print(json.dumps([hashlib.sha256(a.tobytes()).hexdigest() for a in (result.ranks, result.top, result.top_scores)]))
"""


def test_the_engines_results_do_not_depend_on_the_spin() -> None:
    short, default = (json.loads(child(RANK, timeout)) for timeout in (str(_blas.THREAD_TIMEOUT), "28"))
    assert short == default
