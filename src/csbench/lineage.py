"""What each output depends on in a config (its *lineage*), and the check snakemake runs before it
plans: every output of the study whose stamp does not match the config, or whose files changed
since they were made, is removed so that this very run re-makes it.

A lineage is a flat mapping from config keys to values: the keys each phase reads (the same ones its
snakemake rule tracks as params and its dvc stage lists) and those of the phases before it::

    prepare(ds)        datasets.<ds>  (+ extraction for a local corpus)
    attack(ds, a)      prepare(ds) + attack_params(<a>)
    perturb(ds, p)     prepare(ds) + perturbation(<p>).seed
    train(t)           attack(ds, a) + models.<m> + training(<m>) + loss_params.<loss> + seed
    run(r)             attack(ds, a) [+ train(t)] + models.<m> + evaluation
    robust(r)          attack(ds, a) [+ train(t)] + models.<m> + robustness.protocol + perturb(ds, p) ...
    robustness(r)      robust(r) + run(r) + robustness

The study's name is not part of any lineage: a run is the same run in every study that has it.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from csbench import paths
from csbench.config import Config, RunKey, TrainKey
from csbench.models.integrity import DRIVER_MARKERS, SUMS_FILE, IntegrityError, read_sums, sha256_of
from csbench.stamps import EMBEDDED_KEY, STAMP_FILE, lineage_problem, plain

# ------------------------------------------------------------------------------------------------
# lineages


def prepare(config: Config, dataset: str) -> dict[str, Any]:
    from csbench.datasets import LOCAL_SOURCE_KIND

    lineage: dict[str, Any] = {f"datasets.{dataset}": config.dataset_options(dataset)}
    if config.dataset_kind(dataset) == LOCAL_SOURCE_KIND:
        lineage["extraction"] = config.section("extraction")
    return plain(lineage)


def attack(config: Config, dataset: str, attack_spec: str) -> dict[str, Any]:
    return {**prepare(config, dataset), f"attack_params({attack_spec})": plain(config.attack_params(attack_spec))}


def perturb(config: Config, dataset: str, perturbation: str) -> dict[str, Any]:
    seed = int(config.robustness.get("seed", 0))
    return {**prepare(config, dataset), f"perturbation({perturbation}).seed": seed}


def _model(config: Config, model: str) -> dict[str, Any]:
    return {f"models.{model}": plain(config.model_params(model))}


def train(config: Config, key: TrainKey) -> dict[str, Any]:
    return {
        **attack(config, key.dataset, key.attack),
        **_model(config, key.model),
        f"training({key.model})": plain(config.training_params(key.model)),
        f"loss_params.{key.loss}": plain(config.loss_params(key.loss)),
        f"seed({key.path})": key.seed,
    }


def _trained(config: Config, run: RunKey) -> dict[str, Any]:
    return train(config, run.training) if run.training is not None else {}


def run(config: Config, run_key: RunKey) -> dict[str, Any]:
    """A run record's (``csbench evaluate``)."""
    return {
        **attack(config, run_key.dataset, run_key.attack),
        **_trained(config, run_key),
        **_model(config, run_key.model),
        "evaluation": plain(config.section("evaluation")),
    }


def summary_run(config: Config, run_key: RunKey) -> dict[str, Any]:
    """A summarization run's records (``csbench summarize``): its data, training, model and the optional
    metrics it scores (the ``evaluation`` section is search's)."""
    return {
        **attack(config, run_key.dataset, run_key.attack),
        **_trained(config, run_key),
        **_model(config, run_key.model),
        "grid.summarization.extra_metrics": config.summarization["extra_metrics"],
    }


def run_records(config: Config, run_key: RunKey) -> dict[str, Any]:
    """The lineage of a run's records folder: :func:`summary_run` for a summarizer's run, :func:`run`
    for a search run's."""
    return summary_run(config, run_key) if config.summarizes(run_key.model) else run(config, run_key)


def run_phase(config: Config, run_key: RunKey) -> str:
    """The phase that writes a run's records: ``summarize`` or ``evaluate``."""
    return "summarize" if config.summarizes(run_key.model) else "evaluate"


def robust(config: Config, run_key: RunKey) -> dict[str, Any]:
    """The points of a run's robustness curves (``csbench robust``)."""
    lineage = {
        **attack(config, run_key.dataset, run_key.attack),
        **_trained(config, run_key),
        **_model(config, run_key.model),
        "robustness.protocol": config.robustness.get("protocol", "full-corpus"),
    }
    for perturbation in sorted({p for p, _ in config.perturbation_points()}):
        lineage.update(perturb(config, run_key.dataset, perturbation))
    return lineage


