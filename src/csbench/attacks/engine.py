"""The attack engine: ``run_attack`` attacks every split of a dataset with one attack spec.

Two renamings look across snippets (``k_shift_dataset``, ``most_popular``), so every split is attacked
in one go. A dataset's snippets, in dataset order, are its distinct (language, code) pairs in the order
train, valid, test, codebase: the same function in test and in the codebase is attacked once and
identically. The attacks themselves are registered where they are defined (``csbench.attacks.spec``);
the engine runs what their :class:`~csbench.attacks.spec.Attack` declares: a renaming ``strategy``
(proposals over the identifier analysis, settled and spliced here), a per-snippet ``rewrite``, or the
comment treatment of ``no_comment`` / ``translation``. Work is batched and spread over forked worker
processes; the result does not depend on the number of workers. Compiled by Cython at install
(``csbench._native.HOT_MODULES``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import multiprocessing
import operator
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd
from tqdm import tqdm

from csbench.attacks import renaming as R
from csbench.attacks.spec import Component, check_languages, parse_spec, treats_comments
from csbench.code.comments import Snippet, has_undelimited_comment, parse_snippet, remove_comments

log = logging.getLogger("csbench")

RENAMING_COLUMN = "renaming"


def _renaming_encoder() -> Callable[[dict[str, str]], str]:
    """``json.dumps(mapping, ensure_ascii=False)``, with one C encoder for all mappings (``JSONEncoder.encode``
    builds a new one per call, 40 % of its time for a renaming); the plain encoder where the C one is missing."""
    plain = json.JSONEncoder(ensure_ascii=False)
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # pragma: no cover - CPython has it
        return plain.encode
    # markers None: no circularity check (a mapping of strings has no cycles)
    chunks = c_make_encoder(None, plain.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda mapping: "".join(chunks(mapping, 0))


_RENAMING_JSON = _renaming_encoder()


def _analyse_job(job: tuple[str, str, bool], snippet: Snippet | None = None) -> tuple[R.Analysis | None, str, str]:
    """(analysis, "", "") or, when the analysis fails, (None, the code the attack keeps, the error).
    ``snippet``: the code already parsed (``parse_snippet``)."""
    code, language, keep_comments = job
    try:
        return R.analyse(code, language, keep_comments, snippet=snippet), "", ""
    except Exception as err:  # one odd snippet must not stop a 250k-snippet attack
        return None, _kept(code, language, keep_comments), f"{type(err).__name__}: {err}"


def _kept(code: str, language: str, keep_comments: bool) -> str:
    """The code an attack keeps for a snippet it could not treat: without its comments unless they are
    kept (the code itself where even comment removal fails)."""
    try:
        return code if keep_comments else remove_comments(code, language)
    except Exception:
        return code


# Snippets parsed together before they are analysed: tree-sitter's tables and the analysis code each
# stay in the CPU caches, some 10% faster than alternating parse and analysis snippet by snippet.
_BATCH = 64


def _analyse_batch(jobs: list[tuple[str, str, bool]]) -> list[tuple[R.Analysis | None, str, str]]:
    """``_analyse_job`` over a batch of jobs: all parsed first, then all analysed."""
    snippets: list[Snippet | None] = []
    for code, language, _ in jobs:
        try:
            snippets.append(parse_snippet(code, language))
        except Exception:  # analysed again, failing there, and reported
            snippets.append(None)
    return [_analyse_job(job, snippet) for job, snippet in zip(jobs, snippets, strict=True)]


Renamed = tuple[str, dict[str, str] | None, str]  # (attacked code, renaming or None, analysis error)
Analysed = tuple["R.Analysis | None", str, str]  # what ``_analyse_job`` gives


class KeptAnalyses(Protocol):
    """Where a dataset attacked in chunks keeps a chunk's work between its passes (``csbench.attacks.stream``):
    a survey pass ``put``s the analyses of the surveyed step (``"analysed"``: what ``_analyse_batch``
    gives) and the results of the steps before it (``"renamed"``: ``Renamed``), the later passes ``take``
    them back instead of parsing, analysing and renaming the chunk again. ``jobs``: the ``_analyse_batch``
    jobs of that step, which ``take`` checks are the same (None: nothing kept for them)."""

    def put(self, step: int, kind: str, jobs: list[tuple[str, str, bool]], value: list) -> None: ...

    def take(self, step: int, kind: str, jobs: list[tuple[str, str, bool]]) -> list | None: ...


def _rename_analysed(
    analysed: list[tuple[R.Analysis | None, str, str]],
    languages: Sequence[str],
    sources: Sequence[str],
    strategy: R.Strategy,
    params: dict[str, Any],
    analysed_again: bool = False,
) -> list[Renamed]:
    """Snippets ``_analyse_batch`` analysed, renamed: the strategy proposes over all of them at once (in
    order; ``sources``: the code each had in the dataset, ``Item.source``), each proposal is settled and
    spliced (``analysed_again``: by ``settle``'s rule for code a later renaming analyses). Per snippet:
    (attacked code, renaming, "") or, when the analysis failed, (the code the attack keeps, None, the error)."""
    proposals = iter(strategy(_items(analysed, languages, sources), params))
    out: list[Renamed] = []
    for language, (analysis, text, error) in zip(languages, analysed, strict=True):
        if analysis is None:
            out.append((text, None, error))
            continue
        mapping = R.settle(analysis.identifiers, language, next(proposals), analysed_again)
        out.append((analysis.renamed(mapping), mapping, ""))  # comment removal and renaming in one splice
    return out


def _propose_in_context(propose: Callable, context: Any, items: Sequence[R.Item], params: dict[str, Any]) -> list:
    """A dataset-wide renaming's proposals for one chunk, as a strategy (``Survey.propose``)."""
    return propose(items, params, context)


def _items(
    analysed: list[tuple[R.Analysis | None, str, str]], languages: Sequence[str], sources: Sequence[str]
) -> list[R.Item]:
    """What a strategy is given of analysed snippets: those whose analysis did not fail, in order."""
    return [
        R.Item(language, source, analysis.identifiers)
        for language, source, (analysis, _, _) in zip(languages, sources, analysed, strict=True)
        if analysis is not None
    ]


def _rename_batch(
    task: tuple[list[tuple[str, str, bool]], list[str], R.Strategy, dict[str, Any], bool],
) -> list[Renamed]:
    """``_rename_analysed`` over one batch, analysed here: for a renaming that proposes each snippet's
    names from that snippet alone (``Attack.dataset_wide`` false) the whole work stays in the worker and
    only the attacked code and the renaming travel back. ``task``: the jobs of ``_analyse_batch``, the
    snippets' dataset code, the strategy and its parameters."""
    jobs, sources, strategy, params, again = task
    return _rename_analysed(_analyse_batch(jobs), [job[1] for job in jobs], sources, strategy, params, again)


def _rewrite_batch(
    task: tuple[list[tuple[str, str, bool]], Callable[..., tuple[str, dict[str, str]]]],
) -> list[Renamed]:
    """An attack's ``rewrite`` over one batch of ``_analyse_batch`` jobs, each snippet parsed once. Per
    snippet: (attacked code, renaming, "") or, when it fails, (the code the attack keeps, None, the error)."""
    jobs, rewrite = task
    out: list[Renamed] = []
    for code, language, keep_comments in jobs:
        try:
            text, mapping = rewrite(code, language, keep_comments, parse_snippet(code, language))
        except Exception as err:  # one odd snippet must not stop a 250k-snippet attack
            out.append((_kept(code, language, keep_comments), None, f"{type(err).__name__}: {err}"))
            continue
        out.append((text, mapping, ""))
    return out


def _strip_job(job: tuple[str, str]) -> str:
    code, language = job
    return remove_comments(code, language)


def _pool_map(
    fn: Callable, jobs: list, workers: int, desc: str, progress: bool, sizes: list[int] | None = None
) -> Iterator:
    """``map(fn, jobs)`` in input order over ``workers`` forked processes, with a progress bar
    (``sizes``: how many functions each job holds, one if not given)."""
    total = sum(sizes) if sizes is not None else len(jobs)
    bar = tqdm(total=total, desc=desc, unit="fn", disable=not progress, mininterval=2)
    if workers <= 1 or total < 64:
        for i, job in enumerate(jobs):
            yield fn(job)
            bar.update(sizes[i] if sizes is not None else 1)
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        chunk = max(1, min(256, len(jobs) // (workers * 8)))
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
            for i, result in enumerate(pool.map(fn, jobs, chunksize=chunk)):
                yield result
                bar.update(sizes[i] if sizes is not None else 1)
    bar.close()


@dataclass
class AttackReport:
    """What one attack run did, per language: snippets, how many it changed, analysis failures."""

    spec: str
    snippets: dict[str, int] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)  # code differs from the input
    renamed: dict[str, int] = field(default_factory=dict)  # at least one identifier got a new name
    failed: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)  # the first few, for the log
    seconds: float = 0.0
    # snippets whose last line comment comment removal kept: its end is unknown, the code flattened
    # onto one line (csbench.code.comments); counted where the attack removes or translates comments
    kept_undelimited: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "attack": self.spec,
            "per_language": {
                lang: {
                    "snippets": n,
                    "changed": self.changed.get(lang, 0),
                    "changed_share": round(self.changed.get(lang, 0) / n, 4) if n else None,
                    "renamed": self.renamed.get(lang, 0),
                    "renamed_share": round(self.renamed.get(lang, 0) / n, 4) if n else None,
                    "analysis_failed": self.failed.get(lang, 0),
                    "comments_kept_undelimited": self.kept_undelimited.get(lang, 0),
                }
                for lang, n in sorted(self.snippets.items())
            },
            "failures": self.failures,
            "seconds": round(self.seconds, 2),
        }


