"""Graded-relevance metrics (csbench.evaluate.qrels, issue #27): every per-query value equals trec_eval's
(pytrec_eval) to 1e-9 on random runs with graded qrels, deliberate score ties, negative grades and
queries without relevant documents; trec_eval's document order (score descending in single precision,
ties by document id descending) and the deliberate departures (a query with relevant documents but no
run scores 0; NaN ranks last); qrels files (BEIR and TREC) with errors naming file and line; the
CodeSearchNet Challenge's annotations as qrels, on the real files where present."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA

from csbench.datasets.base import ReaderError
from csbench.evaluate.qrels import (
    CUTOFFS,
    MAIN_SCORE,
    QRELS_COLUMNS,
    challenge_doc_languages,
    challenge_qrels,
    challenge_query_ids,
    evaluate_run,
    first_relevant_rank,
    mean_metrics,
    metric_names,
    qrels_dict,
    query_metrics,
    read_qrels_tsv,
)

TREC_NAMES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "p": "P"}
CUTS = ",".join(str(k) for k in CUTOFFS)
TREC_MEASURES = {f"{name}.{CUTS}" for name in TREC_NAMES.values()} | {"recip_rank"}
CHALLENGE = SHARED_DATA / "codesearchnet" / "challenge"


@pytest.fixture(scope="module")
def pytrec_eval():
    return pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier (a dev dependency) is not installed")


def trec_order(ranked: dict[str, float]) -> list[str]:
    """trec_eval's order, written independently of the module: float32 score descending, then doc id
    descending."""
    return [doc for doc, _ in sorted(ranked.items(), key=lambda item: (np.float32(item[1]), item[0]), reverse=True)]


def trec_value(pytrec_eval, qrels, run, query: str, name: str, trec: dict) -> float:
    """trec_eval's figure for one of our metric names; mrr@k is recip_rank of the run cut to its top k."""
    metric, k = name.split("@")
    if metric != "mrr":
        return trec[query][f"{TREC_NAMES[metric]}_{k}"]
    top = {doc: run[query][doc] for doc in trec_order(run[query])[: int(k)]}
    return pytrec_eval.RelevanceEvaluator({query: qrels[query]}, {"recip_rank"}).evaluate({query: top})[query][
        "recip_rank"
    ]


def random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Graded qrels (-2..3, several relevant per query, some queries with none) and a run with docs
    outside the qrels, qrels docs outside the run, and many exact score ties (integer scores, and
    scores equal only in float32)."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(rng.randint(1, 80))] + ["é", "z", "Z", "doc10", "doc1"]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(6):
        query = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, len(docs)))
        grades = [-2, -1, 0, 0, 1, 2, 3] if q else [-1, 0]  # q0: no relevant document
        qrels[query] = {doc: rng.choice(grades) for doc in judged}
        if max(qrels[query].values()) < -1:
            # trec_eval corrupts memory (pytrec_eval segfaults) on a query whose grades are all <= -2;
            # test_query_with_only_negative_grades covers that case without it
            qrels[query][judged[0]] = -1
        retrieved = rng.sample(docs, rng.randint(0, len(docs)))
        run[query] = {}
        for doc in retrieved:
            kind = rng.random()
            if kind < 0.4:
                run[query][doc] = float(rng.randint(0, 3))  # exact ties
            elif kind < 0.5:
                run[query][doc] = 1.0 + rng.choice([1e-12, -1e-12, 3e-8])  # ties only in single precision
            else:
                run[query][doc] = rng.uniform(-5, 5)
    return qrels, run


# ---------------------------------------------------------------------------------------------
# against trec_eval


