"""The ``evaluate`` phase: retrieve a run's test split under every protocol of the config with its
saved index, into ``results/runs/<run>``: ``ranks.tsv``, one TREC run per ranking protocol, one TSV
of decisions per matching protocol, ``provenance.json`` and ``metrics.json``."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from csbench import lineage, paths
from csbench.config import RunKey
from csbench.io import atomic_open, sha256_file, write_json, write_text
from csbench.phases import Context
from csbench.phases import index as index_phase
from csbench.phases.inputs import attacked as attacked_input
from csbench.phases.inputs import graded_judgements, prepared, unstamp
from csbench.stamps import Verified, write_stamp

log = logging.getLogger("csbench")

# COBE's efficiency axis, in every run record (training figures are added for trained runs)
EFFICIENCY_KEYS = ("index_s", "index_codes_per_s", "search_s", "query_latency_ms_p50", "query_latency_ms_p95")


def evaluate(ctx: Context, run: RunKey) -> Path:
    """Search the run's test split under every protocol and write its records and stamp; the folder."""
    from csbench.evaluate.runner import DEFAULT_MEMORY_MB, search

    config = ctx.config
    evaluation = config.section("evaluation")
    attacked = attacked_input(ctx, run.dataset, run.attack)
    out = paths.run_dir(run.path)
    unstamp(out)
    index, index_file = index_phase.load_index(run, ctx, attacked)
    started = time.perf_counter()
    setup, matching_inputs = matching_setup(ctx, run, index)
    special_tokens = bool(setup is not None and setup.special_tokens)
    pool, codebase, valid = index_phase.read_pools(attacked, evaluation["protocols"], False, special_tokens)
    judgements, qrels_inputs = graded_judgements(ctx, run.dataset, evaluation["protocols"])
    matching_inputs |= qrels_inputs
    outcomes, timings = search(
        index,
        pool,
        evaluation["protocols"],
        evaluation["run_depth"],
        f"csbench-{run.model}-{run.attack}",
        progress=ctx.progress,
        codebase=codebase,
        valid=valid,
        memory_mb=float(evaluation.get("memory_mb", DEFAULT_MEMORY_MB)),
        matching_setup=setup,
        qrels=judgements,
    )
    written, scores, protocol_info = _write_outcomes(out, run, outcomes)
    written += _write_answers(out, index, pool["id"].tolist(), protocol_info)
    language = ",".join(sorted(pool["language"].unique()))
    timings["total_s"] = round(time.perf_counter() - started, 3)
    files = paths.split_files(attacked.folder)
    index_sums = paths.index_dir(run.path) / "SHA256SUMS"  # the digests of every file of the index
    read = [files["test"], files[paths.POOL_SPLIT], index_file, index_sums]
    read += [files["valid"]] if valid is not None else []
    read += [Path(name) for name in matching_inputs]  # released pairs, a borrowed threshold's split
    usage = api_usage(index)
    _write_records(out, ctx, run, timings, read, usage, model_source(index), query_encoding(index))
    if usage:
        log.info("%s: API usage %s", run.path, json.dumps(usage, sort_keys=True))
    write_json(
        out / "metrics.json",
        {
            "run": {"study": config.study, "language": language, **run.as_dict()},
            "scores": scores,
            "protocols": protocol_info,
        },
    )
    stamp_inputs = attacked.inputs(lineage.pool_names(evaluation["protocols"])) | matching_inputs
    record_files = [paths.checkpoint_dir(run.training.path) / "train.json"] if run.training is not None else []
    for file in (index_file, index_sums, *record_files):
        stamp_inputs[file.as_posix()] = sha256_file(file)
    write_stamp(out, "evaluate", lineage.run(config, run), stamp_inputs, written)
    summary = ", ".join(_headline(name, outcome.metrics()) for name, outcome in outcomes.items())
    log.info("%s: %s (%d test records, %.1f s)", run.path, summary, len(pool), timings["total_s"])
    return out


