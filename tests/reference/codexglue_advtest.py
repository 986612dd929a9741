"""Reference twin of CodeXGLUE AdvTest's scoring: ``run.py``'s ``test`` and ``evaluator/evaluator.py``.

Source: microsoft/CodeXGLUE at commit ac74a62802a0dd159b3258c78a2df8ad36cdf2b9:

* ``Text-Code/NL-code-search-Adv/code/run.py`` (blob 56e8d3eace1e513829bbe1d285b02ad6118622ae, last
  changed in 71b10f739d494a06df397094ba5cac1600572398), function ``test``: from
  ``scores=np.matmul(nl_vecs,code_vecs.T)`` to the ``predictions.jsonl`` it writes, line for line. The
  model's forward pass is left out: :func:`test_predictions` takes the vectors (float32, one row per
  record of ``test.jsonl`` in file order, as the ``SequentialSampler`` yields them) and each record's
  ``url`` and ``idx``, and returns the lines ``run.py`` writes.
* ``Text-Code/NL-code-search-Adv/evaluator/evaluator.py`` (blob a75b4944ca9d656641ed6214ce14c2709dca946e,
  last changed in 1e1914279245d1a55295cf29a8a98e5ade8a4daa): ``read_answers``, ``read_predictions`` and
  ``calculate_scores``, verbatim but reading lists of lines instead of file names (``main`` opens the
  two files and prints the dict).

What the two together do: each test query's top 100 in the order
``np.argsort(scores, axis=-1, kind='quicksort')[:, ::-1]`` (ties in that order), written as ``idx`` values;
the evaluator keys answers and predictions by ``url`` (a repeated url keeps its *last* line in both),
scores ``1/(rank+1)`` at the first position holding the answer's ``idx``, 0 when it is not among the 100,
and rounds the mean to 4 decimals.
"""

from __future__ import annotations

import json
import logging
import sys

import numpy as np


def test_predictions(nl_vecs: np.ndarray, code_vecs: np.ndarray, urls: list[str], indexs: list[int]) -> list[str]:
    """``run.py`` ``test`` from the score matrix on: the lines of ``predictions.jsonl``."""
    scores = np.matmul(nl_vecs, code_vecs.T)

    sort_ids = np.argsort(scores, axis=-1, kind="quicksort", order=None)[:, ::-1]
    lines = []
    for index, url, sort_id in zip(indexs, urls, sort_ids, strict=True):  # noqa: B007 (index unused, as in run.py)
        js = {}
        js["url"] = url
        js["answers"] = []
        for idx in sort_id[:100]:
            js["answers"].append(indexs[int(idx)])
        lines.append(json.dumps(js) + "\n")
    return lines


def answer_lines(urls: list[str], indexs: list[int]) -> list[str]:
    """``test.jsonl`` as the evaluator reads it (only ``url`` and ``idx`` matter)."""
    return [json.dumps({"url": url, "idx": idx}) + "\n" for url, idx in zip(urls, indexs, strict=True)]


def read_answers(lines: list[str]) -> dict:
    answers = {}
    for line in lines:
        line = line.strip()
        js = json.loads(line)
        answers[js["url"]] = js["idx"]
    return answers


def read_predictions(lines: list[str]) -> dict:
    predictions = {}
    for line in lines:
        line = line.strip()
        js = json.loads(line)
        predictions[js["url"]] = js["answers"]
    return predictions


def per_query_scores(answers: dict, predictions: dict) -> list[float]:
    """``calculate_scores`` up to its list ``scores`` (the reciprocal rank of each url, in answer order)."""
    scores = []
    for key in answers:
        if key not in predictions:
            logging.error("Missing prediction for url {}.".format(key))  # noqa: UP032 (verbatim)
            sys.exit()
        flag = False
        for rank, idx in enumerate(predictions[key]):
            if idx == answers[key]:
                scores.append(1 / (rank + 1))
                flag = True
                break
        if flag is False:
            scores.append(0)
    return scores


def calculate_scores(answers: dict, predictions: dict) -> dict:
    scores = per_query_scores(answers, predictions)
    result = {}
    result["MRR"] = round(np.mean(scores), 4)
    return result


def evaluate(nl_vecs: np.ndarray, code_vecs: np.ndarray, urls: list[str], indexs: list[int]) -> dict:
    """run.py's predictions scored by evaluator.py: ``{"MRR": ...}`` as it prints it."""
    predictions = read_predictions(test_predictions(nl_vecs, code_vecs, urls, indexs))
    return calculate_scores(read_answers(answer_lines(urls, indexs)), predictions)
