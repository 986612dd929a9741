"""Code attack throughput against tree-sitter parsing alone, on the same functions.

    python benchmarks/bench_attacks.py [--languages python go ...] [--functions 2000] [--repeat 1]

For each language: ``--functions`` functions of the language's prepared corpus (``data/prepared/<name>/
train.parquet``, written by ``csbench prepare``; without it, functions extracted from the sources
scripts/setup.sh installs). With ``../shared/data`` beside the project, two sets of real CodeSearchNet
functions as released are timed too: ``python-csn``, the CoSQA code pool (6,267 CodeSearchNet Python
functions, the closest thing here to CodeSearchNet Python's training split: the all-cores projection
is measured on it) and ``ruby-csn``, CodeSearchNet Ruby's test and valid splits.

The baseline is ``parse_snippet`` on every function (tree-sitter, with the wrapper a lone method
needs: what any attack must do at least once). Each attack is timed end to end through
``csbench.attacks.run_attack`` in one process (``workers=1``): comment removal, identifier analysis,
the dataset-level pass of k_shift_dataset / most_popular, renaming, the renaming record. Printed:
functions/s, the ratio attack time / parse-only time (target: within 3x), and for Python the
projected time of CodeSearchNet Python's 251,820 training functions on one core and, measured with
``workers=<cores>``, on all cores of this machine. ``translation`` runs apertium (an external
process): its own verdict holds the CPU time of this process (finding the documentation lines,
putting the translations back) to the target; its wall clock (apertium included) is printed beside
it and used for its projection.

Each attack is timed alternately with the parse-only baseline, best of ``--repeat`` (default 3)
each, so a busy machine slows both alike; the ratio is attack / baseline. Each set is timed in a
fresh interpreter, as the pipeline runs each (dataset, attack) job in its own process, so a set's
numbers do not depend on the sets timed before it. Both are measured in CPU time
of the process (``time.process_time``: what the work costs, whatever share of a core a busy machine
leaves it) and in wall-clock time; the verdict uses CPU time. On a machine shared with other jobs
the wall-clock ratio still sways (the short baseline catches a quiet moment more easily than the
attack), so the median of the per-pair wall ratios is printed beside it. The first line says
whether the analysis runs compiled (Cython, built by ``make setup``) or as pure Python
(``CSBENCH_PURE_PYTHON=1``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from csbench.attacks import languages, parse_spec, run_attack
from csbench.code.comments import parse_snippet
from csbench.code.extract import extract_functions

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CSN_POOL = SHARED_DATA / "cosqa" / "code_idx_map.txt"  # CoSQA's code pool: CodeSearchNet Python functions
sys.path.insert(0, str(ROOT / "benchmarks"))
from attack_specs import ADVTEST_NORMALIZE, ADVTEST_NORMALIZE_SCOPED, RENAMINGS  # noqa: E402
from bench_extract_languages import read_sources  # noqa: E402

CORPORA = {
    "python": "python-packages",
    "go": "go-stdlib",
    "java": "java-jdk",
    "javascript": "javascript-node",
    "php": "php-libs",
    "ruby": "ruby-stdlib",
    "r": "r-cran",
}
ATTACKS = [
    "no_comment",
    *RENAMINGS,
    ADVTEST_NORMALIZE,  # (Python only: skipped for the other sets)
    ADVTEST_NORMALIZE_SCOPED,
    "ordered_id+translation",
    "translation",
]
CSN_PYTHON_TRAIN = 251_820


def functions(language: str, limit: int) -> tuple[list[str], str]:
    """``limit`` distinct functions: the prepared corpus's (all splits), topped up with functions
    extracted from the installed sources when the corpus has fewer (R's has about a hundred, too few
    for a steady timing)."""
    folder = ROOT / "data" / "prepared" / CORPORA[language]
    codes: dict[str, None] = {}
    origins = []
    for split in ("train", "valid", "test", "codebase"):
        if (folder / f"{split}.parquet").is_file() and len(codes) < limit:
            codes.update(dict.fromkeys(pd.read_parquet(folder / f"{split}.parquet", columns=["code"])["code"]))
    if codes:
        origins.append(f"{min(len(codes), limit)} from {folder.relative_to(ROOT)}")
    before = len(codes)
    if before < limit:
        for _, data in read_sources(language, None):
            codes.update(dict.fromkeys(fn.code for fn in extract_functions(data.decode("utf-8", "replace"), language)))
            if len(codes) >= limit:
                break
        if len(codes) > before:
            origins.append(f"{min(len(codes), limit) - before} extracted from the {language} sources")
    return list(codes)[:limit], " + ".join(origins) or "nothing"


def shared_sets(limit: int) -> dict[str, tuple[str, list[str], str]]:
    """Real CodeSearchNet functions in ``../shared/data`` (empty without it): set name -> (language,
    at most ``limit`` distinct functions, where they come from)."""
    sets = {}
    if CSN_POOL.is_file():
        codes = list(json.loads(CSN_POOL.read_text(encoding="utf-8")))  # {code: index}: distinct functions
        sets["python-csn"] = ("python", codes[:limit], f"{min(len(codes), limit)} of the CoSQA code pool")
    ruby = [SHARED_DATA / "codesearchnet" / "ruby" / f"{split}.jsonl" for split in ("test", "valid")]
    if all(path.is_file() for path in ruby):
        found: dict[str, None] = {}
        for path in ruby:
            with path.open(encoding="utf-8") as lines:
                found.update(dict.fromkeys(json.loads(line)["code"] for line in lines))
        codes = list(found)[:limit]
        sets["ruby-csn"] = ("ruby", codes, f"{len(codes)} of CodeSearchNet Ruby test + valid")
    return sets


def compiled_status() -> str:
    """Whether the attack analysis runs compiled or as pure Python (``csbench._native``), and whether the
    analysis queries are matched by the walk in C (``csbench.code._tswalk``)."""
    from csbench import _native
    from csbench.code import treequery

    status = _native.status()
    compiled = sorted(name for name, how in status.items() if how == _native.COMPILED)
    walk = f"; the tree walk in C: {'yes' if treequery.C_WALK else 'no'}"
    if len(compiled) == len(status):
        return f"compiled (Cython): {', '.join(compiled)}{walk}"
    if not compiled:
        return f"pure Python ({'; '.join(sorted(set(status.values())))}){walk}"
    return f"partly compiled: {', '.join(compiled)} of {', '.join(sorted(status))}{walk}"


class Timing(NamedTuple):
    """Seconds of one measurement: CPU time of this process and wall-clock time."""

    cpu: float
    wall: float


def timed(fn) -> Timing:
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return Timing(time.process_time() - cpu, time.perf_counter() - wall)


def best(fn, repeat: int) -> Timing:
    """The least CPU time and the least wall-clock time of ``repeat`` calls."""
    times = [timed(fn) for _ in range(repeat)]
    return Timing(min(t.cpu for t in times), min(t.wall for t in times))


def rounds_for(baseline, least: float = 0.5) -> int:
    """How many back-to-back calls make a timing of at least ``least`` seconds (a corpus of a hundred
    functions parses in some 50 ms, too short for a steady ratio on a busy machine)."""
    once = max(timed(baseline).cpu, 1e-6)
    return max(1, math.ceil(least / once))


def paired(baseline, fn, repeat: int, rounds: int = 1) -> tuple[Timing, Timing, float]:
    """Best times of ``baseline`` and ``fn`` (each called ``rounds`` times per timing) measured
    alternately, so both see the same machine load, and the median of the wall-clock ratios fn /
    baseline of the pairs."""
    base, other = [], []
    for _ in range(repeat):
        base.append(timed(lambda: [baseline() for _ in range(rounds)]))
        other.append(timed(lambda: [fn() for _ in range(rounds)]))
    per_call = [Timing(t.cpu / rounds, t.wall / rounds) for t in (*base, *other)]
    base, other = per_call[:repeat], per_call[repeat:]
    median = statistics.median(o.wall / b.wall for o, b in zip(other, base, strict=True))
    return (
        Timing(min(t.cpu for t in base), min(t.wall for t in base)),
        Timing(min(t.cpu for t in other), min(t.wall for t in other)),
        median,
    )


SHARED_SETS = {"python-csn": "python", "ruby-csn": "ruby"}  # set -> language (``shared_sets``)
RESULT = "@@result "  # the line a set's child process reports its ratios on, as JSON


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--attacks", nargs="+", default=ATTACKS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-shared", action="store_true", help="skip the CodeSearchNet sets of ../shared/data")
    parser.add_argument("--set", help=argparse.SUPPRESS)  # one set, in this process (what each child runs)
    args = parser.parse_args()
    if args.set:
        return measure_set(args)
    print(f"analysis: {compiled_status()}")
    names = list(args.languages)
    if not args.no_shared:
        names += [name for name, language in SHARED_SETS.items() if language in args.languages]
    results = {}
    for name in names:  # each set in a fresh interpreter, as each (dataset, attack) job of the pipeline
        # its table printed as it comes (a set with translation takes minutes), its errors straight through
        with subprocess.Popen(
            [sys.executable, __file__, *sys.argv[1:], "--set", name], stdout=subprocess.PIPE, text=True
        ) as child:
            for line in child.stdout:
                if line.startswith(RESULT):
                    results[name] = json.loads(line.removeprefix(RESULT))
                else:
                    print(line, end="", flush=True)
        if child.returncode != 0:
            print(f"{name}: failed (exit {child.returncode})", file=sys.stderr)
            return child.returncode
    print("\nworst attack / parse-only ratio per set (translation excluded; target <= 3x, CPU time):")
    for name, found in results.items():
        if "worst" in found:
            verdict = "ok" if found["worst"] <= 3 else "ABOVE TARGET"
            print(
                f"  {name:<11} {found['worst']:5.2f}x  {verdict:<12}  (wall clock: {found['worst_wall']:4.2f}x,"
                f" median of pairs {found['worst_median']:4.2f}x)"
            )
    translated = {name: found["translation"] for name, found in results.items() if "translation" in found}
    if translated:
        print(
            "\ntranslation, CPU time of this process / parse-only (target <= 3x; apertium runs as a separate"
            " process: its time is in the wall clock only):"
        )
        for name, (ratio, wall_ratio) in translated.items():
            verdict = "ok" if ratio <= 3 else "ABOVE TARGET"
            print(f"  {name:<11} {ratio:5.2f}x  {verdict:<12}  (wall clock, apertium included: {wall_ratio:5.1f}x)")
    return 0


def measure_set(args: argparse.Namespace) -> int:
    """Times every attack of ``args.attacks`` on the set ``args.set`` and prints its table, then its
    ratios as one ``RESULT`` line of JSON."""
    cores = os.cpu_count() or 1
    name = args.set
    if name in SHARED_SETS:
        found = shared_sets(args.functions).get(name)
        language, codes, origin = found if found else (SHARED_SETS[name], [], "")
    else:
        language, (codes, origin) = name, functions(name, args.functions)
    if not codes:
        print(f"{name}: no functions (sources absent)")
        print(RESULT + "{}")
        return 0
    # the set the all-cores projection of CodeSearchNet Python's training split is measured on
    projected = name == "python-csn" or (name == "python" and (args.no_shared or not CSN_POOL.is_file()))
    result: dict[str, object] = {}
    frame = pd.DataFrame({"language": language, "code": codes})

    def parse_only(codes=codes, lang=language):
        return [parse_snippet(c, lang) for c in codes]

    rounds = rounds_for(parse_only)
    base = best(parse_only, args.repeat)
    print(f"\n{name}: {len(codes)} functions ({origin}); each timing runs {rounds}x")
    print(f"  {'':<26} {'fn/s (CPU)':>10}  {'CPU ratio':>9}  {'wall ratio':>10}  (median of pairs, wall)")
    print(f"  {'parse only':<26} {len(codes) / base.cpu:>10.0f}  {1:>8.2f}x  {1:>9.2f}x")
    specs = [spec for spec in args.attacks if language in languages(parse_spec(spec))]
    for spec in sorted(set(args.attacks) - set(specs), key=args.attacks.index):
        print(f"  {spec:<26} (not implemented for {language}: skipped)")
    for spec in specs:
        parse_t, attack_t, median = paired(
            parse_only,
            lambda spec=spec, frame=frame: run_attack(spec, {"train": frame}, progress=False),
            args.repeat,
            rounds,
        )
        ratio, wall_ratio = attack_t.cpu / parse_t.cpu, attack_t.wall / parse_t.wall
        if "translation" not in spec:
            result["worst"] = max(result.get("worst", 0.0), ratio)
            result["worst_wall"] = max(result.get("worst_wall", 0.0), wall_ratio)
            result["worst_median"] = max(result.get("worst_median", 0.0), median)
        elif spec == "translation":
            result["translation"] = (ratio, wall_ratio)
        line = f"  {spec:<26} {len(codes) / attack_t.cpu:>10.0f}  {ratio:>8.2f}x  {wall_ratio:>9.2f}x"
        line += f"  ({median:4.2f}x)"
        if language == "python":  # translation: apertium's time is not this process's CPU time
            seconds, clock = (attack_t.wall, " (wall clock)") if "translation" in spec else (attack_t.cpu, "")
            line += f"   251,820 fns: {CSN_PYTHON_TRAIN * seconds / len(codes) / 60:6.1f} min on 1 core{clock}"
        print(line, flush=True)
    if projected and cores > 1:
        print(f"  with workers={cores} (all cores):")
        for spec in [s for s in specs if "translation" not in s]:
            seconds = best(
                lambda spec=spec, frame=frame: run_attack(spec, {"train": frame}, workers=cores, progress=False),
                args.repeat,
            ).wall  # the workers' CPU time is not this process's
            minutes = CSN_PYTHON_TRAIN * seconds / len(codes) / 60
            print(f"  {spec:<26} {len(codes) / seconds:>9.0f} fn/s   251,820 fns: {minutes:6.1f} min", flush=True)
    print(RESULT + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
