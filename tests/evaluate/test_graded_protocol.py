"""The graded protocol (``qrels``) through the search: a corpus (codebase) of documents, test queries with
graded relevance judgements, both search paths (vectors: the ranking engine; scores only: BM25's row
path). What it must give: trec_eval's measures of the TREC run file it writes (read back by pytrec_eval,
identical to 1e-9), the same outcome on both paths, and on a single-answer pool the MRR and nDCG@10 of
the single-answer protocols."""

from __future__ import annotations

import gzip
import io

import numpy as np
import pandas as pd
import pytest
from test_twin_csn_gecs import ScoreRetriever as Scores  # the same scores without vectors (BM25's path)
from test_twin_csn_gecs import VectorRetriever as Vectors  # a dense retriever over fixed vectors

from csbench.evaluate.outcomes import GradedOutcome
from csbench.evaluate.protocols import PROTOCOLS
from csbench.evaluate.runner import evaluate_pool, trec_bytes

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier (a dev dependency) is not installed")

CUTOFFS = PROTOCOLS.get("qrels").cutoffs
TREC_MEASURES = {
    "ndcg_cut." + ",".join(map(str, CUTOFFS)),
    "map_cut." + ",".join(map(str, CUTOFFS)),
    "recall." + ",".join(map(str, CUTOFFS)),
    "P." + ",".join(map(str, CUTOFFS)),
}
OURS_TO_TREC = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "p": "P"}


