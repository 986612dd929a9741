"""The ``dataset-table`` phase: GeCS Table 1 (:mod:`csbench.results.dataset_table`), the tokens and
token-distribution shift of each test set of the grid against a reference set, into
``results/studies/<study>/dataset_table/gecs_datasets.{md,csv,json}``."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import paths
from csbench.phases import Context
from csbench.phases.inputs import prepared

log = logging.getLogger("csbench")


def dataset_table(ctx: Context) -> Path:
    """Count the tokens of the prepared test splits (and the reference split) and write the table;
    its folder."""
    from csbench.results.dataset_table import (
        DIR_NAME,
        caption,
        count_tokens,
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

    def stats(dataset: str, split: str):
        frame = prepared(ctx, dataset).frame(f"{split}.parquet", columns=columns)
        return count_tokens(dataset, split, frame["query"].tolist(), frame["code"].tolist(), tokenizer)

    rows = shift_rows(stats(reference, split), [stats(dataset, "test") for dataset in config.datasets])
    text = caption(table["tokenizer"], reference, split)
    out = paths.study_dir(config.study) / DIR_NAME
    write_shift_table(out, rows, text, {"study": config.study, **table})
    log.info("dataset table of %d test sets against %s %s (%s) in %s/", len(config.datasets), reference, split,
             table["tokenizer"], out)  # fmt: skip
    return out
