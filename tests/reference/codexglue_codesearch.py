"""Reference twin of the code-search scoring of GraphCodeBERT and UniXcoder (filtered CodeSearchNet
against its ``codebase``, and CoSQA retrieval in UniXcoder's setting).

Source: microsoft/CodeBERT at commit c0de43d3aaf38e89290f1efb771f8de845e7a489:

* ``GraphCodeBERT/codesearch/run.py`` (blob cca171a9e7c8561b6d18942e1db5ce092249d78f, last changed in
  ec1751e669aad5cda779b70629fca0bd1290a280), function ``evaluate``;
* ``UniXcoder/downstream-tasks/code-search/run.py`` (blob 4dda2198bc471ec82925ac23482e52c666ae5a02, last
  changed in a3200fbc93d91dbd6172674dab6d57bbfcf125c6), function ``evaluate`` and, for CoSQA,
  ``TextDataset`` / ``convert_examples_to_features``.

The two ``evaluate`` bodies are the same from
``scores=np.matmul(nl_vecs,code_vecs.T)`` on; :func:`evaluate` is that body, line for line, taking the
vectors (float32; queries in the order of the query file, codes in the order of the codebase file) and
the urls instead of running the model. What it does: each query's codebase entries in the order
``np.argsort(scores, axis=-1, kind='quicksort')[:, ::-1]``; its rank is the position of the *first* entry
whose url equals the query's among the top 1,000 (a url repeated in the codebase: the best-placed entry
counts, the later ones are neither answers nor distractors); not found there (beyond 1,000, or its url in
no entry): 0; every query line counts, a repeated query url as often as it appears; the MRR is the plain
mean, unrounded.

CoSQA in UniXcoder's setting (its README: ``--test_data_file cosqa-retrieval-test-500.json
--codebase_file code_idx_map.txt``): ``TextDataset`` reads the codebase file, a JSON object
``{code: retrieval_idx}``, in the object's order, each entry's "url" being its ``retrieval_idx``; a query
of the json file has url ``js["retrieval_idx"]`` (``convert_examples_to_features``: ``js['url'] if "url"
in js else js["retrieval_idx"]``). :func:`cosqa_urls` reads the urls that way.
"""

from __future__ import annotations

import json

import numpy as np


def reciprocal_ranks(nl_vecs: np.ndarray, code_vecs: np.ndarray, nl_urls: list, code_urls: list) -> list[float]:
    """``evaluate`` up to its list ``ranks`` (1/rank, or 0), one per query line."""
    scores = np.matmul(nl_vecs, code_vecs.T)
    return reciprocal_ranks_of_scores(scores, nl_urls, code_urls)


def reciprocal_ranks_of_scores(scores: np.ndarray, nl_urls: list, code_urls: list) -> list[float]:
    """The same from a given score matrix (a model whose scores are not inner products: BM25)."""
    sort_ids = np.argsort(scores, axis=-1, kind="quicksort", order=None)[:, ::-1]

    ranks = []
    for url, sort_id in zip(nl_urls, sort_ids, strict=True):
        rank = 0
        find = False
        for idx in sort_id[:1000]:
            if find is False:
                rank += 1
            if code_urls[idx] == url:
                find = True
        if find:
            ranks.append(1 / rank)
        else:
            ranks.append(0)
    return ranks


def evaluate(nl_vecs: np.ndarray, code_vecs: np.ndarray, nl_urls: list, code_urls: list) -> dict:
    """``{"eval_mrr": ...}`` as ``evaluate`` returns it."""
    ranks = reciprocal_ranks(nl_vecs, code_vecs, nl_urls, code_urls)
    result = {"eval_mrr": float(np.mean(ranks))}
    return result


def cosqa_urls(query_file: str, codebase_file: str) -> tuple[list, list]:
    """(query urls, codebase urls) as UniXcoder's ``TextDataset`` reads ``cosqa-retrieval-*.json`` and
    ``code_idx_map.txt``: a query's url is its ``retrieval_idx``; the codebase entries come in the JSON
    object's order, each entry's url its value."""
    with open(query_file) as f:
        queries = json.load(f)
    with open(codebase_file) as f:
        codebase = json.load(f)
    nl_urls = [js["url"] if "url" in js else js["retrieval_idx"] for js in queries]
    code_urls = [codebase[key] for key in codebase]
    return nl_urls, code_urls
