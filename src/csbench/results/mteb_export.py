"""MTEB-style task results of csbench runs (issue #27 item 4): `csbench results --export mteb DIR`.

One task-result JSON per run and protocol (and per perturbed-query point of a robustness curve), in
the layout of MTEB's results folders: ``DIR/<model folder>/<model revision>/<task name>.json`` beside
a ``model_meta.json``, so that ``mteb.TaskResult.from_disk`` reads each file and
``mteb.ResultCache(cache_path=DIR.parent).load_results(...)`` a folder named ``results``. MTEB never
computed these scores: csbench did, and the files say so (``mteb_version`` null, a ``csbench`` key).

Naming (documented in docs/results.md):

* task name ``csbench:<dataset>:<protocol>``, then ``:<attack>`` when the code is attacked (attack other
  than ``none``) and ``:<perturbation>@<ratio>`` for a point of a robustness curve (queries perturbed at
  that noise ratio): ``csbench:cosqa-beir:qrels``, ``csbench:cosqa-beir:qrels:rename_vars``,
  ``csbench:cosqa-beir:full-corpus:no_comment:swap@0.25``. No csbench name holds ``:`` or ``@`` (the
  config schema's name patterns), so the name is unambiguous; the file is ``<task name>.json``, as MTEB
  names it (``:`` is fine on Linux and macOS file systems, not on Windows).
* model ``csbench/<model>`` (the csbench model name: MTEB's ``organisation/model`` form, folder
  ``csbench__<model>``), with ``+<loss>+seed<seed>+<inference>`` for any run other than an untrained
  seed-0 zero-shot one: a trained checkpoint is a model of its own.
* model revision: the run's model parameter ``revision`` (a Hugging Face commit, a user class's
  revision) when its provenance records one, else ``no_revision_available`` (MTEB's own default).
* dataset revision: ``sha256:<hex>``, the canonical SHA-256 of the ``{path: sha256}`` map of the data
  files the run read (its provenance ``inputs`` outside ``results/``: the attacked test split, corpus /
  codebase, qrels), so it names exactly the data scored.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import sqlite3
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from csbench import paths
from csbench.io import canonical_hash, write_json

TASK_PREFIX = "csbench"
SPLIT = "test"  # csbench evaluates a run's test split (BEIR's qrels/test.tsv)
HF_SUBSET = "default"
NO_REVISION = "no_revision_available"  # MTEB's revision folder when a model has none
MODEL_ORG = "csbench"
QUERY_LANGUAGE = "eng-Latn"  # every csbench dataset's queries are English (MTEB's code tasks say so too)
CLEAN = "none"  # the attack / perturbation of untouched data
UNTRAINED = ("none", 0, "zero_shot")  # loss, seed, inference of a model evaluated as it is
# csbench metric -> MTEB's name (mteb/_evaluators/retrieval_metrics.py make_score_dict): `ndcg@10` ->
# `ndcg_at_10` and so on; `r@k` (single-answer recall) is MTEB's recall_at_k too. Others keep their names.
METRIC_PREFIXES = {"ndcg": "ndcg", "map": "map", "recall": "recall", "r": "recall", "p": "precision", "mrr": "mrr"}
_CUT_METRIC = re.compile(r"^(?P<measure>[a-z]+)@(?P<k>[0-9]+)$")
# the main score per protocol: graded (qrels) nDCG@10 as BEIR / MTEB / CoIR; matching accuracy;
# summarization smoothed BLEU-4 (CodeXGLUE code-to-text); every other (single-answer) protocol MRR
MAIN_METRIC = {"qrels": "ndcg@10", "matching": "accuracy", "summarization": "smoothed_bleu4"}
DEFAULT_MAIN_METRIC = "mrr"
COUNT_METRICS = ("n_queries", "n_pairs", "n_positive", "n_unparseable", "seed")  # written as integers
# rows of results.db that are no retrieval score of one query set: IR-AUC (ratio NULL: an area over
# every ratio), robust MRR (perturbation `*`, each query's worst), macro / micro IR-AUC
NOT_EXPORTED_PERTURBATIONS = ("*", "macro", "micro")


def mteb_metric(name: str) -> str:
    """MTEB's name of a csbench metric: ``ndcg@10`` -> ``ndcg_at_10``, ``map@k`` -> ``map_at_k``,
    ``recall@k`` and ``r@k`` -> ``recall_at_k``, ``p@k`` -> ``precision_at_k``, ``mrr@k`` -> ``mrr_at_k``;
    any other (``mrr``, ``mean_rank``, ``accuracy``, ``n_queries``, ...) unchanged."""
    found = _CUT_METRIC.match(name)
    if found and found["measure"] in METRIC_PREFIXES:
        return f"{METRIC_PREFIXES[found['measure']]}_at_{found['k']}"
    return name


def main_metric(protocol: str, metrics: Iterable[str] = ()) -> str:
    """The csbench metric a task's ``main_score`` holds: the protocol's (``MAIN_METRIC``: nDCG@10 for
    ``qrels``, else MRR) where ``metrics`` has it, else MRR (a robustness curve's point holds MRR, and
    nDCG@10 only where the curve was drawn under a graded protocol)."""
    preferred = MAIN_METRIC.get(protocol, DEFAULT_MAIN_METRIC)
    names = set(metrics)
    if not names or preferred in names or DEFAULT_MAIN_METRIC not in names:
        return preferred
    return DEFAULT_MAIN_METRIC


def task_name(dataset: str, protocol: str, attack: str = CLEAN, perturbation: str = CLEAN, ratio=None) -> str:
    """``csbench:<dataset>:<protocol>[:<attack>][:<perturbation>@<ratio>]`` (see the module docstring)."""
    parts = [TASK_PREFIX, dataset, protocol]
    if attack != CLEAN:
        parts.append(attack)
    if perturbation != CLEAN:
        parts.append(f"{perturbation}@{paths.ratio_label(float(ratio))}")
    return ":".join(parts)


def model_name(model: str, loss: str = "none", seed: int = 0, inference: str = "zero_shot") -> str:
    """``csbench/<model>``, with ``+<loss>+seed<seed>+<inference>`` unless the run is untrained
    (loss none, seed 0, zero_shot)."""
    name = f"{MODEL_ORG}/{model}"
    if (loss, int(seed), inference) != UNTRAINED:
        name += f"+{loss}+seed{int(seed)}+{inference}"
    return name


def model_folder(name: str) -> str:
    """The folder of a model name, as MTEB makes it (ResultCache.get_task_result_path)."""
    return name.replace("/", "__").replace(" ", "_")


def languages(language: str | None) -> list[str]:
    """MTEB's language codes of a run: English queries and the code's languages as ``<lang>-Code``
    (``python`` -> ``["eng-Latn", "python-Code"]``; a multi-language pool ``go,java`` gives both)."""
    names = sorted({part.strip() for part in (language or "").split(",") if part.strip()})
    return [QUERY_LANGUAGE, *(f"{name}-Code" for name in names)]


def data_inputs(inputs: Mapping[str, str]) -> dict[str, str]:
    """The data files of a run's provenance ``inputs`` (path -> sha256): those outside ``results/``
    (the index and training records are the model's, not the dataset's)."""
    return {path: digest for path, digest in inputs.items() if Path(path).parts[:1] != (paths.RESULTS,)}


def dataset_revision(inputs: Mapping[str, str]) -> str:
    """``sha256:<hex>``: the canonical hash of the run's data inputs (``data_inputs``)."""
    chosen = data_inputs(inputs)
    if not chosen:
        raise ValueError("the run's provenance names no data file: cannot give its dataset a revision")
    return f"sha256:{canonical_hash(chosen)}"


