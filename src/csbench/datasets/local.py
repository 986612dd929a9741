"""Corpora extracted from source code on this machine (SPEC "Building a corpus from source")."""

from __future__ import annotations

import errno
import functools
import hashlib
import logging
import multiprocessing
import os
import stat
import sys
import sysconfig
import zipfile
import zlib
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from csbench.code.extract import (
    FilterSettings,
    Function,
    extract_functions,
    normalized_code_key,
    rejection_reason,
)
from csbench.code.languages import all_languages
from csbench.code.parsing import parse
from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, SPLITS, DatasetSpec

log = logging.getLogger(__name__)

LOCAL_SOURCE_KIND = "local-source"
# language -> the endings of its source files (``Language.extensions``)
SUFFIXES = {name: spec.extensions for name, spec in all_languages().items()}
STDLIB = "stdlib"
SITE_PACKAGES = "site-packages"

PYTHON_STDLIB = DatasetSpec(
    name="python-stdlib",
    kind=LOCAL_SOURCE_KIND,
    languages=("python",),
    description="Documented functions of the running Python interpreter's standard library.",
    licence="PSF-2.0 (Python Software Foundation License)",
    citation="Python Software Foundation, CPython standard library",
    defaults={
        "language": "python",
        "source": STDLIB,
        "exclude_dirs": ["site-packages", "test", "tests", "idle_test", "__pycache__"],
        "max_files": None,
    },
)


# Third-party packages pinned by requirements.lock: a larger corpus (the stdlib's test split is
# under 1,000 functions, too small for csn-1000). Well-documented scientific Python packages.
PYTHON_PACKAGES = DatasetSpec(
    name="python-packages",
    kind=LOCAL_SOURCE_KIND,
    languages=("python",),
    description="Documented functions of pinned scientific Python packages installed with csbench.",
    licence=(
        "per package: BSD-3-Clause (numpy, pandas, scipy, networkx, sympy), Apache-2.0 (nltk), PSF-based (matplotlib)"
    ),
    citation="the packages' own citations; versions in the dataset card",
    defaults={
        "language": "python",
        "source": SITE_PACKAGES,
        "include_dirs": ["numpy", "pandas", "scipy", "networkx", "nltk", "sympy", "matplotlib"],
        "exclude_dirs": ["tests", "test", "testing", "_vendor", "vendored", "__pycache__"],
        "max_files": None,
    },
)


def _debian_corpus(
    name: str, language: str, source: str, package: str, description: str, licence: str, **options: object
) -> DatasetSpec:
    return DatasetSpec(
        name=name,
        kind=LOCAL_SOURCE_KIND,
        languages=(language,),
        description=description,
        licence=licence,
        setup_hint=f"install the Debian package {package} (scripts/setup.sh does when apt is usable)",
        defaults={
            "language": language,
            "source": source,
            "exclude_dirs": ["testdata", "vendor", "test", "tests", "Tests", "__tests__", "node_modules"],
            "max_files": None,
            **options,
        },
    )


