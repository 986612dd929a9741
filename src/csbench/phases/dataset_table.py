"""The ``dataset-table`` phase: GeCS Table 1 (:mod:`csbench.results.dataset_table`), the tokens and
token-distribution shift of each test set of the grid against a reference set, into
``results/studies/<study>/dataset_table/gecs_datasets.{md,csv,json}``."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import paths
from csbench.io import parquet_frames
from csbench.phases import Context
from csbench.phases.inputs import prepared

log = logging.getLogger("csbench")

TABLE_BATCH_ROWS = 20_000  # rows of a split tokenized at once


def dataset_table(ctx: Context) -> Path:
    """Count the tokens of the prepared test splits (and the reference split) and write the table;
    its folder."""
    from csbench.results.dataset_table import (
        DIR_NAME,
        caption,
        count_token_batches,
        load_tokenizer,
        shift_rows,
        write_shift_table,
    )

    config = ctx.config
    table = config.dataset_table
    if table is None:
        raise ValueError(f"{'+'.join(config.sources)}: no dataset_table section: nothing to build")
    tokenizer = load_tokenizer(table["tokenizer"])
    reference, split = table["reference"], table["reference_split"]
    columns = ["query", "code"]

    def stats(dataset: str, split: str):  # a batch of rows at a time: a reference split may be large
        with prepared(ctx, dataset).open(f"{split}.parquet") as handle:
            frames = parquet_frames(handle, TABLE_BATCH_ROWS, columns)
            batches = ((frame["query"].tolist(), frame["code"].tolist()) for frame in frames)
            return count_token_batches(dataset, split, batches, tokenizer)

    rows = shift_rows(stats(reference, split), [stats(dataset, "test") for dataset in config.datasets])
    text = caption(table["tokenizer"], reference, split)
    out = paths.study_dir(config.study) / DIR_NAME
    write_shift_table(out, rows, text, {"study": config.study, **table})
    log.info("dataset table of %d test sets against %s %s (%s) in %s/", len(config.datasets), reference, split,
             table["tokenizer"], out)  # fmt: skip
    return out
