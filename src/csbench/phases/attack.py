"""The ``attack`` phase: a code attack (:mod:`csbench.attacks`) applied to every split of a prepared
dataset, into ``data/attacked/<dataset>/<attack>`` with its report ``attack.json``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pandas as pd

from csbench import lineage, paths
from csbench.io import ParquetStream, parquet_frames, write_json, write_parquet
from csbench.phases import Context
from csbench.phases.inputs import prepared, require, split_names, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def attack(ctx: Context, dataset: str, attack: str, batch_rows: int | None = None) -> Path:
    """Write the attacked splits, ``attack.json`` and their stamp; the folder. A dataset of at most
    ``batch_rows`` rows (all splits; default ``ATTACK_BATCH_ROWS``) is attacked in memory at once
    (``run_attack``), a larger one a batch of rows at a time (``attack_batches``: the same splits)."""
    from csbench.attacks.stream import ATTACK_BATCH_ROWS

    config = ctx.config
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    require(attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    batch_rows = ATTACK_BATCH_ROWS if batch_rows is None else batch_rows
    if batch_rows < 1:
        raise ValueError(f"--batch-rows must be at least 1, not {batch_rows}")
    target = paths.attacked_dir(dataset, attack)
    source = prepared(ctx, dataset)
    files = paths.split_files(source.folder)
    unstamp(target)
    params = config.raw.get("attack_params") or {}
    handles = {split: source.open(file.name) for split, file in files.items()}
    try:
        if sum(_rows(handle) for handle in handles.values()) <= batch_rows:
            report = _in_memory(attack, handles, target, params, ctx)
        else:
            report = _in_batches(attack, handles, target, params, ctx, batch_rows)
    finally:
        for handle in handles.values():
            handle.close()
    summary = report.as_dict()
    write_json(target / "attack.json", {**summary, "params": config.attack_params(attack)})
    expected = lineage.attack(config, dataset, attack)
    write_stamp(target, "attack", expected, source.inputs(split_names()), [*split_names(), "attack.json"])
    _log_summary(dataset, attack, summary)
    return target


def _rows(handle: BinaryIO) -> int:
    import pyarrow.parquet as pq

    handle.seek(0)
    return pq.ParquetFile(handle).metadata.num_rows


def _in_memory(attack: str, handles: dict[str, BinaryIO], target: Path, params: dict, ctx: Context):
    """Every split read whole, attacked at once (``run_attack``) and written."""
    import pyarrow.parquet as pq

    from csbench.attacks import run_attack

    splits = {}
    for split, handle in handles.items():
        handle.seek(0)
        splits[split] = pq.read_table(handle).to_pandas()
    attacked, report = run_attack(attack, splits, params, workers=ctx.jobs, progress=ctx.progress)
    for split, frame in attacked.items():
        write_parquet(paths.split_files(target)[split], frame)
    return report


def _in_batches(attack: str, handles: dict[str, BinaryIO], target: Path, params: dict, ctx: Context, rows: int):
    """The splits read, attacked and written ``rows`` rows at a time (``attack_batches``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from csbench.attacks.engine import RENAMING_COLUMN
    from csbench.attacks.stream import attack_batches

    def batches(split: str, columns: list[str] | None) -> Iterator[pd.DataFrame]:
        return parquet_frames(handles[split], rows, columns)  # an empty split still gives its columns

    def types(split: str):
        handles[split].seek(0)
        return pq.ParquetFile(handles[split]).schema_arrow.append(pa.field(RENAMING_COLUMN, pa.string()))

    target.mkdir(parents=True, exist_ok=True)
    writers = {split: ParquetStream(file, types(split)) for split, file in paths.split_files(target).items()}
    try:
        write = lambda split, frame: writers[split].write(frame)  # noqa: E731
        report = attack_batches(attack, list(handles), batches, write, target, params, ctx.jobs, ctx.progress)
        for writer in writers.values():
            writer.close()
    finally:
        for writer in writers.values():
            writer.abort()
    return report


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
