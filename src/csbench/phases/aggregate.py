"""The ``aggregate`` phase: a study's results database, summaries, tables and figures
(:mod:`csbench.results.report`) and its seed stability (:mod:`csbench.evaluate.stability`), into
``results/studies/<study>/``, from run records checked against their stamps first."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from csbench import lineage, paths
from csbench.config import Config
from csbench.io import write_json
from csbench.phases import Context
from csbench.phases.inputs import checked, configs, run_command, train_command
from csbench.stamps import embedded

log = logging.getLogger("csbench")


def aggregate(ctx: Context) -> Path:
    """Aggregate every run, dataset card, robustness and training record of the study; its folder."""
    from csbench.results.report import aggregate as aggregate_records

    config = ctx.config
    check_records(ctx)
    run_dirs = [paths.run_dir(run.path) for run in config.runs()]
    cards = {name: paths.cards_dir(name) / "card.json" for name in config.datasets}
    robustness = {run.path: paths.robustness_dir(run.path) / "robustness.json" for run in config.robustness_runs()}
    stability = stability_records(config, robustness)
    # the learning curves drawn are the retrieval models' (validation MRR); summarizers' records are checked
    trainings = {
        key.path: paths.checkpoint_dir(key.path) / "train.json"
        for key in config.trainings()
        if not config.summarizes(key.model)
    }
    out = paths.study_dir(config.study)
    shared = Path(paths.RESULTS)
    table = aggregate_records(run_dirs, out, config.study, cards, robustness, stability, trainings, shared_dir=shared)
    log.info("aggregated %d runs (%d rows) of study %r into %s/", len(run_dirs), len(table), config.study, out)
    return out


def check_records(ctx: Context) -> None:
    """Every record the study's aggregate reads, checked against its stamp first: run records (each
    file its stamp lists), dataset cards, robustness records and training records, all made under
    this config's parameters and unchanged since (a record of another study is refused, not summed)."""
    config = ctx.config
    for run in config.runs():
        expected, phase = lineage.run_records(config, run), lineage.run_phase(config, run)
        records = checked(paths.run_dir(run.path), expected, run_command(ctx, phase, run), phase)
        for name in records.outputs:
            records.check(name)
    for dataset in config.datasets:
        command = f"csbench audit {configs(ctx)} --dataset {dataset}"
        checked(paths.cards_dir(dataset), lineage.prepare(config, dataset), command, "audit").check("card.json")
    for run in config.robustness_runs():
        file = paths.robustness_dir(run.path) / "robustness.json"
        if file.is_file():
            remake = lineage.remake(run_command(ctx, "robustness", run))
            embedded(json.loads(file.read_text()), str(file), lineage.robustness(config, run), remake, "robustness")
    for key in config.trainings():
        file = paths.checkpoint_dir(key.path) / "train.json"
        if file.is_file():
            remake = lineage.remake(train_command(ctx, key))
            embedded(json.loads(file.read_text()), str(file), lineage.train(config, key), remake, "train")


def stability_records(config: Config, robustness_files: dict[str, Path]) -> dict[str, dict]:
    """Seed stability of every trained configuration with 2+ seeds (COBE V-E): its record and
    heatmap under results/studies/<study>/stability/<group>/, and index.json there listing them."""
    from csbench.evaluate.stability import seed_stability
    from csbench.results.plots import plot_seed_heatmap

    settings = config.stability
    records: dict[str, dict] = {}
    for group, runs in config.stability_groups():
        ir_auc = {}
        for run in runs:
            file = robustness_files.get(run.path)
            if file is not None and file.is_file():
                ir_auc[run.seed] = json.loads(file.read_text())
        record = seed_stability(
            {run.seed: paths.run_dir(run.path) for run in runs},
            settings["protocol"],
            k=int(settings["k"]),
            ir_auc=ir_auc or None,
        )
        out = paths.stability_dir(config.study, group.path)
        write_json(out / "stability.json", record)
        plot_seed_heatmap(record, out / "heatmap.png")
        records[group.path] = record
    write_json(paths.stability_dir(config.study) / "index.json", {"settings": settings, "groups": sorted(records)})
    return records