def run_attack(
    spec: str,
    splits: dict[str, pd.DataFrame],
    attack_params: dict[str, dict[str, Any]] | None = None,
    workers: int = 1,
    progress: bool = True,
) -> tuple[dict[str, pd.DataFrame], AttackReport]:
    """Attack every split of a dataset (``{split: records}``, in dataset order), all in memory at once.
    Returns the attacked splits (same records and columns, plus ``renaming``) and a report.
    Deterministic: the result does not depend on ``workers``. (``csbench.attacks.stream`` attacks split
    files too large to hold, chunk by chunk, to the same result.)"""
    started = time.perf_counter()
    components = parse_spec(spec, attack_params)
    columns = {split: (frame["language"].tolist(), frame["code"].tolist()) for split, frame in splits.items()}
    found = set().union(*(split_languages for split_languages, _ in columns.values()))
    check_languages(spec, components, sorted(found))
    report = AttackReport(spec)
    # the distinct snippets, in dataset order
    keys: dict[tuple[str, str], int] = {}
    for split_languages, split_codes in columns.values():  # lists: iterating a pandas string column is ~7x slower
        for key in zip(split_languages, split_codes, strict=True):
            keys.setdefault(key, len(keys))
    unique = list(keys)
    codes, texts = attack_snippets(spec, components, unique, workers, progress, report)
    out = {}
    for split, frame in splits.items():
        index = [keys[key] for key in zip(*columns[split], strict=True)]
        out[split] = attacked_frame(frame, [codes[i] for i in index], [texts[i] for i in index])
    report.seconds = time.perf_counter() - started
    return out, report


