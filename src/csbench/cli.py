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
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import pandas as pd
from tqdm import tqdm

from csbench import __version__, paths
from csbench.config import INFERENCE_TYPES, Config, ConfigError, RunKey, check_sources, load_config
from csbench.io import canonical_hash, write_json, write_parquet, write_text
from csbench.registry import UnknownNameError

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


def cmd_validate(args: argparse.Namespace) -> int:
    config = _config(args)
    if args.check_sources:
        check_sources(config)
    runs = config.runs()
    print(f"{'+'.join(config.sources)}: valid; study {config.study!r}, {len(runs)} run(s)")
    for warning in config.robustness_outside_grid():
        log.warning("%s: not evaluated on perturbed queries (dvc repro needs it in the grid)", warning)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    for run in _config(args).runs():
        print(run.path)
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
        log.info("%s is a local corpus (source %s): nothing to download", args.dataset, options["source"])
        return 0
    from csbench.datasets.download import fetch_dataset

    manifest = fetch_dataset(DATASETS.get(args.dataset), target.parent, progress=not args.quiet)
    log.info("%s: %d file(s) present and verified in %s", args.dataset, len(manifest.get("files", [])), target)
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from csbench.datasets import LOCAL_SOURCE_KIND

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    started = time.perf_counter()
    out = paths.prepared_dir(args.dataset)
    if config.dataset_kind(args.dataset) == LOCAL_SOURCE_KIND:
        card = _prepare_local(config, args, out)
    else:
        card = _prepare_release(config, args, out)
    card["wall_s"] = round(time.perf_counter() - started, 2)
    write_json(out / "card.json", card)
    write_text(out / "card.md", _card_md(card))
    counts = ", ".join(f"{s} {v['pairs']}" for s, v in card["splits"].items())
    log.info("prepared %s: %s in %.1f s", args.dataset, counts, card["wall_s"])
    return 0


def _card_md(card: dict) -> str:
    from csbench.datasets.local import LOCAL_SOURCE_KIND, card_markdown
    from csbench.datasets.prepare import release_card_markdown

    return card_markdown(card) if card["kind"] == LOCAL_SOURCE_KIND else release_card_markdown(card)


def _prepare_local(config: Config, args: argparse.Namespace, out: Path) -> dict:
    from csbench.code.extract import FilterSettings
    from csbench.datasets.local import SplitSettings, build_local_corpus

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
        write_parquet(file, frame[frame["split"] == split].reset_index(drop=True))
    card["params_sha256"] = canonical_hash({"options": options, "extraction": extraction})
    return card


def _prepare_release(config: Config, args: argparse.Namespace, out: Path) -> dict:
    from csbench.datasets import DATASETS
    from csbench.datasets.base import SkipReport
    from csbench.datasets.prepare import SplitWriter

    spec = DATASETS.get(args.dataset)
    raw = paths.raw_dir(args.dataset)
    if not (raw / "MANIFEST.json").is_file():
        raise FileNotFoundError(f"{raw}/MANIFEST.json is missing: run `csbench download --dataset {args.dataset}`")
    if spec.reader is None:
        raise ValueError(f"dataset {args.dataset!r} has no query/code pairs to prepare (see its module)")
    options = config.dataset_options(args.dataset)
    report = SkipReport()
    with SplitWriter(out, paths.ALL_SPLITS) as writer:
        for record in spec.reader(raw, options, report):
            writer.add(record)
    splits = {s: writer.stats[s].as_dict() for s in paths.ALL_SPLITS}
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
        "source_sha256": canonical_hash(json.loads((raw / "MANIFEST.json").read_text())),
        "files": {},
        "skipped_files": {},
        "skipped_records": report.as_dict(),
        "extraction": {},
        "expected_counts": spec.expected_counts,
        "count_mismatches": mismatches,
        "splits": splits,
        "params_sha256": canonical_hash({"options": options}),
    }


