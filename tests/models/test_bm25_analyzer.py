"""BM25's query side, as CodeSearchNet's ElasticSearch baseline analysed it.

- ``standard_tokens`` gives Lucene's StandardAnalyzer tokens, token for token, on real queries and
  code of every language csbench reads, perturbed queries included (the reference twin runs Lucene
  itself: tests/reference/lucene_standard_analyzer.py).
- A query's case never changes BM25's ranking, under either analyzer, at every ratio of COBE's
  ``case`` perturbation (today's bug: the query went through the camelCase splitter, so ``Return the
  list`` with flipped cases became ``re tu rn t he li st`` and MRR fell from 0.45 to 0.04).
"""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from reference.lucene_standard_analyzer import lucene_tokens, unavailable

from csbench.code.extract import extract_functions
from csbench.code.tokens import standard_tokens
from csbench.models.bm25 import ANALYZERS, BM25Retriever
from csbench.perturbations import DEFAULT_RATIOS, perturb

STDLIB = Path(sysconfig.get_paths()["stdlib"])
STDLIB_MODULES = ["json/decoder.py", "argparse.py", "textwrap.py", "shutil.py", "pathlib.py", "fractions.py"]
EDGE_CASES = [
    "naïve café 東京タワー 😀 fine👍ok x__y __init__ ___ 3,000.5 v1.2.3 U.S.A. e-mail foo@bar.com",
    "http://x.org/a?b=c İstanbul ΣΟΦΙΑ ²³ don't 'quoted' \"double\" a:b a.b.c 1.5e-3 0x1F",
    "a" * 600,  # longer than Lucene's 255-character token limit
    "",
    "   \t\n",
]


@pytest.fixture(scope="module")
def stdlib_pairs() -> pd.DataFrame:
    """Documented functions of a few standard-library modules as the corpus builds them: query = the
    first paragraph of the docstring, code without comments and docstring."""
    rows = []
    for module in STDLIB_MODULES:
        for fn in extract_functions((STDLIB / module).read_text(encoding="utf-8"), "python"):
            rows.append({"func_name": fn.func_name, "code": fn.code_no_comment, "query": fn.query})
    frame = pd.DataFrame(rows).drop_duplicates("code").reset_index(drop=True)
    assert len(frame) >= 100
    return frame


def _shared_texts(shared: Path) -> list[str]:
    """Queries and code as released, in every language the shared data has."""
    texts: list[str] = []
    for item in json.loads((shared / "cosqa" / "cosqa-dev.json").read_text(encoding="utf-8")):
        texts += [item["doc"], item["code"]]
    for path in sorted((shared / "codesearchnet" / "gecs_samples").glob("*.jsonl")):
        texts += [json.loads(line)["input"] for line in path.read_text(encoding="utf-8").splitlines()]
    for line in (shared / "codesearchnet" / "ruby" / "test.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        texts += [item["docstring"], item["code"]]
    for item in json.loads((shared / "statcodesearch" / "sample.json").read_text(encoding="utf-8")):
        texts += [item["Comment"], item["Code"]]
    tokenised = (shared / "tl_codesum" / "valid.token.code").read_text(encoding="utf-8").splitlines()
    texts += [line.split("\t", 1)[-1] for line in tokenised[:1500]]
    return texts


@pytest.mark.skipif(unavailable() is not None, reason=f"Lucene twin: {unavailable()}")
def test_standard_tokens_are_lucenes_on_stdlib_and_edge_cases(stdlib_pairs: pd.DataFrame) -> None:
    texts = [*EDGE_CASES, *stdlib_pairs["query"], *stdlib_pairs["code"]]
    ids = [str(i) for i in range(len(stdlib_pairs))]
    for name in ("case", "replace", "noise", "typo", "swap", "question"):  # perturbed queries, as robust sees them
        texts += perturb(list(stdlib_pairs["query"]), ids, name, 0.5 if name != "question" else 1.0, seed=0)
    _assert_same_tokens(texts)


@pytest.mark.skipif(unavailable() is not None, reason=f"Lucene twin: {unavailable()}")
def test_standard_tokens_are_lucenes_on_released_data(shared_data: Path) -> None:
    _assert_same_tokens(_shared_texts(shared_data))


def _assert_same_tokens(texts: list[str]) -> None:
    reference = lucene_tokens(texts)
    differing = [
        (t[:120], r, standard_tokens(t)) for t, r in zip(texts, reference, strict=True) if standard_tokens(t) != r
    ]
    assert not differing, f"{len(differing)} of {len(texts)} texts tokenised differently from Lucene: {differing[:3]}"
    assert sum(map(len, reference)) > 10_000  # the texts were real, not empty


def test_genuine_identifiers_in_a_query_match_the_code_as_elasticsearch_would() -> None:
    codes = pd.DataFrame(
        {
            "func_name": ["Paths.getFileName", "Paths.other"],
            "code": ["String getFileName(Path p) { return p.name; }", "int other() { return 0; }"],
        }
    )
    retriever = BM25Retriever(code_boost=1.0, name_boost=0.0)  # the code field alone
    retriever.index(codes)
    assert retriever.query_tokens("Call getFileName here") == ["call", "getfilename", "here"]
    assert retriever.scores("getFileName")[0] > 0 == retriever.scores("getFileName")[1]
    assert (retriever.scores("get file name") == 0).all()  # the whole-function field keeps the word whole
    names_only = BM25Retriever(code_boost=0.0)
    names_only.index(codes)
    assert names_only.scores("get file name")[0] > 0  # ... the name field holds its subtokens


@pytest.mark.parametrize("analyzer", ANALYZERS)
def test_case_perturbation_never_changes_the_ranking(stdlib_pairs: pd.DataFrame, analyzer: str) -> None:
    retriever = BM25Retriever(analyzer=analyzer)
    retriever.index(stdlib_pairs)
    queries, ids = list(stdlib_pairs["query"]), [str(i) for i in stdlib_pairs.index]
    clean = np.stack([retriever.scores(q) for q in queries])
    for ratio in DEFAULT_RATIOS:
        flipped = perturb(queries, ids, "case", ratio, seed=0)
        if ratio > 0:
            assert sum(a != b for a, b in zip(queries, flipped, strict=True)) > len(queries) // 2
        scores = np.stack([retriever.scores(q) for q in flipped])
        assert np.array_equal(scores, clean), f"case at {ratio} changed BM25 scores ({analyzer})"


def test_case_perturbation_never_changes_the_ranking_on_cosqa(shared_data: Path) -> None:
    pool = json.loads((shared_data / "cosqa" / "code_idx_map.txt").read_text(encoding="utf-8"))
    codes = pd.DataFrame({"func_name": "", "code": list(pool)})
    queries = [q["doc"] for q in json.loads((shared_data / "cosqa" / "cosqa-retrieval-dev-500.json").read_text())]
    queries = queries[:150]
    retriever = BM25Retriever()
    retriever.index(codes)
    clean = [np.argsort(-retriever.scores(q), kind="stable")[:100] for q in queries]
    for ratio in (0.1, 0.3, 0.5):
        flipped = perturb(queries, [str(i) for i in range(len(queries))], "case", ratio, seed=0)
        for query, before in zip(flipped, clean, strict=True):
            assert np.array_equal(np.argsort(-retriever.scores(query), kind="stable")[:100], before), query


def test_unknown_analyzer_is_rejected_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="standard, subtokens"):
        BM25Retriever.from_params({"analyzer": "whitespace"})
