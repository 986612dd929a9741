"""Sharing results without recomputing (issue #8, item 6): push the tiny study from one clone to a
DVC remote (a local folder), pull it into a fresh clone with `make pull`, and neither driver re-runs
anything; the clone holds the same files, and a later change still re-runs what it invalidates.

The pushing clone is a copy of conftest's `dvc_first` project (the tiny study through `dvc repro`).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from test_drivers import (
    AFTER_LR_CHANGE,
    BIN,
    NBOW_LR,
    PROJECT_ROOT,
    RUN_TIMEOUT,
    TINY_DIR,
    _env,
    _set_params,
    dvc_jobs,
    snakemake_jobs,
)

pytestmark = pytest.mark.e2e

DVC = str(BIN / "dvc")
GIT_USER = ["-c", "user.email=ci@csbench", "-c", "user.name=ci"]
OUTPUT_DIRS = ("data", "results", "checkpoints")
# nbow's learning rate, under DVC without running: `dvc repro --dry` lists the stages whose own
# params changed (the trainings, and the nbow runs, which read models.nbow); robust, robustness and
# aggregate follow once those have changed their outputs (AFTER_LR_CHANGE, test_drivers).
AFTER_LR_CHANGE_DVC_DRY = {"train": 3, "index": 6, "evaluate": 6}


def _in_clone(cmd: list[str], project: Path) -> subprocess.CompletedProcess[str]:
    """Run a command in a clone with the clone's own csbench first on the path, as in a clone
    that installed csbench from its checkout: Snakemake's code digests then hash the same code as
    DVC's code deps (the package installed from this checkout may be changing meanwhile)."""
    env = {**_env(), "PYTHONPATH": str(project / "src")}
    return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _ok(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = _in_clone(cmd, cwd)
    assert done.returncode == 0, " ".join(cmd) + "\n" + done.stdout[-3000:] + done.stderr[-3000:]
    return done


def output_files(project: Path) -> dict[str, bytes]:
    """Every file of the study's outputs, by path (Snakemake's directory markers left out)."""
    files: dict[str, bytes] = {}
    for top in OUTPUT_DIRS:
        for path in sorted((project / top).rglob("*")):
            if path.is_file() and path.name != ".snakemake_timestamp":
                files[path.relative_to(project).as_posix()] = path.read_bytes()
    return files


def database_tables(path: Path) -> dict[str, list[tuple]]:
    """Every table of a results database, its rows sorted."""
    with sqlite3.connect(path) as db:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: sorted(db.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr) for name in names}


def clone(origin: Path, dest: Path) -> Path:
    _ok(["git", "clone", "-q", str(origin), str(dest)], origin.parent)
    return dest


def pull(project: Path) -> subprocess.CompletedProcess[str]:
    """`make pull`, the venv of this checkout standing in for the clone's own (`setup` skipped)."""
    return _in_clone(["make", "-o", "setup", "pull"], project)


def push_tiny_study(dvc_first: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny study pushed to a local folder remote, dvc.lock and the remote committed to git:
    conftest's session fixture `tiny_pushed` (shared with test_pull_verify, which restores what it
    tampers)."""
    origin = tmp_path_factory.mktemp("origin") / "project"
    shutil.copytree(dvc_first["project"], origin, symlinks=True)  # dvc_first is shared: keep it as run
    shutil.copy2(PROJECT_ROOT / "Makefile", origin / "Makefile")
    remote = tmp_path_factory.mktemp("remote")
    _ok([DVC, "remote", "add", "-d", "local", str(remote)], origin)
    _ok([DVC, "push"], origin)
    _ok(["git", "add", "-A"], origin)
    _ok(["git", *GIT_USER, "commit", "-qm", "the tiny study's outputs, pushed"], origin)
    assert any(remote.rglob("*")), "dvc push sent nothing"
    return origin


@pytest.fixture(scope="module")
def pushed(tiny_pushed: Path) -> Path:
    return tiny_pushed


@pytest.fixture(scope="module")
def pulled(pushed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = clone(pushed, tmp_path_factory.mktemp("pulled") / "project")
    # git carries no outputs: only the READMEs that keep checkpoints/ and results/robustness/ in a checkout
    assert set(output_files(project)) == {"checkpoints/README.md", "results/robustness/README.md"}
    result = pull(project)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return project


def test_pull_restores_every_output_of_the_pushing_clone(pushed: Path, pulled: Path) -> None:
    ours, theirs = output_files(pushed), output_files(pulled)
    # data, checkpoints, run records, the summaries, metrics and curves: all cached DVC outputs
    for expected in ("checkpoints/python-stdlib/none/nbow/ce/0/train.json", f"{TINY_DIR}/metrics.json"):
        assert expected in theirs
    assert any(name.startswith("checkpoints/") and "/best/" in name for name in theirs)
    assert sorted(theirs) == sorted(ours)
    assert [name for name in ours if ours[name] != theirs[name]] == []
    tables = database_tables(pulled / TINY_DIR / "results.db")
    assert tables == database_tables(pushed / TINY_DIR / "results.db")
    assert any(rows for rows in tables.values())


def test_neither_driver_reruns_anything_after_the_pull(pulled: Path) -> None:
    status = _ok([DVC, "status", "--json"], pulled)
    assert status.stdout.strip() == "{}"
    repro = _ok([DVC, "repro"], pulled)
    assert dvc_jobs(repro.stdout + repro.stderr) == {}
    # the study is params.yaml, as DVC ran it: no --configfile overlay
    run = _ok([str(BIN / "snakemake"), "--cores", "2"], pulled)
    assert snakemake_jobs(run.stdout + run.stderr) == {}
    assert "Nothing to be done" in run.stdout + run.stderr


def test_the_report_is_regenerated_from_the_pulled_results(pulled: Path) -> None:
    report = pulled / "report.html"
    _ok([str(BIN / "snakemake"), "--cores", "1", "--report", str(report)], pulled)
    assert report.stat().st_size > 0


def test_a_change_after_the_pull_reruns_what_it_invalidates_under_both_drivers(pulled: Path) -> None:
    """The touch recorded Snakemake's metadata: a params change is seen, as after a real run."""
    _set_params(pulled, NBOW_LR)
    try:
        plan = _ok([str(BIN / "snakemake"), "--cores", "2", "--dry-run"], pulled)
        assert snakemake_jobs(plan.stdout + plan.stderr) == AFTER_LR_CHANGE
        dry = _ok([DVC, "repro", "--dry"], pulled)
        assert dvc_jobs(dry.stdout + dry.stderr) == AFTER_LR_CHANGE_DVC_DRY
    finally:
        _ok(["git", "checkout", "--", "params.yaml"], pulled)


def test_pull_refuses_to_mark_outputs_of_another_config_up_to_date(pushed: Path, tmp_path: Path) -> None:
    project = clone(pushed, tmp_path / "project")
    _set_params(project, NBOW_LR)  # the checkout no longer describes the pushed study
    result = pull(project)
    assert result.returncode != 0
    assert "do not match dvc.lock" in result.stderr
    assert not (project / ".snakemake/metadata").exists()  # nothing touched
    plan = _ok([str(BIN / "snakemake"), "--cores", "2", "--dry-run"], project)
    assert snakemake_jobs(plan.stdout + plan.stderr)  # so snakemake still plans the runs
