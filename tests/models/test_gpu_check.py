"""benchmarks/gpu_check.sh and gpu_check.py (issue #28, item 6) stop with a clear message where there is
no GPU; their measurements themselves need one (the script's CPU path: ``gpu_check.py --device cpu --quick``)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"


def _run(path: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": path, "OUT": str(tmp_path / "out")}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_without_nvidia_smi_the_check_stops_at_once(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("nvidia-smi is installed here")
    done = _run(os.environ["PATH"], tmp_path)
    assert done.returncode == 2
    assert "no NVIDIA GPU here (nvidia-smi is not installed)" in done.stderr
    assert done.stdout == ""


def test_an_nvidia_smi_that_lists_no_card_stops_it_too(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'No devices were found' >&2\nexit 6\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    done = _run(f"{fake.parent}{os.pathsep}{os.environ['PATH']}", tmp_path)
    assert done.returncode == 2
    assert "no NVIDIA GPU here (nvidia-smi lists none)" in done.stderr
    assert not (tmp_path / "out" / "memory.csv").exists()  # nothing started


def test_the_python_part_refuses_cuda_without_a_cuda_device() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "sees no CUDA device" in done.stderr