# Real code in six more languages from Debian packages (issue #3): workflow/configs/local-7lang.yaml.
DEBIAN_CORPORA = (
    _debian_corpus(
        "go-stdlib",
        "go",
        "/usr/share/go-1.19/src",
        "golang-1.19-src",
        "Documented functions and methods of the Go 1.19 standard library.",
        "BSD-3-Clause",
    ),
    _debian_corpus(
        "java-jdk",
        "java",
        "/usr/lib/jvm/openjdk-17/lib/src.zip",
        "openjdk-17-source",
        "Javadoc-documented methods of OpenJDK 17's java.base module (src.zip).",
        "GPL-2.0 with Classpath Exception",
        include_dirs=["java.base"],
    ),
    _debian_corpus(
        "ruby-stdlib",
        "ruby",
        "/usr/lib/ruby/3.1.0",
        "libruby3.1",
        "Documented methods of the Ruby 3.1 standard library.",
        "Ruby or BSD-2-Clause",
    ),
    _debian_corpus(
        "php-libs",
        "php",
        "/usr/share/php",
        "php-symfony-console php-monolog php-guzzlehttp-psr7 php-league-commonmark",
        "PHPDoc-documented methods of Symfony Console, Monolog, Guzzle PSR-7 and League CommonMark.",
        "MIT",
    ),
    _debian_corpus(
        "javascript-node",
        "javascript",
        "/usr/share/nodejs",
        "node-lodash node-express",
        "JSDoc-documented functions of lodash and express.",
        "MIT",
        include_dirs=["lodash", "express"],
    ),
)
R_CRAN = DatasetSpec(
    name="r-cran",
    kind=LOCAL_SOURCE_KIND,
    languages=("r",),
    description="Roxygen-documented functions of the CRAN packages glue, stringr and purrr (Debian's sources).",
    licence="MIT",
    setup_hint="run scripts/setup.sh: it fetches the CRAN sources of r-cran-glue, r-cran-stringr and "
    "r-cran-purrr (`apt-get source` with a private sources list) into .sources/r-cran-src",
    defaults={
        "language": "r",
        "source": ".sources/r-cran-src",
        "exclude_dirs": ["tests", "vignettes", "inst", "data-raw", "man", "revdep"],
        "max_files": None,
    },
)


class SourceError(RuntimeError):
    """The source directory of a local corpus is missing or unreadable."""


@dataclass(frozen=True)
class SplitSettings:
    train: int = 80
    valid: int = 10
    test: int = 10


