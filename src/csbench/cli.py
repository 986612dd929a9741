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

This module is argparse and dispatch: each phase command makes one call to its function in
:mod:`csbench.phases` (:data:`PHASES`), which does the work. Each phase command holds the project
lock while it runs (:mod:`csbench.lock`: refused beside another driver), reads its inputs only
through the stamps their producers wrote, made under this config's parameters and unchanged since
(:mod:`csbench.stamps`, :mod:`csbench.lineage`), and writes its own stamp last.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from csbench import __version__, paths
from csbench.config import INFERENCE_TYPES, ConfigError, RunKey, TrainKey, check_sources, load_config, matching_notes
from csbench.io import disk_full_message, is_disk_full, write_text
from csbench.phases import Context
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


def _context(args: argparse.Namespace) -> Context:
    """The config the command names (params.yaml by default) and how the phase should run."""
    config = load_config(args.config or ["params.yaml"])
    files = tuple(args.config) if args.config else None
    return Context(config, files, progress=not args.quiet, jobs=getattr(args, "jobs", 1))


def _run_key(args: argparse.Namespace, ctx: Context) -> RunKey:
    from csbench.phases.inputs import run_key

    return run_key(ctx.config, args.dataset, args.attack, args.model, args.loss, args.seed, args.inference)


# ------------------------------------------------------------------------------------------------
# The commands about the config itself


def cmd_validate(args: argparse.Namespace) -> int:
    config = _context(args).config
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
    from csbench.config import keyless_warnings

    for warning in keyless_warnings(config):  # api.missing_key: skip
        log.warning("%s", warning)
    return 0