@pytest.mark.parametrize("seed", range(60))
def test_every_per_query_value_equals_trec_eval(pytrec_eval, seed: int) -> None:
    qrels, run = random_case(seed)
    trec = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    ours = evaluate_run(run, qrels)
    assert set(ours) == set(trec)  # every query in both: the same queries
    for query, metrics in ours.items():
        assert tuple(metrics) == metric_names(CUTOFFS)
        for name, value in metrics.items():
            assert value == pytest.approx(trec_value(pytrec_eval, qrels, run, query, name, trec), abs=1e-9), (
                seed,
                query,
                name,
            )
        # the list form gives the same figures, whatever order the list comes in
        docs = list(run[query])
        random.Random(seed).shuffle(docs)
        assert query_metrics(docs, [run[query][d] for d in docs], qrels[query]) == metrics
        assert ours[query]["mrr@1000"] == pytest.approx(trec[query]["recip_rank"], abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_long_lists_many_relevant_equal_trec_eval(pytrec_eval, seed: int) -> None:
    """Top-1000 lists (all cutoffs bite) with up to 300 relevant documents and coarse scores (ties)."""
    rng = np.random.default_rng(seed)
    docs = [f"doc{i}" for i in range(3000)]
    qrels, run = {}, {}
    for q in range(4):
        judged = rng.choice(3000, 600, replace=False)
        qrels[f"q{q}"] = {docs[i]: int(g) for i, g in zip(judged, rng.integers(-1, 4, 600), strict=True)}
        retrieved = rng.choice(3000, 1000 + q, replace=False)
        scores = np.round(rng.normal(size=retrieved.size), 1)
        run[f"q{q}"] = {docs[i]: float(s) for i, s in zip(retrieved, scores, strict=True)}
    trec = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    for query, metrics in evaluate_run(run, qrels).items():
        for name, value in metrics.items():
            assert value == pytest.approx(trec_value(pytrec_eval, qrels, run, query, name, trec), abs=1e-9)


# ---------------------------------------------------------------------------------------------
# the tie rule


def test_ties_break_by_doc_id_descending(pytrec_eval) -> None:
    docs, scores = ["a", "c", "b"], [1.0, 1.0, 1.0]
    assert first_relevant_rank(docs, scores, {"a": 1}) == 3
    assert first_relevant_rank(docs, scores, {"b": 1}) == 2
    assert first_relevant_rank(docs, scores, {"c": 1}) == 1
    assert query_metrics(docs, scores, {"a": 1})["mrr@1000"] == pytest.approx(1 / 3)
    trec = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"recip_rank"}).evaluate(
        {"q": dict(zip(docs, scores, strict=True))}
    )
    assert trec["q"]["recip_rank"] == pytest.approx(1 / 3)
    # strcmp on the bytes: "doc10" > "doc1", "é" (UTF-8 0xC3...) > "z" > "Z"
    assert first_relevant_rank(["doc1", "doc10"], [0.0, 0.0], {"doc10": 1}) == 1
    assert first_relevant_rank(["Z", "z", "é"], [2.0, 2.0, 2.0], {"Z": 2}) == 3
    assert first_relevant_rank(["Z", "z", "é"], [2.0, 2.0, 2.0], {"é": 2}) == 1
    # a tie only decides between equal scores: a higher score still ranks first
    assert first_relevant_rank(["a", "z"], [2.0, 1.0], {"a": 1}) == 1


def test_ties_at_a_cutoff_decide_what_is_in_the_top_k() -> None:
    docs = ["x", "y", "rel", "w"]
    metrics = query_metrics(docs, [3.0, 1.0, 1.0, 1.0], {"rel": 1, "zz": 1}, cutoffs=(1, 2, 3))
    # order: x (3.0), then the ties y > w > rel
    assert metrics["p@2"] == 0.0 and metrics["p@3"] == 0.0
    assert metrics["recall@3"] == 0.0 and metrics["mrr@3"] == 0.0
    assert query_metrics(docs, [3.0, 1.0, 1.0, 1.0], {"y": 1}, cutoffs=(2,))["mrr@2"] == 0.5


def test_scores_compare_in_single_precision_as_trec_eval_stores_them(pytrec_eval) -> None:
    docs = ["a", "b"]
    for high, low in [(1.0 + 1e-12, 1.0), (1.0 + 5e-8, 1.0), (1e-46, 0.0), (float("inf"), 1e40), (0.0, -0.0)]:
        # equal as float32: "b" (the larger id) comes first although "a" scores higher in double precision
        assert first_relevant_rank(docs, [high, low], {"a": 1}) == 2, (high, low)
        run = {"q": {"a": high, "b": low}}
        trec = pytrec_eval.RelevanceEvaluator({"q": {"a": 1}}, {"recip_rank"}).evaluate(run)
        assert trec["q"]["recip_rank"] == 0.5
    assert first_relevant_rank(docs, [1.0 + 6e-8, 1.0], {"a": 1}) == 1  # distinct in float32


