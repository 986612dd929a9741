"""The ``perturb`` phase: a dataset's perturbed query sets (:mod:`csbench.perturbations`), one per
ratio, into ``data/perturbed/<dataset>/<perturbation>/<ratio>/queries.parquet``."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from csbench import lineage, paths
from csbench.io import write_parquet
from csbench.phases import Context
from csbench.phases.inputs import kept_outputs, prepared, require, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def perturb(ctx: Context, dataset: str, perturbation: str, ratio: str | None = None) -> list[Path]:
    """One perturbation of the test queries at every ratio of ``robustness.ratios`` (one set, at
    ratio 1, for a fixed perturbation such as ``question``), or at ``ratio`` only; the files written
    (the stamp of the perturbation's folder keeps listing the other ratios' files)."""
    from csbench.perturbations import PERTURBATIONS, check_ratio, perturb, ratios_for

    config = ctx.config
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    PERTURBATIONS.check(perturbation, where="--perturbation")
    if ratio is not None:
        ratios: tuple[float, ...] = (check_ratio(float(ratio)),)
    else:
        ratios = ratios_for(perturbation, config.robustness.get("ratios", []))
        if not ratios:
            raise ValueError("robustness.ratios is empty: give --ratio")
    source = prepared(ctx, dataset)
    frame = source.frame("test.parquet", columns=["id", "query"])
    seed = int(config.robustness.get("seed", 0))
    folder = paths.perturbed_file(dataset, perturbation, 0).parent.parent
    expected = lineage.perturb(config, dataset, perturbation)
    kept = kept_outputs(folder, expected) if ratio is not None else {}
    unstamp(folder)
    files = []
    for level in tqdm(ratios, desc=f"{dataset} {perturbation}", unit="ratio", disable=not ctx.progress):
        queries = perturb(frame["query"].tolist(), frame["id"].tolist(), perturbation, level, seed)
        out = pd.DataFrame({"id": frame["id"], "query": queries, "original": frame["query"]})
        file = paths.perturbed_file(dataset, perturbation, level)
        write_parquet(file, out)
        files.append(file)
        changed = int((out["query"] != out["original"]).sum())
        label = paths.ratio_label(level)
        log.info("%s %s@%s: %d of %d queries changed", dataset, perturbation, label, changed, len(out))
    written = [file.relative_to(folder).as_posix() for file in files]
    write_stamp(folder, "perturb", expected, source.inputs(["test.parquet"]), written, keep=kept)
    return files
