"""Reference twins of ``csn-1000`` / ``csn-funcname`` (CodeSearchNet ``src/model_test.py``) and
``gecs-100`` (GenCodeSearchNet ``New_cbt_mrr_implementation.py`` + ``eval_mrr*.py``).

Both sides get the same vectors: csbench through ``evaluate_pool`` (the runner, its plans and its
ranking code), the twins (``tests/reference/``) through the original code. Real data: the first
records of the CodeSearchNet Ruby test file (``../shared/data``) with real all-MiniLM-L6-v2 vectors;
random data: small integer vectors with repeated rows, so exact ties are everywhere.

csn-1000 ranks ``cdist`` distances on both sides, so raw MiniLM vectors compare exactly. gecs-100 ranks
inner products, which csbench computes in float32 blocks and the twin one pair at a time: the MiniLM
vectors are rounded to multiples of 2**-8 there, so every inner product is exact in float32 whatever
the summation order and a difference can only come from the candidates or the tie rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from reference import csn_model_test, gecs_mrr

from csbench.evaluate.protocols import PROTOCOLS
from csbench.evaluate.runner import evaluate_pool

N_REAL = 110  # real records: more than 100 (gecs-100's 99 distractors), few enough to encode in seconds


class VectorRetriever:
    """A dense retriever over fixed vectors, looked up by text (``code`` / ``query``)."""

    def __init__(self, vectors: dict[tuple[str, str], np.ndarray]) -> None:
        self.vectors = vectors
        self._codes: np.ndarray | None = None

    def index(self, frame: pd.DataFrame) -> None:
        self._codes = np.stack([self.vectors["code", c] for c in frame["code"]]).astype(np.float32)

    @property
    def code_vectors(self) -> np.ndarray | None:
        return self._codes

    def prepare_queries(self, queries: list[str]) -> None:
        pass

    def query_matrix(self, queries: list[str]) -> np.ndarray:
        return np.stack([self.vectors["query", q] for q in queries]).astype(np.float32)

    def scores(self, query: str) -> np.ndarray:
        return (self._codes @ self.vectors["query", query]).astype(np.float64)


class ScoreRetriever(VectorRetriever):
    """The same scores without vectors: csbench's row path (BM25's), which ranks by scores."""

    @property
    def code_vectors(self) -> None:
        return None


def _pool(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [f"r{i:04d}" for i in range(n)][::-1],  # ids sorted against the file order
            "language": "python",
            "query": [f"q{i}" for i in range(n)],
            "code": [f"c{i}" for i in range(n)],
            "func_name": [f"f{i}" for i in range(n)],
            "url": [f"u{i}" for i in range(n)],
        }
    )


def _tied_vectors(pool: pd.DataFrame, seed: int, dim: int = 6) -> dict[tuple[str, str], np.ndarray]:
    """Small integer vectors, a third of them repeating an earlier row: exact ties in every chunk."""
    rng = np.random.default_rng(seed)
    n = len(pool)
    queries = rng.integers(-2, 3, size=(n, dim)).astype(np.float32)
    codes = rng.integers(-2, 3, size=(n, dim)).astype(np.float32)
    for side in (queries, codes):
        repeat = rng.random(n) < 0.33
        side[repeat] = side[rng.integers(0, n, size=int(repeat.sum()))]
        side[np.abs(side).sum(axis=1) == 0, 0] = 1.0  # no zero vector (cosine undefined)
    vectors = {("query", q): queries[i] for i, q in enumerate(pool["query"])}
    vectors.update({("code", c): codes[i] for i, c in enumerate(pool["code"])})
    return vectors


def _ours(pool: pd.DataFrame, vectors: dict, protocol: str, retriever=VectorRetriever) -> dict[str, int]:
    extra = {"funcname_retriever": retriever(vectors)} if protocol == "csn-funcname" else {}
    outcomes, _ = evaluate_pool(retriever(vectors), pool, [protocol], 5, "t", progress=False, **extra)
    outcome = outcomes[protocol]
    return dict(zip(outcome.query_ids, outcome.ranks, strict=True))


def _csn_twin(pool: pd.DataFrame, vectors: dict, batch: int, metric: str = "cosine") -> tuple[float, dict[str, int]]:
    data = [
        {"language": lang, "code_vec": vectors["code", c], "query_vec": vectors["query", q]}
        for lang, c, q in zip(pool["language"], pool["code"], pool["query"], strict=True)
    ]
    tester = csn_model_test.MrrSearchTester(test_batch_size=batch, distance_metric=metric)
    mrr = tester.evaluate(data)
    ids = pool["id"].tolist()
    return mrr, {ids[i]: rank for i, rank in tester.ranks_log}


def _mrr(ranks: dict[str, int]) -> float:
    return float(np.mean(1.0 / np.asarray(list(ranks.values()), dtype=np.float64)))


# ------------------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def ruby(shared_data: Path) -> tuple[pd.DataFrame, list[dict], dict]:
    """The first N_REAL records of the CodeSearchNet Ruby test file (file order), as csbench's reader
    makes them (id = url, query = the docstring tokens joined), the raw records, and MiniLM vectors of
    every text the tests rank (the FuncName texts included; unit length, as csbench's cosine model)."""
    from csbench.models.encoder import _unit, encode_texts
    from csbench.models.hf import HFBiEncoder, ModelNotAvailableError, hf_params

    lines = (shared_data / "codesearchnet/ruby/test.jsonl").read_text(encoding="utf-8").splitlines()[:N_REAL]
    raw = [json.loads(line) for line in lines]
    pool = pd.DataFrame(
        {
            "id": [r["url"] for r in raw],
            "language": "ruby",
            "query": [" ".join(r["docstring_tokens"]).strip() for r in raw],
            "code": [r["code"] for r in raw],
            "func_name": [r["func_name"] for r in raw],
            "url": [r["url"] for r in raw],
        }
    )
    try:
        from csbench.evaluate.protocols import funcname_pool

        names = funcname_pool(pool)
    except ImportError:  # a csbench without the FuncName test (the tests of it then fail on their own)
        names = pool
    try:
        encoder = HFBiEncoder.from_pretrained(hf_params("minilm", max_code_len=64))
    except ModelNotAvailableError as err:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed: {err}")
    vectors: dict[tuple[str, str], np.ndarray] = {}
    for side, texts in (("code", [*pool["code"], *names["code"]]), ("query", [*pool["query"], *names["query"]])):
        distinct = list(dict.fromkeys(texts))
        languages = ["ruby"] * len(distinct) if side == "code" else None
        encoded = _unit(encode_texts(encoder, distinct, side, languages=languages)).astype(np.float32)
        vectors.update({(side, text): vector for text, vector in zip(distinct, encoded, strict=True)})
    return pool, raw, vectors


def test_csn_1000_equals_model_test_on_real_minilm_vectors(ruby) -> None:
    """110 records: CodeSearchNet lowers the batch size to 110, so one chunk (csbench said n/a before)."""
    pool, _, vectors = ruby
    ours = _ours(pool, vectors, "csn-1000")
    mrr, theirs = _csn_twin(pool, vectors, 1000)
    assert len(theirs) == N_REAL
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)


