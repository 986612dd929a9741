"""Trust nothing on disk blindly (issue #22 items 1 and 3), end to end.

- Both drivers started together in one checkout: the second is refused with one line naming the
  first (snakemake running: `make repro`, a plain `dvc repro`, `make pull` and a user's own
  `csbench` call are refused; `dvc repro` running: snakemake is refused), and what one study left on
  disk is never consumed by another: a phase refuses it naming the parameter that differs, and
  snakemake re-makes it before it plans.
- A truncated attacked parquet and a prepared parquet whose content changed behind its modification
  time are found by the phase that reads them (one line naming the file) and re-made by snakemake;
  DVC re-makes a truncated output itself (it hashes its outputs).

Two small studies over one local corpus name (`stdlib-json`) that differ only in `max_files`: study A
(40 files) and study B (20 files), as the tiny and the default study once shared `python-stdlib`.
The project copied is the one whose csbench package is imported (`PYTHONPATH=/work/base/src` runs
these tests against the code before the fix).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import pandas as pd
import pytest
import yaml
from projects import copy_paths, init_git_dvc
from test_drivers import BIN, PROJECT_FILES, _env

import csbench
from csbench.config import merge

pytestmark = pytest.mark.e2e

PACKAGE_PROJECT = Path(csbench.__file__).resolve().parents[2]
LOCKING = importlib.util.find_spec("csbench.lock") is not None  # False: the code before issue #22
STUDY_A = {
    "study": "verify-a",
    "grid": {
        "datasets": ["stdlib-json"],
        "attacks": ["none", "no_comment"],
        "models": ["bm25"],
        "trained": {"models": []},
        "summarization": {"models": []},
    },
    "datasets": {
        "stdlib-json": {
            "kind": "local-source",
            "language": "python",
            "source": "stdlib",
            "include_dirs": ["json", "email", "http", "urllib", "logging", "importlib", "collections"],
            "exclude_dirs": ["__pycache__"],
            "max_files": 40,
        }
    },
    "robustness": {
        "datasets": ["stdlib-json"],
        "attacks": ["no_comment"],
        "perturbations": ["case"],
        "ratios": [0.3],
        "fixed": [],
    },
    "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
}
STUDY_B = merge(STUDY_A, {"study": "verify-b", "datasets": {"stdlib-json": {"max_files": 20}}})
A_ARGS = ["--config", "params.yaml", "--config", "study-a.yaml"]
RUNS = "results/runs/stdlib-json"
TIMEOUT = 1200


def copy_project(dest: Path) -> Path:
    """The project of the csbench package under test, with the two studies' config files."""
    dest.mkdir(parents=True)
    copy_paths(PACKAGE_PROJECT, dest, PROJECT_FILES, skip_missing=True)
    for folder in ("checkpoints", "results/robustness"):
        (dest / folder).mkdir(parents=True, exist_ok=True)
    (dest / "study-a.yaml").write_text(yaml.safe_dump(STUDY_A))
    (dest / "study-b.yaml").write_text(yaml.safe_dump(STUDY_B))
    return dest


def run(project: Path, *cmd: str, timeout: int = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=project, env=_env(), capture_output=True, text=True, timeout=timeout)


def ok(project: Path, *cmd: str) -> str:
    done = run(project, *cmd)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def snakemake_a(project: Path) -> subprocess.CompletedProcess[str]:
    return run(project, str(BIN / "snakemake"), "--cores", "2", "--configfile", "study-a.yaml")