def test_nan_scores_rank_below_every_number() -> None:
    nan = float("nan")
    docs = ["a", "b", "c", "d"]
    scores = [nan, -np.inf, nan, 0.0]
    assert first_relevant_rank(docs, scores, {"d": 1}) == 1
    assert first_relevant_rank(docs, scores, {"b": 1}) == 2
    assert first_relevant_rank(docs, scores, {"c": 1}) == 3  # NaNs tie: id descending
    assert first_relevant_rank(docs, scores, {"a": 1}) == 4


# ---------------------------------------------------------------------------------------------
# which queries are scored, edge cases


def test_query_sets_against_pytrec_eval(pytrec_eval) -> None:
    qrels = {
        "in_both": {"a": 2, "b": 0},
        "empty_run": {"a": 1},
        "missing_from_run": {"a": 1, "b": 3},
        "nothing_relevant": {"a": 0, "b": -1},
        "nothing_relevant_missing": {"a": 0},
        "no_judgements": {},
    }
    run = {
        "in_both": {"b": 2.0, "a": 1.0},
        "empty_run": {},
        "nothing_relevant": {"a": 1.0},
        "no_judgements": {"a": 1.0},
        "not_in_qrels": {"a": 1.0},
    }
    trec = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES).evaluate(run)
    ours = evaluate_run(run, qrels)
    assert set(trec) == {"in_both", "empty_run", "nothing_relevant"}
    # the one departure: a query with relevant documents that the run lacks scores 0 instead of vanishing
    assert set(ours) == set(trec) | {"missing_from_run"}
    assert list(ours) == ["in_both", "empty_run", "missing_from_run", "nothing_relevant"]  # qrels order
    for query in ("empty_run", "missing_from_run", "nothing_relevant"):
        assert set(ours[query].values()) == {0.0}
    assert ours["in_both"]["mrr@1000"] == 0.5 and ours["in_both"]["ndcg@1"] == 0.0


def test_query_with_only_negative_grades_scores_zero() -> None:
    # trec_eval itself corrupts memory on such a query beside others (pytrec_eval 0.5 segfaults)
    ours = evaluate_run({"q": {"a": 3.0, "b": 1.0}, "r": {"c": 1.0}}, {"q": {"a": -2, "b": -3}, "r": {"c": 1}})
    assert set(ours["q"].values()) == {0.0}
    assert ours["r"]["ndcg@10"] == 1.0


def test_negative_grades_gain_nothing_in_ndcg() -> None:
    # a (-1), b (1), c (-2), d (2); the negatives neither subtract nor raise the ideal
    metrics = query_metrics(["a", "b", "c", "d"], [4, 3, 2, 1], {"a": -1, "b": 1, "c": -2, "d": 2}, cutoffs=(3,))
    ideal = 2 + 1 / np.log2(3)
    assert metrics["ndcg@3"] == pytest.approx((1 / np.log2(3)) / ideal)
    assert metrics["recall@3"] == 0.5 and metrics["p@3"] == pytest.approx(1 / 3)


def test_hand_computed_graded_values() -> None:
    # order d1 d2 d3 d4; grades 0, 3, unjudged, 1; one relevant document (grade 2) never retrieved
    metrics = query_metrics(["d1", "d2", "d3", "d4"], [0.9, 0.8, 0.7, 0.6], {"d1": 0, "d2": 3, "d4": 1, "x": 2})
    dcg = 3 / np.log2(3) + 1 / np.log2(5)
    idcg = 3 + 2 / np.log2(3) + 1 / 2
    assert metrics["ndcg@10"] == pytest.approx(dcg / idcg)
    assert metrics["ndcg@1"] == 0.0
    assert metrics["map@10"] == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert metrics["recall@3"] == pytest.approx(1 / 3) and metrics["recall@5"] == pytest.approx(2 / 3)
    assert metrics["p@5"] == pytest.approx(2 / 5) and metrics["p@1000"] == pytest.approx(2 / 1000)
    assert metrics["mrr@1"] == 0.0 and metrics["mrr@3"] == 0.5


