"""The project lock (csbench.lock; issue #22 item 1): one driver at a time in a checkout.

Each test works in its own folder with small helper processes standing in for drivers and jobs:
a holder of another session is refused with one line naming it (kind, pid, command, since when),
members of one session share the lock, a kill -9 leaves no stale lock, jobs that outlive their
driver keep it, a plain `dvc repro`'s stage commands hold it until dvc exits, and snakemake holds
DVC's own repository lock so that a plain `dvc repro` is refused by DVC before it touches a file.
The end-to-end case (both drivers started together in a copy of the project) is in
tests/e2e/test_input_verification.py.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from csbench import lock
from csbench.lock import LOCK_FILE, SESSION_ENV, Driver, ProjectLockError, acquire, snakemake_runs_jobs

# A stand-in driver: holds the lock as `kind` (its own session) and waits; "ready" on stdout once held.
HOLDER = """
import sys, time
from csbench.lock import Driver, acquire
import os
held = acquire(Driver.of_process(sys.argv[1], os.getpid()))
print(held.driver.session, flush=True)
time.sleep(600)
"""
# A stand-in job: joins the session of CSBENCH_SESSION (or its own) and waits.
JOB = """
import time
from csbench.lock import held
with held("csbench evaluate"):
    print("joined", flush=True)
    time.sleep(600)
"""


def _start(code: str, cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    assert line, process.stderr.read()
    return process, line


def _stop(*processes: subprocess.Popen) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _free(root: Path, timeout: float = 10.0) -> bool:
    """Whether a session of this process can take the lock within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            acquire(Driver.of_process("csbench", os.getpid()), root=root).release()
            return True
        except ProjectLockError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)


def test_another_session_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder, session = _start(HOLDER, tmp_path, "snakemake")
    try:
        with pytest.raises(ProjectLockError) as refused:
            acquire(Driver.of_process("csbench", os.getpid()), root=tmp_path, what="csbench attack")
        message = str(refused.value)
        assert "\n" not in message
        assert f"snakemake (pid {holder.pid}," in message and "since 20" in message
        assert "csbench attack was not started" in message
        assert session.startswith(f"snakemake:{os.uname().nodename}:{holder.pid}:")
    finally:
        _stop(holder)


def test_members_of_one_session_share_it_and_kill_9_frees_it(tmp_path: Path) -> None:
    holder, session = _start(HOLDER, tmp_path, "snakemake")
    jobs = []
    try:
        # snakemake's parallel jobs: all join while the driver holds the lock
        jobs = [_start(JOB, tmp_path, env={SESSION_ENV: session})[0] for _ in range(3)]
        assert all(job.poll() is None for job in jobs)
        # a job of no session (a user's own `csbench attack`) is refused meanwhile
        refused = subprocess.run([sys.executable, "-c", JOB], cwd=tmp_path, capture_output=True, text=True)
        assert refused.returncode != 0 and f"snakemake (pid {holder.pid}," in refused.stderr
        _stop(*jobs)
        holder.send_signal(signal.SIGKILL)  # no clean-up: the kernel drops its flock
        holder.wait(timeout=30)
        assert _free(tmp_path, timeout=5)
    finally:
        _stop(holder, *jobs)


def test_a_job_that_outlives_its_driver_keeps_the_project(tmp_path: Path) -> None:
    holder, session = _start(HOLDER, tmp_path, "snakemake")
    job = None
    try:
        job, _ = _start(JOB, tmp_path, env={SESSION_ENV: session})
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with pytest.raises(ProjectLockError) as refused:
            acquire(Driver.of_process("dvc", os.getpid()), root=tmp_path)
        assert "has exited, but processes it started still hold the project" in str(refused.value)
        assert f"pid {job.pid} (`" in str(refused.value)
        _stop(job)
        assert _free(tmp_path)
    finally:
        _stop(holder, *([job] if job else []))