def resolve_source(source: str) -> Path:
    """``stdlib``: the running interpreter's standard library; ``site-packages``: the packages
    installed in the running environment (pinned by requirements.lock); anything else is a path."""
    if source == STDLIB:
        path = Path(sysconfig.get_paths()["stdlib"])
    elif source == SITE_PACKAGES:
        path = Path(sysconfig.get_paths()["purelib"])
    else:
        path = Path(source).expanduser()
    if path.is_file() and zipfile.is_zipfile(path):
        if not os.access(path, os.R_OK):
            raise SourceError(f"source archive {str(path)!r} is not readable")
        return path
    if not path.is_dir():
        raise SourceError(f"source directory {str(path)!r} does not exist or is not a directory (or a zip archive)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SourceError(f"source directory {str(path)!r} is not readable")
    return path


# Why a file or directory of a local corpus's source was left out: the card counts and lists each kind
# that occurs (``undecodable`` and ``unparsable`` always), and ``build_local_corpus`` logs one line.
SKIP_KINDS: dict[str, str] = {
    "undecodable": "not UTF-8",
    "unparsable": "does not parse",
    "unreadable_directory": "a directory that cannot be listed (its files are not in the corpus)",
    "symlinked_directory": "a symbolic link to a directory, not followed (its files are not in the corpus)",
    "unreadable_file": "a source file that cannot be read",
    "not_a_file": "a source file name on something that is not a regular file (FIFO, socket, device)",
    "dangling_symlink": "a symbolic link to nothing",
    "symlink_loop": "a loop of symbolic links",
}
SKIP_KINDS_ALWAYS = ("undecodable", "unparsable")  # in every card, 0 included (as before issue #22)
# Kinds where something on disk could not be read at all (the console summary is a warning then).
READ_FAILURES = tuple(kind for kind in SKIP_KINDS if kind not in SKIP_KINDS_ALWAYS)


@dataclass
class SourceListing:
    """The source files of a walk, in sorted order, and what the walk could not enter: skipped kind
    -> paths relative to the root, and the error of each (``SKIP_KINDS``)."""

    files: list[Path]
    skipped: dict[str, list[str]]
    errors: dict[str, str]


def source_files(
    root: Path,
    language: str,
    exclude_dirs: list[str],
    max_files: int | None,
    include_dirs: list[str] | None = None,
) -> SourceListing:
    """Source files below ``root`` (only below its sub-directories ``include_dirs`` if given), in
    sorted order, skipping directories named in ``exclude_dirs`` at any depth. A directory that cannot
    be listed, and a symbolic link to a directory (not followed: no loops, no file twice), is
    recorded in the listing's ``skipped``, never left out silently."""
    suffixes = SUFFIXES[language]
    excluded = set(exclude_dirs)
    if root.is_file():
        return SourceListing(_zip_members(root, suffixes, excluded, include_dirs or [], max_files), {}, {})
    starts = [root / d for d in include_dirs] if include_dirs else [root]
    missing = [str(p) for p in starts if not p.is_dir()]
    if missing:
        raise SourceError(f"include_dirs not found below {str(root)!r}: {', '.join(missing)}")
    found: list[Path] = []
    skipped: dict[str, list[str]] = {}
    errors: dict[str, str] = {}

    def skip(kind: str, path: str | os.PathLike[str], error: str | None = None) -> None:
        rel = _relative(Path(path), root)
        skipped.setdefault(kind, []).append(rel)
        if error:
            errors[rel] = error

    def unlistable(err: OSError) -> None:
        skip("unreadable_directory", err.filename, err.strerror or str(err))

    for start in starts:
        for dirpath, dirnames, filenames in os.walk(start, onerror=unlistable):
            kept = []
            for name in sorted(d for d in dirnames if d not in excluded):
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    skip("symlinked_directory", path, f"-> {os.readlink(path)}")
                else:
                    kept.append(name)
            dirnames[:] = kept
            found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(suffixes))
    found.sort()
    for paths in skipped.values():
        paths.sort()
    return SourceListing(found[:max_files] if max_files else found, skipped, errors)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _zip_members(
    archive: Path, suffixes: tuple[str, ...], excluded: set[str], include_dirs: list[str], max_files: int | None
) -> list[Path]:
    """Members of a zip archive (as archive/member paths), filtered like directory walks."""
    with zipfile.ZipFile(archive) as handle:
        names = sorted(n for n in handle.namelist() if n.endswith(suffixes) and not n.endswith("/"))
    kept = []
    for name in names:
        parts = name.split("/")
        if include_dirs and not any(name.startswith(d.rstrip("/") + "/") for d in include_dirs):
            continue
        if excluded.intersection(parts[:-1]):
            continue
        kept.append(archive / name)
    if include_dirs and not kept:
        raise SourceError(f"include_dirs {include_dirs} match no {'/'.join(suffixes)} member of {str(archive)!r}")
    return kept[:max_files] if max_files else kept


@functools.cache
def _open_zip(archive: Path, pid: int) -> zipfile.ZipFile:
    # keyed by process: a handle inherited through fork shares its file offset with the parent
    return zipfile.ZipFile(archive)


class NotRegularFileError(OSError):
    """A source file name on a FIFO, socket or device: reading it could block forever."""


def read_source(file: Path, root: Path) -> bytes:
    """Bytes of a source file, or of a member when ``root`` is a zip archive. Raises OSError when the
    file cannot be read (``NotRegularFileError`` for a FIFO, socket or device, never read)."""
    if root.is_file():
        return _open_zip(root, os.getpid()).read(file.relative_to(root).as_posix())
    mode = os.stat(file).st_mode  # follows links: a dangling one or a loop raises here
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(errno.EINVAL, "not a regular file", str(file))
    return file.read_bytes()


def _read_failure(file: Path, err: Exception) -> tuple[str, str]:
    """(skip kind, error message) of a source file that could not be read."""
    if isinstance(err, NotRegularFileError):
        return "not_a_file", err.strerror or "not a regular file"
    if isinstance(err, OSError):
        message = err.strerror or str(err)
        if err.errno == errno.ELOOP:
            return "symlink_loop", message
        if err.errno == errno.ENOENT and os.path.islink(file):
            return "dangling_symlink", f"-> {os.readlink(file)}"
        return "unreadable_file", message
    return "unreadable_file", f"{type(err).__name__}: {err}"  # a damaged zip member


