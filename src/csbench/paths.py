"""Where every phase reads and writes, relative to the project root. The Snakefile and dvc.yaml
use the same layout (tests/e2e/test_drivers.py checks that they agree)."""

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
# A run is named by six wildcards, a training by the first five: the rules (workflow/rules/common.smk)
# build their paths and CLI arguments from these names.
RUN_WILDCARDS = ("dataset", "attack", "model", "loss", "seed", "inference")
RUN_KEY = "/".join(f"{{{name}}}" for name in RUN_WILDCARDS)  # {dataset}/.../{inference}
TRAIN_KEY = "/".join(f"{{{name}}}" for name in RUN_WILDCARDS[:-1])  # {dataset}/.../{seed}
RUN = f"results/runs/{RUN_KEY}"
RESULTS = "results"
PERTURBED = "data/perturbed/{dataset}/{perturbation}/{ratio}/queries.parquet"
ENCODED = "results/encoded/{run}"  # encode_shard's records: <shard>-of-<shards>.json (the vectors: the embedding cache)
INDEX = "results/index/{run}"  # a folder: index.json, .npy arrays / bm25s folders, SHA256SUMS (no pickle)
ROBUST_POINT = "results/robustness/{run}/points/{perturbation}/{ratio}.json"
ROBUSTNESS = "results/robustness/{run}"  # robustness.json and robustness.png
# What describes one study (the config's `study`) lives in its own folder, so the results of several
# studies coexist and each study's default target depends on its own runs: results/studies/<study>/
# holds SUMMARY_FILES, stability/, tables/, figures/ and report.html, all written by its `aggregate`
# (report.html by `snakemake --report`). The run records above are shared: a run is the same run in
# every study that has it.
STUDIES = "results/studies"
STUDY = "results/studies/{study}"
SUMMARY_FILES = ("summary.md", "summary.csv", "results.db", "metrics.json", "robustness_curves.csv")
DATABASE = "results.db"  # below a study's folder: what `csbench results` reads
STABILITY = "stability"  # below a study's folder: index.json, and <group>/{stability.json, heatmap.png}
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


def index_dir(run_path: str) -> Path:
    """The folder of a run's index (``csbench.evaluate.runner.PoolIndex.save``)."""
    return Path(INDEX.format(run=run_path))


def encode_shard_file(run_path: str, shard: int, shards: int) -> Path:
    return Path(ENCODED.format(run=run_path)) / f"{shard}-of-{shards}.json"


def index_file(run_path: str) -> Path:
    """The index's ``index.json``: the file the drivers track (the folder is written at once)."""
    return index_dir(run_path) / "index.json"


def robust_point_file(run_path: str, perturbation: str, ratio: float) -> Path:
    return Path(ROBUST_POINT.format(run=run_path, perturbation=perturbation, ratio=ratio_label(ratio)))


def robustness_dir(run_path: str) -> Path:
    return Path(ROBUSTNESS.format(run=run_path))


def study_dir(study: str) -> Path:
    """The folder of one study's summaries, database, tables, figures and report."""
    return Path(STUDY.format(study=study))


def stability_dir(study: str, group_path: str = "") -> Path:
    """The seed-stability folder of a study (its index.json), or of one trained configuration."""
    folder = study_dir(study) / STABILITY
    return folder / group_path if group_path else folder


def checkpoint_dir(train_path: str) -> Path:
    return Path(CHECKPOINT.format(train=train_path))


# The package code each phase runs, relative to src/csbench. Snakemake tracks its digest as a rule
# parameter and dvc.yaml lists it as deps (tests/e2e/test_drivers.py checks both agree), so a code
# change re-runs exactly the phases that run that code, under either driver. Each phase runs its
# module of csbench/phases (with the package's Context and, for a phase reading another's outputs,
# the checks of phases/inputs.py); evaluate and robust load the index through phases/index.py.
_CONTEXT = "phases/__init__.py"
_READS = (_CONTEXT, "phases/inputs.py")
# What the encoders run: the models, their tokenizers and parsers, the languages' data-flow grammars
# and string types, and code/comments.py (models/dataflow.py parses snippets with it). The endpoint
# models (models/api.py, models/llm.py) also run csbench/api (the client and its cache): "api" in index,
# evaluate and robust only (no training uses it).
_MODEL_CODE = ("models", "code/tokens.py", "code/parsing.py", "code/languages", "code/comments.py")
PHASE_CODE: dict[str, tuple[str, ...]] = {
    # releases: what readers read
    "download": (
        "datasets/download",
        "datasets/base.py",
        "datasets/releases",
        "datasets/beir.py",
        _CONTEXT,
        "phases/download.py",
    ),
    "prepare": ("datasets", "code", *_READS, "phases/prepare.py"),
    "audit": ("datasets/audit.py", "datasets/prepare.py", "code", *_READS, "phases/audit.py"),
    "attack": ("attacks", "code", *_READS, "phases/attack.py"),
    "train": ("train", *_MODEL_CODE, *_READS, "phases/train.py"),
    "index": (
        "evaluate/runner.py",
        "evaluate/pool_index.py",
        "evaluate/pair_matching.py",
        "evaluate/protocols.py",
        *_MODEL_CODE,
        "api",
        *_READS,
        "phases/index.py",
    ),
    "evaluate": ("evaluate", *_MODEL_CODE, "api", *_READS, "phases/index.py", "phases/evaluate.py"),
    "perturb": ("perturbations", *_READS, "phases/perturb.py"),
    "robust": ("evaluate", *_MODEL_CODE, "api", *_READS, "phases/index.py", "phases/robust.py"),
    "robustness": (
        "evaluate/robustness.py",
        "evaluate/robust_report.py",
        "evaluate/qrels.py",
        "results/plots.py",
        *_READS,
        "phases/robustness.py",
    ),
    "aggregate": ("results", "evaluate/stability.py", *_READS, "phases/aggregate.py"),
    "dataset-table": ("results/dataset_table.py", *_READS, "phases/dataset_table.py"),
    # summarizers (issue #25): trained by the train phase through the one engine, run by summarize
    "train-summarizer": (
        "train/engine.py",
        "train/task.py",
        "train/state.py",
        "train/schedules.py",
        "train/early_stopping.py",
        "train/summarizer.py",
        "summarization",
        "models/csn_vocab.py",
        "models/hf.py",
        "code/tokens.py",
        *_READS,
        "phases/train.py",
    ),
    "summarize": (
        "summarization",
        "models/csn_vocab.py",
        "models/hf.py",
        "models/integrity.py",
        "code/tokens.py",
        *_READS,
        "phases/index.py",
        "phases/summarize.py",
    ),
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
