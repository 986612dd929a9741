"""The ``robust`` phase: the points of a run's robustness curves, its model on every perturbed query
set of the config (or on those a perturbation / ratio selects), into
``results/robustness/<run>/points/<perturbation>/<ratio>.json``. The pools are read and the index
loaded once for all points."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from csbench import lineage, paths
from csbench.config import Config, RunKey
from csbench.io import write_json
from csbench.phases import Context
from csbench.phases import index as index_phase
from csbench.phases.inputs import attacked as attacked_input
from csbench.phases.inputs import checked, configs, graded_judgements, kept_outputs, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def robust_points(config: Config, perturbation: str | None = None, ratio: str | None = None) -> list[tuple[str, float]]:
    """The points of the robustness curves (``Config.perturbation_points``), or those of one
    perturbation and / or one ratio; ``ValueError`` when the selection is empty."""
    from csbench.perturbations import check_ratio

    points = config.perturbation_points()
    if perturbation is not None:
        points = [(p, r) for p, r in points if p == perturbation]
    if ratio is not None:
        wanted = check_ratio(float(ratio))
        points = [(p, r) for p, r in points if check_ratio(r) == wanted]
    if not points:
        listed = ", ".join(f"{p}@{paths.ratio_label(r)}" for p, r in config.perturbation_points()) or "none"
        raise ValueError(f"no robustness point matches --perturbation / --ratio (the config lists: {listed})")
    return points


def robust(ctx: Context, run: RunKey, perturbation: str | None = None, ratio: str | None = None) -> list[Path]:
    """Score the run's model on each selected perturbed query set and write one point each (the
    stamp of the points' folder keeps listing the points not selected); the files written."""
    config = ctx.config
    points = robust_points(config, perturbation, ratio)
    files = {point: paths.perturbed_file(run.dataset, *point) for point in points}
    absent = [str(f) for f in files.values() if not f.is_file()]
    if absent:
        raise FileNotFoundError(f"{', '.join(absent)} missing: run `csbench perturb` first")
    attacked = attacked_input(ctx, run.dataset, run.attack)
    query_sets = {
        p: checked(
            files[(p, r)].parent.parent,
            lineage.perturb(config, run.dataset, p),
            f"csbench perturb {configs(ctx)} --dataset {run.dataset} --perturbation {p}",
            "perturb",
        )
        for p, r in points
    }
    out = paths.robustness_dir(run.path) / "points"
    expected = lineage.robust(config, run)
    kept = kept_outputs(out, expected) if perturbation is not None or ratio is not None else {}
    unstamp(out)
    index, _ = index_phase.load_index(run, ctx, attacked)
    protocol = config.robustness.get("protocol", "full-corpus")
    pools = index_phase.read_pools(attacked, [protocol], encode=False)[:2]
    inputs = attacked.inputs(["test.parquet", f"{paths.POOL_SPLIT}.parquet"])
    judgements, qrels_inputs = graded_judgements(ctx, run.dataset, [protocol])
    inputs |= qrels_inputs
    point_files = []
    bar = tqdm(files.items(), desc=f"{run.path} robustness", unit="point", disable=not ctx.progress)
    for point, queries_file in bar:
        query_set = query_sets[point[0]]
        name = queries_file.relative_to(query_set.folder).as_posix()
        perturbed = query_set.frame(name).set_index("id")["query"]
        inputs[queries_file.as_posix()] = query_set.digest(name)
        point_files.append(_point(ctx, run, index, pools, point, perturbed, queries_file, judgements))
    written = [file.relative_to(out).as_posix() for file in point_files]
    # (not the index's SHA256SUMS: index.json holds its encoding time; this stamp is the same under
    # both drivers, as the points are)
    write_stamp(out, "robust", expected, inputs, written, keep=kept)
    encoded = [r.encoding_record() for r in index.retrievers.values() if hasattr(r, "encoding_record")]
    if encoded:  # the cache serves the clean queries and those a perturbation left unchanged
        cached = "with the embedding cache" if encoded[0]["embedding_cache"] else "without the embedding cache"
        n_queries = len(pools[0]) * len(points)
        log.info("%s: %d of %d perturbed queries encoded by the model (%s)", run.path,
                 sum(e["n_forward"] for e in encoded), n_queries, cached)
    return point_files


def _point(ctx: Context, run: RunKey, index, pools: tuple[pd.DataFrame, pd.DataFrame], point: tuple[str, float],
           perturbed: pd.Series, queries_file: Path, judgements: pd.DataFrame | None = None) -> Path:  # fmt: skip
    """One point of the curves: the run's model on the perturbed queries (by query id) of one query
    set under the robustness protocol, per-query ranks included; its file."""
    from csbench.evaluate.runner import DEFAULT_MEMORY_MB, search

    config = ctx.config
    perturbation, ratio = point
    protocol = config.robustness.get("protocol", "full-corpus")
    pool, codebase = pools
    missing = set(pool["id"]) - set(perturbed.index)
    if missing:
        raise ValueError(f"{queries_file} lacks {len(missing)} test queries of {run.dataset}/{run.attack}")
    outcomes, _ = search(
        index,
        pool,
        [protocol],
        1,
        "robust",
        queries=perturbed.loc[pool["id"]].tolist(),
        progress=False,
        codebase=codebase,
        memory_mb=float(config.section("evaluation").get("memory_mb", DEFAULT_MEMORY_MB)),
        latency=False,  # the point records no timings
        qrels=judgements,
        keep_runs=False,  # nor a TREC run (a graded protocol's lists 1,000 documents a query)
    )
    outcome = outcomes[protocol]
    point_file = paths.robust_point_file(run.path, perturbation, ratio)
    write_json(
        point_file,
        {
            "run": run.as_dict(),
            "perturbation": perturbation,
            "ratio": ratio,
            "seed": int(config.robustness.get("seed", 0)),
            "protocol": protocol,
            "metrics": outcome.metrics(),
            "note": outcome.plan_note,
            "queries": {"id": outcome.query_ids, "rank": outcome.ranks, "top1": outcome.top1, **graded_scores(outcome)},
        },
    )
    mrr = outcome.metrics()["mrr"]
    label = paths.ratio_label(ratio)
    log.info("%s %s@%s: %s MRR %s", run.path, perturbation, label, protocol, f"{mrr:.4f}" if outcome.ranks else "n/a")
    return point_file


def graded_scores(outcome) -> dict[str, list[float]]:
    """A graded protocol's per-query main score (nDCG@10), for the nDCG curves and robust nDCG of
    ``robustness.json``; {} for a single-answer protocol (its ranks say all)."""
    from csbench.evaluate.outcomes import GradedOutcome
    from csbench.evaluate.qrels import MAIN_SCORE

    if not isinstance(outcome, GradedOutcome):
        return {}
    return {MAIN_SCORE: outcome.graded.column(MAIN_SCORE).tolist()}