def _chunks_of(size: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """A csn-1000 of another batch size, registered for one test."""
    from csbench.evaluate.protocols import Chunked

    name = f"csn-{size}-twin"
    monkeypatch.setitem(PROTOCOLS._items, name, Chunked(name, "csn-1000 with another batch size", None, size=size))
    return name


def test_csn_chunks_equal_model_test_with_several_batches(ruby, monkeypatch) -> None:
    """Batch size 32: three chunks of the shuffled file order, the last 14 records dropped."""
    pool, _, vectors = ruby
    ours = _ours(pool, vectors, _chunks_of(32, monkeypatch))
    mrr, theirs = _csn_twin(pool, vectors, 32)
    assert len(theirs) == 96
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)


def test_funcname_texts_follow_model_test(ruby, shared_data: Path) -> None:
    """The query is dpu_utils' split of the name; the name is replaced by %UNK% wherever CodeSearchNet
    replaces a code token (Ruby's names are qualified, ``Module.Class.method``: nothing is; AdvTest's
    train records carry plain names)."""
    from csbench.evaluate.protocols import UNK_TOKEN, funcname_texts

    advtest = [json.loads(line) for line in (shared_data / "advtest/train_sample.jsonl").read_text().splitlines()]
    _, raw, _ = ruby
    records = raw + advtest
    twin = csn_model_test.get_dataset_from(records, use_func_names=True)
    replaced = 0
    for record, theirs in zip(records, twin, strict=True):
        query, code = funcname_texts(record["func_name"], record["code"])
        assert query == " ".join(theirs["docstring_tokens"])
        unk = theirs["code_tokens"].count(csn_model_test.get_unk())
        assert code.count(UNK_TOKEN) >= unk  # every token they replace, we replace (and in strings too)
        if unk:
            replaced += 1
            assert record["func_name"] not in {t for t in theirs["code_tokens"]}
    assert replaced >= 30  # 38: the AdvTest records with a plain (unqualified) name


