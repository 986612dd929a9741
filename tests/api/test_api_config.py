"""Endpoint models in the config (issue #26): the ``api`` and ``llm`` families, ``api.missing_key``,
the checks that refuse misuse before any job runs, and what the dry run and ``csbench api-estimate``
say before anything is sent."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from csbench import paths
from csbench.config import ConfigError, keyless_warnings, load_config
from csbench.models import API_FAMILIES, MODELS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
GECS = PROJECT_ROOT / "workflow" / "configs" / "gecs.yaml"
KEY = "CSBENCH_TEST_CONFIG_KEY"


@pytest.fixture
def raw() -> dict[str, Any]:
    data = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    data["grid"]["models"] = ["bm25", "my-emb"]
    data["models"] = {
        **(data.get("models") or {}),
        "my-emb": {"family": "api", "model": "emb-1", "base_url": "http://127.0.0.1:9/v1", "api_key_env": KEY},
    }
    return data


def _load(tmp_path: Path, data: dict[str, Any]):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_config([path])


def test_registered_endpoint_models_are_zero_shot_and_untrainable() -> None:
    for name, family in (("ada-2", "api"), ("gpt-3.5-turbo", "llm")):
        spec = MODELS.get(name)
        assert spec.family == family and family in API_FAMILIES
        assert spec.zero_shot and not spec.trainable
    assert MODELS.get("ada-2").defaults["model"] == "text-embedding-ada-002"
    assert MODELS.get("ada-2").defaults["similarity"] == "cosine"  # GeCS: cosine of Ada 2's embeddings
    gpt = MODELS.get("gpt-3.5-turbo").defaults
    assert gpt["max_tokens"] == 10 and gpt["temperature"] is None  # GeCS A.3: defaults, 10 output tokens


def test_a_missing_key_is_refused_at_the_models_line(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    with pytest.raises(ConfigError, match=rf"study.yaml:\d+.*'my-emb'.*\${KEY}.*not set.*missing_key: skip"):
        _load(tmp_path, raw)
    monkeypatch.setenv(KEY, "sk-anything")
    assert _load(tmp_path, raw).models == ["bm25", "my-emb"]


def test_missing_key_skip_leaves_the_model_out_with_a_warning(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    raw["api"] = {"missing_key": "skip"}
    config = _load(tmp_path, raw)
    assert config.models == ["bm25"] and "my-emb" not in {run.model for run in config.runs()}
    assert config.keyless == (("my-emb", KEY),)
    (warning,) = keyless_warnings(config)
    assert "'my-emb' left out" in warning and f"${KEY}" in warning
    # the merged params.yaml dvc repro reads has no run of it either
    assert "my-emb" not in config.raw["grid"]["models"]


def test_a_model_without_a_key_needs_no_variable(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    raw["models"]["my-emb"]["api_key_env"] = None  # a local server without keys
    assert _load(tmp_path, raw).models == ["bm25", "my-emb"]


def test_an_endpoint_model_defined_in_the_config_needs_its_model_name(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.setenv(KEY, "sk-anything")
    del raw["models"]["my-emb"]["model"]
    with pytest.raises(ConfigError, match=r"models.my-emb: an endpoint model defined in the config needs `model`"):
        _load(tmp_path, raw)


def test_endpoint_parameters_are_typed(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.setenv(KEY, "sk-anything")
    for key, value, message in (
        ("base_url", "127.0.0.1:8000", "does not match"),
        ("concurrency", 0, "less than the minimum"),
        ("tokenizer", "gpt2", "does not match"),
        ("batch_sise", 16, "Did you mean 'batch_size'"),
    ):
        bad = copy.deepcopy(raw)
        bad["models"]["my-emb"][key] = value
        with pytest.raises(ConfigError, match=message):
            _load(tmp_path, bad)


def test_a_chat_model_needs_matching_and_no_robustness(tmp_path: Path, raw: dict, monkeypatch) -> None:
    monkeypatch.setenv(KEY, "sk-anything")
    raw["models"]["my-chat"] = {"family": "llm", "model": "chat-1", "base_url": "http://127.0.0.1:9/v1",
                                "api_key_env": KEY}  # fmt: skip
    raw["grid"]["models"] = ["bm25", "my-chat"]
    raw["evaluation"]["protocols"] = ["full-corpus"]
    with pytest.raises(ConfigError, match="evaluated under matching only: add matching"):
        _load(tmp_path, raw)
    raw["evaluation"]["protocols"] = ["full-corpus", "matching"]
    with pytest.raises(ConfigError, match=r"chat models .*my-chat.* have no ranking"):
        _load(tmp_path, raw)  # params.yaml's robustness datasets are in the grid
    raw["robustness"]["datasets"] = []
    config = _load(tmp_path, raw)
    assert "my-chat" in config.models
    # a chat model decides with its own answers: no validation split is needed for its matching
    assert all("my-chat" not in models for _, _, models in config.unmatched_runs())


def test_gecs_runs_ada2_and_gpt35_only_with_the_key(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    without = load_config([PARAMS, GECS])
    assert "ada-2" not in without.models and "gpt-3.5-turbo" not in without.models
    assert {name for name, _ in without.keyless} == {"ada-2", "gpt-3.5-turbo"}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    with_key = load_config([PARAMS, GECS])
    runs = {(run.dataset, run.model) for run in with_key.runs()}
    assert {(d, m) for d in with_key.datasets for m in ("ada-2", "gpt-3.5-turbo")} <= runs
    assert len(with_key.runs()) == len(without.runs()) + 2 * len(with_key.datasets)


def test_dry_run_lines_name_the_endpoints_and_never_the_key(monkeypatch) -> None:
    from csbench.api.study import endpoint_lines

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value-123")
    lines = endpoint_lines(load_config([PARAMS, GECS]), "csbench api-estimate --config x")
    text = "\n".join(lines)
    assert "POST https://api.openai.com/v1/embeddings (model text-embedding-ada-002, key $OPENAI_API_KEY set)" in text
    assert "POST https://api.openai.com/v1/chat/completions (model gpt-3.5-turbo" in text
    assert lines[-1].endswith("csbench api-estimate --config x")
    assert "sk-secret-value-123" not in text
    monkeypatch.delenv("OPENAI_API_KEY")
    assert "(left out: no key)" in "\n".join(endpoint_lines(load_config([PARAMS, GECS])))


def test_api_estimate_counts_the_texts_a_run_would_send(tmp_path: Path, raw: dict, monkeypatch) -> None:
    """From attacked splits on disk: every distinct code of the pools and every distinct query, with
    the cache's answers subtracted; a dataset not attacked yet is named, not guessed."""
    from csbench.api.cache import ResponseCache
    from csbench.api.client import _embedding_payload, embedding_key
    from csbench.api.study import study_estimates
    from csbench.models.api import endpoint_settings

    monkeypatch.setenv(KEY, "sk-anything")
    monkeypatch.chdir(tmp_path)
    raw["grid"]["attacks"] = ["none"]
    raw["grid"]["trained"] = {"models": []}
    raw["grid"]["summarization"] = {"models": []}
    raw["evaluation"]["protocols"] = ["full-corpus"]
    raw["robustness"]["datasets"] = []
    raw["api"] = {"cache_dir": str(tmp_path / "cache")}
    config = _load(tmp_path, raw)
    (dataset,) = config.datasets
    folder = paths.attacked_dir(dataset, "none")
    folder.mkdir(parents=True)
    codes = [f"def f{i}(x):\n    return x + {i}\n" for i in range(10)]
    frame = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(10)],
            "code": codes,
            "query": [f"add {i % 5}" for i in range(10)],
            "language": ["python"] * 10,
            "func_name": [f"f{i}" for i in range(10)],
        }
    )
    frame.to_parquet(folder / "test.parquet")
    (estimate,) = study_estimates(config)
    assert estimate.not_ready == []
    got = estimate.estimate
    assert (got.texts, got.unique, got.cached) == (20, 15, 0)  # 10 codes, 10 queries of which 5 distinct
    settings = endpoint_settings(config.model_params("my-emb"))
    cache = ResponseCache(tmp_path / "cache")
    for code in codes[:4]:  # four answers already paid for
        cache.put(embedding_key(settings, code), _embedding_payload(np.ones(3, dtype=np.float32), 5))
    (estimate,) = study_estimates(config)
    assert (estimate.estimate.cached, estimate.estimate.requests) == (4, 1)
    (folder / "test.parquet").unlink()
    (estimate,) = study_estimates(config)
    assert estimate.not_ready == [f"{dataset}/none"] and estimate.estimate is None


