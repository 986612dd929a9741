"""Python's identifier analysis with its walk in C against the same analysis walking in Python.

    python benchmarks/bench_python_walk.py [--functions 2000] [--repeat 7]

Python's analysis (``csbench.code.languages._python_scopes``) walks the named nodes of each tree following
Python's scopes. ``csbench.code._tswalk.named_walk`` (built by ``make setup``) does the recursion of its
``visit_children`` in C and hands Python only the nodes it acts on; without it, Python makes a node
object for every child of every node it passes (``node.named_children``). Both are timed on the same
parsed functions, alternately, in one process (CPU time, median of ``--repeat``), with the parse of the
same functions beside them: the python-csn set of ``bench_attacks.py`` (the CoSQA code pool, real
CodeSearchNet Python functions) where ``../shared/data`` is beside the project, else functions of the
installed Python sources (``--local``: those in any case, longer functions). Both give the same
analysis (tests/code/test_python_walk.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_attacks import functions, shared_sets  # noqa: E402

from csbench.code.comments import parse_snippet  # noqa: E402
from csbench.code.languages import _python_scopes as scopes  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--local", action="store_true", help="the installed Python sources' functions, not python-csn")
    args = parser.parse_args()
    walk = scopes._NAMED_WALK
    if walk is None:
        print("csbench.code._tswalk is not built (make setup builds it): nothing to compare")
        return 1
    found = None if args.local else shared_sets(args.functions).get("python-csn")
    _, codes, origin = found if found else ("python", *functions("python", args.functions))
    print(f"{len(codes)} functions ({origin}); CPU ms, median of {args.repeat}")
    snippets = [parse_snippet(code, "python") for code in codes]
    times: dict[str, list[float]] = {"parse": [], "walk in C": [], "walk in Python": []}
    try:
        for walker in (walk, None):  # once untimed each: the kind tables are built on first use
            scopes._NAMED_WALK = walker
            for snippet in snippets:
                scopes.analysis(snippet)
        for _ in range(args.repeat):
            started = time.process_time()
            for code in codes:
                parse_snippet(code, "python")
            times["parse"].append(time.process_time() - started)
            for name, walker in (("walk in C", walk), ("walk in Python", None)):
                scopes._NAMED_WALK = walker
                started = time.process_time()
                for snippet in snippets:
                    scopes.analysis(snippet)
                times[name].append(time.process_time() - started)
    finally:
        scopes._NAMED_WALK = walk
    medians = {name: statistics.median(found) for name, found in times.items()}
    for name, seconds in medians.items():
        print(f"  {name:<16} {seconds * 1000:9.2f} ms  ({seconds / medians['parse']:.2f}x the parse)")
    print(f"walk in Python / walk in C: {medians['walk in Python'] / medians['walk in C']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
