"""CodeSearchNet Challenge NDCG (csbench.evaluate.challenge), as relevanceeval.py of github/CodeSearchNet
computes it: relevance = mean over annotators, gain 2^rel - 1 over log2(rank + 1), "Within" advances
the rank only on annotated URLs and "All" on every URL, ideal DCG over all annotations of the query,
lists cut at 300, languages and queries lowercased, queries with ideal DCG 0 skipped.

A small constructed example computed by hand, then the real annotationStore.csv against a
plain-Python re-implementation (csv module, no pandas)."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from csbench.datasets.releases.csn_challenge import ANNOTATION_COLUMNS, load_annotations
from csbench.evaluate.challenge import (
    CUTOFF,
    challenge_ndcg,
    challenge_ndcg_per_query,
    coverage,
    dcg,
    ideal_dcg,
    load_predictions,
    load_relevances,
)


def url(name: str) -> str:
    return f"https://github.com/example/Repo/blob/0123abc/src/{name}.py#L1-L9"


U1, U2, U3, U4, U5, U6, G1 = (url(n) for n in ("u1", "u2", "u3", "u4", "u5", "u6", "g1"))
X1, X2 = url("not-annotated-1"), url("not-annotated-2")

# (Language, Query, GitHubUrl, Relevance): several annotators per URL, as in annotationStore.csv
ROWS = [
    ("Python", "Sort List", U1, 3),
    ("Python", "Sort List", U1, 2),  # u1: mean 2.5 (max would be 3)
    ("Python", "Sort List", U2, 1),
    ("Python", "Sort List", U2, 0),
    ("Python", "Sort List", U2, 1),  # u2: mean 2/3
    ("Python", "Sort List", U3, 0),
    ("Python", "Sort List", U3, 0),  # u3: 0
    ("Python", "Sort List", U4, 3),  # u4: 3, never predicted in the example
    ("Python", "parse json", U5, 0),
    ("Python", "parse json", U5, 1 - 1),  # only zeros: ideal DCG 0, the query is skipped
    ("Python", "read file", U6, 1),  # annotated, positive, never predicted: scores 0
    ("Go", "sort list", G1, 2),  # same query text in another language: kept apart
]


def annotations(rows: list[tuple[str, str, str, int]] = ROWS) -> pd.DataFrame:
    """The frame csn_challenge.load_annotations returns."""
    return pd.DataFrame([(*row, "") for row in rows], columns=list(ANNOTATION_COLUMNS))


def gain(rel: float) -> float:
    return 2**rel - 1


# "sort list" by hand. Relevances sorted descending: u4 3, u1 2.5, u2 2/3, u3 0, so
#   IDCG = 7/1 + (2^2.5 - 1)/log2(3) + (2^(2/3) - 1)/log2(4) + 0 = 7 + 2.938214 + 0.293700 = 10.231848
# Predicted list: x1, u2, u1, x2, u3 (x: not annotated; u4 missing)
#   Within ranks u2, u1, u3 at 1, 2, 3:   DCG = 0.587401/1 + 4.656854/log2(3) + 0 = 3.525549 -> 0.344566
#   All ranks them at 2, 3, 5:            DCG = 0.587401/log2(3) + 4.656854/2 + 0 = 2.699036 -> 0.263788
IDCG_SORT = gain(3) + gain(2.5) / math.log2(3) + gain(2 / 3) / 2
WITHIN_SORT = (gain(2 / 3) + gain(2.5) / math.log2(3)) / IDCG_SORT
ALL_SORT = (gain(2 / 3) / math.log2(3) + gain(2.5) / 2) / IDCG_SORT
PREDICTIONS = {
    "PYTHON": {"SORT LIST": [X1, U2, U1, X2, U3], "parse JSON": [U5]},  # "read file" not predicted
    "go": {"Sort List": [G1]},
}


def test_hand_numbers() -> None:
    # the constants above against the rounded values of the comment
    assert abs(IDCG_SORT - 10.231848) < 1e-6
    assert abs(WITHIN_SORT - 0.344566) < 1e-6
    assert abs(ALL_SORT - 0.263788) < 1e-6


# ---------------------------------------------------------------------------------------------
# relevances


def test_load_relevances_mean_over_annotators_keys_lowercased_urls_verbatim() -> None:
    assert load_relevances(annotations()) == {
        "python": {
            "sort list": {U1: 2.5, U2: pytest.approx(2 / 3), U3: 0.0, U4: 3.0},
            "parse json": {U5: 0.0},
            "read file": {U6: 1.0},
        },
        "go": {"sort list": {G1: 2.0}},
    }


def test_load_relevances_of_the_csv_reader(tmp_path: Path) -> None:
    path = tmp_path / "annotationStore.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(ANNOTATION_COLUMNS)
        writer.writerows((*row, "a note") for row in ROWS)
    assert load_relevances(load_annotations(path)) == load_relevances(annotations())


# ---------------------------------------------------------------------------------------------
# NDCG on the hand example


def test_hand_example_per_query() -> None:
    per_query = challenge_ndcg_per_query(PREDICTIONS, load_relevances(annotations()))
    assert set(per_query["python"]) == {"sort list", "read file"}  # "parse json": ideal DCG 0, skipped
    assert per_query["python"]["sort list"] == {"within": pytest.approx(WITHIN_SORT), "all": pytest.approx(ALL_SORT)}
    assert per_query["python"]["read file"] == {"within": 0.0, "all": 0.0}
    assert per_query["go"] == {"sort list": {"within": 1.0, "all": 1.0}}


def test_hand_example_means_per_language() -> None:
    result = challenge_ndcg(PREDICTIONS, load_relevances(annotations()))
    assert result == {
        "python": {"within": pytest.approx(WITHIN_SORT / 2), "all": pytest.approx(ALL_SORT / 2), "queries": 2},
        "go": {"within": 1.0, "all": 1.0, "queries": 1},
    }
    assert result["python"]["within"] == pytest.approx(0.172283, abs=1e-6)
    assert result["python"]["all"] == pytest.approx(0.131894, abs=1e-6)


def test_within_equals_all_when_every_url_is_annotated() -> None:
    relevances = load_relevances(annotations())
    ranked = [U3, U1, U4, U2]  # rels 0, 2.5, 3, 2/3 at ranks 1..4
    result = challenge_ndcg({"python": {"sort list": ranked}}, relevances)["python"]
    expected = (gain(2.5) / math.log2(3) + gain(3) / 2 + gain(2 / 3) / math.log2(5)) / IDCG_SORT / 2
    assert result["within"] == result["all"] == pytest.approx(expected)


def test_ideal_ranking_scores_one_and_order_matters() -> None:
    relevances = load_relevances(annotations())
    best = challenge_ndcg({"python": {"sort list": [U4, U1, U2, U3], "read file": [U6]}}, relevances)["python"]
    swapped = challenge_ndcg({"python": {"sort list": [U1, U4, U2, U3], "read file": [U6]}}, relevances)["python"]
    assert best == {"within": pytest.approx(1.0), "all": pytest.approx(1.0), "queries": 2}
    assert swapped["within"] < 1.0


def test_lists_are_cut_at_300() -> None:
    relevances = load_relevances(annotations())
    fillers = [url(f"filler-{i}") for i in range(300)]
    beyond = {"python": {"sort list": [*fillers, U4]}}  # u4 at position 301
    assert CUTOFF == 300
    assert challenge_ndcg(beyond, relevances)["python"]["within"] == 0.0
    # at position 300 it still counts: rank 1 for Within, 300 for All
    inside = {"python": {"sort list": [*fillers[:299], U4]}}
    result = challenge_ndcg(inside, relevances)["python"]
    assert result["within"] == pytest.approx(gain(3) / IDCG_SORT / 2)
    assert result["all"] == pytest.approx(gain(3) / math.log2(301) / IDCG_SORT / 2)
    # a longer cut is a parameter
    assert challenge_ndcg(beyond, relevances, cutoff=301)["python"]["within"] == pytest.approx(gain(3) / IDCG_SORT / 2)


def test_keys_match_whatever_their_case_but_urls_must_match_exactly() -> None:
    relevances = load_relevances(annotations())
    lower = challenge_ndcg({"python": {"sort list": [X1, U2, U1, X2, U3]}}, relevances)
    assert challenge_ndcg({"PyThOn": {"Sort LIST": [X1, U2, U1, X2, U3]}}, relevances) == lower
    shouted = challenge_ndcg({"python": {"sort list": [u.upper() for u in (X1, U2, U1, X2, U3)]}}, relevances)
    assert shouted["python"]["within"] == 0.0  # URLs are not case-folded: no annotated URL found


def test_only_predicted_languages_are_reported() -> None:
    result = challenge_ndcg({"go": {"sort list": [G1]}}, load_relevances(annotations()))
    assert list(result) == ["go"]


def test_language_with_only_zero_annotations_has_no_value() -> None:
    relevances = load_relevances(annotations([("Ruby", "q", U1, 0), ("Ruby", "q", U2, 0)]))
    assert challenge_ndcg({"ruby": {"q": [U1, U2]}}, relevances) == {
        "ruby": {"within": None, "all": None, "queries": 0}
    }


def test_dcg_and_ideal_dcg_directly() -> None:
    relevance = {U1: 2.5, U2: 2 / 3, U3: 0.0, U4: 3.0}
    assert ideal_dcg(relevance) == pytest.approx(IDCG_SORT)
    assert dcg([X1, U2, U1, X2, U3], relevance, within=True) == pytest.approx(WITHIN_SORT * IDCG_SORT)
    assert dcg([X1, U2, U1, X2, U3], relevance, within=False) == pytest.approx(ALL_SORT * IDCG_SORT)
    assert dcg([], relevance, within=True) == 0.0


# ---------------------------------------------------------------------------------------------
# coverage


def test_coverage_hand_example() -> None:
    relevances = load_relevances(annotations())
    # python annotations: u1 u2 u3 u4 (sort list), u5 (parse json), u6 (read file); predicted: u1 u2 u3 u5
    assert coverage(PREDICTIONS, relevances) == {"python": pytest.approx(4 / 6), "go": 1.0}
    # mean relevance > 0: u1 u2 u4 u6, of which u1 u2 predicted
    assert coverage(PREDICTIONS, relevances, positive_only=True) == {"python": pytest.approx(2 / 4), "go": 1.0}
    # the cut applies: u2 at position 2 is beyond a cut at 1
    assert coverage({"python": {"sort list": [U1, U2]}}, relevances, cutoff=1)["python"] == pytest.approx(1 / 6)


# ---------------------------------------------------------------------------------------------
# the predictions CSV (Challenge submission format)


def _write_predictions(path: Path, rows: list[tuple[str, str, str]], header: str = "query,language,identifier,url"):
    columns = header.split(",")
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for query, language, link in rows:
            cells = {"query": query, "language": language, "identifier": "pkg.func", "url": link}
            writer.writerow([cells[c] for c in columns])
    return path


def test_load_predictions_rank_order_case_merge_and_no_cut(tmp_path: Path) -> None:
    fillers = [url(f"filler-{i}") for i in range(310)]
    rows = [
        ("Sort List", "Python", X1),
        ("parse json", "Python", U5),
        ("SORT LIST", "python", U2),  # same query after lowercasing: joins the list, in file order
        ("sort list", "PYTHON", U1),
        ("sort list", "Go", G1),
        ("Sort list", "Python", X2),
        ("sort list", "Python", U3),
    ] + [("long", "Ruby", f) for f in fillers]
    path = _write_predictions(tmp_path / "predictions.csv", rows)
    predictions = load_predictions(path)
    assert predictions["python"] == {"sort list": [X1, U2, U1, X2, U3], "parse json": [U5]}
    assert predictions["go"] == {"sort list": [G1]}
    assert predictions["ruby"]["long"] == fillers  # not cut on reading; challenge_ndcg cuts
    del predictions["ruby"]
    relevances = load_relevances(annotations())
    assert challenge_ndcg(predictions, relevances) == challenge_ndcg(PREDICTIONS, relevances)


def test_load_predictions_column_order_and_blank_lines(tmp_path: Path) -> None:
    path = _write_predictions(tmp_path / "p.csv", [("q", "Go", G1), ("q", "Go", U1)], header="url,language,query")
    path.write_text(path.read_text() + "\n\n")
    assert load_predictions(path) == {"go": {"q": [G1, U1]}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("query,language,identifier\nq,Go,f\n", "missing column"),
        ("", "missing column"),
        ("query,language,url\n", "no predictions"),
        ("query,language,url\nq,Go,\n", ":2: empty url"),
        ("query,language,url\nq,Go,u\n ,Go,u\n", ":3: empty query"),
        ("query,language,url\nq,Go,u,extra\n", ":2: expected 3 columns"),
    ],
)
def test_load_predictions_rejects_malformed_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_predictions(path)


def test_load_predictions_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such predictions file"):
        load_predictions(tmp_path / "absent.csv")


# ---------------------------------------------------------------------------------------------
# malformed input


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        ({"python": {"sort list": [U1, U2, U1]}}, "appears twice"),
        ({"python": {"sort list": U1}}, "expected a ranked list"),
        ({"python": {"sort list": [U1, None]}}, "non-empty strings"),
        ({"python": {"sort list": [U1, ""]}}, "non-empty strings"),
        ({"python": {"": [U1]}}, "non-empty string"),
        ({"python": {"Sort List": [U1], "sort list": [U2]}}, "equal after lowercasing"),
        ({"Python": {}, "python": {}}, "equal after lowercasing"),
        ({"js": {"sort list": [U1]}}, r"no annotations for predicted language\(s\) \['js'\]"),
    ],
)
def test_malformed_predictions_raise(predictions: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        challenge_ndcg(predictions, load_relevances(annotations()))


def test_a_duplicate_beyond_the_cut_is_not_scored_so_not_an_error() -> None:
    result = challenge_ndcg({"go": {"sort list": [G1, X1, X1]}}, load_relevances(annotations()), cutoff=2)
    assert result["go"]["within"] == 1.0


def test_cutoff_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cutoff"):
        challenge_ndcg(PREDICTIONS, load_relevances(annotations()), cutoff=0)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (annotations().drop(columns="GitHubUrl"), "lack the column"),
        (annotations().iloc[:0], "no annotations"),
        (annotations().assign(Relevance=[*[1] * 11, float("nan")]), "row 11: Relevance"),
        (annotations().assign(Relevance=["high", *[1] * 11]), "row 0: Relevance 'high'"),
        (annotations().assign(Query=[*["q"] * 11, " "]), "row 11: Query"),
        (annotations().assign(GitHubUrl=[None, *[U1] * 11]), "row 0: GitHubUrl"),
        (annotations().assign(Language=[*["Go"] * 11, float("nan")]), "row 11: Language"),
    ],
)
def test_malformed_annotations_raise(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_relevances(frame)


# ---------------------------------------------------------------------------------------------
# the real annotationStore.csv against a plain-Python re-implementation

# per language: annotated queries, distinct annotated (query, URL) pairs, queries with ideal DCG > 0
REAL_COUNTS = {
    "go": (83, 166, 68),
    "java": (99, 813, 93),
    "javascript": (96, 319, 78),
    "php": (99, 314, 91),
    "python": (99, 989, 99),
    "ruby": (97, 313, 84),
}


@pytest.fixture(scope="module", name="real_file")
def real_file_fixture(shared_data: Path) -> Path:
    """The real annotationStore.csv of the CodeSearchNet Challenge (shared data; also test_twin_challenge's)."""
    path = shared_data / "codesearchnet" / "challenge" / "annotationStore.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found (the CodeSearchNet Challenge files of the shared data)")
    return path


