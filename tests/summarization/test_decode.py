"""Greedy and beam search (csbench.summarization.decode) on a toy step model whose next-token
distribution is a fixed table, where the best sequence can be found by enumeration, and on a tiny
from-scratch transformer (batching, determinism)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from csbench.summarization import decode
from csbench.summarization.models import build_summarizer
from csbench.summarization.models.base import Decoding, Summarizer

torch.set_num_threads(1)
VOCAB, START, EOS, PAD = 6, 0, 1, 2


class TableSummarizer(Summarizer):
    """Next-token logits = ``table[code, last token]``: a first-order model per code (codes are "0".."n-1")."""

    architecture = "toy"

    def __init__(self, codes: int, seed: int, eos_bias: float = 0.0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.table = 2.0 * torch.randn(codes, VOCAB, VOCAB, generator=generator)
        self.table[:, :, EOS] += eos_bias
        self.module = nn.Linear(1, 1)  # decode switches it to eval and back
        self.params = {}

    @property
    def decoder_start_id(self) -> int:
        return START

    @property
    def eos_id(self) -> int:
        return EOS

    @property
    def pad_id(self) -> int:
        return PAD

    def encode(self, codes: list[str]) -> dict[str, Tensor]:
        return {"code": torch.tensor([int(code) for code in codes])}

    def step(self, state: dict[str, Tensor], prefix: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        return self.table[state["code"], prefix[:, -1]], state

    def log_prob(self, code: int, ids: list[int], finished: bool) -> float:
        """Sum of the log-probabilities of ``ids`` (and the EOS when ``finished``) after START."""
        total, last = 0.0, START
        for token in [*ids, EOS] if finished else ids:
            total += float(torch.log_softmax(self.table[code, last], dim=-1)[token])
            last = token
        return total

    def detokenize(self, ids: list[list[int]]) -> list[str]:
        return [" ".join(map(str, row)) for row in ids]

    # unused by decoding
    def collate(self, codes: list[str], summaries: list[str]) -> dict[str, Tensor]:
        raise NotImplementedError

    def loss(self, module: nn.Module, batch: dict[str, Tensor], label_smoothing: float = 0.0) -> Tensor:
        raise NotImplementedError

    def save(self, directory: Path) -> None:
        raise NotImplementedError

    @classmethod
    def load(cls, directory: Path) -> Summarizer:
        raise NotImplementedError

    @classmethod
    def build(cls, params: dict[str, Any], codes: Any, summaries: Any, seed: int) -> Summarizer:
        raise NotImplementedError


def brute_force_best(model: TableSummarizer, code: int, max_new: int) -> tuple[float, list[int]]:
    """The best finished hypothesis by sum of log-probabilities (``generate``'s score with length
    penalty 0) among every sequence of at most ``max_new`` tokens: ended by EOS, or cut by the cap."""
    best: tuple[float, list[int]] = (-math.inf, [])
    for length in range(max_new):  # content tokens before an EOS
        for ids in itertools.product([t for t in range(VOCAB) if t != EOS], repeat=length):
            best = max(best, (model.log_prob(code, list(ids), finished=True), list(ids)))
    for ids in itertools.product([t for t in range(VOCAB) if t != EOS], repeat=max_new):  # cut by the cap
        best = max(best, (model.log_prob(code, list(ids), finished=False), list(ids)))
    return best


CODES = [str(i) for i in range(8)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy(seed):
    model = TableSummarizer(len(CODES), seed)
    greedy = decode.greedy_search(model, CODES, max_new_tokens=6)
    # with length penalty 0 a width-1 beam can never prefer a later hypothesis: it is greedy search
    assert decode.beam_search(model, CODES, beam=1, max_new_tokens=6, length_penalty=0.0) == greedy
    assert any(len(ids) > 0 for ids in greedy) and any(len(ids) < 6 for ids in greedy)


def test_greedy_takes_the_arg_max_at_every_step():
    model = TableSummarizer(len(CODES), 3)
    for code, ids in zip(CODES, decode.greedy_search(model, CODES, max_new_tokens=5), strict=True):
        last, expected = START, []
        for _ in range(5):
            last = int(model.table[int(code), last].argmax())
            if last == EOS:
                break
            expected.append(last)
        assert ids == expected


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_is_never_worse_than_greedy_and_exhaustive_beam_is_optimal(seed):
    model = TableSummarizer(len(CODES), seed)
    max_new = 3
    greedy = decode.greedy_search(model, CODES, max_new_tokens=max_new)
    beam = decode.beam_search(model, CODES, beam=4, max_new_tokens=max_new, length_penalty=0.0)
    wide = decode.beam_search(model, CODES, beam=VOCAB**max_new, max_new_tokens=max_new, length_penalty=0.0)
    for code in range(len(CODES)):
        greedy_score, beam_score, wide_score = (
            model.log_prob(code, found[code], finished=len(found[code]) < max_new) for found in (greedy, beam, wide)
        )
        assert beam_score >= greedy_score - 1e-6
        best_score, best_ids = brute_force_best(model, code, max_new)
        assert wide_score == pytest.approx(best_score, abs=1e-5)
        assert wide[code] == best_ids


def test_length_penalty_favours_longer_hypotheses():
    model = TableSummarizer(len(CODES), 5, eos_bias=1.0)
    short = decode.beam_search(model, CODES, beam=4, max_new_tokens=8, length_penalty=-1.0)
    long = decode.beam_search(model, CODES, beam=4, max_new_tokens=8, length_penalty=2.0)
    assert sum(map(len, long)) > sum(map(len, short))


def test_cap_counts_the_eos():
    model = TableSummarizer(len(CODES), 0, eos_bias=-100.0)  # never ends by itself
    assert all(len(ids) == 4 for ids in decode.greedy_search(model, CODES, max_new_tokens=4))
    assert all(len(ids) == 4 for ids in decode.beam_search(model, CODES, 3, 4, 1.0))
    # Decoding.max_length counts the summary's tokens: max_new_tokens = max_length + 1
    assert all(len(text.split()) == 5 for text in model.generate(CODES, Decoding(beam=2, max_length=4)))


def test_decoding_checks_its_fields():
    with pytest.raises(ValueError, match="beam"):
        Decoding(beam=0)
    with pytest.raises(ValueError, match="batch_size"):
        Decoding(batch_size=0)
    assert Decoding.from_params({"beam": 10, "decode_batch_size": 8}, beam=1) == Decoding(beam=1, batch_size=8)


# ---------------------------------------------------------------------------------------------- a real model
TRAIN = [
    (f"public int get{name} ( ) {{ return {name.lower()} + {i} ; }}", f"returns the {name.lower()} value")
    for i, name in enumerate(["Foo", "Bar", "Size", "Name", "Count", "Width", "Height", "Depth"])
]


@pytest.fixture(scope="module")
def tiny():
    params = {
        "architecture": "transformer", "d_model": 32, "encoder_layers": 1, "decoder_layers": 2, "heads": 2,
        "ff_dim": 64, "code_min_count": 1, "summary_min_count": 1, "summary_vocab_size": 120, "max_length": 12,
    }  # fmt: skip
    summarizer = build_summarizer(params, [c for c, _ in TRAIN], [s for _, s in TRAIN], seed=0)
    torch.manual_seed(0)  # a few steps of teacher forcing: an untrained tied-embedding model repeats <s>
    optimizer = torch.optim.Adam(summarizer.module.parameters(), lr=3e-3)
    batch = summarizer.collate([c for c, _ in TRAIN], [s for _, s in TRAIN])
    for _ in range(15):
        summarizer.loss(summarizer.module, batch).backward()
        optimizer.step()
        optimizer.zero_grad()
    return summarizer


@pytest.mark.parametrize("beam", [1, 3])
def test_batch_composition_and_order_do_not_change_outputs(tiny, beam):
    codes = [c for c, _ in TRAIN] + ["x", "public void run ( ) { while ( true ) { step ( ) ; } }"]
    alone = [tiny.generate([code], Decoding(beam=beam, max_length=10))[0] for code in codes]
    assert tiny.generate(codes, Decoding(beam=beam, max_length=10, batch_size=3)) == alone
    reversed_out = tiny.generate(codes[::-1], Decoding(beam=beam, max_length=10, batch_size=4))
    assert reversed_out[::-1] == alone
    assert tiny.generate(codes, Decoding(beam=beam, max_length=10)) == alone  # deterministic
    assert len(set(alone)) > 1


def test_generation_leaves_the_module_mode_alone(tiny):
    tiny.module.train()
    tiny.generate(["int f ( ) { }"], Decoding(beam=2, max_length=3))
    assert tiny.module.training
    tiny.module.eval()
