"""CodeSearchNet Challenge NDCG "Within" and "All" (SPEC "Retrieval protocols", metrics paragraph).

Computed as ``src/relevanceeval.py`` of the CodeSearchNet repository (github/CodeSearchNet) does:

* relevance of a (language, query, URL) = mean over its annotators (may be fractional); languages and
  queries lowercased, in the annotations and in the predictions alike; URLs compared verbatim;
* predictions: per (language, query) a ranked list of URLs, cut at the first 300;
* per annotated query, DCG = sum of (2^rel - 1) / log2(rank + 1) over the annotated URLs of the list.
  "Within" advances the rank only on annotated URLs, "All" on every URL; the ideal DCG is taken over
  all annotations of the query (sorted by relevance, descending), predicted or not;
* queries whose ideal DCG is 0 (all annotations 0) are skipped; an annotated query without
  predictions scores 0; the result is the mean over the remaining queries, per predicted language.

Deliberate differences, all on input the original would score silently but wrongly or crash on:
annotations that differ only in the case of language or query are averaged together (the original
pivots on the case-sensitive text, then lets one casing overwrite the other; the real annotation
file has no such pairs); a URL twice in one ranked list, prediction keys equal after lowercasing in a
dict, and predicted languages without annotations raise ValueError (the original counts the
duplicate's gain twice, merges in undefined order, and divides by zero respectively).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from csbench.datasets.base import ReaderError

CUTOFF = 300  # max_urls_per_language of relevanceeval.load_predictions
ANNOTATION_COLUMNS = ("Language", "Query", "GitHubUrl", "Relevance")
PREDICTION_COLUMNS = ("language", "query", "url")  # the submission format also has ``identifier``

Relevances = dict[str, dict[str, dict[str, float]]]  # language -> query -> url -> mean relevance
Predictions = dict[str, dict[str, list[str]]]  # language -> query -> ranked URLs, best first


def _text(value: object, what: str) -> str:
    """``value`` itself when it is a non-empty string; anything else (NaN from pandas, None) is an error."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string, found {value!r}")
    return value


def _key(value: object, what: str) -> str:
    """Language or query as the Challenge matches it: lowercased (URLs are compared verbatim)."""
    return _text(value, what).lower()


def load_relevances(annotations: pd.DataFrame) -> Relevances:
    """Mean relevance per (language, query, URL) from the frame ``csn_challenge.load_annotations`` returns.

    Raises ValueError for missing columns, no rows, an empty language, query or URL, or a relevance
    that is not a finite number."""
    missing = [c for c in ANNOTATION_COLUMNS if c not in annotations.columns]
    if missing:
        raise ValueError(f"annotations lack the column(s) {', '.join(missing)}")
    if annotations.empty:
        raise ValueError("no annotations")
    relevance = pd.to_numeric(annotations["Relevance"], errors="coerce").astype("float64").to_numpy()
    bad = ~np.isfinite(relevance)
    if bad.any():
        row = int(bad.argmax())
        raise ValueError(f"annotation row {row}: Relevance {annotations['Relevance'].iloc[row]!r} is not a number")
    frame = pd.DataFrame(
        {
            "language": [_key(v, f"annotation row {i}: Language") for i, v in enumerate(annotations["Language"])],
            "query": [_key(v, f"annotation row {i}: Query") for i, v in enumerate(annotations["Query"])],
            "url": [_text(v, f"annotation row {i}: GitHubUrl") for i, v in enumerate(annotations["GitHubUrl"])],
            "relevance": relevance,
        }
    )
    # the mean over annotators, as relevanceeval's pivot_table(aggfunc=np.mean)
    means = frame.groupby(["language", "query", "url"], sort=True)["relevance"].mean()
    relevances: Relevances = {}
    for (language, query, url), value in means.items():
        relevances.setdefault(language, {}).setdefault(query, {})[url] = float(value)
    return relevances