def test_query_metrics_input_errors() -> None:
    with pytest.raises(ValueError, match="'a' appears twice"):
        query_metrics(["a", "b", "a"], [1, 2, 3], {"a": 1})
    with pytest.raises(ValueError, match="expected 2 scores"):
        query_metrics(["a", "b"], [1.0], {"a": 1})
    with pytest.raises(ValueError, match="cutoffs"):
        query_metrics(["a"], [1.0], {"a": 1}, cutoffs=(0,))
    with pytest.raises(ValueError, match="cutoffs"):
        evaluate_run({}, {}, cutoffs=())


def test_first_relevant_rank() -> None:
    assert first_relevant_rank([], [], {"a": 1}) is None
    assert first_relevant_rank(["a", "b"], [1.0, 2.0], {"a": 0, "c": 1}) is None
    assert first_relevant_rank(np.array(["a", "b", "c"]), np.array([1.0, 3.0, 2.0]), {"a": 1, "c": 2}) == 2


def test_mean_metrics() -> None:
    per_query = evaluate_run({"q1": {"a": 2.0, "b": 1.0}, "q2": {"a": 2.0, "b": 1.0}}, {"q1": {"a": 1}, "q2": {"b": 1}})
    means = mean_metrics(per_query)
    assert means[MAIN_SCORE] == pytest.approx((1.0 + 1 / np.log2(3)) / 2)
    assert means["mrr@1"] == 0.5
    assert mean_metrics({}) == {}
    with pytest.raises(ValueError, match="metrics"):
        mean_metrics({"q1": {"a": 1.0}, "q2": {"b": 1.0, "c": 0.0}})


def test_metric_names_follow_the_brief() -> None:
    names = metric_names()
    assert MAIN_SCORE in names and len(names) == 5 * len(CUTOFFS)
    assert {n.split("@")[0] for n in names} == {"ndcg", "map", "recall", "p", "mrr"}


# ---------------------------------------------------------------------------------------------
# qrels files


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def test_read_beir_qrels(tmp_path: Path) -> None:
    path = write(
        tmp_path / "test.tsv",
        "\ufeffquery-id\tcorpus-id\tscore\r\nq1\td1\t1\r\n\r\nq1\td2\t0\r\nq2\td1\t-1\nq1\td1\t1\n",
    )
    frame = read_qrels_tsv(path, "test")
    assert tuple(frame.columns) == QRELS_COLUMNS
    assert frame.to_dict("list") == {
        "split": ["test"] * 3,
        "query_id": ["q1", "q1", "q2"],
        "doc_id": ["d1", "d2", "d1"],
        "relevance": [1, 0, -1],  # the repeated q1/d1 with the same grade once
    }
    assert frame["relevance"].dtype == np.int64
    assert qrels_dict(frame) == {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": -1}}


def test_read_beir_qrels_without_header_and_trec_qrels(tmp_path: Path) -> None:
    beir = read_qrels_tsv(write(tmp_path / "a.tsv", "q1\td 1\t2\n"), "dev")
    assert beir.values.tolist() == [["dev", "q1", "d 1", 2]]
    trec = read_qrels_tsv(write(tmp_path / "qrels.txt", "q1 0 d1 2\n\nq1\t0\td2   0\n2 Q0 d3 1\n"), "test")
    assert trec.values.tolist() == [["test", "q1", "d1", 2], ["test", "q1", "d2", 0], ["test", "2", "d3", 1]]
    empty = read_qrels_tsv(write(tmp_path / "empty.tsv", "\n"), "test")
    assert empty.empty and tuple(empty.columns) == QRELS_COLUMNS


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3, "expected 3 tab-separated columns"),
        ("query-id\tcorpus-id\tscore\nq1\td1\tx\n", 2, "'x' is not an integer"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1.0\n", 2, "'1.0' is not an integer"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1_0\n", 2, "'1_0' is not an integer"),
        ("query-id\tcorpus-id\tscore\n\t d1\t1\n", 2, "empty query id"),
        ("query-id\tcorpus-id\tscore\nq1\t\t1\n", 2, "empty document id"),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n\nq1\td1\t2\n", 5, "graded 2 here and 1 on line 2"),
        ("q1 0 d1 1\nq1 0 d2\n", 2, "TREC qrels line"),
        ("q1 0 d1 1\nq1 0 d2 high\n", 2, "'high' is not an integer"),
        ("q1 0 d1 1\n\nq1 0 d1 0\n", 3, "graded 0 here and 1 on line 1"),
    ],
)
def test_qrels_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path / "qrels.tsv", text)
    with pytest.raises(ReaderError, match=rf"qrels\.tsv:{line}: .*{message}"):
        read_qrels_tsv(path, "test")


