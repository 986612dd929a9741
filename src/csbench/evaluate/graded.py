"""The graded protocol's part of a search (``qrels``, :class:`csbench.evaluate.protocols.Graded`): whose
documents are relevant to each query, and how one query's top list becomes its rank, its trec_eval
measures and its TREC run lines.

Relevance comes from the dataset's judgements (``qrels.parquet``, BEIR's ``qrels/<split>.tsv``) where it
has them; else a query's own code is its one relevant document (grade 1), or, against a release's
codebase, the codebase entries with the query's url (as ``full-corpus`` matches them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from csbench.evaluate import qrels as trec
from csbench.evaluate.outcomes import GradedOutcome


def graded_relevance(
    pool: pd.DataFrame, codebase: pd.DataFrame | None, judgements: pd.DataFrame | None, split: str = "test"
) -> list[dict[str, int]]:
    """Per record of ``pool`` (the test split, in its order) the graded relevant documents: its rows of
    ``judgements`` (QRELS_COLUMNS) of ``split``; without judgements, its url's codebase entries (a
    non-empty ``codebase``) or its own id, grade 1."""
    ids = pool["id"].tolist()
    if judgements is not None:
        table = trec.qrels_dict(judgements, split)
        return [dict(table.get(query, {})) for query in ids]
    if codebase is not None and len(codebase) > 0:
        by_url: dict[str, dict[str, int]] = {}
        for doc, url in zip(codebase["id"].tolist(), codebase["url"].tolist(), strict=True):
            by_url.setdefault(url, {})[doc] = 1
        return [dict(by_url.get(url, {})) for url in pool["url"].tolist()]
    return [{query: 1} for query in ids]


def record_graded(
    outcome: GradedOutcome,
    query_id: str,
    doc_ids: list[str],
    scores: np.ndarray,
    relevant: dict[str, int],
    n_candidates: int,
    depth: int,
    cutoffs: tuple[int, ...],
    run_name: str,
) -> None:
    """Append one query's top list (``doc_ids`` with their ``scores``, any order, NaN-free) to
    ``outcome``: its trec_eval measures, its rank (first relevant document, ``depth + 1`` when none is
    listed), its best document, and its TREC lines in trec_eval's order with the scores written
    exactly (``repr``), so trec_eval reading the run file scores what csbench scored."""
    order = trec.trec_order(doc_ids, scores)
    ranked = [doc_ids[j] for j in order]
    ranked_scores = np.asarray(scores, dtype=np.float64)[order]
    metrics, rank = trec.ordered_metrics(ranked, relevant, cutoffs)
    outcome.query_ids.append(query_id)
    outcome.ranks.append(rank if rank is not None else depth + 1)
    outcome.n_candidates.append(int(n_candidates))
    outcome.top1.append(ranked[0] if ranked else "")
    outcome.graded.append(metrics)
    outcome.run_lines.add(query_id, ranked, ranked_scores, run_name)  # scores written exactly (repr)