@dataclass(frozen=True)
class RunInfo:
    """What a task result takes from a run's record besides its scores."""

    inputs: Mapping[str, str]
    wall_s: float | None = None
    created: str | None = None
    model_revision: str | None = None


@dataclass(frozen=True)
class TaskFile:
    """One MTEB task result: where it goes and what it holds."""

    model_name: str
    model_revision: str
    task_name: str
    result: dict

    @property
    def relative_path(self) -> Path:
        return Path(model_folder(self.model_name)) / self.model_revision / f"{self.task_name}.json"


def _value(metric: str, value: object) -> object:
    """A JSON value: None for NaN / NULL, an int for counts, a Python float otherwise."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    value = value.item() if hasattr(value, "item") else value
    if metric in COUNT_METRICS and float(value).is_integer():
        return int(value)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _timestamp(created: str | None) -> float | None:
    """MTEB's ``date``: a POSIX timestamp (TaskResult.to_disk writes it so)."""
    if not created:
        return None
    try:
        return _dt.datetime.fromisoformat(created).timestamp()
    except ValueError:
        return None


def task_files(rows: pd.DataFrame, runs: Mapping[str, RunInfo]) -> list[TaskFile]:
    """The task results of the rows of results.db's ``results`` table (any selection of them): one per
    run, protocol and (perturbation, ratio) point, the clean scores with ratio 0 and every curve point
    with a ratio above 0 (IR-AUC, robust MRR and macro / micro rows are no scores of one query set and
    are left out). ``runs``: each run's record by run id. ValueError when a run has no record, or when
    two rows (of two studies) give one metric two values."""
    groups: dict[tuple, dict] = {}
    for row in rows.to_dict("records"):
        perturbation, ratio = row["perturbation"], _value("ratio", row["ratio"])
        if ratio is None or perturbation in NOT_EXPORTED_PERTURBATIONS:
            continue
        if perturbation != CLEAN and ratio == 0:  # a curve's start: the clean score, exported as such
            continue
        key = (row["run_id"], row["protocol"], perturbation, ratio)
        group = groups.setdefault(key, {"row": row, "studies": [], "metrics": {}})
        if row.get("study") not in group["studies"]:
            group["studies"].append(row.get("study"))
        metric, value = row["metric"], _value(row["metric"], row["value"])
        if metric in group["metrics"] and group["metrics"][metric] != value:
            raise ValueError(
                f"{row['run_id']} {row['protocol']} {metric}: two values ({group['metrics'][metric]}, {value})"
            )
        group["metrics"][metric] = value
    files = []
    for (run_id, protocol, perturbation, ratio), group in groups.items():
        if run_id not in runs:
            raise ValueError(f"run {run_id} has no run record (provenance): cannot export it")
        files.append(_task_file(run_id, protocol, perturbation, ratio, group, runs[run_id]))
    return files


