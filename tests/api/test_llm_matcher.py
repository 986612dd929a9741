"""The zero-shot LLM matcher (csbench.models.llm.LlmMatcher): prompts per pair, answers parsed into
+1 / -1 / NaN, the matching outcome's accounting of unparseable answers, its index state; and end to
end through `transformers serve` (a tiny causal LM) behind the counting test server."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from csbench.api.cache import ResponseCache
from csbench.api.client import ApiClient
from csbench.api.prompts import load_prompt, parse_answer, render
from csbench.api.settings import ApiSettings
from csbench.evaluate.outcomes import MatchingOutcome
from csbench.models.llm import LlmMatcher, PairAnswer

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"the shared GeCS samples are not at {DATA}")


class FakeClient:
    """``ApiClient.chat``'s signature: answers from ``answer(prompt)``, every call recorded."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.calls: list[tuple[list[str], int | None, float | None]] = []

    def chat(self, prompts: Sequence[str], max_tokens: int | None = 10, temperature: float | None = None) -> list[str]:
        self.calls.append((list(prompts), max_tokens, temperature))
        return [self.answer(prompt) for prompt in prompts]


def pool() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "language": ["r", "r", "python"],
            "code": ["mean(x)", "lm(y ~ x)", "def f(x): return {x}"],
        }
    )


def by_code(answers: dict[str, str]) -> Callable[[str], str]:
    """An answer chosen by the code at the prompt's end."""
    return lambda prompt: next(text for code, text in answers.items() if prompt.endswith(code))


# --------------------------------------------------------------------------------------------- unit
def test_scores_prompts_and_answers() -> None:
    fake = FakeClient(by_code({"mean(x)": "True.", "lm(y ~ x)": " False", "def f(x): return {x}": "Maybe"}))
    built = []
    matcher = LlmMatcher(lambda: built.append(1) or fake, dataset="statcodesearch")
    matcher.index(pool())
    assert built == []  # no client until a pair is scored
    queries = ["average", "fit a model"]
    scores = matcher.score_pairs(queries, np.array([0, 0, 1]), np.array([0, 2, 1]))
    assert scores[0] == 1.0 and scores[2] == -1.0 and math.isnan(scores[1])
    assert built == [1]
    [(sent, max_tokens, temperature)] = fake.calls
    assert (max_tokens, temperature) == (10, None)  # GeCS: 10 output tokens, the server's default temperature
    assert sent == [
        render("gecs-matching", "r", "average", "mean(x)"),
        render("gecs-matching", "python", "average", "def f(x): return {x}"),  # each code's own language
        render("gecs-matching", "r", "fit a model", "lm(y ~ x)"),
    ]
    assert "a Python programming language code snippet" in sent[1]
    assert matcher.answers() == [
        PairAnswer(0, 0, "True.", True),
        PairAnswer(0, 2, "Maybe", None),
        PairAnswer(1, 1, " False", False),
    ]
    assert matcher.answer_rows()[1] == {"query": 0, "code": 2, "answer": "Maybe", "parsed": None}
    record = matcher.record()
    assert record["prompt"] == "gecs-matching" and record["prompt_template"] == load_prompt("gecs-matching")
    assert (record["n_answers"], record["n_unparseable"], record["n_truncated"]) == (3, 1, 0)
    matcher.clear_answers()
    assert matcher.answers() == []


def test_prompt_by_dataset_and_override() -> None:
    fake = FakeClient(lambda prompt: "False")
    cosqa = LlmMatcher(lambda: fake, dataset="cosqa", max_tokens=5, temperature=0.0)
    cosqa.index(pool())
    cosqa.score_pairs(["python mean"], np.array([0]), np.array([2]))
    assert fake.calls[-1] == ([render("gecs-cosqa", "python", "python mean", "def f(x): return {x}")], 5, 0.0)
    notebook = LlmMatcher(lambda: fake, dataset="cosqa", prompt="gecs-cosqa-notebook")
    notebook.index(pool())
    notebook.score_pairs(["python mean"], np.array([0]), np.array([2]))
    assert fake.calls[-1][0][0].endswith("'code':python mean [CODESPLIT] def f(x): return {x}")
    with pytest.raises(KeyError, match="shipped prompts"):
        LlmMatcher(lambda: fake, prompt="my-prompt")


