"""``roberta-decoder`` (:mod:`csbench.summarization.models.roberta_decoder`, ``codebert-sum``) on a tiny
random RoBERTa encoder (no download), against the reference twin of CodeXGLUE code-to-text's
``model.py`` (tests/reference/codexglue_code_to_text_model.py) sharing its weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from reference.codexglue_code_to_text_model import Seq2Seq
from tiny_models import one_thread  # noqa: F401  (autouse: one intra-op thread)
from tiny_seq2seq import code_lines, short_pairs, tiny_summarizer

from csbench.summarization.decode import generate_ids
from csbench.summarization.models import load_summarizer
from csbench.summarization.models.base import WEIGHTS_FILE, Decoding
from csbench.summarization.models.defaults import SEQ2SEQ_MODELS
from csbench.summarization.models.roberta_decoder import RobertaDecoderSummarizer


@pytest.fixture(scope="module")
def summarizer(tmp_path_factory: pytest.TempPathFactory) -> RobertaDecoderSummarizer:
    """A tiny RoBERTa encoder + 2-layer decoder, taught a few steps (it ends summaries at varied lengths)."""
    return tiny_summarizer("roberta", tmp_path_factory.mktemp("roberta"))


def twin(summarizer: RobertaDecoderSummarizer, beam_size: int, max_length: int) -> Seq2Seq:
    """CodeXGLUE's Seq2Seq on the same encoder, decoder and dense layer (lm_head tied as theirs ties it)."""
    module = summarizer.module
    tok = summarizer.tokenizer
    model = Seq2Seq(
        module.encoder, module.decoder, module.encoder.config, beam_size, max_length, tok.cls_token_id, tok.sep_token_id
    )
    model.dense.load_state_dict(module.dense.state_dict())
    return model.eval()


def test_loss_equals_codexglue(summarizer: RobertaDecoderSummarizer) -> None:
    data = short_pairs(8)
    batch = summarizer.collate([c for c, _ in data], [s for _, s in data])
    reference = twin(summarizer, 1, 8)
    with torch.no_grad():
        inputs = [batch[name] for name in ("source_ids", "source_mask", "target_ids", "target_mask")]
        theirs, _, active = reference(*inputs)
        ours = summarizer.loss(summarizer.module.eval(), batch)
    assert int(active) == int((batch["labels"] != -100).sum())
    assert float(ours) == pytest.approx(float(theirs), rel=1e-6)


def test_collate_follows_convert_examples_to_features(summarizer: RobertaDecoderSummarizer) -> None:
    tok = summarizer.tokenizer
    code = "public  int size ( )\n{ return count ; }"
    batch = summarizer.collate([code], ["returns the size"])
    expected = tok.convert_tokens_to_ids(tok.tokenize("public int size ( ) { return count ; }"))
    assert batch["source_ids"][0].tolist() == [tok.cls_token_id, *expected, tok.sep_token_id]
    long_batch = summarizer.collate([" ".join(["x"] * 400)], ["y " * 100])
    assert long_batch["source_ids"].shape[1] == summarizer.params["max_source_len"]
    assert long_batch["target_ids"].shape[1] == summarizer.params["max_target_len"]


def test_greedy_equals_codexglue_beam_of_one(summarizer: RobertaDecoderSummarizer) -> None:
    """Their Beam with beam_size 1 is greedy search: csbench's greedy decoding gives their predictions."""
    codes = code_lines(n=8)
    max_length = 10
    ours = generate_ids(summarizer, codes, Decoding(beam=1, max_length=max_length))
    source_ids, source_mask = summarizer._wrap(codes, summarizer.params["max_source_len"])
    with torch.no_grad():
        preds = twin(summarizer, 1, max_length + 1)(source_ids=source_ids, source_mask=source_mask)
    theirs = []
    for pred in preds:  # run.py lines 436-440: the first hypothesis, cut at the first 0
        ids = pred[0].tolist()
        theirs.append(ids[: ids.index(0)] if 0 in ids else ids)
    assert [ids[: ids.index(0)] if 0 in ids else ids for ids in ours] == theirs
    assert len({len(ids) for ids in ours}) > 1  # varied lengths: EOS handling exercised
    assert summarizer.generate(codes, Decoding(beam=1, max_length=max_length)) == [
        summarizer.tokenizer.decode(ids, clean_up_tokenization_spaces=False).strip() for ids in theirs
    ]