def split_of(path: str, settings: SplitSettings) -> str:
    """Deterministic split by file: SHA-256 of the relative path, bucketed into 100 slots."""
    bucket = int(hashlib.sha256(path.encode("utf-8")).hexdigest(), 16) % 100
    if bucket < settings.train:
        return "train"
    if bucket < settings.train + settings.valid:
        return "valid"
    return "test"


def source_identity(root: Path, source: str) -> tuple[str, str]:
    """(repo name, URL prefix) for records of a local corpus."""
    if source == STDLIB:
        version = ".".join(map(str, sys.version_info[:3]))
        return f"python/cpython@v{version}", f"https://github.com/python/cpython/blob/v{version}/Lib/"
    if source == SITE_PACKAGES:
        return "site-packages", "file:///site-packages/"  # machine-independent; versions are in the card
    if root.is_file():  # a zip archive: members are addressed inside it
        return root.name, root.resolve().as_uri() + "!/"
    return root.name, root.resolve().as_uri() + "/"


@dataclass(frozen=True)
class _FileResult:
    rel: str
    status: str  # "ok", or the kind of skip (SKIP_KINDS)
    digest: bytes
    functions: tuple[tuple[Function, str | None, str], ...] = ()  # (function, rejection, dedup key)
    error: str = ""  # why the file could not be read


def _extract_file(job: tuple[Path, Path, str, str, FilterSettings]) -> _FileResult:
    """Extract and filter the documented functions of one file (runs in a worker process)."""
    file, root, rel, language, filters = job
    try:
        data = read_source(file, root)
    except (OSError, zipfile.BadZipFile, zlib.error) as err:
        kind, message = _read_failure(file, err)
        return _FileResult(rel, kind, hashlib.sha256(rel.encode() + b"\0" + kind.encode()).digest(), error=message)
    digest = hashlib.sha256(rel.encode() + b"\0" + data).digest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _FileResult(rel, "undecodable", digest)
    if parse(data, language).root_node.has_error:
        return _FileResult(rel, "unparsable", digest)
    found = []
    for fn in extract_functions(text, language):
        reason = rejection_reason(fn, filters)
        key = "" if reason else hashlib.sha1(normalized_code_key(fn.code_no_comment, language).encode()).hexdigest()
        found.append((fn, reason, key))
    return _FileResult(rel, "ok", digest, tuple(found))


def _map_files(jobs: list, workers: int, desc: str, progress: bool):
    """Results of ``_extract_file`` in input order, over ``workers`` processes."""
    bar = tqdm(total=len(jobs), desc=desc, unit="file", disable=not progress, mininterval=2)
    if workers <= 1:
        for job in jobs:
            yield _extract_file(job)
            bar.update()
    else:
        # fork: workers inherit the loaded parsers and need no importable __main__ (unlike spawn)
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            for result in pool.map(_extract_file, jobs, chunksize=16):
                yield result
                bar.update()
    bar.close()


