"""BM25 standing in for CodeSearchNet's ElasticSearch baseline (SPEC "Models and training"): a
function-name field over subtokens and a code field over ElasticSearch's standard analyzer (or
subtokens), combined like ElasticSearch's best_fields. The analyzer itself against Lucene, and the
query side's case invariance: tests/models/test_bm25_analyzer.py."""

from __future__ import annotations

import bm25s
import numpy as np
import pandas as pd
import pytest

from csbench.code.tokens import standard_tokens, subtokens
from csbench.models import MODELS
from csbench.models.bm25 import BM25Retriever

FUNCTIONS = [
    (
        "io.read_csv_file",
        "def read_csv_file(path):\n    with open(path) as handle:\n        return list(csv.reader(handle))\n",
    ),
    (
        "net.send_http_request",
        "def send_http_request(url, payload):\n    response = urlopen(url, payload)\n    return response.read()\n",
    ),
    (
        "stats.compute_mean",
        "def compute_mean(values):\n    total = sum(values)\n    return total / len(values)\n",
    ),
    (
        "text.reverse_words",
        "def reverse_words(sentence):\n    words = sentence.split()\n    return ' '.join(reversed(words))\n",
    ),
    (
        "cache.CacheManager.clearCache",
        "def clearCache(self):\n    # drop every entry and reset the file counter\n    self.entries = {}\n",
    ),
    (
        "io.write_json_file",
        "def write_json_file(path, data):\n    with open(path, 'w') as handle:\n        json.dump(data, handle)\n",
    ),
]


@pytest.fixture
def frame() -> pd.DataFrame:
    return pd.DataFrame({"func_name": [n for n, _ in FUNCTIONS], "code": [c for _, c in FUNCTIONS]})


def _indexed(frame: pd.DataFrame, **params) -> BM25Retriever:
    retriever = BM25Retriever.from_params(params)
    retriever.index(frame)
    return retriever


def _field_scores(
    frame: pd.DataFrame,
    query: str,
    k1: float = 1.2,
    b: float = 0.75,
    method: str = "lucene",
    analyzer: str = "standard",
):
    """The name-field and code-field BM25 scores, recomputed with bm25s directly."""
    names = [subtokens(name.rsplit(".", 1)[-1]) for name in frame["func_name"]]
    analyse = standard_tokens if analyzer == "standard" else subtokens
    bodies = [analyse(code) for code in frame["code"]]
    name_index = bm25s.BM25(k1=k1, b=b, method=method)
    code_index = bm25s.BM25(k1=k1, b=b, method=method)
    name_index.index(names, show_progress=False)
    code_index.index(bodies, show_progress=False)
    tokens = standard_tokens(query) if analyzer == "standard" else subtokens(query.lower())
    return name_index.get_scores(tokens), code_index.get_scores(tokens)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Read a CSV file into a list of rows", "io.read_csv_file"),
        ("send an HTTP request to a url", "net.send_http_request"),
        ("compute the mean of values", "stats.compute_mean"),
        ("reverse the words of a sentence", "text.reverse_words"),
        ("clear the cache", "cache.CacheManager.clearCache"),
    ],
)
def test_query_naming_a_function_ranks_it_first(frame: pd.DataFrame, query: str, expected: str) -> None:
    scores = _indexed(frame).scores(query)
    assert scores.shape == (len(FUNCTIONS),)
    assert scores.dtype == np.float64
    best = int(np.argmax(scores))
    assert frame["func_name"][best] == expected
    assert scores[best] > np.sort(scores)[-2]  # strictly first, no tie


@pytest.mark.parametrize("analyzer", ["standard", "subtokens"])
@pytest.mark.parametrize(
    "query", ["read the json data at path", "write the file to a path", "clear the cache and reset the file counter"]
)
@pytest.mark.parametrize(("name_boost", "code_boost"), [(1.0, 1.0), (2.0, 0.5)])
def test_best_fields_is_max_of_boosted_fields(frame, query, name_boost, code_boost, analyzer) -> None:
    retriever = _indexed(frame, name_boost=name_boost, code_boost=code_boost, combine="best_fields", analyzer=analyzer)
    name, code = _field_scores(frame, query, analyzer=analyzer)
    assert (name > 0).any()
    assert (code > 0).any()
    expected = np.maximum(name_boost * name, code_boost * code)
    np.testing.assert_allclose(retriever.scores(query), expected, rtol=1e-6)
    # meaningful: the max differs from the sum for at least one function
    assert not np.allclose(expected, name_boost * name + code_boost * code)


def test_best_fields_tie_breaker_adds_a_share_of_the_other_field(frame: pd.DataFrame) -> None:
    query = "write the json file to a path"
    retriever = _indexed(frame, tie_breaker=0.3)
    name, code = _field_scores(frame, query)
    expected = np.maximum(name, code) + 0.3 * np.minimum(name, code)
    np.testing.assert_allclose(retriever.scores(query), expected, rtol=1e-6)


