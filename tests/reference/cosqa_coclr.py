"""Reference twin of CoSQA's own retrieval scoring (the CoSQA paper's code-search MRR).

Source: Jun-jie-Huang/CoCLR at commit 14ebcacf9e9bc3e7109102632bc63047876f27d2,
``code_search/run_siamese_test.py`` (blob a83dbc60190f9d87e190499754b7dbbddaec90f1, last changed in
e495dd28524641d559d5f54b3afd6a163dc35062), function ``retrieval`` (``evaluate`` scores the dev file the
same way), from ``scores = torch.cat(scores, 1)`` on, line for line. Its model scores a pair with an MLP
over ``(nl, code, nl - code, nl * code)``; :func:`mrr` takes that (queries × 6,267) score matrix instead.
Codes are the columns in the order of ``code_idx_map.txt``'s JSON object (``RetievalDataset``); a query's
answer is the column ``example.idx`` = its ``retrieval_idx``, which equals the code's position because the
file's indices run 0, 1, ... in object order.

What it does, and how it differs from UniXcoder's scoring of the same files (csbench's ``full-corpus``):
every one of the 6,267 codes is ranked (no cut at 1,000: a rank beyond 1,000 still adds ``1/rank``), and
the order is ``torch.argsort(-scores[idx])`` (ties in torch's order of the negated scores, not numpy's
reversed order).
"""

from __future__ import annotations

import torch


def mrr(scores: torch.Tensor, answers: list[int]) -> float:
    """``retrieval``'s MRR over the rows of ``scores`` (query ``idx`` answered by column ``answers[idx]``)."""
    results = []
    mrr = 0
    for idx in range(len(scores)):
        rank = torch.argsort(-scores[idx]).tolist()
        item = {}
        item["ans"] = answers[idx]
        item["rank"] = rank
        item["rr"] = 1 / (rank.index(answers[idx]) + 1)
        mrr += item["rr"]
        results.append(item)
    mrr = mrr / len(scores)
    return mrr
