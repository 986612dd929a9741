"""A dataset's graded relevance judgements (BEIR qrels), carried from prepare to evaluate.

``csbench prepare`` writes them beside the splits as ``qrels.parquet`` (columns
:data:`QRELS_COLUMNS`: split, query record id, corpus document id, grade), in file order, when the
dataset's :class:`DatasetSpec` has a ``qrels`` reader; the prepare stamp vouches for it like for the
splits. ``csbench evaluate`` and ``csbench robust`` hand it to the ``qrels`` protocol
(:mod:`csbench.evaluate.graded`). The judgements name records by id: an attack, which keeps ids,
changes the documents they point to and nothing else, so one file serves every attack.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from csbench.datasets.base import DatasetSpec, SkipReport
from csbench.io import sha256_file

QRELS_FILE = "qrels.parquet"
QRELS_COLUMNS = ("split", "query_id", "doc_id", "relevance")  # (csbench.evaluate.qrels re-exports it)
_SCHEMA = pa.schema([(name, pa.int64() if name == "relevance" else pa.string()) for name in QRELS_COLUMNS])


def write_qrels(spec: DatasetSpec, raw_dir: Path, options: dict[str, Any], out_dir: Path) -> dict | None:
    """Write ``out_dir/qrels.parquet`` from the spec's ``qrels`` reader and return its card entry
    (judgements and relevant ones per split, the grades, the reader's skips), or remove a stale one and
    return None where the dataset has no judgements (its own code is each query's answer)."""
    target = Path(out_dir) / QRELS_FILE
    if spec.qrels is None:
        target.unlink(missing_ok=True)
        return None
    columns: tuple[list, list, list, list] = ([], [], [], [])
    report = SkipReport()
    for row in spec.qrels(raw_dir, options, report):
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    table = pa.table(list(columns), schema=_SCHEMA)
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(target)
    splits, queries, _, relevance = columns
    per_split: dict[str, dict[str, int]] = {}
    seen: dict[str, set[str]] = {}
    for split, query, grade in zip(splits, queries, relevance, strict=True):
        entry = per_split.setdefault(split, {"judgements": 0, "relevant": 0, "queries": 0})
        entry["judgements"] += 1
        entry["relevant"] += int(grade > 0)
        seen.setdefault(split, set()).add(query)
    for split, entry in per_split.items():
        entry["queries"] = len(seen[split])
    return {
        "file": QRELS_FILE,
        "sha256": sha256_file(target),  # card.json changes whenever the judgements do (the drivers' dependency)
        "judgements": len(splits),
        "splits": per_split,
        "grades": {str(g): n for g, n in sorted(Counter(relevance).items())},
        # what the reader noted: judgements it skipped (a query absent from queries.jsonl, a bad line), and
        # those it kept but that name a document absent from the corpus
        "notes": report.as_dict(),
    }
