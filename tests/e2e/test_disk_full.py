"""Issue #22 item 7: a full disk ends a csbench command with one line naming the file, the space it
needs and the space free, and leaves nothing half-written.

Two ways to fill a disk without filling the real one:

* a real one: `csbench prepare` in a 12 KiB tmpfs mounted in a private mount namespace
  (`unshare -m`, then `mount -t tmpfs`): the kernel's own ENOSPC on the real write path, and the
  mount vanishes with the process. It needs root (or CAP_SYS_ADMIN), as the tests run here and in
  CI; elsewhere that test is skipped with the reason.
* an injected one, everywhere: the write a helper makes raises ENOSPC after writing part of the
  file (what a full disk does), through the atomic-write helpers and through `csbench.cli.main`.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from projects import documented_functions, mini_config

from csbench.cli import main

ENOSPC_TEXT = os.strerror(errno.ENOSPC)  # "No space left on device"


def _corpus(root: Path, files: int = 30) -> Path:
    for i in range(files):
        path = root / f"mod_{i:02d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(documented_functions(f"f{i}", 3, doc_end=", and offset it."))
    return root


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith(".tmp"))


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


# ----------------------------------------------------------------------------- a real full disk


def _tmpfs_prefix(mount: Path) -> list[str]:
    """A shell that mounts a private tmpfs at ``mount`` (gone with the process); skip where that needs
    privileges this run lacks."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare (util-linux): cannot mount a private tmpfs")
    probe = subprocess.run(
        [unshare, "-m", "sh", "-c", f"mount -t tmpfs -o size=4k tmpfs {mount}"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace here (root needed): {probe.stderr.strip()}")
    return [unshare, "-m", "sh", "-c"]


def test_prepare_on_a_full_tmpfs_says_which_file_in_one_line_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    mount = tmp_path / "project"  # the tmpfs: csbench's working directory, where data/ goes
    mount.mkdir()
    after = tmp_path / "after"  # what the tmpfs held when csbench ended, copied out before it vanishes
    source = _corpus(tmp_path / "src")
    config = mini_config(tmp_path / "config.yaml", source, "full")
    script = (
        'mount -t tmpfs -o size=12k tmpfs "$1" && cd "$1" || exit 99; '
        '"$2" -m csbench --quiet prepare --config "$3" --dataset mini; rc=$?; '
        'cp -a . "$4"; exit $rc'
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run(
        [*_tmpfs_prefix(mount), script, "sh", str(mount), sys.executable, str(config), str(after)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode not in (0, 99), result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = _error_lines(result.stderr)
    assert len(errors) == 1, result.stderr[-3000:]
    line = errors[0]
    assert line.startswith(f"csbench prepare: error: {ENOSPC_TEXT} writing data/prepared/mini/"), line
    assert "free there; nothing of it was left behind" in line, line
    prepared = after / "data" / "prepared" / "mini"
    assert _leftovers(after) == []
    assert not (prepared / "card.json").exists()  # the phase did not finish: snakemake / dvc re-run it
    for file in prepared.glob("*.parquet"):  # what was written is whole
        pq.read_table(file)
    failed = Path(line.split(" writing ", 1)[1].split(":", 1)[0])
    assert not (after / failed).exists()


# ----------------------------------------------------------------------------- injected


def _fill_after(limit: int):
    """A ``Path.write_bytes`` whose disk fills after ``limit`` bytes: it writes them, then raises."""

    def write_bytes(self: Path, data: bytes) -> int:
        with open(self, "wb") as handle:
            handle.write(bytes(data)[:limit])
        if len(data) > limit:
            raise OSError(errno.ENOSPC, ENOSPC_TEXT)
        return len(data)

    return write_bytes


def test_atomic_write_of_a_known_size_names_the_file_and_its_size(tmp_path: Path, monkeypatch) -> None:
    from csbench.io import DiskFullError, human_size, write_json

    target = tmp_path / "out" / "card.json"
    write_json(target, {"old": True})
    data = {"pairs": list(range(200))}
    size = len((json.dumps(data, indent=2) + "\n").encode())
    monkeypatch.setattr(Path, "write_bytes", _fill_after(100))
    with pytest.raises(DiskFullError) as info:
        write_json(target, data)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{ENOSPC_TEXT} writing {target}: it needs {human_size(size)}, ")
    assert json.loads(target.read_text()) == {"old": True}  # the file it would replace is untouched
    assert _leftovers(tmp_path) == []


def test_atomic_parquet_write_says_how_much_was_written(tmp_path: Path, monkeypatch) -> None:
    """pyarrow's own ENOSPC (no file name, its own wording) becomes the one-line error of the file."""
    from csbench.io import DiskFullError, write_parquet

    def to_parquet(self: pd.DataFrame, path: Path, **kwargs: object) -> None:
        Path(path).write_bytes(b"PAR1" + b"\0" * 5000)
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", to_parquet)
    target = tmp_path / "test.parquet"
    with pytest.raises(DiskFullError, match=r"it needs more than the 4\.9 KiB written when the disk filled"):
        write_parquet(target, pd.DataFrame({"x": [1]}))
    assert not target.exists() and _leftovers(tmp_path) == []


def test_cli_prints_one_line_and_leaves_no_partial_output(tmp_path: Path, monkeypatch, capsys) -> None:
    """`csbench prepare` whose disk fills while it writes a split: exit 2, one line naming the file,
    no traceback; the splits written before are whole, the one being written is absent, no card."""
    source = _corpus(tmp_path / "src")
    config = mini_config(tmp_path / "config.yaml", source, "full")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    real = pq.ParquetWriter.write_table
    written: list[str] = []

    def write_table(self: pq.ParquetWriter, table: object, *args: object, **kwargs: object) -> None:
        # prepare streams each split into its file (csbench.datasets.local._SplitFiles), split by split
        if len(written) == 2:  # the third split: the disk fills half way
            Path(self.where).write_bytes(b"PAR1" + b"\0" * 2048)
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        written.append(str(self.where))
        real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    code = main(["--quiet", "prepare", "--config", str(config), "--dataset", "mini"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    (line,) = _error_lines(err)
    prepared = Path("data/prepared/mini")
    assert line.startswith(f"csbench prepare: error: {ENOSPC_TEXT} writing {prepared / 'test.parquet'}: "), line
    assert "it needs more than the 2.0 KiB written when the disk filled" in line
    assert sorted(p.name for p in prepared.iterdir()) == ["train.parquet", "valid.parquet"]
    for file in prepared.iterdir():
        pq.read_table(file)


def _prepare_args_with_failing_build(tmp_path: Path, monkeypatch, error: OSError) -> list[str]:
    """`csbench prepare`'s arguments for a one-file mini corpus (working folder ``tmp_path``) whose
    corpus build is patched to raise ``error``."""
    import csbench.datasets.local as local

    source = _corpus(tmp_path / "src", files=1)
    config = mini_config(tmp_path / "config.yaml", source, "full")
    monkeypatch.chdir(tmp_path)

    def build(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(local, "build_local_corpus", build)
    return ["--quiet", "prepare", "--config", str(config), "--dataset", "mini"]


def test_cli_names_the_folder_when_the_error_names_no_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """A writer outside the atomic helpers (pyarrow's own ParquetWriter, sqlite, torch) raises an
    ENOSPC without a file name: the line names the working folder, its free space and the detail."""
    detail = "Error writing bytes to file. Detail: [errno 28] No space left on device"
    code = main(_prepare_args_with_failing_build(tmp_path, monkeypatch, OSError(errno.ENOSPC, detail)))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = _error_lines(err)
    assert line.startswith(f"csbench prepare: error: {ENOSPC_TEXT} writing below {tmp_path}: ")
    assert "free there (Error writing bytes to file. Detail: [errno 28] No space left on device)" in line


def test_other_os_errors_are_not_taken_for_a_full_disk(tmp_path: Path, monkeypatch) -> None:
    args = _prepare_args_with_failing_build(tmp_path, monkeypatch, OSError(errno.EIO, "Input/output error"))
    with pytest.raises(OSError, match="Input/output error"):
        main(args)
