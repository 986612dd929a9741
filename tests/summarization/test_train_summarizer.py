"""Training a summarizer with the one engine (csbench.train.summarizer): it learns, resumes exactly,
counts bad records, validates by BLEU or loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from csbench.summarization.models import build_summarizer, load_summarizer
from csbench.summarization.models.base import Decoding
from csbench.train import engine
from csbench.train.summarizer import Seq2SeqTrainConfig, SummarizerTask, train_summarizer

torch.set_num_threads(1)
NAMES = ["size", "name", "count", "width", "height", "depth", "color", "label", "title", "owner"]
PAIRS = [(f"public int get{n.title()} ( ) {{ return {n} ; }}", f"returns the {n}") for n in NAMES] + [
    (f"public void set{n.title()} ( int v ) {{ {n} = v ; }}", f"sets the {n} to the given value") for n in NAMES
]  # 20 pairs
TINY = {
    "architecture": "transformer", "d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "heads": 4,
    "ff_dim": 128, "code_min_count": 1, "summary_min_count": 1, "summary_vocab_size": 200, "max_length": 12,
    "max_code_chars": 200,
}  # fmt: skip


def frame(pairs: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{i}" for i in range(len(pairs))], "code": [c for c, _ in pairs],
                         "query": [s for _, s in pairs]})  # fmt: skip


def new(params: dict[str, Any] | None = None):
    return build_summarizer(params or TINY, [c for c, _ in PAIRS], [s for _, s in PAIRS], seed=0)


def test_a_tiny_transformer_overfits_twenty_pairs(tmp_path: Path):
    config = Seq2SeqTrainConfig(
        lr=3e-3, epochs=50, batch_size=10, validations_per_epoch=1, patience=None, checkpoint_every=None,
        cpu=True, schedule="constant", log_every=1000, valid_batch_size=20,
    )  # fmt: skip
    summarizer = new({**TINY, "dropout": 0.0})
    record = train_summarizer(summarizer, PAIRS, frame(PAIRS), config, tmp_path)
    assert record.steps == 100 and record.n_train == 20 and record.n_valid == 20
    assert record.history[0]["smoothed_bleu4"] < 50 < 95 < record.best  # learnt, from nothing
    saved = json.loads((tmp_path / "train.json").read_text())
    assert saved["best_bleu"] == record.best and saved["metric"] == "bleu" and saved["skipped"] == {}
    best = load_summarizer(tmp_path / "best")
    hypotheses = best.generate([c for c, _ in PAIRS], Decoding(beam=3, max_length=12))
    assert sum(h == s for h, (_, s) in zip(hypotheses, PAIRS, strict=True)) >= 18


def test_kill_and_resume_ends_with_the_same_model(tmp_path: Path):
    config = Seq2SeqTrainConfig(
        lr=3e-3, epochs=6, batch_size=5, validations_per_epoch=1, patience=None, checkpoint_every=5, cpu=True,
        schedule="linear_decay", schedule_params={"warmup_steps": 3}, log_every=1000, max_valid=8, label_smoothing=0.1,
    )  # fmt: skip
    # (dropout 0.1 is on: the resumed run must restore the random state too)
    expected = train_summarizer(new(), PAIRS, frame(PAIRS), config, tmp_path / "a")

    def kill_at_step_13(status: dict[str, Any]) -> None:
        if status["step"] == 13:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        task = SummarizerTask(new(), PAIRS, frame(PAIRS), config)
        engine.train(task, config, tmp_path / "b", progress=False, on_step=kill_at_step_13)
    resumed = train_summarizer(new(), PAIRS, frame(PAIRS), config, tmp_path / "b", resume=True)
    assert (resumed.segments, resumed.resumed_from_step, resumed.steps) == (2, 10, 24)

    def without_seconds(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in entry.items() if k != "seconds"} for entry in history]

    assert without_seconds(resumed.history) == without_seconds(expected.history)
    assert (resumed.best, resumed.best_step) == (expected.best, expected.best_step)
    a, b = (load_file(tmp_path / run / "best" / "model.safetensors") for run in ("a", "b"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_bad_records_are_counted_skips_named_in_train_json(tmp_path: Path):
    bad = [*PAIRS[:10], ("int f ( ) { }", "   "), ("x" * 201, "too long"), ("int g ( ) { }", "")]
    valid = frame([*PAIRS[:4], ("int h ( ) { }", "")])
    config = Seq2SeqTrainConfig(epochs=1, batch_size=5, cpu=True, metric="loss", checkpoint_every=None)
    record = train_summarizer(new(), frame(bad), valid, config, tmp_path)
    saved = json.loads((tmp_path / "train.json").read_text())
    assert saved["skipped"] == {"empty_reference": ["r10", "r12"], "over_long_code": ["r11"]}
    assert saved["valid_skipped"] == {"empty_reference": ["r4"]}
    assert record.n_train == 10 and record.n_valid == 4 and record.steps == 2
    # validation by loss: the history holds it, the record names it best_loss (positive)
    assert saved["best_loss"] == pytest.approx(saved["history"][-1]["valid_loss"]) and saved["best_loss"] > 0
    # a plain sequence of pairs (no ids): skips are named by index
    record = train_summarizer(new(), bad, valid, config, tmp_path / "seq")
    assert record.skipped == {"empty_reference": [10, 12], "over_long_code": [11]}


def test_config_checks():
    with pytest.raises(ValueError, match="metric must be one of bleu, loss"):
        Seq2SeqTrainConfig(metric="rouge")
    with pytest.raises(ValueError, match="label_smoothing"):
        Seq2SeqTrainConfig(label_smoothing=1.0)
    with pytest.raises(ValueError, match="unknown training option"):
        Seq2SeqTrainConfig.from_dict({"valid_beams": 2})
    with pytest.raises(ValueError, match="no validation records"):
        SummarizerTask(new(), PAIRS, None, Seq2SeqTrainConfig())
