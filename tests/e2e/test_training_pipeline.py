"""Trained models in the pipeline (issue #6): the grid, inference types, train -> index -> evaluate."""

from __future__ import annotations

import ast
import inspect
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import PROJECT_ROOT

from csbench.cli import main
from csbench.config import ConfigError, RunKey, TrainKey, load_config

PARAMS = PROJECT_ROOT / "params.yaml"
TRAINED = {"models": ["nbow"], "losses": ["ce"], "seeds": [0, 1], "inference": ["confused", "not_confused"]}


def _config(tmp_path: Path, change) -> Path:
    raw = yaml.safe_load(PARAMS.read_text())
    raw["grid"]["datasets"] = ["python-stdlib"]
    raw["grid"]["attacks"] = ["none", "no_comment", "ordered_id"]
    raw["grid"]["models"] = ["bm25"]
    raw["grid"]["summarization"]["models"] = []  # search runs only (summarizers: test_summarization_config)
    raw["robustness"]["datasets"] = ["python-stdlib"]
    change(raw)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    _stamp_attacked(tmp_path, path)
    return path


def _stamp_attacked(root: Path, config: Path) -> None:
    """Stamp the attacked folders written by hand (`_write_attacked`) as `csbench attack` would: phases
    read only stamped inputs (issue #22 item 3; nothing to do for the code before it)."""
    try:
        from csbench.lineage import stamp_placed
    except ImportError:
        return
    from csbench.config import load_config

    for folder in sorted((root / "data" / "attacked" / "python-stdlib").glob("*")):
        stamp_placed(load_config([config]), "python-stdlib", folder.name, root=root)


def test_trained_runs_and_the_trainings_they_need(tmp_path: Path) -> None:
    config = load_config([_config(tmp_path, lambda r: r["grid"].update(trained=TRAINED))])
    runs = config.runs()
    assert len(runs) == 3 * 1 + 3 * 1 * 1 * 2 * 2  # bm25 zero-shot + nbow x seeds x inference
    assert RunKey("python-stdlib", "none", "bm25") in runs
    confused = RunKey("python-stdlib", "ordered_id", "nbow", "ce", 1, "confused")
    not_confused = RunKey("python-stdlib", "ordered_id", "nbow", "ce", 1, "not_confused")
    assert confused.training == TrainKey("python-stdlib", "ordered_id", "nbow", "ce", 1)
    assert not_confused.training == TrainKey("python-stdlib", "no_comment", "nbow", "ce", 1)
    assert RunKey("python-stdlib", "none", "bm25").training is None
    # one model per (attack, seed): the not-confused runs share the no_comment one
    assert sorted(k.path for k in config.trainings()) == sorted(
        f"python-stdlib/{a}/nbow/ce/{s}" for a in ("none", "no_comment", "ordered_id") for s in (0, 1)
    )
    assert config.model_params("nbow")["architecture"] == "nbow"
    assert "training" not in config.model_params("nbow")
    # grid.trained.attacks narrows the trained runs (zero-shot runs keep every attack)
    narrow = {**TRAINED, "attacks": ["no_comment", "ordered_id"]}
    config = load_config([_config(tmp_path, lambda r: r["grid"].update(trained=narrow))])
    assert len(config.runs()) == 3 + 2 * 2 * 2
    assert {run.attack for run in config.runs() if run.model == "nbow"} == {"no_comment", "ordered_id"}
    assert sorted(k.path for k in config.trainings()) == sorted(
        f"python-stdlib/{a}/nbow/ce/{s}" for a in ("no_comment", "ordered_id") for s in (0, 1)
    )


