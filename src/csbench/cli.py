"""The csbench command line: one command per pipeline phase.

Snakemake rules, dvc stages and users all run these commands, with the same arguments:

    csbench validate  --config params.yaml [--check-sources]
    csbench download  --config params.yaml --dataset csn-filtered-ruby
    csbench prepare   --config params.yaml --dataset python-stdlib
    csbench audit     --config params.yaml --dataset python-stdlib
    csbench attack    --config params.yaml --dataset python-stdlib --attack no_comment
    csbench evaluate  --config params.yaml --dataset python-stdlib --attack none --model bm25
    csbench aggregate --config params.yaml
    csbench runs      --config params.yaml

``--config`` may be given several times: later files overlay earlier ones (as snakemake's
``--configfile`` does), so ``--config params.yaml --config workflow/configs/tiny.yaml`` runs the
tiny study.

Each phase command holds the project lock while it runs (:mod:`csbench.lock`: refused beside another
driver), reads its inputs only through the stamps their producers wrote, made under this config's
parameters and unchanged since (:mod:`csbench.stamps`, :mod:`csbench.lineage`), and writes its own
stamp last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from csbench import __version__, lineage, paths
from csbench.config import INFERENCE_TYPES, Config, ConfigError, RunKey, check_sources, load_config, matching_notes
from csbench.io import (
    canonical_hash,
    disk_full_message,
    is_disk_full,
    sha256_file,
    write_json,
    write_parquet,
    write_text,
)
from csbench.registry import UnknownNameError
from csbench.stamps import EMBEDDED_KEY, STAMP_FILE, Verified, embedded, verified, write_stamp

log = logging.getLogger("csbench")


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        default=None,
        metavar="FILE",
        help="experiment config; repeat to overlay (default: params.yaml)",
    )


def _config(args: argparse.Namespace) -> Config:
    return load_config(args.config or ["params.yaml"])


def _require(name: str, valid: list[str], kind: str, where: str) -> None:
    if name not in valid:
        raise UnknownNameError(kind, name, valid, where=where)


# ------------------------------------------------------------------------------------------------
# What each phase reads is checked against the stamp its producer wrote (csbench.stamps): made under
# this config's parameters (csbench.lineage), and unchanged since. The commands that re-make it:


def _configs(args: argparse.Namespace) -> str:
    return lineage.config_args(args.config)


def _prepare_command(args: argparse.Namespace, dataset: str) -> str:
    return f"csbench prepare {_configs(args)} --dataset {dataset}"


def _attack_command(args: argparse.Namespace, dataset: str, attack: str) -> str:
    return f"csbench attack {_configs(args)} --dataset {dataset} --attack {attack}"


def _run_command(args: argparse.Namespace, phase: str, run: RunKey) -> str:
    return f"csbench {phase} {_configs(args)} {lineage.run_args(run)}"


def _verified(folder: Path, expected: dict, command: str, producer: str) -> Verified:
    """A producer's folder whose stamp matches ``expected`` (its files are checked as they are read)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is missing: run `{command}` first")
    return verified(folder, expected, lineage.remake(command), producer)


def _prepared(args: argparse.Namespace, config: Config, dataset: str) -> Verified:
    folder = paths.prepared_dir(dataset)
    return _verified(folder, lineage.prepare(config, dataset), _prepare_command(args, dataset), "prepare")


def _attacked(args: argparse.Namespace, config: Config, dataset: str, attack: str) -> Verified:
    folder = paths.attacked_dir(dataset, attack)
    expected = lineage.attack(config, dataset, attack)
    return _verified(folder, expected, _attack_command(args, dataset, attack), "attack")


def _unstamp(folder: Path) -> None:
    """Remove a folder's stamp before its phase rewrites it: a run killed half-way leaves files that
    no stamp vouches for (a reader refuses them), never an old stamp beside new files."""
    (folder / STAMP_FILE).unlink(missing_ok=True)


def _split_names() -> list[str]:
    return [f"{split}.parquet" for split in paths.ALL_SPLITS]