@pytest.fixture(scope="module")
def reference(real_file: Path) -> dict[str, dict[str, list[float]]]:
    """Per language and query, the mean relevances of its URLs sorted descending; csv module only."""
    grades: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    with real_file.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            grades[(row["Language"].lower(), row["Query"].lower(), row["GitHubUrl"])].append(int(row["Relevance"]))
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (language, query, _), values in grades.items():
        out[language][query].append(sum(values) / len(values))
    return {lang: {q: sorted(v, reverse=True) for q, v in queries.items()} for lang, queries in out.items()}


@pytest.fixture(scope="module")
def relevances(real_file: Path):
    return load_relevances(load_annotations(real_file))


def _reference_ndcg(rels_in_rank_order: list[float], positions: list[int], ideal: list[float]) -> float:
    """DCG of the given relevances at the given 1-based positions over the ideal DCG."""
    dcg_value = sum((2**r - 1) / math.log2(p + 1) for r, p in zip(rels_in_rank_order, positions, strict=True))
    idcg = sum((2**r - 1) / math.log2(i + 1) for i, r in enumerate(ideal, start=1))
    return dcg_value / idcg


def _ideal(relevances) -> dict[str, dict[str, list[str]]]:
    """Each query's annotated URLs by mean relevance, descending."""
    return {
        lang: {q: sorted(urls, key=lambda u, urls=urls: -urls[u]) for q, urls in queries.items()}
        for lang, queries in relevances.items()
    }


