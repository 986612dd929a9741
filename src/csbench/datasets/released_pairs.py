"""A release's own labelled matching pairs (GeCS's ``clf`` files), carried from prepare to evaluate.

``csbench prepare`` writes them beside the splits as ``released_pairs.parquet`` (columns
:data:`csbench.evaluate.protocols.RELEASED_COLUMNS`: query record id, code record id, label 0/1,
line of the release file), in release order, when the dataset's :class:`DatasetSpec` has a
``released_pairs`` reader and its options select a file with labels; the prepare stamp vouches for
it like for the splits. ``csbench evaluate`` hands it to the ``matching`` protocol, which then
evaluates exactly these pairs (its negatives are the release's, not drawn): the pairs name records
by id, so an attack, which keeps ids, changes the codes they point to and nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from csbench.datasets.base import DatasetSpec, SkipReport

RELEASED_PAIRS_FILE = "released_pairs.parquet"
_SCHEMA = pa.schema([("query_id", pa.string()), ("code_id", pa.string()), ("label", pa.int8()), ("line", pa.int64())])


def write_released_pairs(spec: DatasetSpec, raw_dir: Path, options: dict[str, Any], out_dir: Path) -> dict | None:
    """Write ``out_dir/released_pairs.parquet`` from the spec's ``released_pairs`` reader and return
    its card entry (counts and skips), or remove a stale one and return None where the release (with
    these options) has no labelled pairs."""
    target = Path(out_dir) / RELEASED_PAIRS_FILE
    rows = spec.released_pairs(raw_dir, options, report := SkipReport()) if spec.released_pairs else None
    if rows is None:
        target.unlink(missing_ok=True)
        return None
    query_ids, code_ids, labels, lines = [], [], [], []
    for query_id, code_id, label, line in rows:
        query_ids.append(query_id)
        code_ids.append(code_id)
        labels.append(label)
        lines.append(line)
    table = pa.table([query_ids, code_ids, labels, lines], schema=_SCHEMA)
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(target)
    positives = sum(labels)
    return {
        "file": RELEASED_PAIRS_FILE,
        "pairs": len(labels),
        "positives": positives,
        "negatives": len(labels) - positives,
        "skipped": report.as_dict(),
    }
