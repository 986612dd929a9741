"""Dataset cards and the leakage audit (issue #3): what a test score can and cannot mean.

Per prepared dataset: pairs per split; query and code length (mean ± std) before and after
comment removal (as COBE Table I); exact and near-duplicate code shared between splits (a test
function seen in training); and duplicate codes inside the retrieval pool (they tie with the
correct answer and distort MRR). Keys go through a temporary SQLite database, so memory stays
bounded whatever the dataset size.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import sqlite3
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
from tqdm import tqdm

from csbench.code.comments import remove_comments
from csbench.code.extract import normalized_code_key
from csbench.code.tokens import subtokens
from csbench.datasets.base import POOL_SPLIT, SPLITS
from csbench.datasets.local import files_line, skipped_markdown
from csbench.datasets.prepare import RunningStats, code_layout_markdown

PAIRS = (("test", "train"), ("valid", "train"), ("test", "valid"))


def _keys(batch: list[tuple[str, str]]) -> list[tuple[bytes, bytes | None, int, int | None]]:
    """(exact key, near key, code subtokens, code subtokens without comments) per (code, language).

    exact: the code with white space folded; near: the token sequence of the comment-free code
    (None where comment removal is not implemented for the language or the code does not parse).
    """
    out = []
    for code, language in batch:
        exact = hashlib.sha1(" ".join(code.split()).encode("utf-8")).digest()
        try:
            stripped = remove_comments(code, language)
            near: bytes | None = hashlib.sha1(normalized_code_key(stripped, language).encode("utf-8")).digest()
            stripped_len: int | None = len(subtokens(stripped))
        except (NotImplementedError, ValueError, UnicodeDecodeError):
            near, stripped_len = None, None
        out.append((exact, near, len(subtokens(code)), stripped_len))
    return out


def _batches(path: Path, size: int) -> Iterator[list[tuple[str, str]]]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=size, columns=["code", "language"]):
        data = batch.to_pydict()
        yield list(zip(data["code"], data["language"], strict=True))


def audit_dataset(prepared: Path, workers: int = 1, progress: bool = True, batch_size: int = 512) -> dict:
    """Audit the split files in ``prepared`` (data/prepared/<dataset>/)."""
    present = [s for s in (*SPLITS, POOL_SPLIT) if (prepared / f"{s}.parquet").is_file()]
    if not present:
        raise FileNotFoundError(f"no split files in {prepared}: run `csbench prepare` first")
    splits = [s for s in present if pq.ParquetFile(prepared / f"{s}.parquet").metadata.num_rows > 0]
    lengths: dict[str, dict[str, RunningStats]] = {}
    with tempfile.TemporaryDirectory(prefix="csbench-audit-") as tmp:
        db = sqlite3.connect(Path(tmp) / "keys.db")
        db.execute("CREATE TABLE keys (split TEXT, exact BLOB, near BLOB)")
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) if workers > 1 else None
        try:
            for split in splits:
                path = prepared / f"{split}.parquet"
                total = pq.ParquetFile(path).metadata.num_rows
                stats = lengths[split] = {"code": RunningStats(), "code_no_comment": RunningStats()}
                bar = tqdm(total=total, desc=f"audit {split}", unit="fn", disable=not progress, mininterval=2)
                batches = _batches(path, batch_size)
                results = pool.map(_keys, batches) if pool else map(_keys, batches)
                for rows in results:
                    db.executemany("INSERT INTO keys VALUES (?, ?, ?)", [(split, e, n) for e, n, _, _ in rows])
                    for _, _, code_len, stripped_len in rows:
                        stats["code"].add(code_len)
                        if stripped_len is not None:
                            stats["code_no_comment"].add(stripped_len)
                    bar.update(len(rows))
                bar.close()
        finally:
            if pool:
                pool.shutdown()
        db.execute("CREATE INDEX keys_exact ON keys(split, exact)")
        db.execute("CREATE INDEX keys_near ON keys(split, near)")
        overlap = {}
        for left, right in PAIRS:
            if left in splits and right in splits:
                overlap[f"{left}_in_{right}"] = {key: _shared(db, left, right, key) for key in ("exact", "near")} | {
                    "records": _count(db, left)
                }
        pool_split = POOL_SPLIT if POOL_SPLIT in splits else "test"
        duplicates = _pool_duplicates(db, pool_split) if pool_split in splits else None
        db.close()
    return {
        "splits": splits,
        "code_length": {s: {k: v.as_dict() for k, v in lengths[s].items()} for s in splits},
        "shared_code": overlap,
        "pool": pool_split,
        "pool_duplicates": duplicates,
    }


def _count(db: sqlite3.Connection, split: str) -> int:
    return db.execute("SELECT COUNT(*) FROM keys WHERE split = ?", (split,)).fetchone()[0]


def _shared(db: sqlite3.Connection, left: str, right: str, key: str) -> int:
    """Records of ``left`` whose code (by ``key``) also occurs in ``right``."""
    return db.execute(
        f"SELECT COUNT(*) FROM keys a WHERE a.split = ? AND a.{key} IS NOT NULL AND EXISTS "
        f"(SELECT 1 FROM keys b WHERE b.split = ? AND b.{key} = a.{key})",
        (left, right),
    ).fetchone()[0]


def _pool_duplicates(db: sqlite3.Connection, split: str) -> dict[str, int]:
    """Records of the retrieval pool whose code occurs more than once in it, and in how many groups."""
    result = {}
    for key in ("exact", "near"):
        groups, records = db.execute(
            f"SELECT COUNT(*), COALESCE(SUM(n), 0) FROM (SELECT COUNT(*) AS n FROM keys "
            f"WHERE split = ? AND {key} IS NOT NULL GROUP BY {key} HAVING n > 1)",
            (split,),
        ).fetchone()
        result[f"{key}_groups"], result[f"{key}_records"] = groups, records
    result["records"] = _count(db, split)
    return result


def _mean_std(stats: dict | None) -> str:
    """`mean ± std`, or n/a where there is nothing to measure (pool records have no query)."""
    if not stats or stats.get("mean") is None or stats["mean"] != stats["mean"]:
        return "n/a"
    return f"{stats['mean']} ± {stats['std']}"


def card_markdown(name: str, card: dict, audit: dict) -> str:
    """The dataset card of the report: the preparation card plus the leakage audit."""
    lines = [f"# Dataset card: {name}", ""]
    for key in ("description", "kind", "language", "languages", "source", "repo", "licence", "citation"):
        if card.get(key):
            lines.append(f"- {key}: {card[key]}")
    if "found" in (card.get("files") or {}):  # a local corpus: what its walk found and skipped
        lines.append(files_line(card))
    lines += [
        "",
        "| split | pairs | query tokens | code subtokens | code subtokens, comments removed |",
        "|---|---:|---:|---:|---:|",
    ]
    for split in audit["splits"]:
        s = card.get("splits", {}).get(split, {})
        lengths = audit["code_length"][split]
        cells = [_mean_std(s.get("query_tokens")), _mean_std(lengths["code"]), _mean_std(lengths["code_no_comment"])]
        lines.append(f"| {split} | {s.get('pairs', 'n/a')} | " + " | ".join(cells) + " |")
    lines += ["", "## Leakage audit", ""]
    if audit["shared_code"]:
        lines += ["| records of | also in | records | exact duplicates | near duplicates |", "|---|---|---:|---:|---:|"]
        for pair, counts in audit["shared_code"].items():
            left, right = pair.split("_in_")
            lines.append(f"| {left} | {right} | {counts['records']} | {counts['exact']} | {counts['near']} |")
    else:
        lines.append("No split pairs to compare (the release has one split).")
    dup = audit["pool_duplicates"]
    if dup:
        lines += [
            "",
            f"Retrieval pool (`{audit['pool']}`, {dup['records']} records): {dup['exact_records']} records in "
            f"{dup['exact_groups']} groups of identical code, {dup['near_records']} in {dup['near_groups']} groups "
            "of near-identical code. Each such record ties with its twins: with ties counted against the model, "
            "a query whose correct code has a twin can never rank first.",
        ]
    lines += [
        "",
        "Exact: identical code up to white space. Near: identical token sequence once comments are removed "
        "(string literals compared whole).",
    ]
    lines += skipped_markdown(card)
    lines += code_layout_markdown(card)
    return "\n".join(lines) + "\n"