def normalise_predictions(predictions: Mapping[str, Mapping[str, Sequence[str]]], cutoff: int = CUTOFF) -> Predictions:
    """Languages and queries lowercased, each ranked list cut at its first ``cutoff`` URLs.

    Raises ValueError for keys equal after lowercasing, a list that is not a sequence of non-empty
    strings, or a URL twice within the first ``cutoff`` of one list."""
    if cutoff < 1:
        raise ValueError(f"cutoff must be at least 1, found {cutoff}")
    out: Predictions = {}
    seen: dict[str, str] = {}  # lowercased language -> the key it came from, to name both in an error
    for language, queries in predictions.items():
        lang = _key(language, "prediction language")
        if lang in seen:
            raise ValueError(f"prediction languages {seen[lang]!r} and {language!r} are equal after lowercasing")
        seen[lang], out[lang] = language, {}
        # a dict has no order between two lists of the same lowercased query: refuse rather than guess
        first: dict[str, str] = {}
        for query, urls in queries.items():
            q = _key(query, f"prediction query of {language!r}")
            if q in first:
                raise ValueError(
                    f"{language}: prediction queries {first[q]!r} and {query!r} are equal after lowercasing"
                )
            first[q] = query
            out[lang][q] = _ranked_list(urls, cutoff, f"{language}/{query!r}")
    return out


def _ranked_list(urls: Sequence[str], cutoff: int, where: str) -> list[str]:
    """The first ``cutoff`` URLs of one ranked list, checked."""
    if isinstance(urls, str) or not isinstance(urls, Sequence):
        raise ValueError(f"{where}: expected a ranked list of URLs, found {type(urls).__name__}")
    ranked = list(urls[:cutoff])
    for url in ranked:
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"{where}: URLs must be non-empty strings, found {url!r}")
    if len(set(ranked)) != len(ranked):
        duplicate = next(u for i, u in enumerate(ranked) if u in ranked[:i])
        raise ValueError(f"{where}: URL {duplicate} appears twice in the ranked list")
    return ranked


def load_predictions(path: str | Path) -> Predictions:
    """A predictions CSV in the Challenge submission format: columns ``language,query,url`` (and any
    others, e.g. ``identifier``), one row per result, rows in rank order within each query.

    Languages and queries are lowercased; rows whose keys differ only in case join one list, in file
    order, as relevanceeval does. Lists are not cut here (:func:`challenge_ndcg` cuts). Raises
    ReaderError (a ValueError) naming file and line for a missing column or an empty cell."""
    path = Path(path)
    if not path.is_file():
        raise ReaderError(f"{path}: no such predictions file")
    rows = csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"), newline=""))
    header = [cell.strip() for cell in next(rows, [])]
    missing = [c for c in PREDICTION_COLUMNS if c not in header]
    if missing:
        raise ReaderError(f"{path}:1: missing column(s) {', '.join(missing)} (header {header!r})")
    at = {c: header.index(c) for c in PREDICTION_COLUMNS}
    predictions: Predictions = {}
    for row in rows:
        if not row or not "".join(row).strip():
            continue  # blank line
        if len(row) != len(header):
            raise ReaderError(f"{path}:{rows.line_num}: expected {len(header)} columns, found {len(row)}")
        cells = {c: row[i] for c, i in at.items()}
        empty = [c for c, v in cells.items() if not v.strip()]
        if empty:
            raise ReaderError(f"{path}:{rows.line_num}: empty {', '.join(empty)}")
        language, query = cells["language"].lower(), cells["query"].lower()
        predictions.setdefault(language, {}).setdefault(query, []).append(cells["url"])
    if not predictions:
        raise ReaderError(f"{path}: no predictions")
    return predictions