def test_training_regime_layers_and_custom_hf_models(tmp_path: Path) -> None:
    def change(raw: dict) -> None:
        raw["grid"]["trained"] = {**TRAINED, "models": ["nbow", "my-encoder"]}
        raw["models"]["nbow"] = {"dim": 64, "training": {"lr": 0.001, "batch_size": 8, "schedule": "constant"}}
        raw["models"]["my-encoder"] = {"family": "hf", "model_id": "org/some-encoder", "pooling": "mean"}

    config = load_config([_config(tmp_path, change)])
    regime = config.training_params("nbow")
    assert regime["lr"] == 0.001 and regime["batch_size"] == 8 and regime["schedule"] == "constant"
    assert "schedule_params" not in regime  # step_decay's parameters do not carry over to another schedule
    assert config.training_params("my-encoder")["lr"] == 2e-5
    assert config.training_params("my-encoder")["schedule_params"] == {"every_epochs": 3, "gamma": 0.1}
    assert config.model_spec("my-encoder").family == "hf"
    assert config.model_params("nbow")["dim"] == 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["grid"].update(models=["nbow"]), "trained from scratch and has no zero-shot run"),
        (lambda r: r["grid"].update(trained={**TRAINED, "models": ["bm25"]}), "'bm25' is not trainable"),
        (lambda r: r["grid"].update(trained={**TRAINED, "models": ["nbwo"]}), "Did you mean 'nbow'"),
        (
            lambda r: (r["grid"].update(trained=TRAINED), r["grid"].update(attacks=["none", "ordered_id"])),
            "need 'no_comment' in grid.trained.attacks",
        ),
        (
            lambda r: r["grid"].update(trained={**TRAINED, "attacks": ["no_comment", "full_hash"]}),
            "grid.trained.attacks[1]: 'full_hash' is not in grid.attacks",
        ),
        (
            lambda r: r["grid"].update(trained={**TRAINED, "attacks": ["none"]}),
            "need 'no_comment' in grid.trained.attacks",
        ),
        (
            lambda r: (
                r["grid"].update(trained={**TRAINED, "attacks": ["none", "no_comment"]}),
                r["robustness"].update(attacks=["ordered_id"]),
            ),
            "robustness.attacks: ordered_id not in grid.trained.attacks",
        ),
        (
            lambda r: r["grid"].update(trained={**TRAINED, "models": ["minilm-cross"], "losses": ["ce", "we"]}),
            "cross-encoders (minilm-cross) train with cross-entropy",
        ),
        (
            lambda r: r["grid"].update(trained={**TRAINED, "models": ["minilm-cross"]}),
            "evaluated under gecs-100 and matching only",
        ),
        (lambda r: r["grid"].update(trained={**TRAINED, "losses": ["hinge"]}), "grid.trained.losses[0]"),
        (lambda r: r["grid"].update(trained={**TRAINED, "inference": ["zero_shot"]}), "grid.trained.inference"),
        (lambda r: r["models"].update({"my-encoder": {"family": "hf"}}), "needs a model_id"),
        (lambda r: r["models"].update({"nbow": {"family": "hf"}}), "registered as a 'csn' model"),
        (lambda r: r["training"].update(lr=-1), "training.lr"),
        (
            lambda r: (r["grid"].update(trained=TRAINED), r["models"].update({"nbow": {"dimm": 64}})),
            "Did you mean 'dim'",
        ),
        (lambda r: r["training"].update(epoch=3), "Did you mean 'epochs'"),
    ],
)
def test_invalid_training_configs_are_refused(tmp_path: Path, change, message: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as err:
        load_config([_config(tmp_path, change)])
    assert message in str(err.value)


# ------------------------------------------------------------------------------- end to end (CLI)


def _stdlib_pairs(modules: list[str]) -> pd.DataFrame:
    """Documented functions of a few stdlib modules: first docstring line -> function source."""
    rows = []
    for name in modules:
        source = inspect.getsource(__import__(name))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and ast.get_docstring(node):
                query = ast.get_docstring(node).strip().splitlines()[0]
                code = ast.get_source_segment(source, node)
                if len(query.split()) >= 3 and code:
                    rows.append((f"{name}.{node.name}", query, code))
    frame = pd.DataFrame(rows, columns=["func_name", "query", "code"]).drop_duplicates("code")
    frame = frame.reset_index(drop=True)
    frame["id"] = [f"q{i}" for i in range(len(frame))]
    frame["language"] = "python"
    frame["url"] = [f"https://example.org/{i}" for i in range(len(frame))]
    for column in ("repo", "path", "docstring"):
        frame[column] = ""
    frame["renaming"] = "{}"
    return frame


def _write_attacked(root: Path, attack: str, frame: pd.DataFrame) -> None:
    folder = root / "data" / "attacked" / "python-stdlib" / attack
    folder.mkdir(parents=True)
    n = len(frame)
    cuts = {"train": frame.iloc[: n * 7 // 10], "valid": frame.iloc[n * 7 // 10 : n * 85 // 100]}
    cuts["test"] = frame.iloc[n * 85 // 100 :]
    cuts["codebase"] = frame.iloc[:0]
    for split, part in cuts.items():
        part.assign(split=split).to_parquet(folder / f"{split}.parquet")


def test_train_index_evaluate_confused_and_not_confused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    torch.set_num_threads(1)
    frame = _stdlib_pairs(["argparse", "inspect", "pathlib", "typing", "dataclasses", "tarfile", "zipfile"])
    assert len(frame) > 150
    _write_attacked(tmp_path, "no_comment", frame)
    # a different training set for the confused model of `none`: its code upper-cased
    _write_attacked(tmp_path, "none", frame.assign(code=frame["code"].str.upper()))

    def change(raw: dict) -> None:
        raw["grid"]["attacks"] = ["none", "no_comment"]
        raw["grid"]["trained"] = {**TRAINED, "seeds": [0]}
        raw["models"]["nbow"] = {
            "dim": 32,
            "max_code_len": 64,
            "code_min_count": 2,
            "training": {"lr": 0.005, "batch_size": 16, "epochs": 3, "schedule": "constant", "checkpoint_every": 5},
        }
        raw["evaluation"]["protocols"] = ["full-corpus"]

    config = _config(tmp_path, change)
    monkeypatch.chdir(tmp_path)
    common = ["--config", str(config), "--dataset", "python-stdlib", "--model", "nbow", "--loss", "ce", "--seed", "0"]
    for attack in ("no_comment", "none"):
        assert main(["--quiet", "train", *common, "--attack", attack]) == 0
    for attack in ("no_comment", "none"):
        folder = Path("checkpoints/python-stdlib") / attack / "nbow/ce/0"
        assert {p.name for p in folder.iterdir()} == {"best", "train.json"}  # resumable state removed
        assert {"encoder.json", "model.safetensors"} <= {p.name for p in (folder / "best").iterdir()}
        record = json.loads((folder / "train.json").read_text())
        assert record["steps"] > 0 and record["best_mrr"] > 0
    assert main(["--quiet", "train", *common[:-2], "--seed", "5", "--attack", "none"]) == 2  # not in the grid

    mrr = {}
    for inference in ("confused", "not_confused"):
        run = [*common, "--attack", "none", "--inference", inference]
        assert main(["--quiet", "index", *run]) == 0
        assert main(["--quiet", "evaluate", *run]) == 0
        out = Path("results/runs/python-stdlib/none/nbow/ce/0") / inference
        metrics = json.loads((out / "metrics.json").read_text())
        mrr[inference] = next(s["value"] for s in metrics["scores"] if s["metric"] == "mrr")
        record = json.loads((out / "provenance.json").read_text())
        efficiency, inputs = record["efficiency"], record["inputs"]
        assert efficiency["train_steps"] > 0 and efficiency["index_codes_per_s"] > 0
        assert efficiency["train_samples_per_s"] > 0 and efficiency["train_s"] > 0
        assert 0 < efficiency["query_latency_ms_p50"] <= efficiency["query_latency_ms_p95"]
        trained_on = "none" if inference == "confused" else "no_comment"
        assert any(f"checkpoints/python-stdlib/{trained_on}/nbow/ce/0/train.json" in str(i) for i in inputs)
    # the two inference types evaluate different models on the same (upper-cased) test code
    assert mrr["confused"] != mrr["not_confused"]
    n_test = len(pd.read_parquet("data/attacked/python-stdlib/none/test.parquet"))
    assert all(1 / n_test < value <= 1 for value in mrr.values())
    # a zero-shot run of a from-scratch model does not exist
    bad = [*common[:-6], "--model", "nbow", "--attack", "none", "--inference", "zero_shot"]
    assert main(["--quiet", "index", *bad]) == 2
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