def robustness(config: Config, run_key: RunKey) -> dict[str, Any]:
    """A run's robustness record (``csbench robustness``)."""
    return {**robust(config, run_key), **run(config, run_key), "robustness": plain(config.robustness)}


def stamp_placed(
    config: Config, dataset: str, attack_spec: str | None = None, root: str | os.PathLike[str] = "."
) -> dict[str, Any]:
    """Stamp a prepared folder (or, with ``attack_spec``, an attacked one) whose files were put there
    by other means than ``csbench prepare`` / ``attack`` (a test's hand-made data, data copied in):
    the stamp records this config's lineage and the files as they are now, no inputs."""
    from csbench.stamps import write_stamp

    if attack_spec is None:
        folder, phase, lineage = Path(root) / paths.prepared_dir(dataset), "prepare", prepare(config, dataset)
    else:
        folder, phase = Path(root) / paths.attacked_dir(dataset, attack_spec), "attack"
        lineage = attack(config, dataset, attack_spec)
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != STAMP_FILE and p.name[0] != ".")
    return write_stamp(folder, phase, lineage, {}, names)


def stamp_placed_run(config: Config, run_key: RunKey, root: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """Stamp a run record folder written by other means than ``csbench evaluate`` (a test's records,
    records copied in): this config's lineage of the run and its files as they are now, no inputs."""
    from csbench.stamps import write_stamp

    folder = Path(root) / paths.run_dir(run_key.path)
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != STAMP_FILE and p.name[0] != ".")
    return write_stamp(folder, run_phase(config, run_key), run_records(config, run_key), {}, names)


# ------------------------------------------------------------------------------------------------
# how to re-make an output (the end of every message about a bad one)


def config_args(configs: list[str] | None) -> str:
    return " ".join(f"--config {shlex.quote(c)}" for c in configs or ["params.yaml"])


def remake(command: str) -> str:
    return (
        "re-make it: snakemake re-makes it on its next run, `dvc repro` when it sees the change (else "
        f"`dvc repro --force` the stage), or by hand `{command}`"
    )


def run_args(run_key: RunKey) -> str:
    return (
        f"--dataset {run_key.dataset} --attack {run_key.attack} --model {run_key.model} --loss {run_key.loss} "
        f"--seed {run_key.seed} --inference {run_key.label}"
    )


# ------------------------------------------------------------------------------------------------
# the index a run reads: what it records of its model and data (compared on every load)


def index_model(config: Config, run_key: RunKey, pools: dict[str, str]) -> dict[str, Any]:
    """What a run's index is built from, recorded in its ``index.json`` and compared on every read:
    the model's name, family and parameters, the checkpoint (``best/``, by the digest of its
    ``SHA256SUMS``) of a trained run, and ``inputs``: the SHA-256 of each attacked file it encoded
    (as their stamp records it). An index built for anything else is refused, not used."""
    from csbench.models.integrity import sums_digest

    best = paths.checkpoint_dir(run_key.training.path) / "best" if run_key.training is not None else None
    return {
        "name": run_key.model,
        "family": config.model_spec(run_key.model).family,
        "params": plain(config.model_params(run_key.model)),
        "checkpoint": None if best is None else {"path": best.as_posix(), "sha256": sums_digest(best)},
        "inputs": dict(sorted(pools.items())),
    }


def pool_names(protocols: list[str]) -> list[str]:
    """The attacked files a run's index is built from: test, codebase, and valid when a matching
    protocol chooses its threshold there."""
    from csbench.evaluate.runner import matching_protocols

    names = ["test.parquet", f"{paths.POOL_SPLIT}.parquet"]
    return names + (["valid.parquet"] if matching_protocols(protocols) else [])


# ------------------------------------------------------------------------------------------------
# snakemake: check the study's outputs before planning, remove what does not match


