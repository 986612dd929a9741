"""How a training job starts csbench: one process, or one per GPU / CPU slot through ``accelerate launch``.

The ``train`` rule asks :func:`train_command` for the command that runs ``csbench`` for one training,
from the resources snakemake gave the job (``gpu``, or a SLURM ``gres`` string such as ``gpu:a100:2``,
and ``cpu_processes``) and its threads:

- at most one GPU and ``cpu_processes`` <= 1: the plain ``python -m csbench`` (one process, which uses
  the GPU when there is one);
- N > 1 GPUs: ``accelerate launch --config_file workflow/accelerate/multi_gpu.yaml --num_processes N``,
  one process per GPU (data parallel; see ``csbench.train.engine``);
- no GPU and ``cpu_processes`` N > 1: the same launcher with the GPUs hidden (``CUDA_VISIBLE_DEVICES=``).
  ``accelerate launch --cpu`` would start a single process (it spreads CPU processes only through
  ``mpirun``), whereas the multi-GPU launcher starts N processes with ``torch.distributed.run``; with no
  GPU visible, the loop gives ``Accelerator`` ``cpu=True`` and the processes talk over gloo.

Each process gets ``threads // N`` (at least 1) intra-op threads, so N processes together use the job's
threads; the rendezvous port is a free one (``--main_process_port 0``), so two trainings on one node do
not collide. This module imports nothing heavy: the Snakefile imports it.
"""

from __future__ import annotations

import shlex

ACCELERATE_CONFIG = "workflow/accelerate/multi_gpu.yaml"


def gpu_count(gpu: int | str | None = None, gres: str | None = None) -> int:
    """The GPUs a job was given: snakemake's ``gpu`` resource, else the GPUs of a SLURM ``gres`` string
    (``gpu`` = 1, ``gpu:2``, ``gpu:a100:2``, ``gpu:2,licence:1``); 0 when neither asks for a GPU."""
    if gpu not in (None, ""):
        count = int(gpu)
        if count < 0:
            raise ValueError(f"gpu must be >= 0, not {gpu!r}")
        return count
    total = 0
    for entry in str(gres or "").split(","):
        name, *rest = entry.strip().split(":")
        if name == "gpu":
            total += int(rest[-1]) if rest and rest[-1].isdigit() else 1
    return total


def training_processes(gpus: int, cpu_processes: int = 1) -> tuple[int, bool]:
    """(number of training processes, whether they run on the CPU) for a job with ``gpus`` GPUs that
    asks for ``cpu_processes`` CPU processes. CPU processes are for jobs without a GPU."""
    if gpus < 0 or cpu_processes < 1:
        raise ValueError(f"need gpus >= 0 and cpu_processes >= 1, not {gpus} and {cpu_processes}")
    if gpus > 0 and cpu_processes > 1:
        raise ValueError(
            f"cpu_processes={cpu_processes} with {gpus} GPU(s): a training runs one process per GPU, or "
            "several CPU processes when it has no GPU; set one of the two"
        )
    if gpus > 0:
        return gpus, False
    return cpu_processes, cpu_processes > 1


def train_command(
    python: str,
    gpus: int = 0,
    cpu_processes: int = 1,
    threads: int = 1,
    config_file: str = ACCELERATE_CONFIG,
) -> str:
    """The shell command (without the ``train`` sub-command and its arguments) that runs
    ``python -m csbench --quiet`` for one training: directly for one process, else through
    ``accelerate launch`` (see the module docstring). ``python`` is inserted as given (already quoted)."""
    processes, on_cpu = training_processes(gpus, cpu_processes)
    if processes == 1:
        return f"{python} -m csbench --quiet"
    launcher = [
        "-m", "accelerate.commands.launch",
        "--config_file", config_file,
        "--num_processes", str(processes),
        "--num_machines", "1",
        "--main_process_port", "0",
        "--num_cpu_threads_per_process", str(max(1, threads // processes)),
    ]  # fmt: skip
    command = f"{python} {shlex.join(launcher)} -m csbench --quiet"
    return f"CUDA_VISIBLE_DEVICES= {command}" if on_cpu else command
