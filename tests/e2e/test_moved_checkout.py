"""Issue #22 item 9: a moved or copied checkout does not re-run the jobs of an overlay study.

Snakemake makes each --configfile path absolute, and the jobs' command line named it as a tracked
parameter: after `mv project elsewhere` every job of an overlay study was planned again, although no
setting had changed. The rules now track the settings each job reads (`tracked(...)` params), not
where the config files are.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from test_drivers import AFTER_MODEL_CHANGE, TINY, _set_overlay, copy_run, snakemake, snakemake_jobs

pytestmark = pytest.mark.e2e


def _planned(project: Path) -> dict[str, int]:
    result = snakemake(project, "-n")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout + result.stderr
    return dict(snakemake_jobs(output)) if "Nothing to be done" not in output else {}


def test_a_moved_or_copied_checkout_plans_nothing_new(snakemake_tiny: dict, tmp_path: Path) -> None:
    # the tiny study (an overlay study: BM25 and NBoW, a robustness grid) as the session ran it from
    # scratch, copied (`cp -a`: times kept, so mtime triggers nothing); the session's run stays as it ran
    assert snakemake_tiny["jobs"]["evaluate"] == 9
    project = copy_run(snakemake_tiny, tmp_path / "project")
    assert _planned(project) == {}, f"in a copy of the checkout that ran the study (overlay {TINY})"

    moved = tmp_path / "elsewhere" / "project"
    moved.parent.mkdir()
    os.rename(project, moved)  # `mv`: the same files, times included, at another path
    assert _planned(moved) == {}, f"after moving the checkout (overlay {TINY})"

    copied = tmp_path / "copy"
    shutil.copytree(moved, copied, symlinks=True)
    assert _planned(copied) == {}, f"in a copy of the checkout (overlay {TINY})"

    # a change of a setting still re-runs what it invalidates, in the copy as anywhere
    _set_overlay(copied, {"models": {"bm25": {"k1": 1.5}}})
    assert _planned(copied) == AFTER_MODEL_CHANGE
