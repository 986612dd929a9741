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


def build_record(
    clean: Mapping[str, tuple[int, str]],
    points: Mapping[tuple[str, float], Mapping[str, Any]],
    protocol: str,
) -> dict[str, Any]:
    """The robustness record from the clean ranks and the perturbed points.

    ``points[(perturbation, ratio)]`` holds ``queries`` (``id``, ``rank``, ``top1`` lists, as
    ``csbench robust`` writes them). Curves put the clean MRR at ratio 0 of every perturbation
    that takes a ratio; a fixed perturbation (``question``) is its single point. Robust MRR at a
    ratio: each query's lowest reciprocal rank over the ratio-taking perturbations at that ratio.
    Flip rate: the share of queries whose top-1 candidate differs from the clean query's.
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
    return {
        "protocol": protocol,
        "n_queries": len(ids),
        "clean_mrr": clean_mrr,
        "curves": {p: {paths.ratio_label(r): m for r, m in sorted(c.items())} for p, c in curves.items()},
        "fixed": sorted(fixed),
        "summary": robustness_summary(curves),
        "robust_mrr": robust,
        "flip_rate": flips,
    }


def _fixed_names(points: Mapping[tuple[str, float], Any]) -> set[str]:
    from csbench.perturbations import PERTURBATIONS

    return {p for p, _ in points if p in PERTURBATIONS and not PERTURBATIONS.get(p).has_ratio}


def robustness_record(run, config) -> dict[str, Any]:
    """Read the clean ranks and every perturbed point of ``run`` (as the config lists them)."""
    protocol = config.robustness.get("protocol", "full-corpus")
    clean = read_clean(run.path, protocol)
    points: dict[tuple[str, float], dict] = {}
    for perturbation, ratio in config.perturbation_points():
        file = paths.robust_point_file(run.path, perturbation, ratio)
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench robust` for {run.path} first")
        points[(perturbation, ratio)] = json.loads(file.read_text(encoding="utf-8"))
    record = build_record(clean, points, protocol)
    return {"run": run.as_dict(), "seed": int(config.robustness.get("seed", 0)), **record}


def ir_auc_rows(record: Mapping[str, Any], order: Sequence[str]) -> dict[str, float]:
    """IR-AUC per perturbation (in ``order``) plus macro and micro, for tables."""
    per = record["summary"]["per_perturbation"]
    row = {p: per[p]["ir_auc"] for p in order if p in per}
    row["macro"] = record["summary"]["macro_ir_auc"]
    row["micro"] = record["summary"]["micro_ir_auc"]
    return row
