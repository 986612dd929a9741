"""`index`, `evaluate` and `robust` read only the columns of a split they use (issue #28, item 3).

An attacked split carries every column of the prepared records (docstring, renaming, path, repo, ...);
these phases look up a few (ids, queries, code texts, languages, function names, urls). On the 1 M
growth corpus reading the test split whole cost `evaluate` about 150 MiB more at its peak than the
columns it uses. Here the splits' unused columns hold 48 MB of text: each phase, run by the CLI in a
fresh interpreter, must not hold them (its peak RSS against the same project without them), and its
outputs must be those of the same pool without them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from conftest import PROJECT_ROOT
from test_index_integrity import word_pool

from csbench.cli import main
from csbench.config import load_config

RUN_PATH = "python-stdlib/no_comment/bm25/none/0/zero_shot"
PROTOCOLS = ["full-corpus", "csn-funcname", "matching"]
UNUSED_BYTES = 2_000_000  # per row and unused column: 12 rows x 2 columns, 24 MB of text


def _fat(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with two columns no phase after `attack` reads, 2 MB of text per row each."""
    n = len(frame)
    return frame.assign(
        docstring=[chr(ord("a") + i % 26) * UNUSED_BYTES for i in range(n)],
        renaming=[f'{{"x{i}": "y"}}' + " " * (UNUSED_BYTES - 12) for i in range(n)],
    )


def _project(root: Path, fat: bool) -> list[str]:
    """A project (bm25 on 12 functions; ``fat``: with the unused columns) prepared, attacked and
    perturbed: the CLI's arguments for its run."""
    raw = yaml.safe_load((PROJECT_ROOT / "params.yaml").read_text())
    raw["grid"].update(datasets=["python-stdlib"], attacks=["no_comment"], models=["bm25"], trained={"models": []})
    raw["evaluation"]["protocols"] = PROTOCOLS
    raw["robustness"].update(datasets=["python-stdlib"], attacks=["no_comment"], perturbations=["case"], ratios=[0.5])
    (raw.get("models") or {}).pop("bm25", None)
    config = root / "params.yaml"
    config.write_text(yaml.safe_dump(raw))
    pool = word_pool()
    splits = {"test": pool, "valid": pool.assign(id=[f"v{i}" for i in range(len(pool))]), "codebase": pool.iloc[0:0]}
    for folder in ("data/prepared/python-stdlib", "data/attacked/python-stdlib/no_comment"):
        (root / folder).mkdir(parents=True)
        for name, split in splits.items():
            (_fat(split) if fat else split).to_parquet(root / folder / f"{name}.parquet", index=False)
    from csbench.lineage import stamp_placed

    stamp_placed(load_config([config]), "python-stdlib")
    stamp_placed(load_config([config]), "python-stdlib", "no_comment")
    return ["--config", str(config), "--dataset", "python-stdlib"]


# a phase in a fresh interpreter: its exit status, then its peak resident memory (KiB) on stderr's last line;
# VmHWM, the peak of this process's own memory (getrusage's ru_maxrss also counts the forking parent's)
PEAK = (
    "import sys\n"
    "from csbench.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
    "print(status.split()[0], file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _peak_rss(argv: list[str], root: Path) -> int:
    """The peak resident memory (bytes) of ``csbench argv`` run in a fresh interpreter in ``root``."""
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1]) * 1024


def test_index_evaluate_and_robust_leave_the_unused_columns_unread(tmp_path, monkeypatch, capsys):
    """On the code before this change each phase's peak grew by 139-224 MB with the unused columns."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    outputs, peaks = {}, {}
    for fat in (False, True):
        root = tmp_path / ("fat" if fat else "thin")
        root.mkdir()
        monkeypatch.chdir(root)  # the config's paths are relative to the project's folder
        base = _project(root, fat)
        for perturbation in ("case", "question"):  # question: the default config's fixed perturbation
            assert main(["-q", "perturb", *base, "--perturbation", perturbation]) == 0, capsys.readouterr().err
        run = [*base, "--attack", "no_comment", "--model", "bm25"]
        peaks[fat] = {phase: _peak_rss(["-q", phase, *run], root) for phase in ("index", "evaluate", "robust")}
        results = root / "results"
        files = [results / "runs" / RUN_PATH / name for name in ("ranks.tsv", "metrics.json", "matching.tsv")]
        points = (results / "robustness" / RUN_PATH / "points").rglob("*.json")
        files += sorted(f for f in points if f.name != "STAMP.json")  # (its inputs' digests differ)
        outputs[fat] = {f.relative_to(results).as_posix(): f.read_bytes() for f in files}
    # the unused columns are 48 MB of text once read (a small file: it compresses well): a phase that
    # reads them holds them at its peak
    grown = {phase: (peaks[True][phase] - peaks[False][phase]) / 1e6 for phase in peaks[True]}
    assert all(mb < 12 * 2 * UNUSED_BYTES / 2e6 for mb in grown.values()), f"peak RSS grew by {grown} MB"
    assert outputs[True] == outputs[False]
    assert len(outputs[True]) == 5  # ranks, metrics, matching decisions, two robustness points