def build_local_corpus(
    name: str,
    options: dict,
    filters: FilterSettings,
    splits: SplitSettings,
    progress: bool = True,
    workers: int = 1,
    out: Path | None = None,
    batch_rows: int = 20_000,
) -> tuple[pd.DataFrame | None, dict]:
    """Extract, filter, de-duplicate and split a corpus. Returns the records and the card data.

    Files are processed in sorted order and duplicates resolved in that order (the first copy is
    kept), so the result does not depend on ``workers``.

    With ``out`` (a folder), the records are not returned (None) but streamed into its split files
    (``<split>.parquet`` for every split of ``csbench.paths.ALL_SPLITS``) in row groups of
    ``batch_rows``, so memory is bounded by ``batch_rows`` rather than by the corpus (what grows with
    it: the de-duplication keys and two token counts per function); the card's splits then also carry
    their ``code_layout``. The files hold the same table as ``write_parquet`` of each split of the
    returned records (byte for byte where a split fits one row group); a split is renamed into place
    only when whole, and only once every record has been read.
    """
    language = options["language"]
    root = resolve_source(options["source"])
    listing = source_files(
        root,
        language,
        list(options.get("exclude_dirs") or []),
        options.get("max_files"),
        list(options.get("include_dirs") or []),
    )
    files = listing.files
    if not files:
        unread = "".join(f"; {len(v)} {k.replace('_', ' ')}(s) skipped" for k, v in listing.skipped.items())
        raise SourceError(f"no {language} files found below {str(root)!r}{unread}")
    repo, url_prefix = source_identity(root, options["source"])
    skipped: dict[str, list[str]] = {"undecodable": [], "unparsable": [], **listing.skipped}
    errors = dict(listing.errors)
    counts: Counter[str] = Counter()
    sink = _SplitFiles(out, batch_rows) if out is not None else None
    rows: list[dict] = []
    seen_keys: set[str] = set()
    content = hashlib.sha256()
    jobs = [(file, root, file.relative_to(root).as_posix(), language, filters) for file in files]
    add = sink.add if sink is not None else rows.append
    try:
        for result in _map_files(jobs, workers, f"extract {name}", progress):
            content.update(result.digest)
            if result.status != "ok":
                skipped.setdefault(result.status, []).append(result.rel)
                if result.error:
                    errors[result.rel] = result.error
                continue
            split = split_of(result.rel, splits)
            for fn, reason, key in result.functions:
                counts["documented_functions"] += 1
                if reason:
                    counts[f"dropped_{reason}"] += 1
                    continue
                if key in seen_keys:
                    counts["dropped_duplicate"] += 1
                    continue
                seen_keys.add(key)
                add(
                    {
                        "id": f"{name}/{result.rel}#L{fn.start_line}",
                        "language": language,
                        "query": fn.query,
                        "code": fn.code,
                        "func_name": fn.func_name,
                        "repo": repo,
                        "path": result.rel,
                        "url": f"{url_prefix}{result.rel}#L{fn.start_line}-L{fn.end_line}",
                        "split": split,
                        "docstring": fn.docstring,
                    }
                )
        if sink is not None:
            frame, statistics = None, sink.close()
        else:
            frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
            statistics = split_statistics(frame)
    except BaseException:
        if sink is not None:
            sink.abort()
        raise
    # every kind in SKIP_KINDS order; the two of every corpus always, the others where they occur
    skipped = {k: skipped[k] for k in SKIP_KINDS if k in skipped and (skipped[k] or k in SKIP_KINDS_ALWAYS)}
    card = {
        "name": name,
        "kind": LOCAL_SOURCE_KIND,
        "language": language,
        "source": str(root),
        "source_sha256": content.hexdigest(),
        "repo": repo,
        "files": {"found": len(files), **{k: len(v) for k, v in skipped.items()}},
        "skipped_files": skipped,
        "extraction": dict(sorted(counts.items())),
        "splits": statistics,
    }
    if errors:
        card["skip_errors"] = {rel: errors[rel] for kind in skipped for rel in skipped[kind] if rel in errors}
    log_skipped(name, card)
    if options["source"] == SITE_PACKAGES:
        card["package_versions"] = {d: _distribution_version(d) for d in options.get("include_dirs") or []}
    return frame, card


