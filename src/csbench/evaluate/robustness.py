"""Robustness metrics over query perturbations (SPEC "Query perturbations"; COBE section II-C).

A *curve* is one perturbation's MRR at each noise ratio it was evaluated at, ``{ratio: mrr}``,
normally including the clean MRR at ratio 0. Pure functions, no I/O.

* :func:`ir_auc`: area under the MRR-vs-ratio curve (trapezoids) divided by the ratio range, so a
  model that never degrades scores its clean MRR. A curve with a single point (``question``, which
  has no ratio) is taken as flat: its IR-AUC is that point's MRR.
* :func:`macro_ir_auc`: mean IR-AUC over perturbations. Single-point curves count (as their MRR),
  as in COBE Table V, whose "Overall" is the mean of the seven columns including Question
  (CodeBERT: (0.266 + 0.415 + 0.784 + 0.387 + 0.765 + 0.672 + 0.382) / 7 = 0.524).
* :func:`micro_ir_auc`: IR-AUC of the curve of the MRR averaged over perturbations at each ratio
  (over the perturbations evaluated at that ratio); single-point curves have no ratio axis and
  are left out. Trapezoids are linear, so when every curve has the same ratios micro equals the
  macro over those curves; the two differ only when the ratio grids differ.
* :func:`relative_drop`: ``(clean - mrr) / clean`` at each ratio, clean = the MRR at ratio 0.
* :func:`robust_mrr`: each query's lowest reciprocal rank over its variants, averaged.
* :func:`flip_rate`: share of queries whose top-1 candidate differs from the clean query's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

Curve = Mapping[float, float]  # noise ratio -> MRR


def _points(ratios: Sequence[float], mrrs: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Ratios and MRRs as float arrays sorted by ratio; ``ValueError`` on bad input."""
    x, y = np.asarray(ratios, dtype=float), np.asarray(mrrs, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"need one MRR per ratio, got {x.shape} ratios and {y.shape} MRRs")
    if x.size == 0:
        raise ValueError("a robustness curve needs at least one point")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("ratios and MRRs must be finite numbers")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if np.any(np.diff(x) == 0):
        raise ValueError(f"a ratio appears twice: {x.tolist()}")
    return x, y


def ir_auc(ratios: Sequence[float], mrrs: Sequence[float]) -> float:
    """Area under the MRR-vs-ratio curve by trapezoids over the given points (any order), divided
    by ``max(ratios) - min(ratios)``: a flat curve scores its MRR. One point: that MRR."""
    x, y = _points(ratios, mrrs)
    if x.size == 1:
        return float(y[0])
    area = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
    return area / float(x[-1] - x[0])


def curve_ir_auc(curve: Curve) -> float:
    """:func:`ir_auc` of a ``{ratio: mrr}`` curve."""
    return ir_auc(list(curve.keys()), list(curve.values()))


def macro_ir_auc(curves: Mapping[str, Curve]) -> float:
    """Mean :func:`ir_auc` over perturbations (``{perturbation: {ratio: mrr}}``); single-point
    curves count as their MRR."""
    if not curves:
        raise ValueError("no robustness curves")
    return float(np.mean([curve_ir_auc(curve) for curve in curves.values()]))


def micro_curve(curves: Mapping[str, Curve]) -> dict[float, float]:
    """At each ratio of the multi-point curves, the mean MRR over the perturbations evaluated at
    that ratio (single-point curves are left out)."""
    sums: dict[float, list[float]] = {}
    for curve in curves.values():
        if len(curve) < 2:
            continue
        _points(list(curve.keys()), list(curve.values()))
        for ratio, mrr in curve.items():
            sums.setdefault(float(ratio), []).append(float(mrr))
    if not sums:
        raise ValueError("micro IR-AUC needs at least one curve with two or more ratios")
    return {ratio: float(np.mean(values)) for ratio, values in sorted(sums.items())}


def micro_ir_auc(curves: Mapping[str, Curve]) -> float:
    """:func:`ir_auc` of :func:`micro_curve`."""
    return curve_ir_auc(micro_curve(curves))


def relative_drop(ratios: Sequence[float], mrrs: Sequence[float]) -> list[float]:
    """``(clean - mrr) / clean`` for each point in the given order, where clean is the MRR at ratio
    0 (which must be among the points). NaN everywhere when the clean MRR is 0."""
    x, _ = _points(ratios, mrrs)
    if 0.0 not in x:
        raise ValueError(f"relative drop needs the clean MRR at ratio 0; ratios are {sorted(x.tolist())}")
    clean = float(mrrs[list(map(float, ratios)).index(0.0)])
    if clean == 0.0:
        return [math.nan] * len(mrrs)
    return [(clean - float(m)) / clean for m in mrrs]


def robust_mrr(reciprocal_ranks: Sequence[Sequence[float]] | np.ndarray) -> float:
    """Mean over queries of each query's lowest reciprocal rank over its variants.

    ``reciprocal_ranks[q][v]`` is query ``q``'s reciprocal rank (0 when cut off) under variant ``v``
    at one ratio: several perturbations, or several seeds of one perturbation. Include the clean
    query as a column to count it among the variants. With one variant this is the plain MRR."""
    rr = np.asarray(reciprocal_ranks, dtype=float)
    if rr.ndim != 2 or rr.size == 0:
        raise ValueError(f"need a non-empty (queries, variants) table of reciprocal ranks, got shape {rr.shape}")
    if not np.isfinite(rr).all() or (rr < 0).any() or (rr > 1).any():
        raise ValueError("reciprocal ranks must be numbers in [0, 1]")
    return float(rr.min(axis=1).mean())


def flip_rate(clean_top1: Sequence[Hashable], perturbed_top1: Sequence[Hashable]) -> float:
    """Share of queries whose top-1 candidate (any comparable id) under the perturbed query differs
    from the one under the clean query. Both sequences are aligned by query."""
    if len(clean_top1) != len(perturbed_top1):
        raise ValueError(f"{len(clean_top1)} clean and {len(perturbed_top1)} perturbed top-1 candidates")
    if not clean_top1:
        raise ValueError("flip rate of no queries")
    flips = sum(a != b for a, b in zip(clean_top1, perturbed_top1, strict=True))
    return flips / len(clean_top1)


def robustness_summary(curves: Mapping[str, Curve]) -> dict:
    """Per perturbation its IR-AUC, points and relative drops (when it has ratio 0), plus macro and
    micro IR-AUC (micro is None without a multi-point curve). JSON-ready."""
    per: dict[str, dict] = {}
    for name, curve in curves.items():
        ratios, mrrs = list(curve.keys()), list(curve.values())
        entry: dict = {
            "ir_auc": curve_ir_auc(curve),
            "points": len(curve),
            "mrr": {str(r): float(m) for r, m in sorted(curve.items())},
        }
        if len(curve) > 1 and 0.0 in map(float, ratios):
            drops = relative_drop(ratios, mrrs)
            entry["relative_drop"] = {
                str(r): None if math.isnan(d) else d for r, d in sorted(zip(map(float, ratios), drops, strict=True))
            }
        per[name] = entry
    multi = any(len(c) > 1 for c in curves.values())
    return {
        "per_perturbation": per,
        "macro_ir_auc": macro_ir_auc(curves),
        "micro_ir_auc": micro_ir_auc(curves) if multi else None,
    }


__all__ = [
    "Curve",
    "curve_ir_auc",
    "flip_rate",
    "ir_auc",
    "macro_ir_auc",
    "micro_curve",
    "micro_ir_auc",
    "relative_drop",
    "robust_mrr",
    "robustness_summary",
]