class StatCache:
    """SHA-256 of files measured before, reused while a file's size, modification and change times
    and inode are those measured (a change of content, even with its modification time set back,
    moves its change time). Kept in ``.snakemake/csbench-verified.json``, local to the checkout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.changed = False
        self.hashed = 0
        try:
            loaded = json.loads(path.read_text())
            self.entries: dict[str, list] = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            self.entries = {}

    def sha256(self, file: Path) -> str | None:
        try:
            st = file.stat()
        except OSError:
            return None
        key = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        entry = self.entries.get(file.as_posix())
        if entry and entry[:5] == key:
            return entry[5]
        digest = sha256_of(file)
        self.hashed += 1
        self.entries[file.as_posix()] = [*key, digest]
        self.changed = True
        return digest

    def save(self) -> None:
        if not self.changed:
            return
        from csbench.io import write_json

        self.entries = {k: v for k, v in self.entries.items() if Path(k).exists()}
        write_json(self.path, self.entries)


@dataclass
class Stale:
    """Why an output of the study must be re-made."""

    where: str
    why: str


def _files_below(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []


def _other_params(problem: str) -> str:
    return f"made under other parameters than this config's ({problem})"


def _stamped(folder: Path, lineage: dict[str, Any], cache: StatCache) -> Stale | None:
    """A stamped folder's problem: another lineage, or a listed file changed (missing files are
    snakemake's business: it re-makes the job)."""
    stamp_file = folder / STAMP_FILE
    if not stamp_file.is_file():
        present = [p for p in _files_below(folder) if p.name not in DRIVER_MARKERS]
        return Stale(str(folder), f"no {STAMP_FILE}: what made it is unknown") if present else None
    try:
        stamp = json.loads(stamp_file.read_text(encoding="utf-8"))
        outputs = dict(stamp["outputs"])
        problem = lineage_problem(stamp, lineage)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return Stale(str(stamp_file), "not a stamp")
    if problem is not None:
        return Stale(str(folder), _other_params(problem))
    for name, entry in outputs.items():
        digest = cache.sha256(folder / name)
        if digest is not None and digest != entry.get("sha256"):
            return Stale(
                str(folder / name),
                f"changed since `csbench {stamp.get('phase')}` made it ({STAMP_FILE} records another SHA-256)",
            )
    return None


def _embedded(file: Path, lineage: dict[str, Any]) -> Stale | None:
    if not file.is_file():
        return None
    try:
        stamp = json.loads(file.read_text(encoding="utf-8")).get(EMBEDDED_KEY)
        if stamp is None:
            return Stale(str(file), f"no '{EMBEDDED_KEY}' record: what made it is unknown")
        problem = lineage_problem(stamp, lineage)
    except (OSError, ValueError, AttributeError, TypeError):
        return Stale(str(file), "not a csbench record")
    return Stale(str(file), _other_params(problem)) if problem is not None else None


def _index(config: Config, run_key: RunKey, cache: StatCache) -> Stale | None:
    folder = paths.index_dir(run_key.path)
    if not (folder / "index.json").is_file():
        return None
    attacked = paths.attacked_dir(run_key.dataset, run_key.attack)
    try:
        listed = read_sums(folder, "")
    except IntegrityError:
        return Stale(str(folder), f"no valid {SUMS_FILE}")
    for name, expected in listed.items():
        digest = cache.sha256(folder / name)
        if digest is not None and digest != expected:
            return Stale(str(folder / name), f"changed since it was made ({SUMS_FILE} records another SHA-256)")
    try:
        stamp = json.loads((attacked / STAMP_FILE).read_text(encoding="utf-8"))
        pools = {(attacked / n).as_posix(): stamp["outputs"][n]["sha256"] for n in pool_names(config.protocols)}
        meta = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # its data is re-made first (and the index with it), or index.json fails its SHA256SUMS
    best = paths.checkpoint_dir(run_key.training.path) / "best" if run_key.training is not None else None
    if best is not None and not (best / SUMS_FILE).is_file():
        return None  # its training is re-made first, and the index with it
    expected_model = plain(index_model(config, run_key, pools))
    made = meta.get("model") if isinstance(meta, dict) and isinstance(meta.get("model"), dict) else {}
    if made != expected_model:
        keys = sorted(k for k in {*made, *expected_model} if made.get(k) != expected_model.get(k))
        return Stale(str(folder), f"built for another model or data (differs in: {', '.join(keys)})")
    return None


@dataclass
class Output:
    """One output of the study as the snakemake check sees it: what to remove so that snakemake
    re-makes it, how to check it, and the outputs it is made from."""

    remove: list[Path]
    check: Callable[[], Stale | None]
    upstream: list[str] = field(default_factory=list)