def test_batches_and_input_limit() -> None:
    class CutAt:
        def __init__(self, n: int) -> None:
            self.n = n

        def apply(self, texts: list[str]) -> tuple[list[str], int]:
            return [text[: self.n] for text in texts], sum(len(text) > self.n for text in texts)

    fake = FakeClient(lambda prompt: "True")
    full = len(render("gecs-matching", "r", "q", "lm(y ~ x)"))
    matcher = LlmMatcher(lambda: fake, batch_size=2, input_limit=CutAt(full - 1))
    matcher.index(pool())
    scores = matcher.score_pairs(["q"], np.zeros(5, dtype=int), np.array([0, 1, 2, 0, 1]))
    assert scores.tolist() == [1.0] * 5
    assert [len(prompts) for prompts, _, _ in fake.calls] == [2, 2, 1]
    assert fake.calls[0][0][1].endswith("[CODESPLIT] lm(y ~ x")  # the code's end is what a cut loses
    assert matcher.n_truncated == 3  # "lm(y ~ x)" twice and the Python code; "mean(x)" is shorter
    assert matcher.record()["n_truncated"] == 3


def test_no_pairs_needs_no_client() -> None:
    def no_client() -> Any:
        raise AssertionError("no client should be built")

    matcher = LlmMatcher(no_client)
    matcher.index(pool())
    assert matcher.score_pairs(["q"], np.zeros(0, dtype=int), np.zeros(0, dtype=int)).shape == (0,)
    assert matcher.record()["usage"] is None
    assert matcher.model is None  # no tokenizer: gecs_special_tokens skips nothing


def test_runner_flags() -> None:
    """What the evaluation runner reads of a pair scorer."""
    matcher = LlmMatcher(lambda: FakeClient(str))
    assert matcher.decides_matches and matcher.parses_answers and matcher.matching_only
    assert not matcher.times_queries
    assert not hasattr(matcher, "scores")  # no per-query row: no latency sample, no whole-pool ranking
    assert matcher.INDEX_TYPE == "llm"

    from csbench.evaluate.pair_matching import gecs_special_tokens

    assert gecs_special_tokens(matcher) == ()


def test_index_state_round_trip(tmp_path: Path) -> None:
    from csbench.models.integrity import verify_dir, write_sums

    matcher = LlmMatcher(lambda: FakeClient(str), prompt="gecs-cosqa", max_tokens=7, temperature=0.5, batch_size=3,
                         dataset="cosqa")
    matcher.index(pool())
    state = matcher.index_state(tmp_path, "test")
    json.dumps(state)  # JSON only
    write_sums(tmp_path)
    files = verify_dir(tmp_path, "re-index", keep=lambda name: True)
    fake = FakeClient(lambda prompt: "True")
    again = LlmMatcher.from_index_state(state, files, lambda: fake)
    assert (again.codes, again.languages) == (pool()["code"].tolist(), pool()["language"].tolist())
    assert (again.prompt_name, again.max_tokens, again.temperature, again.batch_size, again.dataset) == (
        "gecs-cosqa", 7, 0.5, 3, "cosqa"
    )
    assert again.score_pairs(["q"], np.array([0]), np.array([1])).tolist() == [1.0]
    with pytest.raises(ValueError, match="factory"):
        LlmMatcher.from_index_state(state, files, None)

    class Factory:  # the config's client factory carries the model's input limit
        input_limit = object()

        def __call__(self) -> FakeClient:
            return fake

    assert LlmMatcher.from_index_state(state, files, Factory()).input_limit is Factory.input_limit


