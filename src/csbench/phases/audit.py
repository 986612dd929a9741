"""The ``audit`` phase: a prepared dataset's card and leakage audit (:mod:`csbench.datasets.audit`)
into ``results/datasets/<dataset>``."""

from __future__ import annotations

import logging
from pathlib import Path

from csbench import lineage, paths
from csbench.io import write_json, write_text
from csbench.phases import Context
from csbench.phases.inputs import prepared, require, split_names, unstamp
from csbench.stamps import write_stamp

log = logging.getLogger("csbench")


def audit(ctx: Context, dataset: str) -> Path:
    """Write ``results/datasets/<dataset>/card.{json,md}`` and their stamp; the folder."""
    from csbench.datasets.audit import audit_dataset, card_markdown

    config = ctx.config
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    source = prepared(ctx, dataset)
    read = ["card.json", *split_names()]
    for name in read[1:]:
        source.check(name)  # audit_dataset reads them itself
    card = source.json("card.json")
    out = paths.cards_dir(dataset)
    unstamp(out)
    result = audit_dataset(paths.prepared_dir(dataset), workers=ctx.jobs, progress=ctx.progress)
    write_json(out / "card.json", {"card": card, "audit": result})
    write_text(out / "card.md", card_markdown(dataset, card, result))
    write_stamp(out, "audit", lineage.prepare(config, dataset), source.inputs(read), ["card.json", "card.md"])
    shared = result["shared_code"].get("test_in_train", {})
    log.info(
        "audited %s: %s test records also in train (exact), %s (near); pool duplicates %s",
        dataset,
        shared.get("exact", "n/a"),
        shared.get("near", "n/a"),
        (result["pool_duplicates"] or {}).get("exact_records", "n/a"),
    )
    return out
