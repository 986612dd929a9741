"""CodeXGLUE code-to-text's own beam search (``beam_style: codexglue`` of the ``roberta-decoder``
architecture), over the incremental-step protocol of
:class:`~csbench.summarization.models.base.Summarizer`.

A re-implementation of microsoft/CodeXGLUE ``Code-Text/code-to-text/code/model.py`` at commit
ac74a62802a0dd159b3258c78a2df8ad36cdf2b9: the prediction loop of ``Seq2Seq.forward`` (lines 74-103) and
the ``Beam`` class (lines 107-218), one code at a time as theirs runs. Differences from Hugging Face's
search (:mod:`csbench.summarization.decode`): a finished hypothesis keeps its slot in the beam (its row
cannot extend: score -1e20), finished hypotheses are collected from the top ``beam`` rows only, the
search stops once the top row ends with EOS and ``beam`` hypotheses have finished, and hypotheses are
ranked by their raw sum of log-probabilities (no length penalty). The test
``tests/summarization/test_roberta_decoder.py`` checks it token for token against a transcription of
their code (``tests/reference/codexglue_code_to_text_model.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from csbench.models.threads import run_batches, tokenizer_lock
from csbench.summarization.models.base import Summarizer


class CodeXGlueBeam:
    """Their ``Beam`` (model.py lines 107-218) for one code: scores, back-pointers, finished list."""

    def __init__(self, size: int, sos: int, eos: int, device: torch.device) -> None:
        self.size, self.eos = size, eos
        self.scores = torch.zeros(size, device=device)
        self.prev_ks: list[Tensor] = []
        first = torch.zeros(size, dtype=torch.long, device=device)
        first[0] = sos
        self.next_ys: list[Tensor] = [first]
        self.eos_top = False
        self.finished: list[tuple[float, int, int]] = []  # (score, time step, row)

    def current_state(self) -> Tensor:
        """The tokens of the last step, ``(size, 1)`` (``getCurrentState``)."""
        return self.next_ys[-1].view(-1, 1)

    def advance(self, word_lk: Tensor) -> None:
        """One step from the log-probabilities ``(size, vocab)`` of every row (``advance``)."""
        num_words = word_lk.size(1)
        if self.prev_ks:
            beam_lk = word_lk + self.scores.unsqueeze(1).expand_as(word_lk)
            beam_lk[self.next_ys[-1] == self.eos] = -1e20  # an EOS row has no children
        else:
            beam_lk = word_lk[0]
        best_scores, best_ids = beam_lk.view(-1).topk(self.size, 0, True, True)
        self.scores = best_scores
        prev_k = best_ids // num_words
        self.prev_ks.append(prev_k)
        self.next_ys.append(best_ids - prev_k * num_words)
        for i in (self.next_ys[-1] == self.eos).nonzero().flatten().tolist():
            self.finished.append((self.scores[i], len(self.next_ys) - 1, i))
        if int(self.next_ys[-1][0]) == self.eos:
            self.eos_top = True

    def done(self) -> bool:
        return self.eos_top and len(self.finished) >= self.size

    def final(self) -> list[tuple[float, int, int]]:
        """The ranked hypotheses (``getFinal``): finished ones, topped up with the best running rows."""
        if not self.finished:
            self.finished.append((self.scores[0], len(self.next_ys) - 1, 0))
        self.finished.sort(key=lambda a: -a[0])
        if len(self.finished) != self.size:
            unfinished = [
                (self.scores[i], len(self.next_ys) - 1, i)
                for i in range(self.next_ys[-1].size(0))
                if int(self.next_ys[-1][i]) != self.eos
            ]
            unfinished.sort(key=lambda a: -a[0])
            self.finished += unfinished[: self.size - len(self.finished)]
        return self.finished[: self.size]

    def hypothesis(self, timestep: int, k: int) -> list[int]:
        """The tokens of row ``k`` at ``timestep`` walked back (``getHyp``), cut at EOS (``buildTargetTokens``)."""
        tokens: list[int] = []
        for j in range(len(self.prev_ks[:timestep]) - 1, -1, -1):
            tokens.append(int(self.next_ys[j + 1][k]))
            k = int(self.prev_ks[j][k])
        tokens.reverse()
        return tokens[: tokens.index(self.eos)] if self.eos in tokens else tokens


def codexglue_beam_search(summarizer: Summarizer, codes: Sequence[str], beam: int, max_steps: int) -> list[list[int]]:
    """The best hypothesis of each code under their search (at most ``max_steps`` decoding steps, EOS
    among them: their ``max_length``), start token and EOS removed. One code at a time as theirs runs;
    on CPU each on one torch thread, several codes at once (csbench.models.threads: the hypotheses do
    not depend on the thread count)."""
    codes = list(codes)
    module = summarizer.module
    was_training = module.training
    module.eval()
    out: list[list[int]] = [[] for _ in codes]
    device = summarizer.device

    def compute(k: int) -> list[int]:
        repeat = torch.zeros(beam, dtype=torch.long, device=device)  # the code's row, once per beam
        with tokenizer_lock:  # encode tokenizes
            state = summarizer.encode([codes[k]])
        state = summarizer.reorder(state, repeat)
        search = CodeXGlueBeam(beam, summarizer.decoder_start_id, summarizer.eos_id, device)
        input_ids = search.current_state()
        for _ in range(max_steps):
            if search.done():
                break
            logits, state = summarizer.step(state, input_ids)
            search.advance(torch.log_softmax(logits.float(), dim=-1))
            origin = search.prev_ks[-1]
            state = summarizer.reorder(state, origin)
            input_ids = torch.cat((input_ids.index_select(0, origin), search.current_state()), dim=-1)
        _, timestep, k_best = search.final()[0]
        return search.hypothesis(timestep, k_best)

    def sink(k: int, ids: list[int]) -> None:
        out[k] = ids

    try:
        run_batches(compute, len(codes), sink, device)
    finally:
        module.train(was_training)
    return out