def test_incremental_step_equals_full_decoder(summarizer: RobertaDecoderSummarizer) -> None:
    codes = code_lines(n=4)
    module = summarizer.module.eval()
    with torch.no_grad():
        state = summarizer.encode(codes)
        prefix = torch.full((len(codes), 1), summarizer.decoder_start_id)
        stepped = []
        for _ in range(6):
            logits, state = summarizer.step(state, prefix)
            stepped.append(logits)
            prefix = torch.cat((prefix, logits.argmax(-1, keepdim=True)), dim=1)
        source_ids, source_mask = summarizer._wrap(codes, summarizer.params["max_source_len"])
        full = module.logits(module.encode(source_ids, source_mask), source_mask, prefix[:, :-1])
    torch.testing.assert_close(torch.stack(stepped, dim=1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("beam", [3, 10])
def test_codexglue_beam_style_equals_their_beam(summarizer: RobertaDecoderSummarizer, beam: int) -> None:
    """``beam_style: codexglue`` gives their Seq2Seq's predictions (run.py: first hypothesis, cut at 0)."""
    params = {**summarizer.params, "beam_style": "codexglue"}
    theirs_style = RobertaDecoderSummarizer(summarizer.module, summarizer.tokenizer, params)
    codes = code_lines(n=6)
    max_length = 10
    ours = theirs_style.generate(codes, Decoding(beam=beam, max_length=max_length))
    source_ids, source_mask = summarizer._wrap(codes, summarizer.params["max_source_len"])
    with torch.no_grad():
        preds = twin(summarizer, beam, max_length + 1)(source_ids=source_ids, source_mask=source_mask)
    expected = []
    for pred in preds:
        ids = pred[0].tolist()
        ids = ids[: ids.index(0)] if 0 in ids else ids
        expected.append(summarizer.tokenizer.decode(ids, clean_up_tokenization_spaces=False).strip())
    assert ours == expected


class _Recomputing(RobertaDecoderSummarizer):
    """The same model decoding as CodeXGLUE's loop does: the whole prefix through the decoder every step
    (no cache), so that beam reordering of the cached layer inputs is checked against it."""

    def step(self, state, prefix):
        logits = self.module.logits(state.memory.permute(1, 0, 2), state.mask, prefix.to(state.memory.device))
        return logits[:, -1, :].float(), state


def test_cached_beam_search_equals_recomputing_one(summarizer: RobertaDecoderSummarizer) -> None:
    recomputing = _Recomputing(summarizer.module, summarizer.tokenizer, summarizer.params)
    codes = code_lines(n=6)
    for decoding in (Decoding(beam=4, max_length=10), Decoding(beam=10, max_length=10, length_penalty=0.0)):
        cached = generate_ids(summarizer, codes, decoding)
        assert cached == generate_ids(recomputing, codes, decoding)
        assert min(len(ids) for ids in cached) <= decoding.max_length  # finished hypotheses, not the cap


def test_save_load_keeps_tied_weights_and_summaries(summarizer: RobertaDecoderSummarizer, tmp_path: Path) -> None:
    summarizer.save(tmp_path)
    assert (tmp_path / WEIGHTS_FILE).is_file() and (tmp_path / "encoder" / "config.json").is_file()
    loaded = load_summarizer(tmp_path)
    assert loaded.module.lm_head.weight is loaded.module.encoder.embeddings.word_embeddings.weight
    decoding = Decoding(beam=4, max_length=10)
    assert loaded.generate(code_lines(n=6), decoding) == summarizer.generate(code_lines(n=6), decoding)


def test_codebert_sum_defaults_are_codexglue_run_py() -> None:
    entry = SEQ2SEQ_MODELS["codebert-sum"]
    params = RobertaDecoderSummarizer.resolve_params(entry)
    assert params["model_id"] == "microsoft/codebert-base"
    assert (params["max_source_len"], params["max_target_len"], params["beam"]) == (256, 128, 10)
    assert (params["decoder_layers"], params["decoder_ffn_dim"], params["decoder_dropout"]) == (6, 2048, 0.1)
    assert params["max_length"] == 127  # their 128 decoding steps, the EOS among them
    assert params["beam_style"] == "hf"  # csbench's decoder; "codexglue" for their Beam
    with pytest.raises(ValueError, match="beam_style"):
        RobertaDecoderSummarizer.resolve_params({**entry, "beam_styl": "hf"})


def test_offline_build_says_how_to_supply_the_model() -> None:
    from csbench.models.hf import ModelNotAvailableError
    from csbench.summarization.models import build_summarizer

    with pytest.raises(ModelNotAvailableError, match="hf download"):
        build_summarizer({"architecture": "roberta-decoder", "model_id": "microsoft/no-such-codebert"}, [], [], 0)