def test_real_file_counts(real_file: Path, reference, relevances) -> None:
    frame = load_annotations(real_file)
    assert len(frame) == 4006 and frame["Query"].str.lower().nunique() == 99
    counts = {
        lang: (len(qs), sum(len(v) for v in qs.values()), sum(1 for v in qs.values() if max(v) > 0))
        for lang, qs in reference.items()
    }
    assert counts == REAL_COUNTS
    assert {lang: len(qs) for lang, qs in relevances.items()} == {lang: c[0] for lang, c in REAL_COUNTS.items()}
    assert all(
        sorted(relevances[lang][q].values(), reverse=True) == reference[lang][q]
        for lang in reference
        for q in reference[lang]
    )
    ideal = challenge_ndcg(_ideal(relevances), relevances)
    assert {lang: r["queries"] for lang, r in ideal.items()} == {lang: c[2] for lang, c in REAL_COUNTS.items()}


def test_real_ideal_ranking_scores_one(relevances) -> None:
    for lang, result in challenge_ndcg(_ideal(relevances), relevances).items():
        assert result["within"] == pytest.approx(1.0), lang
        assert result["all"] == pytest.approx(1.0), lang


def test_real_reversed_ranking_matches_the_reference(relevances, reference) -> None:
    reversed_ranking = {lang: {q: urls[::-1] for q, urls in qs.items()} for lang, qs in _ideal(relevances).items()}
    result = challenge_ndcg(reversed_ranking, relevances)
    for lang, queries in reference.items():
        scores = [
            _reference_ndcg(rels[::-1], list(range(1, len(rels) + 1)), rels)
            for rels in queries.values()
            if max(rels) > 0
        ]
        expected = sum(scores) / len(scores)
        assert result[lang]["within"] == pytest.approx(expected), lang
        assert result[lang]["all"] == pytest.approx(expected), lang  # nothing to skip: every URL is annotated
        assert 0.3 < expected < 1.0


