"""The embedding cache shared through a DVC remote (issue #28): a folder of immutable, content-named
shard files, so `dvc add` + `dvc push` on one machine and `dvc pull` on another give a cache whose every
vector reads back bitwise (each shard's checksums are checked on first use)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from projects import BIN, GIT_COMMIT, driver_env

from csbench.cache.embeddings import EmbeddingCache, Namespace

NS = Namespace("checkpoint:sha256sums:" + "0f" * 32, {"kind": "csn"}, "code")


def _ok(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, env=driver_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_a_cache_pushed_to_a_dvc_remote_and_pulled_elsewhere_serves_the_same_bits(tmp_path: Path) -> None:
    dvc = str(BIN / "dvc")
    origin, remote, other = tmp_path / "origin", tmp_path / "remote", tmp_path / "other"
    origin.mkdir()
    for cmd in (["git", "init", "-q"], [dvc, "init", "-q"], [dvc, "config", "core.analytics", "false"],
                [dvc, "remote", "add", "-d", "local", str(remote)]):  # fmt: skip
        _ok(cmd, origin)
    texts = [f"def f{i}(x):\n    return x + {i}" for i in range(300)]
    vectors = np.random.default_rng(0).standard_normal((300, 32)).astype(np.float32)
    EmbeddingCache(origin / "embeddings", shard_rows=128).store(NS, texts, vectors)
    _ok([dvc, "add", "-q", "embeddings"], origin)
    _ok([dvc, "push", "-q"], origin)
    _ok(["git", "add", "-A"], origin)
    _ok([*GIT_COMMIT, "the embedding cache, pushed"], origin)
    _ok(["git", "clone", "-q", str(origin), str(other)], tmp_path)
    assert not (other / "embeddings").exists()
    _ok([dvc, "pull", "-q"], other)
    cache = EmbeddingCache(other / "embeddings")
    found = cache.lookup(NS, texts[::-1])
    assert found.hit.all() and np.array_equal(found.vectors.view(np.uint32), vectors[::-1].view(np.uint32))
    assert cache.stats()["corrupt_removed"] == 0