def _distribution_version(package: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _mean_std(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": float("nan"), "std": float("nan")}
    arr = np.asarray(values, dtype=float)
    return {"mean": round(float(arr.mean()), 2), "std": round(float(arr.std()), 2)}


class _SplitFiles:
    """The split files of a local corpus written as its records come (``build_local_corpus(out=)``):
    per split, a Parquet file beside its final name filled in row groups of ``batch_rows`` records
    (``csbench.io.ParquetStream``, all splits under the first batch's schema), each made as
    ``write_parquet`` makes a whole split's (``DataFrame.to_parquet(index=False)``:
    ``pa.Table.from_pandas``, snappy), and the split's statistics as ``split_statistics`` and
    ``code_layout_of`` compute them. ``close`` finishes and renames the files into place split by
    split; ``abort`` (on any error) removes those not yet in place. A full disk raises
    ``DiskFullError`` naming the split."""

    def __init__(self, out: Path, batch_rows: int) -> None:
        from csbench.datasets.prepare import LayoutStats
        from csbench.paths import ALL_SPLITS

        self.out, self.batch_rows = out, max(1, batch_rows)
        self.buffers: dict[str, list[dict]] = {s: [] for s in ALL_SPLITS}
        self.writers: dict = {}  # split -> its ParquetStream, until renamed into place
        self.schema = None  # of the first batch: every later batch and an empty split take it
        self.dtypes = None
        # per split: the query and code token counts (split_statistics) and the code layout
        self.query_tokens: dict[str, list[int]] = {s: [] for s in SPLITS}
        self.code_tokens: dict[str, list[int]] = {s: [] for s in SPLITS}
        self.layouts = {s: LayoutStats() for s in SPLITS}

    def add(self, row: dict) -> None:
        split = row["split"]
        self.buffers[split].append(row)
        self.query_tokens[split].append(len(docstring_tokens(row["query"])))
        self.code_tokens[split].append(len(subtokens(row["code"])))
        self.layouts[split].add(row["language"], row["code"])
        if len(self.buffers[split]) >= self.batch_rows:
            self._write(split, pd.DataFrame(self.buffers[split], columns=list(RECORD_COLUMNS)))
            self.buffers[split].clear()

    def _write(self, split: str, frame: pd.DataFrame) -> None:
        from csbench.io import DiskFullError, ParquetStream

        if self.schema is None:
            self._type(frame)
        writer = self.writers.get(split)
        if writer is None:
            self.out.mkdir(parents=True, exist_ok=True)
            writer = self.writers[split] = ParquetStream(self.out / f"{split}.parquet", schema=self.schema)
        try:
            writer.write(frame)
        except DiskFullError:
            self.abort()
            raise

    def _type(self, frame: pd.DataFrame) -> None:
        """Take the schema and dtypes of the records from this frame of them."""
        import pyarrow as pa

        self.schema, self.dtypes = pa.Table.from_pandas(frame, preserve_index=False).schema, frame.dtypes

    def close(self) -> dict[str, dict]:
        """Write what is left and rename the files into place; the splits' statistics (the card's)."""
        if self.schema is None:  # no batch written yet: the records' types, before an empty split is written
            rows = next((rows for rows in self.buffers.values() if rows), [])
            self._type(pd.DataFrame(rows, columns=list(RECORD_COLUMNS)))
        for split, rows in self.buffers.items():  # split by split, as write_parquet of each split did
            if rows or split not in self.writers:  # an empty split: typed as a filtered frame of the records
                frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
                self._write(split, frame if rows or self.dtypes is None else frame.astype(self.dtypes))
                rows.clear()
            self.writers.pop(split).close()
        return {
            split: {
                "pairs": len(self.code_tokens[split]),
                "query_tokens": _mean_std(self.query_tokens[split]),
                "code_tokens": _mean_std(self.code_tokens[split]),
                "code_layout": self.layouts[split].as_dict(),
            }
            for split in SPLITS
        }

    def abort(self) -> None:
        """Close and remove every file not yet renamed into place."""
        for writer in self.writers.values():
            writer.abort()
        self.writers.clear()


def split_statistics(frame: pd.DataFrame) -> dict[str, dict]:
    """Pairs per split and query / code length in tokens (mean ± std), as COBE Table I."""
    stats = {}
    for split in SPLITS:
        part = frame[frame["split"] == split]
        stats[split] = {
            "pairs": len(part),
            "query_tokens": _mean_std([len(docstring_tokens(q)) for q in part["query"]]),
            "code_tokens": _mean_std([len(subtokens(c)) for c in part["code"]]),
        }
    return stats


def skipped_summary(card: dict, examples: int = 2) -> str:
    """One line: how many files a local corpus's walk found and what it skipped, by kind, with the
    first paths of each (and why they could not be read); "" when nothing was skipped."""
    skipped = {kind: paths for kind, paths in (card.get("skipped_files") or {}).items() if paths}
    if not skipped:
        return ""
    errors = card.get("skip_errors") or {}
    parts = []
    for kind, paths in skipped.items():
        shown = ", ".join(f"{p} ({errors[p]})" if p in errors else p for p in paths[:examples])
        more = f", and {len(paths) - examples} more" if len(paths) > examples else ""
        parts.append(f"{len(paths)} {kind.replace('_', ' ')}: {shown}{more}")
    total = sum(len(paths) for paths in skipped.values())
    return f"{card['files']['found']} source files found, {total} skipped: " + "; ".join(parts)


def log_skipped(name: str, card: dict) -> None:
    """The console's one line about what a local corpus skipped: a warning when something on disk
    could not be read (it is missing from the corpus), else information."""
    line = skipped_summary(card)
    if line:
        unread = any(card["skipped_files"].get(kind) for kind in READ_FAILURES)
        log.log(logging.WARNING if unread else logging.INFO, "%s: %s (listed in the dataset card)", name, line)


def skipped_markdown(card: dict, limit: int = 50) -> list[str]:
    """The card's lines about skipped files (each led by a blank line): per kind, the first ``limit``
    paths, each with its error where it could not be read, and what the kinds that occur mean when
    something could not be read; nothing when no file was skipped."""
    errors = card.get("skip_errors") or {}
    lines = []
    skipped = {kind: files for kind, files in (card.get("skipped_files") or {}).items() if files}
    for kind, files in skipped.items():
        shown = ", ".join(f"`{f}` ({errors[f]})" if f in errors else f"`{f}`" for f in files[:limit])
        lines += ["", f"Skipped ({kind}): {shown}"]
        if len(files) > limit:
            lines[-1] += f" and {len(files) - limit} more"
    unread = [f"{kind}: {SKIP_KINDS[kind]}" for kind in skipped if kind in READ_FAILURES]
    if unread:
        lines += ["", "Not read: " + "; ".join(unread) + "."]
    return lines


def files_line(card: dict) -> str:
    """The card's line about the files of a local corpus: found, and skipped per kind."""
    files = card["files"]
    skipped = "".join(f", {n} skipped as {kind.replace('_', ' ')}" for kind, n in files.items() if kind != "found")
    return f"- files: {files['found']} found{skipped}"


def card_markdown(card: dict) -> str:
    """A human-readable dataset card."""
    lines = [
        f"# Dataset card: {card['name']}",
        "",
        f"- kind: {card['kind']}; language: {card['language']}",
        f"- source: `{card['source']}` (repo `{card['repo']}`, content SHA-256 `{card['source_sha256'][:16]}…`)",
        files_line(card),
        "",
        "| split | pairs | query tokens (mean ± std) | code subtokens (mean ± std) |",
        "|---|---:|---:|---:|",
    ]
    for split, s in card["splits"].items():
        q, c = s["query_tokens"], s["code_tokens"]
        lines.append(f"| {split} | {s['pairs']} | {q['mean']} ± {q['std']} | {c['mean']} ± {c['std']} |")
    lines += ["", "Extraction (CodeSearchNet filters):", ""]
    lines += [f"- {key}: {value}" for key, value in card["extraction"].items()]
    lines += skipped_markdown(card)
    return "\n".join(lines) + "\n"