def test_api_estimate_command_sends_nothing_and_names_the_datasets_not_ready(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """`csbench api-estimate --config params.yaml --config workflow/configs/gecs.yaml` (docs/api-models.md)
    in a checkout with nothing attacked: both models, their endpoints and the datasets to attack first;
    no key is needed and none is printed."""
    from csbench.cli import main

    monkeypatch.chdir(tmp_path)  # no data/attacked here
    monkeypatch.setenv("OPENAI_API_KEY", "sk-printed-never-42")
    monkeypatch.setenv("CSBENCH_API_CACHE", str(tmp_path / "cache"))
    assert main(["--quiet", "api-estimate", "--config", str(PARAMS), "--config", str(GECS)]) == 0
    out = capsys.readouterr().out
    assert "endpoint model ada-2: POST https://api.openai.com/v1/embeddings" in out
    assert "gpt-3.5-turbo: nothing to count" in out and "advtest/none, gecs-csn-go/none" in out
    assert "sk-printed-never-42" not in out


def test_api_estimate_without_the_tokenizer_counts_characters_and_says_so(
    tmp_path: Path, raw: dict, monkeypatch
) -> None:
    """ada-2's tokenizer is tiktoken's cl100k_base, whose file is downloaded on first use: offline the
    estimate still runs, by ~chars/4, with a note naming why (the run itself would stop on it)."""
    from csbench.api.study import study_estimates

    monkeypatch.setenv(KEY, "sk-anything")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "no-tiktoken-files"))
    monkeypatch.chdir(tmp_path)
    raw["grid"].update(attacks=["none"], trained={"models": []}, summarization={"models": []})
    raw["evaluation"]["protocols"] = ["full-corpus"]
    raw["robustness"]["datasets"] = []
    raw["api"] = {"cache_dir": None}
    raw["models"]["my-emb"].update(tokenizer="tiktoken:cl100k_base", max_input_tokens=8191)
    config = _load(tmp_path, raw)
    folder = paths.attacked_dir(config.datasets[0], "none")
    folder.mkdir(parents=True)
    frame = pd.DataFrame({"id": ["a", "b"], "code": ["x" * 40, "y" * 80], "query": ["q one", "q two"],
                          "language": ["python"] * 2, "func_name": ["a", "b"]})  # fmt: skip
    frame.to_parquet(folder / "test.parquet")
    (estimate,) = study_estimates(config)
    assert not estimate.estimate.tokens_exact and estimate.estimate.tokens == 10 + 20 + 2 + 2
    assert any("tokenizer is not available" in note and "TIKTOKEN_CACHE_DIR" in note for note in estimate.notes)
