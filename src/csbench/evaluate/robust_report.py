"""One run's robustness record: its clean evaluation and every perturbed query set, turned into
curves, IR-AUC (``csbench.evaluate.robustness``), robust MRR and flip rates (issue #5)."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from csbench import paths
from csbench.evaluate.metrics import reciprocal_ranks
from csbench.evaluate.protocols import PROTOCOLS
from csbench.evaluate.robustness import flip_rate, robust_mrr, robustness_summary


def read_clean(run_path: str, protocol: str) -> dict[str, tuple[int, str]]:
    """query id -> (rank, top-1 candidate id) of the clean evaluation (ranks.tsv)."""
    file = paths.run_dir(run_path) / "ranks.tsv"
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: run `csbench evaluate` for {run_path} first")
    with open(file, encoding="utf-8", newline="") as handle:
        rows = [row for row in csv.DictReader(handle, delimiter="\t") if row["protocol"] == protocol]
    return {row["query_id"]: (int(row["rank"]), row["top1"]) for row in rows}


def read_clean_graded(run_path: str, protocol: str) -> dict[str, float] | None:
    """query id -> main score (nDCG@10) of a graded protocol's clean evaluation (``qrels.<protocol>.tsv``);
    None for a single-answer protocol."""
    from csbench.evaluate.protocols import Graded
    from csbench.evaluate.qrels import MAIN_SCORE

    if not isinstance(PROTOCOLS.get(protocol), Graded):
        return None
    file = paths.run_dir(run_path) / f"qrels.{protocol}.tsv"
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: run `csbench evaluate` for {run_path} first")
    with open(file, encoding="utf-8", newline="") as handle:
        return {row["query_id"]: float(row[MAIN_SCORE]) for row in csv.DictReader(handle, delimiter="\t")}


def build_record(
    clean: Mapping[str, tuple[int, str]],
    points: Mapping[tuple[str, float], Mapping[str, Any]],
    protocol: str,
    clean_graded: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The robustness record from the clean ranks and the perturbed points.

    ``points[(perturbation, ratio)]`` holds ``queries`` (``id``, ``rank``, ``top1`` lists, as
    ``csbench robust`` writes them). Curves put the clean MRR at ratio 0 of every perturbation
    that takes a ratio; a fixed perturbation (``question``) is its single point. Robust MRR at a
    ratio: each query's lowest reciprocal rank over the ratio-taking perturbations at that ratio.
    Flip rate: the share of queries whose top-1 candidate differs from the clean query's.
    A graded protocol (``clean_graded``: each query's clean nDCG@10; the points carry theirs) also
    gets the same curves, IR-AUC and robust score of nDCG@10 (``graded``).
    """
    cutoff = PROTOCOLS.get(protocol).mrr_cutoff
    ids = sorted(clean)
    if not ids:
        raise ValueError(f"the clean run has no {protocol} query: nothing to measure robustness on")
    clean_rr = reciprocal_ranks(np.array([clean[q][0] for q in ids]), cutoff)
    clean_mrr = float(clean_rr.mean())
    curves: dict[str, dict[float, float]] = {}
    flips: dict[str, dict[str, float]] = {}
    rr_at: dict[float, list[np.ndarray]] = {}
    fixed = _fixed_names(points)
    for (perturbation, ratio), point in sorted(points.items()):
        by_id = dict(
            zip(
                point["queries"]["id"],
                zip(point["queries"]["rank"], point["queries"]["top1"], strict=True),
                strict=True,
            )
        )
        if set(by_id) != set(ids):
            raise ValueError(f"{perturbation}@{ratio}: its queries are not the clean run's")
        rr = reciprocal_ranks(np.array([by_id[q][0] for q in ids]), cutoff)
        if perturbation in fixed:
            curves[perturbation] = {float(ratio): float(rr.mean())}
        else:
            curves.setdefault(perturbation, {0.0: clean_mrr})[float(ratio)] = float(rr.mean())
            rr_at.setdefault(float(ratio), []).append(rr)
        flips.setdefault(perturbation, {})[paths.ratio_label(ratio)] = flip_rate(
            [clean[q][1] for q in ids], [by_id[q][1] for q in ids]
        )
    robust = {paths.ratio_label(r): robust_mrr(np.stack(rrs, axis=1)) for r, rrs in sorted(rr_at.items())}
    graded = {} if clean_graded is None else {"graded": _graded_record(clean_graded, points, ids, fixed)}
    return {
        "protocol": protocol,
        "n_queries": len(ids),
        "clean_mrr": clean_mrr,
        "curves": {p: {paths.ratio_label(r): m for r, m in sorted(c.items())} for p, c in curves.items()},
        "fixed": sorted(fixed),
        "summary": robustness_summary(curves),
        "robust_mrr": robust,
        "flip_rate": flips,
        **graded,
    }


