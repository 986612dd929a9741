"""Retrieval protocols (SPEC "Retrieval protocols"): which candidates each query is ranked against.

A protocol is a plan over the test pool: for each query (a record of the pool, whose own code is
the correct answer) the pool indices of its candidates, or None when it is not evaluated.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from csbench.registry import Registry


@dataclass(frozen=True)
class Plan:
    """Candidates per query: ``groups[g]`` is an index array of the pool; ``group_of[i]`` is the
    group of query i (-1: query i is not evaluated under this protocol)."""

    groups: list[np.ndarray]
    group_of: np.ndarray
    note: str = ""
    answers: np.ndarray | None = None  # pool index of each query's correct code; None: the query's own
    # one candidate set per query (row i: query i's candidates), instead of groups shared by queries
    per_query: np.ndarray | None = None
    # "query": each query ranks its candidates' codes; "code": each record's code ranks the queries of
    # its group (CodeSearchNet's compute_ranks: ``cdist(codes, queries)`` counted along the last axis)
    axis: str = "query"
    # a scipy ``cdist`` metric: ranks count distances ``<=`` the correct one, computed from the
    # retriever's vectors (CodeSearchNet's model_test.py); None: the retriever's scores, ``>=``
    distance: str | None = None
    # the pool kind whose texts are ranked: "test" (the pool as read) or FUNCNAME_KIND (FuncName test)
    texts: str = "test"
    # "against": a rank counts every candidate scoring at least the correct one (ties against the model);
    # "argsort": a rank is the position in the descending np.argsort order of the query's whole score row
    # (CodeXGLUE's run.py; ``csbench.evaluate.ranking.rank_rows_argsort``); "qrels": no single answer,
    # each query's top list is scored against relevance judgements (``Graded``)
    order: str = "against"
    # argsort plans: (query keys, candidate keys); query i's answers are the candidates of its key, its
    # rank that of the first of them (a url-matched codebase); None: each query's answer is its own code
    keys: tuple[np.ndarray, np.ndarray] | None = None

    def answer_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """(query keys, pool keys) of an argsort plan: the plan's ``keys``, else the pool indices
        (query i's answer is pool entry i)."""
        if self.keys is not None:
            return self.keys
        own = np.arange(self.group_of.size, dtype=np.int64)
        return own, own

    def candidates(self, query: int) -> np.ndarray | None:
        if self.per_query is not None:
            return self.per_query[query]
        group = self.group_of[query]
        return None if group < 0 else self.groups[group]

    def answer(self, query: int) -> int:
        return query if self.answers is None else int(self.answers[query])


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    mrr_cutoff: int | None  # reciprocal rank is 0 beyond this rank
    uses_codebase: bool = False  # ranks against the release's codebase when it has one
    kind: str = "ranking"  # "ranking": a rank per query; "matching": a match / no-match decision per pair
    texts: str = "test"  # the pool kind whose texts it ranks: "test", or FUNCNAME_KIND (CodeSearchNet's FuncName test)
    reference: str = ""  # the script that defines it (repository, path), named with every score
    graded: bool = False  # scored against relevance judgements (qrels), not one answer per query

    @property
    def label(self) -> str:
        """The name with its reference, as summaries, reports and results.db show it:
        ``csn-1000 (CodeSearchNet src/model_test.py)``."""
        return f"{self.name} ({self.reference})" if self.reference else self.name

    def plan(self, ids: list[str]) -> Plan:
        raise NotImplementedError


def canonical_order(ids: list[str]) -> np.ndarray:
    """Pool indices sorted by id: protocols that sample draw in this order, so the order the test
    pool comes in changes nothing."""
    return np.array(sorted(range(len(ids)), key=ids.__getitem__), dtype=np.int64)


@dataclass(frozen=True)
class FullCorpus(Protocol):
    """Every query against the whole test pool, its own code the answer, ranked as CodeXGLUE's
    ``run.py`` ranks (``Plan.order == "argsort"``: the position in the descending ``np.argsort`` of the
    query's score row, ties in argsort's order). Against a release's codebase the plan is
    :func:`codebase_plan`'s (answers matched by url)."""

    def plan(self, ids: list[str]) -> Plan:
        everything = np.arange(len(ids))
        return Plan([everything], np.zeros(len(ids), dtype=np.int64), order="argsort")


# CodeSearchNet's FuncName test (src/model_test.py, get_dataset_from(use_func_names=True)): the query is
# the function name split into subtokens, and every code token equal to the name becomes the unknown
# token of dpu_utils' Vocabulary. Its texts are indexed as their own pool kind.
FUNCNAME_KIND = "funcname"
UNK_TOKEN = "%UNK%"  # dpu_utils.mlutils.Vocabulary.get_unk()
# dpu_utils.codeutils.split_identifier_into_parts (microsoft/dpu-utils, python/dpu_utils/codeutils/
# identifiersplitting.py at 08d7701728058445fbe937c7a4c3c6b8bb82d8ec): camelCase, digits, @ / $, snake_case
_IDENTIFIER_SPLIT = re.compile(
    "(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])|(?<=[0-9])(?=[a-zA-Z])|(?<=[A-Za-z])(?=[0-9])|"
    "(?<=[@$])(?=[a-zA-Z0-9])|(?<=[a-zA-Z0-9])(?=[@$])|_"
)


def split_identifier_into_parts(identifier: str) -> list[str]:
    """dpu_utils' ``split_identifier_into_parts``: the non-empty parts (case kept), or the identifier
    itself when it has none (``"__"`` stays ``["__"]``; a qualified ``Class.method`` is one part)."""
    parts = [part for part in _IDENTIFIER_SPLIT.split(identifier) if part]
    return parts or [identifier]


def funcname_texts(func_name: str, code: str) -> tuple[str, str]:
    """The FuncName test's (query, code) of one record: the name's subtokens joined by spaces, and the
    code with every whole-token occurrence of the name (not preceded or followed by a letter, digit,
    ``_`` or ``$``) replaced by ``%UNK%``. CodeSearchNet replaces tokens of ``code_tokens`` equal to
    ``func_name``, so a qualified name (``Class.method``) is never replaced there, nor here."""
    query = " ".join(split_identifier_into_parts(func_name))
    if not func_name:
        return query, code
    pattern = re.compile(r"(?<![\w$])" + re.escape(func_name) + r"(?![\w$])")
    return query, pattern.sub(UNK_TOKEN, code)


def funcname_pool(pool: pd.DataFrame) -> pd.DataFrame:
    """The test pool with the FuncName test's texts (``funcname_texts``) in ``query`` and ``code``;
    ids, order and every other column unchanged."""
    pairs = zip(pool["func_name"], pool["code"], strict=True)
    texts = [funcname_texts(name if isinstance(name, str) else "", str(code)) for name, code in pairs]
    out = pool.copy()
    out["query"] = [query for query, _ in texts]
    out["code"] = [code for _, code in texts]
    return out


@dataclass(frozen=True)
class Chunked(Protocol):
    """CodeSearchNet's ``MrrSearchTester.evaluate`` (github/CodeSearchNet ``src/model_test.py``): the
    pool in file order (the order its release files give the records, which the prepared pool keeps),
    indices shuffled by numpy's legacy generator (``np.random.seed(seed)`` then
    ``np.random.shuffle``), cut into chunks of ``size`` (``test_batch_size``); the last partial chunk is
    dropped, and a pool smaller than ``size`` is one chunk of its own size (the script lowers the batch
    size to the data size). In each chunk ``compute_ranks(codes, queries)`` takes the ``cdist``
    distances (``distance``, default cosine) of each *code* to every query of the chunk and counts the
    queries at a distance ``<=`` its own query's: the ranked items are the queries, one rank per code
    (``Plan.axis == "code"``); ties count against the model. MRR is the mean over the chunks of the
    chunk means, which equals the mean over the evaluated records since all chunks have one size."""

    size: int = 1000
    seed: int = 0
    distance: str = "cosine"

    def plan(self, ids: list[str]) -> Plan:
        n = len(ids)
        order = np.arange(n)
        np.random.RandomState(self.seed).shuffle(order)  # = np.random.seed(seed); np.random.shuffle(idxs)
        size = min(self.size, n)
        n_chunks = n // size if size else 0
        groups = [order[c * size : (c + 1) * size] for c in range(n_chunks)]
        group_of = np.full(n, -1, dtype=np.int64)
        for g, members in enumerate(groups):
            group_of[members] = g
        note = ""
        if n == 0:
            note = "empty test pool: nothing evaluated"
        elif size < self.size:
            note = f"test pool has {n} < {self.size} records: one chunk of {n} (CodeSearchNet lowers the batch size)"
        elif n % size:
            note = f"{n % size} records in the last partial chunk are not evaluated"
        return Plan(groups, group_of, note, axis="code", distance=self.distance, texts=self.texts)


@dataclass(frozen=True)
class IdChunked(Protocol):
    """csbench's own order-independent chunking (``csn-1000`` before it followed CodeSearchNet
    exactly): the pool sorted by id, permuted by ``np.random.default_rng(seed)``, chunks of ``size``,
    the last partial chunk dropped (a pool smaller than ``size`` gives none); each *query* ranks the
    codes of its chunk by the retriever's scores, ties against the model."""

    size: int = 1000
    seed: int = 0

    def plan(self, ids: list[str]) -> Plan:
        canonical = canonical_order(ids)
        shuffled = canonical[np.random.default_rng(self.seed).permutation(len(ids))]
        n_chunks = len(ids) // self.size
        groups = [shuffled[c * self.size : (c + 1) * self.size] for c in range(n_chunks)]
        group_of = np.full(len(ids), -1, dtype=np.int64)
        for g, members in enumerate(groups):
            group_of[members] = g
        note = ""
        if n_chunks == 0:
            note = f"test pool has {len(ids)} < {self.size} records: no full chunk, nothing evaluated"
        elif len(ids) % self.size:
            note = f"{len(ids) % self.size} records in the last partial chunk are not evaluated"
        return Plan(groups, group_of, note)


def sample_others(rng: np.random.Generator, n: int, own: int, k: int) -> np.ndarray:
    """``k`` distinct indices of ``range(n)`` other than ``own``, uniformly without replacement."""
    drawn = rng.choice(n - 1, size=k, replace=False)
    return drawn + (drawn >= own)  # skip over ``own``


@dataclass(frozen=True)
class SampledDistractors(Protocol):
    """GeCS's distractors as its GenBench task draws them (drndr/gencodesearchnet
    ``data/mrr/New_cbt_mrr_implementation.py``, ``get_dataset_raw``): Python's ``random.seed(seed)``
    once, then for each test item in file order (the pool's order) ``random.sample(other_items,
    distractors)``, ``other_items`` being the items before and after it. ``random.sample`` picks by
    position only, so sampling the positions ``range(n - 1)`` and skipping over the item's own gives
    the very same draws without building the n lists. The correct code comes first in each row; a
    rank counts every candidate scoring ``>=`` the correct one (``eval_mrr*.py``:
    ``np.sum(np.array(scores) >= correct_score)``, the correct one included). A pool smaller than
    ``distractors + 1`` gives every query all the other codes (noted; GeCS's script would stop there)."""

    distractors: int = 99
    seed: int = 42

    def plan(self, ids: list[str]) -> Plan:
        n = len(ids)
        k = min(self.distractors, max(n - 1, 0))
        rng = random.Random(self.seed)
        rows = np.empty((n, k + 1), dtype=np.int64)
        others = range(n - 1)
        for idx in range(n):
            drawn = np.fromiter(rng.sample(others, k), dtype=np.int64, count=k)
            rows[idx, 0] = idx
            rows[idx, 1:] = drawn + (drawn >= idx)  # position in other_items -> pool index
        note = ""
        if k < self.distractors:
            note = f"test pool has {n} records: {k} distractors per query instead of {self.distractors}"
        return Plan([], np.arange(n, dtype=np.int64), note, per_query=rows)


@dataclass(frozen=True)
class MatchingPairs:
    """The pairs of a matching protocol: (query index, code index, label 1 = match) of a pool.
    ``source``: ``released`` (the release's own labelled pairs, its negatives included) or
    ``drawn`` (one negative per query drawn here); ``note``: what was left out, if anything."""

    queries: np.ndarray
    codes: np.ndarray
    labels: np.ndarray
    source: str = "drawn"
    note: str = ""

    @property
    def n_queries(self) -> int:
        return int(np.unique(self.queries).size)


RELEASED_COLUMNS = ("query_id", "code_id", "label", "line")  # a release's labelled pairs, by record id


@dataclass(frozen=True)
class Matching(Protocol):
    """GeCS's matching task (drndr/gencodesearchnet ``experiments/eval_clf*.py``): labelled
    (query, code) pairs, each decided match / no match; accuracy, precision, recall and F1 of the
    match class.

    The pairs are the release's own where it has them (``released``: GeCS's ``clf`` files, one
    drawn negative after each positive, ``target`` 0/1), else every record gives one positive
    pair (its query, its code) and one negative (its query, a code drawn uniformly from the other
    records, seed ``seed``), so the classes are balanced 1:1. How a model decides is a
    :class:`MatchRule`: a cross-encoder's head, GeCS's fixed cosine threshold (``sim > 0.5``), or
    the threshold most accurate on a validation split (the dataset's own or another's)."""

    seed: int = 42

    def pairs(self, ids: list[str], released: pd.DataFrame | None = None) -> MatchingPairs:
        """The pairs over a pool of records ``ids``: ``released`` (a frame of
        :data:`RELEASED_COLUMNS`, in release order) mapped onto the pool, else drawn."""
        if released is not None:
            return self.released_pairs(ids, released)
        n = len(ids)
        if n < 2:
            raise ValueError(f"matching needs at least 2 records, the pool has {n}")
        rng = np.random.default_rng(self.seed)
        negatives = np.empty(n, dtype=np.int64)
        canonical = canonical_order(ids)
        for rank, query in enumerate(canonical):  # draws are ranks in id order, mapped to the pool
            negatives[query] = canonical[sample_others(rng, n, rank, 1)[0]]
        own = np.arange(n, dtype=np.int64)
        return MatchingPairs(
            np.concatenate([own, own]),
            np.concatenate([own, negatives]),
            np.concatenate([np.ones(n, dtype=np.int8), np.zeros(n, dtype=np.int8)]),
        )

    @staticmethod
    def released_pairs(ids: list[str], released: pd.DataFrame) -> MatchingPairs:
        """The release's pairs in its order, as pool indices; a pair naming a record the pool
        lacks (dropped by the reader) is left out and counted in the note."""
        absent = [c for c in RELEASED_COLUMNS[:3] if c not in released.columns]
        if absent:
            raise ValueError(f"released matching pairs lack the column(s) {absent}")
        where = {record: index for index, record in enumerate(ids)}
        queries = released["query_id"].map(where)
        codes = released["code_id"].map(where)
        kept = (queries.notna() & codes.notna()).to_numpy()
        labels = released["label"].to_numpy()
        if not np.isin(labels, (0, 1)).all():
            raise ValueError("released matching pairs: every label must be 0 or 1")
        if not kept.any():
            raise ValueError("none of the released matching pairs names records of the test pool")
        dropped = int((~kept).sum())
        note = f"{dropped} released pairs name a record the test pool lacks: not evaluated" if dropped else ""
        return MatchingPairs(
            queries[kept].to_numpy(dtype=np.int64),
            codes[kept].to_numpy(dtype=np.int64),
            labels[kept].astype(np.int8),
            "released",
            note,
        )

    def plan(self, ids: list[str]) -> Plan:
        raise TypeError("matching is not a ranking protocol: use pairs()")


def without_special_tokens(
    pairs: MatchingPairs, queries: list[str], codes: list[str], tokens: tuple[str, ...]
) -> MatchingPairs:
    """The pairs less those whose query or code text contains one of ``tokens``: GeCS's
    ``eval_clf*.py`` (``load_data``) skips every line whose text or code holds its tokenizer's sep,
    cls, pad or eos token, so the released pairs it evaluates depend on the model. Counted in the
    note."""
    tokens = tuple(token for token in tokens if token)
    if not tokens:
        return pairs
    bad_queries = np.array([any(t in text for t in tokens) for text in queries], dtype=bool)
    bad_codes = np.array([any(t in text for t in tokens) for text in codes], dtype=bool)
    if not (bad_queries.any() or bad_codes.any()):
        return pairs
    kept = ~(bad_queries[pairs.queries] | bad_codes[pairs.codes])
    dropped = int((~kept).sum())
    if not dropped:
        return pairs
    note = (
        f"{dropped} released pairs whose text holds one of the tokenizer's special tokens "
        f"({', '.join(tokens)}) not evaluated (GeCS's eval_clf*.py skips them)"
    )
    return MatchingPairs(
        pairs.queries[kept],
        pairs.codes[kept],
        pairs.labels[kept],
        pairs.source,
        "; ".join(n for n in (pairs.note, note) if n),
    )


GECS_THRESHOLD = 0.5  # eval_clf_cosine.py: ``torch.where(sim > 0.5, 1, 0)``
MATCH_RULES = ("validation", "gecs", "fixed", "borrowed")


@dataclass(frozen=True)
class MatchRule:
    """How a model that scores pairs (not a cross-encoder, whose head decides) turns a score into
    match / no match (``evaluation.match_threshold``):

    ``validation``
        the threshold most accurate on the dataset's own validation pairs (:func:`best_threshold`);
        match when ``score >= threshold``.
    ``gecs``
        GeCS's zero-shot rule (``experiments/eval_clf_cosine.py``): the cosine similarity of the two
        vectors as ``torch.cosine_similarity`` computes it, match when ``sim > 0.5``.
    ``fixed``
        ``value`` instead of 0.5, the same strict ``>`` on the cosine.
    ``borrowed``
        the threshold most accurate on the validation pairs of ``dataset`` (another dataset, e.g.
        CoSQA dev for WebQueryTest), ``score >= threshold``."""

    kind: str = "validation"
    value: float | None = None
    dataset: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in MATCH_RULES:
            raise ValueError(f"match rule {self.kind!r}: not one of {', '.join(MATCH_RULES)}")
        if self.kind in ("gecs", "fixed") and (self.value is None or not np.isfinite(self.value)):
            raise ValueError(f"match rule {self.kind!r} needs a finite threshold value")
        if self.kind == "borrowed" and not self.dataset:
            raise ValueError("match rule 'borrowed' needs the dataset whose validation split chooses it")

    @classmethod
    def parse(cls, value: Any, where: str = "evaluation.match_threshold") -> MatchRule:
        """The rule a config value names: ``validation`` (default), ``gecs``, a number (a fixed
        cosine threshold, strict ``>``), or ``{dataset: <name>}`` (borrowed). Errors name ``where``."""
        if value is None or value == "validation":
            return cls()
        if value == "gecs":
            return cls("gecs", GECS_THRESHOLD)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not np.isfinite(value):
                raise ValueError(f"{where}: {value!r} is not a finite number")
            return cls("fixed", float(value))
        if isinstance(value, dict) and set(value) == {"dataset"} and isinstance(value["dataset"], str):
            return cls("borrowed", dataset=value["dataset"])
        raise ValueError(
            f"{where}: {value!r} is not a match threshold: use 'validation', 'gecs', a number, or "
            "{dataset: <a dataset of grid.datasets with a validation split>}"
        )

    @property
    def uses_cosine(self) -> bool:
        """GeCS's rules threshold the cosine of the vectors, not the model's own score."""
        return self.kind in ("gecs", "fixed")

    @property
    def strict(self) -> bool:
        return self.uses_cosine

    def describe(self) -> str:
        if self.kind == "gecs":
            return "GeCS fixed threshold: cosine > 0.5 (eval_clf_cosine.py)"
        if self.kind == "fixed":
            return f"fixed threshold: cosine > {self.value!r}"
        if self.kind == "borrowed":
            return f"threshold chosen on the validation split of {self.dataset} (score >= threshold)"
        return "threshold chosen on the validation split (score >= threshold)"


def decide(scores: np.ndarray, threshold: float, strict: bool) -> np.ndarray:
    """Match decisions: ``score > threshold`` (``strict``, GeCS) or ``score >= threshold``; a NaN
    score never matches."""
    scores = np.asarray(scores, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        matched = scores > threshold if strict else scores >= threshold
    return np.where(np.isnan(scores), False, matched)


def cosine_similarity(queries: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two equally long lists of vectors, exactly as GeCS computes it
    (``torch.cosine_similarity`` on float32 tensors, eps 1e-8), as float64."""
    import torch

    left = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32))
    right = torch.from_numpy(np.ascontiguousarray(codes, dtype=np.float32))
    if left.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    with torch.no_grad():
        return torch.cosine_similarity(left, right).numpy().astype(np.float64)


def matching_metrics(labels: np.ndarray, decisions: np.ndarray) -> dict[str, float | None]:
    """Accuracy, and precision, recall and F1 of the match class (label 1), as GeCS's
    ``eval_clf*.py`` reports them (scikit-learn's ``accuracy_score``, ``precision_score``,
    ``recall_score``, ``f1_score``: binary, ``pos_label=1``, an undefined ratio is 0, F1 as
    ``2 tp / (2 tp + fp + fn)``; no rounding). None for all four when there is no pair."""
    truth = np.asarray(labels).astype(bool)
    predicted = np.asarray(decisions).astype(bool)
    n = int(truth.size)
    if n == 0:
        return {"accuracy": None, "precision": None, "recall": None, "f1": None}
    tp = int((truth & predicted).sum())
    true_sum, pred_sum = int(truth.sum()), int(predicted.sum())
    return {
        "accuracy": float(np.average(truth == predicted)),
        "precision": tp / pred_sum if pred_sum else 0.0,
        "recall": tp / true_sum if true_sum else 0.0,
        "f1": 2.0 * tp / (float(true_sum) + float(pred_sum)) if true_sum + pred_sum else 0.0,
    }


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The decision threshold (match when score >= threshold) with the highest accuracy on
    (``scores``, ``labels``), and that accuracy. Candidates are the midpoints between consecutive
    distinct scores plus one below and one above all; among equally accurate thresholds the
    lowest wins, so the choice is deterministic."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    if scores.size == 0:
        raise ValueError("no validation pairs to choose a threshold on")
    distinct = np.unique(scores[~np.isnan(scores)])
    if distinct.size == 0:
        raise ValueError("every validation score is NaN")
    inner = (distinct[:-1] + distinct[1:]) / 2.0
    candidates = np.concatenate([[distinct[0] - 1.0], inner, [distinct[-1] + 1.0]])
    # accuracy of each candidate: positives at or above it plus negatives below it (NaN never matches)
    order = np.sort(np.where(np.isnan(scores), -np.inf, scores)[labels])
    negatives = np.sort(np.where(np.isnan(scores), -np.inf, scores)[~labels])
    positives_above = order.size - np.searchsorted(order, candidates, side="left")
    negatives_below = np.searchsorted(negatives, candidates, side="left")
    accuracy = (positives_above + negatives_below) / scores.size
    best = int(np.argmax(accuracy))
    return float(candidates[best]), float(accuracy[best])


def codebase_plan(query_urls: list[str], pool_urls: list[str]) -> Plan:
    """Every query against the whole codebase, answers matched by url as GraphCodeBERT's / UniXcoder's
    code-search ``run.py`` matches them: a query's rank is the position of the first codebase entry
    with its url in the descending argsort order of its scores (several entries of one url: the
    best-placed one counts, the others are not distractors). A query whose url is in no entry is still
    evaluated, as run.py evaluates it: rank ``len(pool) + 1``, reciprocal rank 0."""
    number: dict[str, int] = {}
    for url in pool_urls:
        number.setdefault(url, len(number))
    pool_keys = np.array([number[url] for url in pool_urls], dtype=np.int64)
    query_keys = np.array([number.get(url, -1) for url in query_urls], dtype=np.int64)
    first = {url: index for index, url in reversed(list(enumerate(pool_urls)))}
    answers = np.array([first.get(url, -1) for url in query_urls], dtype=np.int64)
    missing = int((query_keys < 0).sum())
    repeated = len(pool_urls) - len(number)
    notes = []
    if missing:
        notes.append(
            f"{missing} queries whose url is not in the codebase count as not found (reciprocal rank 0, "
            "rank = codebase size + 1), as run.py counts them"
        )
    if repeated:
        notes.append(f"{repeated} codebase entries repeat a url: a query's rank is that of its url's best-placed entry")
    return Plan(
        [np.arange(len(pool_urls))],
        np.zeros(len(query_urls), dtype=np.int64),
        "; ".join(notes),
        answers,
        order="argsort",
        keys=(query_keys, pool_keys),
    )


QRELS_CUTOFFS = (1, 3, 5, 10, 100, 1000)  # BEIR's / MTEB's k values (csbench.evaluate.qrels.CUTOFFS)


@dataclass(frozen=True)
class Graded(Protocol):
    """Graded, multi-relevant retrieval as BEIR, MTEB and CoIR score it: every test query against the
    whole corpus (the release's codebase; else the test pool), its top ``depth`` list scored against
    the dataset's relevance judgements (``qrels.parquet``; a dataset without them: the query's own
    code, or the codebase entries with its url, grade 1) with trec_eval's measures
    (:mod:`csbench.evaluate.qrels`: nDCG@k, MAP@k, Recall@k, P@k, MRR@k). A query's rank (for the
    robustness curves and flip rate) is that of its first relevant document in the list, and
    ``depth + 1`` when none is in it (reciprocal rank 0)."""

    depth: int = 1000
    cutoffs: tuple[int, ...] = QRELS_CUTOFFS

    def plan(self, ids: list[str]) -> Plan:
        return graded_plan(len(ids), len(ids))


def graded_plan(n_queries: int, n_pool: int) -> Plan:
    """Every query against all ``n_pool`` entries, scored against qrels (``Plan.order == "qrels"``)."""
    return Plan([np.arange(n_pool)], np.zeros(n_queries, dtype=np.int64), order="qrels")


PROTOCOLS: Registry[Protocol] = Registry("protocol")  # each registered under its own name
PROTOCOLS.add(
    FullCorpus(
        "full-corpus",
        "GraphCodeBERT / UniXcoder code-search run.py: each query against the release's codebase (answers "
        "matched by url) or else the whole test split; rank = position in the descending np.argsort of the "
        "float32 scores (ties in argsort's order); MRR over the top 1,000 (beyond, or answer absent: 0)",
        1000,
        uses_codebase=True,
        reference="microsoft/CodeBERT GraphCodeBERT/codesearch/run.py, UniXcoder/downstream-tasks/code-search/run.py",
    )
)
PROTOCOLS.add(
    Chunked(
        "csn-1000",
        "CodeSearchNet model_test.py: file order, np.random.seed(0) shuffle, chunks of 1,000 (one chunk of "
        "the pool when smaller), last partial chunk dropped; each code ranks the chunk's queries by cosine "
        "distance, ties against the model",
        None,
        reference="github/CodeSearchNet src/model_test.py",
    )
)
PROTOCOLS.add(
    Chunked(
        "csn-funcname",
        "CodeSearchNet model_test.py FuncName test: csn-1000 with the function name's subtokens as the query "
        "and the name replaced by %UNK% in the code",
        None,
        texts=FUNCNAME_KIND,
        reference="github/CodeSearchNet src/model_test.py, FuncName test",
    )
)
PROTOCOLS.add(
    IdChunked(
        "id-chunks-1000",
        "csbench: pool sorted by id, permuted (numpy default_rng, seed 0), chunks of 1,000, last partial "
        "chunk dropped; each query ranks its chunk's codes, ties against the model",
        None,
        reference="csbench, no published script",
    )
)
PROTOCOLS.add(
    FullCorpus(
        "advtest",
        "CodeXGLUE AdvTest run.py + evaluator.py: each query against all test codes; rank = position in the "
        "descending np.argsort of the float32 scores (ties in argsort's order); MRR over the top 100 (beyond: "
        "0), reported to 4 decimals",
        100,
        reference="microsoft/CodeXGLUE Text-Code/NL-code-search-Adv code/run.py + evaluator/evaluator.py",
    )
)
PROTOCOLS.add(
    SampledDistractors(
        "gecs-100",
        "GeCS New_cbt_mrr_implementation.py: random.seed(42) once, then per test item in file order "
        "random.sample(other items, 99); rank = candidates scoring >= the correct one",
        None,
        reference="drndr/gencodesearchnet data/mrr/New_cbt_mrr_implementation.py",
    )
)
PROTOCOLS.add(
    Matching(
        "matching",
        "GeCS eval_clf*.py: the release's own labelled pairs (clf files, target 0/1) where it has them, else "
        "one drawn negative per query (seed 42); accuracy / precision / recall / F1 of the match class; a "
        "cross-encoder's head decides, another model by evaluation.match_threshold (validation split, GeCS's "
        "cosine > 0.5, a fixed value, or another dataset's validation split)",
        None,
        kind="matching",
        reference="drndr/gencodesearchnet experiments/eval_clf.py, eval_clf_cosine.py",
    )
)
PROTOCOLS.add(
    Graded(
        "qrels",
        "BEIR / MTEB / CoIR retrieval: each query against the whole corpus (the codebase, else the test pool); "
        "its top 1,000 (documents ordered as trec_eval orders them: score descending, ties by document id "
        "descending) scored against the graded relevance judgements (qrels; a dataset without them: the "
        "query's own code, grade 1) with trec_eval's nDCG@k, MAP@k, Recall@k, P@k and MRR@k, k in 1, 3, 5, "
        "10, 100, 1000; main score nDCG@10",
        1000,
        uses_codebase=True,
        kind="ranking",
        graded=True,
        reference="trec_eval via pytrec_eval (BEIR beir/retrieval/evaluation.py, MTEB's retrieval evaluator)",
    )
)