# ------------------------------------------------------------------------------------- the outcome
def outcome(labels: list[int], scores: list[float], unparseable: bool) -> MatchingOutcome:
    scores_ = np.asarray(scores, dtype=np.float64)
    decisions = np.where(np.isnan(scores_), False, scores_ > 0)  # decide_pairs' rule for a deciding model
    n = len(labels)
    return MatchingOutcome(
        "matching", "", [f"q{i}" for i in range(n)], [f"c{i}" for i in range(n)], np.asarray(labels), scores_,
        None, None, decisions, "released", "the chat model's answer", n,
        unparseable=np.isnan(scores_) if unparseable else None,
    )


def test_outcome_counts_unparseable_as_wrong() -> None:
    nan = math.nan
    # pairs: right match, wrong no-match, unparseable positive, unparseable negative, right no-match
    labels, scores = [1, 1, 1, 0, 0], [1.0, -1.0, nan, nan, -1.0]
    metrics = outcome(labels, scores, unparseable=True).metrics()
    assert metrics["n_unparseable"] == 2 and metrics["unparseable_share"] == pytest.approx(0.4)
    # decide_pairs made both unparseable pairs "no match", which would be right for the negative one;
    # scored as wrong, accuracy is 2 / 5 (not 3 / 5)
    assert metrics["accuracy"] == pytest.approx(2 / 5)
    assert metrics["accuracy_parsed"] == pytest.approx(2 / 3)
    # as wrong decisions: the negative's counts as a false match, the positive's as a missed one
    tp, fp, fn = 1, 1, 2
    assert metrics["precision"] == pytest.approx(tp / (tp + fp))
    assert metrics["recall"] == pytest.approx(tp / (tp + fn))
    assert metrics["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert (metrics["n_pairs"], metrics["n_positive"]) == (5, 3)


def test_outcome_of_other_models_unchanged() -> None:
    metrics = outcome([1, 1, 0, 0], [1.0, -1.0, -1.0, 1.0], unparseable=False).metrics()
    assert list(metrics) == [
        "accuracy", "precision", "recall", "f1", "threshold", "valid_accuracy", "n_pairs", "n_positive", "n_queries"
    ]
    assert metrics["accuracy"] == 0.5


def test_outcome_all_parsed_is_gecs_accuracy() -> None:
    """With every answer parsed, ``accuracy`` is GeCS's: scikit-learn's accuracy_score over the pairs."""
    from sklearn.metrics import accuracy_score

    labels = [1, 0, 1, 1, 0, 0, 1]
    answers = ["True", "False", "False", "True", "True", "False", "True"]
    scores = [1.0 if parse_answer(answer) else -1.0 for answer in answers]
    metrics = outcome(labels, scores, unparseable=True).metrics()
    gecs = accuracy_score(labels, [{"True": 1, "False": 0}[answer] for answer in answers])
    assert metrics["accuracy"] == metrics["accuracy_parsed"] == pytest.approx(gecs)
    assert (metrics["n_unparseable"], metrics["unparseable_share"]) == (0, 0.0)


def test_outcome_nothing_parsed() -> None:
    metrics = outcome([1, 0], [math.nan, math.nan], unparseable=True).metrics()
    assert metrics["accuracy"] == 0.0 and metrics["accuracy_parsed"] is None and metrics["unparseable_share"] == 1.0


def test_through_the_runner() -> None:
    """evaluate_pool with an LLM matcher: ranking protocols left unevaluated with a note, matching decided
    by the answers, the unparseable ones counted (decide_pairs sets ``unparseable`` for a model that
    ``parses_answers``) and the rule named."""
    from csbench.evaluate.runner import evaluate_pool

    def answer(prompt: str) -> str:  # q0, q1: "True" for every code; q2: unparseable; the rest "False"
        query = prompt.rsplit(" [CODESPLIT] ", 1)[0].rsplit(" ", 2)[-2]
        return {"q0": "True", "q1": "True", "q2": "maybe"}.get(query, "False")

    n = 6
    frame = pd.DataFrame({
        "id": [f"r{i}" for i in range(n)], "language": "r", "query": [f"q{i} text" for i in range(n)],
        "code": [f"f{i} <- function() {i}" for i in range(n)], "url": [f"u{i}" for i in range(n)],
        "func_name": [f"f{i}" for i in range(n)],
    })
    matcher = LlmMatcher(lambda: FakeClient(answer), dataset="statcodesearch")
    outcomes, _ = evaluate_pool(matcher, frame, ["full-corpus", "gecs-100", "matching"], 5, "run", False)
    for name in ("full-corpus", "gecs-100"):
        assert outcomes[name].ranks == [] and "matching only" in outcomes[name].plan_note
    matching = outcomes["matching"]
    assert matching.rule == LlmMatcher.DECISION_RULE
    metrics = matching.metrics()
    # 12 pairs (a positive and a drawn negative per query): q0, q1 right on 1 of 2 each, q2's 2 unparseable
    # (wrong), q3..q5 right on their negatives
    assert (metrics["n_pairs"], metrics["n_unparseable"]) == (12, 2)
    assert metrics["accuracy"] == pytest.approx(5 / 12)
    assert metrics["accuracy_parsed"] == pytest.approx(5 / 10)
    assert len(matcher.answers()) == 12


# --------------------------------------------------------------------------------- end to end
def statcodesearch_pairs(n: int) -> tuple[list[str], pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` StatCodeSearch sample records: each query with its own code (label 1) and the next one's (0)."""
    lines = (DATA / "statcodesearch" / "sample_gecs_format.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    split = [json.loads(line)["input"].split(" [CODESPLIT] ", 1) for line in lines]
    queries = [query for query, _ in split]
    codes = pd.DataFrame({"id": [f"s{i}" for i in range(n)], "language": "r", "code": [code for _, code in split]})
    query_index = np.repeat(np.arange(n), 2)
    code_index = np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1).ravel()
    labels = np.tile([1, 0], n)
    return queries, codes, query_index, code_index, labels


def cosqa_pairs(n: int) -> tuple[list[str], pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n`` CoSQA dev pairs, with their human labels."""
    records = json.loads((DATA / "cosqa" / "cosqa-dev.json").read_text(encoding="utf-8"))[:n]
    ids, code = [r["idx"] for r in records], [r["code"] for r in records]
    codes = pd.DataFrame({"id": ids, "language": "python", "code": code})
    return [r["doc"] for r in records], codes, np.arange(n), np.arange(n), np.asarray([r["label"] for r in records])


def cached_entries(folder: Path) -> int:
    """Entries of a response cache on disk (``<key[:2]>/<key>``, key a sha256)."""
    return sum(1 for path in folder.rglob("*") if path.is_file() and re.fullmatch(r"[0-9a-f]{64}", path.name))


def chat_requests(proxy: Any) -> int:
    return int(proxy.stats()["requests"].get("/v1/chat/completions", 0))


@needs_data
@pytest.mark.parametrize(("dataset", "pairs"), [("statcodesearch", statcodesearch_pairs), ("cosqa", cosqa_pairs)])
def test_end_to_end_through_transformers_serve(
    dataset: str, pairs: Callable[[int], Any], chat_proxy: Any, chat_settings: Callable[..., ApiSettings],
    tmp_path: Path,
) -> None:
    queries, codes, query_index, code_index, labels = pairs(6)
    cache = ResponseCache(tmp_path / "api-cache")
    clients: list[ApiClient] = []

    def client_factory() -> ApiClient:
        clients.append(ApiClient(chat_settings(), cache))
        return clients[-1]

    matcher = LlmMatcher(client_factory, dataset=dataset, max_tokens=10)
    matcher.index(codes)
    scores = matcher.score_pairs(queries, query_index, code_index)
    n = labels.size
    answers = matcher.answers()
    assert len(answers) == n == scores.size
    for answer, score in zip(answers, scores, strict=True):
        assert isinstance(answer.answer, str)
        assert answer.parsed is parse_answer(answer.answer)
        assert (math.isnan(score) and answer.parsed is None) or score == (1.0 if answer.parsed else -1.0)
    distinct = len(set(matcher.prompts(queries, query_index, code_index)))
    assert chat_requests(chat_proxy) == distinct  # one request per distinct prompt, counted at the server
    usage = clients[0].usage.as_dict()
    assert usage["requests"] == distinct and usage["cache_misses"] == distinct
    assert 0 < usage["completion_tokens"] <= 10 * distinct  # max_tokens reached the server
    # the tiny model answers "True", "False" or something unparseable (see conftest): all are counted
    assert any(answer.parsed is not None for answer in answers)
    unparseable = np.isnan(scores)
    result = MatchingOutcome(
        "matching", "", [f"q{q}" for q in query_index], [f"c{c}" for c in code_index], labels, scores, None, None,
        np.where(unparseable, False, scores > 0), "released", LlmMatcher.DECISION_RULE, len(queries),
        unparseable=unparseable,
    ).metrics()
    assert result["n_unparseable"] == sum(answer.parsed is None for answer in answers)
    assert result["unparseable_share"] == pytest.approx(result["n_unparseable"] / n)

    # a second identical run, a fresh matcher and client over the same cache: zero requests
    again = LlmMatcher(client_factory, dataset=dataset, max_tokens=10)
    again.index(codes)
    np.testing.assert_array_equal(again.score_pairs(queries, query_index, code_index), scores)
    assert chat_requests(chat_proxy) == distinct
    second = clients[1].usage.as_dict()
    assert (second["requests"], second["attempts"], second["cache_hits"]) == (0, 0, distinct)
    assert [a.answer for a in again.answers()] == [a.answer for a in answers]


@needs_data
def test_faults_in_front_of_transformers_serve(
    chat_proxy: Any, chat_settings: Callable[..., ApiSettings], tmp_path: Path
) -> None:
    """429 with Retry-After, 500, a dropped connection and a malformed body between the matcher and
    `transformers serve` are retried: the answers are those of a run without faults; a 400 fails the
    scoring at once, with nothing cached for its prompt."""
    from csbench.api.client import ApiError

    queries, codes, query_index, code_index, _ = statcodesearch_pairs(3)
    reference = LlmMatcher(lambda: ApiClient(chat_settings(), None), dataset="statcodesearch")
    reference.index(codes)
    expected = reference.score_pairs(queries, query_index, code_index)
    chat_proxy.reset()
    chat_proxy.add_faults(
        {"kind": "status", "status": 429, "retry_after": "0"}, {"kind": "status", "status": 500}, {"kind": "drop"},
        {"kind": "malformed"},
    )
    cache = ResponseCache(tmp_path / "api-cache")
    client = ApiClient(chat_settings(concurrency=1, max_retries=5), cache)
    matcher = LlmMatcher(lambda: client, dataset="statcodesearch")
    matcher.index(codes)
    np.testing.assert_array_equal(matcher.score_pairs(queries, query_index, code_index), expected)
    assert [a.answer for a in matcher.answers()] == [a.answer for a in reference.answers()]
    distinct = len(set(matcher.prompts(queries, query_index, code_index)))
    assert client.usage.retries == 4 and client.usage.requests == distinct
    assert chat_requests(chat_proxy) == distinct + 4
    assert cached_entries(tmp_path / "api-cache") == distinct

    chat_proxy.add_faults({"kind": "status", "status": 400})
    failing = LlmMatcher(lambda: ApiClient(chat_settings(), cache), dataset="statcodesearch")
    failing.index(codes)
    with pytest.raises(ApiError, match="400"):
        failing.score_pairs(["a query never asked"], np.array([0]), np.array([0]))
    assert cached_entries(tmp_path / "api-cache") == distinct and failing.answers() == []
