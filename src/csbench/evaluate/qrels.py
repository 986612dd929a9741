"""Graded-relevance retrieval metrics with trec_eval's semantics (the ``qrels`` protocol, issue #27).

Qrels are graded relevance judgements: query id -> document id -> integer grade (:data:`Qrels`), or a
frame / parquet with :data:`QRELS_COLUMNS`. A document is relevant when its grade is at least 1
(trec_eval's default ``relevance_level``); grade 0 and negative grades are judged not relevant.

Every per-query value equals what trec_eval computes (checked against ``pytrec_eval`` to 1e-9 in
tests/evaluate/test_qrels.py):

* **document order** (trec_eval's ``form_res_rels``, ``comp_sim_docno``): score descending; equal
  scores by document id *descending*, compared as ``strcmp`` compares the UTF-8 bytes (the same order
  as Python's ``str`` comparison, by code point). So of two documents tied at the same score, ``"b"``
  ranks above ``"a"`` and ``"doc10"`` above ``"doc1"``. Scores are compared as trec_eval stores them:
  rounded to single precision (a C ``float``), so 1.0 and 1.0 + 1e-12 tie, as do 0.0 and -0.0, and
  every score beyond float32's range ties with infinity (checked against pytrec_eval). NaN scores
  rank below every number, ties among them again by id descending: trec_eval's order is undefined
  for them (its comparator calls NaN equal to everything, so the result depends on qsort);
* ``ndcg@k`` = trec_eval ``ndcg_cut_k``: linear gain (the grade; grades <= 0 gain nothing),
  discount ``log2(rank + 1)``, ideal DCG from *all* the query's judged relevant documents (retrieved
  or not) in descending grade, cut at k; 0 when the query has no relevant document;
* ``map@k`` = ``map_cut_k``: the sum of the precisions at the ranks <= k of the relevant documents,
  divided by the number of relevant documents in the qrels (not by min(k, that number));
* ``recall@k`` = ``recall_k``: relevant documents in the top k / relevant documents in the qrels;
* ``p@k`` = ``P_k``: relevant documents in the top k / k (k, even when fewer were retrieved);
* ``mrr@k`` = trec_eval ``recip_rank`` on the list cut to its first k documents: 1 / rank of the
  first relevant document if that rank is <= k, else 0.

Which queries :func:`evaluate_run` scores: every qrels query with at least one judgement that the run
has (also with an empty list: zeros), as pytrec_eval does; and, unlike pytrec_eval, every qrels query
with at least one *relevant* document that the run lacks altogether: it scores 0 on every metric
(pytrec_eval drops it, trec_eval drops it unless run with ``-c``). Queries of the run without
judgements are ignored (as pytrec_eval); a qrels query with no relevant document that the run has
scores 0 everywhere (as pytrec_eval), one the run lacks is not scored.

Negative grades: trec_eval treats them as not relevant and gains nothing from them in nDCG (checked),
but a query whose grades are all <= -2 makes trec_eval (pytrec_eval 0.5) write out of bounds (it
crashes beside other queries); here such a query simply scores 0.

Against the figures other toolkits report: BEIR's ``EvaluateRetrieval.evaluate`` and ``mrr`` (what CoIR
reports; transcribed in tests/reference/beir_evaluation.py) give the same means after their rounding to
5 decimals, except that BEIR by default drops from the run every document whose id equals the query id,
and its MRR breaks ties in the run's insertion order and divides by the number of qrels queries. MTEB's
``calculate_retrieval_scores`` gives the same means too; its MRR breaks ties by id descending in double
precision, so only scores equal in float32 but not in float64 can order differently.

The CodeSearchNet Challenge's expert annotations become qrels with :func:`challenge_qrels`.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np
import pandas as pd

from csbench.datasets.base import ReaderError
from csbench.datasets.judgements import QRELS_COLUMNS as QRELS_COLUMNS  # the one definition (re-exported)
from csbench.evaluate.challenge import ANNOTATION_COLUMNS, _key, _text

CUTOFFS = (1, 3, 5, 10, 100, 1000)
MAIN_SCORE = "ndcg@10"
METRICS = ("ndcg", "map", "recall", "p", "mrr")  # names are f"{metric}@{k}"
RELEVANCE_LEVEL = 1  # trec_eval's default: grade >= 1 is relevant

Qrels = dict[str, dict[str, int]]  # query id -> doc id -> grade
Run = Mapping[str, Mapping[str, float]]  # query id -> doc id -> score


# ---------------------------------------------------------------------------------------------
# reading qrels files


_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")  # what int() reads, less its underscores and non-ASCII digits


def _is_int(text: str) -> bool:
    return _INTEGER.fullmatch(text) is not None


def iter_qrels(path: str | Path, split: str) -> Iterator[tuple[str, str, str, int]]:
    """``(split, query_id, doc_id, grade)`` of a qrels file, in file order, streamed line by line.

    Two layouts, told apart by the first non-blank line:

    * BEIR ``qrels/<split>.tsv``: tab separated ``query-id, corpus-id, score`` (read with the csv module
      as BEIR's ``GenericDataLoader`` reads it); a first line of three tab-separated cells whose third
      is not an integer is the header and skipped;
    * TREC qrels: ``query_id iteration doc_id grade`` separated by whitespace, no header (the
      iteration column is ignored, as trec_eval ignores it).

    Blank lines are skipped. The same (query, document) twice with the same grade yields once; with
    different grades it is an error. Raises :class:`ReaderError` naming file and line for a missing
    file, a wrong number of columns, an empty id, a grade that is not an integer, or such a conflict.
    """
    path = Path(path)
    if not path.is_file():
        raise ReaderError(f"{path}: no such qrels file")
    seen: dict[tuple[str, str], tuple[int, int]] = {}  # (query, doc) -> (grade, line)
    line = 0
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows, trec = _qrels_rows(handle, path)
            for line, cells in rows:
                if trec:
                    query, doc, grade_text = cells[0], cells[2], cells[3]
                else:
                    query, doc, grade_text = cells
                if not query.strip():
                    raise ReaderError(f"{path}:{line}: empty query id")
                if not doc.strip():
                    raise ReaderError(f"{path}:{line}: empty document id")
                if not _is_int(grade_text):
                    raise ReaderError(f"{path}:{line}: relevance grade {grade_text!r} is not an integer")
                grade = int(grade_text)
                earlier = seen.get((query, doc))
                if earlier is not None:
                    if earlier[0] != grade:
                        raise ReaderError(
                            f"{path}:{line}: query {query!r}, document {doc!r} graded {grade} here "
                            f"and {earlier[0]} on line {earlier[1]}"
                        )
                    continue
                seen[(query, doc)] = (grade, line)
                yield split, query, doc, grade
    except UnicodeDecodeError as error:
        raise ReaderError(f"{path}:{line + 1}: not UTF-8 ({error.reason})") from error


def _qrels_rows(handle: TextIO, path: Path) -> tuple[Iterator[tuple[int, list[str]]], bool]:
    """(line number, cells) of the data lines, and whether the layout is TREC (else BEIR)."""
    first_line = 0
    first = ""
    for raw in handle:
        first_line += 1
        if raw.strip():
            first = raw
            break
    if not first:
        return iter(()), False
    cells = first.rstrip("\r\n").split("\t")
    if len(cells) == 3:
        return _beir_rows(handle, path, first_line, None if not _is_int(cells[2].strip()) else cells), False
    return _trec_rows(handle, path, first_line, first), True


def _beir_rows(handle: TextIO, path: Path, first_line: int, first: list[str] | None) -> Iterator[tuple[int, list[str]]]:
    if first is not None:  # no header: the first line is data
        yield first_line, first
    reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
    for cells in reader:
        line = first_line + reader.line_num
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != 3:
            raise ReaderError(
                f"{path}:{line}: expected 3 tab-separated columns (query-id, corpus-id, score), found {len(cells)}"
            )
        yield line, cells


def _trec_rows(handle: TextIO, path: Path, first_line: int, first: str) -> Iterator[tuple[int, list[str]]]:
    line, text = first_line, first
    while True:
        cells = text.split()
        if cells:
            if len(cells) != 4:
                raise ReaderError(
                    f"{path}:{line}: expected a BEIR qrels line (3 tab-separated columns) or a TREC qrels line "
                    f"(query_id iteration doc_id grade), found {len(cells)} columns"
                )
            yield line, cells
        text = handle.readline()
        if not text:
            return
        line += 1


def read_qrels_tsv(path: str | Path, split: str) -> pd.DataFrame:
    """A qrels file (BEIR ``qrels/<split>.tsv`` or TREC qrels, see :func:`iter_qrels`) as a frame with
    :data:`QRELS_COLUMNS` (strings, ``relevance`` int64), every row's ``split`` = ``split``."""
    columns: list[list] = [[], [], [], []]
    for row in iter_qrels(path, split):
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return qrels_frame(zip(*columns, strict=True))


def qrels_frame(rows) -> pd.DataFrame:
    """Rows ``(split, query_id, doc_id, relevance)`` as a frame with :data:`QRELS_COLUMNS` and their types."""
    frame = pd.DataFrame.from_records(list(rows), columns=list(QRELS_COLUMNS))
    return frame.astype({"split": "object", "query_id": "object", "doc_id": "object", "relevance": "int64"})


def qrels_dict(frame: pd.DataFrame, split: str | None = None) -> Qrels:
    """The frame's judgements (only those of ``split`` if given) as query id -> doc id -> grade, in row
    order. Raises ValueError for missing columns or a (query, document) judged twice with different
    grades (within the selected rows)."""
    missing = [c for c in QRELS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"qrels frame lacks the column(s) {', '.join(missing)}")
    if split is not None:
        frame = frame[frame["split"] == split]
    qrels: Qrels = {}
    for query, doc, grade in zip(frame["query_id"], frame["doc_id"], frame["relevance"], strict=True):
        judged = qrels.setdefault(str(query), {})
        grade = int(grade)
        if judged.get(str(doc), grade) != grade:
            raise ValueError(f"query {query!r}, document {doc!r} has two grades: {judged[str(doc)]} and {grade}")
        judged[str(doc)] = grade
    return qrels


# ---------------------------------------------------------------------------------------------
# per-query metrics


def _ranks(scores: np.ndarray, ids: Sequence[str], hit_scores: np.ndarray, hit_ids: Sequence[str]) -> np.ndarray:
    """0-based positions in trec_eval order (score descending, ties by id descending, NaN last) of the
    documents ``hit_ids`` (scored ``hit_scores``) within the list ``ids`` / ``scores``.

    Scores are compared in single precision, as trec_eval stores them. Vectorised: one sort of the
    scores, a binary search per hit; ids are compared only among documents tied with a hit."""
    with np.errstate(over="ignore"):  # beyond float32's range: infinity, as the C cast gives
        scores, hit_scores = scores.astype(np.float32), hit_scores.astype(np.float32)
    negated = np.sort(-scores)  # ascending; NaN sorts last, as trec_eval's worst (our rule)
    keys = -hit_scores
    above = np.searchsorted(negated, keys, side="left")  # strictly better scores (NaN compares as largest)
    tied = np.searchsorted(negated, keys, side="right") - above - 1  # equal scores, the hit itself excluded
    if not tied.any():
        return above
    ids_array: np.ndarray | None = None
    ranks = above.copy()
    for i in np.flatnonzero(tied):
        if ids_array is None:
            ids_array = np.asarray(ids, dtype=str) if not isinstance(ids, np.ndarray) else ids.astype(str)
        same = np.isnan(scores) if math.isnan(hit_scores[i]) else scores == hit_scores[i]
        ranks[i] += int(np.count_nonzero(ids_array[same] > hit_ids[i]))
    return ranks


@functools.lru_cache(maxsize=64)
def metric_names(cutoffs: tuple[int, ...] = CUTOFFS) -> tuple[str, ...]:
    """The metric names :func:`query_metrics` returns, in its order: each metric of :data:`METRICS`
    at each cutoff."""
    return tuple(f"{metric}@{k}" for metric in METRICS for k in cutoffs)


def _metrics_from_hits(
    ranks: np.ndarray, grades: np.ndarray, ideal: np.ndarray, cutoffs: Sequence[int]
) -> dict[str, float]:
    """The metrics of one query from the 0-based ranks and grades of its retrieved relevant documents
    and the grades of all its relevant documents (``ideal``, any order)."""
    names = metric_names(tuple(int(k) for k in cutoffs))
    if ranks.size == 0:  # nothing relevant retrieved (or nothing relevant at all): every metric is 0
        return dict.fromkeys(names, 0.0)
    order = np.argsort(ranks, kind="stable")
    ranks, grades = ranks[order].astype(np.float64), grades[order].astype(np.float64)
    n_rel = ideal.size  # >= ranks.size >= 1
    cuts = np.asarray(cutoffs, dtype=np.int64)
    within = np.searchsorted(ranks, cuts, side="left")  # relevant documents retrieved in the top k
    # sums in rank order, as trec_eval accumulates them
    dcg = np.concatenate(([0.0], np.cumsum(grades / np.log2(ranks + 2.0))))
    precision = np.concatenate(([0.0], np.cumsum(np.arange(1, ranks.size + 1) / (ranks + 1.0))))
    best = np.sort(ideal.astype(np.float64))[::-1]
    idcg = np.concatenate(([0.0], np.cumsum(best / np.log2(np.arange(best.size) + 2.0))))
    first = ranks[0]
    values = np.concatenate(
        (
            dcg[within] / idcg[np.minimum(cuts, n_rel)],  # ideal DCG > 0: at least one grade >= 1
            precision[within] / n_rel,
            within / n_rel,
            within / cuts,
            np.where(first < cuts, 1.0 / (first + 1.0), 0.0),
        )
    )
    return dict(zip(names, values.tolist(), strict=True))


def _check_cutoffs(cutoffs: Sequence[int]) -> None:
    if not len(cutoffs) or any(int(k) != k or k < 1 for k in cutoffs):
        raise ValueError(f"cutoffs must be positive integers, found {tuple(cutoffs)!r}")


def _relevant(relevant: Mapping[str, int]) -> dict[str, int]:
    return {doc: int(grade) for doc, grade in relevant.items() if grade >= RELEVANCE_LEVEL}


def _scores(scores: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    array = np.asarray(scores, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"expected {n} scores (one per document), found shape {array.shape}")
    return array


def _refuse_repeats(doc_ids: Sequence[str]) -> None:
    """A ranked list names each document once: ValueError naming the first repeated one."""
    if len(set(doc_ids)) != len(doc_ids):
        seen: set[str] = set()
        duplicate = next(d for d in doc_ids if d in seen or seen.add(d))
        raise ValueError(f"document {duplicate!r} appears twice in the ranked list")


def _hits_of_list(
    doc_ids: Sequence[str], scores: Sequence[float] | np.ndarray, relevant: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray, dict[str, int], np.ndarray, list[str]]:
    """(scores, ranks of the retrieved relevant documents, the relevant documents, their grades in rank
    input order, their ids) of one ranked list given as parallel sequences."""
    values = _scores(scores, len(doc_ids))
    _refuse_repeats(doc_ids)
    rel = _relevant(relevant)
    positions = [i for i, doc in enumerate(doc_ids) if doc in rel] if rel else []
    hit_ids = [doc_ids[i] for i in positions]
    grades = np.fromiter((rel[d] for d in hit_ids), dtype=np.int64, count=len(hit_ids))
    ranks = _ranks(values, doc_ids, values[positions], hit_ids) if positions else np.zeros(0, dtype=np.int64)
    return values, ranks, rel, grades, hit_ids


def query_metrics(
    doc_ids: Sequence[str],
    scores: Sequence[float] | np.ndarray,
    relevant: Mapping[str, int],
    cutoffs: Sequence[int] = CUTOFFS,
) -> dict[str, float]:
    """``ndcg@k``, ``map@k``, ``recall@k``, ``p@k``, ``mrr@k`` for each k of ``cutoffs`` of one query.

    ``doc_ids`` and ``scores`` are the retrieved documents and their scores, in any order (the order is
    trec_eval's, see the module docstring); ``relevant`` the query's judgements (grade >= 1 relevant).
    Raises ValueError for a document id twice, scores of another length, or a bad cutoff."""
    _check_cutoffs(cutoffs)
    _, ranks, rel, grades, _ = _hits_of_list(doc_ids, scores, relevant)
    return _metrics_from_hits(ranks, grades, np.fromiter(rel.values(), np.int64, len(rel)), cutoffs)


def first_relevant_rank(
    doc_ids: Sequence[str], scores: Sequence[float] | np.ndarray, relevant: Mapping[str, int]
) -> int | None:
    """1-based position, in trec_eval order, of the first relevant document (grade >= 1) of the list;
    None when the list has none."""
    _, ranks, *_ = _hits_of_list(doc_ids, scores, relevant)
    return int(ranks.min()) + 1 if ranks.size else None


def trec_order(doc_ids: Sequence[str], scores: Sequence[float] | np.ndarray) -> np.ndarray:
    """Positions of ``doc_ids`` in trec_eval's order, the one :func:`query_metrics` ranks by: score
    descending compared in single precision, equal scores by document id descending (code point order,
    as ``strcmp`` orders UTF-8), NaN read as -inf (after every number, tied with -inf; a document id
    listed twice: its later position first). trec_eval sorts a run so, whatever its rank column says.
    The ids are read only when two scores are equal (a dense model's lists rarely have any)."""
    if not len(doc_ids):
        return np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):  # beyond float32's range: infinity, as the C cast gives
        single = _scores(scores, len(doc_ids)).astype(np.float32).astype(np.float64)
    key = np.where(np.isnan(single), np.inf, -single)  # NaN after every number
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    if not (ordered[1:] == ordered[:-1]).any():  # no two scores equal (-0.0 equals 0.0): no id needed
        return order
    id_rank = np.empty(len(doc_ids), dtype=np.int64)
    id_rank[np.argsort(np.asarray(doc_ids, dtype=str), kind="stable")] = np.arange(len(doc_ids))
    return np.lexsort((-id_rank, key))  # lexsort's last key is the primary one


def ordered_metrics(
    ranked_ids: Sequence[str], relevant: Mapping[str, int], cutoffs: Sequence[int] = CUTOFFS
) -> tuple[dict[str, float], int | None]:
    """:func:`query_metrics` and :func:`first_relevant_rank` of a list already in trec_eval order
    (:func:`trec_order`): a relevant document's position is its rank, so nothing is sorted again."""
    _check_cutoffs(cutoffs)
    _refuse_repeats(ranked_ids)
    rel = _relevant(relevant)
    positions = [i for i, doc in enumerate(ranked_ids) if doc in rel] if rel else []
    ranks = np.asarray(positions, dtype=np.int64)
    grades = np.fromiter((rel[ranked_ids[i]] for i in positions), dtype=np.int64, count=len(positions))
    metrics = _metrics_from_hits(ranks, grades, np.fromiter(rel.values(), np.int64, len(rel)), cutoffs)
    return metrics, (positions[0] + 1 if positions else None)


def _run_query_metrics(
    ranked: Mapping[str, float], judged: Mapping[str, int], cutoffs: Sequence[int]
) -> dict[str, float]:
    """query_metrics for a run's {doc: score} dict: the relevant documents are looked up in the dict
    (no pass over the list in Python)."""
    rel = _relevant(judged)
    hit_ids = [doc for doc in rel if doc in ranked]
    grades = np.fromiter((rel[d] for d in hit_ids), dtype=np.int64, count=len(hit_ids))
    if hit_ids:
        ids = list(ranked)
        values = np.fromiter(ranked.values(), dtype=np.float64, count=len(ids))
        hit_scores = np.fromiter((ranked[d] for d in hit_ids), dtype=np.float64, count=len(hit_ids))
        ranks = _ranks(values, ids, hit_scores, hit_ids)
    else:
        ranks = np.zeros(0, dtype=np.int64)
    return _metrics_from_hits(ranks, grades, np.fromiter(rel.values(), np.int64, len(rel)), cutoffs)


def evaluate_run(run: Run, qrels: Qrels, cutoffs: Sequence[int] = CUTOFFS) -> dict[str, dict[str, float]]:
    """Per-query metrics of a run (query id -> doc id -> score), in qrels order.

    Scored: the qrels queries with at least one judgement that the run has, and the qrels queries with a
    relevant document that the run lacks (all 0; pytrec_eval drops these). See the module docstring."""
    _check_cutoffs(cutoffs)
    out: dict[str, dict[str, float]] = {}
    for query, judged in qrels.items():
        if not judged:
            continue  # no judgement at all: pytrec_eval does not score it either
        ranked = run.get(query)
        if ranked is None:
            if not any(grade >= RELEVANCE_LEVEL for grade in judged.values()):
                continue
            ranked = {}
        out[query] = _run_query_metrics(ranked, judged, cutoffs)
    return out


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The plain mean of each metric over the queries (all must have the same metrics); {} for none."""
    if not per_query:
        return {}
    names = list(next(iter(per_query.values())))
    values = np.empty((len(per_query), len(names)), dtype=np.float64)
    for row, (query, metrics) in enumerate(per_query.items()):
        if len(metrics) != len(names):
            raise ValueError(f"query {query!r} has the metrics {sorted(metrics)}, expected {sorted(names)}")
        values[row] = [metrics[name] for name in names]
    return {name: float(mean) for name, mean in zip(names, values.mean(axis=0), strict=True)}


# ---------------------------------------------------------------------------------------------
# the CodeSearchNet Challenge's annotations as qrels

CHALLENGE_SPLIT = "test"


def _challenge_frame(annotations: pd.DataFrame) -> pd.DataFrame:
    """language, query (both lowercased, as csbench.evaluate.challenge matches them), url, relevance."""
    missing = [c for c in ANNOTATION_COLUMNS if c not in annotations.columns]
    if missing:
        raise ValueError(f"annotations lack the column(s) {', '.join(missing)}")
    relevance = pd.to_numeric(annotations["Relevance"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(relevance) | (relevance != np.round(relevance))
    if bad.any():
        row = int(bad.argmax())
        raise ValueError(f"annotation row {row}: Relevance {annotations['Relevance'].iloc[row]!r} is not an integer")
    return pd.DataFrame(
        {
            "language": [_key(v, f"annotation row {i}: Language") for i, v in enumerate(annotations["Language"])],
            "query": [_key(v, f"annotation row {i}: Query") for i, v in enumerate(annotations["Query"])],
            "url": [_text(v, f"annotation row {i}: GitHubUrl") for i, v in enumerate(annotations["GitHubUrl"])],
            "relevance": relevance.astype(np.int64),
        }
    )


def challenge_query_ids(annotations: pd.DataFrame, queries: Sequence[str] | None = None) -> dict[str, str]:
    """Lowercased query text -> its qrels id ``q<n>``: n is the 1-based position in ``queries`` (the 99
    of queries.csv, matched lowercased) when given, else in the order of first appearance in the
    annotations. Raises ValueError for two queries equal after lowercasing, or an annotated query that
    ``queries`` lacks."""
    frame = _challenge_frame(annotations)
    if queries is None:
        order = list(dict.fromkeys(frame["query"]))
    else:
        order = [q.lower() for q in queries]
        if len(set(order)) != len(order):
            duplicate = next(q for i, q in enumerate(order) if q in order[:i])
            raise ValueError(f"query {duplicate!r} appears twice in the query list (after lowercasing)")
        unknown = sorted(set(frame["query"]) - set(order))
        if unknown:
            raise ValueError(
                f"annotated queries not in the query list: {unknown[:5]}{' ...' if len(unknown) > 5 else ''}"
            )
    return {query: f"q{n}" for n, query in enumerate(order, start=1)}


def challenge_qrels(
    annotations: pd.DataFrame, queries: Sequence[str] | None = None, language: str | None = None
) -> pd.DataFrame:
    """The Challenge's expert annotations (the frame of ``csn_challenge.load_annotations``) as qrels rows
    (:data:`QRELS_COLUMNS`, split ``"test"``): one row per annotated (query, GitHub URL).

    ``query_id`` as :func:`challenge_query_ids` gives it; ``doc_id`` the URL verbatim; ``relevance`` the
    mean over the annotators of the pair (as relevanceeval.py averages them) rounded half up to an
    integer (1.5 -> 2, 2.5 -> 3, 1/3 -> 0): trec_eval takes integer grades only, so this is where csbench's
    qrels NDCG departs from relevanceeval's fractional means (and from its 2^rel - 1 gains). Queries and
    languages are matched lowercased, as csbench.evaluate.challenge does. ``language`` (any case) keeps
    only the annotations of that language. Rows in query-id order, then URL order."""
    frame = _challenge_frame(annotations)
    ids = challenge_query_ids(annotations, queries)
    if language is not None:
        frame = frame[frame["language"] == language.lower()]
    grouped = frame.groupby(["query", "url"], sort=False)["relevance"].agg(["sum", "count"])
    total, count = grouped["sum"].to_numpy(np.int64), grouped["count"].to_numpy(np.int64)
    # round half up of sum / count, exactly in integers: floor((2 sum + count) / (2 count))
    rounded = (2 * total + count) // (2 * count)
    rows = pd.DataFrame(
        {
            "split": CHALLENGE_SPLIT,
            "query_id": [ids[q] for q in grouped.index.get_level_values("query")],
            "doc_id": list(grouped.index.get_level_values("url")),
            "relevance": rounded,
            "_order": [int(ids[q][1:]) for q in grouped.index.get_level_values("query")],
        }
    )
    rows = rows.sort_values(["_order", "doc_id"], kind="stable").drop(columns="_order").reset_index(drop=True)
    return qrels_frame(rows.itertuples(index=False, name=None))


def challenge_doc_languages(annotations: pd.DataFrame) -> dict[str, str]:
    """GitHub URL -> its annotated language, lowercased (for a caller that filters qrels by language).
    Raises ValueError for a URL annotated under two languages."""
    frame = _challenge_frame(annotations)
    languages: dict[str, str] = {}
    for url, lang in zip(frame["url"], frame["language"], strict=True):
        if languages.setdefault(url, lang) != lang:
            raise ValueError(f"URL {url} is annotated as {languages[url]!r} and as {lang!r}")
    return languages
