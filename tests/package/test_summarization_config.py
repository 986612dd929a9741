"""The task axis of the config (issue #25): ``grid.summarization`` names summarizers (family seq2seq),
whose runs sit beside the search runs with their own loss coordinate (``xent``), and every misuse is
refused before any job runs, naming the file and key."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from csbench.config import SUMMARY_LOSS, ConfigError, RunKey, TrainKey, load_config
from csbench.models import MODELS, SUMMARIZATION_FAMILY

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
SUMMARY = {
    "models": ["transformer-sum"],
    "zero_shot": ["codet5-multi-sum"],
    "datasets": ["python-stdlib"],
    "attacks": ["no_comment", "ordered_id"],
    "seeds": [0, 1],
    "inference": ["confused", "not_confused"],
}


@pytest.fixture
def raw() -> dict[str, Any]:
    data = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    data["grid"]["summarization"] = copy.deepcopy(SUMMARY)
    return data


def _load(tmp_path: Path, data: dict[str, Any]):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_config(path), path


def _error_of(tmp_path: Path, raw: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(raw)
    change(data)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, data)
    message = str(info.value)
    assert re.match(rf"{re.escape(str(tmp_path / 'study.yaml'))}(:\d+)?: ", message), message
    return message


def test_summarizers_are_registered_with_their_family_and_defaults() -> None:
    summarizers = [name for name in MODELS.names() if MODELS.get(name).family == SUMMARIZATION_FAMILY]
    assert summarizers == ["transformer-sum", "codebert-sum", "codet5-sum", "codet5-multi-sum"]
    for name in summarizers:
        defaults = MODELS.get(name).defaults
        for key in ("architecture", "max_source_len", "max_target_len", "beam", "max_length", "max_code_chars"):
            assert key in defaults, (name, key)
    assert [n for n in summarizers if MODELS.get(n).zero_shot] == ["codet5-multi-sum"]


def test_summary_runs_follow_the_grid_and_sit_after_the_search_runs(tmp_path, raw) -> None:
    config, _ = _load(tmp_path, raw)
    search = config.search_runs()
    summary = config.summary_runs()
    assert config.runs() == search + summary
    assert config.summarization["extra_metrics"] == []  # BLEU only unless rouge_l / meteor are asked for
    assert all(not config.summarizes(run.model) for run in search)
    zero_shot = [RunKey("python-stdlib", a, "codet5-multi-sum") for a in ("no_comment", "ordered_id")]
    trained = [
        RunKey("python-stdlib", a, "transformer-sum", SUMMARY_LOSS, seed, inference)
        for a in ("no_comment", "ordered_id")
        for seed in (0, 1)
        for inference in ("confused", "not_confused")
    ]
    assert summary == zero_shot + trained
    assert summary[2].path == "python-stdlib/no_comment/transformer-sum/xent/0/confused"
    # a not-confused run reads the summarizer trained on no_comment; each training once
    trainings = [key for key in config.trainings() if key.model == "transformer-sum"]
    assert trainings == [
        TrainKey("python-stdlib", a, "transformer-sum", SUMMARY_LOSS, s)
        for a in ("no_comment", "ordered_id")
        for s in (0, 1)
    ]
    assert RunKey("python-stdlib", "ordered_id", "transformer-sum", SUMMARY_LOSS, 1, "not_confused").training == (
        TrainKey("python-stdlib", "no_comment", "transformer-sum", SUMMARY_LOSS, 1)
    )
    # query perturbations and seed stability are about rankings: no summarization run there
    assert all(not config.summarizes(run.model) for run in config.robustness_runs())
    assert all(not config.summarizes(group.model) for group, _ in config.stability_groups())


def test_a_summarizer_trains_under_its_own_regime_overridden_by_its_model_entry(tmp_path, raw) -> None:
    from csbench.summarization.models.defaults import SEQ2SEQ_TRAINING

    raw["models"]["transformer-sum"] = {"training": {"epochs": 1}}
    config, _ = _load(tmp_path, raw)
    regime = config.training_params("transformer-sum")
    assert regime["epochs"] == 1
    assert regime["optimizer"] == SEQ2SEQ_TRAINING["optimizer"]
    assert "schedule_params" not in regime or regime["schedule_params"] != raw["training"]["schedule_params"]
    assert config.training_params("nbow")["lr"] == raw["models"]["nbow"]["training"]["lr"]  # search unchanged


def test_a_config_may_define_a_hugging_face_summarizer_by_model_id(tmp_path, raw) -> None:
    raw["models"]["my-sum"] = {"family": "seq2seq", "model_id": "org/some-t5", "beam": 4}
    raw["grid"]["summarization"]["models"] = ["my-sum"]
    config, _ = _load(tmp_path, raw)
    assert config.summarizes("my-sum")
    params = config.model_params("my-sum")
    assert params["architecture"] == "hf-seq2seq" and params["beam"] == 4 and params["model_id"] == "org/some-t5"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda r: r["grid"]["models"].append("codet5-multi-sum"),
            "grid.models[2]: 'codet5-multi-sum' is a summarizer (family seq2seq)",
        ),
        (
            lambda r: r["grid"]["trained"]["models"].append("transformer-sum"),
            "grid.trained.models[1]: 'transformer-sum' is a summarizer",
        ),
        (
            lambda r: r["grid"]["summarization"]["models"].append("nbow"),
            "grid.summarization.models[1]: 'nbow' is a 'csn' retrieval model, not a summarizer",
        ),
        (
            lambda r: r["grid"]["summarization"]["zero_shot"].append("transformer-sum"),
            "grid.summarization.zero_shot[1]: 'transformer-sum' has no zero-shot run",
        ),
        (
            lambda r: r["grid"]["summarization"]["models"].append("transformer-sun"),
            "Did you mean 'transformer-sum'?",
        ),
        (
            lambda r: r["grid"]["summarization"].update(attacks=["ordered_id"]),
            "not_confused runs use the summarizer trained on 'no_comment'",
        ),
        (
            lambda r: r["grid"]["summarization"].update(inference=["zero_shot"]),
            "grid.summarization.inference",
        ),
        (
            lambda r: r["models"].update({"transformer-sum": {"beam": 0}}),
            "models.transformer-sum.beam",
        ),
        (
            lambda r: r["grid"]["summarization"].update(extra_metrics=["cider"]),
            "grid.summarization.extra_metrics",
        ),
    ],
)
def test_misuse_of_the_task_axis_is_refused_naming_the_key(tmp_path, raw, change, expected) -> None:
    assert expected in _error_of(tmp_path, raw, change)


def test_the_run_command_line_accepts_summary_runs_only_as_the_grid_has_them(tmp_path, raw) -> None:
    from csbench.phases.inputs import run_key

    config, _ = _load(tmp_path, raw)
    run = run_key(config, "python-stdlib", "ordered_id", "transformer-sum", SUMMARY_LOSS, 1, "not_confused")
    assert run.training == TrainKey("python-stdlib", "no_comment", "transformer-sum", SUMMARY_LOSS, 1)
    with pytest.raises(ValueError, match="summarizers: loss xent"):
        run_key(config, "python-stdlib", "ordered_id", "transformer-sum", "ce", 1, "confused")


def test_an_overlay_that_narrows_the_grid_skips_what_it_left_out_and_says_so(tmp_path, raw) -> None:
    raw["grid"]["attacks"] = ["none", "no_comment"]
    raw["grid"]["trained"]["attacks"] = ["no_comment"]
    config, _ = _load(tmp_path, raw)
    assert {run.attack for run in config.summary_runs()} == {"no_comment"}
    assert config.summarization_outside_grid() == ["grid.summarization.attacks: 'ordered_id' is not in grid.attacks"]
    raw["grid"]["summarization"]["models"], raw["grid"]["summarization"]["zero_shot"] = [], []
    config, _ = _load(tmp_path, raw)
    assert config.summary_runs() == [] and config.summarization_outside_grid() == []


def test_usable_records_counts_and_names_every_record_it_leaves_out() -> None:
    import pandas as pd

    from csbench.phases.summarize import usable_records

    frame = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e"],
            "query": ["adds two numbers", "  ", "reads a file", "", "sorts a list"],
            "code": ["def f(a, b): return a + b", "def g(): pass", "x" * 50, "def h(): pass", "   "],
        }
    )
    kept, skipped = usable_records(frame, max_code_chars=40)
    assert kept["id"].tolist() == ["a"]
    assert skipped == {"empty_reference": ["b", "d"], "empty_code": ["e"], "over_long_code": ["c"]}


def test_the_summarization_study_config_validates() -> None:
    config = load_config([PARAMS, PROJECT_ROOT / "workflow" / "configs" / "summarization.yaml"])
    assert config.summarization["models"] == ["transformer-sum", "codebert-sum", "codet5-sum"]
    assert len(config.summary_runs()) == 2 * 11 * (1 + 3 * 2)
