"""Where every phase reads and writes, relative to the project root. The Snakefile and dvc.yaml
use the same layout (tests/test_drivers.py checks that they agree)."""

from __future__ import annotations

from pathlib import Path

from csbench.datasets import SPLITS

PREPARED = "data/prepared/{dataset}"
ATTACKED = "data/attacked/{dataset}/{attack}"
RUN = "results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}"
RESULTS = "results"
SUMMARY_FILES = ("summary.md", "summary.csv", "results.db")


def prepared_dir(dataset: str) -> Path:
    return Path(PREPARED.format(dataset=dataset))


def attacked_dir(dataset: str, attack: str) -> Path:
    return Path(ATTACKED.format(dataset=dataset, attack=attack))


def split_files(directory: Path) -> dict[str, Path]:
    return {split: directory / f"{split}.parquet" for split in SPLITS}


def run_dir(run_path: str) -> Path:
    return Path("results/runs") / run_path
