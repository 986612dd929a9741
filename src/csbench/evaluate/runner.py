"""Score a test pool with a retriever under several protocols at once.

Two paths give the same ranks: a retriever that exposes its vectors (``DenseRetriever``) is ranked
by the block-wise engine of ``csbench.evaluate.ranking`` (no full score matrix, memory bounded by
``memory_mb``); any other retriever (BM25) scores each query once against the whole pool and every
protocol reads that row. What a search leaves is in :mod:`csbench.evaluate.outcomes`, the saved index
it searches in :mod:`csbench.evaluate.pool_index`, how matching decides its pairs in
:mod:`csbench.evaluate.pair_matching` (their names are importable from here too).
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from csbench.evaluate.metrics import rank_of_correct
from csbench.evaluate.outcomes import GradedOutcome, RunLines, _with_ties
from csbench.evaluate.outcomes import MatchingOutcome as MatchingOutcome
from csbench.evaluate.outcomes import ProtocolOutcome as ProtocolOutcome
from csbench.evaluate.outcomes import tie_note as tie_note
from csbench.evaluate.outcomes import top_k as top_k
from csbench.evaluate.outcomes import write_trec as write_trec
from csbench.evaluate.pair_matching import MATCH_PAIRS as MATCH_PAIRS
from csbench.evaluate.pair_matching import NO_VALID_NOTE as NO_VALID_NOTE
from csbench.evaluate.pair_matching import MatchingSetup as MatchingSetup
from csbench.evaluate.pair_matching import _is_dense as _is_dense
from csbench.evaluate.pair_matching import _rows_by_query, decide_pairs
from csbench.evaluate.pair_matching import gecs_special_tokens as gecs_special_tokens
from csbench.evaluate.pair_matching import has_valid as has_valid
from csbench.evaluate.pair_matching import pair_scores_of as pair_scores_of
from csbench.evaluate.pool_index import POOL_KINDS, PoolIndex
from csbench.evaluate.pool_index import IndexMismatchError as IndexMismatchError
from csbench.evaluate.pool_index import load_pool_index as load_pool_index
from csbench.evaluate.protocols import (
    FUNCNAME_KIND,
    PROTOCOLS,
    Graded,
    MatchingPairs,
    Plan,
    codebase_plan,
    funcname_pool,
    graded_plan,
    without_special_tokens,
)
from csbench.ordered import in_order

DEFAULT_MEMORY_MB = 256.0  # evaluation.memory_mb: the ranking engine's score block


def ranking_protocols(protocols: list[str]) -> list[str]:
    return [name for name in protocols if PROTOCOLS.get(name).kind == "ranking"]


def matching_protocols(protocols: list[str]) -> list[str]:
    return [name for name in protocols if PROTOCOLS.get(name).kind == "matching"]


def _plans(pool: pd.DataFrame, protocols: list[str], codebase: pd.DataFrame | None) -> dict[str, tuple[str, Plan]]:
    """The ranking protocols' plans, each with the pool kind it ranks against."""
    ids = pool["id"].tolist()
    if len(set(ids)) != len(ids):
        raise ValueError("test pool ids are not unique")
    with_codebase = codebase is not None and len(codebase) > 0
    plans: dict[str, tuple[str, Plan]] = {}
    for name in ranking_protocols(protocols):
        protocol = PROTOCOLS.get(name)
        if isinstance(protocol, Graded):  # the whole corpus: the codebase where there is one
            kind = "codebase" if with_codebase else "test"
            plans[name] = (kind, graded_plan(len(ids), len(codebase) if with_codebase else len(ids)))
        elif protocol.uses_codebase and with_codebase:
            plans[name] = ("codebase", codebase_plan(pool["url"].tolist(), codebase["url"].tolist()))
        elif protocol.texts == FUNCNAME_KIND and not _has_func_names(pool):
            plans[name] = ("test", Plan([], np.full(len(ids), -1, dtype=np.int64), NO_FUNC_NAMES_NOTE))
        else:  # the test pool's records, or their FuncName texts (csn-funcname)
            plans[name] = (protocol.texts, protocol.plan(ids))
    return plans


