"""Reference twin of BEIR's retrieval evaluation (the figures CoIR and BEIR papers report), transcribed.

Sources: beir-cellar/beir at commit ef83d29307061c65d04b035b4f4e7c18bd8374af:

* ``beir/retrieval/evaluation.py`` (blob 91aaf2bff505b7a9d8669d3c98c39a0bf3394715, last changed in
  af4a85e7f601a697039c88ab83c1dc88dc975b3f), ``EvaluateRetrieval.evaluate``: nDCG@k, MAP@k, Recall@k,
  P@k by ``pytrec_eval`` (trec_eval's ``ndcg_cut``, ``map_cut``, ``recall``, ``P``), each the sum over
  the queries pytrec_eval scores divided by their number, rounded to 5 decimals. With
  ``ignore_identical_ids`` (the default) it first removes from the run every document whose id equals
  the query id (in place: the caller's run changes).
* ``beir/retrieval/custom_metrics.py`` (blob 097828c23f4f36a1e20a1c79b7e61188085082d6, last changed in
  6d811867c38b01f1afc9b5a81b1dd609eb4f897c), ``mrr``: each run list sorted by score only with Python's
  stable ``sorted(..., reverse=True)`` (so tied documents keep the run dict's insertion order, not
  trec_eval's id order), relevant = grade > 0, the sum of the reciprocal ranks divided by the number of
  *qrels* queries (``len(qrels)``, not the number of queries run), rounded to 5 decimals.

The bodies are the original's, line for line; only the class (a ``staticmethod``) and the logging of
the figures are left out.
"""

from __future__ import annotations

import pytrec_eval


def evaluate(
    qrels: dict[str, dict[str, int]],
    results: dict[str, dict[str, float]],
    k_values: list[int],
    ignore_identical_ids: bool = True,
) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    if ignore_identical_ids:
        popped = []
        for qid, rels in results.items():
            for pid in list(rels):
                if qid == pid:
                    results[qid].pop(pid)
                    popped.append(pid)

    ndcg = {}
    _map = {}
    recall = {}
    precision = {}

    for k in k_values:
        ndcg[f"NDCG@{k}"] = 0.0
        _map[f"MAP@{k}"] = 0.0
        recall[f"Recall@{k}"] = 0.0
        precision[f"P@{k}"] = 0.0

    map_string = "map_cut." + ",".join([str(k) for k in k_values])
    ndcg_string = "ndcg_cut." + ",".join([str(k) for k in k_values])
    recall_string = "recall." + ",".join([str(k) for k in k_values])
    precision_string = "P." + ",".join([str(k) for k in k_values])
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {map_string, ndcg_string, recall_string, precision_string})
    scores = evaluator.evaluate(results)

    for query_id in scores.keys():  # noqa: SIM118 (verbatim)
        for k in k_values:
            ndcg[f"NDCG@{k}"] += scores[query_id]["ndcg_cut_" + str(k)]
            _map[f"MAP@{k}"] += scores[query_id]["map_cut_" + str(k)]
            recall[f"Recall@{k}"] += scores[query_id]["recall_" + str(k)]
            precision[f"P@{k}"] += scores[query_id]["P_" + str(k)]

    for k in k_values:
        ndcg[f"NDCG@{k}"] = round(ndcg[f"NDCG@{k}"] / len(scores), 5)
        _map[f"MAP@{k}"] = round(_map[f"MAP@{k}"] / len(scores), 5)
        recall[f"Recall@{k}"] = round(recall[f"Recall@{k}"] / len(scores), 5)
        precision[f"P@{k}"] = round(precision[f"P@{k}"] / len(scores), 5)

    return ndcg, _map, recall, precision


def mrr(
    qrels: dict[str, dict[str, int]],
    results: dict[str, dict[str, float]],
    k_values: list[int],
) -> tuple[dict[str, float]]:
    MRR = {}

    for k in k_values:
        MRR[f"MRR@{k}"] = 0.0

    k_max, top_hits = max(k_values), {}

    for query_id, doc_scores in results.items():
        top_hits[query_id] = sorted(doc_scores.items(), key=lambda item: item[1], reverse=True)[0:k_max]

    for query_id in top_hits:
        query_relevant_docs = set([doc_id for doc_id in qrels[query_id] if qrels[query_id][doc_id] > 0])
        for k in k_values:
            for rank, hit in enumerate(top_hits[query_id][0:k]):
                if hit[0] in query_relevant_docs:
                    MRR[f"MRR@{k}"] += 1.0 / (rank + 1)
                    break

    for k in k_values:
        MRR[f"MRR@{k}"] = round(MRR[f"MRR@{k}"] / len(qrels), 5)

    return MRR
