"""Greedy and beam search over the incremental-step protocol of
:class:`~csbench.summarization.models.base.Summarizer` (encode once, step with a cache, reorder rows).

Semantics: Hugging Face transformers 5.23 ``generate`` (``generation/utils.py``: ``_sample`` without
sampling, ``_beam_search``) with ``do_sample=False``, ``num_beams=beam``, ``length_penalty``,
``early_stopping=False``, ``max_new_tokens=max_length + 1`` (``max_length`` counts the summary's tokens,
the EOS excluded, so a summary of ``max_length`` tokens still ends with its EOS; one cut by the cap keeps
its ``max_length + 1`` tokens, as ``generate`` does) and no logits processor:

* **greedy** (``beam == 1``, as ``generate`` dispatches): the arg-max token of each row until every row
  emitted EOS or the cap; a finished row is dropped from the state (``generate`` pads it instead: the
  same tokens, less work).
* **beam search**: a transcription of ``_beam_search`` and its helpers (``_get_top_k_continuations``,
  ``_get_running_beams_for_next_iteration``, ``_update_finished_beams``, ``_check_early_stop_heuristic``,
  ``_beam_search_has_unfinished_sequences``), with one EOS id: each step takes the top ``2 x beam``
  continuations of the accumulated log-probabilities over all beams, keeps the best ``beam`` that did
  not finish as the running beams, and merges the finished ones among the top ``beam`` into the
  finished hypotheses, scored ``sum log p / generated_length ** length_penalty`` (EOS counted). The
  search of an input stops when no running beam can beat its worst finished hypothesis under
  ``generate``'s heuristic (``early_stopping=False``: the running beam's score normalised by the current
  length), or at the cap, when every continuation is finished.

Codes are decoded in batches of ``Decoding.batch_size`` after sorting by length (less padding); the
output order is the input order. Everything runs under ``torch.inference_mode`` with the module in eval
mode (restored after), each CPU batch on one torch thread (several batches at once:
:func:`csbench.models.threads.run_batches`), so a generation is a pure function of the weights and the
codes, whatever the thread count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from csbench.models.threads import run_batches, tokenizer_lock
from csbench.summarization.models.base import Decoding, Summarizer

NEG = -1.0e9  # generate's "impossible" score


def generate(summarizer: Summarizer, codes: Sequence[str], decoding: Decoding) -> list[str]:
    """One summary per code (see the module docstring); batched, deterministic."""
    return summarizer.detokenize(generate_ids(summarizer, codes, decoding))


def generate_ids(summarizer: Summarizer, codes: Sequence[str], decoding: Decoding) -> list[list[int]]:
    """The generated ids of each code, the start token and everything from EOS on removed. On CPU each
    batch is decoded on one torch thread, several at once (csbench.models.threads): the summaries do not
    depend on the thread count."""
    codes = list(codes)
    order = sorted(range(len(codes)), key=lambda i: (len(codes[i]), i))
    chunks = [order[start : start + decoding.batch_size] for start in range(0, len(order), decoding.batch_size)]
    out: list[list[int]] = [[] for _ in codes]

    def compute(k: int) -> list[list[int]]:
        batch = [codes[i] for i in chunks[k]]
        with tokenizer_lock:  # encode tokenizes
            state = summarizer.encode(batch)
        if decoding.beam == 1:
            return greedy_search(summarizer, batch, decoding.max_length + 1, state)
        return beam_search(summarizer, batch, decoding.beam, decoding.max_length + 1, decoding.length_penalty, state)

    def sink(k: int, found: list[list[int]]) -> None:
        for i, ids in zip(chunks[k], found, strict=True):
            out[i] = ids

    module = summarizer.module
    was_training = module.training
    module.eval()
    try:
        run_batches(compute, len(chunks), sink, summarizer.device)
    finally:
        module.train(was_training)
    return out


def _strip(ids: list[int], eos_id: int) -> list[int]:
    """``ids`` up to (without) the first EOS."""
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def greedy_search(
    summarizer: Summarizer, codes: list[str], max_new_tokens: int, state: Any = None
) -> list[list[int]]:
    """Arg-max decoding of ``codes`` (at most ``max_new_tokens`` tokens each, EOS included); ``state``:
    ``summarizer.encode(codes)`` when the caller has it."""
    eos = summarizer.eos_id
    state = summarizer.encode(codes) if state is None else state
    device = summarizer.device
    prefix = torch.full((len(codes), 1), summarizer.decoder_start_id, dtype=torch.long, device=device)
    active = torch.arange(len(codes), device=device)  # input row of each state row
    done: list[list[int]] = [[] for _ in codes]
    for _ in range(max_new_tokens):
        logits, state = summarizer.step(state, prefix)
        prefix = torch.cat((prefix, logits.argmax(dim=-1, keepdim=True)), dim=1)
        finished = prefix[:, -1] == eos
        if bool(finished.any()):
            for row in finished.nonzero().flatten().tolist():
                done[int(active[row])] = prefix[row, 1:].tolist()
            keep = (~finished).nonzero().flatten()
            if keep.numel() == 0:
                break
            state, prefix, active = summarizer.reorder(state, keep), prefix[keep], active[keep]
    for row, index in enumerate(active.tolist()):  # cut by the cap
        if not done[index]:
            done[index] = prefix[row, 1:].tolist()
    return [_strip(ids, eos) for ids in done]


def beam_search(
    summarizer: Summarizer,
    codes: list[str],
    beam: int,
    max_new_tokens: int,
    length_penalty: float,
    state: Any = None,
) -> list[list[int]]:
    """Hugging Face ``_beam_search`` (``early_stopping=False``, one EOS) of ``codes``: the best finished
    hypothesis of each, at most ``max_new_tokens`` tokens (EOS included); ``state``:
    ``summarizer.encode(codes)`` when the caller has it."""
    batch, eos, device = len(codes), summarizer.eos_id, summarizer.device
    state = summarizer.encode(codes) if state is None else state
    state = summarizer.reorder(state, torch.arange(batch, device=device).repeat_interleave(beam))
    total = 1 + max_new_tokens  # generate's max_length: the start token and the new ones
    keep = 2 * beam  # max(2, 1 + n_eos) * beam
    top_beam_mask = torch.cat((torch.ones(beam, dtype=torch.bool), torch.zeros(keep - beam, dtype=torch.bool)))
    top_beam_mask = top_beam_mask.to(device)
    fill = eos if summarizer.pad_id == 0 else summarizer.pad_id  # generate: `pad_token_id or eos_token_id`
    running = torch.full((batch, beam, total), fill, dtype=torch.long, device=device)
    running[:, :, 0] = summarizer.decoder_start_id
    sequences = running.clone()
    running_scores = torch.zeros((batch, beam), device=device)
    running_scores[:, 1:] = NEG
    scores = torch.full((batch, beam), NEG, device=device)
    is_finished = torch.zeros((batch, beam), dtype=torch.bool, device=device)
    can_improve = torch.ones((batch, 1), dtype=torch.bool, device=device)
    offsets = torch.arange(batch, device=device).view(-1, 1) * beam
    cur_len = 1
    while True:
        logits, state = summarizer.step(state, running[:, :, :cur_len].reshape(batch * beam, cur_len))
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        vocab = log_probs.shape[-1]
        log_probs = (log_probs.view(batch, beam, vocab) + running_scores[:, :, None]).view(batch, beam * vocab)
        # top-k continuations over all beams
        topk_scores, topk_indices = torch.topk(log_probs, k=keep)
        source_beams = topk_indices // vocab
        topk_sequences = _gather_beams(running, source_beams)
        topk_sequences[:, :, cur_len] = topk_indices % vocab
        hits = (topk_sequences[:, :, cur_len] == eos) | (cur_len + 1 >= total)
        # the running beams of the next step: the best unfinished continuations
        running_candidates = topk_scores + hits.float() * NEG
        next_indices = torch.topk(running_candidates, k=beam)[1]
        running = _gather_beams(topk_sequences, next_indices)
        running_scores = _gather_beams(running_candidates, next_indices)
        rows = (_gather_beams(source_beams, next_indices) + offsets).flatten()
        # the finished hypotheses: merge the top-beam ones that just finished
        just_finished = hits & top_beam_mask[None, :]
        finished_scores = topk_scores / ((cur_len + 1 - 1) ** length_penalty)
        finished_scores = finished_scores + (~can_improve).float() * NEG + (~just_finished).float() * NEG
        merged_scores = torch.cat((scores, finished_scores), dim=1)
        best = torch.topk(merged_scores, k=beam)[1]
        sequences = _gather_beams(torch.cat((sequences, topk_sequences), dim=1), best)
        scores = _gather_beams(merged_scores, best)
        is_finished = _gather_beams(torch.cat((is_finished, just_finished), dim=1), best)
        state = summarizer.reorder(state, rows)
        cur_len += 1
        best_running = running_scores[:, :1] / ((cur_len - 1) ** length_penalty)
        worst_finished = torch.where(is_finished, torch.min(scores, dim=1, keepdim=True)[0], NEG)
        can_improve = can_improve & torch.any(best_running > worst_finished, dim=-1, keepdim=True)
        if not (bool(can_improve.any()) and not bool(hits.all())):
            break
    return [_strip(sequences[i, 0, 1:cur_len].tolist(), eos) for i in range(batch)]


def _gather_beams(tensor: Tensor, indices: Tensor) -> Tensor:
    """``generate``'s ``_gather_beams``: ``tensor[b, indices[b, j], ...]``."""
    while indices.dim() < tensor.dim():
        indices = indices.unsqueeze(-1)
    return torch.take_along_dim(tensor, indices, dim=1)


def sequence_log_prob(summarizer: Summarizer, code: str, ids: list[int]) -> float:
    """The log-probability the model gives ``ids`` followed by EOS after ``code`` (tests, diagnostics)."""
    module = summarizer.module
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            state = summarizer.encode([code])
            prefix = torch.tensor([[summarizer.decoder_start_id]], device=summarizer.device)
            total = 0.0
            for token in [*ids, summarizer.eos_id]:
                logits, state = summarizer.step(state, prefix)
                total += float(torch.log_softmax(logits.float(), dim=-1)[0, token])
                prefix = torch.cat((prefix, torch.tensor([[token]], device=prefix.device)), dim=1)
    finally:
        module.train(was_training)
    return total