def test_qrels_file_missing_or_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match="no such qrels file"):
        read_qrels_tsv(tmp_path / "missing.tsv", "test")
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"query-id\tcorpus-id\tscore\nq1\td\xff\t1\n")
    with pytest.raises(ReaderError, match=r"bad\.tsv:\d+: not UTF-8"):
        read_qrels_tsv(path, "test")


def test_qrels_dict_split_and_conflicts() -> None:
    frame = pd.DataFrame(
        [("test", "q1", "d1", 1), ("dev", "q1", "d1", 2), ("test", "q2", "d3", 0)], columns=list(QRELS_COLUMNS)
    )
    assert qrels_dict(frame, "test") == {"q1": {"d1": 1}, "q2": {"d3": 0}}
    assert qrels_dict(frame, "dev") == {"q1": {"d1": 2}}
    with pytest.raises(ValueError, match="two grades"):
        qrels_dict(frame)
    with pytest.raises(ValueError, match="relevance"):
        qrels_dict(frame.drop(columns="relevance"))


# ---------------------------------------------------------------------------------------------
# the CodeSearchNet Challenge's annotations


def annotations(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["Language", "Query", "GitHubUrl", "Relevance"])
    return frame.assign(Notes="")


def test_challenge_qrels_mean_rounded_half_up() -> None:
    frame = annotations(
        [
            ("Python", "Sort a list", "u1", 2),
            ("Python", "sort a list", "u1", 3),  # same query after lowercasing: mean 2.5 -> 3
            ("Python", "sort a list", "u2", 1),
            ("python", "sort a list", "u2", 2),  # 1.5 -> 2
            ("Go", "sort a list", "u3", 0),
            ("Go", "sort a list", "u3", 0),
            ("Go", "sort a list", "u3", 1),  # 1/3 -> 0
            ("Go", "parse json", "u4", 1),
            ("Go", "parse json", "u4", 2),
            ("Go", "parse json", "u4", 2),  # 5/3 -> 2
            ("Go", "parse json", "u5", 0),
            ("Go", "parse json", "u5", 1),  # 0.5 -> 1
        ]
    )
    qrels = challenge_qrels(frame)
    assert tuple(qrels.columns) == QRELS_COLUMNS
    assert qrels.values.tolist() == [
        ["test", "q1", "u1", 3],
        ["test", "q1", "u2", 2],
        ["test", "q1", "u3", 0],
        ["test", "q2", "u4", 2],
        ["test", "q2", "u5", 1],
    ]
    by_list = challenge_qrels(frame, queries=["Parse JSON", "other", "sort a list"])
    assert by_list["query_id"].tolist() == ["q1", "q1", "q3", "q3", "q3"]
    assert challenge_qrels(frame, language="GO")["doc_id"].tolist() == ["u3", "u4", "u5"]
    assert challenge_doc_languages(frame) == {"u1": "python", "u2": "python", "u3": "go", "u4": "go", "u5": "go"}
    with pytest.raises(ValueError, match="not in the query list"):
        challenge_qrels(frame, queries=["parse json"])
    with pytest.raises(ValueError, match="appears twice"):
        challenge_query_ids(frame, queries=["parse json", "Parse JSON", "sort a list"])


