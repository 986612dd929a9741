"""The analysis query of each language: tree-sitter's query cursor against ``csbench.code.treequery``'s
walk, on the same parsed functions.

    python benchmarks/bench_treequery.py [--languages r ruby ...] [--functions 2000] [--repeat 5]

For each language whose identifier analysis runs a query (all but Python): ``--functions`` functions
of the set ``benchmarks/bench_attacks.py`` uses, parsed once; then, best of ``--repeat`` CPU times,
parse-only (``parse_snippet``), the captures of tree-sitter's ``Query`` and of ``WalkQuery`` for the
same query source, grouped by capture name as the analysis takes them. Printed: microseconds per
function, each as a ratio to parse-only, the walk against the query (below 1: the walk is faster),
and whether the two gave the same captures. ``IdentifierRules.walked`` (``csbench.code.languages``)
marks the languages the walk is used for, chosen by the attacks' end-to-end time
(benchmarks/bench_attacks.py), which a faster capture does not always improve: the walk allocates a
node object for every node. The first line says whether the walk runs compiled (it is only ever used
compiled: as plain Python it is the slower one).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from csbench.code import identifiers, treequery
from csbench.code.comments import parse_snippet
from csbench.code.languages import language_spec
from csbench.code.parsing import captures_by_name, get_query

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_attacks import functions

LANGUAGES = ["php", "go", "javascript", "java", "ruby", "r"]


def best_us(fn, repeat: int, count: int) -> float:
    """Least CPU time of ``repeat`` calls of ``fn``, in microseconds per function (``count`` of them)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times) / count * 1e6


def measure(language: str, limit: int, repeat: int) -> str:
    """The table line of one language."""
    codes, _ = functions(language, limit)
    if not codes:
        return f"{language:<11} no functions (sources absent)"
    trees = [parse_snippet(code, language).tree for code in codes]
    source = identifiers.query_source(language)
    walk = treequery.WalkQuery(identifiers.tree_sitter_language(language), source)
    query = get_query(language, source)

    def by_query(root):
        return captures_by_name(query, walk.names, root)

    def ids(found):
        return {name: [node.id for node in nodes] for name, nodes in found.items()}

    same = all(ids(by_query(tree.root_node)) == ids(walk.captures(tree.root_node)) for tree in trees)
    parse = best_us(lambda: [parse_snippet(code, language) for code in codes], repeat, len(codes))
    queried = best_us(lambda: [by_query(tree.root_node) for tree in trees], repeat, len(codes))
    walked = best_us(lambda: [walk.captures(tree.root_node) for tree in trees], repeat, len(codes))
    return (
        f"{language:<11} {len(codes):>5} {parse:>9.1f} {queried:>7.1f} ({queried / parse:.2f}x)"
        f" {walked:>7.1f} ({walked / parse:.2f}x) {walked / queried:>10.2f}  {'yes' if same else 'NO'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", nargs="+", default=LANGUAGES, choices=LANGUAGES)
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    walked = [n for n in LANGUAGES if language_spec(n).identifiers.walked]
    print(f"walk: {'compiled' if treequery.COMPILED else 'pure Python'}; used for {walked}")
    print(f"{'language':<11} {'fns':>5} {'parse us':>9} {'query':>14} {'walk':>14} {'walk/query':>10}  same")
    for language in args.languages:
        print(measure(language, args.functions, args.repeat), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