def test_real_non_annotated_urls_between_lower_all_only(relevances, reference) -> None:
    def interleave(urls: list[str]) -> list[str]:
        return [u for i, link in enumerate(urls) for u in (f"https://github.com/none/x/blob/0/{i}.py", link)]

    ideal = _ideal(relevances)
    reversed_ranking = {lang: {q: urls[::-1] for q, urls in qs.items()} for lang, qs in ideal.items()}
    padded = {lang: {q: interleave(urls) for q, urls in qs.items()} for lang, qs in reversed_ranking.items()}
    plain, result = challenge_ndcg(reversed_ranking, relevances), challenge_ndcg(padded, relevances)
    for lang, queries in reference.items():
        assert result[lang]["within"] == pytest.approx(plain[lang]["within"]), lang
        assert result[lang]["all"] < plain[lang]["all"], lang
        # "All": the i-th annotated URL now sits at position 2i
        scores = [
            _reference_ndcg(rels[::-1], [2 * i for i in range(1, len(rels) + 1)], rels)
            for rels in queries.values()
            if max(rels) > 0
        ]
        assert result[lang]["all"] == pytest.approx(sum(scores) / len(scores)), lang
    # and so for the ideal ranking: Within stays 1, All drops below it
    padded_ideal = challenge_ndcg(
        {lang: {q: interleave(u) for q, u in qs.items()} for lang, qs in ideal.items()}, relevances
    )
    assert all(r["within"] == pytest.approx(1.0) and r["all"] < 0.9 for r in padded_ideal.values())


