"""The ``attack`` phase: a code attack (:mod:`csbench.attacks`) applied to every split of a prepared
dataset, into ``data/attacked/<dataset>/<attack>`` with its report ``attack.json``."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import lineage, paths
from csbench.io import write_json, write_parquet
from csbench.phases import Context
from csbench.phases.inputs import prepared, require, split_names, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def attack(ctx: Context, dataset: str, attack: str) -> Path:
    """Write the attacked splits, ``attack.json`` and their stamp; the folder."""
    from csbench.attacks import run_attack

    config = ctx.config
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    require(attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    target = paths.attacked_dir(dataset, attack)
    source = prepared(ctx, dataset)
    splits = {split: source.frame(file.name) for split, file in paths.split_files(source.folder).items()}
    unstamp(target)
    attacked, report = run_attack(
        attack, splits, config.raw.get("attack_params") or {}, workers=ctx.jobs, progress=ctx.progress
    )
    for split, frame in attacked.items():
        write_parquet(paths.split_files(target)[split], frame)
    summary = report.as_dict()
    write_json(target / "attack.json", {**summary, "params": config.attack_params(attack)})
    expected = lineage.attack(config, dataset, attack)
    write_stamp(target, "attack", expected, source.inputs(split_names()), [*split_names(), "attack.json"])
    _log_summary(dataset, attack, summary)
    return target


def _log_summary(dataset: str, attack: str, summary: dict) -> None:
    """What the attack did per language, and the snippets it could not analyse."""
    for language, row in summary["per_language"].items():
        log.info(
            "attacked %s with %s: %s %s snippets, %s changed, %s renamed, %s not analysable",
            dataset,
            attack,
            row["snippets"],
            language,
            row["changed"],
            row["renamed"],
            row["analysis_failed"],
        )
        if row["comments_kept_undelimited"]:
            log.warning(
                "%s with %s: %s %s snippets keep a line comment whose end is unknown (code flattened onto one "
                "line: removing or translating it could change code); see attack.json and the dataset card",
                dataset,
                attack,
                row["comments_kept_undelimited"],
                language,
            )
    for failure in summary["failures"]:
        log.warning("identifier analysis failed (%s, code left unrenamed): %s", failure["language"], failure["error"])