def test_csn_funcname_equals_model_test_funcname(ruby) -> None:
    """The FuncName MRR: csn-1000 over the FuncName texts (the twin scores the vectors of our texts)."""
    from csbench.evaluate.protocols import funcname_pool

    pool, _, vectors = ruby
    ours = _ours(pool, vectors, "csn-funcname")
    names = funcname_pool(pool)
    mrr, theirs = _csn_twin(names, vectors, 1000)
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)
    assert ours != _ours(pool, vectors, "csn-1000")  # other texts, other ranks


def _quantized(vectors: dict) -> dict:
    return {key: (np.round(v.astype(np.float64) * 256) / 256).astype(np.float32) for key, v in vectors.items()}


def _gecs_twin(pool: pd.DataFrame, vectors: dict, k: int) -> tuple[float, dict[str, int], list]:
    queries = np.stack([vectors["query", q] for q in pool["query"]]).astype(np.float64)
    codes = np.stack([vectors["code", c] for c in pool["code"]]).astype(np.float64)
    chunks = gecs_mrr.task_chunks(len(pool), k)
    mrr, ranks = gecs_mrr.mrr_of_chunks(chunks, lambda q, c: float(queries[q] @ codes[c]))
    return mrr, dict(zip(pool["id"], ranks, strict=True)), chunks


def test_gecs_100_equals_the_genbench_task_on_real_minilm_vectors(ruby) -> None:
    pool, _, vectors = ruby
    vectors = _quantized(vectors)
    plan = PROTOCOLS.get("gecs-100").plan(pool["id"].tolist())
    mrr, theirs, chunks = _gecs_twin(pool, vectors, 99)
    assert plan.per_query.tolist() == [[code for _, code in chunk] for chunk in chunks]  # same candidates
    ours = _ours(pool, vectors, "gecs-100")
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)


# ----------------------------------------------------------------------------------- exact ties


@pytest.mark.parametrize("retriever", [VectorRetriever, ScoreRetriever])
def test_csn_chunks_equal_model_test_with_exact_ties(retriever, monkeypatch) -> None:
    """2,500 records in chunks of 1,000 (500 dropped); the row path (no vectors) ranks by inner products,
    which the twin gets as a cdist metric (negated inner product)."""
    pool = _pool(2500 if retriever is VectorRetriever else 250)
    vectors = _tied_vectors(pool, seed=3)
    if retriever is VectorRetriever:
        ours = _ours(pool, vectors, "csn-1000")
        mrr, theirs = _csn_twin(pool, vectors, 1000)
        assert len(theirs) == 2000
    else:
        ours = _ours(pool, vectors, _chunks_of(100, monkeypatch), ScoreRetriever)
        mrr, theirs = _csn_twin(pool, vectors, 100, metric=lambda u, v: -float(np.dot(u, v)))
        assert len(theirs) == 200
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)
    assert len(set(theirs.values())) > 5


@pytest.mark.parametrize("retriever", [VectorRetriever, ScoreRetriever])
def test_gecs_100_equals_the_genbench_task_with_exact_ties(retriever) -> None:
    pool = _pool(300)
    vectors = _tied_vectors(pool, seed=5)
    mrr, theirs, _ = _gecs_twin(pool, vectors, 99)
    ours = _ours(pool, vectors, "gecs-100", retriever)
    assert ours == theirs
    assert round(_mrr(ours), 12) == round(mrr, 12)


# ------------------------------------------------------------------------- the plans themselves


def test_csn_1000_shuffles_the_file_order_with_numpy_legacy_seed_0() -> None:
    ids = [f"id{i}" for i in range(2345)][::-1]
    plan = PROTOCOLS.get("csn-1000").plan(ids)
    np.random.seed(0)
    idxs = np.arange(len(ids))
    np.random.shuffle(idxs)
    assert [g.tolist() for g in plan.groups] == [idxs[:1000].tolist(), idxs[1000:2000].tolist()]
    assert (plan.axis, plan.distance) == ("code", "cosine")
    assert plan.note == "345 records in the last partial chunk are not evaluated"