def test_real_lists_longer_than_300_are_cut(relevances, reference) -> None:
    fillers = [f"https://github.com/none/x/blob/0/{i}.py" for i in range(300)]
    late = {lang: {q: fillers + urls for q, urls in qs.items()} for lang, qs in _ideal(relevances).items()}
    for lang, result in challenge_ndcg(late, relevances).items():
        assert result["within"] == 0.0 and result["all"] == 0.0, lang
    assert set(coverage(late, relevances).values()) == {0.0}
    uncut = challenge_ndcg(late, relevances, cutoff=2000)
    for lang, queries in reference.items():
        assert uncut[lang]["within"] == pytest.approx(1.0), lang
        # "All": the i-th annotated URL sits at position 300 + i
        scores = [
            _reference_ndcg(rels, [300 + i for i in range(1, len(rels) + 1)], rels)
            for rels in queries.values()
            if max(rels) > 0
        ]
        assert uncut[lang]["all"] == pytest.approx(sum(scores) / len(scores)), lang


def test_real_keys_in_any_case(relevances) -> None:
    ideal = _ideal(relevances)
    shouted = {lang.upper(): {q.upper(): urls for q, urls in qs.items()} for lang, qs in ideal.items()}
    assert challenge_ndcg(shouted, relevances) == challenge_ndcg(ideal, relevances)