def cmd_api_estimate(args: argparse.Namespace) -> int:
    """What the study's endpoint models would send (requests, tokens, cost), from the attacked splits
    and the response cache; nothing is sent."""
    from csbench.api.study import endpoint_lines, study_estimates

    config = _context(args).config
    lines = endpoint_lines(config)
    if not lines:
        print(f"{'+'.join(config.sources)}: no endpoint model (family api or llm) in grid.models")
        return 0
    for line in lines[:-1]:
        print(line)
    for estimate in study_estimates(config):
        for line in estimate.describe():
            print(line)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    for run in _context(args).config.runs():
        print(run.path)
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    """The study a config names (`study:`), or with --dir the folder of its summaries, database,
    tables, figures and report (scripts/snakemake.sh writes the report there)."""
    study = _context(args).config.study
    print(paths.study_dir(study).as_posix() if args.dir else study)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Merge config files (a study overlaid on params.yaml) into one validated YAML document: the
    params.yaml of that study under `dvc repro`, which has no overlays. Written atomically, so
    ``--output params.yaml`` may be one of the inputs."""
    from csbench.config import dvc_limitations, merged_yaml

    config = _context(args).config
    notes = dvc_limitations(config)
    if notes and not args.force:
        raise ConfigError(
            f"{'+'.join(config.sources)}: dvc.yaml cannot run this study as snakemake does: {'; '.join(notes)}. "
            "Run it with `snakemake --configfile`, or pass --force to write the merged file anyway"
        )
    for note in notes:
        log.warning("not expressible in dvc.yaml: %s", note)
    from csbench.config import keyless_warnings

    for warning in keyless_warnings(config):  # the merged file lacks them: merge again with the key set
        log.warning("%s", warning)
    text = merged_yaml(config)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0


# ------------------------------------------------------------------------------------------------
# The pipeline's phases (csbench.phases): one call each


def _submission(args: argparse.Namespace):
    """What ``challenge-predict`` ranks and writes, from its options."""
    from csbench.phases.challenge import Submission

    languages = tuple(x.strip() for x in args.languages.split(",")) if args.languages else ()
    corpus, pins = tuple(args.corpus), tuple(args.pin)
    return Submission(
        args.model, args.output, args.queries, languages, corpus, pins, args.top_k, args.annotations, args.json
    )


# Each phase command, one call: the module of csbench.phases, its function, and the key (and options) it is
# called with after the Context, from the parsed command line.
PHASES: dict[str, tuple[str, str, Callable[[argparse.Namespace, Context], tuple]]] = {
    "download": ("download", "download", lambda a, ctx: (a.dataset, a.accept_changed, a.rehash)),
    "prepare": ("prepare", "prepare", lambda a, ctx: (a.dataset,)),
    "audit": ("audit", "audit", lambda a, ctx: (a.dataset,)),
    "attack": ("attack", "attack", lambda a, ctx: (a.dataset, a.attack, a.batch_rows)),
    "train": ("train", "train", lambda a, ctx: (TrainKey(a.dataset, a.attack, a.model, a.loss, a.seed),)),
    "index": ("index", "index", lambda a, ctx: (_run_key(a, ctx),)),
    "encode-shard": ("index", "encode_shard", lambda a, ctx: (_run_key(a, ctx), a.shard, a.shards)),
    "evaluate": ("evaluate", "evaluate", lambda a, ctx: (_run_key(a, ctx),)),
    "summarize": ("summarize", "summarize", lambda a, ctx: (_run_key(a, ctx),)),
    "perturb": ("perturb", "perturb", lambda a, ctx: (a.dataset, a.perturbation, a.ratio)),
    "robust": ("robust", "robust", lambda a, ctx: (_run_key(a, ctx), a.perturbation, a.ratio)),
    "robustness": ("robustness", "robustness", lambda a, ctx: (_run_key(a, ctx),)),
    "aggregate": ("aggregate", "aggregate", lambda a, ctx: ()),
    "dataset-table": ("dataset_table", "dataset_table", lambda a, ctx: ()),
    "challenge-predict": ("challenge", "challenge_predict", lambda a, ctx: (_submission(a),)),
}


def run_phase(args: argparse.Namespace) -> int:
    """Run a phase command: load the config, then one call to its function in csbench.phases."""
    module, function, key = PHASES[args.command]
    ctx = _context(args)
    phase = getattr(importlib.import_module(f"csbench.phases.{module}"), function)
    phase(ctx, *key(args, ctx))
    return 0


def cmd_challenge(args: argparse.Namespace) -> int:
    """NDCG Within / All and coverage per language of a Challenge predictions file."""
    from csbench.phases.challenge import score

    scored = score(args.predictions, args.annotations, args.cutoff)
    if args.json:
        from csbench.io import write_json

        write_json(args.json, scored)
    return 0


def cmd_challenge_beir(args: argparse.Namespace) -> int:
    """Write the Challenge's queries, annotations (as graded qrels) and a corpus as a BEIR folder."""
    from csbench.datasets.challenge_beir import write_challenge_beir

    made = write_challenge_beir(args.queries, args.annotations, args.corpus, args.language, args.out, args.max_docs)
    print(
        f"csbench challenge-beir: {made['folder']}: {made['queries']} queries, {made['judgements']} judgements of "
        f"{made['judged_documents']} {made['language']} functions ({made['judged_documents_in_corpus']} of them in the "
        f"corpus of {made['documents']}); read it with `datasets: {{<name>: {{kind: beir, path: {made['folder']}, "
        f"language: {made['language']}}}}}`",
        file=sys.stderr,
    )
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    """Inspect, empty or trim the embedding cache (csbench.cache.embeddings)."""
    import json

    from csbench.cache.embeddings import EmbeddingCache, format_stats

    cache = EmbeddingCache(args.root)
    if args.action == "stats":
        stats = cache.stats()
        sys.stdout.write(json.dumps(stats, indent=2) + "\n" if args.json else format_stats(stats))
    elif args.action == "clear":
        removed = cache.clear(args.namespace)
        print(f"csbench cache: {removed} shard file(s) removed from {cache.root}")
    else:
        if args.max_bytes is None:
            raise ValueError("cache evict needs --max-bytes")
        removed = cache.evict(args.max_bytes)
        print(f"csbench cache: {len(removed)} least recently used shard file(s) removed from {cache.root}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    """Print (or export) the rows of results.db's `results` table that the filters select."""
    from csbench.results.query import FILTER_COLUMNS, describe, export, pivot, render, select, study_databases

    filters = {c: getattr(args, c) for c in FILTER_COLUMNS if getattr(args, c)}
    db = args.db if args.db is not None else study_databases(args.study or ())
    if args.export and args.export[0] == "mteb":  # `--export mteb DIR`: MTEB task results, not rows
        from csbench.results.mteb_export import export_command

        return export_command(db, args.export[1:], filters, args.pivot)
    if args.export and len(args.export) != 1:
        raise ValueError(f"--export takes FILE or `mteb DIR`, not {' '.join(args.export)}")
    frame = select(db, filters)
    if args.pivot:
        frame = pivot(frame, args.pivot)
    if frame.empty:
        print(f"csbench results: no row of {describe(db)} matches the filters", file=sys.stderr)
    if args.export:
        export(frame, args.export[0])
        print(f"csbench results: {len(frame)} row(s) written to {args.export[0]}", file=sys.stderr)
    else:
        sys.stdout.write(render(frame, args.format))
    return 0


# ------------------------------------------------------------------------------------------------
# The parser


def _command(sub, name: str, func, text: str, config: bool = True, **more) -> argparse.ArgumentParser:
    """A sub-command that runs ``func`` (with ``--config`` unless ``config`` is false)."""
    parser = sub.add_parser(name, help=text, **more)
    if config:
        _add_config(parser)
    parser.set_defaults(func=func)
    return parser


def _dataset(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--dataset", required=True)
    return parser


def _jobs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")


def _run_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The coordinates of a run (the path below results/runs/)."""
    _dataset(parser).add_argument("--attack", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--loss", default="none")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--inference",
        default="zero_shot",
        help=f"{', '.join(INFERENCE_TYPES)}; a model trained on another dataset: confused@<dataset> "
        "(grid.trained.evaluate_on)",
    )
    return parser


def _config_commands(sub) -> None:
    p = _command(sub, "validate", cmd_validate, "check the config (and source directories) and exit")
    p.add_argument("--check-sources", action="store_true", help="also check local source directories")
    _command(sub, "runs", cmd_runs, "list the run paths the config asks for")
    text = "what the study's endpoint models (api, llm) would send: requests, tokens, cost; sends nothing"
    _command(sub, "api-estimate", cmd_api_estimate, text)
    p = _command(sub, "study", cmd_study, "print the config's study name, or the folder of its results")
    p.add_argument("--dir", action="store_true", help="print results/studies/<study> instead of the name")
    p = _command(sub, "merge", cmd_merge, "merge config files (a study over params.yaml) into one, for dvc repro")
    p.add_argument("--output", metavar="FILE", help="write there, atomically (default: stdout)")
    p.add_argument("--force", action="store_true", help="write even what dvc.yaml cannot run as snakemake does")


def _data_commands(sub) -> None:
    text = "fetch and verify what a release's reader reads into data/raw/ (or check files put there)"
    p = _dataset(_command(sub, "download", run_phase, text))
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
    _jobs(_dataset(_command(sub, "prepare", run_phase, "build a dataset in the common schema under data/prepared/")))
    _jobs(_dataset(_command(sub, "audit", run_phase, "dataset card and leakage audit into results/datasets/")))
    p = _dataset(_command(sub, "attack", run_phase, "apply a code attack to every split of a prepared dataset"))
    p.add_argument("--attack", required=True, help="an attack spec of grid.attacks, e.g. ordered_id+translation")
    p.add_argument(
        "--batch-rows",
        type=int,
        default=None,
        metavar="N",
        help="a dataset of more than N rows is read, attacked and written N rows at a time, which bounds the "
        "memory (the result is the same; default 20000)",
    )
    _jobs(p)


def _run_commands(sub) -> None:
    text = "train / fine-tune a model on a dataset's attacked train split"
    p = _dataset(_command(sub, "train", run_phase, text))
    p.add_argument("--attack", required=True, help="the attack of the training data (not_confused runs: no_comment)")
    p.add_argument("--model", required=True)
    p.add_argument("--loss", required=True)
    p.add_argument("--seed", type=int, required=True)
    text = "encode (index) a run's candidate pools once, for evaluate and robust"
    _run_args(_command(sub, "index", run_phase, text))
    text = "encode one of N parts of a run's pools into the embedding cache, for its index job (encoding.shards)"
    p = _run_args(_command(sub, "encode-shard", run_phase, text))
    p.add_argument("--shard", type=int, required=True, help="this job's part, 0 .. shards - 1")
    p.add_argument("--shards", type=int, required=True, help="the number of parts")
    text = "retrieve the test split with a model under every protocol"
    _run_args(_command(sub, "evaluate", run_phase, text))
    text = "summarize the test split's code with a summarizer (grid.summarization) and score it (BLEU)"
    _run_args(_command(sub, "summarize", run_phase, text))
    text = "a dataset's perturbed query sets of one perturbation, at every ratio (COBE)"
    p = _dataset(_command(sub, "perturb", run_phase, text))
    p.add_argument("--perturbation", required=True)
    p.add_argument("--ratio", help="one noise ratio in [0, 1] (default: every ratio of robustness.ratios; question: 1)")
    text = "evaluate a run's model on every perturbed query set (the curve points)"
    p = _run_args(_command(sub, "robust", run_phase, text))
    p.add_argument("--perturbation", help="only this perturbation's points")
    p.add_argument("--ratio", help="only the points at this ratio")
    text = "robustness curves, IR-AUC, robust MRR, flip rate and plot of a run"
    _run_args(_command(sub, "robustness", run_phase, text))
    text = "build the study's results.db, summary, tables and figures in results/studies/<study>/"
    _command(sub, "aggregate", run_phase, text)
    text = "GeCS Table 1: tokens and token-distribution shift of each test set (config dataset_table)"
    _command(sub, "dataset-table", run_phase, text)


def _challenge_file(parser: argparse.ArgumentParser, option: str, name: str) -> None:
    """An option naming a file of the Challenge's release, by default where its download puts it."""
    where = "where `csbench download --dataset csn-challenge` puts it"
    parser.add_argument(
        option, type=Path, default=Path(f"data/raw/csn-challenge/{name}"), help=f"{name} (default: {where})"
    )


def _challenge_commands(sub) -> None:
    p = _command(
        sub,
        "challenge",
        cmd_challenge,
        "score CodeSearchNet Challenge predictions (NDCG Within / All, as its relevanceeval.py)",
        config=False,
        description="Score a predictions CSV in the Challenge's submission format (columns language, "
        "query, url; rows in rank order per query) against the expert annotations.",
    )
    p.add_argument("--predictions", required=True, type=Path, help="CSV: query,language,identifier,url")
    _challenge_file(p, "--annotations", "annotationStore.csv")
    p.add_argument("--cutoff", type=int, default=300, help="predictions kept per query (default 300)")
    p.add_argument("--json", type=Path, help="also write the scores here")
    p = _command(
        sub,
        "challenge-predict",
        run_phase,
        "rank the CodeSearchNet Challenge queries with a model and write the submission file (predict.py)",
        description="Rank the 99 Challenge queries over a corpus per language with a zero-shot model and write "
        "query,language,identifier,url rows, the top --top-k per query and language, as CodeSearchNet's "
        "predict.py does. Corpus per language: the released <lang>_dedupe_definitions_v2.pkl under "
        "data/raw/csn-<lang>/ when present (opened only once its SHA-256 matches a pin), else the prepared "
        "local corpus (python-stdlib, go-stdlib, javascript-node, java-jdk, php-libs, ruby-stdlib).",
    )
    p.add_argument("--model", required=True, help="a zero-shot model of the registry (bm25, minilm, ...)")
    p.add_argument("--output", required=True, type=Path, help="the predictions CSV to write")
    _challenge_file(p, "--queries", "queries.csv")
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
    p = _command(
        sub,
        "challenge-beir",
        cmd_challenge_beir,
        "write the CodeSearchNet Challenge of one language as a BEIR folder (graded qrels) over a corpus",
        config=False,
        description="The 99 queries, the expert annotations of --language as graded qrels (query ids q1..q99, "
        "document ids the GitHub URLs, grade = the annotators' mean rounded half up) and the functions of the "
        "--corpus files (CodeSearchNet jsonl: url, code, language; .gz too) as corpus.jsonl, for a `kind: beir` "
        "dataset scored by the qrels protocol (docs/beir.md).",
    )
    p.add_argument("--language", required=True, help="go, java, javascript, php, python or ruby")
    p.add_argument("--corpus", required=True, action="append", type=Path, metavar="FILE", help="repeatable")
    p.add_argument("--out", required=True, type=Path, help="the folder to write (replaced)")
    _challenge_file(p, "--queries", "queries.csv")
    _challenge_file(p, "--annotations", "annotationStore.csv")
    p.add_argument("--max-docs", type=int, help="keep only this many functions the annotations do not name")


def _results_command(sub) -> None:
    from csbench.results.query import FILTER_COLUMNS, FORMATS, STUDIES_DIR

    p = _command(
        sub,
        "results",
        cmd_results,
        "query the studies' results.db: filter, print as a table / CSV / JSON, pivot, export",
        config=False,
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
    p.add_argument(
        "--export",
        nargs="+",
        metavar=("FILE|mteb", "DIR"),
        help="write the rows to FILE.csv / .parquet / .json; `mteb DIR`: one MTEB task-result JSON per run and "
        "protocol (and robustness point) under DIR/<model>/<revision>/ (docs/results.md)",
    )


def _cache_command(sub) -> None:
    p = _command(
        sub,
        "cache",
        cmd_cache,
        "the embedding cache: stats, clear (a namespace or all), evict down to a size",
        config=False,
        description="The content-addressed embedding cache shared by every run, study and driver "
        "(default $CSBENCH_EMBEDDING_CACHE, else cache/embeddings; docs/cache.md).",
    )
    p.add_argument("action", choices=("stats", "clear", "evict"))
    p.add_argument("--root", type=Path, help="the cache folder (default: $CSBENCH_EMBEDDING_CACHE or cache/embeddings)")
    p.add_argument("--namespace", metavar="KEY", help="clear only this namespace: its key, or 8+ leading characters")
    p.add_argument("--max-bytes", type=int, help="evict: remove least recently used shards down to this size")
    p.add_argument("--json", action="store_true", help="stats: print JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="csbench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"csbench {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)
    _config_commands(sub)
    _data_commands(sub)
    _run_commands(sub)
    _challenge_commands(sub)
    _results_command(sub)
    _cache_command(sub)
    return parser


# The commands that read or write the project's data: each holds the project lock (csbench.lock) while
# it runs, shared with the other jobs of its driver's session, refused beside another driver's.
PHASE_COMMANDS = frozenset(
    {"download", "prepare", "audit", "attack", "train", "index", "encode-shard", "evaluate", "summarize"}
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
