"""The tiny study through the SLURM profile on a real single-node SLURM (scripts/slurm-local.sh).

Deselected by default (14 minutes on the 2-core development machine, busy with other work: the
local reference run, the run through SLURM, and a run whose controller is killed); run it with

    python -m pytest -m slurm tests/e2e/test_slurm.py

It starts munged, MariaDB, slurmdbd, slurmctld and slurmd on 127.0.0.1 (as root; skipped when the
binaries are missing, when not root, or when the cluster cannot start), runs the tiny study locally
and through `--workflow-profile workflow/profiles/slurm` (the copy's profile given the local
partition and account), and checks that both write the same files, that sacct lists every job the
run submitted, that a training given two GPUs runs two processes through accelerate launch, and
that a run whose slurmctld is killed mid-run finishes, after the controller is started again, by
running the same command again. Every run is a copy of one snapshot of the
project, csbench included. The cluster is stopped at the end.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from test_drivers import (
    BIN,
    FULL_GRID,
    PROJECT_ROOT,
    RUN_TIMEOUT,
    TINY,
    TINY_DIR,
    _copy_project,
    _env,
    _set_overlay,
    snapshot,
    summary_rows,
)

pytestmark = pytest.mark.slurm

SCRIPT = PROJECT_ROOT / "scripts" / "slurm-local.sh"
PROFILE = "workflow/profiles/slurm"
PARTITION = "debug"  # what slurm-local.sh creates
ACCOUNT = "csbench"
NEEDED = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct", "squeue")
# The plugin checks a job's status 40 s after submission, then every 40 + 10·k s until one ends; on a
# real cluster that spares slurmdbd, here it made the tiny study take 405 s instead of 317 s. The
# test asks for 5 s.
FIRST_STATUS_CHECK = "5"


@dataclass
class Cluster:
    directory: Path
    env: dict[str, str]

    def run(self, *args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=timeout)

    def script(self, command: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return self.run("bash", str(SCRIPT), command, str(self.directory), timeout=timeout)

    def logs(self, lines: int = 25) -> str:
        """The end of every daemon's log, for a failure message."""
        parts = []
        for log in sorted((self.directory / "log").glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)