def _graded_record(
    clean: Mapping[str, float], points: Mapping[tuple[str, float], Mapping[str, Any]], ids: list[str], fixed: set[str]
) -> dict[str, Any]:
    """nDCG@10's curves, IR-AUC (of the nDCG curve, as of the MRR curve) and robust nDCG@10 (each query's
    lowest score over the perturbations at a ratio, averaged) of a graded protocol."""
    from csbench.evaluate.qrels import MAIN_SCORE

    if set(clean) != set(ids):
        raise ValueError(f"the clean {MAIN_SCORE} scores are not those of the clean ranks' queries")
    clean_scores = np.array([clean[q] for q in ids])
    curves: dict[str, dict[float, float]] = {}
    at: dict[float, list[np.ndarray]] = {}
    for (perturbation, ratio), point in sorted(points.items()):
        if MAIN_SCORE not in point["queries"]:
            raise ValueError(
                f"{perturbation}@{ratio}: the point has no per-query {MAIN_SCORE}: re-run `csbench robust`"
            )
        by_id = dict(zip(point["queries"]["id"], point["queries"][MAIN_SCORE], strict=True))
        scores = np.array([by_id[q] for q in ids], dtype=np.float64)
        if perturbation in fixed:
            curves[perturbation] = {float(ratio): float(scores.mean())}
        else:
            curves.setdefault(perturbation, {0.0: float(clean_scores.mean())})[float(ratio)] = float(scores.mean())
            at.setdefault(float(ratio), []).append(scores)
    return {
        "metric": MAIN_SCORE,
        "clean": float(clean_scores.mean()),
        "curves": {p: {paths.ratio_label(r): m for r, m in sorted(c.items())} for p, c in curves.items()},
        "summary": robustness_summary(curves),
        "robust": {paths.ratio_label(r): robust_mrr(np.stack(v, axis=1)) for r, v in sorted(at.items())},
    }


def _fixed_names(points: Mapping[tuple[str, float], Any]) -> set[str]:
    from csbench.perturbations import PERTURBATIONS

    return {p for p, _ in points if p in PERTURBATIONS and not PERTURBATIONS.get(p).has_ratio}


def robustness_record(run, config) -> dict[str, Any]:
    """Read the clean ranks and every perturbed point of ``run`` (as the config lists them)."""
    protocol = config.robustness.get("protocol", "full-corpus")
    clean = read_clean(run.path, protocol)
    clean_graded = read_clean_graded(run.path, protocol)
    points: dict[tuple[str, float], dict] = {}
    for perturbation, ratio in config.perturbation_points():
        file = paths.robust_point_file(run.path, perturbation, ratio)
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench robust` for {run.path} first")
        points[(perturbation, ratio)] = json.loads(file.read_text(encoding="utf-8"))
    record = build_record(clean, points, protocol, clean_graded)
    return {"run": run.as_dict(), "seed": int(config.robustness.get("seed", 0)), **record}


def ir_auc_rows(record: Mapping[str, Any], order: Sequence[str]) -> dict[str, float]:
    """IR-AUC per perturbation (in ``order``) plus macro and micro, for tables."""
    per = record["summary"]["per_perturbation"]
    row = {p: per[p]["ir_auc"] for p in order if p in per}
    row["macro"] = record["summary"]["macro_ir_auc"]
    row["micro"] = record["summary"]["micro_ir_auc"]
    return row
