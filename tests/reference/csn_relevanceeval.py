"""Reference twin of the CodeSearchNet Challenge scorer: ``relevanceeval.py``, transcribed.

Source: github/CodeSearchNet, ``src/relevanceeval.py`` at commit
106e827405c968597da938f6b373d30183918869 (blob 7d781e18218d1e02c14f3dcd4f33bb16ef1c7657; the file last
changed in e792e1caea20fbd4fba439565fe20c10d4798435). ``load_relevances``, ``load_predictions``,
``coverage_per_language`` and ``ndcg`` are the original's bodies, line for line (pandas ``read_csv``,
``pivot_table(aggfunc=np.mean)``, ``defaultdict`` lookups that yield an empty list for an unpredicted
query, ``np.log2``, sums in the annotation pivot's order). Only the command-line shell is left out
(docopt and dpu_utils' ``run_and_debug``): :func:`run` returns, per predicted language, the four
figures the original's ``run`` prints, unrounded; :func:`printed` formats them as it prints them
(``.2f`` for the coverage percentages, ``.3f`` for the NDCGs).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, List  # noqa: UP035 (the original's annotations, kept verbatim)

import numpy as np
import pandas as pd


def load_relevances(filepath: str) -> Dict[str, Dict[str, Dict[str, float]]]:  # noqa: UP006
    relevance_annotations = pd.read_csv(filepath)
    per_query_language = relevance_annotations.pivot_table(
        index=["Query", "Language", "GitHubUrl"], values="Relevance", aggfunc=np.mean
    )

    # Map language -> query -> url -> float
    relevances = defaultdict(lambda: defaultdict(dict))  # type: Dict[str, Dict[str, Dict[str, float]]]
    for (query, language, url), relevance in per_query_language["Relevance"].items():
        relevances[language.lower()][query.lower()][url] = relevance
    return relevances


def load_predictions(filepath: str, max_urls_per_language: int = 300) -> Dict[str, Dict[str, List[str]]]:  # noqa: UP006
    prediction_data = pd.read_csv(filepath)

    # Map language -> query -> Ranked List of URL
    predictions = defaultdict(lambda: defaultdict(list))
    for _, row in prediction_data.iterrows():
        predictions[row["language"].lower()][row["query"].lower()].append(row["url"])
    for query_data in predictions.values():
        for query, ranked_urls in query_data.items():
            query_data[query] = ranked_urls[:max_urls_per_language]

    return predictions


def coverage_per_language(
    predictions: Dict[str, List[str]],  # noqa: UP006
    relevance_scores: Dict[str, Dict[str, float]],  # noqa: UP006
    with_positive_relevance: bool = False,
) -> float:
    """
    Compute the % of annotated URLs that appear in the algorithm's predictions.
    """
    num_annotations = 0
    num_covered = 0
    for query, url_data in relevance_scores.items():
        urls_in_predictions = set(predictions[query])
        for url, relevance in url_data.items():
            if not with_positive_relevance or relevance > 0:
                num_annotations += 1
                if url in urls_in_predictions:
                    num_covered += 1

    return num_covered / num_annotations


def ndcg(
    predictions: Dict[str, List[str]],  # noqa: UP006
    relevance_scores: Dict[str, Dict[str, float]],  # noqa: UP006
    ignore_rank_of_non_annotated_urls: bool = True,
) -> float:
    num_results = 0
    ndcg_sum = 0

    for query, query_relevance_annotations in relevance_scores.items():
        current_rank = 1
        query_dcg = 0
        for url in predictions[query]:
            if url in query_relevance_annotations:
                query_dcg += (2 ** query_relevance_annotations[url] - 1) / np.log2(current_rank + 1)
                current_rank += 1
            elif not ignore_rank_of_non_annotated_urls:
                current_rank += 1

        query_idcg = 0
        for i, ideal_relevance in enumerate(sorted(query_relevance_annotations.values(), reverse=True), start=1):
            query_idcg += (2**ideal_relevance - 1) / np.log2(i + 1)
        if query_idcg == 0:
            # We have no positive annotations for the given query, so we should probably not penalize anyone about this.
            continue
        num_results += 1
        ndcg_sum += query_dcg / query_idcg
    return ndcg_sum / num_results


def run(annotations_csv: str, predictions_csv: str) -> dict[str, dict[str, float]]:
    """The figures the original's ``run`` prints, per predicted language (sorted), unrounded:
    ``coverage`` and ``coverage_positive`` (fractions, printed as percentages), ``ndcg_within``
    ("NDCG") and ``ndcg_all`` ("NDCG (full ranking)")."""
    relevance_scores = load_relevances(annotations_csv)
    predictions = load_predictions(predictions_csv)

    languages_predicted = sorted(set(predictions.keys()))
    return {
        language: {
            "coverage": coverage_per_language(predictions[language], relevance_scores[language]),
            "coverage_positive": coverage_per_language(
                predictions[language], relevance_scores[language], with_positive_relevance=True
            ),
            "ndcg_within": ndcg(predictions[language], relevance_scores[language]),
            "ndcg_all": ndcg(
                predictions[language], relevance_scores[language], ignore_rank_of_non_annotated_urls=False
            ),
        }
        for language in languages_predicted
    }


def printed(figures: dict[str, dict[str, float]]) -> dict[str, dict[str, str]]:
    """:func:`run`'s figures as the original prints them: percentages with 2 decimals, NDCGs with 3."""
    return {
        language: {
            "coverage": f"{f['coverage'] * 100:.2f}%",
            "coverage_positive": f"{f['coverage_positive'] * 100:.2f}%",
            "ndcg_within": f"{f['ndcg_within']:.3f}",
            "ndcg_all": f"{f['ndcg_all']:.3f}",
        }
        for language, f in figures.items()
    }
