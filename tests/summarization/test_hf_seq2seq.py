"""``hf-seq2seq`` (:mod:`csbench.summarization.models.hf_seq2seq`) on tiny random T5 / BART models built
from configs (no download), and csbench's decoder (:mod:`csbench.summarization.decode`) against Hugging
Face's own ``generate``: identical tokens for greedy and beam search 4 / 10 on real code inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import one_thread  # noqa: F401  (autouse: one intra-op thread)
from tiny_seq2seq import code_lines, short_pairs, tiny_summarizer

from csbench.summarization.decode import generate_ids
from csbench.summarization.models import load_summarizer
from csbench.summarization.models.base import SUMMARIZER_FILE, Decoding


@pytest.fixture(scope="module")
def t5(tmp_path_factory: pytest.TempPathFactory):
    """A tiny T5 (CodeT5's conventions), taught a few steps so that it ends summaries at varied lengths."""
    return tiny_summarizer("t5", tmp_path_factory.mktemp("t5"))


@pytest.fixture(scope="module")
def bart(tmp_path_factory: pytest.TempPathFactory):
    """A tiny BART, taught the same way."""
    return tiny_summarizer("bart", tmp_path_factory.mktemp("bart"))


def hf_generate_ids(summarizer, codes: list[str], decoding: Decoding) -> list[list[int]]:
    """Hugging Face ``generate`` on the same inputs, cut as csbench cuts (start token off, EOS on off)."""
    batch = summarizer._sources(codes)
    with torch.no_grad():
        out = summarizer.module.generate(
            **batch,
            num_beams=decoding.beam,
            length_penalty=decoding.length_penalty,
            max_new_tokens=decoding.max_length + 1,
            early_stopping=False,
            do_sample=False,
        )
    rows = []
    for row in out[:, 1:].tolist():
        rows.append(row[: row.index(summarizer.eos_id)] if summarizer.eos_id in row else row)
    return rows


DECODINGS = [
    Decoding(beam=1, max_length=8),
    Decoding(beam=4, max_length=8),
    Decoding(beam=10, max_length=8),
    Decoding(beam=4, max_length=6, length_penalty=0.5),
    Decoding(beam=10, max_length=12, length_penalty=2.0),
    Decoding(beam=4, max_length=8, length_penalty=-1.0),
]


@pytest.mark.parametrize("decoding", DECODINGS, ids=lambda d: f"beam{d.beam}-len{d.max_length}-lp{d.length_penalty}")
@pytest.mark.parametrize("kind", ["t5", "bart"])
def test_decoder_equals_hf_generate(kind: str, decoding: Decoding, request: pytest.FixtureRequest) -> None:
    summarizer = request.getfixturevalue(kind)
    # generate_ids sorts a batch by code length; HF gets that order, so both see the same padded batch
    codes = sorted(code_lines(), key=len)
    ours = generate_ids(summarizer, codes, Decoding(**{**decoding.to_dict(), "batch_size": len(codes)}))
    theirs = hf_generate_ids(summarizer, codes, decoding)
    assert ours == theirs
    lengths = {len(ids) for ids in ours}
    if decoding.max_length == 8:  # the taught model ends some summaries early: EOS handling is exercised
        assert min(lengths) < decoding.max_length + 1


def test_batches_and_order_do_not_change_summaries(t5) -> None:
    codes = code_lines(n=12)
    whole = t5.generate(codes, Decoding(beam=4, max_length=8, batch_size=12))
    split = t5.generate(codes, Decoding(beam=4, max_length=8, batch_size=5))
    assert whole == split
    assert t5.generate(codes[::-1], Decoding(beam=4, max_length=8, batch_size=12)) == whole[::-1]


def test_collate_masks_label_padding_and_loss_is_the_models(t5) -> None:
    data = short_pairs(6)
    batch = t5.collate([c for c, _ in data], [s for _, s in data])
    target = t5.tokenizer(text_target=[s for _, s in data], padding=True, return_tensors="pt")
    assert torch.equal(batch["labels"] == -100, target["attention_mask"] == 0)
    assert batch["labels"][0, 0] == t5.tokenizer.bos_token_id  # CodeT5's template: <s> summary </s>
    with torch.no_grad():
        own = t5.module(**batch).loss  # transformers' own cross-entropy over labels != -100
        ours = t5.loss(t5.module, batch)
        smoothed = t5.loss(t5.module, batch, label_smoothing=0.1)
    assert float(ours) == pytest.approx(float(own), rel=1e-6)
    assert float(smoothed) != pytest.approx(float(ours))


def test_sources_truncated_to_max_source_len(t5) -> None:
    long_code = " ".join(["token"] * 500)
    assert t5._sources([long_code])["input_ids"].shape[1] == t5.params["max_source_len"]


def test_save_load_round_trip(t5, tmp_path: Path) -> None:
    t5.save(tmp_path / "saved")
    files = {p.name for p in (tmp_path / "saved" / "hf").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    assert not any(name.endswith((".bin", ".pt", ".pkl")) for name in files)
    assert (tmp_path / "saved" / SUMMARIZER_FILE).is_file()
    loaded = load_summarizer(tmp_path / "saved")
    assert loaded.params == t5.params
    decoding = Decoding(beam=4, max_length=8)
    assert loaded.generate(code_lines(), decoding) == t5.generate(code_lines(), decoding)


def test_unknown_model_offline_says_how_to_supply_it() -> None:
    from csbench.models.hf import ModelNotAvailableError
    from csbench.summarization.models import build_summarizer

    params = {"architecture": "hf-seq2seq", "model_id": "Salesforce/codet5-no-such-model"}
    with pytest.raises(ModelNotAvailableError, match="hf download"):
        build_summarizer(params, [], [], seed=0)


def test_params_are_checked() -> None:
    from csbench.summarization.models.hf_seq2seq import HFSeq2SeqSummarizer

    with pytest.raises(ValueError, match="needs parameter"):
        HFSeq2SeqSummarizer.resolve_params({"architecture": "hf-seq2seq"})
    with pytest.raises(ValueError, match="did you mean 'source_prefix'"):
        HFSeq2SeqSummarizer.resolve_params({"model_id": "x", "source_prefx": "summarize: "})


def test_generation_config_settings_it_does_not_apply_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tiny_seq2seq import pairs, tiny_bart_dir
    from transformers import BartForConditionalGeneration

    from csbench.summarization.models import build_summarizer

    folder = tiny_bart_dir(tmp_path, [code for code, _ in pairs(32)])
    model = BartForConditionalGeneration.from_pretrained(folder)
    model.generation_config.forced_bos_token_id = 0  # a token id of 0 is a setting, not "unset"
    model.save_pretrained(folder)
    with caplog.at_level("WARNING", logger="csbench.summarization.models.hf_seq2seq"):
        build_summarizer({"architecture": "hf-seq2seq", "model_id": str(folder)}, [], [], seed=0)
    assert "forced_bos_token_id=0" in caplog.text and "does not apply" in caplog.text
