"""Issue #22 item 8: a job killed outright leaves no temporary file behind for good.

Every atomic write (csbench.io.atomic_path, the artefact folders of csbench.models.integrity, the
split files of prepare, the archives download unpacks) builds its output in a temporary beside the
final place. A `kill -9` leaves that temporary; it used to stay forever (`.results.db.*.tmp`). Now
each temporary is named for its writer (`.<name>.<pid>@<host>.<random>.tmp`), and the next writer in
that folder removes the ones whose writer is gone, never a live process's nor another host's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from csbench import io
from csbench.io import write_json

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# A writer that stops in the middle of its write: it prints its temporary's path, then sleeps until
# it is killed. ``kind`` file: csbench.io.atomic_path; folder: models.integrity.new_dir_beside.
WRITER = """
import sys, time
from pathlib import Path
kind, target = sys.argv[1], Path(sys.argv[2])
if kind == "file":
    from csbench.io import atomic_path
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"half of a results.db")
        print(tmp, flush=True)
        time.sleep(600)
else:
    from csbench.models.integrity import new_dir_beside
    tmp = new_dir_beside(target)
    (tmp / "vectors.npy").write_bytes(b"half of an index")
    print(tmp, flush=True)
    time.sleep(600)
"""


def _start_writer(kind: str, target: Path) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "CSBENCH_PURE_PYTHON": os.environ.get("CSBENCH_PURE_PYTHON", "1")}
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, kind, str(target)], stdout=subprocess.PIPE, text=True, env=env
    )
    line = process.stdout.readline().strip()
    assert line, f"the writer said nothing (exit {process.poll()})"
    temporary = Path(line)
    assert temporary.exists() and temporary.parent == target.parent
    return process, temporary


def _kill(process: subprocess.Popen) -> None:
    process.kill()  # SIGKILL: no finally, no atexit, no clean-up of its own
    process.wait(timeout=30)


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_killed_writers_temporary_is_removed_by_the_next_write_not_a_live_ones(kind: str, tmp_path: Path) -> None:
    out = tmp_path / "results" / "studies" / "tiny"
    out.mkdir(parents=True)
    killed, stale = _start_writer(kind, out / ("results.db" if kind == "file" else "index"))
    alive, running = _start_writer(kind, out / ("summary.csv" if kind == "file" else "other-index"))
    try:
        _kill(killed)
        assert stale.exists()  # what a kill -9 leaves

        # the next job writing in that folder (here, this process)
        if kind == "file":
            write_json(out / "metrics.json", {"mrr": 0.5})
            assert json.loads((out / "metrics.json").read_text()) == {"mrr": 0.5}
        else:
            from csbench.models.integrity import new_dir_beside

            shutil.rmtree(new_dir_beside(out / "index"))
        assert not stale.exists(), f"the temporary of killed pid {killed.pid} is still there: {stale.name}"
        assert running.exists(), f"the temporary of live pid {alive.pid} was removed: {running.name}"
        leftovers = sorted(p.name for p in out.iterdir() if p.name.startswith("."))
        assert leftovers == [running.name]
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_temporaries_are_named_for_their_writer(tmp_path: Path) -> None:
    from csbench.models.integrity import new_dir_beside

    with io.atomic_path(tmp_path / "summary.csv") as tmp:
        match = io.TEMPORARY_NAME.match(tmp.name)
        assert match and match["final"] == "summary.csv", tmp.name
        assert (int(match["pid"]), match["host"]) == (os.getpid(), io.HOST)
    folder = new_dir_beside(tmp_path / "best")
    match = io.TEMPORARY_NAME.match(folder.name)
    assert match and match["final"] == "best" and int(match["pid"]) == os.getpid(), folder.name
    # a long name still fits in one directory entry
    with io.atomic_path(tmp_path / ("x" * 250)) as tmp:
        assert len(tmp.name) <= 255 and io.TEMPORARY_NAME.match(tmp.name)


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_what_cannot_be_judged_dead_stays(tmp_path: Path) -> None:
    """Another host's temporary (its pid means nothing here: a project folder shared by a cluster's
    nodes), a temporary of another naming (a training's resumable `.state.tmp`, or one written
    before writers were named), and ordinary hidden files are left alone; a dead writer's of this
    host is removed."""
    dead = _dead_pid()
    names = {
        "other_host": f".results.db.{dead}@{io.HOST}x.k2j3h4l5.tmp",
        "resumable_state": ".state.tmp",
        "unnamed_writer": ".results.db.k2j3h4l5.tmp",
        "snakemake_marker": ".snakemake_timestamp",
    }
    for name in names.values():
        (tmp_path / name).write_text("")
    (tmp_path / f".index.{dead}@{io.HOST}.abcdefgh.tmp").mkdir()
    (tmp_path / f".index.{dead}@{io.HOST}.abcdefgh.tmp" / "vectors.npy").write_text("")
    (tmp_path / f".summary.md.{dead}@{io.HOST}.zyxwvuts.tmp").write_text("")

    removed = io.remove_stale_temporaries(tmp_path)
    assert sorted(p.name for p in removed) == sorted(
        [f".index.{dead}@{io.HOST}.abcdefgh.tmp", f".summary.md.{dead}@{io.HOST}.zyxwvuts.tmp"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names.values())


# `csbench` itself, held at the moment it would rename its temporary onto train.parquet (it prints the
# temporary's path, then waits to be killed): a kill at a known point of the write, not a race.
HELD_PHASE = """
import os, sys, time
rename = os.replace
def held(src, dst, *args, **kwargs):
    if os.path.basename(str(dst)) == "train.parquet":
        print(src, flush=True)
        time.sleep(600)
    return rename(src, dst, *args, **kwargs)
os.replace = held
from csbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _csbench(args: list[str], cwd: Path, held: bool = False) -> subprocess.Popen:
    env = {**os.environ, "CSBENCH_PURE_PYTHON": "1", "HF_HUB_OFFLINE": "1"}
    start = ["-c", HELD_PHASE] if held else ["-m", "csbench"]
    return subprocess.Popen(
        [sys.executable, *start, "--quiet", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


@pytest.mark.e2e
def test_prepare_killed_mid_write_leaves_nothing_after_the_next_run(tmp_path: Path) -> None:
    """A real phase: `csbench prepare` killed with SIGKILL while its split file is a temporary, then
    run again: its output is whole and the killed run's temporary is gone."""
    for name in ("params.yaml", "workflow/configs/tiny.yaml"):
        shutil.copy2(PROJECT_ROOT / name, tmp_path / Path(name).name)
    config = ["--config", "params.yaml", "--config", "tiny.yaml", "--dataset", "python-stdlib"]
    download = _csbench(["download", *config], tmp_path)
    assert download.wait(timeout=600) == 0, download.stdout.read()

    prepare = _csbench(["prepare", *config], tmp_path, held=True)
    line = prepare.stdout.readline().strip()
    temporary = Path(line) if os.path.isabs(line) else tmp_path / line
    assert temporary.name.startswith(".train.parquet") or temporary.name.startswith(".train."), line
    os.kill(prepare.pid, signal.SIGKILL)
    prepare.wait(timeout=60)
    assert temporary.is_file()  # what the kill left

    again = _csbench(["prepare", *config], tmp_path)
    assert again.wait(timeout=600) == 0, again.stdout.read()
    prepared = tmp_path / "data" / "prepared" / "python-stdlib"
    assert (prepared / "train.parquet").is_file()
    assert not temporary.exists(), f"the killed prepare's temporary is still there: {temporary.name}"
    assert sorted(p.name for p in prepared.iterdir() if p.name.endswith(".tmp")) == []
