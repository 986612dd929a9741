"""Stamps: what made each output, checked by whatever reads it.

Each phase that writes a folder of outputs writes ``STAMP.json`` into it last (atomically, after
every file it describes)::

    {"format": 1, "phase": "attack",
     "lineage": {"datasets.python-stdlib": {...}, "attack_params(no_comment)": {...}},
     "lineage_sha256": "<canonical SHA-256 of lineage>",
     "inputs":  {"data/prepared/python-stdlib/test.parquet": "<sha256>", ...},
     "outputs": {"test.parquet": {"sha256": "<sha256>", "bytes": 12345}, ...}}

``lineage``: every config value the output depends on, its own phase's and those of the phases
before it, by config key (:mod:`csbench.lineage` computes it from a config). ``inputs``: the digests
of the files it was made from. ``outputs``: the digest of each file it wrote. No time, host or
absolute path: the stamp varies between runs only through the digests of files that hold timings
(``card.json``, ``provenance.json``, an index's or a checkpoint's record); the stamps of attacked data,
query sets and robustness points are the same under both drivers.

A reader (:func:`verified`) first compares the stamp's lineage with the one its own config expects:
a folder made by another study or driver under other parameters is refused with one line naming the
keys that differ; then it hashes each file it reads and compares it with ``outputs``, so a truncated
or changed file is refused too, naming it (a file read through :meth:`Verified.frame` is read once:
hashed and parsed from the same bytes). Single-file outputs (``train.json``, ``robustness.json``)
carry the same record under their ``"made"`` key (:func:`embedded`).

The hashing is :mod:`csbench.models.integrity`'s (the sidecar of indexes and checkpoints).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from csbench.io import canonical_hash, present_columns, write_json
from csbench.models.integrity import IntegrityError, sha256_of

STAMP_FILE = "STAMP.json"
STAMP_FORMAT = 1
EMBEDDED_KEY = "made"  # the stamp of a single-file JSON output, inside it
SHOWN_DIFFERENCES = 3


class StampError(IntegrityError):
    """An output made under other parameters than the reader's, or changed since it was made."""


def plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples become lists, keys strings): what a stamp holds."""
    return json.loads(json.dumps(value, default=str))


def record(
    phase: str,
    lineage: Mapping[str, Any],
    inputs: Mapping[str, str],
    outputs: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A stamp: ``outputs`` maps a file name (relative to the stamped folder) to its sha256 and bytes."""
    lineage = plain(dict(lineage))
    stamp: dict[str, Any] = {
        "format": STAMP_FORMAT,
        "phase": phase,
        "lineage": lineage,
        "lineage_sha256": canonical_hash(lineage),
        "inputs": dict(sorted(inputs.items())),
    }
    if outputs is not None:
        stamp["outputs"] = dict(sorted(outputs.items()))
    return stamp


def describe_file(path: Path) -> dict[str, Any]:
    """What a stamp records of one output file."""
    return {"sha256": sha256_of(path), "bytes": path.stat().st_size}