def _free_port_base(count: int = 4) -> int:
    """A port with the next `count - 1` ports free on 127.0.0.1 too (slurmctld, slurmd, slurmdbd, MariaDB)."""
    for base in range(16817, 40000, 10):
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports for the local SLURM cluster")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the project taken now. Every run here is a copy of it and imports csbench from
    its src/, so an edit of the checkout during the test cannot make the runs differ."""
    return _copy_project(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def run_env(source: Path) -> dict[str, str]:
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source / "src"), env.get("PYTHONPATH")]))
    return env


def _project(source: Path, destination: Path) -> Path:
    shutil.copytree(source, destination, symlinks=True, dirs_exist_ok=True)
    return destination


@pytest.fixture(scope="module")
def cluster(run_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    missing = [name for name in NEEDED if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"no SLURM here ({', '.join(missing)} missing): apt-get install slurm-wlm slurmdbd munge mariadb-server"
        )
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster runs its daemons as root")
    directory = tmp_path_factory.mktemp("slurm")
    env = dict(run_env)
    env.update(SLURM_LOCAL_PORT=str(_free_port_base()), SLURM_CONF=str(directory / "etc" / "slurm.conf"))
    env.pop("SLURM_JOB_ID", None)
    handle = Cluster(directory, env)
    started = handle.script("start")
    if started.returncode != 0:
        handle.script("stop")
        pytest.skip(f"the local SLURM cluster did not start:\n{started.stderr[-3000:]}")
    try:
        yield handle
    finally:
        stopped = handle.script("stop")
        shutil.rmtree(directory / "mysql" / "data", ignore_errors=True)  # 100+ MB; the logs stay
        assert stopped.returncode == 0, stopped.stderr
        assert not Path("/run/slurm/conf").is_symlink() or os.readlink("/run/slurm/conf") != str(directory / "etc")


def finished_jobs(output: str) -> collections.Counter[str]:
    """Jobs snakemake reports finished, by rule (the `all` target excluded); grouped jobs count one
    by one, under either executor."""
    rules = re.findall(r"^Finished jobid: \d+ \(Rule: (\w+)\)$", output, flags=re.MULTILINE)
    return collections.Counter(rule for rule in rules if rule != "all")


def _slurm_project(source: Path, path: Path) -> Path:
    """A copy of the project whose SLURM profile names the local cluster's partition and account
    (the two lines a user edits for a new cluster)."""
    project = _project(source, path)
    profile = project / PROFILE / "config.yaml"
    config = yaml.safe_load(profile.read_text())
    config["default-resources"].update(slurm_partition=PARTITION, slurm_account=ACCOUNT)
    profile.write_text(yaml.safe_dump(config, sort_keys=False))
    return project


def _slurm_command(*extra: str) -> list[str]:
    # scripts/snakemake.sh: a run killed outright leaves a lock; it removes it when nothing runs
    return [
        "bash", "scripts/snakemake.sh", "--workflow-profile", PROFILE, "--configfile", TINY,
        "--max-threads", str(os.cpu_count() or 1), "--slurm-init-seconds-before-status-checks", FIRST_STATUS_CHECK,
        *extra,
    ]  # fmt: skip


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def _explain(result: subprocess.CompletedProcess[str], cluster: Cluster) -> str:
    return f"{_output(result)[-4000:]}\n--- squeue\n{cluster.run('squeue').stdout}\n{cluster.logs()}"


@pytest.fixture(scope="module")
def local_run(source: Path, run_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    project = _project(source, tmp_path_factory.mktemp("local"))
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN / "snakemake"), "--cores", str(os.cpu_count() or 1), "--configfile", TINY],
        cwd=project, env=run_env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, _output(result)[-4000:]
    return {
        "files": snapshot(project),
        "jobs": finished_jobs(_output(result)),
        "seconds": time.monotonic() - started,
    }


@pytest.fixture(scope="module")
def slurm_run(source: Path, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    project = _slurm_project(source, tmp_path_factory.mktemp("slurm-run"))
    started = time.monotonic()
    result = subprocess.run(
        _slurm_command(), cwd=project, env=cluster.env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    seconds = time.monotonic() - started
    assert result.returncode == 0, _explain(result, cluster)
    output = _output(result)
    run_id = re.search(r"^SLURM run ID: (\S+)$", output, flags=re.MULTILINE)
    assert run_id, output[-3000:]
    return {
        "project": project,
        "output": output,
        "run_id": run_id.group(1),
        "submitted": re.findall(r"has been submitted with SLURM jobid (\d+)", output),
        "files": snapshot(project),
        "seconds": seconds,
    }


# (the cluster fixtures first: a machine without SLURM skips at once, before the local run)
def test_tiny_study_through_slurm_writes_the_files_of_the_local_run(slurm_run: dict, local_run: dict) -> None:
    ours, theirs = slurm_run["files"], local_run["files"]
    assert len(theirs) >= 15
    assert sorted(ours) == sorted(theirs)
    assert [name for name in ours if ours[name] != theirs[name]] == []
    assert finished_jobs(slurm_run["output"]) == local_run["jobs"] == FULL_GRID
    print(f"tiny study: local {local_run['seconds']:.0f} s, through SLURM {slurm_run['seconds']:.0f} s")


def test_jobs_went_through_slurm_grouped_and_sacct_lists_them(slurm_run: dict, cluster: Cluster) -> None:
    output = slurm_run["output"]
    submitted = slurm_run["submitted"]
    # download and aggregate are localrules; a run's index, evaluate and robustness jobs are one SLURM job
    assert "localrule download:" in output and "localrule aggregate:" in output
    assert "Group job run" in output and "Group job dataset" in output
    assert len(submitted) < sum(FULL_GRID.values()) - FULL_GRID["aggregate"]
    accounting = cluster.run(
        "sacct", "-X", "-n", "-P", "--starttime", "now-1days", "--name", slurm_run["run_id"],
        "-o", "JobIDRaw,State,Partition,Account,AllocTRES,Comment",
    )  # fmt: skip
    assert accounting.returncode == 0, accounting.stderr
    rows = [line.split("|") for line in accounting.stdout.splitlines() if line]
    assert sorted(row[0] for row in rows) == sorted(submitted), accounting.stdout
    assert {row[1] for row in rows} == {"COMPLETED"}, accounting.stdout
    assert {(row[2], row[3]) for row in rows} == {(PARTITION, ACCOUNT)}
    # the profile's GPU requests reached SLURM: every training, no bm25 run
    trainings = [row for row in rows if row[5].startswith("rule_train_")]
    assert len(trainings) == FULL_GRID["train"]
    assert all("gres/gpu=1" in row[4] for row in trainings), trainings
    assert all("gres/gpu" not in row[4] for row in rows if row[5].startswith("rule_attack_")), rows


def test_a_training_given_two_gpus_runs_two_processes_through_accelerate(slurm_run: dict, cluster: Cluster) -> None:
    """The train rule's multi-GPU branch through the profile: with `gpu: 2` for train (edited in the
    profile, as a user would), SLURM allocates both fake GPUs and the rule starts
    `accelerate launch --config_file workflow/accelerate/multi_gpu.yaml --num_processes 2`. No CUDA
    device is usable, so the two processes train on the CPU (gloo): the launcher, its config, the
    rendezvous and the data-parallel loop run; the GPUs themselves do not. It retrains one model in
    the SLURM run's project (a copy elsewhere would re-run the study: the jobs' params hold the
    absolute path of --configfile), after the tests above have compared its files."""
    project = slurm_run["project"]
    profile = project / PROFILE / "config.yaml"
    config = yaml.safe_load(profile.read_text())
    config["set-resources"]["train"]["gpu"] = 2
    profile.write_text(yaml.safe_dump(config, sort_keys=False))
    training = "python-stdlib/none/nbow/ce/0"
    result = subprocess.run(
        _slurm_command(f"checkpoints/{training}/train.json", "--forcerun", "train"),
        cwd=project, env=cluster.env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )  # fmt: skip
    assert result.returncode == 0, _explain(result, cluster)
    output = _output(result)
    assert finished_jobs(output) == {"train": 1}
    assert "accelerate.commands.launch --config_file workflow/accelerate/multi_gpu.yaml --num_processes 2" in output
    submitted = re.findall(r"has been submitted with SLURM jobid (\d+)", output)
    assert len(submitted) == 1, output[-3000:]
    accounting = cluster.run("sacct", "-X", "-n", "-P", "-j", submitted[0], "-o", "State,AllocTRES")
    assert accounting.stdout.startswith("COMPLETED|") and "gres/gpu=2" in accounting.stdout, accounting.stdout
    record = json.loads((project / "checkpoints" / training / "train.json").read_text())
    assert record["num_processes"] == 2 and record["device"].startswith("cpu")
    assert "processes: 2, device: cpu" in (project / "logs/train" / f"{training}.log").read_text()


def test_killed_controller_run_finishes_when_run_again(
    source: Path, cluster: Cluster, local_run: dict, tmp_path: Path
) -> None:
    """slurmctld is SIGKILLed while a job runs; it is started again (recovering its state) and the
    same command is run again, with nothing cleaned by hand. BM25 alone: the controller is the
    subject here, and the run is compared with the bm25 part of the local run."""
    project = _slurm_project(source, tmp_path / "project")
    _set_overlay(project, {"grid": {"trained": {"models": []}, "summarization": {"models": []}}})
    log = tmp_path / "first.log"
    started = time.monotonic()
    with log.open("w") as sink:
        first = subprocess.Popen(
            _slurm_command(), cwd=project, env=cluster.env, stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        # the dataset's preparation is done and a job of this run is running: then kill the controller
        marker = project / "data/prepared/python-stdlib/card.json"
        deadline = time.monotonic() + 600
        running = ""
        while time.monotonic() < deadline and first.poll() is None:
            if marker.exists():
                running = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i %k").stdout.strip()
                if running:
                    break
            time.sleep(0.5)
        assert running, f"no job of the run was running in time\n{log.read_text()[-3000:]}\n{cluster.logs()}"
        controller = int((cluster.directory / "run" / "slurmctld.pid").read_text())
        os.kill(controller, signal.SIGKILL)
        time.sleep(2)
        assert cluster.run("squeue", timeout=60).returncode != 0, "squeue still answers: the controller is not down"
        time.sleep(30)  # jobs end and snakemake submits and polls while the controller is down
        restarted = cluster.script("start")
        assert restarted.returncode == 0, restarted.stderr + cluster.logs()
        try:
            first_code = first.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:  # snakemake waiting for a job SLURM lost: stop it like a user would
            os.killpg(first.pid, signal.SIGTERM)
            first_code = first.wait(timeout=120)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    again = subprocess.run(
        _slurm_command(), cwd=project, env=cluster.env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    seconds = time.monotonic() - started
    assert again.returncode == 0, (
        f"first run exited {first_code}\n{log.read_text()[-3000:]}\n{_explain(again, cluster)}"
    )
    print(f"killed-controller run: first invocation exited {first_code}; both took {seconds:.0f} s; "
          f"running when killed: {running!r}")  # fmt: skip

    def bm25_part(files: dict[str, bytes]) -> dict[str, bytes]:
        return {k: v for k, v in files.items() if "/nbow/" not in k and not k.startswith(f"{TINY_DIR}/summary")}

    assert bm25_part(snapshot(project)) == bm25_part(local_run["files"])
    # the summary: the bm25 rows of the local run's
    local_rows = csv.DictReader(io.StringIO(local_run["files"][f"{TINY_DIR}/summary.csv"].decode()))
    assert summary_rows(project) == [row for row in local_rows if row["model"] == "bm25"]