def cmd_validate(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.check_sources:
        check_sources(config)
    runs = config.runs()
    print(f"{'+'.join(config.sources)}: valid; study {config.study!r}, {len(runs)} run(s)")
    for note in matching_notes(config):  # decided by the config: stated up front, not found after the run
        print(note)
    for warning in config.robustness_outside_grid():
        log.warning("%s: not evaluated on perturbed queries (dvc repro needs it in the grid)", warning)
    from csbench.models import remote_code_warnings

    for warning in remote_code_warnings(config):  # a user's choice, but one that runs a model's own code
        log.warning("%s", warning)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    for run in _config(args).runs():
        print(run.path)
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    """The study a config names (`study:`), or with --dir the folder of its summaries, database,
    tables, figures and report (scripts/snakemake.sh writes the report there)."""
    study = _config(args).study
    print(paths.study_dir(study).as_posix() if args.dir else study)
    return 0


def cmd_download(args: argparse.Namespace) -> int:
    from csbench.datasets import DATASETS, LOCAL_SOURCE_KIND

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    target = paths.raw_dir(args.dataset)
    if config.dataset_kind(args.dataset) == LOCAL_SOURCE_KIND:
        check_sources(config)
        options = config.dataset_options(args.dataset)
        manifest = {
            "dataset": args.dataset,
            "kind": LOCAL_SOURCE_KIND,
            "source": options["source"],
            "note": "extracted from source code on this machine by `csbench prepare`; nothing to download",
        }
        write_json(target / "MANIFEST.json", manifest)
        # the download rule's output and the prepare rule's input, as for a release (nothing listed)
        write_text(target / "SHA256SUMS", f"# {args.dataset}: a local corpus (source {options['source']}); no files\n")
        log.info("%s is a local corpus (source %s): nothing to download", args.dataset, options["source"])
        return 0
    from csbench.datasets.download import fetch_dataset

    configs = "".join(f" --config {shlex.quote(c)}" for c in args.config or [])
    manifest = fetch_dataset(
        DATASETS.get(args.dataset),
        target.parent,
        options=config.dataset_options(args.dataset),
        accept_changed=args.accept_changed,
        rehash=args.rehash,
        command=f"csbench download{configs} --dataset {args.dataset}",
        progress=not args.quiet,
    )
    log.info("%s: %d file(s) the reader reads, verified in %s", args.dataset, len(manifest["reads"]), target)
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from csbench.datasets import LOCAL_SOURCE_KIND
    from csbench.datasets.prepare import log_code_layout

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    started = time.perf_counter()
    out = paths.prepared_dir(args.dataset)
    _unstamp(out)
    if config.dataset_kind(args.dataset) == LOCAL_SOURCE_KIND:
        card = _prepare_local(config, args, out)
    else:
        card = _prepare_release(config, args, out)
    card["wall_s"] = round(time.perf_counter() - started, 2)
    write_json(out / "card.json", card)
    write_text(out / "card.md", _card_md(card))
    sums = paths.raw_dir(args.dataset) / "SHA256SUMS"  # what download verified (a local corpus: its note)
    inputs = {sums.as_posix(): sha256_file(sums)} if sums.is_file() else {}
    outputs = [*_split_names(), "card.json", "card.md"]
    if card.get("released_pairs"):
        outputs.append(card["released_pairs"]["file"])
    write_stamp(out, "prepare", lineage.prepare(config, args.dataset), inputs, outputs)
    log_code_layout(args.dataset, card)
    counts = ", ".join(f"{s} {v['pairs']}" for s, v in card["splits"].items())
    log.info("prepared %s: %s in %.1f s", args.dataset, counts, card["wall_s"])
    return 0


def _card_md(card: dict) -> str:
    from csbench.datasets.local import LOCAL_SOURCE_KIND, card_markdown
    from csbench.datasets.prepare import code_layout_markdown, release_card_markdown

    if card["kind"] == LOCAL_SOURCE_KIND:
        return card_markdown(card) + "".join(line + "\n" for line in code_layout_markdown(card))
    return release_card_markdown(card)


def _prepare_local(config: Config, args: argparse.Namespace, out: Path) -> dict:
    from csbench.code.extract import FilterSettings
    from csbench.datasets.local import SplitSettings, build_local_corpus
    from csbench.datasets.prepare import code_layout_of

    check_sources(config)
    extraction = config.section("extraction")
    options = config.dataset_options(args.dataset)
    frame, card = build_local_corpus(
        args.dataset,
        options,
        FilterSettings(extraction["min_query_tokens"], extraction["min_code_lines"]),
        SplitSettings(**extraction["split"]),
        progress=not args.quiet,
        workers=args.jobs,
    )
    for split, file in paths.split_files(out).items():
        records = frame[frame["split"] == split].reset_index(drop=True)
        write_parquet(file, records)
        if split in card["splits"]:
            card["splits"][split]["code_layout"] = code_layout_of(records["language"], records["code"])
    card["params_sha256"] = canonical_hash({"options": options, "extraction": extraction})
    return card


def _prepare_release(config: Config, args: argparse.Namespace, out: Path) -> dict:
    from csbench.datasets import DATASETS
    from csbench.datasets.base import SkipReport
    from csbench.datasets.download import verify_raw
    from csbench.datasets.prepare import SplitWriter
    from csbench.datasets.released_pairs import write_released_pairs

    spec = DATASETS.get(args.dataset)
    raw = paths.raw_dir(args.dataset)
    if spec.reader is None:
        raise ValueError(f"dataset {args.dataset!r} has no query/code pairs to prepare (see its module)")
    options = config.dataset_options(args.dataset)
    # what the reader reads, as the last download recorded it (never a file changed since)
    configs = "".join(f" --config {shlex.quote(c)}" for c in args.config or [])
    source_sha256 = verify_raw(spec, options, raw.parent, f"csbench download{configs} --dataset {args.dataset}")
    report = SkipReport()
    with SplitWriter(out, paths.ALL_SPLITS) as writer:
        for record in spec.reader(raw, options, report):
            writer.add(record)
    splits = {s: writer.stats[s].as_dict() for s in paths.ALL_SPLITS}
    released_pairs = write_released_pairs(spec, raw, options, out)  # GeCS clf pairs, for matching
    mismatches = {
        s: {"expected": n, "prepared": splits.get(s, {}).get("pairs")}
        for s, n in spec.expected_counts.items()
        if splits.get(s, {}).get("pairs") != n
    }
    for split, counts in mismatches.items():
        log.warning(
            "%s %s: %s records prepared, the release documents %s",
            args.dataset,
            split,
            counts["prepared"],
            counts["expected"],
        )
    return {
        "name": spec.name,
        "kind": spec.kind,
        "language": ",".join(spec.languages),
        "description": spec.description,
        "licence": spec.licence,
        "citation": spec.citation,
        "source": spec.homepage or (spec.files[0].urls[0] if spec.files and spec.files[0].urls else ""),
        "repo": spec.name,
        "source_sha256": source_sha256,  # of SHA256SUMS: the files the reader read
        "files": {},
        "skipped_files": {},
        "skipped_records": report.as_dict(),
        "extraction": {},
        "expected_counts": spec.expected_counts,
        "count_mismatches": mismatches,
        "splits": splits,
        "released_pairs": released_pairs,  # None: the release has no labelled matching pairs
        "params_sha256": canonical_hash({"options": options}),
    }


def cmd_audit(args: argparse.Namespace) -> int:
    from csbench.datasets.audit import audit_dataset, card_markdown

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    prepared = paths.prepared_dir(args.dataset)
    source = _prepared(args, config, args.dataset)
    read = ["card.json", *_split_names()]
    for name in read[1:]:
        source.check(name)  # audit_dataset reads them itself
    card = source.json("card.json")
    out = paths.cards_dir(args.dataset)
    _unstamp(out)
    audit = audit_dataset(prepared, workers=args.jobs, progress=not args.quiet)
    write_json(out / "card.json", {"card": card, "audit": audit})
    write_text(out / "card.md", card_markdown(args.dataset, card, audit))
    write_stamp(out, "audit", lineage.prepare(config, args.dataset), source.inputs(read), ["card.json", "card.md"])
    shared = audit["shared_code"].get("test_in_train", {})
    log.info(
        "audited %s: %s test records also in train (exact), %s (near); pool duplicates %s",
        args.dataset,
        shared.get("exact", "n/a"),
        shared.get("near", "n/a"),
        (audit["pool_duplicates"] or {}).get("exact_records", "n/a"),
    )
    return 0


def cmd_attack(args: argparse.Namespace) -> int:
    from csbench.attacks import run_attack

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    _require(args.attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    target = paths.attacked_dir(args.dataset, args.attack)
    source = _prepared(args, config, args.dataset)
    splits = {split: source.frame(file.name) for split, file in paths.split_files(source.folder).items()}
    _unstamp(target)
    attacked, report = run_attack(
        args.attack, splits, config.raw.get("attack_params") or {}, workers=args.jobs, progress=not args.quiet
    )
    for split, frame in attacked.items():
        write_parquet(paths.split_files(target)[split], frame)
    summary = report.as_dict()
    write_json(target / "attack.json", {**summary, "params": config.attack_params(args.attack)})
    expected = lineage.attack(config, args.dataset, args.attack)
    write_stamp(target, "attack", expected, source.inputs(_split_names()), [*_split_names(), "attack.json"])
    for language, row in summary["per_language"].items():
        log.info(
            "attacked %s with %s: %s %s snippets, %s changed, %s renamed, %s not analysable",
            args.dataset,
            args.attack,
            row["snippets"],
            language,
            row["changed"],
            row["renamed"],
            row["analysis_failed"],
        )
        if row["comments_kept_undelimited"]:
            log.warning(
                "%s with %s: %s %s snippets keep a line comment whose end is unknown (code flattened onto one "
                "line: removing or translating it could change code); see attack.json and the dataset card",
                args.dataset,
                args.attack,
                row["comments_kept_undelimited"],
                language,
            )
    for failure in summary["failures"]:
        log.warning("identifier analysis failed (%s, code left unrenamed): %s", failure["language"], failure["error"])
    return 0


def _run_key(args: argparse.Namespace, config: Config) -> RunKey:
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    _require(args.attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    models = list(dict.fromkeys(config.models + config.trained["models"]))
    _require(args.model, models, "model", "--model (not in grid.models or grid.trained.models)")
    run = RunKey.parse(args.dataset, args.attack, args.model, args.loss, args.seed, args.inference)
    if run not in config.runs():
        raise ValueError(
            f"{run.path} is not a run of the config: zero-shot runs (grid.models) have loss none, seed 0, "
            "inference zero_shot; trained runs take their loss, seed and inference from grid.trained"
        )
    return run


def _train_command(args: argparse.Namespace, key) -> str:
    return (
        f"csbench train {_configs(args)} --dataset {key.dataset} --attack {key.attack} --model {key.model} "
        f"--loss {key.loss} --seed {key.seed}"
    )


def _checkpoint(run: RunKey, config: Config, args: argparse.Namespace) -> Path | None:
    """The trained encoder a run evaluates (``best/`` of its training), or None for zero-shot; its
    ``train.json`` must record this config's lineage and the ``best/`` that is there (the files of
    ``best/`` are checked against its ``SHA256SUMS`` when the model is loaded)."""
    from csbench.models.integrity import sums_digest

    if run.training is None:
        return None
    folder = paths.checkpoint_dir(run.training.path)
    best, record_file = folder / "best", folder / "train.json"
    command = _train_command(args, run.training)
    if not best.is_dir() or not record_file.is_file():
        raise FileNotFoundError(f"{best if not best.is_dir() else record_file} is missing: run `{command}` first")
    remake = lineage.remake(command)
    record = json.loads(record_file.read_text())
    stamp = embedded(record, str(record_file), lineage.train(config, run.training), remake, "train")
    if (stamp.get("outputs") or {}).get("best/SHA256SUMS", {}).get("sha256") != sums_digest(best):
        raise ValueError(f"{best}: not the checkpoint {record_file} records (replaced since it was trained): {remake}")
    return best


def _stamp_training(config: Config, key, attacked: Verified) -> None:
    """Record in ``train.json`` (under ``made``) the lineage of the training, the data it read and the
    digest of ``best/SHA256SUMS``; by the main process only (accelerate starts one per device)."""
    from csbench.models.integrity import sums_digest
    from csbench.stamps import record

    if os.environ.get("RANK", "0") != "0":
        return
    folder = paths.checkpoint_dir(key.path)
    data = json.loads((folder / "train.json").read_text())
    best = {"sha256": sums_digest(folder / "best"), "bytes": (folder / "best" / "SHA256SUMS").stat().st_size}
    inputs = attacked.inputs(["train.parquet", "valid.parquet"])
    data[EMBEDDED_KEY] = record("train", lineage.train(config, key), inputs, {"best/SHA256SUMS": best})
    write_json(folder / "train.json", data)


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or fine-tune) one model on a dataset's attacked train split; resumes a killed run."""
    from csbench.config import TrainKey
    from csbench.models.build import new_encoder
    from csbench.train.loop import TrainConfig, train

    config = _config(args)
    key = TrainKey(args.dataset, args.attack, args.model, args.loss, args.seed)
    trained = config.trained
    _require(args.dataset, trained["datasets"], "dataset", "--dataset (not in grid.trained.datasets)")
    _require(args.attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    _require(args.model, trained["models"], "model", "--model (not in grid.trained.models)")
    _require(args.loss, trained["losses"], "loss", "--loss (not in grid.trained.losses)")
    seeds = config.seeds_for(args.dataset)
    if args.seed not in seeds:
        raise ValueError(f"--seed {args.seed} is not among {args.dataset}'s seeds in grid.trained ({seeds})")
    spec = config.model_spec(key.model)
    attacked = _attacked(args, config, key.dataset, key.attack)
    columns = ["query", "code", "language"]
    train_frame = attacked.frame("train.parquet", columns=columns)
    valid_frame = attacked.frame("valid.parquet", columns=columns)
    if spec.family == "cross":
        _train_cross(args, config, key, spec, train_frame, valid_frame)
        _stamp_training(config, key, attacked)
        return 0
    regime = config.training_params(key.model)
    max_valid = regime.pop("max_valid", None)
    if max_valid is not None:
        valid_frame = valid_frame.iloc[:max_valid]
    train_config = TrainConfig.from_dict(
        {**regime, "seed": key.seed, "loss": key.loss, "loss_params": config.loss_params(key.loss)}
    )
    log.info("training %s: %d train / %d valid pairs; %s", key.path, len(train_frame), len(valid_frame), train_config)
    params = config.model_params(key.model)
    encoder = new_encoder(spec, params, train_frame, key.seed)
    out = paths.checkpoint_dir(key.path)
    result = train(encoder, train_frame, valid_frame, train_config, out, progress=not args.quiet, resume=True)
    shutil.rmtree(out / "state", ignore_errors=True)  # only needed to resume; train.json is written
    _stamp_training(config, key, attacked)
    log.info(
        "%s: best validation MRR %.4f at step %s (%s)", key.path, result.best_mrr, result.best_step, result.stop_reason
    )
    return 0


def _train_cross(args, config, key, spec, train_frame: pd.DataFrame, valid_frame: pd.DataFrame) -> int:
    """Fine-tune a cross-encoder as GeCS did (one drawn negative per positive, CE over its two
    logits); its regime is GeCS's for the model, overridden by ``models.<name>.training`` only
    (the COBE regime under ``training:`` is for bi-encoders)."""
    from csbench.models.build import new_encoder
    from csbench.models.cross import CROSS_MODELS
    from csbench.train.cross_loop import CrossTrainConfig, train_cross

    own = dict((config.raw["models"].get(key.model) or {}).get("training") or {})
    max_valid = own.pop("max_valid", None)
    if max_valid is not None:
        valid_frame = valid_frame.iloc[:max_valid]
    regime = {**CROSS_MODELS[key.model.removesuffix("-cross")].get("training", {}), **own, "seed": key.seed}
    train_config = CrossTrainConfig.from_dict(regime)
    log.info("training %s: %d train / %d valid pairs; %s", key.path, len(train_frame), len(valid_frame), train_config)
    model = new_encoder(spec, config.model_params(key.model), train_frame, key.seed)
    result = train_cross(model, train_frame, valid_frame, train_config, paths.checkpoint_dir(key.path), not args.quiet)
    if result.best_accuracy is None:  # no validation split: the last model, as GeCS's script
        log.info("%s: trained without validation, the last model kept (%s)", key.path, result.stop_reason)
    else:
        log.info("%s: best validation accuracy %.4f (%s)", key.path, result.best_accuracy, result.stop_reason)
    return 0


def _read_pools(attacked: Verified, protocols: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """The test pool, the codebase, and the validation split when a matching protocol needs it (it
    chooses its threshold there), each checked against the attacked folder's stamp as it is read."""
    from csbench.evaluate.runner import matching_protocols

    valid = attacked.frame("valid.parquet") if matching_protocols(protocols) else None
    return attacked.frame("test.parquet"), attacked.frame(f"{paths.POOL_SPLIT}.parquet"), valid


def _index_model(run: RunKey, config: Config, attacked: Verified) -> dict:
    """What a run's index is built from (csbench.lineage.index_model): recorded in ``index.json``,
    compared on every read, so an index of another model, checkpoint or data is refused."""
    return lineage.index_model(config, run, attacked.inputs(lineage.pool_names(config.protocols)))


def _index_remake(run: RunKey) -> str:
    """How to re-make a run's index (the end of every message about a bad one)."""
    return (
        f"delete {paths.index_dir(run.path)} and re-run `csbench index` for {run.path} "
        "(snakemake / dvc repro re-make it; from a DVC remote: `make pull` again)"
    )


def _load_index(run: RunKey, config: Config, args: argparse.Namespace, attacked: Verified):
    """The run's saved index, its files checked against their ``SHA256SUMS`` and its model and data
    against the config's before anything is read (no pickle: .npy arrays and JSON); its neural model
    is rebuilt from the config on first use."""
    from csbench.evaluate.runner import load_pool_index
    from csbench.models.build import model_loader

    file = paths.index_file(run.path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: run `csbench index` for {run.path} first")
    best = _checkpoint(run, config, args)
    model = _index_model(run, config, attacked)
    loader = model_loader(config.model_spec(run.model), config.model_params(run.model), best)
    index = load_pool_index(paths.index_dir(run.path), model, loader, _index_remake(run))
    return index, file


def cmd_index(args: argparse.Namespace) -> int:
    """Encode (index) the run's candidate pools once; evaluate and robust reuse the saved index
    (a folder of .npy arrays and JSON with its SHA256SUMS: csbench.evaluate.runner.PoolIndex.save)."""
    from csbench.evaluate.runner import build_index
    from csbench.models.build import retriever_factory

    config = _config(args)
    run = _run_key(args, config)
    params = config.model_params(run.model)
    attacked = _attacked(args, config, run.dataset, run.attack)
    pool, codebase, valid = _read_pools(attacked, config.protocols)
    factory = retriever_factory(config.model_spec(run.model), params, _checkpoint(run, config, args))
    index = build_index(factory, pool, config.protocols, codebase, valid)
    index.save(paths.index_dir(run.path), _index_model(run, config, attacked))
    log.info("%s: encoded %s in %.1f s", run.path, ", ".join(index.retrievers), index.index_s)
    return 0


# COBE's efficiency axis, in every run record (training figures are added for trained runs)
EFFICIENCY_KEYS = ("index_s", "index_codes_per_s", "search_s", "query_latency_ms_p50", "query_latency_ms_p95")


def _matching_setup(args: argparse.Namespace, config: Config, run: RunKey, index):
    """How the run's ``matching`` gets its pairs and decides them (``evaluation.match_pairs``,
    ``evaluation.match_threshold``), and the files read for it (for the stamp): the release's
    labelled pairs from the prepared folder, where prepare wrote them; for a borrowed threshold,
    the other dataset's validation split (same attack), encoded now by the run's model."""
    from csbench.datasets.released_pairs import RELEASED_PAIRS_FILE
    from csbench.evaluate.runner import MatchingSetup, gecs_special_tokens, has_valid
    from csbench.models.build import retriever_factory

    if not config.matching_protocols:
        return None, {}
    rule = config.match_rule
    inputs: dict[str, str] = {}
    released = None
    prepared = _prepared(args, config, run.dataset) if config.has_released_pairs(run.dataset) else None
    if prepared is not None and prepared.has(RELEASED_PAIRS_FILE):
        released = prepared.frame(RELEASED_PAIRS_FILE)
        inputs |= prepared.inputs([RELEASED_PAIRS_FILE])
    borrowed = None
    if rule.kind == "borrowed" and config.model_spec(run.model).family != "cross":
        other = _attacked(args, config, str(rule.dataset), run.attack)
        frame = other.frame("valid.parquet")
        if not has_valid(frame):
            raise ValueError(f"evaluation.match_threshold: {rule.dataset}'s validation split has {len(frame)} records")
        retriever = retriever_factory(
            config.model_spec(run.model), config.model_params(run.model), _checkpoint(run, config, args)
        )()
        retriever.index(frame)
        borrowed = (frame, retriever)
        inputs |= other.inputs(["valid.parquet"])
    pairs = str(config.section("evaluation").get("match_pairs", "auto"))
    tokens = gecs_special_tokens(index.retrievers["test"]) if released is not None else ()
    return MatchingSetup(released, pairs, rule, borrowed, tokens), inputs


def cmd_evaluate(args: argparse.Namespace) -> int:
    from csbench.evaluate.runner import DEFAULT_MEMORY_MB, MatchingOutcome, search, trec_bytes
    from csbench.io import atomic_open
    from csbench.provenance import provenance

    config = _config(args)
    run = _run_key(args, config)
    model_params = config.model_params(run.model)
    evaluation = config.section("evaluation")
    attacked = _attacked(args, config, run.dataset, run.attack)
    files = paths.split_files(attacked.folder)
    test_file, codebase_file, valid_file = files["test"], files[paths.POOL_SPLIT], files["valid"]
    out = paths.run_dir(run.path)
    _unstamp(out)
    index, index_file = _load_index(run, config, args, attacked)
    started = time.perf_counter()
    pool, codebase, valid = _read_pools(attacked, evaluation["protocols"])
    run_name = f"csbench-{run.model}-{run.attack}"
    setup, matching_inputs = _matching_setup(args, config, run, index)
    outcomes, timings = search(
        index,
        pool,
        evaluation["protocols"],
        evaluation["run_depth"],
        run_name,
        progress=not args.quiet,
        codebase=codebase,
        valid=valid,
        memory_mb=float(evaluation.get("memory_mb", DEFAULT_MEMORY_MB)),
        matching_setup=setup,
    )
    written = ["ranks.tsv", "provenance.json", "metrics.json"]
    scores, protocol_info = [], {}
    ranks_lines = ["protocol\tquery_id\trank\tcandidates\ttop1"]
    for name, outcome in outcomes.items():
        metrics = outcome.metrics()
        scores += [{"protocol": name, "metric": k, "value": v} for k, v in metrics.items()]
        protocol_info[name] = {"note": outcome.plan_note, "n_queries": metrics["n_queries"]}
        if isinstance(outcome, MatchingOutcome):
            protocol_info[name] |= outcome.record()  # released or drawn pairs, and the decision rule
            header = "query_id\tcode_id\tlabel\tscore\tdecision"
            write_text(out / f"{name}.tsv", "\n".join([header, *outcome.lines()]) + "\n")
            written.append(f"{name}.tsv")
            continue
        ranks_lines += [
            f"{name}\t{q}\t{r}\t{c}\t{t}"
            for q, r, c, t in zip(outcome.query_ids, outcome.ranks, outcome.n_candidates, outcome.top1, strict=True)
        ]
        with atomic_open(out / f"run.{name}.trec.gz", "wb") as handle:
            handle.write(trec_bytes(outcome.run_lines))
        written.append(f"run.{name}.trec.gz")
        if outcome.plan_note:
            log.warning("%s %s: %s", run.path, name, outcome.plan_note)
    write_text(out / "ranks.tsv", "\n".join(ranks_lines) + "\n")
    language = ",".join(sorted(pool["language"].unique()))
    timings["total_s"] = round(time.perf_counter() - started, 3)
    params = {"model": model_params, "evaluation": evaluation}
    index_sums = paths.index_dir(run.path) / "SHA256SUMS"  # the digests of every file of the index
    inputs = [test_file, codebase_file, index_file, index_sums] + ([valid_file] if valid is not None else [])
    inputs += [Path(name) for name in matching_inputs]  # released pairs, a borrowed threshold's split
    efficiency = {k: timings.get(k) for k in EFFICIENCY_KEYS}
    if run.training is not None:
        record_file = paths.checkpoint_dir(run.training.path) / "train.json"
        inputs.append(record_file)
        record = json.loads(record_file.read_text())
        params["training"] = record.get("config")
        efficiency |= {
            "train_s": record.get("train_seconds"),
            "train_samples_per_s": record.get("samples_per_second"),
            "train_steps": record.get("steps"),
            "best_valid_mrr": record.get("best_mrr"),
            "train_stop_reason": record.get("stop_reason"),
        }
    write_json(
        out / "provenance.json",
        provenance(
            phase="evaluate", params=params, inputs=inputs, seed=run.seed, timings=timings, efficiency=efficiency
        ),
    )
    write_json(
        out / "metrics.json",
        {
            "run": {"study": config.study, "language": language, **run.as_dict()},
            "scores": scores,
            "protocols": protocol_info,
        },
    )
    stamp_inputs = attacked.inputs(lineage.pool_names(evaluation["protocols"])) | matching_inputs
    for file in (index_file, index_sums, *([record_file] if run.training is not None else [])):
        stamp_inputs[file.as_posix()] = sha256_file(file)
    write_stamp(out, "evaluate", lineage.run(config, run), stamp_inputs, written)
    summary = ", ".join(_headline(name, outcome.metrics()) for name, outcome in outcomes.items())
    log.info("%s: %s (%d test records, %.1f s)", run.path, summary, len(pool), timings["total_s"])
    return 0


def _headline(protocol: str, metrics: dict) -> str:
    """``<protocol> MRR 0.1234`` (or accuracy for matching) for the log."""
    key = "accuracy" if "accuracy" in metrics else "mrr"
    value = metrics.get(key)
    return f"{protocol} {key if key == 'accuracy' else 'MRR'} {value:.4f}" if value is not None else f"{protocol} n/a"


def cmd_perturb(args: argparse.Namespace) -> int:
    """A dataset's perturbed query sets: one perturbation at every ratio of ``robustness.ratios``
    (one set, at ratio 1, for a fixed perturbation such as ``question``), or at ``--ratio`` only."""
    from csbench.perturbations import PERTURBATIONS, check_ratio, perturb, ratios_for

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    PERTURBATIONS.check(args.perturbation, where="--perturbation")
    if args.ratio is not None:
        ratios: tuple[float, ...] = (check_ratio(float(args.ratio)),)
    else:
        ratios = ratios_for(args.perturbation, config.robustness.get("ratios", []))
        if not ratios:
            raise ValueError("robustness.ratios is empty: give --ratio")
    prepared = _prepared(args, config, args.dataset)
    frame = prepared.frame("test.parquet", columns=["id", "query"])
    seed = int(config.robustness.get("seed", 0))
    folder = paths.perturbed_file(args.dataset, args.perturbation, 0).parent.parent
    expected = lineage.perturb(config, args.dataset, args.perturbation)
    kept = _kept_outputs(folder, expected) if args.ratio is not None else {}
    _unstamp(folder)
    written = []
    for ratio in tqdm(ratios, desc=f"{args.dataset} {args.perturbation}", unit="ratio", disable=args.quiet):
        queries = perturb(frame["query"].tolist(), frame["id"].tolist(), args.perturbation, ratio, seed)
        out = pd.DataFrame({"id": frame["id"], "query": queries, "original": frame["query"]})
        file = paths.perturbed_file(args.dataset, args.perturbation, ratio)
        write_parquet(file, out)
        written.append(file.relative_to(folder).as_posix())
        changed = int((out["query"] != out["original"]).sum())
        log.info(
            "%s %s@%s: %d of %d queries changed",
            args.dataset,
            args.perturbation,
            paths.ratio_label(ratio),
            changed,
            len(out),
        )
    write_stamp(folder, "perturb", expected, prepared.inputs(["test.parquet"]), written, keep=kept)
    return 0


def _kept_outputs(folder: Path, expected: dict) -> dict:
    """The outputs an earlier run of the same lineage recorded in ``folder``'s stamp (a run that
    writes some of the files, ``--ratio``, keeps the others listed as they were recorded)."""
    from csbench.stamps import StampError

    if not (folder / STAMP_FILE).is_file():
        return {}
    try:
        return dict(verified(folder, expected, "", "perturb").outputs)
    except StampError:
        return {}


def robust_points(config, perturbation: str | None = None, ratio: str | None = None) -> list[tuple[str, float]]:
    """The points of the robustness curves (``Config.perturbation_points``), or those of one
    perturbation and / or one ratio; ``ValueError`` when the selection is empty."""
    from csbench.perturbations import check_ratio

    points = config.perturbation_points()
    if perturbation is not None:
        points = [(p, r) for p, r in points if p == perturbation]
    if ratio is not None:
        wanted = check_ratio(float(ratio))
        points = [(p, r) for p, r in points if check_ratio(r) == wanted]
    if not points:
        listed = ", ".join(f"{p}@{paths.ratio_label(r)}" for p, r in config.perturbation_points()) or "none"
        raise ValueError(f"no robustness point matches --perturbation / --ratio (the config lists: {listed})")
    return points


def cmd_robust(args: argparse.Namespace) -> int:
    """The points of a run's robustness curves: its model on every perturbed query set of the config
    (or on those --perturbation / --ratio select). The pools are read and the index loaded once."""
    from csbench.evaluate.runner import DEFAULT_MEMORY_MB, search

    config = _config(args)
    run = _run_key(args, config)
    points = robust_points(config, args.perturbation, args.ratio)
    protocol = config.robustness.get("protocol", "full-corpus")
    seed = int(config.robustness.get("seed", 0))
    memory_mb = float(config.section("evaluation").get("memory_mb", DEFAULT_MEMORY_MB))
    files = {point: paths.perturbed_file(run.dataset, *point) for point in points}
    absent = [str(f) for f in files.values() if not f.is_file()]
    if absent:
        raise FileNotFoundError(f"{', '.join(absent)} missing: run `csbench perturb` first")
    attacked = _attacked(args, config, run.dataset, run.attack)
    query_sets = {
        p: _verified(
            files[(p, r)].parent.parent,
            lineage.perturb(config, run.dataset, p),
            f"csbench perturb {_configs(args)} --dataset {run.dataset} --perturbation {p}",
            "perturb",
        )
        for p, r in points
    }
    out = paths.robustness_dir(run.path) / "points"
    expected = lineage.robust(config, run)
    kept = _kept_outputs(out, expected) if args.perturbation is not None or args.ratio is not None else {}
    _unstamp(out)
    index, _ = _load_index(run, config, args, attacked)
    pool, codebase = attacked.frame("test.parquet"), attacked.frame(f"{paths.POOL_SPLIT}.parquet")
    inputs = attacked.inputs(["test.parquet", f"{paths.POOL_SPLIT}.parquet"])
    written = []
    for (perturbation, ratio), queries_file in tqdm(
        files.items(), desc=f"{run.path} robustness", unit="point", disable=args.quiet
    ):
        name = queries_file.relative_to(query_sets[perturbation].folder).as_posix()
        perturbed = query_sets[perturbation].frame(name).set_index("id")["query"]
        inputs[queries_file.as_posix()] = query_sets[perturbation].digest(name)
        missing = set(pool["id"]) - set(perturbed.index)
        if missing:
            raise ValueError(f"{queries_file} lacks {len(missing)} test queries of {run.dataset}/{run.attack}")
        outcomes, _ = search(
            index,
            pool,
            [protocol],
            1,
            "robust",
            queries=perturbed.loc[pool["id"]].tolist(),
            progress=False,
            codebase=codebase,
            memory_mb=memory_mb,
            latency=False,  # the point records no timings
        )
        outcome = outcomes[protocol]
        point_file = paths.robust_point_file(run.path, perturbation, ratio)
        written.append(point_file.relative_to(out).as_posix())
        write_json(
            point_file,
            {
                "run": run.as_dict(),
                "perturbation": perturbation,
                "ratio": ratio,
                "seed": seed,
                "protocol": protocol,
                "metrics": outcome.metrics(),
                "note": outcome.plan_note,
                "queries": {"id": outcome.query_ids, "rank": outcome.ranks, "top1": outcome.top1},
            },
        )
        mrr = outcome.metrics()["mrr"]
        log.info(
            "%s %s@%s: %s MRR %s",
            run.path,
            perturbation,
            paths.ratio_label(ratio),
            protocol,
            f"{mrr:.4f}" if outcome.ranks else "n/a",
        )
    # (not the index's SHA256SUMS: index.json holds its encoding time; this stamp is the same under
    # both drivers, as the points are)
    write_stamp(out, "robust", expected, inputs, written, keep=kept)
    return 0


def cmd_robustness(args: argparse.Namespace) -> int:
    """The robustness curves, IR-AUC, robust MRR and flip rates of one run, and their plot."""
    from csbench.evaluate.robust_report import robustness_record
    from csbench.results.plots import plot_robustness
    from csbench.stamps import record as stamp_record

    config = _config(args)
    run = _run_key(args, config)
    command = _run_command(args, "evaluate", run)
    clean = _verified(paths.run_dir(run.path), lineage.run(config, run), command, "evaluate")
    points = _verified(
        paths.robustness_dir(run.path) / "points",
        lineage.robust(config, run),
        _run_command(args, "robust", run),
        "robust",
    )
    files = [paths.robust_point_file(run.path, *point) for point in config.perturbation_points()]
    names = [file.relative_to(points.folder).as_posix() for file in files]
    inputs = {(clean.folder / "ranks.tsv").as_posix(): clean.check("ranks.tsv")}
    inputs |= {(points.folder / name).as_posix(): points.check(name) for name in names}
    record = robustness_record(run, config)  # reads the files just checked
    record[EMBEDDED_KEY] = stamp_record("robustness", lineage.robustness(config, run), inputs)
    out = paths.robustness_dir(run.path)
    write_json(out / "robustness.json", record)
    plot_robustness(record, out / "robustness.png")
    log.info(
        "%s: IR-AUC macro %.4f, micro %s",
        run.path,
        record["summary"]["macro_ir_auc"],
        "n/a" if record["summary"]["micro_ir_auc"] is None else f"{record['summary']['micro_ir_auc']:.4f}",
    )
    return 0


def cmd_dataset_table(args: argparse.Namespace) -> int:
    """GeCS Table 1 (csbench.results.dataset_table) from the prepared test split of every dataset of the
    grid and the reference set, into results/studies/<study>/dataset_table/gecs_datasets.{md,csv,json}."""
    from csbench.results.dataset_table import (
        DIR_NAME,
        caption,
        count_tokens,
        load_tokenizer,
        shift_rows,
        write_shift_table,
    )

    config = _config(args)
    table = config.dataset_table
    if table is None:
        raise ValueError(f"{'+'.join(config.sources)}: no dataset_table section: nothing to build")
    tokenizer = load_tokenizer(table["tokenizer"])
    reference, split = table["reference"], table["reference_split"]
    columns = ["query", "code"]

    def stats(dataset: str, split: str):
        frame = _prepared(args, config, dataset).frame(f"{split}.parquet", columns=columns)
        return count_tokens(dataset, split, frame["query"].tolist(), frame["code"].tolist(), tokenizer)

    rows = shift_rows(stats(reference, split), [stats(dataset, "test") for dataset in config.datasets])
    text = caption(table["tokenizer"], reference, split)
    out = paths.study_dir(config.study) / DIR_NAME
    write_shift_table(out, rows, text, {"study": config.study, **table})
    log.info("dataset table of %d test sets against %s %s (%s) in %s/", len(config.datasets), reference, split,
             table["tokenizer"], out)  # fmt: skip
    return 0


def cmd_aggregate(args: argparse.Namespace) -> int:
    from csbench.results.report import aggregate

    config = _config(args)
    _check_aggregated(args, config)
    run_dirs = [paths.run_dir(run.path) for run in config.runs()]
    cards = {name: paths.cards_dir(name) / "card.json" for name in config.datasets}
    robustness = {run.path: paths.robustness_dir(run.path) / "robustness.json" for run in config.robustness_runs()}
    stability = stability_records(config, robustness)
    trainings = {key.path: paths.checkpoint_dir(key.path) / "train.json" for key in config.trainings()}
    out = paths.study_dir(config.study)
    shared = Path(paths.RESULTS)
    table = aggregate(run_dirs, out, config.study, cards, robustness, stability, trainings, shared_dir=shared)
    log.info("aggregated %d runs (%d rows) of study %r into %s/", len(run_dirs), len(table), config.study, out)
    return 0


def _check_aggregated(args: argparse.Namespace, config: Config) -> None:
    """Every record the study's aggregate reads, checked against its stamp first: run records (each
    file its stamp lists), dataset cards, robustness records and training records, all made under
    this config's parameters and unchanged since (a record of another study is refused, not summed)."""
    for run in config.runs():
        expected = lineage.run(config, run)
        records = _verified(paths.run_dir(run.path), expected, _run_command(args, "evaluate", run), "evaluate")
        for name in records.outputs:
            records.check(name)
    for dataset in config.datasets:
        command = f"csbench audit {_configs(args)} --dataset {dataset}"
        _verified(paths.cards_dir(dataset), lineage.prepare(config, dataset), command, "audit").check("card.json")
    for run in config.robustness_runs():
        file = paths.robustness_dir(run.path) / "robustness.json"
        if file.is_file():
            remake = lineage.remake(_run_command(args, "robustness", run))
            embedded(json.loads(file.read_text()), str(file), lineage.robustness(config, run), remake, "robustness")
    for key in config.trainings():
        file = paths.checkpoint_dir(key.path) / "train.json"
        if file.is_file():
            remake = lineage.remake(_train_command(args, key))
            embedded(json.loads(file.read_text()), str(file), lineage.train(config, key), remake, "train")


def stability_records(config, robustness_files: dict[str, Path]) -> dict[str, dict]:
    """Seed stability of every trained configuration with 2+ seeds (COBE V-E): its record and
    heatmap under results/studies/<study>/stability/<group>/, and index.json there listing them."""
    from csbench.evaluate.stability import seed_stability
    from csbench.results.plots import plot_seed_heatmap

    settings = config.stability
    records: dict[str, dict] = {}
    for group, runs in config.stability_groups():
        ir_auc = {}
        for run in runs:
            file = robustness_files.get(run.path)
            if file is not None and file.is_file():
                ir_auc[run.seed] = json.loads(file.read_text())
        record = seed_stability(
            {run.seed: paths.run_dir(run.path) for run in runs},
            settings["protocol"],
            k=int(settings["k"]),
            ir_auc=ir_auc or None,
        )
        out = paths.stability_dir(config.study, group.path)
        write_json(out / "stability.json", record)
        plot_seed_heatmap(record, out / "heatmap.png")
        records[group.path] = record
    write_json(paths.stability_dir(config.study) / "index.json", {"settings": settings, "groups": sorted(records)})
    return records


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge config files (a study overlaid on params.yaml) into one validated YAML document: the
    params.yaml of that study under `dvc repro`, which has no overlays. Written atomically, so
    ``--output params.yaml`` may be one of the inputs."""
    from csbench.config import dvc_limitations, merged_yaml

    config = _config(args)
    notes = dvc_limitations(config)
    if notes and not args.force:
        raise ConfigError(
            f"{'+'.join(config.sources)}: dvc.yaml cannot run this study as snakemake does: {'; '.join(notes)}. "
            "Run it with `snakemake --configfile`, or pass --force to write the merged file anyway"
        )
    for note in notes:
        log.warning("not expressible in dvc.yaml: %s", note)
    text = merged_yaml(config)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="csbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"csbench {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check the config (and source directories) and exit")
    _add_config(p)
    p.add_argument("--check-sources", action="store_true", help="also check local source directories")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("runs", help="list the run paths the config asks for")
    _add_config(p)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("study", help="print the config's study name, or the folder of its results")
    _add_config(p)
    p.add_argument("--dir", action="store_true", help="print results/studies/<study> instead of the name")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("merge", help="merge config files (a study over params.yaml) into one, for dvc repro")
    _add_config(p)
    p.add_argument("--output", metavar="FILE", help="write there, atomically (default: stdout)")
    p.add_argument("--force", action="store_true", help="write even what dvc.yaml cannot run as snakemake does")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser(
        "download", help="fetch and verify what a release's reader reads into data/raw/ (or check files put there)"
    )
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument(
        "--accept-changed",
        action="store_true",
        help="record files the reader reads that changed since MANIFEST.json recorded them (else an error); "
        "a file with a pinned checksum must still match it",
    )
    p.add_argument(
        "--rehash",
        action="store_true",
        help="measure every checksum again, even of files whose size and modification time are unchanged",
    )
    p.set_defaults(func=cmd_download)

    p = sub.add_parser("prepare", help="build a dataset in the common schema under data/prepared/")
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("audit", help="dataset card and leakage audit into results/datasets/")
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("attack", help="apply a code attack to every split of a prepared dataset")
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--attack", required=True, help="an attack spec of grid.attacks, e.g. ordered_id+translation")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.set_defaults(func=cmd_attack)

    def run_args(p: argparse.ArgumentParser) -> None:
        _add_config(p)
        p.add_argument("--dataset", required=True)
        p.add_argument("--attack", required=True)
        p.add_argument("--model", required=True)
        p.add_argument("--loss", default="none")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument(
            "--inference",
            default="zero_shot",
            help=f"{', '.join(INFERENCE_TYPES)}; a model trained on another dataset: confused@<dataset> "
            "(grid.trained.evaluate_on)",
        )

    p = sub.add_parser("train", help="train / fine-tune a model on a dataset's attacked train split")
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--attack", required=True, help="the attack of the training data (not_confused runs: no_comment)")
    p.add_argument("--model", required=True)
    p.add_argument("--loss", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("index", help="encode (index) a run's candidate pools once, for evaluate and robust")
    run_args(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("evaluate", help="retrieve the test split with a model under every protocol")
    run_args(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("perturb", help="a dataset's perturbed query sets of one perturbation, at every ratio (COBE)")
    _add_config(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--perturbation", required=True)
    p.add_argument("--ratio", help="one noise ratio in [0, 1] (default: every ratio of robustness.ratios; question: 1)")
    p.set_defaults(func=cmd_perturb)

    p = sub.add_parser("robust", help="evaluate a run's model on every perturbed query set (the curve points)")
    run_args(p)
    p.add_argument("--perturbation", help="only this perturbation's points")
    p.add_argument("--ratio", help="only the points at this ratio")
    p.set_defaults(func=cmd_robust)

    p = sub.add_parser("robustness", help="robustness curves, IR-AUC, robust MRR, flip rate and plot of a run")
    run_args(p)
    p.set_defaults(func=cmd_robustness)

    p = sub.add_parser(
        "aggregate", help="build the study's results.db, summary, tables and figures in results/studies/<study>/"
    )
    _add_config(p)
    p.set_defaults(func=cmd_aggregate)

    p = sub.add_parser(
        "dataset-table",
        help="GeCS Table 1: tokens and token-distribution shift of each test set (config dataset_table)",
    )
    _add_config(p)
    p.set_defaults(func=cmd_dataset_table)

    p = sub.add_parser(
        "challenge",
        help="score CodeSearchNet Challenge predictions (NDCG Within / All, as its relevanceeval.py)",
        description="Score a predictions CSV in the Challenge's submission format (columns language, "
        "query, url; rows in rank order per query) against the expert annotations.",
    )
    p.add_argument("--predictions", required=True, type=Path, help="CSV: query,language,identifier,url")
    p.add_argument(
        "--annotations",
        type=Path,
        default=Path("data/raw/csn-challenge/annotationStore.csv"),
        help="annotationStore.csv (default: where `csbench download --dataset csn-challenge` puts it)",
    )
    p.add_argument("--cutoff", type=int, default=300, help="predictions kept per query (default 300)")
    p.add_argument("--json", type=Path, help="also write the scores here")
    p.set_defaults(func=cmd_challenge)

    p = sub.add_parser(
        "challenge-predict",
        help="rank the CodeSearchNet Challenge queries with a model and write the submission file (predict.py)",
        description="Rank the 99 Challenge queries over a corpus per language with a zero-shot model and write "
        "query,language,identifier,url rows, the top --top-k per query and language, as CodeSearchNet's "
        "predict.py does. Corpus per language: the released <lang>_dedupe_definitions_v2.pkl under "
        "data/raw/csn-<lang>/ when present (opened only once its SHA-256 matches a pin), else the prepared "
        "local corpus (python-stdlib, go-stdlib, javascript-node, java-jdk, php-libs, ruby-stdlib).",
    )
    _add_config(p)
    p.add_argument("--model", required=True, help="a zero-shot model of the registry (bm25, minilm, ...)")
    p.add_argument("--output", required=True, type=Path, help="the predictions CSV to write")
    p.add_argument(
        "--queries",
        type=Path,
        default=Path("data/raw/csn-challenge/queries.csv"),
        help="queries.csv (default: where `csbench download --dataset csn-challenge` puts it)",
    )
    p.add_argument("--languages", help="comma-separated languages (default: all six, in predict.py's order)")
    p.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="LANG=SOURCE",
        help="the corpus of a language: 'release' (its dedupe_definitions_v2.pkl) or a prepared dataset name",
    )
    p.add_argument(
        "--pin", action="append", default=[], metavar="LANG=SHA256", help="the SHA-256 of a definitions file you trust"
    )
    p.add_argument("--top-k", type=int, default=100, help="results per query and language (default 100)")
    p.add_argument("--annotations", type=Path, help="annotationStore.csv: score the file once written")
    p.add_argument("--json", type=Path, help="also write what was ranked (and the scores) here")
    p.set_defaults(func=cmd_challenge_predict)

    from csbench.results.query import FILTER_COLUMNS, FORMATS, STUDIES_DIR

    p = sub.add_parser(
        "results",
        help="query the studies' results.db: filter, print as a table / CSV / JSON, pivot, export",
        description="Rows of the `results` table of the studies' databases (one per study, dataset, language, "
        "attack, perturbation, ratio, model, loss, seed, inference, protocol and metric). Without --db: "
        f"every study's {STUDIES_DIR}/<study>/results.db read as one table, or only those --study names. "
        "Each filter may be repeated and takes a comma-separated list; --ratio none selects rows without "
        "a ratio (IR-AUC).",
    )
    p.add_argument(
        "--db", type=Path, help=f"one database file (default: every study's, {STUDIES_DIR}/<study>/results.db)"
    )
    for column in FILTER_COLUMNS:
        p.add_argument(f"--{column}", action="append", metavar="V[,V...]", help="keep these values (repeatable)")
    p.add_argument("--format", choices=FORMATS, default="table", help="stdout format (default: table)")
    p.add_argument("--pivot", metavar="COLUMN", help="one column per value of this key column, e.g. metric")
    p.add_argument("--export", type=Path, metavar="FILE", help="write the rows to FILE.csv / .parquet / .json")
    p.set_defaults(func=cmd_results)
    return parser


def cmd_results(args: argparse.Namespace) -> int:
    """Print (or export) the rows of results.db's `results` table that the filters select."""
    from csbench.results.query import FILTER_COLUMNS, describe, export, pivot, render, select, study_databases

    filters = {c: getattr(args, c) for c in FILTER_COLUMNS if getattr(args, c)}
    db = args.db if args.db is not None else study_databases(args.study or ())
    frame = select(db, filters)
    if args.pivot:
        frame = pivot(frame, args.pivot)
    if frame.empty:
        print(f"csbench results: no row of {describe(db)} matches the filters", file=sys.stderr)
    if args.export:
        export(frame, args.export)
        print(f"csbench results: {len(frame)} row(s) written to {args.export}", file=sys.stderr)
    else:
        sys.stdout.write(render(frame, args.format))
    return 0


def cmd_challenge(args: argparse.Namespace) -> int:
    """NDCG Within / All and coverage per language of a Challenge predictions file."""
    scored = _score_challenge(args.predictions, args.annotations, args.cutoff)
    if args.json:
        write_json(args.json, scored)
    return 0


def _score_challenge(predictions_file: Path, annotations: Path, cutoff: int) -> dict:
    """Print the NDCG Within / All and coverage per language of a predictions file; the figures."""
    from csbench.datasets.releases.csn_challenge import load_annotations
    from csbench.evaluate.challenge import challenge_ndcg, coverage, load_predictions, load_relevances

    relevances = load_relevances(load_annotations(annotations))
    predictions = load_predictions(predictions_file)
    scores = challenge_ndcg(predictions, relevances, cutoff=cutoff)
    covered = coverage(predictions, relevances, cutoff=cutoff)
    print("language\tqueries\tndcg_within\tndcg_all\tcoverage")
    for language, row in scores.items():
        cells = [row["within"], row["all"], covered.get(language)]
        text = ["n/a" if v is None else f"{v:.4f}" for v in cells]
        print(f"{language}\t{row['queries']}\t" + "\t".join(text))
    return {"cutoff": cutoff, "ndcg": scores, "coverage": covered}


def _pairs(values: list[str], what: str) -> dict[str, str]:
    """``LANG=VALUE`` options as a dict (a language given twice is an error)."""
    out: dict[str, str] = {}
    for value in values:
        language, sep, rest = value.partition("=")
        if not sep or not language.strip() or not rest.strip():
            raise ValueError(f"{what} {value!r}: expected LANG=VALUE")
        if language.strip() in out:
            raise ValueError(f"{what}: language {language.strip()!r} given twice")
        out[language.strip()] = rest.strip()
    return out


def cmd_challenge_predict(args: argparse.Namespace) -> int:
    """Rank the Challenge queries over each language's corpus and write the predictions file
    (csbench.evaluate.submission, as CodeSearchNet's predict.py)."""
    from csbench.datasets.base import SPLITS
    from csbench.datasets.releases.csn_challenge import SPEC as CHALLENGE
    from csbench.datasets.releases.csn_challenge import load_queries
    from csbench.evaluate import submission as sub
    from csbench.models.build import retriever_factory

    config = _config(args)
    spec = config.model_spec(args.model)
    if not spec.zero_shot or spec.family == "cross":
        raise ValueError(
            f"model {args.model!r} ({spec.family}) needs a training: challenge-predict ranks with zero-shot "
            "bi-encoders and lexical models"
        )
    languages = [x.strip() for x in args.languages.split(",")] if args.languages else list(sub.CSN_LANGUAGES)
    for language in languages:
        _require(language, list(sub.CSN_LANGUAGES), "language", "--languages")
    sources, pins = _pairs(args.corpus, "--corpus"), _pairs(args.pin, "--pin")
    for language in (*sources, *pins):
        _require(language, languages, "language", "--corpus / --pin (not among --languages)")
    queries = load_queries(args.queries)
    pinned = next(f.sha256 for f in CHALLENGE.files if f.path == "queries.csv")
    queries_sha = sha256_file(args.queries)
    if queries_sha != pinned:
        log.warning("%s: not the released queries.csv (SHA-256 %s, released %s)", args.queries, queries_sha, pinned)
    corpora, described = {}, {}
    for language in languages:
        definitions = paths.raw_dir(f"csn-{language}") / sub.DEFINITIONS_FILE.format(language=language)
        source = sources.get(language) or (sub.RELEASE if definitions.is_file() else sub.LOCAL_CORPORA[language])
        if source == sub.RELEASE:
            sha = pins.get(language) or sub.DEFINITIONS_SHA256[language]
            corpora[language] = sub.read_definitions(definitions, sha, language)
            described[language] = {"source": definitions.as_posix(), "sha256": sha}
        else:
            prepared = _prepared(args, config, source)
            if config.dataset_options(source).get("language") not in (None, language):
                raise ValueError(f"--corpus {language}={source}: {source!r} is a corpus of another language")
            names = [f"{split}.parquet" for split in SPLITS]
            corpora[language] = sub.local_corpus_frame((prepared.frame(n) for n in names), language)
            described[language] = {"source": source, "inputs": prepared.inputs(names)}
        described[language]["records"] = len(corpora[language])
        log.info("challenge %s: %d records from %s", language, len(corpora[language]), source)
    factory = retriever_factory(spec, config.model_params(args.model))
    started = time.perf_counter()
    frame = sub.predict(queries, corpora, factory(), k=args.top_k)
    sub.write_submission(frame, args.output)
    check = sub.check_submission(args.output, queries, {k: len(v) for k, v in corpora.items()}, k=args.top_k)
    rows = ", ".join(f"{lang} {n}" for lang, n in check.rows.items())
    log.info("wrote %s: %d lines (%s) in %.1f s", args.output, check.lines, rows, time.perf_counter() - started)
    record = {
        "model": args.model,
        "top_k": args.top_k,
        "queries": {"file": args.queries.as_posix(), "sha256": queries_sha, "count": len(queries)},
        "corpora": described,
        "output": {"file": args.output.as_posix(), "lines": check.lines, "rows": check.rows},
    }
    if args.annotations:
        record["scores"] = _score_challenge(args.output, args.annotations, cutoff=300)
    if args.json:
        write_json(args.json, record)
    return 0


# The commands that read or write the project's data: each holds the project lock (csbench.lock) while
# it runs, shared with the other jobs of its driver's session, refused beside another driver's.
PHASE_COMMANDS = frozenset(
    {"download", "prepare", "audit", "attack", "train", "index", "evaluate"}
    | {"perturb", "robust", "robustness", "aggregate", "challenge-predict", "dataset-table"}
)


def _project_lock(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """The project lock for a phase command (and for ``merge --output``, which may rewrite the
    params.yaml a running driver's jobs read); nothing for the commands that only read."""
    if args.command in PHASE_COMMANDS or (args.command == "merge" and args.output):
        from csbench.lock import held

        return held(f"csbench {args.command}")
    return contextlib.nullcontext()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s csbench %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
    try:
        with _project_lock(args):
            return args.func(args)
    except (ConfigError, UnknownNameError, FileNotFoundError, ValueError, RuntimeError) as err:
        message = err.message if isinstance(err, UnknownNameError) else str(err)
        print(f"csbench {args.command}: error: {message}", file=sys.stderr)
        return 2
    except OSError as err:  # a full disk: one line (the file, the space it needs), not a traceback
        if not is_disk_full(err):
            raise
        print(f"csbench {args.command}: error: {disk_full_message(err)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
