"""benchmarks/bench_attacks.py end to end on a few R functions: the set timed in its own interpreter,
its table, and the verdict read back from the child's report; benchmarks/bench_treequery.py's row."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from corpora import R_ROOT

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_attacks.py"


def test_the_attack_benchmark_times_each_attack_against_parsing() -> None:
    if not R_ROOT.exists():
        pytest.skip(f"the R sources are not in {R_ROOT} (scripts/setup.sh fetches them)")
    # (translation is left out: each timing repeats the attack until it lasts 0.5 s, an apertium call each)
    options = ["--languages", "r", "--no-shared", "--functions", "20", "--repeat", "1", "--attacks", "ordered_id"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *options],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.startswith("analysis: ")
    assert "\nr: 20 functions" in out
    row = re.search(r"^  ordered_id +(\d+) +([\d.]+)x", out, re.M)
    assert row and int(row[1]) > 0
    verdict = re.search(r"^  r +([\d.]+)x  (ok|ABOVE TARGET)", out.split("worst attack / parse-only")[1], re.M)
    assert verdict and float(verdict[1]) == pytest.approx(float(row[2]), abs=0.01)
    assert float(verdict[1]) > 1  # renaming parses and then does more: never cheaper than parsing
    assert "@@result" not in out  # the children's reports are read, not printed


def test_the_query_benchmark_compares_walk_and_query_on_the_same_trees() -> None:
    if not R_ROOT.exists():
        pytest.skip(f"the R sources are not in {R_ROOT} (scripts/setup.sh fetches them)")
    script = SCRIPT.with_name("bench_treequery.py")
    options = ["--languages", "r", "--functions", "20", "--repeat", "1"]
    done = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.match(r"walk: (compiled|pure Python); used for \['r'\]", done.stdout)
    row = re.search(
        r"^r +20 +([\d.]+) +([\d.]+) \(([\d.]+)x\) +([\d.]+) \(([\d.]+)x\) +([\d.]+)  yes$", done.stdout, re.M
    )
    assert row, done.stdout
    parse, queried, walked, ratio = float(row[1]), float(row[2]), float(row[4]), float(row[6])
    assert parse > 0 and queried > 0 and walked > 0
    assert ratio == pytest.approx(walked / queried, abs=0.01)


def test_the_python_walk_benchmark_times_both_walks_on_the_same_functions() -> None:
    from csbench.code.languages import _python_scopes

    if _python_scopes._NAMED_WALK is None:
        pytest.skip("csbench.code._tswalk is not built (make setup builds it)")
    script = SCRIPT.with_name("bench_python_walk.py")
    options = ["--local", "--functions", "30", "--repeat", "1"]
    done = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.match(r"30 functions \(", done.stdout), done.stdout
    rows = re.findall(r"^  (parse|walk in C|walk in Python) +([\d.]+) ms", done.stdout, re.M)
    times = {name: float(ms) for name, ms in rows}
    assert set(times) == {"parse", "walk in C", "walk in Python"} and all(ms > 0 for ms in times.values())
    ratio = re.search(r"^walk in Python / walk in C: ([\d.]+)x$", done.stdout, re.M)
    assert ratio and float(ratio[1]) == pytest.approx(times["walk in Python"] / times["walk in C"], rel=0.05)


def test_the_stream_benchmark_times_the_kept_and_the_repeated_analyses() -> None:
    script = SCRIPT.with_name("bench_attack_stream.py")
    options = ["--functions", "60", "--batch-rows", "25", "--repeat", "1", "--attacks", "most_popular"]
    done = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.match(r"60 functions \(.*\), batches of 25 rows", done.stdout), done.stdout
    row = r"^  (at once \(run_attack\)|in batches|in batches, analysed twice) +([\d.]+) s"
    rows = dict(re.findall(row, done.stdout, re.M))
    assert set(rows) == {"at once (run_attack)", "in batches", "in batches, analysed twice"}, done.stdout
    kept = re.search(r"analysed twice / kept: ([\d.]+)x; kept analyses' file: ([\d,]+) bytes", done.stdout)
    assert kept and int(kept[2].replace(",", "")) > 60 * 100, done.stdout