def _metric_order(name: str) -> tuple[str, int]:
    """MTEB's names in its order: by measure, then by cutoff (``ndcg_at_1`` .. ``ndcg_at_1000``)."""
    measure, _, k = name.rpartition("_at_")
    return (measure, int(k)) if measure and k.isdigit() else (name, -1)


def _task_file(run_id: str, protocol: str, perturbation: str, ratio: float, group: dict, info: RunInfo) -> TaskFile:
    row, metrics = group["row"], group["metrics"]
    main = main_metric(protocol, metrics)
    csbench_names = {mteb_metric(metric): metric for metric in metrics}
    if len(csbench_names) < len(metrics):  # e.g. both r@10 and recall@10: one MTEB name for two scores
        raise ValueError(f"{run_id} {protocol}: two metrics of {sorted(metrics)} have one MTEB name")
    scores = {name: metrics[csbench_names[name]] for name in sorted(csbench_names, key=_metric_order)}
    entry = {
        **scores,
        "main_score": metrics.get(main),
        "hf_subset": HF_SUBSET,
        "languages": languages(row.get("language")),
    }
    name = task_name(row["dataset"], protocol, row["attack"], perturbation, ratio)
    model = model_name(row["model"], row["loss"], row["seed"], row["inference"])
    clean = perturbation == CLEAN
    result = {
        "dataset_revision": dataset_revision(info.inputs),
        "task_name": name,
        "mteb_version": None,  # scored by csbench, not by mteb
        "scores": {SPLIT: [entry]},
        "evaluation_time": info.wall_s if clean else None,
        "kg_co2_emissions": None,
        "date": _timestamp(info.created),
        # MTEB's TaskResult ignores keys it does not define: csbench's coordinates of the scores
        "csbench": {
            "version": row.get("csbench_version"),
            "run": run_id,
            "run_path": f"{paths.RESULTS}/runs/{run_id}",
            "studies": group["studies"],
            "dataset": row["dataset"],
            "attack": row["attack"],
            "perturbation": perturbation,
            "ratio": ratio,
            "model": row["model"],
            "loss": row["loss"],
            "seed": _value("seed", row["seed"]),
            "inference": row["inference"],
            "protocol": protocol,
            "main_metric": main,
            "metrics": {name: csbench_names[name] for name in scores},  # MTEB's name -> csbench's
            "git_commit": row.get("git_commit"),
            "params_sha256": row.get("params_sha256"),
            "notes": {
                "dataset_revision": "sha256 of the run's data inputs (provenance.json inputs outside results/)",
                "evaluation_time": "the run's evaluate phase, every protocol (provenance timings_s.total_s)"
                if clean
                else "not recorded per perturbed point",
            },
        },
    }
    return TaskFile(model, info.model_revision or NO_REVISION, name, result)


def model_meta(name: str, revision: str) -> dict:
    """A ``model_meta.json`` that mteb's ``ModelMeta`` validates: the name and revision, every other
    field unknown (None)."""
    unknown = (
        "release_date",
        "languages",
        "n_parameters",
        "memory_usage_mb",
        "max_tokens",
        "embed_dim",
        "license",
        "open_weights",
        "public_training_code",
        "public_training_data",
        "reference",
        "similarity_fn_name",
        "use_instructions",
        "training_datasets",
        "loader",
    )
    return {"name": name, "revision": revision, **dict.fromkeys(unknown), "framework": [], "modalities": ["text"]}


