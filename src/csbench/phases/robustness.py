"""The ``robustness`` phase: a run's robustness curves, IR-AUC, robust MRR and flip rates
(:mod:`csbench.evaluate.robust_report`) from its clean ranks and its curve points, into
``results/robustness/<run>/robustness.json`` and its plot ``robustness.png``."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import lineage, paths
from csbench.config import RunKey
from csbench.io import write_json
from csbench.phases import Context
from csbench.phases.inputs import checked, run_command
from csbench.stamps import EMBEDDED_KEY

log = logging.getLogger("csbench")


def robustness(ctx: Context, run: RunKey) -> Path:
    """Write the run's robustness record (its stamp embedded) and plot; the record's file."""
    from csbench.evaluate.robust_report import robustness_record
    from csbench.results.plots import plot_robustness
    from csbench.stamps import record as stamp_record

    config = ctx.config
    command = run_command(ctx, "evaluate", run)
    clean = checked(paths.run_dir(run.path), lineage.run(config, run), command, "evaluate")
    points = checked(
        paths.robustness_dir(run.path) / "points",
        lineage.robust(config, run),
        run_command(ctx, "robust", run),
        "robust",
    )
    files = [paths.robust_point_file(run.path, *point) for point in config.perturbation_points()]
    names = [file.relative_to(points.folder).as_posix() for file in files]
    inputs = {(clean.folder / "ranks.tsv").as_posix(): clean.check("ranks.tsv")}
    inputs |= {(points.folder / name).as_posix(): points.check(name) for name in names}
    record = robustness_record(run, config)  # reads the files just checked
    record[EMBEDDED_KEY] = stamp_record("robustness", lineage.robustness(config, run), inputs)
    out = paths.robustness_dir(run.path)
    write_json(out / "robustness.json", record)
    plot_robustness(record, out / "robustness.png")
    micro = record["summary"]["micro_ir_auc"]
    log.info(
        "%s: IR-AUC macro %.4f, micro %s",
        run.path,
        record["summary"]["macro_ir_auc"],
        "n/a" if micro is None else f"{micro:.4f}",
    )
    return out / "robustness.json"
