"""Issue #22 item 11: scripts/snakemake.sh does not start a job beside an orphaned one.

`kill -9` of snakemake's own pid (not of its process group) leaves the job it started running. The
wrapper saw the stale lock, unlocked, and snakemake started the same job again beside the first:
two writers of one output. The wrapper now refuses to start while a csbench phase runs in the
project, naming its pid; a dry run still works, and once the job has ended the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_drivers import TINY, _copy_project, _env, _set_overlay, snakemake_jobs

pytestmark = pytest.mark.e2e


def _csbench_processes(project: Path, phase: str) -> list[int]:
    """Python processes running `csbench ... <phase>` with the project as working directory (not the
    `bash -c` that started them)."""
    here = str(project.resolve())
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.readlink(proc / "cwd") != here:
                continue
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in args if a]
        if words and "python" in Path(words[0]).name and "csbench" in words and phase in words:
            found.append(int(proc.name))
    return found


def _wrapper(project: Path, *args: str, report: bool = True) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "scripts/snakemake.sh", "--cores", "1", "--configfile", TINY, *args],
        cwd=project,
        env={**_env(), "CSBENCH_REPORT": "1" if report else "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen, timeout: float) -> str:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"the wrapper ran on beside the orphaned job (killed after {timeout} s):\n{output[-3000:]}")
    return output


def _gone(pid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_wrapper_refuses_to_start_beside_an_orphaned_job(tmp_path: Path) -> None:
    project = _copy_project(tmp_path / "project")
    bm25_only = {"grid": {"trained": {"models": []}, "summarization": {"models": []}}, "robustness": {"datasets": []}}
    _set_overlay(project, bm25_only)
    first = _wrapper(project)
    deadline = time.monotonic() + 300
    jobs: list[int] = []
    while not jobs and first.poll() is None and time.monotonic() < deadline:
        jobs = _csbench_processes(project, "prepare")
        time.sleep(0.02)
    assert jobs, f"no prepare job seen (wrapper exit {first.poll()})"
    orphan = jobs[0]
    os.kill(orphan, signal.SIGSTOP)  # still running, but it cannot finish before we look
    try:
        os.kill(first.pid, signal.SIGKILL)  # snakemake only (the wrapper exec'd it): its job lives on
        first.wait(timeout=60)
        first.stdout.close()  # (the job holds the other end: it inherited snakemake's output)
        assert Path(f"/proc/{orphan}").exists()

        second = _wrapper(project)
        said = _finish(second, timeout=300)
        assert second.returncode == 1, said[-3000:]
        refusal = [line for line in said.splitlines() if line.startswith("csbench: a job of an earlier run")]
        assert len(refusal) == 1, said[-3000:]
        assert f"pid {orphan} (csbench --quiet prepare " in refusal[0] and f"kill {orphan}" in refusal[0]
        assert _csbench_processes(project, "prepare") == [orphan]  # nothing started beside it

        dry = _wrapper(project, "-n")  # plans without running: not refused
        said = _finish(dry, timeout=300)
        assert dry.returncode == 0, said[-3000:]
    finally:
        # the orphan's parent (init, once snakemake was killed) may reap it at once after SIGKILL:
        # a signal sent after that finds no process (seen in CI under load), which is what we want
        for sig in (signal.SIGKILL, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, sig)
        _gone(orphan)

    # the orphan has ended: the run goes on, and re-makes the killed job's output
    # (no report: the study's figures are not made by a run that stops after prepare)
    third = _wrapper(project, "--until", "prepare", report=False)
    said = _finish(third, timeout=600)
    assert third.returncode == 0, said[-3000:]
    assert snakemake_jobs(said)["prepare"] == 1
    assert (project / "data/prepared/python-stdlib/card.json").is_file()
