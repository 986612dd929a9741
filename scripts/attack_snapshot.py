"""Every code attack's output on real functions, saved, and two saves compared snippet by snippet.

    python scripts/attack_snapshot.py save OUT.json.gz [--functions 2000] [--attacks ...]
    python scripts/attack_snapshot.py compare BEFORE.json.gz AFTER.json.gz [--examples 3]

``save`` runs each attack through ``csbench.attacks.run_attack`` (one process, ``workers=1``) on every
set of real functions this machine has: the languages' installed sources (``scripts/setup.sh``; the
same functions as ``benchmarks/bench_extract_languages.py`` extracts) and, with ``../shared/data``
beside the project, the released functions there (CodeSearchNet Python / Ruby, GeCS's samples of five
languages, StatCodesearch's flattened R, TL-CodeSum's tokenised Java, AdvTest's train records). It
writes, per (set, attack), the attacked code of every snippet and the attack's report.

``compare`` counts, per attack and set (language), the snippets whose attacked code differs between
two saves, and prints a few before / after examples of each. Use it to show that a change to the
attacks altered only the snippets a fixed bug touched: save on the old commit (e.g. a ``git worktree``
with ``PYTHONPATH=<worktree>/src``), save on the new one, compare.
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))
from attack_specs import ADVTEST_NORMALIZE, ADVTEST_NORMALIZE_SCOPED, RENAMINGS  # noqa: E402

ATTACKS = [
    "no_comment",
    *RENAMINGS,
    ADVTEST_NORMALIZE,  # python only since #21 (CodeXGLUE's token rules): skipped for the other languages
    ADVTEST_NORMALIZE_SCOPED,  # the scope-aware normalisation that was advtest_normalize before #21
]


def _jsonl(path: Path, field: str) -> list[str]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)[field] for line in lines if line.strip()]


def shared_sets() -> dict[str, tuple[str, list[str]]]:
    """Released functions of ``../shared/data`` (empty without it): set -> (language, codes)."""
    if not SHARED.is_dir():
        return {}
    sets: dict[str, tuple[str, list[str]]] = {}
    pool = SHARED / "cosqa" / "code_idx_map.txt"
    if pool.is_file():
        sets["python-cosqa-pool"] = ("python", list(json.loads(pool.read_text(encoding="utf-8"))))
    ruby = SHARED / "codesearchnet" / "ruby"
    if ruby.is_dir():
        sets["ruby-csn"] = ("ruby", [c for s in ("test", "valid") for c in _jsonl(ruby / f"{s}.jsonl", "code")])
    for path in sorted((SHARED / "codesearchnet" / "gecs_samples").glob("*_test_sample.jsonl")):
        language = path.name.split("_test_sample")[0]
        inputs = _jsonl(path, "input")
        sets[f"{language}-gecs"] = (language, [text.split(" [SEP] ", 1)[-1] for text in inputs])
    stat = SHARED / "statcodesearch" / "sample.json"
    if stat.is_file():
        sets["r-statcodesearch"] = ("r", [r["Code"] for r in json.loads(stat.read_text(encoding="utf-8"))])
    tl = SHARED / "tl_codesum" / "valid.token.code"
    if tl.is_file():
        lines = tl.read_text(encoding="utf-8").splitlines()
        sets["java-tlcodesum"] = ("java", [line.split("\t", 1)[-1] for line in lines])
    adv = SHARED / "advtest" / "train_sample.jsonl"
    if adv.is_file():
        sets["python-advtest"] = ("python", _jsonl(adv, "code"))
    return sets


def source_sets(limit: int) -> dict[str, tuple[str, list[str]]]:
    """Up to ``limit`` documented functions per language from the installed sources."""
    from bench_extract_languages import SOURCES, read_sources

    from csbench.code.extract import extract_functions

    sets = {}
    for language in SOURCES:
        codes: dict[str, None] = {}
        for _, data in read_sources(language, None):
            codes.update(dict.fromkeys(fn.code for fn in extract_functions(data.decode("utf-8", "replace"), language)))
            if len(codes) >= limit:
                break
        if codes:
            sets[f"{language}-sources"] = (language, list(codes)[:limit])
    return sets


def save(args: argparse.Namespace) -> int:
    from csbench.attacks import ATTACKS, languages, parse_spec, run_attack

    sets = {**source_sets(args.functions), **shared_sets()}
    out: dict[str, dict] = {}
    for name, (language, codes) in sets.items():
        codes = list(dict.fromkeys(codes))[: args.functions]
        frame = pd.DataFrame({"language": language, "code": codes})
        out[name] = {"language": language, "input": codes, "attacks": {}}
        for spec in args.attacks:
            if any(part.split("-")[0] not in ATTACKS for part in spec.split("+")):
                continue  # not registered in this version of csbench
            if language not in languages(parse_spec(spec)):
                continue  # not implemented for this language
            attacked, report = run_attack(spec, {"test": frame}, progress=False)
            out[name]["attacks"][spec] = {
                "code": attacked["test"]["code"].tolist(),
                "report": report.as_dict()["per_language"],
            }
        print(f"{name}: {len(codes)} {language} functions, {len(args.attacks)} attacks", file=sys.stderr)
    with gzip.open(args.out, "wt", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


def compare(args: argparse.Namespace) -> int:
    def load(path: str) -> dict:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)

    before, after = load(args.before), load(args.after)
    renamed = dict(pair.split("=", 1) for pair in args.renamed)  # name after -> name before
    total = 0
    examples: list[tuple[str, str, str, str, str]] = []
    print(f"{'set':<20} {'attack':<20} {'changed':>8} / snippets")
    for name in sorted(set(before) & set(after)):
        b, a = before[name], after[name]
        if b["input"] != a["input"]:
            print(f"{name:<20} inputs differ between the saves: not compared")
            continue
        for spec in a["attacks"]:
            old_spec = renamed.get(spec, spec)
            if old_spec not in b["attacks"]:
                continue
            old, new = b["attacks"][old_spec]["code"], a["attacks"][spec]["code"]
            changed = [i for i, (x, y) in enumerate(zip(old, new, strict=True)) if x != y]
            total += len(changed)
            if changed:
                label = spec if old_spec == spec else f"{spec} (was {old_spec})"
                print(f"{name:<20} {label:<20} {len(changed):>8} / {len(old)}")
                examples.extend((name, spec, b["input"][i], old[i], new[i]) for i in changed[: args.examples])
    print(f"total changed (set, attack, snippet) outputs: {total}")
    for name, spec, original, old, new in examples[: args.show]:
        print(f"\n=== {name} / {spec}\n--- input\n{original[:600]}")
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", lineterm="", n=1)
        print("\n".join(list(diff)[:40]))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save")
    s.add_argument("out")
    s.add_argument("--functions", type=int, default=2000, help="at most this many functions per set")
    s.add_argument("--attacks", nargs="+", default=ATTACKS)
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--examples", type=int, default=3, help="examples kept per (set, attack)")
    c.add_argument("--show", type=int, default=30, help="examples printed in all")
    c.add_argument(
        "--renamed",
        nargs="*",
        default=["advtest_normalize_scoped=advtest_normalize"],
        metavar="AFTER=BEFORE",
        help="compare an attack of the second save with one of another name in the first",
    )
    args = parser.parse_args()
    return save(args) if args.command == "save" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