def test_csn_1000_small_pool_is_one_chunk_of_its_size() -> None:
    plan = PROTOCOLS.get("csn-1000").plan([f"id{i}" for i in range(590)])
    assert [g.size for g in plan.groups] == [590] and (plan.group_of == 0).all()
    assert "one chunk of 590" in plan.note
    assert PROTOCOLS.get("csn-1000").plan([]).groups == []


def test_gecs_100_draws_in_file_order_with_python_random_seed_42() -> None:
    ids = [f"id{i}" for i in range(150)][::-1]
    rows = PROTOCOLS.get("gecs-100").plan(ids).per_query
    drawn = gecs_mrr.get_dataset_raw(list(range(150)), 99)
    assert rows[:, 0].tolist() == list(range(150))
    assert rows[:, 1:].tolist() == [others for _, others in drawn]


# --------------------------------------------------------------- eval_mrr_cosine.py's own draws


def test_eval_mrr_cosine_draws_from_the_previous_chunk_not_the_test_set() -> None:
    """``codes = [code] + distractors`` rebinds ``codes`` in eval_mrr_cosine.py's loop: from the second
    query on, distractors come from the previous query's chunk, the query's own code can be its own
    distractor (an exact tie: its rank grows by one), and the MRR moves. Fixed vectors, 300 records."""
    n = 300
    pool = _pool(n)
    vectors = _tied_vectors(pool, seed=11, dim=16)
    queries = np.stack([vectors["query", q] for q in pool["query"]]).astype(np.float64)
    codes = np.stack([vectors["code", c] for c in pool["code"]]).astype(np.float64)

    def score(q: int, c: int) -> float:
        return float(queries[q] @ codes[c])

    gecs_mrr.random.seed(42)
    script = gecs_mrr.eval_mrr_cosine_chunks(list(range(n)), list(range(n)), 99)
    task = gecs_mrr.task_chunks(n, 99)
    assert [c[1] for c in script[0]] == [c[1] for c in task[0]]  # the first query draws alike
    previous = [code for _, code in script[0]]
    assert sorted(code for _, code in script[1][1:]) == sorted(previous[:1] + previous[2:])
    for i in range(2, n):
        assert {code for _, code in script[i][1:]} <= {code for _, code in script[i - 1]}
    own = sum(i in {code for _, code in chunk[1:]} for i, chunk in enumerate(script))
    assert own >= 20  # the query's own code among its distractors (32 of the 300 here)
    script_mrr, _ = gecs_mrr.mrr_of_chunks(script, score)
    task_mrr, task_ranks = gecs_mrr.mrr_of_chunks(task, score)
    ours = _ours(pool, vectors, "gecs-100")
    assert list(ours.values()) == task_ranks  # csbench is the task
    assert script_mrr < task_mrr  # the own-code ties push ranks down


def test_rank_chunk_counts_along_the_code_axis_and_puts_a_nan_correct_entry_last() -> None:
    from csbench.evaluate.ranking import rank_chunk

    distances = np.array([[0.5, 0.5, 0.1], [0.2, 0.3, np.nan], [np.nan, 0.0, np.nan]])
    result = rank_chunk(distances, 3, lower_is_better=True)
    assert result.ranks.tolist() == [3, 2, 3]  # row 0: the tie counts against it; row 2: NaN ranks last
    assert result.top.tolist()[0] == [2, 1, 0]  # best first; the correct one after its ties
    assert result.top.tolist()[1] == [0, 1, 2]
    np.testing.assert_array_equal(result.top_scores[0], [-0.1, -0.5, -0.5])  # distances negated
    scores = rank_chunk(-distances, 2, lower_is_better=False)
    assert scores.ranks.tolist() == [3, 2, 3] and scores.top.tolist() == [[2, 1], [0, 1], [1, 0]]


def test_robustness_refuses_the_funcname_protocol(tmp_path, capsys) -> None:
    """Perturbations change the test queries; csn-funcname ranks the function names instead."""
    import yaml

    from csbench.cli import main

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text(encoding="utf-8"))
    raw["robustness"]["protocol"] = "csn-funcname"
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["validate", "--config", str(config)]) == 2
    assert "robustness.protocol: 'csn-funcname' ranks its own queries (the function names)" in capsys.readouterr().err
