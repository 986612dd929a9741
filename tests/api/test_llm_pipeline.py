"""Issue #26: GeCS's zero-shot LLM matching through the pipeline's own phases, over a real chat server.

`transformers serve` (the conftest's ``chat_server``: a tiny causal LM whose greedy answer is "True",
"False" or an unparseable "maybe") answers behind the test server's counting layer. A study with one
chat model (``family: llm``) runs download → prepare → audit → attack → index → evaluate → aggregate on
the StatCodeSearch sample and GeCS's CodeSearchNet Ruby sample, written as GeCS releases its ``clf``
test files (every positive and a false pair: tests/reference/gecs_clf.py), so ``matching`` decides
released pairs with their negatives. Checked: every pair got an answer, recorded raw with its parse;
the unparseable ones are counted and scored as wrong; accuracy is recomputed from the answers; the
prompt is GeCS's and is stated in metrics.json and the report; evaluating again sends no request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from openai_test_server import OpenAITestServer
from test_drivers import _copy_project
from test_gecs_transfer import _place_samples

from csbench.api.prompts import load_prompt, parse_answer
from csbench.config import load_config

pytestmark = pytest.mark.e2e

DATASETS = ("statcodesearch", "gecs-csn-ruby")
MODEL = "tiny-chat"


def _overlay(base_url: str, model_name: str, cache: Path) -> dict:
    return {
        "study": "llm-matching",
        "grid": {
            "datasets": list(DATASETS),
            "attacks": ["none"],
            "models": [MODEL],
            "trained": {"models": []},
            "summarization": {"models": []},
        },
        "datasets": {
            "statcodesearch": {"format": "gecs", "file": "sample_gecs_format.jsonl"},
            "gecs-csn-ruby": {"file": "ruby_test_sample.jsonl"},
        },
        "robustness": {"datasets": [], "attacks": [], "protocol": "gecs-100"},
        "stability": {"protocol": "gecs-100"},
        "evaluation": {"protocols": ["matching", "gecs-100"], "match_pairs": "auto", "run_depth": 10},
        "api": {"cache_dir": str(cache)},
        "models": {
            MODEL: {
                "family": "llm",
                "model": model_name,
                "base_url": base_url,
                "api_key_env": None,
                "max_tokens": 10,
                "concurrency": 2,
                "timeout_s": 120.0,
            }
        },
    }


@pytest.fixture(scope="module")
def llm_study(chat_server, shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from csbench.cli import main

    base = tmp_path_factory.mktemp("llm-matching")
    project = _copy_project(base / "project")
    _place_samples(project, shared_data)
    with OpenAITestServer(None, model_name=chat_server.model_name, upstream=chat_server.base_url) as proxy:
        overlay = _overlay(proxy.base_url, chat_server.model_name, base / "cache")
        (project / "llm.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
        configs = ["--config", "params.yaml", "--config", "llm.yaml"]
        config = load_config([project / "params.yaml", project / "llm.yaml"])
        cwd = os.getcwd()
        os.chdir(project)

        def phase(name: str, *args: str) -> None:
            assert main(["--quiet", name, *configs, *args]) == 0, f"csbench {name} {' '.join(args)} failed"

        try:
            for dataset in config.datasets:
                for name in ("download", "prepare", "audit"):
                    phase(name, "--dataset", dataset)
                phase("attack", "--dataset", dataset, "--attack", "none")
            for run in config.runs():
                phase("index", "--dataset", run.dataset, "--attack", "none", "--model", MODEL)
                phase("evaluate", "--dataset", run.dataset, "--attack", "none", "--model", MODEL)
            first = proxy.stats()["requests"].get("/v1/chat/completions", 0)
            for run in config.runs():  # again: every answer is in the cache
                phase("evaluate", "--dataset", run.dataset, "--attack", "none", "--model", MODEL)
            second = proxy.stats()["requests"].get("/v1/chat/completions", 0)
            phase("aggregate")
        finally:
            os.chdir(cwd)
    return {"project": project, "config": config, "first": first, "second": second}


def _run_dir(study: dict, dataset: str) -> Path:
    return study["project"] / f"results/runs/{dataset}/none/{MODEL}/none/0/zero_shot"


def _scores(run_dir: Path, protocol: str) -> dict:
    record = json.loads((run_dir / "metrics.json").read_text())
    return {s["metric"]: s["value"] for s in record["scores"] if s["protocol"] == protocol}


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_pair_is_answered_parsed_and_scored(llm_study: dict, dataset: str) -> None:
    run_dir = _run_dir(llm_study, dataset)
    answers = [json.loads(line) for line in (run_dir / "llm_answers.jsonl").read_text().splitlines()]
    decided = (run_dir / "matching.tsv").read_text().splitlines()[1:]
    assert len(answers) == len(decided) >= 100  # 60 / 100 positives and one false pair each
    labels = {(q, c): int(label) for q, c, label, _, _ in (line.split("\t") for line in decided)}
    assert {(a["query_id"], a["code_id"]) for a in answers} == set(labels)
    assert [a["parsed"] for a in answers] == [parse_answer(a["answer"]) for a in answers]
    parsed = [a["parsed"] for a in answers]
    assert set(parsed) - {None}  # answers were parsed (the tiny model says True on every Ruby pair)
    scores = _scores(run_dir, "matching")
    n_bad = sum(p is None for p in parsed)
    assert scores["n_unparseable"] == n_bad and scores["n_pairs"] == len(answers)
    # GeCS's accuracy over every pair; an unparseable answer is a wrong decision
    truth = [bool(labels[(a["query_id"], a["code_id"])]) for a in answers]
    right = [p is not None and p == t for p, t in zip(parsed, truth, strict=True)]
    assert scores["accuracy"] == pytest.approx(float(np.mean(right)))
    if n_bad < len(answers):
        kept = [r for r, p in zip(right, parsed, strict=True) if p is not None]
        assert scores["accuracy_parsed"] == pytest.approx(float(np.mean(kept)))


def test_the_server_answered_true_false_and_unparseable(llm_study: dict) -> None:
    """StatCodeSearch's answers hold all three kinds (the tiny model's output layer makes them), so each
    path of the parse and of the scoring was taken through the real server."""
    rows = (_run_dir(llm_study, "statcodesearch") / "llm_answers.jsonl").read_text().splitlines()
    assert {json.loads(row)["parsed"] for row in rows} == {True, False, None}
    assert _scores(_run_dir(llm_study, "statcodesearch"), "matching")["n_unparseable"] > 0


def test_gecs_prompt_is_stated_and_ranking_is_not_asked(llm_study: dict) -> None:
    record = json.loads((_run_dir(llm_study, "statcodesearch") / "metrics.json").read_text())
    llm = record["protocols"]["matching"]["llm"]
    assert llm["prompt"] == "gecs-matching" and llm["prompt_template"] == load_prompt("gecs-matching")
    assert llm["max_tokens"] == 10 and llm["temperature"] is None
    note = record["protocols"]["gecs-100"]["note"]
    assert "only matching evaluates it" in note or "matching only" in note
    assert not _scores(_run_dir(llm_study, "statcodesearch"), "gecs-100").get("mrr")
    summary = (llm_study["project"] / "results/studies/llm-matching/summary.md").read_text()
    assert "chat model asked prompt `gecs-matching`" in summary
    assert "Given a code comment and a {language} programming language code snippet" in summary


def test_answers_are_cached_and_a_second_evaluation_sends_nothing(llm_study: dict) -> None:
    n_pairs = sum(_scores(_run_dir(llm_study, d), "matching")["n_pairs"] for d in DATASETS)
    assert 0 < llm_study["first"] <= n_pairs  # one request per distinct prompt
    assert llm_study["second"] == llm_study["first"]
    provenance = json.loads((_run_dir(llm_study, "gecs-csn-ruby") / "provenance.json").read_text())
    usage = provenance["efficiency"]["api_usage"]["test"]["queries"]
    assert usage.get("requests", 0) == 0 and usage["cache_hits"] > 0, usage