def study_outputs(config: Config, cache: StatCache) -> dict[str, Output]:
    """Every stamped output of the study (prepared and attacked data, cards, perturbed query sets,
    trainings, indexes, run records, robustness points and records), by path."""
    outputs: dict[str, Output] = {}

    def add(where: Path, check: Callable[[], Stale | None], upstream: list[str], *more: Path) -> str:
        outputs[where.as_posix()] = Output([where, *more], check, upstream)
        return where.as_posix()

    for dataset in config.datasets:
        lineage = prepare(config, dataset)
        folder = paths.prepared_dir(dataset)
        prepared = add(folder, functools.partial(_stamped, folder, lineage, cache), [])
        cards = paths.cards_dir(dataset)
        add(cards, functools.partial(_stamped, cards, lineage, cache), [prepared])
        for attack_spec in config.attacks:
            folder = paths.attacked_dir(dataset, attack_spec)
            add(folder, functools.partial(_stamped, folder, attack(config, dataset, attack_spec), cache), [prepared])
        for perturbation in sorted({p for p, _ in config.perturbation_points()}):
            folder = paths.perturbed_file(dataset, perturbation, 0).parent.parent
            add(folder, functools.partial(_stamped, folder, perturb(config, dataset, perturbation), cache), [prepared])
    for key in config.trainings():
        folder = paths.checkpoint_dir(key.path)
        attacked = paths.attacked_dir(key.dataset, key.attack).as_posix()
        add(
            folder / "train.json",
            functools.partial(_embedded, folder / "train.json", train(config, key)),
            [attacked],
            folder / "best",
        )
    robustness_runs = set(config.robustness_runs())
    for run_key in config.summary_runs():
        attacked = paths.attacked_dir(run_key.dataset, run_key.attack).as_posix()
        trained = [(paths.checkpoint_dir(run_key.training.path) / "train.json").as_posix()] if run_key.training else []
        folder = paths.run_dir(run_key.path)
        add(folder, functools.partial(_stamped, folder, summary_run(config, run_key), cache), [attacked, *trained])
    for run_key in config.search_runs():
        attacked = paths.attacked_dir(run_key.dataset, run_key.attack).as_posix()
        trained = [(paths.checkpoint_dir(run_key.training.path) / "train.json").as_posix()] if run_key.training else []
        folder = paths.index_dir(run_key.path)
        index = add(folder, functools.partial(_index, config, run_key, cache), [attacked, *trained])
        folder = paths.run_dir(run_key.path)
        records = add(
            folder, functools.partial(_stamped, folder, run(config, run_key), cache), [attacked, index, *trained]
        )
        if run_key not in robustness_runs:
            continue
        query_sets = [
            paths.perturbed_file(run_key.dataset, p, 0).parent.parent.as_posix()
            for p in sorted({p for p, _ in config.perturbation_points()})
        ]
        folder = paths.robustness_dir(run_key.path) / "points"
        points = add(
            folder, functools.partial(_stamped, folder, robust(config, run_key), cache), [attacked, index, *query_sets]
        )
        file = paths.robustness_dir(run_key.path) / "robustness.json"
        add(
            file,
            functools.partial(_embedded, file, robustness(config, run_key)),
            [records, points],
            file.with_suffix(".png"),
        )
    # the study's summaries, made from all of the above: removed with any of them, or snakemake would
    # find the summaries up to date and re-make nothing that feeds them
    files = [paths.study_dir(config.study) / name for name in paths.SUMMARY_FILES]
    add(files[0], lambda: None, [name for name in outputs if not name.startswith("data/")], *files[1:])
    return outputs


def repair(config: Config, cache_file: str | os.PathLike[str] = ".snakemake/csbench-verified.json") -> list[str]:
    """Remove every output of the study whose stamp does not match ``config`` or whose files changed
    since they were made, and every output of the study made from one of them, so that snakemake
    re-makes them all in this run (snakemake re-makes a missing file only where something it needs
    is missing: removing the bad file alone would leave the outputs made from it in place). One line
    per bad output, for the console. Files are hashed only where :class:`StatCache` has no measure."""
    cache = StatCache(Path(cache_file))
    outputs = study_outputs(config, cache)
    stale = {name: problem for name, output in outputs.items() if (problem := output.check()) is not None}
    downstream: dict[str, list[str]] = {}
    for name, output in outputs.items():
        for source in output.upstream:
            downstream.setdefault(source, []).append(name)

    def made_from(name: str) -> set[str]:
        found, todo = set(), [name]
        while todo:
            for child in downstream.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    closures = {name: made_from(name) for name in stale}
    present = set()
    for name in set(stale).union(*closures.values()):
        for path in outputs[name].remove:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                present.add(name)
            elif path.exists() or path.is_symlink():
                path.unlink()
                present.add(name)
    cache.save()
    said = []
    for name, problem in stale.items():
        also = len((closures[name] & present) - set(stale))
        more = f" (and {also} output(s) made from it)" if also else ""
        said.append(f"{problem.where}: {problem.why}; removed{more}, re-made in this run")
    return said
