"""`csbench results`: query the `results` table of results.db from the shell (the thesis's
``sqliteinteract.py``): filter on any key column, print as an aligned table, CSV or JSON, pivot one
column (metrics, typically) into columns, export to CSV / Parquet / JSON.

Each study has its own database, results/studies/<study>/results.db, which only that study's
`aggregate` rewrites. Without ``--db`` the query reads every study's database as one table (its
``study`` column tells them apart), or only those of the studies ``--study`` names.

Filters: each of ``--study --dataset ... --metric`` may be repeated and takes a comma-separated
list; the rows kept match any of a column's values and every filtered column. A value that exists
as it is in the database is taken whole even when it holds a comma (the language ``go,java`` of a
run over a multi-language pool). ``--ratio none`` selects the rows without a ratio (IR-AUC).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from csbench import paths
from csbench.io import atomic_open, write_parquet
from csbench.registry import UnknownNameError
from csbench.results.collect import RESULT_COLUMNS, RESULT_KEY

STUDIES_DIR = Path(paths.STUDIES)  # results/studies/<study>/results.db
LEGACY_DB = Path(paths.RESULTS) / paths.DATABASE  # where csbench wrote the one database before studies coexisted
FILTER_COLUMNS = RESULT_KEY
FORMATS = ("table", "csv", "json")
EXPORT_SUFFIXES = (".csv", ".parquet", ".json")
TABLE_COLUMNS = (*RESULT_KEY, "value")  # the table format leaves provenance to csv / json / --export
NULL_RATIO = ("none", "null")  # --ratio none: rows without a ratio (IR-AUC)
# a run's rows together, then its points and metrics
ORDER = ("study", "dataset", "language", "attack", "model", "loss", "seed", "inference", "protocol")
ORDER += ("perturbation", "ratio", "metric")
DTYPES = {"ratio": "float64", "seed": "int64", "value": "float64"}


def study_databases(studies: Iterable[str] = (), root: str | Path = STUDIES_DIR) -> list[Path]:
    """The results.db of every study that has one under ``root`` (results/studies/), by study name,
    or of the ``studies`` named (repeated / comma-separated option values, as ``--study`` takes them).
    FileNotFoundError when no study has a database; UnknownNameError (listing those that have one)
    for a named study without one."""
    root = Path(root)
    found = {db.parent.name: db for db in sorted(root.glob(f"*/{paths.DATABASE}")) if db.is_file()}
    if not found:
        hint = ""
        if root == STUDIES_DIR and LEGACY_DB.is_file():
            hint = (
                f" ({LEGACY_DB} was written by an older csbench, before each study had its own folder: "
                f"query it with --db {LEGACY_DB}, or run `csbench aggregate` again)"
            )
        raise FileNotFoundError(
            f"no study has a database under {root}/ (<study>/{paths.DATABASE}): run a study (`make run`) or "
            f"`csbench aggregate` first{hint}"
        )
    wanted = split_values(studies, found)
    for name in wanted:
        if name not in found:
            raise UnknownNameError("study", name, list(found), where=f"--study, no {root}/{name}/{paths.DATABASE}")
    return [found[name] for name in wanted] if wanted else list(found.values())


def _check_table(con: sqlite3.Connection, db: Path, schema: str = "main") -> None:
    """ValueError when ``db`` is no SQLite database, or has no `results` table with the key columns
    (a database written before the table existed)."""
    try:
        columns = {row[1] for row in con.execute(f'PRAGMA "{schema}".table_info(results)')}
    except sqlite3.DatabaseError as err:
        raise ValueError(f"{db} is not a readable SQLite database ({err}): run `csbench aggregate` again") from err
    missing = [c for c in RESULT_COLUMNS if c not in columns]
    if missing:
        raise ValueError(
            f"{db} has no `results` table with {', '.join(missing)}: it was built by an older csbench; "
            "run `csbench aggregate` again"
        )


def _readonly_uri(db: Path) -> str:
    if not db.is_file():
        raise FileNotFoundError(f"{db} is missing: run `csbench aggregate` first")
    return f"{db.resolve().as_uri()}?mode=ro"


def connect(db: str | Path | Sequence[str | Path]) -> sqlite3.Connection:
    """Open one results.db read-only, or several as one: an in-memory database whose `results`
    table holds the rows of each (every study's database, by ``study_databases``). A database in a
    study's folder must hold that study's rows only, so that no study is counted twice.
    FileNotFoundError when a file is missing, ValueError when one has no `results` table with the
    key columns."""
    if isinstance(db, (str, Path)):
        db = Path(db)
        con = sqlite3.connect(_readonly_uri(db), uri=True)
        try:
            _check_table(con, db)
        except ValueError:
            con.close()
            raise
        return con
    con = sqlite3.connect(":memory:", uri=True)
    try:
        con.execute(f"CREATE TABLE results ({', '.join(RESULT_COLUMNS)})")
        for one in map(Path, db):  # attached one at a time: SQLite attaches at most 10 at once
            con.execute("ATTACH DATABASE ? AS source", (_readonly_uri(one),))
            try:
                _check_table(con, one, "source")
                _check_study(con, one)
                con.execute(f"INSERT INTO results SELECT {', '.join(RESULT_COLUMNS)} FROM source.results")
                con.commit()
            finally:
                con.execute("DETACH DATABASE source")
    except (ValueError, FileNotFoundError):
        con.close()
        raise
    return con


def _check_study(con: sqlite3.Connection, db: Path) -> None:
    """A database in a study's folder (results/studies/<study>/results.db) holds only that study."""
    folder = db.parent.name
    if db.parent.parent.name != STUDIES_DIR.name:
        return
    others = [row[0] for row in con.execute("SELECT DISTINCT study FROM source.results") if row[0] != folder]
    if others:
        raise ValueError(
            f"{db} holds rows of study {', '.join(map(repr, others))}, not only of {folder!r} (its folder): "
            f"run that study's `csbench aggregate` again, or query the file alone with --db {db}"
        )


def describe(db: str | Path | Sequence[str | Path]) -> str:
    """The database(s) a query read, for messages."""
    if isinstance(db, (str, Path)):
        return str(db)
    names = [str(d) for d in db]
    return names[0] if len(names) == 1 else f"{len(names)} databases ({', '.join(names)})"


def split_values(given: Iterable[str], existing: Iterable[object] = ()) -> list[str]:
    """The values of a repeated, comma-separated option, in order, without repeats; a value that
    exists whole in ``existing`` is not split."""
    whole = {str(v) for v in existing}
    values: list[str] = []
    for text in given:
        parts = [text] if text in whole else [part.strip() for part in text.split(",")]
        values += [part for part in parts if part and part not in values]
    return values


def _ratio_text(ratio: object) -> str:
    return "none" if ratio is None else paths.ratio_label(float(ratio))


def _match(column: str, value: str, existing: list[object], db: str) -> object:
    """The database value that the option value ``value`` names, or UnknownNameError listing them."""
    if column == "ratio":
        if value.lower() in NULL_RATIO:
            wanted = None
        else:
            try:
                wanted = float(value)
            except ValueError:
                raise ValueError(f"--ratio {value!r} is not a number (or `none` for rows without a ratio)") from None
        for ratio in existing:
            same = ratio is None if wanted is None else ratio is not None and math.isclose(ratio, wanted, abs_tol=1e-9)
            if same:
                return ratio
        names = [_ratio_text(r) for r in existing]
    elif column == "seed":
        try:
            wanted = int(value)
        except ValueError:
            raise ValueError(f"--seed {value!r} is not an integer") from None
        if wanted in existing:
            return wanted
        names = [str(s) for s in existing]
    else:
        if value in existing:
            return value
        names = [str(v) for v in existing]
    raise UnknownNameError(column, value, names, where=f"--{column}, not in {db}")


def select(db: str | Path | Sequence[str | Path], filters: Mapping[str, Iterable[str]] | None = None) -> pd.DataFrame:
    """The rows of the `results` table of ``db`` (one database, or several read as one: see
    ``connect``) that match ``filters`` (column -> option values, as given on the command line), in a
    run-then-point order. Every value must exist in its column."""
    con = connect(db)
    where_db = describe(db)
    try:
        where, params = [], []
        for column, given in (filters or {}).items():
            if column not in FILTER_COLUMNS:
                raise ValueError(f"cannot filter on {column!r}: the filters are {', '.join(FILTER_COLUMNS)}")
            existing = [row[0] for row in con.execute(f'SELECT DISTINCT "{column}" FROM results')]
            wanted = [_match(column, v, existing, where_db) for v in split_values(given, existing)]
            if not wanted:
                continue
            known = [v for v in wanted if v is not None]
            terms = [f'"{column}" IN ({", ".join("?" * len(known))})'] if known else []
            terms += [f'"{column}" IS NULL'] if None in wanted else []
            where.append("(" + " OR ".join(terms) + ")")
            params += known
        sql = f"SELECT {', '.join(RESULT_COLUMNS)} FROM results"
        sql += (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {', '.join(ORDER)}"
        # the declared types, also when a selection holds only NULLs (exports keep one schema)
        return pd.read_sql_query(sql, con, params=params).astype(DTYPES)
    finally:
        con.close()


def pivot(frame: pd.DataFrame, column: str = "metric") -> pd.DataFrame:
    """One row per value of the other key columns, one column per value of ``column`` (in order of
    appearance), holding ``value``; provenance columns are left out."""
    if column not in RESULT_KEY:
        raise ValueError(f"--pivot {column!r}: pivot one of {', '.join(RESULT_KEY)}")
    index = [c for c in RESULT_KEY if c != column]
    if frame.empty:
        return pd.DataFrame(columns=index)
    if column == "ratio":  # column names: ratio labels, `none` for the rows without a ratio
        frame = frame.assign(ratio=[_ratio_text(_cell(r)) for r in frame["ratio"]])
    wide = frame.pivot(index=index, columns=column, values="value")
    wide = wide[list(dict.fromkeys(frame[column]))].reset_index()
    wide.columns = [str(c) for c in wide.columns]
    return wide


def _cell(value: object) -> object:
    """A JSON / table value: None for NaN, Python scalars for numpy ones."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def records(frame: pd.DataFrame) -> list[dict]:
    """The rows as dicts of JSON-ready values (NULL / NaN as None)."""
    return [{str(k): _cell(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _text(value: object, column: str) -> str:
    value = _cell(value)
    if value is None:
        return "n/a"
    if column == "ratio":
        return paths.ratio_label(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def table_text(frame: pd.DataFrame) -> str:
    """Aligned plain text: one header line, one line per row; numbers right-aligned. Without
    provenance columns (they are in the csv / json output)."""
    columns = [c for c in frame.columns if c not in RESULT_COLUMNS or c in TABLE_COLUMNS]
    if frame.empty:
        return ""
    cells = [[_text(v, c) for c, v in zip(columns, row, strict=True)] for row in frame[columns].itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) or c == "value" for c in columns]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(columns)), *(line(r) for r in cells)]) + "\n"


def csv_text(frame: pd.DataFrame) -> str:
    """CSV with a header (the header alone when no row matches); NULL as an empty field."""
    return frame.to_csv(index=False, lineterminator="\n")


def json_text(frame: pd.DataFrame) -> str:
    """A JSON array of objects, one per row and line (``[]`` when no row matches); NULL as null."""
    rows = records(frame)
    if not rows:
        return "[]\n"
    return "[\n" + ",\n".join(json.dumps(row, allow_nan=False) for row in rows) + "\n]\n"


def render(frame: pd.DataFrame, fmt: str) -> str:
    if fmt == "table":
        return table_text(frame)
    if fmt == "csv":
        return csv_text(frame)
    if fmt == "json":
        return json_text(frame)
    raise ValueError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")


def export(frame: pd.DataFrame, target: str | Path) -> Path:
    """Write the rows to ``target`` (CSV, Parquet or JSON, from its suffix), atomically."""
    target = Path(target)
    suffix = target.suffix.lower()
    if suffix == ".parquet":
        write_parquet(target, frame)
    elif suffix in (".csv", ".json"):
        with atomic_open(target) as handle:
            handle.write(csv_text(frame) if suffix == ".csv" else json_text(frame))
    else:
        raise ValueError(f"--export {target}: the file name must end in {', '.join(EXPORT_SUFFIXES)}")
    return target