NO_FUNC_NAMES_NOTE = "the test pool has no function names (func_name): the FuncName test is not evaluated"


def _has_func_names(pool: pd.DataFrame) -> bool:
    """Whether any record of ``pool`` names its function (GeCS's and StatCodeSearch's records do not)."""
    return "func_name" in pool and any(isinstance(name, str) and name for name in pool["func_name"])


# The columns of a split (test pool, codebase, validation split) that indexing and searching read: what a
# protocol or a retriever looks up. The others (docstring, renaming, path, repo, ...) are never read by
# `index`, `evaluate` or `robust`; reading them only held them (#28: the 1 M growth corpus's test split is
# 107 k rows, its docstring and renaming columns alone 25 MiB of text).
POOL_COLUMNS = ("id", "query", "code", "language", "func_name", "url")


def pool_columns(protocols: list[str], encode: bool, special_tokens: bool = False) -> dict[str, list[str]]:
    """The columns to read of each split kind (``test``, ``codebase``, ``valid``): ``POOL_COLUMNS`` where
    the pools are encoded (``encode``: ``build_index``, an encoding shard); where they are searched from a
    saved index (``search``), what it looks up: the test pool's ids, queries, languages, function names
    (whether csn-funcname is evaluated) and urls (the codebase's answers), its code texts only where a
    protocol's queries are made from them (csn-funcname) or released pairs lose GeCS's special tokens
    (``special_tokens``); the codebase's ids and urls; the validation split's ids and queries. A column a
    split lacks is left out (what the split has decides, as before)."""
    if encode:
        return {kind: list(POOL_COLUMNS) for kind in ("test", "codebase", "valid")}
    codes = special_tokens or any(getattr(PROTOCOLS.get(name), "texts", "test") == FUNCNAME_KIND for name in protocols)
    test = ["id", "query", "language", "func_name", "url", *(["code"] if codes else [])]
    return {"test": test, "codebase": ["id", "url"], "valid": ["id", "query"]}


def pool_kinds(
    pool: pd.DataFrame, protocols: list[str], codebase: pd.DataFrame | None, valid: pd.DataFrame | None = None
) -> list[str]:
    """The pools a model must index for ``protocols``: ``test``, ``codebase`` (a release's search
    codebase) and ``valid`` (where a matching protocol chooses a bi-encoder's threshold; only when
    the dataset has a validation split: without one, a bi-encoder's matching stays empty)."""
    kinds = {kind for kind, _ in _plans(pool, protocols, codebase).values()}
    if matching_protocols(protocols):
        kinds |= {"test", "valid"} if has_valid(valid) else {"test"}
    return [kind for kind in POOL_KINDS if kind in kinds]


def build_index(
    factory: Callable[[], Any],
    pool: pd.DataFrame,
    protocols: list[str],
    codebase: pd.DataFrame | None = None,
    valid: pd.DataFrame | None = None,
) -> PoolIndex:
    """Index each pool the protocols need with a new retriever from ``factory`` (one encoding each)."""
    t0 = time.perf_counter()
    retrievers, pool_ids = {}, {}
    for kind, frame in index_frames(pool, protocols, codebase, valid).items():
        retrievers[kind] = factory()
        retrievers[kind].index(frame)
        pool_ids[kind] = frame["id"].tolist()
    return PoolIndex(retrievers, pool_ids, round(time.perf_counter() - t0, 3))


