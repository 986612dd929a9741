"""Corpora extracted from source code on this machine (SPEC "Building a corpus from source")."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import sysconfig
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from csbench.code.extract import FilterSettings, normalized_code_key, python_functions, rejection_reason
from csbench.code.tokens import docstring_tokens, subtokens
from csbench.datasets.base import RECORD_COLUMNS, SPLITS, DatasetSpec

log = logging.getLogger(__name__)

LOCAL_SOURCE_KIND = "local-source"
SUFFIXES = {"python": (".py",)}
STDLIB = "stdlib"

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


class SourceError(RuntimeError):
    """The source directory of a local corpus is missing or unreadable."""


@dataclass(frozen=True)
class SplitSettings:
    train: int = 80
    valid: int = 10
    test: int = 10


def resolve_source(source: str) -> Path:
    """``stdlib`` means the standard library of the running interpreter; anything else is a path."""
    path = Path(sysconfig.get_paths()["stdlib"]) if source == STDLIB else Path(source).expanduser()
    if not path.is_dir():
        raise SourceError(f"source directory {str(path)!r} does not exist or is not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SourceError(f"source directory {str(path)!r} is not readable")
    return path


def source_files(root: Path, language: str, exclude_dirs: list[str], max_files: int | None) -> list[Path]:
    """Source files below ``root`` in sorted order, skipping excluded directory names."""
    suffixes = SUFFIXES[language]
    excluded = set(exclude_dirs)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in excluded)
        found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(suffixes))
    found.sort()
    return found[:max_files] if max_files else found


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
    return root.name, root.resolve().as_uri() + "/"


def build_local_corpus(
    name: str, options: dict, filters: FilterSettings, splits: SplitSettings, progress: bool = True
) -> tuple[pd.DataFrame, dict]:
    """Extract, filter, de-duplicate and split a corpus. Returns the records and the card data."""
    language = options["language"]
    root = resolve_source(options["source"])
    files = source_files(root, language, list(options.get("exclude_dirs") or []), options.get("max_files"))
    if not files:
        raise SourceError(f"no {language} files found below {str(root)!r}")
    repo, url_prefix = source_identity(root, options["source"])
    skipped: dict[str, list[str]] = {"undecodable": [], "unparsable": []}
    counts: Counter[str] = Counter()
    rows = []
    seen_keys: set[str] = set()
    content = hashlib.sha256()
    for file in tqdm(files, desc=f"extract {name}", unit="file", disable=not progress, mininterval=2):
        rel = file.relative_to(root).as_posix()
        data = file.read_bytes()
        content.update(rel.encode() + b"\0" + data + b"\0")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            skipped["undecodable"].append(rel)
            continue
        from csbench.code.parsing import parse

        if parse(data, language).root_node.has_error:
            skipped["unparsable"].append(rel)
            continue
        split = split_of(rel, splits)
        for fn in python_functions(text):
            counts["documented_functions"] += 1
            reason = rejection_reason(fn, filters)
            if reason:
                counts[f"dropped_{reason}"] += 1
                continue
            key = hashlib.sha1(normalized_code_key(fn.code_no_comment, language).encode()).hexdigest()
            if key in seen_keys:
                counts["dropped_duplicate"] += 1
                continue
            seen_keys.add(key)
            rows.append(
                {
                    "id": f"{name}/{rel}#L{fn.start_line}",
                    "language": language,
                    "query": fn.query,
                    "code": fn.code,
                    "func_name": fn.func_name,
                    "repo": repo,
                    "path": rel,
                    "url": f"{url_prefix}{rel}#L{fn.start_line}-L{fn.end_line}",
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
    return frame, card


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