def attacked_frame(frame: pd.DataFrame, codes: list[str], texts: list[str]) -> pd.DataFrame:
    """``frame``'s records with their attacked code and their renaming's JSON (column ``renaming``)."""
    attacked = frame.copy()
    attacked["code"] = codes
    attacked[RENAMING_COLUMN] = texts
    return attacked


def attack_snippets(
    spec: str,
    components: Sequence[Component],
    unique: list[tuple[str, str]],
    workers: int,
    progress: bool,
    report: AttackReport,
    contexts: dict[int, Any] | None = None,
    kept: KeptAnalyses | None = None,
) -> tuple[list[str], list[str]]:
    """The attacked code and the renaming's JSON of distinct (language, code) snippets, in dataset order
    (all of the dataset's, or one chunk of them: ``contexts``, the context of each dataset-wide renaming
    step for this chunk, ``Survey``; ``kept``, what the survey passes kept of the chunk); counted in
    ``report`` (snippets, changed, renamed, failures)."""
    codes, renamings = _attack_unique(spec, components, unique, workers, progress, report, contexts, kept=kept)
    texts = [_RENAMING_JSON(m) for m in renamings]
    for (language, code), new, mapping in zip(unique, codes, renamings, strict=True):
        report.snippets[language] = report.snippets.get(language, 0) + 1
        report.changed[language] = report.changed.get(language, 0) + (new != code)
        renamed = any(map(operator.ne, mapping, mapping.values()))  # some name changed (C loop, no generator)
        report.renamed[language] = report.renamed.get(language, 0) + renamed
    if treats_comments(components):  # (parses only code that may hold one: see has_undelimited_comment)
        for language, code in unique:
            undelimited = has_undelimited_comment(code, language)
            report.kept_undelimited[language] = report.kept_undelimited.get(language, 0) + undelimited
    return codes, texts


