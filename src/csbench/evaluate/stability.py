"""Seed stability of rankings (SPEC "Seed stability"; COBE section V-E, Fig. 4 and Fig. 5; issue #7).

Runs of one configuration that differ only in their training seed are compared pairwise on each
query's top-k list (k = 20 as in COBE, "the top-20 code instances retrieved sorted by
similarity"), and their MRR and IR-AUC are summarised across seeds.

COBE does not define its Spearman correlation over two top-k lists that may hold different items,
so this module fixes a definition (:func:`topk_spearman`): Spearman's rho over the union of the two
lists, an item missing from a list tied behind that list's items (the "location parameter" k + 1
of Fagin, Kumar and Sivakumar, "Comparing top k lists", 2003), ties given their average rank as
``scipy.stats.spearmanr`` does. The share of items retrieved by both (COBE: "the ratio of items
that were retrieved together (discarding ranking order)") is :func:`topk_overlap`.

Pure functions apart from the readers of run directories (``run.<protocol>.trec.gz``,
``metrics.json`` and, when present, ``ranks.tsv``, as ``csbench evaluate`` writes them).
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

TOP_K = 20  # COBE V-E compares the top-20 candidates of each query

SPEARMAN_DEFINITION = (
    "Spearman's rho (Pearson correlation of ranks) over the union of the two top-k lists; an item "
    "missing from a list is tied behind that list's items (rank k+1 before tie averaging); ties get "
    "their average rank, as scipy.stats.spearmanr. Same items: plain Spearman (reversed: -1). "
    "Disjoint lists of length k: -6k^2/(7k^2-1) (k=20: -0.857)."
)
OVERLAP_DEFINITION = (
    "|A ∩ B| / k for the two top-k lists; when a list is shorter than k (a pool of fewer than k "
    "candidates), divided by the shorter list's length instead, so identical lists score 1."
)
STD_DEFINITION = (
    "std: sample standard deviation over seeds (ddof=1; None for one seed), seeds being a sample of "
    "all possible seeds; std_population: ddof=0. range: max - min (COBE V-E quotes the largest "
    "deviation across seeds); relative_range: range / mean."
)


# ------------------------------------------------------------------------------ one query's lists


def _checked(ranking: Sequence[str], name: str) -> None:
    """``ValueError`` on an empty list or a repeated item: neither is a ranking."""
    if len(ranking) == 0:
        raise ValueError(f"ranking {name} is empty")
    if len(set(ranking)) != len(ranking):
        raise ValueError(f"ranking {name} lists an item twice")


def _union_ranks(ranking: Sequence[str], union: Sequence[str]) -> np.ndarray:
    """Rank of each ``union`` item in ``ranking`` (1-based); the items it misses share the average
    of the ranks left over, len(ranking)+1 .. len(union) (what spearmanr gives them as ties)."""
    position = {item: i for i, item in enumerate(ranking, start=1)}
    tied = (len(ranking) + 1 + len(union)) / 2.0
    return np.array([position.get(item, tied) for item in union], dtype=np.float64)


def topk_spearman(a: Sequence[str], b: Sequence[str]) -> float:
    """Spearman's rho between two rankings (best first) that may hold different items.

    Definition (COBE V-E only says "the Spearman Ranking correlation matrix among all provided
    rankings" of "the top-20 code instances"): rho over the union of both lists, each list ranking
    its own items 1..len and tying every item it misses behind them, ties averaged; i.e.
    ``scipy.stats.spearmanr`` of the two rank vectors with missing items at rank len+1. Why: it is
    defined for every pair of lists (the rho over shared items alone is undefined with fewer than
    two shared items), it is the standard rho when both lists hold the same items, and an item one
    seed ranks high that the other does not retrieve at all counts as disagreement, as it should.

    Values: identical lists 1; the same items reversed -1; disjoint lists of length k
    -6k²/(7k²-1), about -0.857 for k = 20 (each list's items are the other's tied last).
    A single shared item and nothing else: 1.
    """
    _checked(a, "a")
    _checked(b, "b")
    union = list(dict.fromkeys([*a, *b]))
    if len(union) == 1:  # both lists are the same single item: perfect agreement, rho undefined
        return 1.0
    ra, rb = _union_ranks(a, union), _union_ranks(b, union)
    # both vectors vary (each holds rank 1 and a larger value), so the correlation is defined
    da, db = ra - ra.mean(), rb - rb.mean()
    return float(np.dot(da, db) / math.sqrt(np.dot(da, da) * np.dot(db, db)))


def topk_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Share of items retrieved by both lists, ignoring order: ``|A ∩ B| / min(len(A), len(B))``.

    Both lists are normally top-k (the share is then ``|A ∩ B| / k``, COBE's "ratio of items that
    were retrieved together"); a list is shorter only when the query's pool has fewer than k
    candidates, and dividing by the shorter length keeps identical lists at 1."""
    _checked(a, "a")
    _checked(b, "b")
    return len(set(a) & set(b)) / min(len(a), len(b))


# ------------------------------------------------------------------------------ two runs


@dataclass
class PairComparison:
    """Two runs' per-query agreement on their top-k lists, over the queries both ranked."""

    spearman: dict[str, float] = field(default_factory=dict)  # query id -> topk_spearman
    overlap: dict[str, float] = field(default_factory=dict)  # query id -> topk_overlap
    only_a: int = 0  # queries ranked by the first run only (ignored)
    only_b: int = 0  # queries ranked by the second run only (ignored)

    @property
    def n_queries(self) -> int:
        return len(self.spearman)

    def mean_spearman(self) -> float:
        """Mean over queries of the per-query Spearman correlation."""
        return float(np.mean(list(self.spearman.values())))

    def mean_overlap(self) -> float:
        """Mean over queries of the per-query overlap."""
        return float(np.mean(list(self.overlap.values())))


def compare_rankings(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]], k: int = TOP_K) -> PairComparison:
    """Compare two runs' rankings (query id -> candidate ids, best first) on each shared query's
    top-``k``. Queries in only one run are ignored and counted; ``ValueError`` when none is shared."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    shared = sorted(set(a) & set(b))
    if not shared:
        raise ValueError("the two runs rank no query in common")
    out = PairComparison(only_a=len(set(a) - set(b)), only_b=len(set(b) - set(a)))
    for query in shared:
        top_a, top_b = list(a[query])[:k], list(b[query])[:k]
        out.spearman[query] = topk_spearman(top_a, top_b)
        out.overlap[query] = topk_overlap(top_a, top_b)
    return out


# ------------------------------------------------------------------------------ spread over seeds


def spread(values: Mapping[int, float]) -> dict[str, Any]:
    """Min, max, mean, std (sample, ddof=1), std_population (ddof=0), range and relative range
    (range / mean; None when the mean is 0) of one number per seed, with the values by seed.

    COBE V-E reports the spread as the largest deviation across seeds ("as high as 5% in absolute
    MRR", "can reach 14%" for IR-AUC) without defining a standard deviation; the sample std is
    given because the seeds are a sample of the seeds one could have drawn."""
    if not values:
        raise ValueError("no values to summarise")
    x = np.asarray([float(v) for v in values.values()], dtype=np.float64)
    if not np.isfinite(x).all():
        raise ValueError(f"values must be finite numbers, got {dict(values)}")
    mean, lo, hi = float(x.mean()), float(x.min()), float(x.max())
    return {
        "n": int(x.size),
        "min": lo,
        "max": hi,
        "mean": mean,
        "std": float(x.std(ddof=1)) if x.size > 1 else None,
        "std_population": float(x.std(ddof=0)),
        "range": hi - lo,
        "relative_range": (hi - lo) / mean if mean != 0 else None,
        "values": {str(seed): float(v) for seed, v in sorted(values.items())},
    }


def _ir_auc_summary(seed: int, value: float | Mapping[str, Any]) -> float | Mapping[str, Any]:
    """A seed's IR-AUC as given: a number, a ``robustness_summary`` dict, or a robustness record
    (``robustness_record``: the summary under ``summary``, the run's training seed under ``run``;
    its top-level ``seed`` is the perturbation seed). Returns the number or the summary."""
    if isinstance(value, Mapping):
        run_seed = value.get("run", {}).get("seed")
        if run_seed is not None and int(run_seed) != seed:
            raise ValueError(f"the IR-AUC record given as seed {seed} is of the run with seed {run_seed}")
        summary = value.get("summary", value)
        if not isinstance(summary, Mapping) or "macro_ir_auc" not in summary:
            raise ValueError("an IR-AUC record needs macro_ir_auc (a robustness summary or record)")
        return summary
    return float(value)


def ir_auc_spread(ir_auc: Mapping[int, float | Mapping[str, Any]]) -> dict[str, Any]:
    """Spread across seeds of IR-AUC given per seed as a number or as a robustness summary/record.

    Numbers: ``{"ir_auc": spread}``. Summaries: the spread of ``macro`` and ``micro`` IR-AUC (micro
    when every seed has one) and, as COBE Fig. 4 (right) per transformation, of each perturbation's
    IR-AUC over the seeds that have it (``per_perturbation``)."""
    if not ir_auc:
        raise ValueError("no IR-AUC values")
    given = {int(seed): _ir_auc_summary(int(seed), value) for seed, value in ir_auc.items()}
    records = {s: v for s, v in given.items() if isinstance(v, Mapping)}
    if not records:
        return {"ir_auc": spread(given)}  # type: ignore[arg-type]
    if len(records) != len(given):
        raise ValueError("give IR-AUC for every seed either as a number or as a robustness summary, not both")
    out: dict[str, Any] = {"macro": spread({s: r["macro_ir_auc"] for s, r in records.items()})}
    micro = {s: r.get("micro_ir_auc") for s, r in records.items()}
    out["micro"] = spread(micro) if all(v is not None for v in micro.values()) else None  # type: ignore[arg-type]
    names = sorted({p for r in records.values() for p in r.get("per_perturbation", {})})
    out["per_perturbation"] = {
        name: spread(
            {
                s: r["per_perturbation"][name]["ir_auc"]
                for s, r in records.items()
                if name in r.get("per_perturbation", {})
            }
        )
        for name in names
    }
    return out


# ------------------------------------------------------------------------------ run directories


def read_trec(path: Path) -> dict[str, list[str]]:
    """A gzip TREC run file (``query_id Q0 doc_id rank score run_name``) as query id -> candidate
    ids in rank order. ``ValueError`` on a malformed line or a candidate/rank listed twice."""
    ranked: dict[str, list[tuple[int, str]]] = {}
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 6:
                raise ValueError(f"{path}:{number}: expected 6 fields, got {len(parts)}")
            ranked.setdefault(parts[0], []).append((int(parts[3]), parts[2]))
    lists: dict[str, list[str]] = {}
    for query, rows in ranked.items():
        rows.sort()
        docs = [doc for _, doc in rows]
        if len({r for r, _ in rows}) != len(rows) or len(set(docs)) != len(docs):
            raise ValueError(f"{path}: query {query} repeats a rank or a candidate")
        lists[query] = docs
    return lists


def read_candidates(run_dir: Path, protocol: str) -> dict[str, int] | None:
    """Query id -> size of its candidate pool under ``protocol`` (``ranks.tsv``), None without the file."""
    file = Path(run_dir) / "ranks.tsv"
    if not file.is_file():
        return None
    with open(file, encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle, delimiter="\t")
        return {row["query_id"]: int(row["candidates"]) for row in rows if row["protocol"] == protocol}


def check_depth(
    lists: Mapping[str, Sequence[str]], k: int, candidates: Mapping[str, int] | None = None, source: str = "run"
) -> None:
    """``ValueError`` when the run file was cut above rank ``k``.

    With the pool sizes (``ranks.tsv``) a query's list must hold ``min(k, pool size)`` candidates.
    Without them the deepest list must reach ``k``: lists are shorter than the run depth only for
    pools smaller than it, so a run whose every list is shorter than ``k`` was written too shallow
    (or every pool is smaller than ``k``: then give ``ranks.tsv``)."""
    advice = f"raise evaluation.run_depth to at least {k} and re-run `csbench evaluate`"
    if not lists:
        raise ValueError(f"{source}: no ranked query")
    if candidates is not None:
        for query, docs in lists.items():
            need = min(k, candidates.get(query, k))
            if len(docs) < need:
                raise ValueError(
                    f"{source}: query {query} lists {len(docs)} candidates, fewer than the top-{k} "
                    f"needed (its pool has {candidates.get(query, '?')}): {advice}"
                )
        return
    depth = max(len(docs) for docs in lists.values())
    if depth < k:
        raise ValueError(f"{source}: run depth {depth} is below the top-{k} compared: {advice}")


def read_mrr(metrics: Mapping[str, Any], protocol: str, source: str = "metrics.json") -> float:
    """The ``mrr`` score of ``protocol`` in a ``metrics.json`` record."""
    for row in metrics.get("scores", []):
        if row.get("protocol") == protocol and row.get("metric") == "mrr":
            if row.get("value") is None:
                raise ValueError(f"{source}: {protocol} MRR is empty (no query was evaluated)")
            return float(row["value"])
    raise ValueError(f"{source}: no {protocol} MRR")


def _common_run(runs: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The run coordinates the seeds share; ``ValueError`` when they differ in more than the seed
    or a record's seed is not the one it was given under."""
    first: dict[str, Any] | None = None
    for seed, run in runs.items():
        if "seed" in run and int(run["seed"]) != seed:
            raise ValueError(f"the run given as seed {seed} is seed {run['seed']} in its metrics.json")
        rest = {key: value for key, value in run.items() if key != "seed"}
        if first is None:
            first = rest
        elif rest != first:
            diff = sorted(key for key in set(rest) | set(first) if rest.get(key) != first.get(key))
            raise ValueError(f"seed {seed} differs from the other runs in more than its seed: {', '.join(diff)}")
    return first or {}


def seed_stability(
    runs: Mapping[int, Path],
    protocol: str,
    k: int = TOP_K,
    ir_auc: Mapping[int, float | Mapping[str, Any]] | None = None,
    per_query: bool = False,
) -> dict[str, Any]:
    """Seed stability of one configuration (COBE V-E) from its runs' directories, by seed.

    Each directory holds ``run.<protocol>.trec.gz`` and ``metrics.json`` (``ranks.tsv`` too when
    written by ``csbench evaluate``: it gives the pool sizes for the depth check). Every pair of
    seeds is compared on the top-``k`` lists of the queries both ranked (:func:`compare_rankings`;
    per-query values under ``per_query`` in each pair when asked). ``ir_auc``: per seed a number
    or a robustness summary/record (:func:`ir_auc_spread`). Returns a JSON-ready record: ``pairs``,
    ``matrix`` (mean Spearman and mean overlap by seed, diagonal 1), ``summary`` (range over the
    pairs), ``spread`` (MRR and IR-AUC across seeds), ``definitions`` and ``notes``.

    Raises ``FileNotFoundError`` for a missing run file and ``ValueError`` when a run is shallower
    than ``k`` (raise evaluation.run_depth), when the runs differ in more than the seed, or with
    fewer than two seeds.
    """
    if len(runs) < 2:
        raise ValueError(f"seed stability needs at least two seeds, got {len(runs)}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    seeds = sorted(int(s) for s in runs)
    lists: dict[int, dict[str, list[str]]] = {}
    mrr: dict[int, float] = {}
    coordinates: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        run_dir = Path(runs[seed])
        trec, metrics_file = run_dir / f"run.{protocol}.trec.gz", run_dir / "metrics.json"
        for file in (trec, metrics_file):
            if not file.is_file():
                raise FileNotFoundError(
                    f"{file} is missing (seed {seed}): run `csbench evaluate` with {protocol} in evaluation.protocols"
                )
        lists[seed] = read_trec(trec)
        check_depth(lists[seed], k, read_candidates(run_dir, protocol), source=str(trec))
        metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
        mrr[seed] = read_mrr(metrics, protocol, source=str(metrics_file))
        coordinates[seed] = dict(metrics.get("run", {}))
    notes: list[str] = []
    common = _common_run(coordinates)
    if not common:
        notes.append("metrics.json holds no run coordinates: the runs were not checked to differ only in seed")

    index = {seed: i for i, seed in enumerate(seeds)}
    rho = np.eye(len(seeds))
    share = np.eye(len(seeds))
    pairs = []
    for s, t in itertools.combinations(seeds, 2):
        pair = compare_rankings(lists[s], lists[t], k)
        rho[index[s], index[t]] = rho[index[t], index[s]] = pair.mean_spearman()
        share[index[s], index[t]] = share[index[t], index[s]] = pair.mean_overlap()
        entry: dict[str, Any] = {
            "seeds": [s, t],
            "spearman": pair.mean_spearman(),
            "overlap": pair.mean_overlap(),
            "n_queries": pair.n_queries,
            "ignored_queries": pair.only_a + pair.only_b,
        }
        if pair.only_a or pair.only_b:
            notes.append(
                f"seeds {s}/{t}: {pair.only_a} queries only in seed {s} and {pair.only_b} only in seed {t} ignored"
            )
        if per_query:
            entry["per_query"] = {"spearman": pair.spearman, "overlap": pair.overlap}
        pairs.append(entry)

    off = ~np.eye(len(seeds), dtype=bool)  # the pairs, without the trivial diagonal
    return {
        "protocol": protocol,
        "k": k,
        "seeds": seeds,
        "run": common,
        "pairs": pairs,
        "matrix": {"seeds": seeds, "spearman": rho.tolist(), "overlap": share.tolist()},
        "summary": {
            name: {"min": float(m[off].min()), "max": float(m[off].max()), "mean": float(m[off].mean())}
            for name, m in (("spearman", rho), ("overlap", share))
        },
        "spread": {"mrr": spread(mrr), "ir_auc": ir_auc_spread(_known(ir_auc, seeds)) if ir_auc else None},
        "definitions": {"spearman": SPEARMAN_DEFINITION, "overlap": OVERLAP_DEFINITION, "std": STD_DEFINITION},
        "notes": notes,
    }


def _known(ir_auc: Mapping[int, Any], seeds: Sequence[int]) -> dict[int, Any]:
    """``ir_auc`` keyed by int seed; ``ValueError`` for a seed that is not among the runs."""
    given = {int(seed): value for seed, value in ir_auc.items()}
    unknown = sorted(set(given) - set(seeds))
    if unknown:
        raise ValueError(f"IR-AUC given for seeds without a run: {unknown}")
    return given


__all__ = [
    "TOP_K",
    "PairComparison",
    "check_depth",
    "compare_rankings",
    "ir_auc_spread",
    "read_candidates",
    "read_mrr",
    "read_trec",
    "seed_stability",
    "spread",
    "topk_overlap",
    "topk_spearman",
]
