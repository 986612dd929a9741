"""Where every phase reads and writes, relative to the project root. The Snakefile and dvc.yaml
use the same layout (tests/test_drivers.py checks that they agree)."""

from __future__ import annotations

from pathlib import Path

from csbench.datasets.base import POOL_SPLIT, SPLITS

# Every prepared / attacked dataset has these four files; `codebase` is empty unless the release
# ships a retrieval pool (CodeXGLUE codebase.jsonl, CoSQA's code pool).
ALL_SPLITS = (*SPLITS, POOL_SPLIT)

RAW = "data/raw/{dataset}"
CARDS = "results/datasets/{dataset}"
PREPARED = "data/prepared/{dataset}"
ATTACKED = "data/attacked/{dataset}/{attack}"
RUN = "results/runs/{dataset}/{attack}/{model}/{loss}/{seed}/{inference}"
RESULTS = "results"
PERTURBED = "data/perturbed/{dataset}/{perturbation}/{ratio}/queries.parquet"
INDEX = "results/index/{run}/index.pkl"
ROBUST_POINT = "results/robustness/{run}/points/{perturbation}/{ratio}.json"
ROBUSTNESS = "results/robustness/{run}"  # robustness.json and robustness.png
SUMMARY_FILES = ("summary.md", "summary.csv", "results.db", "metrics.json", "robustness_curves.csv")
STABILITY = "results/stability"  # index.json, and <group>/{stability.json, heatmap.png} per configuration
CHECKPOINT = "checkpoints/{train}"  # best/ (the encoder), train.json; state/ while training


def prepared_dir(dataset: str) -> Path:
    return Path(PREPARED.format(dataset=dataset))


def attacked_dir(dataset: str, attack: str) -> Path:
    return Path(ATTACKED.format(dataset=dataset, attack=attack))


def raw_dir(dataset: str) -> Path:
    return Path(RAW.format(dataset=dataset))


def cards_dir(dataset: str) -> Path:
    return Path(CARDS.format(dataset=dataset))


def split_files(directory: Path) -> dict[str, Path]:
    return {split: directory / f"{split}.parquet" for split in ALL_SPLITS}


def run_dir(run_path: str) -> Path:
    return Path("results/runs") / run_path


def ratio_label(ratio: float) -> str:
    """A noise ratio as it appears in paths and wildcards: 0.05 -> "0.05", 1.0 -> "1"."""
    return f"{round(float(ratio), 6):g}"


def perturbed_file(dataset: str, perturbation: str, ratio: float) -> Path:
    return Path(PERTURBED.format(dataset=dataset, perturbation=perturbation, ratio=ratio_label(ratio)))


def index_file(run_path: str) -> Path:
    return Path(INDEX.format(run=run_path))


def robust_point_file(run_path: str, perturbation: str, ratio: float) -> Path:
    return Path(ROBUST_POINT.format(run=run_path, perturbation=perturbation, ratio=ratio_label(ratio)))


def robustness_dir(run_path: str) -> Path:
    return Path(ROBUSTNESS.format(run=run_path))


def stability_dir(group_path: str) -> Path:
    return Path(STABILITY) / group_path


def checkpoint_dir(train_path: str) -> Path:
    return Path(CHECKPOINT.format(train=train_path))


# The package code each phase runs, relative to src/csbench. Snakemake tracks its digest as a rule
# parameter and dvc.yaml lists it as deps (tests/test_drivers.py checks both agree), so a code
# change re-runs exactly the phases that run that code, under either driver.
PHASE_CODE: dict[str, tuple[str, ...]] = {
    "download": ("datasets/download.py",),
    "prepare": ("datasets", "code"),
    "audit": ("datasets/audit.py", "datasets/prepare.py", "code"),
    "attack": ("attacks", "code"),
    "train": ("train", "models", "code/parsing.py", "code/tokens.py"),
    "index": ("evaluate/runner.py", "evaluate/protocols.py", "models", "code/tokens.py", "code/parsing.py"),
    "evaluate": ("evaluate", "models", "code/tokens.py", "code/parsing.py"),
    "perturb": ("perturbations",),
    "robust": ("evaluate", "models", "code/tokens.py", "code/parsing.py"),
    "robustness": ("evaluate/robustness.py", "evaluate/robust_report.py", "results/plots.py"),
    "aggregate": ("results", "evaluate/stability.py"),
}
PACKAGE_DIR = Path(__file__).resolve().parent


def code_digest(phase: str) -> str:
    """SHA-256 over the Python sources a phase runs (file names and contents, sorted)."""
    import hashlib

    digest = hashlib.sha256()
    for part in PHASE_CODE[phase]:
        target = PACKAGE_DIR / part
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for file in files:
            digest.update(file.relative_to(PACKAGE_DIR).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()