def survey_snippets(
    spec: str,
    components: Sequence[Component],
    unique: list[tuple[str, str]],
    workers: int,
    step: int,
    contexts: dict[int, Any],
    kept: KeptAnalyses | None = None,
) -> Any:
    """The statistics (``Survey.gather``) of renaming step ``step`` (its index among the spec's renamings,
    a dataset-wide one) over a chunk of distinct snippets: the earlier steps applied first (with their
    ``contexts``), then this step's analyses gathered; the steps' work is handed to ``kept``, for the passes
    after. Nothing is counted."""
    report = AttackReport(spec)
    return _attack_unique(spec, components, unique, workers, False, report, contexts, survey=step, kept=kept)


def _attack_unique(
    spec: str,
    components: Sequence[Component],
    unique: list[tuple[str, str]],
    workers: int,
    progress: bool,
    report: AttackReport,
    contexts: dict[int, Any] | None = None,
    survey: int | None = None,
    kept: KeptAnalyses | None = None,
) -> Any:
    """Attacked code and renaming of each distinct (language, code): (codes, renamings). ``contexts``:
    renaming step -> its context for these snippets (``Survey.propose``; without, a dataset-wide
    renaming proposes over these snippets as the whole dataset); ``survey``: the renaming step whose
    statistics (``Survey.gather``) to return instead, once the steps before it are applied; ``kept``:
    where a survey keeps its work on these snippets (``KeptAnalyses``) and later passes take it back."""
    comment = next((c for c in components if c.attack.kind == "comments"), None)
    renamings = [c for c in components if c.attack.kind == "renaming"]
    translate = comment is not None and comment.attack.name == "translation"
    codes = [code for _, code in unique]
    composed: list[dict[str, str]] = [{} for _ in unique]
    if not renamings and comment is not None and not translate:
        codes = list(_pool_map(_strip_job, [(c, lang) for lang, c in unique], workers, spec, progress))
    for step, component in enumerate(renamings):
        with _without_cyclic_gc():
            jobs = [(code, lang, translate or step > 0) for code, (lang, _) in zip(codes, unique, strict=True)]
            renamed = kept.take(step, "renamed", jobs) if kept is not None else None
            made = renamed is None
            if made and component.attack.dataset_wide:  # every analysis in this process before any proposal
                analysed = _analysed(jobs, step, kept, survey == step, spec, workers, progress)
                sources = [code for _, code in unique]
                languages = [lang for lang, _ in unique]
                plan, strategy, params = component.attack.survey, component.attack.strategy, component.params
                if survey == step:
                    return plan.gather(_items(analysed, languages, sources), params)
                if contexts is not None and step in contexts:
                    strategy = functools.partial(_propose_in_context, plan.propose, contexts[step])
                renamed = _rename_analysed(analysed, languages, sources, strategy, params, step < len(renamings) - 1)
                del analysed
            elif made:
                again = step < len(renamings) - 1  # a later renaming analyses this one's code again
                renamed = _renamed_in_workers(component, jobs, unique, spec, workers, progress, again)
            if made and kept is not None and survey is not None:  # a step before the surveyed one
                kept.put(step, "renamed", jobs, renamed)
            for i, (code, mapping, error) in enumerate(renamed):
                codes[i] = code
                if mapping is None:
                    _failed(report, unique[i], error)
                else:
                    composed[i] = _compose(composed[i], mapping) if step else mapping
            del renamed
    if translate:
        from csbench.attacks.translation import Apertium, translate_frame

        frame = pd.DataFrame({"language": [lang for lang, _ in unique], "code": codes})
        codes = translate_frame(frame, Apertium(pair=comment.params["pair"]), workers)["code"].tolist()
    return codes, composed


