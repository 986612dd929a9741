"""Corpora extracted from source code on this machine (SPEC "Building a corpus from source")."""

from __future__ import annotations

import functools
import hashlib
import logging
import multiprocessing
import os
import sys
import sysconfig
import zipfile
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
from csbench.code.parsing import parse
from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, SPLITS, DatasetSpec

log = logging.getLogger(__name__)

LOCAL_SOURCE_KIND = "local-source"
SUFFIXES = {
    "python": (".py",),
    "go": (".go",),
    "java": (".java",),
    "javascript": (".js",),
    "php": (".php",),
    "ruby": (".rb",),
    "r": (".R", ".r"),
}
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


def source_files(
    root: Path,
    language: str,
    exclude_dirs: list[str],
    max_files: int | None,
    include_dirs: list[str] | None = None,
) -> list[Path]:
    """Source files below ``root`` (only below its sub-directories ``include_dirs`` if given), in
    sorted order, skipping directories named in ``exclude_dirs`` at any depth."""
    suffixes = SUFFIXES[language]
    excluded = set(exclude_dirs)
    if root.is_file():
        return _zip_members(root, suffixes, excluded, include_dirs or [], max_files)
    starts = [root / d for d in include_dirs] if include_dirs else [root]
    missing = [str(p) for p in starts if not p.is_dir()]
    if missing:
        raise SourceError(f"include_dirs not found below {str(root)!r}: {', '.join(missing)}")
    found: list[Path] = []
    for start in starts:
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if d not in excluded)
            found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(suffixes))
    found.sort()
    return found[:max_files] if max_files else found


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


def read_source(file: Path, root: Path) -> bytes:
    """Bytes of a source file, or of a member when ``root`` is a zip archive."""
    if root.is_file():
        return _open_zip(root, os.getpid()).read(file.relative_to(root).as_posix())
    return file.read_bytes()


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
    status: str  # "ok", "undecodable", "unparsable"
    digest: bytes
    functions: tuple[tuple[Function, str | None, str], ...] = ()  # (function, rejection, dedup key)


def _extract_file(job: tuple[Path, Path, str, str, FilterSettings]) -> _FileResult:
    """Extract and filter the documented functions of one file (runs in a worker process)."""
    file, root, rel, language, filters = job
    data = read_source(file, root)
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
) -> tuple[pd.DataFrame, dict]:
    """Extract, filter, de-duplicate and split a corpus. Returns the records and the card data.

    Files are processed in sorted order and duplicates resolved in that order (the first copy is
    kept), so the result does not depend on ``workers``.
    """
    language = options["language"]
    root = resolve_source(options["source"])
    files = source_files(
        root,
        language,
        list(options.get("exclude_dirs") or []),
        options.get("max_files"),
        list(options.get("include_dirs") or []),
    )
    if not files:
        raise SourceError(f"no {language} files found below {str(root)!r}")
    repo, url_prefix = source_identity(root, options["source"])
    skipped: dict[str, list[str]] = {"undecodable": [], "unparsable": []}
    counts: Counter[str] = Counter()
    rows = []
    seen_keys: set[str] = set()
    content = hashlib.sha256()
    jobs = [(file, root, file.relative_to(root).as_posix(), language, filters) for file in files]
    for result in _map_files(jobs, workers, f"extract {name}", progress):
        content.update(result.digest)
        if result.status != "ok":
            skipped[result.status].append(result.rel)
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
            rows.append(
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
    frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
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
        "splits": split_statistics(frame),
    }
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


def card_markdown(card: dict) -> str:
    """A human-readable dataset card."""
    lines = [
        f"# Dataset card: {card['name']}",
        "",
        f"- kind: {card['kind']}; language: {card['language']}",
        f"- source: `{card['source']}` (repo `{card['repo']}`, content SHA-256 `{card['source_sha256'][:16]}…`)",
        f"- files: {card['files']['found']} found, {card['files']['undecodable']} skipped as undecodable, "
        f"{card['files']['unparsable']} skipped as unparsable",
        "",
        "| split | pairs | query tokens (mean ± std) | code subtokens (mean ± std) |",
        "|---|---:|---:|---:|",
    ]
    for split, s in card["splits"].items():
        q, c = s["query_tokens"], s["code_tokens"]
        lines.append(f"| {split} | {s['pairs']} | {q['mean']} ± {q['std']} | {c['mean']} ± {c['std']} |")
    lines += ["", "Extraction (CodeSearchNet filters):", ""]
    lines += [f"- {key}: {value}" for key, value in card["extraction"].items()]
    for kind, files in card["skipped_files"].items():
        if files:
            lines += ["", f"Skipped ({kind}): " + ", ".join(f"`{f}`" for f in files[:50])]
            if len(files) > 50:
                lines[-1] += f" and {len(files) - 50} more"
    return "\n".join(lines) + "\n"
