"""`make pull` re-hashes what it pulled against dvc.lock (issue #22, item 2).

`dvc pull` does not re-hash what a remote serves (a remote's ``verify`` is false by default) and
`dvc status` afterwards trusts the hashes DVC recorded at checkout, so an object the remote serves
under its name with other bytes passes both. ``python -m csbench.dvc_verify`` (scripts/pull.sh runs
it after `dvc status`) re-hashes every file of every output in dvc.lock, through the directory
manifests, each checked against its own name.

The first tests use a small DVC project of their own (a file and a folder output); the last one the
tiny study pushed as tests/e2e/test_dvc_remote.py pushes it (conftest's tiny_pushed), with its index tampered
in the remote (and restored after).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_dvc_remote import clone, pull

import csbench

BIN = Path(sys.executable).parent
GIT_USER = ["-c", "user.email=ci@csbench", "-c", "user.name=ci"]
B_MD5 = hashlib.md5(b"beta\n").hexdigest()  # outdir/sub/b
STAGE = "mkdir -p outdir/sub && echo alpha > outdir/a && echo beta > outdir/sub/b && echo gamma > file.txt"


def _run(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DVC_NO_ANALYTICS": "1",
        "PYTHONPATH": str(Path(csbench.__file__).resolve().parents[1]),  # the csbench under test
    }
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, " ".join(cmd) + "\n" + done.stdout[-2000:] + done.stderr[-2000:]
    return done


def _object(remote: Path, md5: str) -> Path:
    return remote / "files" / "md5" / md5[:2] / md5[2:]


@pytest.fixture
def small(tmp_path: Path) -> dict:
    """A DVC project whose stage wrote a file and a folder, pushed to a local remote, and a clone."""
    origin, remote = tmp_path / "origin", tmp_path / "remote"
    origin.mkdir()
    _run(["git", "init", "-q"], origin)
    _run(["dvc", "init", "-q"], origin)
    _run(["dvc", "stage", "add", "-q", "-n", "make", "-o", "outdir", "-o", "file.txt", STAGE], origin)
    _run(["dvc", "repro", "-q"], origin)
    _run(["dvc", "remote", "add", "-q", "-d", "local", str(remote)], origin)
    _run(["dvc", "push", "-q"], origin)
    _run(["git", "add", "-A"], origin)
    _run(["git", *GIT_USER, "commit", "-qm", "outputs"], origin)
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", str(origin), str(clone)], tmp_path)
    return {"origin": origin, "remote": remote, "clone": clone}


def _verify(project: Path) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "csbench.dvc_verify"], project, check=False)


def _tamper(path: Path, data: bytes) -> bytes:
    before = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data)
    return before


def test_an_untampered_pull_passes(small):
    _run(["dvc", "pull", "-q"], small["clone"])
    done = _verify(small["clone"])
    assert done.returncode == 0, done.stderr
    assert "3 pulled files match the MD5s of dvc.lock" in done.stderr


def test_a_file_the_remote_serves_wrong_is_caught_after_dvc_said_all_is_well(small):
    clone, remote = small["clone"], small["remote"]
    b_md5 = B_MD5
    good = _tamper(_object(remote, b_md5), b"evil\n")
    _run(["dvc", "pull", "-q"], clone)  # DVC accepts it ...
    status = _run(["dvc", "status", "--quiet"], clone, check=False)
    assert status.returncode == 0 and (clone / "outdir/sub/b").read_text() == "evil\n"  # ... and so does status
    done = _verify(clone)
    assert done.returncode == 1
    assert (
        f"pull: outdir/sub/b: its MD5 is not {b_md5}: the remote served other bytes under that name (removed) "
        "(dvc.lock, stage make)" in done.stderr
    ), done.stderr
    assert "nothing is marked up to date" in done.stderr
    # the bad copy left the workspace and the local cache, so once the remote is fixed a pull restores it
    assert not _object(clone / ".dvc/cache", b_md5).exists() and not (clone / "outdir/sub/b").exists()
    _tamper(_object(remote, b_md5), good)
    _run(["dvc", "pull", "-q"], clone)
    assert _verify(clone).returncode == 0 and (clone / "outdir/sub/b").read_text() == "beta\n"


def test_a_tampered_directory_manifest_and_a_changed_workspace_file_are_caught(small):
    clone, remote = small["clone"], small["remote"]
    manifest = next(remote.rglob("*.dir"))
    entries = manifest.read_text().replace(B_MD5, "0" * 32)
    assert B_MD5 not in entries
    _tamper(manifest, entries.encode())  # a manifest listing other files than dvc.lock's
    _run(["dvc", "pull", "-q"], clone, check=False)  # DVC checks a manifest it reads: the pull fails
    done = _verify(clone)
    assert done.returncode == 1 and "pull: outdir: its directory manifest" in done.stderr, done.stderr

    other = small["origin"]  # an honest pull, then a file changed by hand, and one added
    _run(["dvc", "pull", "-q"], other)
    (other / "file.txt").write_text("changed\n")
    (other / "outdir/extra").write_text("x\n")
    done = _verify(other)
    assert "file.txt: its MD5 is not" in done.stderr and "changed in the workspace after the checkout" in done.stderr
    assert "outdir/extra: not in the output dvc.lock records" in done.stderr, done.stderr


@pytest.mark.e2e
def test_make_pull_refuses_a_tampered_index(tiny_pushed, tmp_path):
    """The tiny study pushed (conftest's tiny_pushed, tests/e2e/test_dvc_remote.py's round trip), one index
    file rewritten in the remote under its own name: `make pull` stops, names the file, and touches
    nothing for snakemake."""
    pushed = tiny_pushed
    remote = Path(_run(["dvc", "remote", "list"], pushed).stdout.split()[1])
    index = next(p for p in (pushed / "results/index").rglob("index.json"))
    md5 = hashlib.md5(index.read_bytes()).hexdigest()
    stored = _object(remote, md5)
    mode = stored.stat().st_mode
    good = _tamper(stored, index.read_bytes().replace(b'"format"', b'"format" ', 1))
    try:
        project = clone(pushed, tmp_path / "project")
        result = pull(project)
    finally:  # conftest's tiny_pushed is shared by the session: its remote as pushed
        stored.write_bytes(good)
        stored.chmod(mode)
    assert result.returncode != 0
    rel = index.relative_to(pushed).as_posix()
    assert f"pull: {rel}: its MD5 is not {md5}: the remote served other bytes" in result.stderr, result.stderr[-3000:]
    assert not (project / ".snakemake/metadata").exists()
    assert not (project / rel).exists()