@pytest.fixture(scope="module")
def challenge_files() -> tuple[Path, Path]:
    annotations_file, queries_file = CHALLENGE / "annotationStore.csv", CHALLENGE / "queries.csv"
    if not (annotations_file.is_file() and queries_file.is_file()):
        pytest.skip(f"the CodeSearchNet Challenge files are not in {CHALLENGE}")
    return annotations_file, queries_file


def test_challenge_qrels_on_the_real_files(challenge_files: tuple[Path, Path]) -> None:
    from csbench.datasets.releases.csn_challenge import load_annotations, load_queries

    annotations_file, queries_file = challenge_files
    frame, queries = load_annotations(annotations_file), load_queries(queries_file)
    qrels = challenge_qrels(frame, queries)
    pairs = frame.assign(query=frame["Query"].str.lower())[["query", "GitHubUrl"]].drop_duplicates()
    assert len(qrels) == len(pairs)  # one row per distinct (query, URL): 2,914 in the published file
    assert qrels["query_id"].nunique() == 99
    assert set(qrels["query_id"]) == {f"q{n}" for n in range(1, 100)}
    assert set(qrels["relevance"]) <= {0, 1, 2, 3}
    assert not qrels.duplicated(["query_id", "doc_id"]).any()
    ids = challenge_query_ids(frame, queries)
    assert ids[queries[0].lower()] == "q1"
    grade = {(q, d): r for q, d, r in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"], strict=True)}
    base = "https://github.com/"
    cases = {  # (query, URL): the annotators' grades in the file -> the rounded mean
        (
            "aes encryption",
            "jcassee/django-geckoboard/blob/6ebdaa86015fe645360abf1ba1290132de4cf6d6/"
            "django_geckoboard/decorators.py#L446-L460",
        ): 3,  # 5 / 2 = 2.5
        (
            "aes encryption",
            "konomae/lastpass-python/blob/5063911b789868a1fd9db9922db82cdf156b938a/lastpass/parser.py#L269-L284",
        ): 2,  # 3 / 2 = 1.5
        (
            "buffered file reader read text",
            "LionelAuroux/pyrser/blob/f153a97ef2b6bf915a1ed468c0252a9a59b754d5/pyrser/parsing/base.py#L314-L327",
        ): 1,  # 2 / 3
        (
            "concatenate several file remove header lines",
            "tanghaibao/jcvi/blob/d2e31a77b6ade7f41f3b321febc2b4744d1cdeca/jcvi/formats/fpc.py#L96-L111",
        ): 0,  # 1 / 3
    }
    for (query, url), expected in cases.items():
        rows = frame[(frame["Query"].str.lower() == query) & (frame["GitHubUrl"] == base + url)]
        assert len(rows) >= 2
        assert grade[(ids[query], base + url)] == expected
    # every (query, URL) of the qrels scores its own annotations: a perfect ranking has nDCG 1
    qrels_by_query = qrels_dict(qrels)
    run = {q: {d: float(g) for d, g in judged.items()} for q, judged in qrels_by_query.items()}
    per_query = evaluate_run(run, qrels_by_query)
    positive = [q for q, judged in qrels_by_query.items() if max(judged.values()) >= 1]
    assert positive and all(per_query[q]["ndcg@1000"] == pytest.approx(1.0) for q in positive)
    languages = challenge_doc_languages(frame)
    assert set(languages.values()) == {"go", "java", "javascript", "php", "python", "ruby"}
    assert set(qrels["doc_id"]) == set(languages)


# ---------------------------------------------------------------------------------------------
# the means BEIR (tests/reference/beir_evaluation.py, its transcription) and MTEB report


def untied_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """random_case's qrels, every qrels query in the run, scores distinct even in float32, and no
    document id equal to a query id: the inputs on which BEIR's figures are trec_eval's."""
    qrels, run = random_case(seed)
    rng = np.random.default_rng(seed)
    for query in qrels:
        docs = list(run[query]) or [next(iter(qrels[query]))]
        run[query] = {doc: float(s) for doc, s in zip(docs, rng.permutation(len(docs)) * 0.25 - 3, strict=True)}
    return qrels, run


@pytest.mark.parametrize("seed", range(10))
def test_means_equal_the_beir_twin(pytrec_eval, seed: int) -> None:
    from reference import beir_evaluation as beir

    qrels, run = untied_case(seed)
    means = mean_metrics(evaluate_run(run, qrels))
    ndcg, _map, recall, precision = beir.evaluate(qrels, {q: dict(r) for q, r in run.items()}, list(CUTOFFS))
    mrr = beir.mrr(qrels, run, list(CUTOFFS))
    for k in CUTOFFS:
        assert round(means[f"ndcg@{k}"], 5) == ndcg[f"NDCG@{k}"]
        assert round(means[f"map@{k}"], 5) == _map[f"MAP@{k}"]
        assert round(means[f"recall@{k}"], 5) == recall[f"Recall@{k}"]
        assert round(means[f"p@{k}"], 5) == precision[f"P@{k}"]
        assert round(means[f"mrr@{k}"], 5) == mrr[f"MRR@{k}"]


def test_where_beir_differs(pytrec_eval) -> None:
    from reference import beir_evaluation as beir

    # ties: BEIR's MRR keeps the run's insertion order, trec_eval (and csbench) rank "b" before "a"
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 1.0}}
    assert beir.mrr(qrels, run, [10])["MRR@10"] == 1.0
    assert evaluate_run(run, qrels)["q"]["mrr@10"] == 0.5
    # a document whose id is the query id: BEIR drops it by default, csbench keeps it (the caller decides)
    qrels, run = {"q": {"a": 1}}, {"q": {"q": 2.0, "a": 1.0}}
    assert beir.evaluate(qrels, {"q": dict(run["q"])}, [1])[0]["NDCG@1"] == 1.0
    assert beir.evaluate(qrels, {"q": dict(run["q"])}, [1], ignore_identical_ids=False)[0]["NDCG@1"] == 0.0
    assert evaluate_run(run, qrels)["q"]["ndcg@1"] == 0.0
    # a qrels query the run lacks: BEIR's nDCG etc. drop it, its MRR counts it as 0; csbench scores it 0
    qrels, run = {"q": {"a": 1}, "r": {"a": 1}}, {"q": {"a": 1.0}}
    ndcg, *_ = beir.evaluate(qrels, {"q": dict(run["q"])}, [1])
    assert ndcg["NDCG@1"] == 1.0 and beir.mrr(qrels, run, [1])["MRR@1"] == 0.5
    means = mean_metrics(evaluate_run(run, qrels))  # q scores 1 (p@k 1/k), r scores 0
    assert means == pytest.approx({n: 0.5 / int(n.split("@")[1]) if n[:2] == "p@" else 0.5 for n in metric_names()})


@pytest.mark.parametrize("seed", range(10))
def test_means_equal_mteb(pytrec_eval, seed: int) -> None:
    retrieval_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics", reason="mteb is not installed")
    qrels, run = random_case(seed)
    for query in qrels:  # MTEB breaks ties by id descending too, but in double precision: keep ties exact
        run[query] = {doc: s for doc, s in run[query].items() if abs(s - 1.0) > 1e-6 or s == 1.0}
    means = mean_metrics(evaluate_run(run, qrels))
    result = retrieval_metrics.calculate_retrieval_scores(run, qrels, list(CUTOFFS))
    for k in CUTOFFS:
        assert round(means[f"ndcg@{k}"], 5) == result.ndcg[f"NDCG@{k}"]
        assert round(means[f"map@{k}"], 5) == result.map[f"MAP@{k}"]
        assert round(means[f"recall@{k}"], 5) == result.recall[f"Recall@{k}"]
        assert round(means[f"p@{k}"], 5) == result.precision[f"P@{k}"]
        assert means[f"mrr@{k}"] == pytest.approx(result.mrr[f"MRR@{k}"], abs=1e-12)  # MTEB does not round it
