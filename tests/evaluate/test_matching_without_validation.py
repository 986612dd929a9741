"""Matching on a dataset without a validation split (issue 21, item 11), said by ``csbench validate``.

The ``matching`` protocol decides a bi-encoder's (or BM25's) match / no-match by a threshold chosen
on the dataset's validation split; a cross-encoder's head needs none. Without a validation split
the run used to leave matching empty and say so only after it ran ("no validation split"). Now the
config is refused up front, naming the dataset, the models and the config key, unless it states
``evaluation.matching_without_validation: skip``, and then ``csbench validate`` lists each case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from csbench.cli import main
from csbench.config import load_config

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PARAMS = PROJECT_ROOT / "params.yaml"
GECS = PROJECT_ROOT / "workflow/configs/gecs.yaml"


def study(datasets: list[str], protocols: list[str], entries: dict[str, Any] | None = None, **extra: Any) -> dict:
    return {
        "study": "matching",
        "grid": {"datasets": datasets, "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
        "datasets": entries or {name: {} for name in datasets},
        "evaluation": {"protocols": protocols, "run_depth": 100, **extra},
        "robustness": {"datasets": [], "attacks": [], "protocol": "gecs-100"},
        "stability": {"protocol": "gecs-100"},
    }


def validate(tmp_path: Path, data: dict, capsys) -> tuple[int, str, str, Path]:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code = main(["validate", "--config", str(PARAMS), "--config", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err, path


def line_of(path: Path, text: str) -> int:
    return 1 + next(i for i, line in enumerate(path.read_text().splitlines()) if text in line)


def test_validate_refuses_matching_on_a_release_without_validation(tmp_path, capsys) -> None:
    code, out, err, path = validate(tmp_path, study(["advtest", "statcodesearch"], ["gecs-100", "matching"]), capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"csbench validate: error: {path}:{line_of(path, '- matching')}: evaluation.protocols[1]: ")
    assert "statcodesearch (grid.datasets[1]: the release has no validation split, only test)" in err
    assert "the matching of bm25 there would stay empty" in err
    assert "evaluation.matching_without_validation: skip" in err
    assert "advtest" not in err.split("these datasets have none:")[1]  # advtest has its valid split
    assert len(err.splitlines()) == 1


def test_validate_states_the_decision_when_the_config_accepts_it(tmp_path, capsys) -> None:
    data = study(["advtest", "statcodesearch"], ["gecs-100", "matching"], matching_without_validation="skip")
    code, out, err, path = validate(tmp_path, data, capsys)
    assert code == 0, err
    where = f"{path}:{line_of(path, 'matching_without_validation:')}"
    assert (
        f"{where}: matching on statcodesearch not evaluated for bm25: the release has no validation split, only "
        "test, so no match threshold can be chosen (evaluation.matching_without_validation: skip)"
    ) in out.splitlines()
    assert "advtest" not in "".join(line for line in out.splitlines() if "not evaluated" in line)


def test_a_splits_option_or_an_extraction_without_valid_count_as_no_validation(tmp_path, capsys) -> None:
    entries = {"advtest": {"splits": ["train", "test"]}}
    code, _, err, _ = validate(tmp_path, study(["advtest"], ["matching", "gecs-100"], entries), capsys)
    assert code == 2 and "advtest (grid.datasets[0]: datasets.advtest.splits leaves it out)" in err
    local = study(["python-stdlib"], ["matching", "gecs-100"], {"python-stdlib": {}})
    local["extraction"] = {"split": {"train": 90, "valid": 0, "test": 10}}
    code, _, err, _ = validate(tmp_path, local, capsys)
    assert code == 2 and "python-stdlib (grid.datasets[0]: extraction.split.valid is 0)" in err


def test_datasets_with_validation_or_ranking_only_studies_are_not_affected(tmp_path, capsys) -> None:
    assert validate(tmp_path, study(["advtest", "cosqa-retrieval"], ["matching", "gecs-100"]), capsys)[0] == 0
    assert validate(tmp_path, study(["statcodesearch"], ["gecs-100"]), capsys)[0] == 0
    assert validate(tmp_path, study(["python-stdlib"], ["matching", "gecs-100"], {"python-stdlib": {}}), capsys)[0] == 0


def test_cross_encoders_need_no_validation_split(tmp_path, capsys) -> None:
    """gecs.yaml with thresholds chosen on validation splits: the zero-shot bi-encoder is listed on
    the six sets without validation, the cross-encoders (trained on advtest, evaluated on all eight
    sets, deciding with their head) never are. As shipped (GeCS's fixed cosine > 0.5 rule), no set
    needs a validation split."""
    assert main(["validate", "--config", str(PARAMS), "--config", str(GECS)]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if "not evaluated" in line]
    overlay = tmp_path / "validation.yaml"
    overlay.write_text(
        "evaluation: {match_threshold: validation, matching_without_validation: skip}\n", encoding="utf-8"
    )
    assert main(["validate", "--config", str(PARAMS), "--config", str(GECS), "--config", str(overlay)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "not evaluated" in line]
    assert [line.split("matching on ")[1].split(" ")[0] for line in notes] == [
        "gecs-csn-go",
        "gecs-csn-java",
        "gecs-csn-javascript",
        "gecs-csn-php",
        "gecs-csn-ruby",
        "statcodesearch",
    ]
    assert all("not evaluated for codet5p-110m-embedding:" in line for line in notes)
    config = load_config([PARAMS, GECS, overlay])
    assert config.matching_without_validation == "skip"
    assert {m for _, _, models in config.unmatched_runs() for m in models} == {"codet5p-110m-embedding"}


def test_a_cross_encoder_on_a_dataset_without_validation_is_not_listed(tmp_path, capsys) -> None:
    data = study(["advtest", "statcodesearch"], ["matching", "gecs-100"], matching_without_validation="skip")
    data["grid"]["trained"] = {
        "models": ["minilm-cross"],
        "datasets": ["statcodesearch"],
        "attacks": ["none"],
        "losses": ["ce"],
        "seeds": [0],
        "inference": ["confused"],
    }
    code, out, err, path = validate(tmp_path, data, capsys)
    assert code == 0, err
    config = load_config([PARAMS, path])
    assert any(run.model == "minilm-cross" and run.dataset == "statcodesearch" for run in config.runs())
    assert config.unmatched_runs() == [("statcodesearch", "the release has no validation split, only test", ["bm25"])]
    assert "minilm-cross" not in out
