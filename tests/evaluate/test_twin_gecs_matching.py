"""``matching`` = GeCS's ``eval_clf*.py`` on the release's own pairs (issue 23, item 3).

The reference twin (``tests/reference/gecs_clf.py``) is GeCS's evaluation transcribed; csbench's side
is the whole path a run takes: the GeCS reader makes the records and the released pairs of a ``clf``
file, ``search`` decides them under ``evaluation.match_threshold``. Both get the same vectors (real
MiniLM vectors of the shared GeCS samples, and integer-valued random vectors with exact ties) and
must take identical decisions and report identical metrics (float equality, no rounding on either
side). The shared sample files hold positive lines only, so the ``clf`` files here are made from them
by GeCS's own ``create_ds_clf_*.py`` loop (in the twin): a true and a false pair per item, seed 42.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from reference import gecs_clf
from test_twin_codexglue import FixedVectors

from csbench.datasets.base import SkipReport
from csbench.datasets.releases._formats import RecordChecker, split_gecs_input
from csbench.datasets.releases.statcodesearch import read_gecs_file, read_gecs_pairs
from csbench.evaluate.protocols import (
    RELEASED_COLUMNS,
    Matching,
    MatchRule,
    decide,
    matching_metrics,
)
from csbench.evaluate.runner import MatchingSetup, evaluate_pool

pytest.importorskip("sklearn", reason="the twin computes GeCS's metrics with scikit-learn, as GeCS does")

MINILM_TOKENS = ("[SEP]", "[CLS]", "[PAD]")  # all-MiniLM-L6-v2's sep / cls / pad tokens (no eos)
METRICS = ("accuracy", "precision", "recall", "f1")
N_REAL = 50  # items of each sample (100 pairs): few enough to encode in seconds
SAMPLES = ("codesearchnet/gecs_samples/ruby_test_sample.jsonl", "statcodesearch/sample_gecs_format.jsonl")


class VectorRetriever(FixedVectors):
    """A dense retriever over given vectors, codes keyed by their text: what csbench's runner sees of a
    bi-encoder."""

    def __init__(self, query_vectors: dict[str, np.ndarray], code_vectors: dict[str, np.ndarray]) -> None:
        super().__init__(code_vectors, query_vectors, code_key="code")


def clf_file(path: Path, items: list[dict]) -> Path:
    """A released-format ``clf`` file of ``items`` (``docstring``, ``code``), made as GeCS made its own."""
    lines = gecs_clf.create_cbt_lines(items)
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def csbench_side(file: Path, dataset: str, retriever: VectorRetriever, rule: str | float, tokens=MINILM_TOKENS):
    """Records and released pairs as prepare makes them, decided as evaluate decides them."""
    report = SkipReport()
    pool = pd.DataFrame(
        read_gecs_file(file, dataset=dataset, language="x", split="test", report=report, checker=RecordChecker(report))
    )
    released = pd.DataFrame(list(read_gecs_pairs(file, dataset=dataset, report=SkipReport())), columns=RELEASED_COLUMNS)
    setup = MatchingSetup(released, "released", MatchRule.parse(rule), special_tokens=tokens)
    outcomes, _ = evaluate_pool(retriever, pool, ["matching"], 1, "twin", progress=False, matching_setup=setup)
    return outcomes["matching"]


def twin_side(file: Path, retriever: VectorRetriever, tokens=MINILM_TOKENS) -> dict:
    """GeCS's eval_clf_cosine.py on the same file: each text's vector is the one csbench encodes for it
    (GeCS's text keeps the space before `` [CODESPLIT] `` and its code the one after; csbench's record
    strips the query and drops those single spaces, which a tokenizer ignores)."""

    def embed_comments(texts: list[str]) -> torch.Tensor:
        return torch.from_numpy(np.stack([retriever.queries[text.strip()] for text in texts]))

    def embed_codes(texts: list[str]) -> torch.Tensor:
        ours = [text[1:] if text.startswith(" ") else text for text in texts]
        return torch.from_numpy(np.stack([retriever.codes[text] for text in ours]))

    tokenizer = gecs_clf.special_tokens(*tokens, *([None] * (4 - len(tokens))))
    return gecs_clf.evaluate_file(file, embed_comments, embed_codes, tokenizer)


def assert_identical(ours, theirs: dict) -> None:
    assert list(ours.decisions.astype(int)) == theirs["predictions"]
    assert list(ours.labels.astype(int)) == theirs["labels"]
    metrics = ours.metrics()
    for key in METRICS:
        assert metrics[key] == theirs[key], key  # float equality: neither side rounds
    assert ours.pairs == "released"


# ------------------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def real(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, str, VectorRetriever]]:
    """The Ruby and StatCodeSearch GeCS samples as released-format ``clf`` files, with MiniLM vectors
    (unit length, csbench's cosine model) of every query and code."""
    from csbench.models.encoder import _unit, encode_texts
    from csbench.models.hf import HFBiEncoder, ModelNotAvailableError, hf_params

    try:
        encoder = HFBiEncoder.from_pretrained(hf_params("minilm", max_code_len=64))
    except ModelNotAvailableError as err:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed: {err}")
    folder = tmp_path_factory.mktemp("gecs_clf")
    out = []
    for sample in SAMPLES:
        items = []
        for line in (shared_data / sample).read_text(encoding="utf-8").splitlines()[:N_REAL]:
            text, code = split_gecs_input(json.loads(line)["input"])
            items.append({"docstring": text, "code": code})
        name = Path(sample).parts[-1].split("_")[0]
        file = clf_file(folder / f"test_{name}_clf.jsonl", items)
        queries = list(dict.fromkeys(item["docstring"].strip() for item in items))
        codes = list(dict.fromkeys(item["code"] for item in items))
        query_vectors = _unit(encode_texts(encoder, queries, "query")).astype(np.float32)
        code_vectors = _unit(encode_texts(encoder, codes, "code", languages=["x"] * len(codes))).astype(np.float32)
        retriever = VectorRetriever(
            dict(zip(queries, query_vectors, strict=True)), dict(zip(codes, code_vectors, strict=True))
        )
        out.append((file, name, retriever))
    return out


def test_matching_equals_eval_clf_cosine_on_real_minilm_vectors(real) -> None:
    for file, name, retriever in real:
        theirs = twin_side(file, retriever)
        ours = csbench_side(file, f"gecs-{name}", retriever, "gecs")
        assert ours.metrics()["n_pairs"] == len(theirs["labels"]) == 2 * N_REAL
        assert 0 < sum(theirs["predictions"]) < len(theirs["predictions"])  # the threshold cuts somewhere
        assert_identical(ours, theirs)
        assert ours.threshold == 0.5 and ours.valid_accuracy is None
        assert "cosine > 0.5" in ours.rule


def test_released_negatives_are_the_files_not_drawn_ones(real) -> None:
    file, name, retriever = real[0]
    lines = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    ours = csbench_side(file, f"gecs-{name}", retriever, "gecs")
    rows = zip(ours.query_ids, ours.code_ids, ours.labels, range(1, len(lines) + 1), strict=True)
    for query_id, code_id, label, line in rows:
        assert lines[line - 1]["target"] == label
        text, code = split_gecs_input(lines[line - 1]["input"])
        positive = lines[int(code_id.split(":")[1]) - 1]
        assert split_gecs_input(positive["input"])[1] == code and positive["target"] == 1
        assert split_gecs_input(lines[int(query_id.split(":")[1]) - 1]["input"])[0] == text
    drawn = Matching("m", "", None).pairs([f"gecs-{name}:{i}" for i in range(1, len(lines), 2)])
    assert drawn.source == "drawn"  # what matching did before: other negatives, same positives
    assert sorted(drawn.codes[drawn.labels == 0].tolist()) != sorted(
        int(c.split(":")[1]) // 2 for c, label in zip(ours.code_ids, ours.labels, strict=True) if label == 0
    )


# ------------------------------------------------------------------------------ random vectors, ties


def tie_vectors(seed: int, n: int) -> tuple[list[dict], VectorRetriever]:
    """``n`` items whose query and code vectors are small integer rows, repeated: many pairs sit at a
    cosine of exactly 0.5 in exact arithmetic: for (0,1,1,2) against (1,1,2,0) (3 / 6) float64 rounds
    above 0.5 and ``torch.cosine_similarity`` in float32 below, so only GeCS's own arithmetic decides
    them as GeCS did; (0,0,0,1) against (2,2,2,2) is 0.5 exactly in both, where only a strict ``>``
    says no match; an all-zero code (torch's eps); a few texts holding a special token GeCS's loader
    refuses."""
    rng = np.random.default_rng(seed)
    query_rows = [[0, 1, 1, 2], [0, 1, 1, 1], [1, 1, 0, 0], [2, 2, 0, 0], [0, 1, 2, 1], [0, 0, 0, 1]]
    code_rows = [[1, 1, 2, 0], [3, 1, 1, 1], [1, 0, 1, 0], [0, 1, 1, 2], [0, 0, 0, 0], [2, 0, 1, 1], [2, 2, 2, 2]]
    items, queries, codes = [], {}, {}
    for i in range(n):
        query = f"query {i}" + (" [PAD]" if i % 17 == 5 else "")
        code = f"def f{i}(): pass" + (" # [SEP]" if i % 23 == 7 else "")
        queries[query] = np.array(query_rows[rng.integers(0, len(query_rows))], dtype=np.float32)
        codes[code] = np.array(code_rows[rng.integers(0, len(code_rows))], dtype=np.float32)
        items.append({"docstring": query, "code": code})
    return items, VectorRetriever(queries, codes)


def halves(outcome, items: list[dict], retriever: VectorRetriever) -> int:
    """Pairs of ``outcome`` whose exact cosine is 0.5 (integer vectors: 4 dot^2 == |q|^2 |c|^2, dot > 0);
    record ``<dataset>:<line>`` is item ``(line - 1) // 2`` (a true and a false line per item)."""
    count = 0
    for query_id, code_id in zip(outcome.query_ids, outcome.code_ids, strict=True):
        query = retriever.queries[items[(int(query_id.split(":")[1]) - 1) // 2]["docstring"]].astype(int)
        code = retriever.codes[items[(int(code_id.split(":")[1]) - 1) // 2]["code"]].astype(int)
        dot = int(query @ code)
        count += dot > 0 and 4 * dot * dot == int(query @ query) * int(code @ code)
    return count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matching_equals_eval_clf_cosine_on_vectors_with_ties(tmp_path: Path, seed: int) -> None:
    items, retriever = tie_vectors(seed, 120)
    file = clf_file(tmp_path / "test_ties_clf.jsonl", items)
    theirs = twin_side(file, retriever)
    ours = csbench_side(file, "ties", retriever, "gecs")
    assert len(theirs["labels"]) < 240  # the special tokens made both sides skip pairs
    assert "special tokens" in ours.plan_note
    assert halves(ours, items, retriever) > 10  # pairs exactly at the threshold, decided as torch decides them
    assert_identical(ours, theirs)


def test_a_fixed_threshold_is_strict_as_gecs(tmp_path: Path) -> None:
    items, retriever = tie_vectors(3, 80)
    file = clf_file(tmp_path / "test_ties_clf.jsonl", items)
    ours = csbench_side(file, "ties", retriever, 1.0)
    assert not ours.decisions.any()  # no cosine exceeds 1: nothing matches, precision and F1 are 0
    assert ours.metrics()["precision"] == 0.0 and ours.metrics()["f1"] == 0.0


def test_cross_encoder_head_equals_eval_clf_argmax() -> None:
    """eval_clf.py: ``logits.argmax(-1)`` (a tie is no match); csbench: logit(match) − logit(no match) > 0."""
    rng = np.random.default_rng(4)
    logits = torch.from_numpy(rng.integers(-2, 3, size=(200, 2)).astype(np.float32))  # many exact ties
    labels = torch.from_numpy(rng.integers(0, 2, size=200))
    theirs = gecs_clf.predict_head(list(logits.split(32)), list(labels.split(32)))
    scores = (logits.double()[:, 1] - logits.double()[:, 0]).numpy()  # CrossEncoder.score_pairs
    ours = decide(scores, 0.0, strict=True)
    assert list(ours.astype(int)) == theirs["predictions"]
    metrics = matching_metrics(labels.numpy(), ours)
    assert all(metrics[key] == theirs[key] for key in METRICS)


def test_metrics_equal_sklearn_on_degenerate_cases() -> None:
    from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score

    cases = [([1, 1, 0], [0, 0, 0]), ([0, 0], [0, 0]), ([1, 0, 1, 1], [1, 1, 1, 1]), ([0, 1], [1, 0])]
    for labels, predictions in cases:
        ours = matching_metrics(np.array(labels), np.array(predictions, dtype=bool))
        with pytest.warns() if not any(predictions) or not any(labels) else _nothing():
            expected = {
                "accuracy": accuracy_score(labels, predictions),
                "precision": precision_score(labels, predictions),
                "recall": recall_score(labels, predictions),
                "f1": f1_score(labels, predictions),
            }
        assert ours == expected


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ----------------------------------------------------------------------------- pairs and options


def test_auto_draws_where_the_release_has_no_negatives_and_says_so() -> None:
    ids = [f"d:{i}" for i in range(10)]
    positives = pd.DataFrame({"query_id": ids, "code_id": ids, "label": 1, "line": range(10)})
    pairs = MatchingSetup(positives).pairs_of(Matching("m", "", None), ids)
    assert pairs.source == "drawn" and "no negative pair" in pairs.note and pairs.labels.sum() == 10
    with pytest.raises(ValueError, match="no released matching pairs"):
        MatchingSetup(None, "released").pairs_of(Matching("m", "", None), ids)
    released = pd.concat([positives, positives.assign(code_id=ids[1:] + ids[:1], label=0)])
    pairs = MatchingSetup(released).pairs_of(Matching("m", "", None), ids[:-1])  # d:9 not in the pool
    assert pairs.source == "released" and pairs.labels.size == 20 - 3 and "3 released pairs" in pairs.note


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gces", "is not a match threshold"),
        (float("inf"), "not a finite number"),
        ({"datset": "cosqa"}, "is not a match threshold"),
        (True, "is not a match threshold"),
    ],
)
def test_match_threshold_refuses_bad_values_naming_the_key(value, message) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        MatchRule.parse(value)
    assert str(caught.value).startswith("evaluation.match_threshold: ")
    assert MatchRule.parse("gecs") == MatchRule("gecs", 0.5) and MatchRule.parse(0.7) == MatchRule("fixed", 0.7)
    assert MatchRule.parse({"dataset": "cosqa"}) == MatchRule("borrowed", dataset="cosqa")


def test_a_borrowed_threshold_is_chosen_on_the_other_validation_split() -> None:
    """WebQueryTest with CoSQA dev's threshold: the threshold is the other split's most accurate one."""
    from csbench.evaluate.protocols import best_threshold
    from csbench.evaluate.runner import pair_scores_of

    items, retriever = tie_vectors(5, 60)
    vectors = VectorRetriever(retriever.queries, retriever.codes)
    frame = pd.DataFrame({"id": [f"t{i}" for i in range(60)]})
    frame["query"], frame["code"] = [i["docstring"] for i in items], [i["code"] for i in items]
    other, test = frame.iloc[:30].reset_index(drop=True), frame.iloc[30:].reset_index(drop=True)
    other_retriever = VectorRetriever(retriever.queries, retriever.codes)
    other_retriever.index(other)
    setup = MatchingSetup(rule=MatchRule.parse({"dataset": "other"}), borrowed=(other, other_retriever))
    outcomes, _ = evaluate_pool(vectors, test, ["matching"], 1, "b", progress=False, matching_setup=setup)
    other_pairs = Matching("m", "", None).pairs(other["id"].tolist())
    other_scores = pair_scores_of(other_retriever, other["query"].tolist(), other_pairs)
    expected, accuracy = best_threshold(other_scores, other_pairs.labels)
    outcome = outcomes["matching"]
    assert (outcome.threshold, outcome.valid_accuracy) == (expected, accuracy)
    assert list(outcome.decisions) == list(outcome.scores >= expected)
    assert outcome.pairs == "drawn" and "validation split of other" in outcome.rule


# ------------------------------------------------------------------------ the pipeline, end to end


def test_prepare_carries_the_released_pairs_to_evaluate(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    """download / prepare / attack / index / evaluate on a GeCS clf file (BM25, fast): prepare writes
    ``released_pairs.parquet``, evaluate decides exactly those pairs and says so in ``metrics.json``."""
    import yaml

    from csbench.cli import main

    items = []
    for line in (shared_data / SAMPLES[0]).read_text(encoding="utf-8").splitlines()[:40]:
        text, code = split_gecs_input(json.loads(line)["input"])
        items.append({"docstring": text, "code": code})
    file = clf_file(tmp_path / "test_ruby_clf.jsonl", items)
    (tmp_path / "params.yaml").write_text((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    study = {
        "study": "gecs-matching",
        "grid": {"datasets": ["gecs-csn-ruby"], "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
        "datasets": {"gecs-csn-ruby": {"file": str(file)}},
        "evaluation": {"protocols": ["gecs-100", "matching"], "run_depth": 10, "match_threshold": 5.0},
        "robustness": {"datasets": [], "attacks": [], "protocol": "gecs-100"},
        "stability": {"protocol": "gecs-100"},
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    monkeypatch.chdir(tmp_path)
    configs = ["--config", "params.yaml", "--config", "study.yaml"]
    run = ["--dataset", "gecs-csn-ruby", "--attack", "none", "--model", "bm25", "--loss", "none", "--seed", "0"]
    for phase, args in (
        ("download", ["--dataset", "gecs-csn-ruby"]),
        ("prepare", ["--dataset", "gecs-csn-ruby"]),
        ("attack", ["--dataset", "gecs-csn-ruby", "--attack", "none"]),
        ("index", [*run, "--inference", "zero_shot"]),
        ("evaluate", [*run, "--inference", "zero_shot"]),
    ):
        assert main(["--quiet", phase, *configs, *args]) == 0, phase
    card = json.loads(Path("data/prepared/gecs-csn-ruby/card.json").read_text())
    assert {k: card["released_pairs"][k] for k in ("pairs", "positives", "negatives")} == {
        "pairs": 80,
        "positives": 40,
        "negatives": 40,
    }
    out = Path("results/runs/gecs-csn-ruby/none/bm25/none/0/zero_shot")
    record = json.loads((out / "metrics.json").read_text())
    assert record["protocols"]["matching"]["pairs"] == "released"
    assert record["protocols"]["matching"]["rule"] == "fixed threshold: cosine > 5.0"
    rows = [line.split("\t") for line in (out / "matching.tsv").read_text().splitlines()[1:]]
    lines = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    assert [int(label) for _, _, label, _, _ in rows] == [line["target"] for line in lines]
    negatives = [(q, c) for q, c, label, _, _ in rows if label == "0"]
    for k, (query_id, code_id) in enumerate(negatives):  # line 2k+2 pairs item k's text with another line's code
        assert query_id == f"gecs-csn-ruby:{2 * k + 1}"
        released_code = lines[2 * k + 1]["input"].split(" [CODESPLIT] ")[1]  # the negative line's code
        assert lines[int(code_id.split(":")[1]) - 1]["input"].split(" [CODESPLIT] ")[1] == released_code
    scores = {m["metric"]: m["value"] for m in record["scores"] if m["protocol"] == "matching"}
    decided = [row[4] == "1" for row in rows]
    assert decided == [float(row[3]) > 5.0 for row in rows]  # BM25's own score against the fixed value
    assert scores["n_pairs"] == 80 and scores["threshold"] == 5.0


# ------------------------------------------------------------------------------- config validation


def _validate(tmp_path: Path, capsys, **evaluation) -> tuple[int, str, Path]:
    import yaml

    from csbench.cli import main

    datasets = ["gecs-csn-ruby", "cosqa"]
    study = {
        "study": "matching",
        "grid": {"datasets": datasets, "attacks": ["none"], "models": ["bm25"], "trained": {"models": []}},
        "datasets": {name: {} for name in datasets},
        "evaluation": {"protocols": ["gecs-100", "matching"], "run_depth": 100, **evaluation},
        "robustness": {"datasets": [], "attacks": [], "protocol": "gecs-100"},
        "stability": {"protocol": "gecs-100"},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False), encoding="utf-8")
    params = Path(__file__).resolve().parents[2] / "params.yaml"
    code = main(["validate", "--config", str(params), "--config", str(path)])
    captured = capsys.readouterr()
    return code, captured.err, path


def test_a_fixed_threshold_needs_no_validation_split(tmp_path: Path, capsys) -> None:
    code, err, _ = _validate(tmp_path, capsys)
    assert code == 2 and "gecs-csn-ruby (grid.datasets[0]: the release has no validation split" in err
    assert _validate(tmp_path, capsys, match_threshold="gecs")[0] == 0
    assert _validate(tmp_path, capsys, match_threshold=0.7, match_pairs="drawn")[0] == 0
    assert _validate(tmp_path, capsys, match_threshold={"dataset": "cosqa"})[0] == 0  # CoSQA dev chooses it


@pytest.mark.parametrize(
    ("evaluation", "message"),
    [
        ({"match_threshold": "gces"}, "evaluation.match_threshold"),
        ({"match_threshold": {"dataset": "advtest"}}, "borrows the threshold of 'advtest', which is not in grid"),
        ({"match_threshold": {"dataset": "gecs-csn-ruby"}}, "'gecs-csn-ruby' has no validation split"),
        (
            {"match_threshold": "gecs", "match_pairs": "released"},
            "these datasets have no released matching pairs: cosqa",
        ),
        ({"match_pairs": "sometimes"}, "match_pairs"),
    ],
)
def test_bad_match_options_are_refused_naming_the_key(tmp_path: Path, capsys, evaluation, message) -> None:
    code, err, path = _validate(tmp_path, capsys, **evaluation)
    assert code == 2 and message in err, err
    assert err.startswith(f"csbench validate: error: {path}:")  # the file and line of the key


def test_released_pairs_reader_resolves_and_counts(tmp_path: Path) -> None:
    """Each negative line pairs the query of the positive line above it with the record of the first
    positive line holding its code; a code in no positive line, and a line GeCS's loader skips (two
    [CODESPLIT]), are counted, not guessed."""
    from csbench.datasets import DATASETS
    from csbench.datasets.released_pairs import RELEASED_PAIRS_FILE, write_released_pairs

    rows = [
        ("same text", "code a", 1),
        ("same text", "code b", 0),  # 2: text of line 1, code of line 5
        ("other", "code c", 1),
        ("other", "code nowhere", 0),  # 4: no positive line holds it
        ("same text", "code b", 1),
        ("same text", "code c", 0),  # 6: the nearest positive above with its text is line 5
        ("split [CODESPLIT] twice", "code d", 1),  # 7: eval_clf*.py skips it
    ]
    file = tmp_path / "test_ruby.jsonl"
    file.write_text("".join(json.dumps({"input": f"{t} [CODESPLIT] {c}", "target": y}) + "\n" for t, c, y in rows))
    report = SkipReport()
    got = list(read_gecs_pairs(file, dataset="d", report=report))
    assert got == [
        ("d:1", "d:1", 1, 1),
        ("d:1", "d:5", 0, 2),
        ("d:3", "d:3", 1, 3),
        ("d:5", "d:5", 1, 5),
        ("d:5", "d:3", 0, 6),
    ]
    assert report.counts == {
        "released negative without a positive line": 1,
        "more than one [CODESPLIT] (eval_clf*.py skips the line)": 1,
    }
    card = write_released_pairs(DATASETS.get("gecs-csn-ruby"), tmp_path, {"file": str(file)}, tmp_path)
    assert (card["pairs"], card["positives"], card["negatives"]) == (5, 3, 2) and (
        tmp_path / RELEASED_PAIRS_FILE
    ).is_file()
    # StatCodeSearch's json has no labelled pairs (every pair matches): no file, and a stale one goes
    assert write_released_pairs(DATASETS.get("statcodesearch"), tmp_path, {"format": "json"}, tmp_path) is None
    assert not (tmp_path / RELEASED_PAIRS_FILE).exists()
