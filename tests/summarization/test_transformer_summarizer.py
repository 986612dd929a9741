"""The from-scratch Transformer summarizer (architecture ``transformer``): vocabularies, the cached
decoder step, save / load, params."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from csbench.summarization.models import ARCHITECTURES, build_summarizer, load_summarizer
from csbench.summarization.models.base import Decoding
from csbench.summarization.models.transformer import BOS, EOS, TransformerSummarizer, fit_summary_tokenizer

torch.set_num_threads(1)
PAIRS = [
    ("public int getSize ( ) { return size ; }", "returns the size of the list ."),
    ("public void setName ( String name ) { this . name = name ; }", 'sets the name, e.g. "foo".'),
    ("public boolean isEmpty ( ) { return size == 0 ; }", "returns true if the list is empty"),
    ("public void clear ( ) { items . clear ( ) ; size = 0 ; }", "removes every element from the list"),
    ("public String getName ( ) { return name ; }", "returns the name"),
    ("public void close ( ) throws IOException { in . close ( ) ; }", "closes the underlying stream"),
]
CODES, SUMMARIES = [c for c, _ in PAIRS], [s for _, s in PAIRS]
SMALL = {
    "architecture": "transformer", "d_model": 32, "encoder_layers": 1, "decoder_layers": 2, "heads": 4,
    "ff_dim": 64, "code_min_count": 1, "summary_min_count": 1, "summary_vocab_size": 150, "max_length": 16,
}  # fmt: skip


def test_registered_and_built_by_name():
    assert ARCHITECTURES.names() == ["transformer", "hf-seq2seq", "roberta-decoder"]
    summarizer = build_summarizer({**SMALL, "family": "seq2seq", "training": {"lr": 1.0}}, CODES, SUMMARIES, 0)
    assert isinstance(summarizer, TransformerSummarizer)
    assert summarizer.params["max_source_len"] == 256 and summarizer.params["d_model"] == 32
    assert "family" not in summarizer.params


def test_unknown_or_inconsistent_params_are_errors():
    with pytest.raises(ValueError, match=r"'d_modle' \(did you mean 'd_model'\?\)"):
        build_summarizer({**SMALL, "d_modle": 8}, CODES, SUMMARIES, 0)
    with pytest.raises(ValueError, match="not divisible by heads"):
        build_summarizer({**SMALL, "heads": 5}, CODES, SUMMARIES, 0)
    with pytest.raises(KeyError, match="unknown summarization architecture 'transformr'"):
        build_summarizer({**SMALL, "architecture": "transformr"}, CODES, SUMMARIES, 0)


def test_summary_vocabulary_is_a_pure_function_of_the_summaries():
    tokenizer = fit_summary_tokenizer(SUMMARIES * 3, 120, 1)
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in ("[PAD]", "[UNK]", BOS, EOS)] == [0, 1, 2, 3]
    # another process (another hash seed in the Rust trainer) learns the same tokenizer
    script = (
        "import json, sys; from csbench.summarization.models.transformer import fit_summary_tokenizer; "
        "print(fit_summary_tokenizer(json.loads(sys.argv[1]), 120, 1).to_str())"
    )
    other = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script, json.dumps(SUMMARIES * 3)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert other == tokenizer.to_str()
    # words come back as words: the decoded ids are the (normalised) text
    for summary in SUMMARIES:
        assert tokenizer.decode(tokenizer.encode(summary).ids) == summary.lower()


def test_build_is_deterministic_for_a_seed():
    a, b, c = (build_summarizer(SMALL, CODES, SUMMARIES, seed) for seed in (3, 3, 4))
    assert a.code_tokenizer.to_str() == b.code_tokenizer.to_str()
    assert a.summary_tokenizer.to_str() == b.summary_tokenizer.to_str()
    sa, sb, sc = (s.module.state_dict() for s in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_cached_step_equals_the_full_decoder():
    summarizer = build_summarizer({**SMALL, "tie_embeddings": False}, CODES, SUMMARIES, 1)
    module = summarizer.module.eval()
    batch = summarizer.collate(CODES, SUMMARIES)
    with torch.no_grad():
        full = module(batch["source_ids"], batch["source_mask"], batch["decoder_ids"])
        state = summarizer.encode(CODES)
        for t in range(batch["decoder_ids"].shape[1]):
            logits, state = summarizer.step(state, batch["decoder_ids"][:, : t + 1])
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)


def test_teacher_forcing_batch():
    summarizer = build_summarizer({**SMALL, "max_target_len": 3}, CODES, SUMMARIES, 0)
    batch = summarizer.collate(["", CODES[0]], ["returns the size of the list", "x"])
    assert batch["source_ids"][0].tolist()[0] == 1 and batch["source_mask"][0].sum() == 1  # empty code: [UNK]
    pieces = summarizer.summary_tokenizer.encode("returns the size of the list").ids[:3]
    assert batch["decoder_ids"][0].tolist() == [2, *pieces]
    assert batch["labels"][0].tolist() == [*pieces, 3]
    assert batch["labels"][1].tolist()[-1] == -100  # padded
    loss = summarizer.loss(summarizer.module, batch, label_smoothing=0.1)
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_save_and_load_give_identical_generations(tmp_path: Path):
    summarizer = build_summarizer(SMALL, CODES, SUMMARIES, 0)
    torch.manual_seed(0)
    optimizer = torch.optim.Adam(summarizer.module.parameters(), lr=3e-3)
    batch = summarizer.collate(CODES, SUMMARIES)
    for _ in range(20):
        summarizer.loss(summarizer.module, batch).backward()
        optimizer.step()
        optimizer.zero_grad()
    summarizer.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "code_tokenizer.json", "model.safetensors", "summarizer.json", "summary_tokenizer.json",
    ]  # fmt: skip
    manifest = json.loads((tmp_path / "summarizer.json").read_text())
    assert manifest["architecture"] == "transformer" and manifest["params"] == summarizer.params
    loaded = load_summarizer(tmp_path)
    assert isinstance(loaded, TransformerSummarizer)
    assert loaded.module.output.weight is loaded.module.target_embed.weight  # still tied
    for beam in (1, 3):
        decoding = Decoding(beam=beam, max_length=12)
        assert loaded.generate(CODES, decoding) == summarizer.generate(CODES, decoding)
    with pytest.raises(FileNotFoundError, match=r"no summarizer\.json"):
        load_summarizer(tmp_path / "missing")


def test_decoding_past_the_positions_is_a_clear_error():
    summarizer = build_summarizer({**SMALL, "max_target_len": 4, "max_length": 4}, CODES, SUMMARIES, 0)
    with torch.no_grad():  # make </s> impossible so the search runs to the cap
        summarizer.module.target_embed.weight[3] = -10 * summarizer.module.target_embed.weight[2]
    with pytest.raises(ValueError, match="beyond the model's 5 target positions"):
        summarizer.generate(CODES[:1], Decoding(max_length=8))
