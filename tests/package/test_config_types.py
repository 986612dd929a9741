"""Issue #22 item 5: every parameter of a model or a loss is typed, and a bad value stops
`csbench validate` (and so snakemake and dvc repro) before any job runs, at its file and line.

Before, `loss_params.*` and the neural models' parameters had no types: `temperature: abc`, a
misspelt `temprature` and `dim: abc` passed validation and failed inside the train job, after
download, prepare and attack had run; `k_shift_snippet-0` was accepted and silently renamed nothing
(no_comment under another name); and under snakemake a YAML error in a `--configfile` overlay lost
its file and line, a missing overlay ended in a traceback (snakemake reads them itself, before the
workflow: `scripts/snakemake.sh` has csbench read them first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from projects import copy_paths

import csbench
from csbench.cli import main

# the checkout whose code runs (the one of PYTHONPATH when a test is run against the old code), and
# its own params.yaml, which its code validates
CODE_ROOT = Path(csbench.__file__).resolve().parents[2]
PARAMS = CODE_ROOT / "params.yaml"
BIN = Path(sys.executable).parent

# (overlay text, the line of the bad key in it, what the one-line error says)
BAD_VALUES = {
    "loss-type": ("loss_params:\n  ce:\n    temperature: abc\n", 3, ["loss_params.ce.temperature", "'abc'", "number"]),
    "loss-misspelt-key": (
        "loss_params:\n  ce:\n    temprature: 0.5\n",
        3,
        ["loss_params.ce", "'temprature'", "Did you mean 'temperature'?"],
    ),
    "loss-range": ("loss_params:\n  ce: {temperature: 0}\n", 2, ["loss_params.ce.temperature", "minimum of 0"]),
    "loss-value": ("loss_params:\n  we:\n    schedule: epochs\n", 3, ["loss_params.we.schedule", "'epochs'"]),
    "unused-loss-too": ("loss_params:\n  hinge_max:\n    margin: -1\n", 3, ["loss_params.hinge_max.margin"]),
    "csn-type": ("models:\n  nbow:\n    dim: abc\n", 3, ["models.nbow.dim", "'abc'", "integer"]),
    "csn-float-for-int": ("models:\n  nbow:\n    dim: 128.5\n", 3, ["models.nbow.dim", "integer"]),
    "csn-misspelt-key": ("models:\n  cnn:\n    cnn_kernel_width: [3]\n", 3, ["Did you mean 'cnn_kernel_widths'?"]),
    "csn-list-item": ("models:\n  cnn:\n    cnn_kernel_widths: [3, x]\n", 3, ["models.cnn.cnn_kernel_widths[1]"]),
    "csn-value": ("models:\n  nbow:\n    pooling: avg\n", 3, ["models.nbow.pooling", "'avg'", "'attention'"]),
    "csn-dropout": ("models:\n  nbow:\n    dropout: 1.0\n", 3, ["models.nbow.dropout"]),
    "hf-range": ("models:\n  codebert:\n    max_code_len: 1024\n", 3, ["models.codebert.max_code_len", "512"]),
    "hf-custom": (
        "models:\n  my-encoder:\n    family: hf\n    model_id: org/name\n    projection_dim: wide\n",
        5,
        ["models.my-encoder.projection_dim", "'wide'"],
    ),
    "cross-type": ("models:\n  roberta-cross:\n    max_len: '512'\n", 3, ["models.roberta-cross.max_len", "'512'"]),
    "k-shift-snippet-0": (
        "grid:\n  attacks: [none, no_comment, ordered_id, k_shift_snippet-0]\n",
        2,
        ["k_shift_snippet-0", "grid.attacks[3]", "k_shift_snippet.k must be an integer >= 1, not 0"],
    ),
    "k-shift-dataset-0": (
        "grid:\n  attacks:\n    - none\n    - no_comment\n    - ordered_id\n    - k_shift_dataset-0\n",
        6,
        ["k_shift_dataset-0", "grid.attacks[3]", "renames nothing"],
    ),
}


def _validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], overlay: str) -> tuple[int, Path, list[str]]:
    path = tmp_path / "overlay.yaml"
    path.write_text(overlay, encoding="utf-8")
    code = main(["validate", "--config", str(PARAMS), "--config", str(path)])
    return code, path, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_bad_value_stops_validate_at_its_file_and_line(case: str, tmp_path: Path, capsys) -> None:
    overlay, line, expected = BAD_VALUES[case]
    code, path, errors = _validate(tmp_path, capsys, overlay)
    errors = [e for e in errors if "error:" in e]
    assert code == 2 and len(errors) == 1, (code, errors)
    assert errors[0].startswith(f"csbench validate: error: {path}:{line}: "), errors[0]
    for part in expected:
        assert part in errors[0], errors[0]


@pytest.mark.parametrize(
    ("overlay", "key"),
    [
        ("attack_params:\n  k_shift_snippet: {k: 0}\n", "attack_params.k_shift_snippet.k"),
        ("attack_params:\n  k_shift_dataset: {k: 0}\n", "attack_params.k_shift_dataset.k"),
        ("attack_params:\n  random_permutation: {seed: 0, min_k: 0, max_k: 20}\n", "random_permutation.min_k"),
    ],
    ids=["k_shift_snippet", "k_shift_dataset", "random_permutation"],
)
def test_a_shift_of_zero_in_attack_params_is_refused(overlay: str, key: str, tmp_path: Path, capsys) -> None:
    """k = 0 renames nothing: the attack would be no_comment under another name."""
    code, path, errors = _validate(tmp_path, capsys, overlay)
    assert code == 2, errors
    assert any(key in e and "minimum of 1" in e and str(path) in e for e in errors), errors


def test_good_values_pass(tmp_path: Path, capsys) -> None:
    overlay = {
        "grid": {"attacks": ["none", "no_comment", "ordered_id", "k_shift_snippet-1", "k_shift_dataset-64"]},
        "loss_params": {"ce": {"temperature": 0.05}, "we": {"eta": 0.5, "schedule": "step", "symmetric": False}},
        "models": {
            "nbow": {"dim": 64, "dropout": 0.0, "pooling": "mean"},
            "cnn": {"cnn_kernel_widths": [3, 5]},
            "codebert": {"max_code_len": 512, "projection_dim": 128},
            "my-encoder": {"family": "hf", "model_id": "org/name", "prefix_tokens": ["<x>"], "projection_dim": None},
            "roberta-cross": {"max_query_len": None, "max_len": 256},
        },
    }
    code, _, errors = _validate(tmp_path, capsys, yaml.safe_dump(overlay))
    assert code == 0, errors


# --------------------------------------------------------------------- the schemas come from the registries


def _registered() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(what, defaults, declarations) of every registered model and loss."""
    from csbench.models import MODELS
    from csbench.train.losses import LOSSES

    found = []
    for name in MODELS.names():
        spec = MODELS.get(name)
        found.append((f"models.{name}", {k: v for k, v in spec.defaults.items() if k != "family"}, spec.params))
    found += [(f"loss_params.{name}", LOSSES.get(name).defaults, LOSSES.get(name).params) for name in LOSSES]
    return found