def write_task_files(files: Iterable[TaskFile], out_dir: str | Path) -> list[Path]:
    """Write each task result (and its folder's ``model_meta.json``) under ``out_dir``, atomically;
    the task files' paths, sorted. Files already there for other tasks are left alone."""
    out_dir = Path(out_dir)
    files = list(files)
    seen: set[Path] = set()
    for file in files:  # every coordinate of a run is in its task or model name: a clash is a bug
        if file.relative_path in seen:
            raise ValueError(f"two task results would be written to {out_dir / file.relative_path}")
        seen.add(file.relative_path)
    written, folders = [], {}
    for file in files:
        path = out_dir / file.relative_path
        write_json(path, file.result)
        folders[path.parent] = (file.model_name, file.model_revision)
        written.append(path)
    for folder, (name, revision) in folders.items():
        write_json(folder / "model_meta.json", model_meta(name, revision))
    return sorted(written)


# ------------------------------------------------------------------------------------------------
# Sources: the studies' databases, or run folders


def _provenance_revision(provenance: Mapping) -> str | None:
    revision = ((provenance.get("params") or {}).get("model") or {}).get("revision")
    return str(revision) if revision else None


def run_info(run_dir: Path) -> RunInfo:
    """A run's record from its folder (``provenance.json``)."""
    provenance = json.loads((Path(run_dir) / "provenance.json").read_text(encoding="utf-8"))
    return RunInfo(
        inputs=provenance.get("inputs") or {},
        wall_s=(provenance.get("timings_s") or {}).get("total_s"),
        created=provenance.get("created"),
        model_revision=_provenance_revision(provenance),
    )


def _runs_root(db: Path) -> Path:
    """Where the run folders of a study's database are: results/runs/ beside results/studies/."""
    if db.parent.parent.name == Path(paths.STUDIES).name:
        return db.parent.parent.parent / "runs"
    return Path(paths.RESULTS) / "runs"


def database_runs(db: Path) -> dict[str, RunInfo]:
    """Each run's record from a database's ``runs`` table (its data inputs, wall time, date); the
    model revision from the run's provenance.json where the run folder is still there."""
    con = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)
    try:
        found = con.execute("SELECT run_id, inputs_sha256, wall_s, created FROM runs").fetchall()
    except sqlite3.DatabaseError as err:
        raise ValueError(f"{db} has no readable `runs` table ({err}): run `csbench aggregate` again") from err
    finally:
        con.close()
    root, runs = _runs_root(Path(db)), {}
    for run_id, inputs, wall_s, created in found:
        record = root / run_id / "provenance.json"
        revision = None
        if record.is_file():
            revision = _provenance_revision(json.loads(record.read_text(encoding="utf-8")))
        runs[run_id] = RunInfo(json.loads(inputs) if inputs else {}, wall_s, created, revision)
    return runs


def _is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "metrics.json").is_file()


def export_mteb(
    source: str | Path | Sequence[str | Path], out_dir: str | Path, filters: Mapping[str, Iterable[str]] | None = None
) -> list[Path]:
    """Write MTEB task results of ``source`` under ``out_dir``; the task files written (sorted).

    ``source``: a results.db, several (as ``csbench results`` reads them: every study's), with
    ``filters`` as ``csbench results`` takes them; or run folders (results/runs/<run>/, their clean
    scores only: robustness points come from a database)."""
    from csbench.results.collect import collect, results_rows
    from csbench.results.query import select

    items = [Path(source)] if isinstance(source, (str, Path)) else [Path(s) for s in source]
    if items and all(_is_run_dir(p) for p in items):
        if filters:
            raise ValueError("filters select rows of a database: give run folders or filters, not both")
        scores, run_frame = collect(items)
        rows = pd.DataFrame(results_rows(scores, run_frame))
        runs = {
            str(row["run_id"]): run_info(path) for row, path in zip(run_frame.to_dict("records"), items, strict=True)
        }
    else:
        rows = select(items[0] if len(items) == 1 else items, filters)
        runs = {}
        for db in items:
            runs |= database_runs(db)
    return write_task_files(task_files(rows, runs), out_dir)


def export_command(
    db: str | Path | Sequence[str | Path],
    values: Sequence[str],
    filters: Mapping[str, Iterable[str]],
    pivot: str | None,
) -> int:
    """`csbench results --export mteb DIR`: the task results of the selected rows under DIR, and one
    line on stderr saying how many. ValueError (exit 2) for a missing DIR, a --pivot, or no row."""
    from csbench.results.query import describe

    if len(values) != 1:
        raise ValueError(f"--export mteb takes one folder (DIR), not {len(values)}: --export mteb DIR")
    if pivot:
        raise ValueError("--pivot shapes printed rows: it does not apply to --export mteb")
    written = export_mteb(db, values[0], filters)
    if not written:
        raise ValueError(f"no run score of {describe(db)} matches the filters: nothing exported to {values[0]}")
    print(f"csbench results: {len(written)} MTEB task result(s) written under {values[0]}", file=sys.stderr)
    return 0