def _write_outcomes(out: Path, run: RunKey, outcomes: dict) -> tuple[list[str], list[dict], dict]:
    """``ranks.tsv``, a TREC run per ranking protocol and a TSV of decisions per matching one; the
    names of the run's files, its scores (protocol, metric, value) and what each protocol did."""
    from csbench.evaluate.runner import MatchingOutcome, write_trec

    written = ["ranks.tsv", "provenance.json", "metrics.json"]
    scores, protocol_info = [], {}
    with atomic_open(out / "ranks.tsv") as ranks:  # a line a query: written as it is made
        ranks.write("protocol\tquery_id\trank\tcandidates\ttop1\n")
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
            records = zip(outcome.query_ids, outcome.ranks, outcome.n_candidates, outcome.top1, strict=True)
            ranks.writelines(f"{name}\t{q}\t{r}\t{c}\t{t}\n" for q, r, c, t in records)
            with atomic_open(out / f"run.{name}.trec.gz", "wb") as handle:
                write_trec(handle, outcome.run_lines)
            written.append(f"run.{name}.trec.gz")
            written += _write_graded(out, name, outcome)
            if outcome.plan_note:
                log.warning("%s %s: %s", run.path, name, outcome.plan_note)
    return written, scores, protocol_info


def graded_file(protocol: str) -> str:
    """The per-query measures of a graded protocol's run, below the run's folder."""
    return f"qrels.{protocol}.tsv"


def _write_graded(out: Path, name: str, outcome) -> list[str]:
    """A graded protocol's per-query trec_eval measures (``qrels.<protocol>.tsv``: query id, then one
    column per measure, full precision); [] for any other protocol."""
    from csbench.evaluate.outcomes import GradedOutcome

    if not isinstance(outcome, GradedOutcome):
        return []
    columns = list(outcome.graded.names or ())
    with atomic_open(out / graded_file(name)) as handle:  # a line a query: written as it is made
        handle.write("\t".join(["query_id", *columns]) + "\n")
        for query, row in zip(outcome.query_ids, outcome.graded, strict=True):
            handle.write("\t".join([query, *(repr(float(row[c])) for c in columns)]) + "\n")
    return [graded_file(name)]


def model_source(index) -> dict | None:
    """Which class, distribution (and version) and revision a user's model (family ``python``) is, as
    its index records it (any pool's: the protocols may rank the codebase only); None for any other model."""
    found = [r.model_source() for r in index.retrievers.values() if hasattr(r, "model_source")]
    return found[0] if found else None


def query_encoding(index) -> dict | None:
    """Per pool kind of a dense model: the queries its network encoded in this phase (``n_forward``; the
    others were looked up in the embedding cache) and the cache identity (None: no cache); None for others."""
    found = {kind: r.encoding_record() for kind, r in index.retrievers.items() if hasattr(r, "encoding_record")}
    return found or None


def api_usage(index) -> dict | None:
    """What an endpoint model's pools cost when they were indexed and what this phase sent (per pool
    kind: requests, cache hits, tokens, truncated inputs), or None for a local model."""
    found = {kind: r.api_usage() for kind, r in index.retrievers.items() if hasattr(r, "api_usage")}
    return found or None


LLM_ANSWERS = "llm_answers.jsonl"


