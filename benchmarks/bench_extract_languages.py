"""Multi-language extraction throughput: tree-sitter parsing alone against full extraction.

    python benchmarks/bench_extract_languages.py [--languages go java ...] [--max-files N] [--repeat 1]

For each language whose source is on this machine (scripts/setup.sh installs them; R sources are
unpacked from Debian source packages, see tests/code/test_languages.py): files read, documented functions
found, pairs kept by the CodeSearchNet filters (before corpus-level de-duplication), the time to
parse the same files with tree-sitter and nothing else, the time of full extraction (parse, find
definitions and doc comments, clean documentation, dedent, remove comments, filter, near-duplicate
key of kept pairs, as ``csbench.datasets.local`` does per file), their ratio and functions/s.
One process; file contents are read before timing. Best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import sysconfig
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from csbench.code.extract import FilterSettings, extract_functions, normalized_code_key, rejection_reason
from csbench.code.parsing import parse

R_SOURCE = os.environ.get("CSBENCH_R_SOURCE", str(Path(__file__).resolve().parents[1] / ".sources" / "r-cran-src"))
SOURCES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "python": ([sysconfig.get_paths()["stdlib"]], (".py",)),
    "go": (["/usr/share/go-1.19/src"], (".go",)),
    "java": (["/usr/lib/jvm/openjdk-17/lib/src.zip"], (".java",)),
    "javascript": (["/usr/share/nodejs/lodash", "/usr/share/nodejs/express"], (".js",)),
    "php": (["/usr/share/php"], (".php",)),
    "ruby": (["/usr/lib/ruby/3.1.0"], (".rb",)),
    "r": ([R_SOURCE], (".R", ".r")),
}
SKIP_DIRS = {"testdata", "site-packages", "__pycache__", "node_modules"}


def first(items: list, limit: int | None) -> list:
    """The first ``limit`` items (all with None)."""
    return items[:limit]


def read_sources(
    language: str, max_files: int | None, pick: Callable[[list, int | None], list] = first
) -> list[tuple[str, bytes]]:
    """(path, bytes) of the language's source files (Java: members of src.zip), ``max_files`` of them
    chosen by ``pick`` from the sorted list (default: the first); R: only packages' R/ directories."""
    roots, suffixes = SOURCES[language]
    if roots[0].endswith(".zip"):
        if not Path(roots[0]).is_file():
            return []
        with zipfile.ZipFile(roots[0]) as archive:
            names = pick(sorted(n for n in archive.namelist() if n.endswith(suffixes)), max_files)
            return [(n, archive.read(n)) for n in names]
    found: list[Path] = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            if language == "r" and Path(dirpath).name != "R":
                continue
            found.extend(Path(dirpath) / f for f in filenames if f.endswith(suffixes))
    return [(str(p), p.read_bytes()) for p in pick(sorted(found), max_files)]


def parse_only(language: str, files: list[tuple[str, bytes]]) -> float:
    started = time.perf_counter()
    for _, data in files:
        parse(data, language)
    return time.perf_counter() - started


def full_extraction(language: str, files: list[tuple[str, bytes]]) -> tuple[float, int, int, int]:
    """(seconds, files extracted, documented functions, kept pairs); undecodable files are skipped
    and files with syntax errors too, as the corpus builder does (the check is timed)."""
    filters = FilterSettings()
    found = kept = extracted = 0
    started = time.perf_counter()
    for _, data in files:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if parse(data, language).root_node.has_error:
            continue
        extracted += 1
        for fn in extract_functions(text, language):
            found += 1
            if rejection_reason(fn, filters) is None:
                kept += 1
                normalized_code_key(fn.code_no_comment, language)
    return time.perf_counter() - started, extracted, found, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument("--max-files", type=int, default=None, help="first N files per language (sorted)")
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs")
    args = parser.parse_args()
    header = (
        f"{'language':<11}{'files':>7}{'parsed':>8}{'documented':>12}{'kept':>8}"
        f"{'parse s':>9}{'extract s':>11}{'x parse':>9}{'fn/s':>9}{'files/s':>9}"
    )
    print(header)
    print("-" * len(header))
    totals = [0, 0, 0, 0, 0.0, 0.0]
    for language in args.languages:
        files = read_sources(language, args.max_files)
        if not files:
            print(f"{language:<11}  (no source at {', '.join(SOURCES[language][0])})")
            continue
        parse_s = min(parse_only(language, files) for _ in range(args.repeat))
        runs = [full_extraction(language, files) for _ in range(args.repeat)]
        extract_s = min(r[0] for r in runs)
        _, parsed, found, kept = runs[0]
        print(
            f"{language:<11}{len(files):>7}{parsed:>8}{found:>12}{kept:>8}{parse_s:>9.2f}{extract_s:>11.2f}"
            f"{extract_s / parse_s:>9.1f}{found / extract_s:>9.0f}{len(files) / extract_s:>9.0f}"
        )
        for i, value in enumerate((len(files), parsed, found, kept, parse_s, extract_s)):
            totals[i] += value
    files_n, parsed, found, kept, parse_s, extract_s = totals
    if extract_s:
        print("-" * len(header))
        print(
            f"{'all':<11}{files_n:>7}{parsed:>8}{found:>12}{kept:>8}{parse_s:>9.2f}{extract_s:>11.2f}"
            f"{extract_s / parse_s:>9.1f}{found / extract_s:>9.0f}{files_n / extract_s:>9.0f}"
        )


if __name__ == "__main__":
    main()
