"""How the `train` rule starts a training (issue #9): one process, one per GPU, or N CPU processes.

csbench.launch turns a job's resources into the command; the rule passes snakemake's resources to it.
Without a GPU here, the multi-GPU command is checked as far as accelerate takes it before starting
processes (its parser, the config file, the torchrun arguments and environment it prepares), and the
same launcher is run for real through snakemake with two CPU processes on the tiny study.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from test_drivers import BIN, RUN_TIMEOUT, TINY, _copy_project, _env

from csbench.launch import ACCELERATE_CONFIG, gpu_count, train_command, training_processes

# jobs run csbench with snakemake's own interpreter (its script's shebang: python or python3)
SNAKEMAKE_PYTHON = (BIN / "snakemake").read_text().splitlines()[0].removeprefix("#!").strip()

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PYTHON = "/venv/bin/python"
TRAINING = "python-stdlib/none/nbow/ce/0"  # the tiny study's nbow on the unattacked split
CHECKPOINT = f"checkpoints/{TRAINING}/train.json"
METRICS = f"results/runs/{TRAINING}/confused/metrics.json"


@pytest.mark.parametrize(
    ("gpu", "gres", "expected"),
    [
        (None, None, 0),
        (2, None, 2),
        ("4", None, 4),
        (0, "gpu:2", 0),  # an explicit gpu wins
        (None, "gpu", 1),
        (None, "gpu:3", 3),
        (None, "gpu:a100:2", 2),
        (None, "gpu:tesla_v100:1", 1),
        (None, "licence:2", 0),  # another generic resource
        (None, "gpu:v100:2,licence:1", 2),
    ],
)
def test_gpu_count_from_the_gpu_resource_or_a_gres_string(gpu, gres, expected: int) -> None:
    assert gpu_count(gpu, gres) == expected


def test_process_count_and_device() -> None:
    assert training_processes(0) == (1, False)
    assert training_processes(1) == (1, False)
    assert training_processes(4) == (4, False)
    assert training_processes(0, 3) == (3, True)
    assert training_processes(1, 1) == (1, False)
    with pytest.raises(ValueError, match="one process per GPU, or several CPU processes"):
        training_processes(2, 2)
    with pytest.raises(ValueError, match="cpu_processes >= 1"):
        training_processes(0, 0)


@pytest.mark.parametrize(("gpus", "cpu_processes"), [(0, 1), (1, 1)])
def test_one_process_is_the_plain_csbench_call(gpus: int, cpu_processes: int) -> None:
    assert train_command(PYTHON, gpus, cpu_processes, threads=8) == f"{PYTHON} -m csbench --quiet"


def test_several_gpus_start_one_process_each_through_the_accelerate_config() -> None:
    words = shlex.split(train_command(PYTHON, gpus=4, threads=16))
    assert words[:3] == [PYTHON, "-m", "accelerate.commands.launch"]
    assert words[-3:] == ["-m", "csbench", "--quiet"]
    options = dict(zip(words[3:-3:2], words[4:-3:2], strict=True))
    assert options == {
        "--config_file": ACCELERATE_CONFIG,
        "--num_processes": "4",
        "--num_machines": "1",
        "--main_process_port": "0",  # a free port: two trainings on one node do not collide
        "--num_cpu_threads_per_process": "4",  # the job's 16 threads shared by 4 processes
    }
    assert "CUDA_VISIBLE_DEVICES" not in train_command(PYTHON, gpus=4, threads=16)


def test_cpu_processes_use_the_same_launcher_with_the_gpus_hidden() -> None:
    command = train_command("python", cpu_processes=3, threads=2)
    assert command.startswith("CUDA_VISIBLE_DEVICES= python -m accelerate.commands.launch ")
    words = shlex.split(command.removeprefix("CUDA_VISIBLE_DEVICES= "))
    assert words[words.index("--num_processes") + 1] == "3"
    assert words[words.index("--num_cpu_threads_per_process") + 1] == "1"  # at least one thread each


def test_accelerate_reads_the_multi_gpu_command_as_n_processes_of_csbench() -> None:
    """What accelerate launch does with the command before it starts processes: parse it, read the
    config file, and prepare torch.distributed.run's arguments and environment (accelerate 1.x API)."""
    import torch.distributed.run as distrib_run
    from accelerate.commands.launch import _filter_args, _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    words = [*shlex.split(train_command(PYTHON, gpus=2, threads=8)), "train", "--seed", "0"]
    args = launch_command_parser().parse_args(words[3:])
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(PROJECT_ROOT)  # the rule runs in the project directory; the config path is relative to it
        args, defaults, _ = _validate_launch_command(args)
    assert defaults is not None and defaults.distributed_type == "MULTI_GPU" and not defaults.use_cpu
    assert args.multi_gpu and not args.cpu  # so launch_command picks multi_gpu_launcher
    env = prepare_multi_gpu_env(args)
    assert env["OMP_NUM_THREADS"] == "4"
    assert env["ACCELERATE_MIXED_PRECISION"] == "no"  # the loop's own setting overrides it
    run = _filter_args(
        args,
        distrib_run.get_args_parser(),
        ["--training_script", args.training_script, "--training_script_args", args.training_script_args],
    )
    assert (run.nproc_per_node, run.nnodes, run.module) == ("2", "1:1", True)  # torchrun strings
    assert int(run.master_port) > 0 and run.rdzv_backend == "static"
    assert run.training_script == "csbench" and run.training_script_args == ["--quiet", "train", "--seed", "0"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_project(tmp_path_factory.mktemp("train-rule"))


def _snakemake(project: Path, target: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(BIN / "snakemake"), target, "--cores", "2", "--configfile", TINY, *args]
    return subprocess.run(command, cwd=project, env=_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _train_command(output: str) -> str:
    lines = [line for line in output.splitlines() if " train --config " in line]
    assert len(lines) == 1, output[-3000:]
    return lines[0]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ((), f"{SNAKEMAKE_PYTHON} -m csbench --quiet train "),
        (("train:gpu=2",), "--num_processes 2 --num_machines 1 --main_process_port 0 "),
        (("train:gres='gpu:a100:3'",), "--num_processes 3 "),
        (("train:cpu_processes=2",), "CUDA_VISIBLE_DEVICES= "),
    ],
)
def test_the_rule_builds_the_command_from_the_jobs_resources(project: Path, resources, expected: str) -> None:
    args = ("--set-resources", *resources) if resources else ()
    result = _snakemake(project, CHECKPOINT, "-n", "-p", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    command = _train_command(result.stdout)
    assert expected in command
    assert ("accelerate.commands.launch" in command) == bool(resources)


def test_the_rule_refuses_gpus_and_cpu_processes_together(project: Path) -> None:
    result = _snakemake(project, CHECKPOINT, "-n", "--set-resources", "train:gpu=2", "train:cpu_processes=2")
    assert result.returncode != 0
    assert "one process per GPU, or several CPU processes" in result.stdout + result.stderr


@pytest.mark.e2e
def test_two_cpu_processes_through_the_rule_train_a_usable_checkpoint(project: Path) -> None:
    """The tiny study's nbow trained by the rule with `cpu_processes=2` (accelerate launch, gloo on
    the CPU), then indexed and evaluated from its checkpoint; the process count is not a parameter
    of the result, so running again with one process re-runs nothing."""
    result = _snakemake(project, METRICS, "--set-resources", "train:cpu_processes=2")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    assert "accelerate.commands.launch" in _train_command(result.stdout + result.stderr)
    record = json.loads((project / CHECKPOINT).read_text())
    assert record["num_processes"] == 2 and record["device"].startswith("cpu")
    assert record["best_step"] is not None and record["best_mrr"] > 0
    log = (project / f"logs/train/{TRAINING}.log").read_text()
    assert "processes: 2, device: cpu" in log
    scores = json.loads((project / METRICS).read_text())["scores"]
    full = {s["metric"]: s["value"] for s in scores if s["protocol"] == "full-corpus"}
    # every test query against every test code: a random ranking's MRR is H(n) / n (about 0.06 here)
    chance = sum(1 / rank for rank in range(1, full["n_queries"] + 1)) / full["n_queries"]
    assert full["n_queries"] > 50 and full["mrr"] > 2 * chance

    again = _snakemake(project, METRICS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Nothing to be done" in again.stdout + again.stderr