def csbench(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run(project, str(BIN / "csbench"), "--quiet", *args)


def run_records(project: Path) -> dict[str, bytes]:
    """Every run's metrics.json and ranks.tsv: what a study reports."""
    files = sorted([*project.glob(f"{RUNS}/**/metrics.json"), *project.glob(f"{RUNS}/**/ranks.tsv")])
    return {f.relative_to(project).as_posix(): f.read_bytes() for f in files}


def init_dvc(project: Path, study: dict) -> None:
    """A git + DVC project whose params.yaml is ``study`` merged over the default (DVC has no overlays)."""
    init_git_dvc(project, merge(yaml.safe_load((project / "params.yaml").read_text()), study), "study")


def wait_for(condition, what: str, process: subprocess.Popen | None = None, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process is None or process.poll() is None, f"ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def lock_kind(project: Path) -> str | None:
    try:
        return json.loads((project / ".csbench.lock").read_text()).get("kind")
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------------
# a phase refuses what was made under other parameters, or changed since


def test_a_phase_refuses_inputs_of_another_study_or_changed_since(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    b_args = ["--config", "params.yaml", "--config", "study-b.yaml"]
    for phase in ("download", "prepare"):
        assert csbench(project, phase, *b_args, "--dataset", "stdlib-json").returncode == 0
    # study A's attack on the corpus study B prepared: refused, nothing written
    refused = csbench(project, "attack", *A_ARGS, "--dataset", "stdlib-json", "--attack", "none")
    assert refused.returncode == 2, refused.stderr[-2000:]
    (line,) = [ln for ln in refused.stderr.splitlines() if ln.startswith("csbench attack: error:")]
    assert "data/prepared/stdlib-json: made by `csbench prepare` under other parameters" in line
    assert "datasets.stdlib-json.max_files: 20 there, 40 here" in line
    assert "csbench prepare --config params.yaml --config study-a.yaml --dataset stdlib-json" in line
    assert not (project / "data/attacked/stdlib-json/none").exists()
    refused = csbench(project, "perturb", *A_ARGS, "--dataset", "stdlib-json", "--perturbation", "case")
    assert refused.returncode == 2 and "max_files: 20 there, 40 here" in refused.stderr

    # study A's own data, then a truncated attacked file: its reader names it
    for phase in ("prepare", "audit"):
        assert csbench(project, phase, *A_ARGS, "--dataset", "stdlib-json").returncode == 0
    assert csbench(project, "attack", *A_ARGS, "--dataset", "stdlib-json", "--attack", "none").returncode == 0
    attacked = project / "data/attacked/stdlib-json/none/test.parquet"
    with open(attacked, "r+b") as handle:
        handle.truncate(attacked.stat().st_size // 2)
    run_args = ["--dataset", "stdlib-json", "--attack", "none", "--model", "bm25"]
    refused = csbench(project, "index", *A_ARGS, *run_args)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "data/attacked/stdlib-json/none/test.parquet: changed since `csbench attack` made it" in refused.stderr
    assert "csbench attack --config params.yaml --config study-a.yaml --dataset stdlib-json --attack none" in (
        refused.stderr
    )

    # a prepared file whose content changed, size and modification time kept: its reader names it
    prepared = project / "data/prepared/stdlib-json/test.parquet"
    before = prepared.stat()
    frame = pd.read_parquet(prepared)
    frame.loc[0, "query"] = frame.loc[0, "query"][::-1]  # same length: most likely the same size
    frame.to_parquet(prepared, index=False)
    os.utime(prepared, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert prepared.stat().st_mtime_ns == before.st_mtime_ns
    refused = csbench(project, "perturb", *A_ARGS, "--dataset", "stdlib-json", "--perturbation", "case")
    assert refused.returncode == 2
    assert "data/prepared/stdlib-json/test.parquet: changed since `csbench prepare` made it" in refused.stderr


# ------------------------------------------------------------------------------------------------
# snakemake re-makes a corrupt intermediate


@pytest.fixture(scope="module")
def study_a_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes]]:
    """Study A run once by snakemake for this module: (its project, a `cp -a` backup of the project as
    the run left it, its run records)."""
    project = copy_project(tmp_path_factory.mktemp("study-a") / "project")
    done = snakemake_a(project)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    backup = tmp_path_factory.mktemp("study-a-backup") / "project"
    shutil.copytree(project, backup, symlinks=True)
    return project, backup, run_records(project)


@pytest.fixture()
def study_a(study_a_run: tuple[Path, Path, dict[str, bytes]]) -> tuple[Path, dict[str, bytes]]:
    """The project where snakemake ran study A, restored as the run left it (times kept) at the very
    path where it ran (a copy elsewhere would re-run every job under the code before the fix, whose
    jobs' command lines held the overlay's absolute path), and its run records."""
    project, backup, records = study_a_run
    shutil.rmtree(project)
    shutil.copytree(backup, project, symlinks=True)
    return project, records


def test_snakemake_remakes_a_truncated_attacked_parquet(study_a: tuple[Path, dict[str, bytes]]) -> None:
    project, records = study_a
    attacked = project / "data/attacked/stdlib-json/no_comment/test.parquet"
    original = attacked.read_bytes()
    with open(attacked, "r+b") as handle:
        handle.truncate(len(original) // 2)
    done = snakemake_a(project)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert attacked.read_bytes() == original
    assert run_records(project) == records
    said = done.stdout + done.stderr
    assert "data/attacked/stdlib-json/no_comment/test.parquet: changed since `csbench attack` made it" in said
    again = snakemake_a(project)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_snakemake_remakes_a_prepared_parquet_changed_behind_its_mtime(study_a: tuple[Path, dict[str, bytes]]) -> None:
    project, records = study_a
    prepared = project / "data/prepared/stdlib-json/test.parquet"
    original, before = prepared.read_bytes(), prepared.stat()
    frame = pd.read_parquet(prepared)
    frame.loc[0, "query"] = frame.loc[0, "query"][::-1]
    frame.to_parquet(prepared, index=False)
    os.utime(prepared, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert prepared.read_bytes() != original and prepared.stat().st_mtime_ns == before.st_mtime_ns
    done = snakemake_a(project)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert prepared.read_bytes() == original, "the changed file was not re-made"
    assert run_records(project) == records
    assert "data/prepared/stdlib-json/test.parquet: changed since `csbench prepare` made it" in done.stderr


# ------------------------------------------------------------------------------------------------
# DVC hashes its outputs: it re-makes a truncated one itself


def test_dvc_remakes_a_truncated_attacked_parquet(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    init_dvc(project, STUDY_A)
    ok(project, str(BIN / "dvc"), "repro")
    records = run_records(project)
    attacked = project / "data/attacked/stdlib-json/no_comment/test.parquet"
    original = attacked.read_bytes()
    with open(attacked, "r+b") as handle:
        handle.truncate(len(original) // 2)
    status = run(project, str(BIN / "dvc"), "status")
    assert "data/attacked/stdlib-json/no_comment" in status.stdout and "modified" in status.stdout
    said = ok(project, str(BIN / "dvc"), "repro")
    # re-run, or restored from DVC's run cache (the same command on the same inputs ran before)
    stage = "attack@stdlib-json-no_comment"
    assert f"Running stage '{stage}'" in said or f"Stage '{stage}' is cached - skipping run, checking out" in said
    assert attacked.read_bytes() == original
    assert run_records(project) == records

    # DVC's blind spot: content changed in place, size, inode and modification time kept. DVC trusts
    # its recorded hash and finds nothing to do; the phase that reads the file refuses it, naming it.
    before = attacked.stat()
    with open(attacked, "r+b") as handle:
        handle.seek(len(original) // 2)
        handle.write(bytes(b ^ 0xFF for b in original[len(original) // 2 : len(original) // 2 + 16]))
    os.utime(attacked, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "up to date" in ok(project, str(BIN / "dvc"), "status")
    run_args = ["--dataset", "stdlib-json", "--attack", "no_comment", "--model", "bm25"]
    refused = csbench(project, "index", "--config", "params.yaml", *run_args)
    assert refused.returncode == 2
    assert f"{attacked.relative_to(project)}: changed since `csbench attack` made it (same size" in refused.stderr
    ok(project, str(BIN / "dvc"), "repro", "--force", stage)  # what the message says to do
    assert attacked.read_bytes() == original


# ------------------------------------------------------------------------------------------------
# both drivers started together


def _stopped(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGSTOP)


def _resumed(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGCONT)


def _started(project: Path, log: IO[str], *cmd: str) -> subprocess.Popen:
    """``cmd`` started in ``project`` in its own process group (so it can be paused and killed whole),
    its output going to ``log``."""
    return subprocess.Popen(cmd, cwd=project, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_both_drivers_started_together_the_second_is_refused(tmp_path: Path) -> None:
    """Snakemake (study A) holds the project: `dvc repro` (study B), `make repro`, `make pull` and a
    user's `csbench` call are refused; then dvc repro (study B) holds it: snakemake is refused; and
    study B's outputs are never consumed by study A: A's phases refuse them and snakemake re-makes
    them, to the very run records A made first. Each driver is paused (SIGSTOP) while the other is
    tried, so the overlap does not depend on the machine's speed."""
    project = copy_project(tmp_path / "project")
    init_dvc(project, STUDY_B)
    log = (tmp_path / "snakemake.log").open("w")
    sm = _started(project, log, str(BIN / "snakemake"), "--cores", "2", "--configfile", "study-a.yaml")
    try:
        manifest = project / "data/raw/stdlib-json/MANIFEST.json"
        wait_for(lambda: lock_kind(project) == "snakemake" or manifest.exists(), "snakemake to start", sm)
        _stopped(sm)
        refused = run(project, str(BIN / "dvc"), "repro", timeout=120)
        assert refused.returncode != 0, refused.stdout[-2000:]
        assert "Running stage" not in refused.stdout + refused.stderr
        assert "Unable to acquire lock" in refused.stderr  # DVC's own refusal: snakemake holds its lock
        pid_line = f"snakemake (pid {sm.pid}, `snakemake --cores 2 --configfile study-a.yaml`, since "
        for command, label in (
            ([str(BIN / "python"), "-m", "csbench.lock", "run", "--kind", "dvc", "--", "dvc", "repro"], "make repro"),
            (["bash", "scripts/pull.sh"], "make pull"),
            ([str(BIN / "csbench"), "prepare", "--config", "params.yaml", "--dataset", "stdlib-json"], "csbench"),
        ):
            refused = run(project, *command, timeout=120)
            assert refused.returncode != 0, f"{label} was not refused: {refused.stdout[-2000:]}"
            assert pid_line in refused.stderr, f"{label}: {refused.stderr[-2000:]}"
        _resumed(sm)
        assert sm.wait(timeout=TIMEOUT) == 0, (tmp_path / "snakemake.log").read_text()[-3000:]
    finally:
        if sm.poll() is None:
            os.killpg(sm.pid, signal.SIGKILL)
        log.close()
    first = run_records(project)
    assert first

    log = (tmp_path / "dvc.log").open("w")
    dvc = _started(project, log, str(BIN / "dvc"), "repro")
    try:
        said = tmp_path / "dvc.log"
        # dvc holds the project once its first stage command took the lock (the code before the fix has
        # none: then as soon as a stage runs)
        if LOCKING:
            wait_for(lambda: lock_kind(project) == "dvc", "dvc's first stage to take the lock", dvc)
        else:
            wait_for(lambda: "Running stage" in said.read_text(), "dvc to run a stage", dvc)
        _stopped(dvc)
        refused = snakemake_a(project)
        assert refused.returncode != 0, refused.stdout[-2000:]
        assert f"dvc (pid {dvc.pid}, `dvc repro`, since " in refused.stderr, refused.stderr[-2000:]
        _resumed(dvc)
        assert dvc.wait(timeout=TIMEOUT) == 0, said.read_text()[-3000:]
    finally:
        if dvc.poll() is None:
            os.killpg(dvc.pid, signal.SIGKILL)
        log.close()
    assert run_records(project) != first  # study B's runs, over its own corpus

    # study B's corpus is not consumed by study A: refused by A's phase, re-made by A's snakemake
    refused = csbench(project, "attack", *A_ARGS, "--dataset", "stdlib-json", "--attack", "none")
    assert refused.returncode == 2 and "datasets.stdlib-json.max_files: 20 there, 40 here" in refused.stderr
    done = snakemake_a(project)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "data/prepared/stdlib-json: made under other parameters than this config's" in done.stderr
    assert run_records(project) == first