def write_stamp(
    folder: str | os.PathLike[str],
    phase: str,
    lineage: Mapping[str, Any],
    inputs: Mapping[str, str],
    outputs: Iterable[str],
    keep: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Hash the files ``outputs`` (names below ``folder``) and write ``folder/STAMP.json`` last.
    ``keep``: entries of an earlier stamp of the same lineage for files this run did not rewrite."""
    folder = Path(folder)
    described = {name: dict(entry) for name, entry in (keep or {}).items() if (folder / name).is_file()}
    described |= {name: describe_file(folder / name) for name in outputs}
    stamp = record(phase, lineage, inputs, described)
    write_json(folder / STAMP_FILE, stamp)
    return stamp


def differences(made: Any, expected: Any, prefix: str = "") -> list[str]:
    """The leaves where ``made`` (a recorded lineage) and ``expected`` differ: ``key: X there, Y here``."""
    if isinstance(made, dict) and isinstance(expected, dict):
        found = []
        for key in sorted({*made, *expected}, key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in made:
                found.append(f"{where}: absent there, {_show(expected[key])} here")
            elif key not in expected:
                found.append(f"{where}: {_show(made[key])} there, absent here")
            else:
                found += differences(made[key], expected[key], where)
        return found
    if made != expected:
        return [f"{prefix or 'value'}: {_show(made)} there, {_show(expected)} here"]
    return []


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def lineage_problem(stamp: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """None when the stamp's lineage is ``expected``, else what differs (``key: X there, Y here; ...``)."""
    expected = plain(dict(expected))
    if stamp.get("lineage_sha256") == canonical_hash(expected) and stamp.get("lineage") == expected:
        return None
    found = differences(stamp.get("lineage") or {}, expected)
    more = len(found) - SHOWN_DIFFERENCES
    return "; ".join(found[:SHOWN_DIFFERENCES]) + (f"; {more} more" if more > 0 else "") or "its record is damaged"


def check_lineage(stamp: Mapping[str, Any], expected: Mapping[str, Any], where: str, remake: str) -> None:
    """Refuse an output whose recorded lineage is not ``expected`` (one line naming what differs)."""
    problem = lineage_problem(stamp, expected)
    if problem is not None:
        raise StampError(
            f"{where}: made by `csbench {stamp.get('phase', '?')}` under other parameters than this config's "
            f"({problem}), e.g. by another study or driver: {remake}"
        )


def read_stamp(folder: str | os.PathLike[str], remake: str, producer: str) -> dict[str, Any]:
    """``folder/STAMP.json`` (a :class:`StampError` when it is missing or not a stamp)."""
    path = Path(folder) / STAMP_FILE
    if not path.is_file():
        raise StampError(
            f"{path} is missing: {folder} was not made by this csbench's `{producer}` (or its run did not "
            f"finish), so what made it is unknown: {remake}"
        )
    try:
        stamp = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise StampError(f"{path}: not a stamp ({err}): {remake}") from None
    return _checked_format(stamp, str(path), remake)


def _checked_format(stamp: Any, where: str, remake: str) -> dict[str, Any]:
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT or not isinstance(stamp.get("lineage"), dict):
        raise StampError(f"{where}: not a csbench stamp of format {STAMP_FORMAT}: {remake}")
    return stamp


class Verified:
    """A stamped folder whose lineage matched the reader's config: its files, each checked against
    the stamp as it is read."""

    def __init__(self, folder: Path, stamp: dict[str, Any], remake: str) -> None:
        self.folder = folder
        self.stamp = stamp
        self.remake = remake
        self.outputs: dict[str, dict[str, Any]] = stamp.get("outputs") or {}

    def digest(self, name: str) -> str:
        """The recorded SHA-256 of file ``name`` (what a consumer records as its input)."""
        return self._entry(name)["sha256"]

    def has(self, name: str) -> bool:
        return name in self.outputs

    def _entry(self, name: str) -> dict[str, Any]:
        entry = self.outputs.get(name)
        if not isinstance(entry, dict) or "sha256" not in entry:
            raise StampError(
                f"{self.folder / name}: not among the files {self.folder / STAMP_FILE} lists (made by "
                f"another version or configuration): {self.remake}"
            )
        return entry

    def _mismatch(self, name: str, size: int) -> StampError:
        entry = self.outputs[name]
        recorded = int(entry.get("bytes", -1))
        how = f"{size} bytes now, {recorded} when it was made" if size != recorded else "same size, other content"
        return StampError(
            f"{self.folder / name}: changed since `csbench {self.stamp.get('phase', '?')}` made it ({how}; "
            f"{self.folder / STAMP_FILE} records its SHA-256): {self.remake}"
        )

    def _present(self, name: str) -> tuple[dict[str, Any], Path]:
        """The stamp's entry of file ``name`` and its path, the file there."""
        entry, path = self._entry(name), self.folder / name
        if not path.is_file():
            raise StampError(f"{path} is missing (listed in {self.folder / STAMP_FILE}): {self.remake}")
        return entry, path

    def check(self, name: str) -> str:
        """Hash file ``name`` and compare it with the stamp; its digest."""
        with self.open(name):
            return self._entry(name)["sha256"]

    def read_bytes(self, name: str) -> bytes:
        """The bytes of file ``name``, read once and checked against the stamp."""
        entry, path = self._present(name)
        data = path.read_bytes()
        if len(data) != entry.get("bytes") or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise self._mismatch(name, len(data))
        return data

    def open(self, name: str) -> BinaryIO:
        """File ``name`` open for reading, its bytes checked against the stamp through this very handle
        (a file renamed over it meanwhile is not what the handle reads): for a file read in parts,
        too large to hold (``read_bytes``). The caller closes it."""
        entry, path = self._present(name)
        handle = open(path, "rb")  # noqa: SIM115 - returned open
        try:
            size = os.fstat(handle.fileno()).st_size
            if size != entry.get("bytes"):  # (no need to hash it)
                raise self._mismatch(name, size)
            digest = hashlib.sha256()
            while block := handle.read(1 << 20):
                digest.update(block)
            if digest.hexdigest() != entry["sha256"]:
                raise self._mismatch(name, size)
            handle.seek(0)
        except BaseException:
            handle.close()
            raise
        return handle

    def frame(self, name: str, columns: list[str] | None = None, present: bool = False):
        """A Parquet file of the folder as a DataFrame, parsed from the very bytes that were checked
        (without a copy: what ``pd.read_parquet`` gives, in the same time plus the hashing); only
        ``columns`` where given (``present``: those of them the file has; otherwise a missing one is an
        error)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        data = pa.py_buffer(self.read_bytes(name))
        if columns is not None and present:
            columns = present_columns(pa.BufferReader(data), columns)
        return pq.read_table(pa.BufferReader(data), columns=columns).to_pandas()

    def json(self, name: str) -> Any:
        return json.loads(bytes(self.read_bytes(name)).decode("utf-8"))

    def inputs(self, names: Iterable[str]) -> dict[str, str]:
        """``{path: sha256}`` of files of this folder, as a consumer's stamp records its inputs."""
        return {(self.folder / name).as_posix(): self.digest(name) for name in names}


def verified(folder: str | os.PathLike[str], expected: Mapping[str, Any], remake: str, producer: str) -> Verified:
    """The stamp of ``folder`` once its lineage matched ``expected`` (files are checked as read)."""
    folder = Path(folder)
    stamp = read_stamp(folder, remake, producer)
    check_lineage(stamp, expected, str(folder), remake)
    return Verified(folder, stamp, remake)


def embedded(data: Mapping[str, Any], where: str, expected: Mapping[str, Any], remake: str, producer: str) -> dict:
    """Check the stamp a JSON output carries under ``"made"`` (``train.json``, ``robustness.json``)."""
    stamp = data.get(EMBEDDED_KEY) if isinstance(data, Mapping) else None
    if stamp is None:
        raise StampError(
            f"{where} has no record of what made it (no '{EMBEDDED_KEY}': not made by this csbench's "
            f"`{producer}`, or by an older one): {remake}"
        )
    stamp = _checked_format(stamp, f"{where} ({EMBEDDED_KEY})", remake)
    check_lineage(stamp, expected, where, remake)
    return stamp
