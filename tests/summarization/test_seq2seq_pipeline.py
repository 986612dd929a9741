"""A tiny randomly initialised T5 (``hf-seq2seq``) and RoBERTa encoder-decoder (``roberta-decoder``),
built from configs (no download), each through train (:func:`csbench.train.summarizer.train_summarizer`,
a few steps) -> checkpoint -> reload (:func:`load_summarizer`) -> generate -> score
(:func:`csbench.summarization.metrics.summary_scores`); the reloaded model generates what the trained one
did before it was saved."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tiny_models import one_thread  # noqa: F401  (autouse: one intra-op thread)
from tiny_seq2seq import code_lines, short_pairs, tiny_summarizer

from csbench.summarization.metrics import METRICS, summary_scores
from csbench.summarization.models import load_summarizer
from csbench.summarization.models.base import SUMMARIZER_FILE, Decoding
from csbench.train.summarizer import Seq2SeqTrainConfig, train_summarizer


def frame(pairs: list[tuple[str, str]], prefix: str) -> pd.DataFrame:
    """A split as the phases pass it: ``id``, ``code`` and ``query`` (the reference summary)."""
    ids = [f"{prefix}{i}" for i in range(len(pairs))]
    return pd.DataFrame({"id": ids, "code": [c for c, _ in pairs], "query": [s for _, s in pairs]})


@pytest.mark.parametrize("kind", ["t5", "roberta"])
@pytest.mark.parametrize("metric", ["bleu", "loss"])
def test_train_checkpoint_reload_generate_score(kind: str, metric: str, tmp_path: Path) -> None:
    summarizer = tiny_summarizer(kind, tmp_path / "pretrained", taught=False)
    data = short_pairs(48)
    train, valid = frame(data[:40], "t"), frame(data[40:], "v")
    config = Seq2SeqTrainConfig(
        lr=5e-3, epochs=1, batch_size=8, max_steps=4, validations_per_epoch=1, patience=None,
        checkpoint_every=None, cpu=True, metric=metric, max_valid=8, valid_batch_size=8, keep="last",
        label_smoothing=0.1,
    )
    record = train_summarizer(summarizer, train, valid, config, tmp_path / "run", resume=False)
    assert record.steps == 4 and record.n_train == 40 and record.n_valid == 8
    written = json.loads((tmp_path / "run" / "train.json").read_text())
    assert (f"best_{metric}" in written) and written["metric"] == metric

    decoding = Decoding(beam=3, max_length=10, batch_size=4)
    codes = code_lines(n=8)
    before = summarizer.generate(codes, decoding)
    best = tmp_path / "run" / "best"
    assert (best / SUMMARIZER_FILE).is_file()
    assert not list(best.rglob("*.bin")) and list(best.rglob("*.safetensors"))
    reloaded = load_summarizer(best)
    assert type(reloaded) is type(summarizer) and reloaded.params == summarizer.params
    after = reloaded.generate(codes, decoding)
    assert after == before

    references = [s for _, s in data[40:]]
    scores = summary_scores(references, reloaded.generate(valid["code"].tolist(), decoding))
    assert list(scores)[: len(METRICS)] == list(METRICS)
    assert all(0.0 <= value <= 100.0 for value in scores.values())