def _corpus(
    n_docs: int, n_queries: int, seed: int, tied: bool
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """A test split of queries, a codebase of documents, graded judgements and the vectors (small
    integers where ``tied``: many exact ties)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:04d}" for i in rng.permutation(n_docs)]  # ids out of file order
    queries = [f"q{i:03d}" for i in range(n_queries)]
    dim = 8
    if tied:
        doc_vectors = rng.integers(-1, 2, size=(n_docs, dim)).astype(np.float32)
        query_vectors = rng.integers(-1, 2, size=(n_queries, dim)).astype(np.float32)
    else:
        doc_vectors = rng.normal(size=(n_docs, dim)).astype(np.float32)
        query_vectors = rng.normal(size=(n_queries, dim)).astype(np.float32)
    rows = []
    for q in range(n_queries):
        judged = rng.choice(n_docs, size=int(rng.integers(1, 6)), replace=False)
        for d in judged:
            rows.append(("test", queries[q], docs[d], int(rng.integers(0, 4))))
    judgements = pd.DataFrame(rows, columns=["split", "query_id", "doc_id", "relevance"])
    judgements = judgements.drop_duplicates(["query_id", "doc_id"])
    # every query needs one relevant document; the first judged one gets grade 2
    first = judgements.groupby("query_id").head(1).index
    judgements.loc[first, "relevance"] = 2
    judgements = pd.concat([judgements, pd.DataFrame([("valid", queries[0], docs[0], 1)], columns=judgements.columns)])
    codebase = pd.DataFrame({"id": docs, "language": "python", "query": "", "code": [f"text {d}" for d in docs],
                             "func_name": "", "url": docs})  # fmt: skip
    pool = pd.DataFrame({"id": queries, "language": "python", "query": [f"ask {q}" for q in queries],
                         "code": "", "func_name": "", "url": ""})  # fmt: skip
    vectors = {("code", f"text {d}"): doc_vectors[i] for i, d in enumerate(docs)}
    vectors |= {("query", f"ask {q}"): query_vectors[i] for i, q in enumerate(queries)}
    return pool, codebase, judgements, vectors


def _search(retriever_type, pool, codebase, judgements, vectors, protocols=("qrels",)):
    from csbench.evaluate.runner import build_index, search

    made = iter([retriever_type(vectors), retriever_type(vectors)])
    index = build_index(lambda: next(made), pool, list(protocols), codebase)
    outcomes, _ = search(index, pool, list(protocols), 10, "graded", progress=False, codebase=codebase,
                         qrels=judgements, latency=False)  # fmt: skip
    return outcomes


def _run_file(outcome) -> dict[str, dict[str, float]]:
    """The TREC run file as evaluate writes it, read back as trec_eval reads it."""
    text = gzip.GzipFile(fileobj=io.BytesIO(trec_bytes(outcome.run_lines))).read().decode()
    run: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        query, _, doc, _, score, _ = line.split()
        run.setdefault(query, {})[doc] = float(score)
    return run


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("retriever", [Vectors, Scores])
def test_measures_equal_trec_eval_on_the_run_file(retriever, tied: bool) -> None:
    pool, codebase, judgements, vectors = _corpus(300, 40, seed=3, tied=tied)
    outcome = _search(retriever, pool, codebase, judgements, vectors)["qrels"]
    assert isinstance(outcome, GradedOutcome)
    qrels: dict[str, dict[str, int]] = {}
    for row in judgements[judgements["split"] == "test"].itertuples():
        qrels.setdefault(row.query_id, {})[row.doc_id] = int(row.relevance)
    run = _run_file(outcome)
    assert all(len(docs) == 300 for docs in run.values())  # the depth (1,000) exceeds the corpus
    trec = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    full_rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)
    # MRR@k: trec_eval's recip_rank of the run cut at its first k in trec_eval's order
    trec_order = {q: sorted(docs, key=lambda d: (-docs[d], tuple(-ord(c) for c in d))) for q, docs in run.items()}
    rr_at = {
        k: pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(
            {q: {d: run[q][d] for d in order[:k]} for q, order in trec_order.items()}
        )
        for k in CUTOFFS
    }
    for query, ours in zip(outcome.query_ids, outcome.graded, strict=True):
        for name, value in ours.items():
            measure, k = name.split("@")
            expected = (
                rr_at[int(k)][query]["recip_rank"] if measure == "mrr" else trec[query][f"{OURS_TO_TREC[measure]}_{k}"]
            )
            assert value == pytest.approx(expected, abs=1e-9), (query, name)
        assert ours["mrr@1000"] == pytest.approx(full_rr[query]["recip_rank"], abs=1e-9)
    metrics = outcome.metrics()
    assert metrics["n_queries"] == 40
    assert metrics["ndcg@10"] == pytest.approx(np.mean([trec[q]["ndcg_cut_10"] for q in trec]), abs=1e-12)
    assert metrics["mrr"] == pytest.approx(np.mean([full_rr[q]["recip_rank"] for q in full_rr]), abs=1e-12)


# (True, 1500): lists cut at the protocol's depth (1,000) inside groups of exactly tied scores (small
# integer vectors: exact products on both paths); the rows path once cut them by argpartition's choice
@pytest.mark.parametrize(("tied", "n_docs"), [(False, 200), (True, 200), (True, 1500)])
def test_both_search_paths_give_one_outcome(tied: bool, n_docs: int) -> None:
    pool, codebase, judgements, vectors = _corpus(n_docs, 30, seed=5, tied=tied)
    dense = _search(Vectors, pool, codebase, judgements, vectors)["qrels"]
    rows = _search(Scores, pool, codebase, judgements, vectors)["qrels"]
    assert dense.ranks == rows.ranks
    assert dense.top1 == rows.top1
    assert dense.graded == rows.graded
    # the same documents in the same order; the scores of a float32 dot product computed two ways
    # (a block matmul, one vector) may differ in their last bit
    assert [line.split()[:4] for line in dense.run_lines] == [line.split()[:4] for line in rows.run_lines]
    dense_scores = np.array([float(line.split()[4]) for line in dense.run_lines])
    row_scores = np.array([float(line.split()[4]) for line in rows.run_lines])
    np.testing.assert_allclose(dense_scores, row_scores, rtol=1e-6, atol=1e-6)


def test_a_query_without_a_relevant_document_in_the_list_ranks_beyond_the_depth() -> None:
    pool, codebase, judgements, vectors = _corpus(50, 5, seed=1, tied=False)
    judgements = judgements[judgements["query_id"] != "q000"]
    judgements = pd.concat([judgements, pd.DataFrame([("test", "q000", "absent-doc", 2)], columns=judgements.columns)])
    outcome = _search(Vectors, pool, codebase, judgements, vectors)["qrels"]
    i = outcome.query_ids.index("q000")
    assert outcome.ranks[i] == PROTOCOLS.get("qrels").depth + 1
    assert outcome.graded[i]["ndcg@10"] == 0.0 and outcome.graded[i]["recall@1000"] == 0.0


def test_without_judgements_the_own_code_is_relevant_as_under_the_single_answer_protocols() -> None:
    """No qrels and no codebase: each query's own code (grade 1) in the test pool; without ties its rank is
    the single-answer rank, so MRR@1000 and nDCG@10 are ``full-corpus``'s."""
    rng = np.random.default_rng(11)
    n = 120
    pool = pd.DataFrame({"id": [f"r{i:03d}" for i in range(n)], "language": "python",
                         "query": [f"q{i}" for i in range(n)], "code": [f"c{i}" for i in range(n)],
                         "func_name": "", "url": [f"u{i}" for i in range(n)]})  # fmt: skip
    vectors = {("query", f"q{i}"): rng.normal(size=6) for i in range(n)}
    vectors |= {("code", f"c{i}"): rng.normal(size=6) + 0.8 * vectors["query", f"q{i}"] for i in range(n)}
    made = iter([Vectors(vectors)])
    outcomes, _ = evaluate_pool(next(made), pool, ["qrels", "full-corpus"], 10, "x", progress=False)
    graded, single = outcomes["qrels"], outcomes["full-corpus"]
    assert graded.ranks == single.ranks
    assert graded.metrics()["mrr"] == pytest.approx(single.metrics()["mrr"], abs=1e-12)
    assert graded.metrics()["ndcg@10"] == pytest.approx(single.metrics()["ndcg@10"], abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_an_ordered_list_is_scored_as_query_metrics_scores_it_unordered(seed: int) -> None:
    """The search sorts each list once (trec_order) and scores it in place (ordered_metrics): the same
    measures and first relevant rank as query_metrics / first_relevant_rank on the list in any order,
    with ties, NaN and ids of several lengths."""
    from csbench.evaluate import qrels as trec

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    docs = [f"d{int(i)}" for i in rng.permutation(200)[:n]]
    scores = rng.integers(0, 6, size=n).astype(np.float64)
    scores[rng.random(n) < 0.1] = np.nan
    relevant = {docs[int(i)]: int(rng.integers(-1, 4)) for i in rng.choice(n, size=min(n, 5), replace=False)}
    relevant["absent"] = 2
    order = trec.trec_order(docs, scores)
    metrics, rank = trec.ordered_metrics([docs[j] for j in order], relevant)
    assert metrics == trec.query_metrics(docs, scores, relevant)
    assert rank == trec.first_relevant_rank(docs, scores, relevant)


@pytest.mark.parametrize("seed", range(40))
def test_trec_order_is_score_then_id_descending(seed: int) -> None:
    """trec_order sorts the scores alone (float32, descending, NaN as -inf) and reads the ids only when two
    are equal: the order of trec_eval's rule written out in Python (the former whole-list lexsort gives
    it too: benchmarks/bench_trec_order.py compares them), with ties
    (some only in float32), NaN, +-inf, -0.0 against 0.0, values beyond float32's range, ids listed twice,
    ids that are prefixes of others and ids beyond the Basic Multilingual Plane (code point order)."""
    import functools

    from csbench.evaluate import qrels as trec

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 80))
    alphabet = ["a", "b", "ab", "é", "\U0001f600", "z", "\uffff", "0"]
    doc_ids = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 4)))) for _ in range(n)]
    pool = np.array([0.0, -0.0, 1.0, 1.0 + 1e-12, np.nan, np.inf, -np.inf, 2.5, 1e39, -1e39, 0.1])
    scores = pool[rng.integers(0, pool.size, size=n)] if seed % 2 else np.round(rng.standard_normal(n), 1)
    got = trec.trec_order(doc_ids, scores)
    with np.errstate(over="ignore"):
        single = scores.astype(np.float32).astype(np.float64)

    value = np.where(np.isnan(single), -np.inf, single)  # NaN read as -inf: last, tied with -inf

    def rule(i: int, j: int) -> int:  # negative: i before j
        if value[i] != value[j]:
            return -1 if value[i] > value[j] else 1
        if doc_ids[i] != doc_ids[j]:  # Python compares strings by code point
            return -1 if doc_ids[i] > doc_ids[j] else 1
        return j - i  # the same id twice: the later first

    assert got.tolist() == sorted(range(n), key=functools.cmp_to_key(rule))