def test_the_stage_commands_of_a_plain_dvc_repro_hold_it_until_dvc_exits(tmp_path: Path) -> None:
    """A stand-in `dvc` runs one stage command (DVC sets DVC_STAGE) that takes the lock and ends;
    the lock stays held, under dvc's name, until `dvc` itself exits."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dvc = bin_dir / "dvc"
    stage = "from csbench.lock import held\nwith held('csbench prepare'):\n    pass\n"
    dvc.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import os, subprocess, sys, time
            env = {{**os.environ, "DVC_STAGE": "prepare@python-stdlib"}}
            subprocess.run(["/bin/sh", "-c", {f"{sys.executable} -c {shlex.quote(stage)}"!r}], env=env, check=True)
            print("stage done", flush=True)
            time.sleep(float(sys.argv[2]))
            """
        )
    )
    dvc.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    process = subprocess.Popen([str(dvc), "repro", "3"], cwd=project, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "stage done"
        with pytest.raises(ProjectLockError) as refused:
            acquire(Driver.of_process("snakemake", os.getpid()), root=project)
        assert f"dvc (pid {process.pid}, `dvc repro 3`" in str(refused.value)
        assert process.wait(timeout=60) == 0
        assert _free(project)  # the keeper saw dvc exit
    finally:
        _stop(process)


def test_snakemake_holds_dvcs_lock_so_a_plain_dvc_repro_is_refused(tmp_path: Path) -> None:
    import zc.lockfile

    (tmp_path / ".dvc").mkdir()
    code = (
        "import os, time\nfrom csbench.lock import hold_for_snakemake\n"
        "hold = hold_for_snakemake(False, ['--cores', '1'])\n"
        "print(os.environ['CSBENCH_SESSION'], flush=True)\ntime.sleep(600)\n"
    )
    holder, session = _start(code, tmp_path)
    try:
        assert session.startswith("snakemake:")
        with pytest.raises(zc.lockfile.LockError):  # what DVC's repository lock meets: it refuses
            zc.lockfile.LockFile(str(tmp_path / ".dvc/tmp/lock"))
        # and the other way round: a dvc process holding its lock stops snakemake with its pid
        _stop(holder)
        dvc_lock = zc.lockfile.LockFile(str(tmp_path / ".dvc/tmp/lock"))
        try:
            with pytest.raises(ProjectLockError) as refused:
                lock.hold_dvc_repo_lock(tmp_path)
            message = str(refused.value)
            assert f"dvc (pid {os.getpid()}," in message and "snakemake was not started" in message
        finally:
            dvc_lock.close()
    finally:
        _stop(holder)


def test_command_line_run_and_hold(tmp_path: Path) -> None:
    """`python -m csbench.lock run` (make repro) runs its command as a session; `hold` (pull.sh)
    holds the lock for a shell and prints the session its commands export."""
    env = {**os.environ}
    env.pop(SESSION_ENV, None)
    inner = "import os; print(os.environ['CSBENCH_SESSION'])"
    done = subprocess.run(
        [sys.executable, "-m", "csbench.lock", "run", "--kind", "repro", "--", sys.executable, "-c", inner],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("repro:")
    assert _free(tmp_path)
    script = (
        f"session=$({sys.executable} -m csbench.lock hold --kind pull --pid $$) || exit 1\n"
        f"export CSBENCH_SESSION=$session\n"
        f"{sys.executable} -c \"from csbench.lock import held\nwith held('x'): print('member')\"\n"
        "echo held; sleep 600\n"
    )
    shell = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert shell.stdout.readline().strip() == "member"
        assert shell.stdout.readline().strip() == "held"
        with pytest.raises(ProjectLockError, match=r"pull \(pid \d+, `bash -c"):
            acquire(Driver.of_process("snakemake", os.getpid()), root=tmp_path)
        shell.kill()
        shell.wait(timeout=30)
        assert _free(tmp_path)
    finally:
        _stop(shell)
    assert (tmp_path / LOCK_FILE).exists()


@pytest.mark.parametrize(
    ("argv", "runs"),
    [
        (["--cores", "2", "--configfile", "x.yaml"], True),
        (["--cores", "1", "--touch", "--forceall"], True),
        (["-n", "--cores", "2"], False),
        (["-np", "--cores", "2"], False),
        (["--lint", "--cores", "1"], False),
        (["--unlock", "--cores", "1"], False),
        (["--report", "r.html"], False),
        (["--cores", "2", "--report", "r.html", "--report-after-run"], True),
    ],
)
def test_which_snakemake_calls_take_the_lock(argv: list[str], runs: bool) -> None:
    assert snakemake_runs_jobs(argv) is runs


def test_a_file_system_without_flock_runs_without_the_lock(tmp_path: Path, monkeypatch, caplog) -> None:
    """A Lustre mount without -o flock answers ENOLCK / ENOSYS: the phases run, with a warning."""
    import errno
    import fcntl

    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_flock)
    with caplog.at_level("WARNING", logger="csbench"):
        held = acquire(Driver.of_process("csbench", os.getpid()), root=tmp_path)
    assert held.fd is None and "the project lock is off" in caplog.text
    (tmp_path / ".dvc").mkdir()
    assert lock.hold_dvc_repo_lock(tmp_path) is None
