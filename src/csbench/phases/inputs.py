"""What a phase reads from another phase, checked against the stamp its producer wrote
(:mod:`csbench.stamps`): made under this config's parameters (:mod:`csbench.lineage`) and unchanged
since; and the commands that re-make it, which end every message about a missing or stale input."""

from __future__ import annotations

from pathlib import Path

from csbench import lineage, paths
from csbench.config import Config, RunKey, TrainKey
from csbench.phases import Context
from csbench.registry import UnknownNameError
from csbench.stamps import STAMP_FILE, StampError, Verified, verified


def require(name: str, valid: list[str], kind: str, where: str) -> None:
    """``UnknownNameError`` (with a "did you mean") when ``name`` is not among ``valid``."""
    if name not in valid:
        raise UnknownNameError(kind, name, valid, where=where)


def configs(ctx: Context) -> str:
    """The ``--config`` options of the re-make commands (params.yaml when none was named)."""
    return lineage.config_args(list(ctx.config_files) if ctx.config_files is not None else None)


def prepare_command(ctx: Context, dataset: str) -> str:
    return f"csbench prepare {configs(ctx)} --dataset {dataset}"


def attack_command(ctx: Context, dataset: str, attack: str) -> str:
    return f"csbench attack {configs(ctx)} --dataset {dataset} --attack {attack}"


def run_command(ctx: Context, phase: str, run: RunKey) -> str:
    return f"csbench {phase} {configs(ctx)} {lineage.run_args(run)}"


def train_command(ctx: Context, key: TrainKey) -> str:
    return (
        f"csbench train {configs(ctx)} --dataset {key.dataset} --attack {key.attack} --model {key.model} "
        f"--loss {key.loss} --seed {key.seed}"
    )


def checked(folder: Path, expected: dict, command: str, producer: str) -> Verified:
    """A producer's folder whose stamp matches ``expected`` (its files are checked as they are read)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing: run `{command}` first")
    return verified(folder, expected, lineage.remake(command), producer)


def prepared(ctx: Context, dataset: str) -> Verified:
    """The prepared dataset's folder, made by ``prepare`` under this config."""
    folder = paths.prepared_dir(dataset)
    return checked(folder, lineage.prepare(ctx.config, dataset), prepare_command(ctx, dataset), "prepare")


def attacked(ctx: Context, dataset: str, attack: str) -> Verified:
    """The attacked dataset's folder, made by ``attack`` under this config."""
    folder = paths.attacked_dir(dataset, attack)
    expected = lineage.attack(ctx.config, dataset, attack)
    return checked(folder, expected, attack_command(ctx, dataset, attack), "attack")


def unstamp(folder: Path) -> None:
    """Remove a folder's stamp before its phase rewrites it: a run killed half-way leaves files that
    no stamp vouches for (a reader refuses them), never an old stamp beside new files."""
    (folder / STAMP_FILE).unlink(missing_ok=True)


def split_names() -> list[str]:
    """The file names of a prepared / attacked dataset's splits."""
    return [f"{split}.parquet" for split in paths.ALL_SPLITS]


def kept_outputs(folder: Path, expected: dict) -> dict:
    """The outputs an earlier run of the same lineage recorded in ``folder``'s stamp (a run that
    writes some of the files, ``--ratio``, keeps the others listed as they were recorded)."""
    if not (folder / STAMP_FILE).is_file():
        return {}
    try:
        return dict(verified(folder, expected, "", "perturb").outputs)
    except StampError:
        return {}


def run_key(config: Config, dataset: str, attack: str, model: str, loss: str, seed: int, inference: str) -> RunKey:
    """The run these coordinates name, refused unless the config's grid has it."""
    require(dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    require(attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    summary = config.summarization
    models = list(dict.fromkeys(config.models + config.trained["models"] + summary["zero_shot"] + summary["models"]))
    require(model, models, "model", "--model (not in grid.models, grid.trained.models or grid.summarization)")
    run = RunKey.parse(dataset, attack, model, loss, seed, inference)
    if run not in config.runs():
        raise ValueError(
            f"{run.path} is not a run of the config: zero-shot runs (grid.models, grid.summarization.zero_shot) "
            "have loss none, seed 0, inference zero_shot; trained runs take their loss, seed and inference from "
            "grid.trained (summarizers: loss xent, seeds and inference from grid.summarization)"
        )
    return run


def graded_judgements(ctx: Context, dataset: str, protocols: list[str]):
    """The dataset's relevance judgements (``qrels.parquet`` of its prepared folder, where prepare wrote
    them) when a graded protocol (``qrels``) is among ``protocols``, and the file read (for the stamp);
    (None, {}) otherwise: each query's own code is then its one relevant document."""
    from csbench.datasets.judgements import QRELS_FILE
    from csbench.evaluate.protocols import PROTOCOLS, Graded

    if not any(isinstance(PROTOCOLS.get(name), Graded) for name in protocols):
        return None, {}
    if not ctx.config.has_qrels(dataset):
        return None, {}
    source = prepared(ctx, dataset)
    if not source.has(QRELS_FILE):
        raise FileNotFoundError(
            f"{source.folder / QRELS_FILE}: the relevance judgements of {dataset} are missing; re-run "
            f"`{prepare_command(ctx, dataset)}`"
        )
    return source.frame(QRELS_FILE), source.inputs([QRELS_FILE])
