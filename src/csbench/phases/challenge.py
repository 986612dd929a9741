"""The CodeSearchNet Challenge (``challenge-predict`` and ``challenge``): rank the 99 Challenge
queries over a corpus per language with a zero-shot model and write the submission file, as
CodeSearchNet's predict.py does (:mod:`csbench.evaluate.submission`); score a predictions file
against the expert annotations (NDCG Within / All, as its relevanceeval.py)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from csbench import paths
from csbench.io import sha256_file, write_json
from csbench.phases import Context
from csbench.phases.inputs import prepared, require

log = logging.getLogger("csbench")


@dataclass(frozen=True)
class Submission:
    """What ``challenge-predict`` ranks and writes: the model, the output CSV, the queries file, the
    languages (empty: all six, in predict.py's order), each language's corpus (``release`` or a
    prepared dataset) and trusted definitions digests (``LANG=VALUE`` options), the rows kept per
    query and language, and optionally the annotations to score with and a JSON record to write."""

    model: str
    output: Path
    queries: Path
    languages: tuple[str, ...] = ()
    corpus: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()
    top_k: int = 100
    annotations: Path | None = None
    record: Path | None = field(default=None)


def score(predictions_file: Path, annotations: Path, cutoff: int) -> dict:
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


def language_pairs(values: tuple[str, ...] | list[str], what: str) -> dict[str, str]:
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


def challenge_predict(ctx: Context, job: Submission) -> Path:
    """Rank the Challenge queries over each language's corpus and write the predictions file (and
    the record of what was ranked, scored when annotations are given); the predictions file."""
    from csbench.datasets.releases.csn_challenge import SPEC as CHALLENGE
    from csbench.datasets.releases.csn_challenge import load_queries
    from csbench.evaluate import submission as sub
    from csbench.models.build import retriever_factory
    from csbench.phases.index import embedding_cache

    config = ctx.config
    spec = config.model_spec(job.model)
    if not spec.zero_shot or spec.family in ("cross", "llm"):
        raise ValueError(
            f"model {job.model!r} ({spec.family}) needs a training: challenge-predict ranks with zero-shot "
            "bi-encoders and lexical models"
        )
    languages = list(job.languages) or list(sub.CSN_LANGUAGES)
    for language in languages:
        require(language, list(sub.CSN_LANGUAGES), "language", "--languages")
    sources, pins = language_pairs(job.corpus, "--corpus"), language_pairs(job.pins, "--pin")
    for language in (*sources, *pins):
        require(language, languages, "language", "--corpus / --pin (not among --languages)")
    queries = load_queries(job.queries)
    pinned = next(f.sha256 for f in CHALLENGE.files if f.path == "queries.csv")
    queries_sha = sha256_file(job.queries)
    if queries_sha != pinned:
        log.warning("%s: not the released queries.csv (SHA-256 %s, released %s)", job.queries, queries_sha, pinned)
    corpora, described = _corpora(ctx, languages, sources, pins)
    factory = retriever_factory(
        spec, config.model_params(job.model), cache_dir=config.api["cache_dir"], embedding_cache=embedding_cache(ctx)
    )
    started = time.perf_counter()
    frame = sub.predict(queries, corpora, factory(), k=job.top_k)
    sub.write_submission(frame, job.output)
    check = sub.check_submission(job.output, queries, {k: len(v) for k, v in corpora.items()}, k=job.top_k)
    rows = ", ".join(f"{lang} {n}" for lang, n in check.rows.items())
    log.info("wrote %s: %d lines (%s) in %.1f s", job.output, check.lines, rows, time.perf_counter() - started)
    record = {
        "model": job.model,
        "top_k": job.top_k,
        "queries": {"file": job.queries.as_posix(), "sha256": queries_sha, "count": len(queries)},
        "corpora": described,
        "output": {"file": job.output.as_posix(), "lines": check.lines, "rows": check.rows},
    }
    if job.annotations:
        record["scores"] = score(job.output, job.annotations, cutoff=300)
    if job.record:
        write_json(job.record, record)
    return job.output


def _corpora(ctx: Context, languages: list[str], sources: dict[str, str], pins: dict[str, str]):
    """Each language's corpus: the released definitions file (opened only once its SHA-256 matches
    a pin) when it is there or asked for, else the prepared local corpus; and what was read."""
    from csbench.datasets.base import SPLITS
    from csbench.evaluate import submission as sub

    corpora, described = {}, {}
    for language in languages:
        definitions = paths.raw_dir(f"csn-{language}") / sub.DEFINITIONS_FILE.format(language=language)
        source = sources.get(language) or (sub.RELEASE if definitions.is_file() else sub.LOCAL_CORPORA[language])
        if source == sub.RELEASE:
            sha = pins.get(language) or sub.DEFINITIONS_SHA256[language]
            corpora[language] = sub.read_definitions(definitions, sha, language)
            described[language] = {"source": definitions.as_posix(), "sha256": sha}
        else:
            corpus = prepared(ctx, source)
            if ctx.config.dataset_options(source).get("language") not in (None, language):
                raise ValueError(f"--corpus {language}={source}: {source!r} is a corpus of another language")
            names = [f"{split}.parquet" for split in SPLITS]
            corpora[language] = sub.local_corpus_frame((corpus.frame(n) for n in names), language)
            described[language] = {"source": source, "inputs": corpus.inputs(names)}
        described[language]["records"] = len(corpora[language])
        log.info("challenge %s: %d records from %s", language, len(corpora[language]), source)
    return corpora, described