def index_frames(
    pool: pd.DataFrame,
    protocols: list[str],
    codebase: pd.DataFrame | None = None,
    valid: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """The pools the protocols need, in the order :func:`build_index` encodes them (kind -> frame)."""
    kinds = pool_kinds(pool, protocols, codebase, valid)
    frames = {"test": pool, "codebase": codebase, "valid": valid}
    if FUNCNAME_KIND in kinds:
        frames[FUNCNAME_KIND] = funcname_pool(pool)
    return {kind: frames[kind] for kind in kinds}


def evaluate_pool(
    retriever,
    pool: pd.DataFrame,
    protocols: list[str],
    run_depth: int,
    run_name: str,
    progress: bool = True,
    codebase: pd.DataFrame | None = None,
    codebase_retriever=None,
    valid: pd.DataFrame | None = None,
    valid_retriever=None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    funcname_retriever=None,
    matching_setup: MatchingSetup | None = None,
) -> tuple[dict[str, ProtocolOutcome | MatchingOutcome], dict[str, float]]:
    """Rank the queries of the test split ``pool`` under each protocol.

    Test-pool protocols rank each query against test codes (its own code is the answer). When a
    non-empty ``codebase`` is given (with a second retriever for it), protocols that use the
    codebase rank against it instead, the answer being the codebase entry with the query's url.
    A matching protocol also needs the validation split ``valid`` and a retriever for it (where
    ``matching_setup`` chooses its threshold there, the default). Each retriever indexes its pool
    once; each query is scored once per pool.
    """
    if codebase is not None and len(codebase) > 0 and codebase_retriever is None:
        raise ValueError("a codebase needs its own retriever")
    given = {"test": retriever, "codebase": codebase_retriever, "valid": valid_retriever}
    given[FUNCNAME_KIND] = funcname_retriever
    kinds = pool_kinds(pool, protocols, codebase, valid)
    if "valid" in kinds and valid_retriever is None:
        raise ValueError("the matching protocol needs a retriever for the validation split")
    if FUNCNAME_KIND in kinds and funcname_retriever is None:
        raise ValueError("csn-funcname needs a retriever of its own for the FuncName texts")
    ordered = iter([given[kind] for kind in kinds])  # build_index asks in pool_kinds order
    index = build_index(lambda: next(ordered), pool, protocols, codebase, valid)
    return search(
        index,
        pool,
        protocols,
        run_depth,
        run_name,
        progress=progress,
        codebase=codebase,
        valid=valid,
        memory_mb=memory_mb,
        matching_setup=matching_setup,
    )


def search(
    index: PoolIndex,
    pool: pd.DataFrame,
    protocols: list[str],
    run_depth: int,
    run_name: str,
    queries: list[str] | None = None,
    progress: bool = True,
    codebase: pd.DataFrame | None = None,
    valid: pd.DataFrame | None = None,
    memory_mb: float = DEFAULT_MEMORY_MB,
    latency: bool = True,
    matching_setup: MatchingSetup | None = None,
    qrels: pd.DataFrame | None = None,
    keep_runs: bool = True,
) -> tuple[dict[str, ProtocolOutcome | MatchingOutcome], dict[str, float]]:
    """Rank each query of the test split ``pool`` (or ``queries``, one text per test record: a
    perturbed query set) against the indexed pools under each protocol; decide the pairs of a
    matching protocol (which pairs and how: ``matching_setup``, by default drawn negatives and the
    threshold chosen on ``valid``, the validation split). ``latency``:
    also time ``LATENCY_SAMPLE`` queries answered one at a time (the timings' latency figures);
    a caller that discards the timings turns it off, since one-by-one encoding dominates a dense
    model's search. ``qrels``: the dataset's relevance judgements (``csbench.evaluate.qrels``'s
    QRELS_COLUMNS) for a graded protocol; None: each query's own code (or url) is relevant.
    ``keep_runs``: False keeps no TREC run (a caller that writes none: a graded protocol lists 1,000
    documents a query); the outcomes' ``run_lines`` then refuse to be written."""
    ids = pool["id"].tolist()
    plans = _plans(pool, protocols, codebase)
    kinds = pool_kinds(pool, protocols, codebase, valid)
    missing = set(kinds) - set(index.retrievers)
    if missing:
        raise ValueError(f"the index has no {', '.join(sorted(missing))} pool")
    frames = {"test": pool, "codebase": codebase, "valid": valid, FUNCNAME_KIND: pool}  # funcname: the same ids
    for kind in kinds:  # an index of other pools (another dataset, attack or study) would rank wrong ids
        if index.pool_ids[kind] != frames[kind]["id"].tolist():
            raise ValueError(f"the index's {kind} pool is not the {kind} split read now: re-run `csbench index`")
    matching = matching_protocols(protocols)
    queries = pool["query"].tolist() if queries is None else list(queries)
    if len(queries) != len(ids):
        raise ValueError(f"{len(queries)} queries for {len(ids)} test records")
    searched = [kind for kind in kinds if kind != "valid"]
    # the FuncName test's queries are the function names (a perturbed query set leaves them as they are)
    kind_queries = {FUNCNAME_KIND: funcname_pool(pool)["query"].tolist()} if FUNCNAME_KIND in kinds else {}
    preparers = [(kind, getattr(index.retrievers[kind], "prepare_queries", None)) for kind in searched]
    preparers = [(kind, prepare) for kind, prepare in preparers if prepare is not None]
    for _, prepare in preparers:
        prepare([])  # forget the vectors of an earlier query set: the latencies encode each query
    latencies = _query_latencies(index, searched, queries) if latency else []
    t0 = time.perf_counter()
    for kind, prepare in preparers:  # dense retrievers encode all queries at once, in batches
        prepare(kind_queries.get(kind, queries))
    setup = matching_setup or MatchingSetup()
    pairs = {name: setup.pairs_of(PROTOCOLS.get(name), ids) for name in matching}
    if setup.special_tokens and any(p.source == "released" for p in pairs.values()):
        codes = pool["code"].tolist()
        pairs = {
            name: without_special_tokens(p, queries, codes, setup.special_tokens) if p.source == "released" else p
            for name, p in pairs.items()
        }
    relevance = None
    if any(plan.order == "qrels" for _, plan in plans.values()):
        from csbench.evaluate.graded import graded_relevance

        relevance = graded_relevance(pool, codebase, qrels)
    job = _Search(
        index, plans, pairs, ids, queries, run_depth, run_name, memory_mb, progress, kind_queries, relevance, keep_runs
    )  # fmt: skip
    from csbench.evaluate.ranking import one_blas_thread

    # every numpy product of the search on one BLAS thread, whichever path: the engine's, and a retriever's
    # own ``scores`` (a late-interaction model's matrix product): the same bits under any thread count
    with one_blas_thread():
        if all(hasattr(index.retrievers[kind], "score_pairs") for kind in searched):
            outcomes, pair_scores = _search_pairs(job)
        elif all(_is_dense(index.retrievers[kind]) for kind in searched):
            outcomes, pair_scores = _search_dense(job)
        else:
            outcomes, pair_scores = _search_rows(job)
    for name in matching:
        outcomes[name] = decide_pairs(name, index, pairs[name], pair_scores[name], ids, valid, queries, setup)
    t_search = time.perf_counter() - t0
    timings = {"index_s": round(index.index_s, 3), "search_s": round(t_search, 3), **index.efficiency()}
    if latencies:
        p50, p95 = np.percentile(np.asarray(latencies) * 1000.0, [50, 95])
        timings |= {"query_latency_ms_p50": round(float(p50), 3), "query_latency_ms_p95": round(float(p95), 3)}
    ordered = {name: outcomes[name] for name in protocols}
    return ordered, timings


@dataclass(frozen=True)
class _Search:
    """One query set to answer: the indexed pools, the ranking plans, the matching pairs."""

    index: PoolIndex
    plans: dict[str, tuple[str, Plan]]
    pairs: dict[str, MatchingPairs]
    ids: list[str]
    queries: list[str]
    run_depth: int
    run_name: str
    memory_mb: float
    progress: bool
    kind_queries: dict[str, list[str]] = field(default_factory=dict)  # a pool kind's own queries (FuncName)
    relevance: list[dict[str, int]] | None = None  # graded protocols: each query's relevant documents
    keep_runs: bool = True  # False: the outcomes keep no TREC run

    def new_outcome(self, name: str, plan: Plan) -> ProtocolOutcome:
        """The empty outcome of protocol ``name`` (a graded one keeps trec_eval's measures too)."""
        if plan.order == "qrels":
            return GradedOutcome(name, plan.note, run_lines=RunLines(exact=True, kept=self.keep_runs))
        return ProtocolOutcome(name, plan.note, run_lines=RunLines(kept=self.keep_runs))

    def record_graded(self, outcome: ProtocolOutcome, i: int, names: list[str], top: np.ndarray, scores) -> None:
        """Query i's top list (``top``: rows of the pool ``names``, -1 padding) into a graded outcome."""
        from csbench.evaluate.graded import record_graded

        protocol = PROTOCOLS.get(outcome.protocol)
        kept = top >= 0
        doc_ids = [names[j] for j in top[kept]]
        assert isinstance(outcome, GradedOutcome) and self.relevance is not None
        record_graded(
            outcome,
            self.ids[i],
            doc_ids,
            np.asarray(scores, dtype=np.float64)[kept],
            self.relevance[i],
            len(names),
            protocol.depth,
            protocol.cutoffs,
            self.run_name,
        )

    def queries_of(self, kind: str) -> list[str]:
        """The queries ranked against the ``kind`` pool."""
        return self.kind_queries.get(kind, self.queries)


Searched = tuple[dict[str, ProtocolOutcome], dict[str, np.ndarray]]  # outcomes, matching pair scores


def _search_rows(job: _Search) -> Searched:
    """Any retriever: each query scored once against each pool it needs; every protocol reads the row.
    Queries are scored and ranked on several threads where every retriever used allows it
    (``concurrent_scores``: BM25), their results recorded in query order in this thread: the same
    records on any number of threads (each query's from its own row)."""
    index, plans, pairs, ids, queries = job.index, job.plans, job.pairs, job.ids, job.queries
    run_depth, run_name, progress = job.run_depth, job.run_name, job.progress
    outcomes = {name: job.new_outcome(name, plan) for name, (_, plan) in plans.items()}
    pair_scores = {name: np.empty(p.labels.size, dtype=np.float64) for name, p in pairs.items()}
    # pair j of a matching protocol is (query pairs.queries[j], code pairs.codes[j]): index them by query
    pair_rows = {name: _rows_by_query(p.queries, len(ids)) for name, p in pairs.items()}
    pool_ids = index.pool_ids
    from csbench.evaluate import ranking

    n_tied: dict[str, int] = {}  # argsort plans: queries whose rank a tie decided
    # code-axis plans (CodeSearchNet's compute_ranks): each chunk's query x code scores, ranked at the end
    chunk_scores = {
        name: [np.empty((g.size, g.size)) for g in plan.groups]
        for name, (_, plan) in plans.items()
        if plan.axis == "code"
    }

    def tied(name: str, count: int) -> None:
        n_tied[name] = n_tied.get(name, 0) + count

    def work(i: int) -> list[Callable[[], None]]:
        """Query ``i`` scored and ranked: what to record, in order (run in the calling thread)."""
        scores: dict[str, np.ndarray] = {}  # one row per pool kind, computed when first needed
        records: list[Callable[[], None]] = []
        for name, (kind, plan) in plans.items():
            candidates = plan.candidates(i)
            if candidates is None:
                continue
            local = _row(scores, index, kind, job.queries_of(kind)[i])[candidates]
            if plan.order == "qrels":  # the row's best ``depth``, scored against the judgements
                depth = min(PROTOCOLS.get(name).depth, local.size)
                finite = np.where(np.isnan(local), -np.inf, local)
                # the dense path's list (rank_dense with row 0 as the answer): top_k's order, so a cut inside
                # a group of tied scores keeps the same documents (BM25's many zero scores), not argpartition's
                head = top_k(finite, 0, depth) if depth else np.empty(0, dtype=np.int64)
                args = (outcomes[name], i, pool_ids[kind], candidates[head], finite[head])
                records.append(functools.partial(job.record_graded, *args))
                continue
            if name in chunk_scores:
                row = chunk_scores[name][plan.group_of[i]]
                records.append(functools.partial(row.__setitem__, int(np.flatnonzero(candidates == i)[0]), local))
                continue
            if plan.order == "argsort":  # CodeXGLUE's run.py: the position in the row's argsort order
                query_keys, pool_keys = plan.answer_keys()
                result = ranking.rank_rows_argsort(
                    local[None, :], query_keys[i : i + 1], pool_keys[candidates], max(run_depth, 1)
                )
                kept = candidates[result.top[0][result.top[0] >= 0]]
                best_ids = [pool_ids[kind][j] for j in kept]
                top_scores = result.top_scores[0][result.top[0] >= 0]
                rank = int(result.ranks[0])
                records.append(functools.partial(tied, name, int(result.tied[0])))
                args = (outcomes[name], ids[i], rank, candidates.size, best_ids, top_scores, run_depth, run_name)
                records.append(functools.partial(_record, *args))
                continue
            correct = int(np.flatnonzero(candidates == plan.answer(i))[0])
            best = top_k(local, correct, max(run_depth, 1))
            names = pool_ids[kind]
            best_ids = [names[j] for j in candidates[best]]
            rank = rank_of_correct(local, correct)
            args = (outcomes[name], ids[i], rank, candidates.size, best_ids, local[best], run_depth, run_name)
            records.append(functools.partial(_record, *args))
        for name, p in pairs.items():
            mine = pair_rows[name][i]
            if mine.size:
                row = _row(scores, index, "test", queries[i])[p.codes[mine]]
                records.append(functools.partial(pair_scores[name].__setitem__, mine, row))
        return records

    bar = tqdm(total=len(ids), desc=f"search {run_name}", unit="query", disable=not progress, mininterval=2)

    def record(i: int, records: list[Callable[[], None]]) -> None:
        for one in records:
            one()
        bar.update(1)

    kinds = {kind for kind, _ in plans.values()} | ({"test"} if pairs else set())
    concurrent = all(getattr(index.retrievers[kind], "concurrent_scores", False) for kind in kinds)
    in_order(work, len(ids), record, ranking.work_threads() if concurrent else 1, name="csbench-search")
    bar.close()
    for name, matrices in chunk_scores.items():
        kind, plan = plans[name]
        for group, matrix in zip(plan.groups, matrices, strict=True):
            _record_chunk(outcomes[name], ids, pool_ids[kind], group, matrix.T, False, job)
    for name, count in n_tied.items():
        outcomes[name].plan_note = _with_ties(outcomes[name].plan_note, count)
    return outcomes, pair_scores


def _record_chunk(
    outcome: ProtocolOutcome,
    ids: list[str],
    names: list[str],
    group: np.ndarray,
    matrix: np.ndarray,
    distances: bool,
    job: _Search,
) -> None:
    """Record a code-axis chunk (``Plan.axis == "code"``): ``matrix`` is (codes x queries) with the
    correct entries on the diagonal, ``distances`` (lower is better: the plan's ``cdist`` metric on a
    retriever's vectors) or scores (a retriever without vectors, e.g. BM25, ranks by its own); each record's
    rank is its code's rank of its own query among the chunk's queries, and its run lines list the
    records whose queries its code ranks best (the run file's query id is the record whose code ranks)."""
    from csbench.evaluate import ranking

    result = ranking.rank_chunk(matrix, max(job.run_depth, 1), lower_is_better=distances)
    for row, i in enumerate(group.tolist()):
        best_ids = [names[j] for j in group[result.top[row]]]
        rank, best_scores = int(result.ranks[row]), result.top_scores[row]
        _record(outcome, ids[i], rank, group.size, best_ids, best_scores, job.run_depth, job.run_name)


def _row(cache: dict[str, np.ndarray], index: PoolIndex, kind: str, query: str) -> np.ndarray:
    """The query's scores over the ``kind`` pool, computed once per query."""
    if kind not in cache:
        cache[kind] = np.asarray(index.retrievers[kind].scores(query), dtype=np.float64)
    return cache[kind]


CROSS_NOTE = (
    "a cross-encoder scores (query, code) pairs: ranking every query against the whole pool would take "
    "one forward pass per pair, so only gecs-100 and matching evaluate it"
)


MATCHING_ONLY_NOTE = (
    "a chat model answers the match / no-match prompt of each pair: it is evaluated under matching only "
    "(ranking would ask one prompt per query x candidate; GeCS did not rank with GPT-3.5 for that cost)"
)


def _search_pairs(job: _Search) -> Searched:
    """Pair scorers (cross-encoders): each query's own candidates (gecs-100) and the matching pairs;
    protocols that rank against a whole pool are left unevaluated, with a note."""
    index, plans, pairs, ids, queries = job.index, job.plans, job.pairs, job.ids, job.queries
    run_depth, run_name = job.run_depth, job.run_name
    outcomes: dict[str, ProtocolOutcome] = {}
    matching_only = any(getattr(r, "matching_only", False) for r in index.retrievers.values())
    for name, (kind, plan) in plans.items():
        if plan.per_query is None or matching_only:
            note = MATCHING_ONLY_NOTE if matching_only else CROSS_NOTE
            outcomes[name] = ProtocolOutcome(name, "; ".join(n for n in (plan.note, note) if n))
            continue
        outcome = ProtocolOutcome(name, plan.note, run_lines=RunLines(kept=job.keep_runs))
        rows = plan.per_query
        n, k = rows.shape
        scores = index.retrievers[kind].score_pairs(queries, np.repeat(np.arange(n), k), rows.ravel()).reshape(n, k)
        names = index.pool_ids[kind]
        for i in range(n):
            correct = int(np.flatnonzero(rows[i] == plan.answer(i))[0])
            best = top_k(scores[i], correct, max(run_depth, 1))
            best_ids = [names[j] for j in rows[i][best]]
            rank = rank_of_correct(scores[i], correct)
            _record(outcome, ids[i], rank, k, best_ids, scores[i][best], run_depth, run_name)
        outcomes[name] = outcome
    pair_scores = {name: index.retrievers["test"].score_pairs(queries, p.queries, p.codes) for name, p in pairs.items()}
    return outcomes, pair_scores


def _record(
    outcome: ProtocolOutcome,
    query_id: str,
    rank: int,
    n_candidates: int,
    best_ids: list[str],
    best_scores: np.ndarray,
    run_depth: int,
    run_name: str,
) -> None:
    """Append one query's rank, its best candidate and its TREC lines to ``outcome``."""
    outcome.query_ids.append(query_id)
    outcome.ranks.append(int(rank))
    outcome.n_candidates.append(int(n_candidates))
    outcome.top1.append(best_ids[0])
    outcome.run_lines.add(query_id, best_ids[:run_depth], best_scores[:run_depth], run_name)


def _search_dense(job: _Search) -> Searched:
    """Retrievers with vectors: each protocol ranked block-wise by the engine (no full score matrix)."""
    index, plans, pairs, ids = job.index, job.plans, job.pairs, job.ids
    run_depth, run_name, memory_mb, progress = job.run_depth, job.run_name, job.memory_mb, job.progress
    from csbench.evaluate import ranking

    vectors = {}
    for kind in {kind for kind, _ in plans.values()} | ({"test"} if pairs else set()):
        retriever = index.retrievers[kind]
        vectors[kind] = (retriever.query_matrix(job.queries_of(kind)), retriever.code_vectors)
    outcomes: dict[str, ProtocolOutcome] = {}
    depth = max(run_depth, 1)
    for name, (kind, plan) in plans.items():
        q_vectors, c_vectors = vectors[kind]
        names = index.pool_ids[kind]
        outcome = job.new_outcome(name, plan)
        per_query: dict[int, tuple[int, np.ndarray, np.ndarray, np.ndarray]] = {}
        if plan.order == "qrels":  # each query's best ``depth`` of the whole corpus, scored against qrels
            group = plan.groups[0]
            result = ranking.rank_dense(
                q_vectors,
                c_vectors[group],
                np.zeros(len(ids), dtype=np.int64),  # any row: only the top lists are read
                min(PROTOCOLS.get(name).depth, group.size),
                memory_mb=memory_mb,
                progress=progress,
            )
            for i in range(len(ids)):  # the group is the whole pool: top rows are pool rows
                job.record_graded(outcome, i, names, result.top[i], result.top_scores[i])
            outcomes[name] = outcome
            continue
        if plan.axis == "code":  # CodeSearchNet's compute_ranks: each chunk's codes rank its queries
            for group in plan.groups:
                matrix = ranking.chunk_matrix(q_vectors[group], c_vectors[group], plan.distance)
                _record_chunk(outcome, ids, names, group, matrix, plan.distance is not None, job)
            outcomes[name] = outcome
            continue
        if plan.order == "argsort":  # CodeXGLUE's run.py: positions in each score row's argsort order
            group = plan.groups[0]
            members = np.flatnonzero(plan.group_of == 0)
            query_keys, pool_keys = plan.answer_keys()
            result = ranking.rank_dense_argsort(
                q_vectors[members],
                c_vectors[group],
                query_keys[members],
                pool_keys[group],
                depth,
                memory_mb=memory_mb,
                progress=progress,
            )
            outcome.plan_note = _with_ties(outcome.plan_note, int(result.tied.sum()))
            for row, i in enumerate(members.tolist()):
                per_query[i] = (int(result.ranks[row]), group, result.top[row], result.top_scores[row])
        elif plan.per_query is not None:
            rows = plan.per_query
            answer_pos = np.argmax(rows == np.array([plan.answer(i) for i in range(len(ids))])[:, None], axis=1)
            result = ranking.rank_candidates(q_vectors, c_vectors, rows, answer_pos, depth, memory_mb=memory_mb)
            for i in range(len(ids)):
                per_query[i] = (int(result.ranks[i]), rows[i], result.top[i], result.top_scores[i])
        else:
            where = np.full(len(names), -1, dtype=np.int64)
            for g, group in enumerate(plan.groups):
                members = np.flatnonzero(plan.group_of == g)
                answers = members if plan.answers is None else plan.answers[members]
                where[group] = np.arange(group.size)
                result = ranking.rank_dense(
                    q_vectors[members], c_vectors[group], where[answers], depth, memory_mb=memory_mb, progress=progress
                )
                where[group] = -1
                for row, i in enumerate(members.tolist()):
                    per_query[i] = (int(result.ranks[row]), group, result.top[row], result.top_scores[row])
        for i in sorted(per_query):
            rank, candidates, top, top_scores = per_query[i]
            kept = top >= 0
            best_ids = [names[j] for j in candidates[top[kept]]]
            _record(outcome, ids[i], rank, candidates.size, best_ids, top_scores[kept], run_depth, run_name)
        outcomes[name] = outcome
    pair_scores = {}
    for name, p in pairs.items():
        q_vectors, c_vectors = vectors["test"]
        pair_scores[name] = np.einsum("ij,ij->i", q_vectors[p.queries], c_vectors[p.codes]).astype(np.float64)
    return outcomes, pair_scores


LATENCY_SAMPLE = 100  # queries timed one at a time for the latency figures


def _query_latencies(index: PoolIndex, kinds: list[str], queries: list[str]) -> list[float]:
    """Seconds to answer one query alone (encode it, score the whole pool), for up to
    ``LATENCY_SAMPLE`` evenly spaced queries, before any batch encoding: what a user waits for (the
    model encodes each one: the embedding cache is not asked, and the passes are not counted in the
    retriever's ``n_forward``)."""
    kind = kinds[0] if kinds else None
    if kind is None or not queries or not hasattr(index.retrievers[kind], "scores"):
        return []
    if not getattr(index.retrievers[kind], "times_queries", True):
        return []  # an endpoint: one request per query would time the network, and cost requests
    retriever = index.retrievers[kind]
    step = max(1, len(queries) // LATENCY_SAMPLE)
    latencies = []
    # the model's time, not an embedding cache lookup's; and these timing passes are not the run's
    # encodings (n_forward counts what the run needed encoded)
    cache, counted = getattr(retriever, "embedding_cache", None), getattr(retriever, "n_forward", None)
    if cache is not None:
        retriever.embedding_cache = None
    try:
        for query in queries[::step][:LATENCY_SAMPLE]:
            started = time.perf_counter()
            retriever.scores(query)
            latencies.append(time.perf_counter() - started)
    finally:
        if cache is not None:
            retriever.embedding_cache = cache
        if counted is not None:
            retriever.n_forward = counted
    return latencies


def trec_bytes(lines: Iterable[str]) -> bytes:
    """A gzip-compressed TREC run file, byte-identical for identical content (mtime 0): what
    :func:`write_trec` writes, in memory."""
    buffer = io.BytesIO()
    write_trec(buffer, lines)
    return buffer.getvalue()