def _write_answers(out: Path, index, ids: list[str], protocol_info: dict) -> list[str]:
    """A chat model's raw answer to every pair it was asked (``llm_answers.jsonl``: query id, code id,
    the answer as the model wrote it, and its parse: true / false / null when unparseable), and what
    its matching protocols state of it (the prompt's name and text, the generation parameters, the
    unparseable count); [] for any other model."""
    from csbench.io import atomic_open

    matcher = index.retrievers.get("test")  # absent when every protocol ranks the codebase
    if not getattr(matcher, "parses_answers", False):
        return []
    record = matcher.record()
    for info in protocol_info.values():
        if "rule" in info:  # a matching protocol's record
            info["llm"] = {k: v for k, v in record.items() if k != "usage"}
    test_ids = index.pool_ids["test"]
    with atomic_open(out / LLM_ANSWERS, "wb") as handle:
        for row in matcher.answer_rows():
            line = {"query_id": ids[row["query"]], "code_id": test_ids[row["code"]], **row}
            handle.write((json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return [LLM_ANSWERS]


def _write_records(
    out: Path,
    ctx: Context,
    run: RunKey,
    timings: dict,
    inputs: list[Path],
    usage: dict | None = None,
    source: dict | None = None,
    encoding: dict | None = None,
) -> None:
    """``provenance.json``: the parameters, the files read (and a trained run's ``train.json``),
    the timings and COBE's efficiency figures (with the training's, for a trained run; an endpoint
    model's requests and tokens: ``api_usage``; a dense model's queries encoded here, not looked up in the
    embedding cache: ``query_encoding``); a user's model's class, distribution and revision (``model_source``)."""
    from csbench.provenance import provenance

    params = {"model": ctx.config.model_params(run.model), "evaluation": ctx.config.section("evaluation")}
    efficiency = {k: timings.get(k) for k in EFFICIENCY_KEYS}
    if run.training is not None:
        record_file = paths.checkpoint_dir(run.training.path) / "train.json"
        inputs = [*inputs, record_file]
        record = json.loads(record_file.read_text())
        params["training"] = record.get("config")
        efficiency |= {
            "train_s": record.get("train_seconds"),
            "train_samples_per_s": record.get("samples_per_second"),
            "train_steps": record.get("steps"),
            "best_valid_mrr": record.get("best_mrr"),
            "train_stop_reason": record.get("stop_reason"),
        }
    if usage:
        efficiency["api_usage"] = usage
    if encoding:
        efficiency["query_encoding"] = encoding
    write_json(
        out / "provenance.json",
        provenance(
            phase="evaluate",
            params=params,
            inputs=inputs,
            seed=run.seed,
            timings=timings,
            efficiency=efficiency,
            model_source=source,
        ),
    )


def matching_setup(ctx: Context, run: RunKey, index):
    """How the run's ``matching`` gets its pairs and decides them (``evaluation.match_pairs``,
    ``evaluation.match_threshold``), and the files read for it (for the stamp): the release's
    labelled pairs from the prepared folder, where prepare wrote them; for a borrowed threshold,
    the other dataset's validation split (same attack), encoded now by the run's model."""
    from csbench.datasets.released_pairs import RELEASED_PAIRS_FILE
    from csbench.evaluate.runner import MatchingSetup, gecs_special_tokens

    config = ctx.config
    if not config.matching_protocols:
        return None, {}
    rule = config.match_rule
    inputs: dict[str, str] = {}
    released = None
    source = prepared(ctx, run.dataset) if config.has_released_pairs(run.dataset) else None
    if source is not None and source.has(RELEASED_PAIRS_FILE):
        released = source.frame(RELEASED_PAIRS_FILE)
        inputs |= source.inputs([RELEASED_PAIRS_FILE])
    borrowed = None
    if rule.kind == "borrowed" and config.model_spec(run.model).family not in ("cross", "llm"):
        other = attacked_input(ctx, str(rule.dataset), run.attack)
        borrowed = _borrowed_threshold_split(ctx, run, other, str(rule.dataset))
        inputs |= other.inputs(["valid.parquet"])
    pairs = str(config.section("evaluation").get("match_pairs", "auto"))
    tokens = gecs_special_tokens(index.retrievers["test"]) if released is not None else ()
    return MatchingSetup(released, pairs, rule, borrowed, tokens), inputs


def _borrowed_threshold_split(ctx: Context, run: RunKey, other: Verified, dataset: str):
    """Another dataset's validation split and the run's model, indexed on it: where a borrowed
    matching threshold is chosen."""
    from csbench.evaluate.runner import POOL_COLUMNS, has_valid
    from csbench.models.build import retriever_factory

    config = ctx.config
    frame = other.frame("valid.parquet", columns=list(POOL_COLUMNS), present=True)
    if not has_valid(frame):
        raise ValueError(f"evaluation.match_threshold: {dataset}'s validation split has {len(frame)} records")
    best = index_phase.checkpoint(run, ctx)
    spec, params = config.model_spec(run.model), config.model_params(run.model)
    cache = index_phase.embedding_cache(ctx)
    retriever = retriever_factory(spec, params, best, cache_dir=config.api["cache_dir"], embedding_cache=cache)()
    retriever.index(frame)
    return frame, retriever


def _headline(protocol: str, metrics: dict) -> str:
    """``<protocol> MRR 0.1234`` (or accuracy for matching) for the log."""
    key = "accuracy" if "accuracy" in metrics else "mrr"
    value = metrics.get(key)
    return f"{protocol} {key if key == 'accuracy' else 'MRR'} {value:.4f}" if value is not None else f"{protocol} n/a"