def dcg(ranked_urls: Iterable[str], relevance: Mapping[str, float], within: bool) -> float:
    """DCG of one ranked list: gain (2^rel - 1) / log2(rank + 1) for each annotated URL.

    ``within`` ("Within"): the rank advances only on annotated URLs, as if the others were not there;
    otherwise ("All") it advances on every URL, so a non-annotated URL pushes the rest down."""
    total, rank = 0.0, 1
    for url in ranked_urls:
        if url in relevance:
            total += (2.0 ** relevance[url] - 1.0) / math.log2(rank + 1)
            rank += 1
        elif not within:
            rank += 1
    return total


def ideal_dcg(relevance: Mapping[str, float]) -> float:
    """DCG of all the query's annotations in descending relevance, whether predicted or not."""
    ordered = sorted(relevance.values(), reverse=True)
    return sum((2.0**rel - 1.0) / math.log2(rank + 1) for rank, rel in enumerate(ordered, start=1))


def _annotated_languages(predictions: Predictions, relevances: Relevances) -> list[str]:
    """The predicted languages, sorted; each must have annotations."""
    unknown = sorted(set(predictions) - set(relevances))
    if unknown:
        raise ValueError(f"no annotations for predicted language(s) {unknown}; annotated: {sorted(relevances)}")
    return sorted(predictions)


def challenge_ndcg_per_query(
    predictions: Mapping[str, Mapping[str, Sequence[str]]], relevances: Relevances, cutoff: int = CUTOFF
) -> dict[str, dict[str, dict[str, float]]]:
    """Per predicted language, per annotated query with ideal DCG > 0: ``{"within": ..., "all": ...}``.

    Annotated queries the predictions lack score 0; predicted queries without annotations are ignored."""
    predicted = normalise_predictions(predictions, cutoff)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for language in _annotated_languages(predicted, relevances):
        out[language] = {}
        for query, relevance in sorted(relevances[language].items()):
            ideal = ideal_dcg(relevance)
            if ideal == 0:
                continue  # no positive annotation: nothing a ranking could get right
            ranked = predicted[language].get(query, [])
            out[language][query] = {
                "within": dcg(ranked, relevance, within=True) / ideal,
                "all": dcg(ranked, relevance, within=False) / ideal,
            }
    return out


def challenge_ndcg(
    predictions: Mapping[str, Mapping[str, Sequence[str]]], relevances: Relevances, cutoff: int = CUTOFF
) -> dict[str, dict[str, float | int | None]]:
    """NDCG "Within" and "All" per predicted language: the mean over its annotated queries with ideal
    DCG > 0 (``queries``); None when there is no such query (the original divides by zero)."""
    result: dict[str, dict[str, float | int | None]] = {}
    for language, per_query in challenge_ndcg_per_query(predictions, relevances, cutoff).items():
        n = len(per_query)
        # plain left-to-right sums in query order, as relevanceeval accumulates them
        result[language] = {
            "within": sum(v["within"] for v in per_query.values()) / n if n else None,
            "all": sum(v["all"] for v in per_query.values()) / n if n else None,
            "queries": n,
        }
    return result


def coverage(
    predictions: Mapping[str, Mapping[str, Sequence[str]]],
    relevances: Relevances,
    cutoff: int = CUTOFF,
    positive_only: bool = False,
) -> dict[str, float | None]:
    """Per predicted language, the share of annotated (query, URL) pairs whose URL the query's
    ranked list (cut at ``cutoff``) contains; ``positive_only``: only annotations with mean relevance
    > 0 (relevanceeval's ``coverage_per_language``). None when there is no such annotation."""
    predicted = normalise_predictions(predictions, cutoff)
    result: dict[str, float | None] = {}
    for language in _annotated_languages(predicted, relevances):
        annotated = covered = 0
        for query, relevance in relevances[language].items():
            ranked = set(predicted[language].get(query, []))
            for url, value in relevance.items():
                if not positive_only or value > 0:
                    annotated += 1
                    covered += url in ranked
        result[language] = covered / annotated if annotated else None
    return result