@pytest.mark.parametrize(("name_boost", "code_boost"), [(1.0, 1.0), (3.0, 0.25)])
def test_sum_is_the_sum_of_boosted_fields(frame, name_boost, code_boost) -> None:
    query = "read the csv file from a path"
    retriever = _indexed(frame, combine="sum", name_boost=name_boost, code_boost=code_boost)
    name, code = _field_scores(frame, query)
    np.testing.assert_allclose(retriever.scores(query), name_boost * name + code_boost * code, rtol=1e-6)


def test_k1_b_and_method_reach_bm25s(frame: pd.DataFrame) -> None:
    query = "read the csv file from a path"
    params = {"k1": 2.0, "b": 0.3, "method": "robertson", "combine": "sum"}
    name, code = _field_scores(frame, query, k1=2.0, b=0.3, method="robertson")
    np.testing.assert_allclose(_indexed(frame, **params).scores(query), name + code, rtol=1e-6)
    default_name, default_code = _field_scores(frame, query)
    assert not np.allclose(name + code, default_name + default_code)


def test_scores_follow_the_indexed_order(frame: pd.DataFrame) -> None:
    query = "read a csv file"
    forward = _indexed(frame).scores(query)
    backward = _indexed(frame.iloc[::-1].reset_index(drop=True)).scores(query)
    np.testing.assert_allclose(backward, forward[::-1], rtol=1e-6)


def test_only_the_last_dotted_part_of_the_name_is_indexed(frame: pd.DataFrame) -> None:
    # the name field holds "read_csv_file", not "io.read_csv_file": the module prefix "io" matches
    # no name (and with code_boost 0 nothing else counts)
    retriever = _indexed(frame, code_boost=0.0)
    assert (retriever.scores("io") == 0).all()
    assert retriever.scores("clear")[4] > 0


def test_from_params_defaults_and_registry(frame: pd.DataFrame) -> None:
    retriever = BM25Retriever.from_params({})
    assert (retriever.k1, retriever.b, retriever.method) == (1.2, 0.75, "lucene")
    assert (retriever.name_boost, retriever.code_boost) == (1.0, 1.0)
    assert (retriever.combine, retriever.tie_breaker) == ("best_fields", 0.0)
    spec = MODELS.get("bm25")
    assert spec.trained is False
    assert spec.defaults == BM25Retriever.DEFAULTS
    built = spec.factory({"k1": 0.9})
    assert isinstance(built, BM25Retriever)
    assert built.k1 == 0.9


def test_from_params_rejects_unknown_parameters_naming_them() -> None:
    with pytest.raises(ValueError, match="unknown bm25 parameter") as info:
        BM25Retriever.from_params({"k1": 1.0, "k_1": 1.0, "boost": 2.0})
    message = str(info.value)
    assert "boost" in message
    assert "k_1" in message
    assert "'k1'" not in message


def test_unknown_combine_is_rejected() -> None:
    with pytest.raises(ValueError, match="combine"):
        BM25Retriever.from_params({"combine": "most_fields"})


def test_query_with_no_known_token_scores_zero_everywhere(frame: pd.DataFrame) -> None:
    scores = _indexed(frame).scores("zebra unicorn quux")
    assert scores.shape == (len(FUNCTIONS),)
    assert (scores == 0).all()


@pytest.mark.parametrize("query", ["", "!!! ???"])
def test_query_with_no_subtokens_scores_zero_everywhere(frame: pd.DataFrame, query: str) -> None:
    # bm25s's get_scores([]) raises IndexError; the retriever must answer with zeros instead.
    assert subtokens(query) == []
    scores = _indexed(frame).scores(query)
    assert scores.shape == (len(FUNCTIONS),)
    assert (scores == 0).all()


def test_non_ascii_query_words_are_kept_and_matched() -> None:
    codes = pd.DataFrame(
        {
            "func_name": ["sortiere", "other"],
            "code": ["def sortiere(xs):\n    # Сортировка списка\n    return sorted(xs)", "def other():\n    pass"],
        }
    )
    assert subtokens("Сортировка списка по ключу") == ["сортировка", "списка", "по", "ключу"]
    retriever = BM25Retriever()
    retriever.index(codes)
    scores = retriever.scores("Сортировка списка по ключу")
    assert scores[0] > 0 and scores[1] == 0


def test_scores_before_index_raises() -> None:
    with pytest.raises(RuntimeError, match="index"):
        BM25Retriever().scores("read a file")


def test_a_field_without_any_token_scores_zero_instead_of_failing() -> None:
    # CoSQA's code pool has no function names: the name field is empty for every function.
    codes = pd.DataFrame({"func_name": ["", "", ""], "code": ["def a(): return sum(x)", "def b(): pass", "x = 1"]})
    retriever = BM25Retriever()
    retriever.index(codes)
    scores = retriever.scores("sum")
    assert scores.shape == (3,) and scores[0] > 0 and scores[1] == 0 and scores[2] == 0
    empty_bodies = pd.DataFrame({"func_name": ["sum_all", "other"], "code": ["", ""]})
    retriever.index(empty_bodies)
    assert retriever.scores("sum")[0] > 0