def _batches(jobs: list) -> tuple[list[list], list[int]]:
    batches = [jobs[i : i + _BATCH] for i in range(0, len(jobs), _BATCH)]
    return batches, [len(batch) for batch in batches]


def _analysed(
    jobs: list[tuple[str, str, bool]],
    step: int,
    kept: KeptAnalyses | None,
    keep: bool,
    spec: str,
    workers: int,
    progress: bool,
) -> list[Analysed]:
    """The analysis of each job of renaming step ``step`` (``_analyse_batch``, over the workers), or those
    ``kept`` holds of these jobs; those made here put into ``kept`` if ``keep``."""
    found = kept.take(step, "analysed", jobs) if kept is not None else None
    if found is not None:
        return found
    batches, sizes = _batches(jobs)
    analysed = [
        result
        for results in _pool_map(_analyse_batch, batches, workers, f"{spec}: analyse", progress, sizes)
        for result in results
    ]
    if keep and kept is not None:
        kept.put(step, "analysed", jobs, analysed)
    return analysed


def _renamed_in_workers(
    component: Component,
    jobs: list[tuple[str, str, bool]],
    unique: list[tuple[str, str]],
    spec: str,
    workers: int,
    progress: bool,
    analysed_again: bool,
) -> list[Renamed]:
    """A renaming step whose work stays in the workers: each snippet rewritten from its own tokens
    (``Attack.rewrite``), or analysed and renamed from its own names (not ``dataset_wide``;
    ``analysed_again``: ``settle``'s rule for code a later renaming analyses)."""
    batches, sizes = _batches(jobs)
    if component.attack.rewrite is not None:
        tasks = [(batch, component.attack.rewrite) for batch in batches]
        results = _pool_map(_rewrite_batch, tasks, workers, f"{spec}: rewrite", progress, sizes)
    else:
        strategy, params = component.attack.strategy, component.params
        tasks = [
            (batch, [code for _, code in unique[i : i + _BATCH]], strategy, params, analysed_again)
            for batch, i in zip(batches, range(0, len(jobs), _BATCH), strict=True)
        ]
        results = _pool_map(_rename_batch, tasks, workers, f"{spec}: rename", progress, sizes)
    return [result for batch in results for result in batch]


@contextlib.contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector: the analysis allocates many small containers (and
    no reference cycles), and each collection would re-scan every object alive, the growing list
    of analyses included; reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _compose(first: dict[str, str], second: dict[str, str]) -> dict[str, str]:
    """old -> final over two renamings (names the second finds that the first did not map are added)."""
    out = {old: second.get(new, new) for old, new in first.items()}
    mapped = set(first.values())
    out.update({old: new for old, new in second.items() if old not in mapped})
    return out


def _failed(report: AttackReport, key: tuple[str, str], error: str) -> None:
    language, code = key
    report.failed[language] = report.failed.get(language, 0) + 1
    if len(report.failures) < 5:
        report.failures.append({"language": language, "error": error, "code": code[:200]})
