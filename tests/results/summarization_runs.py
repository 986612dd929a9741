"""Synthetic run folders for the aggregate's tests (tests/results/test_summarization.py): search runs
with fixed scores, and summarization runs with their summaries.jsonl, in the shape the evaluate
phase writes them (results/runs/<dataset>/<attack>/<model>/<loss>/<seed>/<inference>/: metrics.json,
provenance.json, and summaries.jsonl for summarization). Also the digest of a study folder that
the golden file of a search-only study compares (``study_digest``)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from csbench.io import write_json, write_text

SEARCH_DATASETS = {"python-stdlib": ("python", 40), "tl_codesum": ("java", 120)}
SEARCH_ATTACKS = ("none", "no_comment", "k_shift_dataset-3", "full_hash")
# (model, loss, seeds, inferences)
SEARCH_MODELS = (("bm25", "none", (0,), ("zero_shot",)), ("nbow", "ce", (0, 1), ("confused", "not_confused")))
SUMMARY_METRICS = ("bleu1", "bleu2", "bleu3", "bleu4", "bleu_composite", "smoothed_bleu4")


def provenance(dataset: str, attack: str) -> dict:
    """A provenance.json as the evaluate phase writes it (fixed values: the outputs must not vary)."""
    return {
        "phase": "evaluate",
        "created": "2024-01-01T00:00:00+00:00",
        "git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
        "params": {"evaluation": {"protocols": ["full-corpus"], "run_depth": 100}},
        "params_sha256": "ab" * 32,
        "inputs": {f"data/attacked/{dataset}/{attack}/test.parquet": "cd" * 32},
        "packages": {"python": "3.11.0", "csbench": "0.1.0", "numpy": "2.0"},
        "seed": 0,
        "device": "cpu",
        "host": "test-host",
        "argv": ["csbench", "evaluate"],
        "timings_s": {"total_s": 0.5},
    }


def run_dir(root: Path, dataset: str, attack: str, model: str, loss: str, seed: int, inference: str) -> Path:
    return root / "results" / "runs" / dataset / attack / model / loss / str(seed) / inference


def _run(dataset: str, attack: str, model: str, loss: str, seed: int, inference: str, task: str) -> dict:
    language = SEARCH_DATASETS.get(dataset, ("java", 0))[0]
    return {
        "study": "unit",
        "dataset": dataset,
        "language": language,
        "attack": attack,
        "model": model,
        "loss": loss,
        "seed": seed,
        "inference": inference,
        "task": task,
    }


def search_score(dataset: str, attack: str, model: str, seed: int, inference: str) -> float:
    """The MRR of a synthetic search run: lower for more severe attacks, varying with every key."""
    damage = {"none": 0.0, "no_comment": 0.05, "k_shift_dataset-3": 0.2, "full_hash": 0.4}[attack]
    base = 0.7 if model == "nbow" else 0.5
    base -= 0.1 if dataset == "tl_codesum" else 0.0
    base -= 0.03 if inference == "not_confused" else 0.0
    return round(base - damage + 0.01 * seed, 6)


def write_search_runs(root: Path) -> list[Path]:
    """Every search run of the synthetic study: 2 datasets x 4 attacks x (bm25; nbow 2 seeds x 2
    inferences), protocols full-corpus (MRR, Top-k, n_queries) and csn-1000 (MRR, n_queries)."""
    dirs = []
    for dataset, (_, n) in SEARCH_DATASETS.items():
        for attack in SEARCH_ATTACKS:
            for model, loss, seeds, inferences in SEARCH_MODELS:
                for seed in seeds:
                    for inference in inferences:
                        mrr = search_score(dataset, attack, model, seed, inference)
                        scores = [
                            {"protocol": "full-corpus", "metric": m, "value": round(mrr * f, 6)}
                            for m, f in (("mrr", 1.0), ("r@1", 0.8), ("r@5", 1.2), ("r@10", 1.3))
                        ]
                        scores += [
                            {"protocol": "full-corpus", "metric": "n_queries", "value": n},
                            {"protocol": "csn-1000", "metric": "mrr", "value": round(mrr + 0.1, 6)},
                            {"protocol": "csn-1000", "metric": "n_queries", "value": n},
                        ]
                        protocols = {p: {"note": "", "n_queries": n} for p in ("full-corpus", "csn-1000")}
                        where = run_dir(root, dataset, attack, model, loss, seed, inference)
                        run = _run(dataset, attack, model, loss, seed, inference, "search")
                        del run["task"]  # a search run's record as evaluate writes it today
                        write_json(where / "metrics.json", {"run": run, "scores": scores, "protocols": protocols})
                        write_json(where / "provenance.json", provenance(dataset, attack))
                        dirs.append(where)
    return dirs


def write_summarization_run(
    root: Path,
    dataset: str,
    attack: str,
    scores: dict[str, float],
    summaries: list[dict],
    *,
    model: str = "transformer-sum",
    loss: str = "xent",
    seed: int = 0,
    inference: str = "confused",
    n_queries_score: bool = False,
) -> Path:
    """A summarization run folder: metrics.json (protocol ``summarization``), provenance.json and
    summaries.jsonl (``summaries``: dicts with id, reference, hypothesis, code)."""
    where = run_dir(root, dataset, attack, model, loss, seed, inference)
    rows = [{"protocol": "summarization", "metric": m, "value": v} for m, v in scores.items()]
    if n_queries_score:
        rows.append({"protocol": "summarization", "metric": "n_queries", "value": len(summaries)})
    protocols = {
        "summarization": {
            "note": "",
            "n_queries": len(summaries),
            "decoding": {"beam": 1, "max_length": 32, "length_penalty": 1.0, "batch_size": 8},
            "skipped": {},
        }
    }
    run = _run(dataset, attack, model, loss, seed, inference, "summarization")
    write_json(where / "metrics.json", {"run": run, "scores": rows, "protocols": protocols})
    write_json(where / "provenance.json", provenance(dataset, attack))
    write_text(where / "summaries.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in summaries))
    return where


def study_digest(out: Path) -> dict[str, str]:
    """sha256 of every file of a study folder by relative path; results.db by its SQL dump (the
    file's bytes are SQLite's page layout, its dump is what it holds)."""
    digest = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = path.relative_to(out).as_posix()
        if path.suffix == ".db":
            con = sqlite3.connect(path)
            try:
                data = "\n".join(con.iterdump()).encode()
            finally:
                con.close()
        else:
            data = path.read_bytes()
        digest[name] = hashlib.sha256(data).hexdigest()
    return digest