def test_cli_scores_a_submission_file(real_file: Path, tmp_path: Path, capsys) -> None:
    """`csbench challenge` on a submission CSV: Ruby's annotated URLs in ideal order score 1.0 (both
    NDCGs, full coverage); Go's in reversed order score below 1; the JSON holds the same figures."""
    from csbench.cli import main

    grades: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    with real_file.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            grades[(row["Language"], row["Query"], row["GitHubUrl"])].append(int(row["Relevance"]))
    rows = []
    for language, reverse in (("Ruby", True), ("Go", False)):
        mine = [(q, u, sum(v) / len(v)) for (lang, q, u), v in grades.items() if lang == language]
        for query in sorted({q for q, _, _ in mine}):
            ranked = sorted((m for m in mine if m[0] == query), key=lambda m: m[2], reverse=reverse)
            rows += [(query, language.lower(), f"id{k}", u) for k, (_, u, _) in enumerate(ranked)]
    predictions = tmp_path / "predictions.csv"
    with predictions.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["query", "language", "identifier", "url"])
        writer.writerows(rows)
    out = tmp_path / "scores.json"
    args = ["challenge", "--predictions", str(predictions), "--annotations", str(real_file), "--json", str(out)]
    assert main(args) == 0
    printed = {line.split("\t")[0]: line.split("\t")[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert printed["ruby"] == ["84", "1.0000", "1.0000", "1.0000"]
    assert printed["go"][0] == "68" and float(printed["go"][1]) < 1.0
    scores = json.loads(out.read_text())
    assert scores["ndcg"]["ruby"]["within"] == pytest.approx(1.0)
    assert scores["ndcg"]["go"]["within"] == pytest.approx(float(printed["go"][1]), abs=5e-5)