def cmd_audit(args: argparse.Namespace) -> int:
    from csbench.datasets.audit import audit_dataset, card_markdown

    config = _config(args)
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    prepared = paths.prepared_dir(args.dataset)
    card_file = prepared / "card.json"
    if not card_file.is_file():
        raise FileNotFoundError(f"{card_file} is missing: run `csbench prepare --dataset {args.dataset}` first")
    card = json.loads(card_file.read_text())
    audit = audit_dataset(prepared, workers=args.jobs, progress=not args.quiet)
    out = paths.cards_dir(args.dataset)
    write_json(out / "card.json", {"card": card, "audit": audit})
    write_text(out / "card.md", card_markdown(args.dataset, card, audit))
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
    source, target = paths.prepared_dir(args.dataset), paths.attacked_dir(args.dataset, args.attack)
    splits = {}
    for split, file in paths.split_files(source).items():
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench prepare --dataset {args.dataset}` first")
        splits[split] = pd.read_parquet(file)
    attacked, report = run_attack(
        args.attack, splits, config.raw.get("attack_params") or {}, workers=args.jobs, progress=not args.quiet
    )
    for split, frame in attacked.items():
        write_parquet(paths.split_files(target)[split], frame)
    summary = report.as_dict()
    write_json(target / "attack.json", {**summary, "params": config.attack_params(args.attack)})
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
    for failure in summary["failures"]:
        log.warning("identifier analysis failed (%s, code left unrenamed): %s", failure["language"], failure["error"])
    return 0


def _run_key(args: argparse.Namespace, config: Config) -> RunKey:
    _require(args.dataset, config.datasets, "dataset", "--dataset (not in grid.datasets)")
    _require(args.attack, config.attacks, "attack", "--attack (not in grid.attacks)")
    models = list(dict.fromkeys(config.models + config.trained["models"]))
    _require(args.model, models, "model", "--model (not in grid.models or grid.trained.models)")
    run = RunKey(args.dataset, args.attack, args.model, args.loss, args.seed, args.inference)
    if run not in config.runs():
        raise ValueError(
            f"{run.path} is not a run of the config: zero-shot runs (grid.models) have loss none, seed 0, "
            "inference zero_shot; trained runs take their loss, seed and inference from grid.trained"
        )
    return run


def _checkpoint(run: RunKey) -> Path | None:
    """The trained encoder a run evaluates (``best/`` of its training), or None for zero-shot."""
    if run.training is None:
        return None
    best = paths.checkpoint_dir(run.training.path) / "best"
    if not best.is_dir():
        raise FileNotFoundError(f"{best} is missing: run `csbench train` for {run.training.path} first")
    return best


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
    folder = paths.attacked_dir(key.dataset, key.attack)
    files = paths.split_files(folder)
    for split in ("train", "valid"):
        if not files[split].is_file():
            raise FileNotFoundError(f"{files[split]} is missing: run `csbench attack` for {key.dataset}/{key.attack}")
    columns = ["query", "code", "language"]
    train_frame = pd.read_parquet(files["train"], columns=columns)
    valid_frame = pd.read_parquet(files["valid"], columns=columns)
    if spec.family == "cross":
        return _train_cross(args, config, key, spec, train_frame, valid_frame)
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
    log.info("%s: best validation accuracy %.4f (%s)", key.path, result.best_accuracy, result.stop_reason)
    return 0


def _pools(run: RunKey) -> tuple[Path, Path, Path]:
    """The run's test, codebase and validation files (the last for a matching protocol's threshold)."""
    files = paths.split_files(paths.attacked_dir(run.dataset, run.attack))
    chosen = files["test"], files[paths.POOL_SPLIT], files["valid"]
    for file in chosen[:2]:  # the validation file is checked when a matching protocol reads it
        if not file.is_file():
            raise FileNotFoundError(f"{file} is missing: run `csbench attack` for {run.dataset}/{run.attack} first")
    return chosen


def _read_pools(run: RunKey, protocols: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """The test pool, the codebase, and the validation split when a matching protocol needs it."""
    from csbench.evaluate.runner import matching_protocols

    test_file, codebase_file, valid_file = _pools(run)
    valid = None
    if matching_protocols(protocols):
        if not valid_file.is_file():
            raise FileNotFoundError(
                f"{valid_file} is missing (matching chooses its threshold on it): run `csbench attack`"
            )
        valid = pd.read_parquet(valid_file)
    return pd.read_parquet(test_file), pd.read_parquet(codebase_file), valid


def _load_index(run: RunKey):
    import pickle

    file = paths.index_file(run.path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: run `csbench index` for {run.path} first")
    with open(file, "rb") as handle:
        return pickle.load(handle), file


def cmd_index(args: argparse.Namespace) -> int:
    """Encode (index) the run's candidate pools once; evaluate and robust reuse the pickle."""
    import pickle

    from csbench.evaluate.runner import build_index
    from csbench.io import atomic_open
    from csbench.models.build import retriever_factory

    config = _config(args)
    run = _run_key(args, config)
    params = config.model_params(run.model)
    pool, codebase, valid = _read_pools(run, config.protocols)
    factory = retriever_factory(config.model_spec(run.model), params, _checkpoint(run))
    index = build_index(factory, pool, config.protocols, codebase, valid)
    with atomic_open(paths.index_file(run.path), "wb") as handle:
        pickle.dump(index, handle, protocol=5)
    log.info("%s: encoded %s in %.1f s", run.path, ", ".join(index.retrievers), index.index_s)
    return 0


# COBE's efficiency axis, in every run record (training figures are added for trained runs)
EFFICIENCY_KEYS = ("index_s", "index_codes_per_s", "search_s", "query_latency_ms_p50", "query_latency_ms_p95")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from csbench.evaluate.runner import DEFAULT_MEMORY_MB, MatchingOutcome, search, trec_bytes
    from csbench.io import atomic_open
    from csbench.provenance import provenance

    config = _config(args)
    run = _run_key(args, config)
    model_params = config.model_params(run.model)
    evaluation = config.section("evaluation")
    test_file, codebase_file, valid_file = _pools(run)
    index, index_file = _load_index(run)
    started = time.perf_counter()
    pool, codebase, valid = _read_pools(run, evaluation["protocols"])
    run_name = f"csbench-{run.model}-{run.attack}"
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
    )
    out = paths.run_dir(run.path)
    scores, protocol_info = [], {}
    ranks_lines = ["protocol\tquery_id\trank\tcandidates\ttop1"]
    for name, outcome in outcomes.items():
        metrics = outcome.metrics()
        scores += [{"protocol": name, "metric": k, "value": v} for k, v in metrics.items()]
        protocol_info[name] = {"note": outcome.plan_note, "n_queries": metrics["n_queries"]}
        if isinstance(outcome, MatchingOutcome):
            header = "query_id\tcode_id\tlabel\tscore\tdecision"
            write_text(out / f"{name}.tsv", "\n".join([header, *outcome.lines()]) + "\n")
            continue
        ranks_lines += [
            f"{name}\t{q}\t{r}\t{c}\t{t}"
            for q, r, c, t in zip(outcome.query_ids, outcome.ranks, outcome.n_candidates, outcome.top1, strict=True)
        ]
        with atomic_open(out / f"run.{name}.trec.gz", "wb") as handle:
            handle.write(trec_bytes(outcome.run_lines))
        if outcome.plan_note:
            log.warning("%s %s: %s", run.path, name, outcome.plan_note)
    write_text(out / "ranks.tsv", "\n".join(ranks_lines) + "\n")
    language = ",".join(sorted(pool["language"].unique()))
    timings["total_s"] = round(time.perf_counter() - started, 3)
    params = {"model": model_params, "evaluation": evaluation}
    inputs = [test_file, codebase_file, index_file] + ([valid_file] if valid is not None else [])
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
    test_file = paths.split_files(paths.prepared_dir(args.dataset))["test"]
    if not test_file.is_file():
        raise FileNotFoundError(f"{test_file} is missing: run `csbench prepare --dataset {args.dataset}` first")
    frame = pd.read_parquet(test_file, columns=["id", "query"])
    seed = int(config.robustness.get("seed", 0))
    for ratio in tqdm(ratios, desc=f"{args.dataset} {args.perturbation}", unit="ratio", disable=args.quiet):
        queries = perturb(frame["query"].tolist(), frame["id"].tolist(), args.perturbation, ratio, seed)
        out = pd.DataFrame({"id": frame["id"], "query": queries, "original": frame["query"]})
        write_parquet(paths.perturbed_file(args.dataset, args.perturbation, ratio), out)
        changed = int((out["query"] != out["original"]).sum())
        log.info(
            "%s %s@%s: %d of %d queries changed",
            args.dataset,
            args.perturbation,
            paths.ratio_label(ratio),
            changed,
            len(out),
        )
    return 0


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
    test_file, codebase_file, _ = _pools(run)
    index, _ = _load_index(run)
    pool, codebase = pd.read_parquet(test_file), pd.read_parquet(codebase_file)
    for (perturbation, ratio), queries_file in tqdm(
        files.items(), desc=f"{run.path} robustness", unit="point", disable=args.quiet
    ):
        perturbed = pd.read_parquet(queries_file).set_index("id")["query"]
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
        write_json(
            paths.robust_point_file(run.path, perturbation, ratio),
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
    return 0


def cmd_robustness(args: argparse.Namespace) -> int:
    """The robustness curves, IR-AUC, robust MRR and flip rates of one run, and their plot."""
    from csbench.evaluate.robust_report import robustness_record
    from csbench.results.plots import plot_robustness

    config = _config(args)
    run = _run_key(args, config)
    record = robustness_record(run, config)
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


def cmd_aggregate(args: argparse.Namespace) -> int:
    from csbench.results.report import aggregate

    config = _config(args)
    run_dirs = [paths.run_dir(run.path) for run in config.runs()]
    cards = {name: paths.cards_dir(name) / "card.json" for name in config.datasets}
    robustness = {run.path: paths.robustness_dir(run.path) / "robustness.json" for run in config.robustness_runs()}
    stability = stability_records(config, robustness)
    trainings = {key.path: paths.checkpoint_dir(key.path) / "train.json" for key in config.trainings()}
    table = aggregate(run_dirs, Path(paths.RESULTS), config.study, cards, robustness, stability, trainings)
    log.info("aggregated %d runs (%d rows) into %s/summary.md", len(run_dirs), len(table), paths.RESULTS)
    return 0


def stability_records(config, robustness_files: dict[str, Path]) -> dict[str, dict]:
    """Seed stability of every trained configuration with 2+ seeds (COBE V-E): its record and
    heatmap under results/stability/<group>/, and results/stability/index.json listing them."""
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
        out = paths.stability_dir(group.path)
        write_json(out / "stability.json", record)
        plot_seed_heatmap(record, out / "heatmap.png")
        records[group.path] = record
    write_json(Path(paths.STABILITY) / "index.json", {"settings": settings, "groups": sorted(records)})
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

    p = sub.add_parser("merge", help="merge config files (a study over params.yaml) into one, for dvc repro")
    _add_config(p)
    p.add_argument("--output", metavar="FILE", help="write there, atomically (default: stdout)")
    p.add_argument("--force", action="store_true", help="write even what dvc.yaml cannot run as snakemake does")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("download", help="fetch and verify a release into data/raw/ (or check files put there)")
    _add_config(p)
    p.add_argument("--dataset", required=True)
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
        p.add_argument("--inference", default="zero_shot", choices=INFERENCE_TYPES)

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

    p = sub.add_parser("aggregate", help="build results/results.db and results/summary.{md,csv}")
    _add_config(p)
    p.set_defaults(func=cmd_aggregate)

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

    from csbench.results.query import DEFAULT_DB, FILTER_COLUMNS, FORMATS

    p = sub.add_parser(
        "results",
        help="query results/results.db: filter, print as a table / CSV / JSON, pivot, export",
        description="Rows of the `results` table of results.db (one per study, dataset, language, attack, "
        "perturbation, ratio, model, loss, seed, inference, protocol and metric). Each filter may be "
        "repeated and takes a comma-separated list; --ratio none selects rows without a ratio (IR-AUC).",
    )
    p.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"the database (default: {DEFAULT_DB})")
    for column in FILTER_COLUMNS:
        p.add_argument(f"--{column}", action="append", metavar="V[,V...]", help="keep these values (repeatable)")
    p.add_argument("--format", choices=FORMATS, default="table", help="stdout format (default: table)")
    p.add_argument("--pivot", metavar="COLUMN", help="one column per value of this key column, e.g. metric")
    p.add_argument("--export", type=Path, metavar="FILE", help="write the rows to FILE.csv / .parquet / .json")
    p.set_defaults(func=cmd_results)
    return parser


def cmd_results(args: argparse.Namespace) -> int:
    """Print (or export) the rows of results.db's `results` table that the filters select."""
    from csbench.results.query import FILTER_COLUMNS, export, pivot, render, select

    filters = {c: getattr(args, c) for c in FILTER_COLUMNS if getattr(args, c)}
    frame = select(args.db, filters)
    if args.pivot:
        frame = pivot(frame, args.pivot)
    if frame.empty:
        print(f"csbench results: no row of {args.db} matches the filters", file=sys.stderr)
    if args.export:
        export(frame, args.export)
        print(f"csbench results: {len(frame)} row(s) written to {args.export}", file=sys.stderr)
    else:
        sys.stdout.write(render(frame, args.format))
    return 0


def cmd_challenge(args: argparse.Namespace) -> int:
    """NDCG Within / All and coverage per language of a Challenge predictions file."""
    from csbench.datasets.releases.csn_challenge import load_annotations
    from csbench.evaluate.challenge import challenge_ndcg, coverage, load_predictions, load_relevances

    relevances = load_relevances(load_annotations(args.annotations))
    predictions = load_predictions(args.predictions)
    scores = challenge_ndcg(predictions, relevances, cutoff=args.cutoff)
    covered = coverage(predictions, relevances, cutoff=args.cutoff)
    print("language\tqueries\tndcg_within\tndcg_all\tcoverage")
    for language, row in scores.items():
        cells = [row["within"], row["all"], covered.get(language)]
        text = ["n/a" if v is None else f"{v:.4f}" for v in cells]
        print(f"{language}\t{row['queries']}\t" + "\t".join(text))
    if args.json:
        write_json(args.json, {"cutoff": args.cutoff, "ndcg": scores, "coverage": covered})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s csbench %(levelname)s %(message)s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
    try:
        return args.func(args)
    except (ConfigError, UnknownNameError, FileNotFoundError, ValueError, RuntimeError) as err:
        message = err.message if isinstance(err, UnknownNameError) else str(err)
        print(f"csbench {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
