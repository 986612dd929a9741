"""Re-hash what ``dvc pull`` brought against ``dvc.lock`` (``make pull``, scripts/pull.sh).

``dvc pull`` does not re-hash what it downloads unless the remote is configured with ``verify: true``
(DVC's default is false for most remote types), and ``dvc status`` afterwards compares the workspace
with ``dvc.lock`` through DVC's cache of file hashes, filled at checkout with the names of the objects
it linked. So an object that a remote serves under its name but with other bytes passes both, and
lands in the workspace (an index, a checkpoint, a results database). ``dvc.lock`` is in git: it is
what this checkout trusts. This module reads every output it records and computes the MD5 of each
workspace file, through the directory manifests (``<md5>.dir`` objects of the cache, each checked
against its own name first). A mismatch is reported per file, with what to do; a file the remote
served wrong is removed from the local cache (as DVC's own ``verify`` does) and from the workspace,
so the next ``dvc pull`` fetches it again instead of trusting the copy it already has.

    python -m csbench.dvc_verify            # in the project root, after `dvc pull`; exit 1 on a mismatch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Problem:
    path: str  # the workspace file (or output) that does not match
    stage: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.why} (dvc.lock, stage {self.stage})"


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def cache_dir(root: Path) -> Path:
    """The project's DVC cache (``dvc cache dir``: the default ``.dvc/cache`` or the configured one)."""
    done = subprocess.run(["dvc", "cache", "dir"], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.strip())
    return root / ".dvc" / "cache"


def _object(cache: Path, oid: str) -> Path:
    return cache / "files" / "md5" / oid[:2] / oid[2:]


def _outs(lock: dict) -> list[tuple[str, dict]]:
    """(stage, out entry) of every output ``dvc.lock`` records with a hash."""
    found = []
    for stage, entry in (lock.get("stages") or {}).items():
        for out in entry.get("outs") or []:
            if isinstance(out, dict) and out.get("path") and out.get("md5"):
                found.append((stage, out))
    return found


# Files DVC does not hash (.dvcignore): Snakemake's marker of a finished directory() output.
IGNORED = frozenset({".snakemake_timestamp"})


def _workspace_files(folder: Path) -> set[str]:
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.name not in IGNORED
    }


def _check_file(root: Path, cache: Path, stage: str, rel: str, expected: str, remove_bad: bool) -> Problem | None:
    path = root / rel
    if not path.is_file():
        return Problem(rel, stage, "missing after the pull")
    if md5_of(path) == expected:
        return None
    stored = _object(cache, expected)
    if stored.is_file() and md5_of(stored) != expected:
        if remove_bad:  # both: DVC would otherwise keep the object, and think the workspace copy current
            stored.unlink()
            path.unlink()
        return Problem(
            rel, stage, f"its MD5 is not {expected}: the remote served other bytes under that name (removed)"
        )
    return Problem(rel, stage, f"its MD5 is not {expected}: changed in the workspace after the checkout")


def verify_lock(root: Path, remove_bad: bool = True) -> tuple[int, list[Problem]]:
    """Check every workspace file of every output in ``root/dvc.lock``; return (files checked, problems)."""
    root = Path(root)
    lock_file = root / "dvc.lock"
    lock = yaml.safe_load(lock_file.read_text(encoding="utf-8")) or {}
    cache = cache_dir(root)
    checked, problems = 0, []
    for stage, out in _outs(lock):
        rel, oid = str(out["path"]), str(out["md5"])
        if out.get("hash") != "md5":  # DVC 2's md5 of text files with dos2unix line ends: not recomputed here
            problems.append(Problem(rel, stage, "recorded by DVC 2 (no `hash: md5`): run `dvc commit` with DVC 3"))
            continue
        if not oid.endswith(".dir"):
            checked += 1
            problem = _check_file(root, cache, stage, rel, oid, remove_bad)
            problems += [problem] if problem else []
            continue
        manifest_file = _object(cache, oid.removesuffix(".dir") + ".dir")
        if not manifest_file.is_file():
            problems.append(Problem(rel, stage, f"its directory manifest {manifest_file} is not in the cache"))
            continue
        if md5_of(manifest_file) != oid.removesuffix(".dir"):
            if remove_bad:
                manifest_file.unlink()
            problems.append(Problem(rel, stage, "its directory manifest from the remote does not match its name"))
            continue
        entries = {e["relpath"]: e["md5"] for e in json.loads(manifest_file.read_text(encoding="utf-8"))}
        folder = root / rel
        extra = sorted(_workspace_files(folder) - set(entries)) if folder.is_dir() else []
        problems += [Problem(f"{rel}/{name}", stage, "not in the output dvc.lock records") for name in extra]
        for name, expected in sorted(entries.items()):
            checked += 1
            problem = _check_file(root, cache, stage, f"{rel}/{name}", expected, remove_bad)
            problems += [problem] if problem else []
    return checked, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m csbench.dvc_verify", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the project root (default: here)")
    args = parser.parse_args(argv)
    checked, problems = verify_lock(args.root)
    for problem in problems:
        print(f"pull: {problem}", file=sys.stderr)
    if problems:
        print(
            f"pull: {len(problems)} of the pulled files do not match dvc.lock (above); nothing is marked up to "
            "date. A file the remote served wrong was removed (workspace and local cache): fix the remote (or "
            "pull from another with --remote) and run `make pull` again, or re-make the outputs with `dvc repro`",
            file=sys.stderr,
        )
        return 1
    print(f"pull: {checked} pulled files match the MD5s of dvc.lock", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