def _wrong_value(schema: dict[str, Any]) -> Any:
    """A value of another type than the parameter's schema allows."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    return ["not", "a", "scalar"] if "string" in types or "enum" in schema else "not-a-number"


def test_every_registered_parameter_is_typed_and_a_wrong_type_is_refused(tmp_path: Path) -> None:
    """No parameter of a model or a loss is unchecked: the schema derived from its default has a type
    (or allowed values), and a config giving a value of another type fails validation at that key."""
    from csbench.config import ConfigError, validate_config
    from csbench.params import param_schema

    base = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    checked = 0
    for what, defaults, declared in _registered():
        schema = param_schema(defaults, declared)
        assert set(schema["properties"]) == set(defaults), what
        for name, prop in schema["properties"].items():
            assert {"type", "enum"} & set(prop), (what, name, prop)
            section, owner = what.split(".", 1)
            raw = {**base, section: {**(base.get(section) or {}), owner: {name: _wrong_value(prop)}}}
            with pytest.raises(ConfigError) as info:
                validate_config(raw)
            message = str(info.value)
            assert f"{what}.{name}: " in message or f"(at {what}.{name})" in message, message
            checked += 1
    assert checked >= 150  # every parameter of the 16 registered models and 4 losses: 166 today


def test_registered_defaults_satisfy_their_own_schema() -> None:
    from csbench.params import check_params

    for what, defaults, declared in _registered():
        assert check_params(defaults, defaults, declared) is None, what


def test_declared_values_equal_the_model_modules() -> None:
    """The allowed values declared without torch (csbench.models.defaults) are the ones the model
    modules accept when they build a model."""
    from csbench.models import cross, csn, hf
    from csbench.models.defaults import CROSS_PARAMS, CSN_DEFAULTS, CSN_PARAMS, HF_PARAMS

    assert CSN_PARAMS["pooling"]["enum"] == list(csn.POOLINGS)
    assert CSN_PARAMS["architecture"]["enum"] == list(csn.ARCHITECTURES)
    assert HF_PARAMS["pooling"]["enum"] == list(hf.POOLINGS)
    assert sorted(HF_PARAMS["architecture_kind"]["enum"]) == sorted(hf.ARCHITECTURE_KINDS)
    assert CROSS_PARAMS["architecture_kind"]["enum"] == list(cross.ARCHITECTURE_KINDS)
    every_csn_key = set().union(*CSN_DEFAULTS.values())
    assert set(CSN_PARAMS) <= every_csn_key


def test_loss_defaults_equal_the_loss_classes() -> None:
    from csbench.train.losses import LOSSES, CELoss, HingeMaxLoss, HingeSumLoss, WELoss
    from csbench.train.losses.we import SCHEDULES

    # the declarations the registry read from the loss modules' sources (no torch), by name
    LOSS_DEFAULTS = {name: LOSSES.get(name).defaults for name in LOSSES}
    LOSS_PARAMS = {name: LOSSES.get(name).params for name in LOSSES}

    classes = {"ce": CELoss, "hinge_sum": HingeSumLoss, "hinge_max": HingeMaxLoss, "we": WELoss}
    assert list(LOSS_DEFAULTS) == LOSSES.names() == list(classes)
    for name, cls in classes.items():
        assert LOSS_DEFAULTS[name] == cls.DEFAULTS == LOSSES.get(name).defaults, name
    assert LOSS_PARAMS["we"]["schedule"]["enum"] == list(SCHEDULES)


def test_make_loss_refuses_a_wrong_type_with_the_key() -> None:
    from csbench.train.losses import make_loss

    with pytest.raises(ValueError, match=r"loss_params\.ce\.temperature: 'abc' is not of type 'number'"):
        make_loss("ce", {"temperature": "abc"})


def test_validating_imports_no_torch() -> None:
    """The derived schemas are plain data: every job and every snakemake start validates the
    config, and torch would add seconds to each."""
    code = (
        "import sys; from csbench.config import load_config; "
        f"load_config([{str(PARAMS)!r}]); print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# --------------------------------------------------------------------- overlays under snakemake


def _project(dest: Path) -> Path:
    """A copy of the checkout whose code runs (its Snakefile, workflow, scripts), as the driver tests make."""
    names = ("Snakefile", "params.yaml", "dvc.yaml", ".dvcignore", ".gitignore", "profiles", "workflow", "scripts")
    dest.mkdir(parents=True)
    return copy_paths(CODE_ROOT, dest, (*names, "src"))


def _snakemake(project: Path, *args: str, wrapper: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    command = ["bash", "scripts/snakemake.sh"] if wrapper else [str(BIN / "snakemake")]
    return subprocess.run(
        [*command, "-n", "--cores", "1", *args], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    ("overlay_text", "expected"),
    [
        ("grid: {attacks: [none,\n", "bad.yaml: line 2, column 1: not valid YAML"),
        (None, "missing.yaml: cannot read config file: No such file or directory"),
    ],
    ids=["yaml-error", "missing-file"],
)
def test_overlay_that_snakemake_cannot_read_is_named_with_its_line(
    overlay_text: str | None, expected: str, tmp_path: Path
) -> None:
    """`scripts/snakemake.sh -n --configfile X`: one line naming the file (and line), no traceback,
    nothing planned or written. (Plain `snakemake` reads the overlay before the workflow starts, so
    no project code can speak for it: its own message names neither; README, "Validation".)"""
    project = _project(tmp_path / "project")
    name = "bad.yaml" if overlay_text is not None else "missing.yaml"
    if overlay_text is not None:
        (project / name).write_text(overlay_text, encoding="utf-8")
    result = _snakemake(project, "--configfile", name)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    lines = [line for line in output.splitlines() if expected in line]
    assert len(lines) == 1, output[-3000:]
    assert "Traceback" not in output
    assert not (project / "data").exists() and not (project / ".snakemake" / "log").exists()


def test_bad_parameter_in_an_overlay_stops_plain_snakemake(tmp_path: Path) -> None:
    """The type checks reach snakemake through common.smk (plain `snakemake -n`, no job planned)."""
    project = _project(tmp_path / "project")
    (project / "overlay.yaml").write_text("loss_params:\n  ce:\n    temperature: abc\n", encoding="utf-8")
    result = _snakemake(project, "--configfile", "workflow/configs/tiny.yaml", "overlay.yaml", wrapper=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-2000:]
    errors = [line for line in output.splitlines() if line.startswith("csbench: invalid config:")]
    assert len(errors) == 1, output[-2000:]
    assert "overlay.yaml:3: loss_params.ce.temperature: 'abc' is not of type 'number'" in errors[0]
    assert "Traceback" not in output
