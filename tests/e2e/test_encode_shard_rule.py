"""Encoding a run's pools as several snakemake jobs (issue #28: ``encoding.shards``, for a cluster's
SLURM profile): each ``encode_shard`` job writes its part to the embedding cache, ``index`` waits for
them and encodes nothing, and the study's files are byte for byte those of one index job."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from projects import driver_env
from test_drivers import BIN, RUN_TIMEOUT, TINY, copy_run, snakemake_jobs, snapshot


def test_index_waits_for_its_encode_shard_jobs_and_the_study_is_unchanged(snakemake_tiny: dict, tmp_path: Path) -> None:
    project = copy_run(snakemake_tiny, tmp_path / "project")
    (project / "shards.yaml").write_text(yaml.safe_dump({"encoding": {"shards": 2}}))
    env = driver_env() | {"CSBENCH_EMBEDDING_CACHE": str(tmp_path / "fresh-cache")}  # the shards encode
    command = [str(BIN / "snakemake"), "--cores", "2", "--configfile", TINY, "shards.yaml"]
    result = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = snakemake_jobs(result.stdout + result.stderr)
    dense = sorted(f.parent for f in project.glob("results/index/**/index.json")
                   if json.loads(f.read_text())["model"]["family"] == "csn")  # fmt: skip
    assert dense and jobs["encode_shard"] == 2 * len(dense) and jobs["index"] == len(dense)
    encoded = 0
    for folder in dense:
        run = folder.relative_to(project / "results" / "index").as_posix()
        records = [json.loads((project / "results" / "encoded" / run / f"{k}-of-2.json").read_text()) for k in (0, 1)]
        state = json.loads((folder / "index.json").read_text())
        assert all(pool["retriever"]["n_forward"] == 0 for pool in state["pools"].values())  # read from the cache
        assert all(r["planned"] > 0 and r["identity"] == state["pools"]["test"]["retriever"]["embedding_cache"]
                   for r in records)  # fmt: skip
        encoded += sum(r["encoded"] for r in records)
    assert encoded > 0  # (runs of one checkpoint on one attack share their codes: the later finds them cached)
    assert snapshot(project) == snakemake_tiny["files"]
