"""Config-defined datasets in BEIR's layout (``datasets.<name>: {kind: beir, ...}``), issue #27.

A BEIR folder (the layout of BEIR, CoIR and MTEB's retrieval tasks)::

    corpus.jsonl        {"_id": ..., "title": ..., "text": ...} a line (other fields kept, e.g. a language)
    queries.jsonl       {"_id": ..., "text": ...} a line
    qrels/test.tsv      query-id<TAB>corpus-id<TAB>score, a header line first (graded: 0, 1, 2, ...)
    qrels/dev.tsv       (optional) BEIR's dev split: csbench's ``valid``
    qrels/train.tsv     (optional)

comes from ``path`` (a folder on this machine) or from ``hub`` + ``revision`` (a Hugging Face dataset
with BEIR's ``corpus`` / ``queries`` / ``default`` configs, as CoIR and MTEB publish them), which
``csbench download`` writes into ``data/raw/<name>/`` with :func:`fetch_hub`.

Prepared (``docs`` of the brief, ``csbench.datasets.base.RECORD_COLUMNS``):

* split ``codebase`` (:data:`POOL_SPLIT`): one record per document, ``id`` = ``url`` = the document id,
  ``code`` = its text (``title + "\\n" + text`` when ``title: prepend`` and the title is not empty, the
  rule of BEIR's own models; ``text`` alone with ``title: ignore``), ``language``;
* splits ``test`` / ``valid`` / ``train``: the queries of ``qrels/test.tsv`` / ``dev.tsv`` /
  ``train.tsv`` with at least one relevant document (grade > 0): ``id`` = the query id, ``query`` its
  text, ``code`` the text of its best-graded relevant document present in the corpus (the first in
  qrels order among equals; "" when none is), ``url`` that document's id;
* the qrels (:func:`read_beir_qrels`, ``DatasetSpec.qrels``): every judgement of those splits, grade
  0 included, in file order.

What is wrong is never dropped silently. A line that cannot be used (bad JSON, no ``_id``, a qrels
line without 3 columns or with a grade that is not an integer, a query of the qrels that
queries.jsonl lacks) is a skip of the :class:`SkipReport`, with file:line; a file that cannot be used
at all (missing, no usable line) is a :class:`ReaderError` naming it; an id twice in corpus.jsonl or
queries.jsonl is a :class:`ReaderError` naming both lines. A judgement naming a document absent from
the corpus is kept (trec_eval, like BEIR, counts it in recall's denominator) and counted in the
report and the audit (:func:`beir_audit`). Documents with the same text (after the title rule) tie
with each other for every model; the audit counts them and the "ties with a labelled document" of
each query, and ``dedupe: true`` (never the default) collapses each group onto its first id in file
order, moving the judgements onto it (the highest grade where several meet).

Memory: the readers stream corpus.jsonl; they hold the judgements, the texts of the judged queries,
the ids of the corpus (for duplicates; with ``dedupe`` a 20-byte digest per document too) and the
texts of the relevant documents only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import (
    BEIR_KIND,
    POOL_SPLIT,
    DatasetOption,
    DatasetSpec,
    Need,
    ReaderError,
    Record,
    SkipReport,
)
from csbench.datasets.releases._formats import iter_lines, make_record

log = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
# BEIR's qrels file stem -> csbench's split (BEIR's dev is csbench's valid), in reading order
BEIR_SPLITS = {"test": "test", "dev": "valid", "train": "train"}
QRELS_HEADER = ("query-id", "corpus-id", "score")
HUB_FILE = "HUB.json"  # what fetch_hub wrote: hub id, revision, configs, rows
_COMMIT = re.compile(r"[0-9a-f]{40}")
# hub qrels split names -> BEIR's file stems (CoIR publishes "valid", others "validation" / "dev")
HUB_SPLIT_STEMS = {"test": "test", "dev": "dev", "valid": "dev", "validation": "dev", "train": "train"}

BEIR_OPTIONS = (
    DatasetOption(
        "path",
        "directory",
        "a folder in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/{test,dev,train}.tsv); a relative path is "
        "relative to the project root. Exactly one of `path` and `hub`; a folder needs no download",
    ),
    DatasetOption(
        "hub",
        "text",
        "a Hugging Face dataset id with BEIR's corpus / queries / default (qrels) configs, e.g. "
        "`CoIR-Retrieval/cosqa`; `csbench download` writes it into data/raw/<name>/ (offline: from the local "
        "HF cache). Exactly one of `path` and `hub`",
    ),
    DatasetOption(
        "revision",
        "text",
        "the hub dataset's commit (40 hex digits), required with `hub`: the data a study reads never moves",
    ),
    DatasetOption(
        "language",
        "text",
        "the programming language of every document (e.g. `python`); exactly one of `language` and `language_field`",
    ),
    DatasetOption(
        "language_field",
        "text",
        "a field of corpus.jsonl holding each document's language; a document without it is skipped",
    ),
    DatasetOption(
        "title",
        "choice",
        "`prepend`: a document's code is `title + newline + text` when its title is not empty (BEIR's rule); "
        "`ignore`: its text alone",
        default="prepend",
        choices=("prepend", "ignore"),
    ),
    DatasetOption(
        "splits",
        "list",
        "the qrels files read: `test` -> split test, `dev` -> split valid, `train` -> split train (default: "
        "those present in qrels/, test among them)",
        choices=tuple(BEIR_SPLITS),
    ),
    DatasetOption(
        "dedupe",
        "flag",
        "`true`: documents with the same text (after the title rule) collapse onto the first id in file order, "
        "their judgements moved onto it (highest grade), what merged recorded in the card; never on by default",
        default=False,
    ),
)


# --------------------------------------------------------------------------- options


def beir_options_problem(options: dict[str, Any]) -> tuple[str, str] | None:
    """(option, why) of the first problem of a BEIR entry's options (``kind`` left out), or None.

    Each value against its declaration, then what they say together: exactly one of ``path`` /
    ``hub``, ``revision`` with ``hub`` only (a 40-digit commit), exactly one of ``language`` /
    ``language_field``, ``splits`` with ``test``."""
    declared = {option.name: option for option in BEIR_OPTIONS}
    for key, value in options.items():
        option = declared.get(key)
        if option is None:
            return key, f"unknown option of a `kind: beir` dataset; its options: {', '.join(declared)}"
        problem = option.problem(value)
        if problem:
            return key, problem
    given = {key for key, value in options.items() if value is not None}
    if ("path" in given) == ("hub" in given):
        return ("hub" if "path" in given else "path"), "a `kind: beir` dataset needs exactly one of `path` and `hub`"
    if "hub" in given:
        if "revision" not in given:
            return "hub", "a hub dataset needs `revision` (its commit, 40 hex digits) so that the data never move"
        if not _COMMIT.fullmatch(str(options["revision"])):
            return "revision", f"{options['revision']!r} is not a commit (40 lowercase hex digits)"
    elif "revision" in given:
        return "revision", "`revision` goes with `hub` only (a folder has no revision)"
    if ("language" in given) == ("language_field" in given):
        key = "language_field" if "language" in given else "language"
        return key, "a `kind: beir` dataset needs exactly one of `language` and `language_field`"
    if options.get("splits") is not None and "test" not in options["splits"]:
        return "splits", "leaves out `test`, the split every run evaluates"
    return None


def beir_spec(name: str, options: dict[str, Any]) -> DatasetSpec:
    """The :class:`DatasetSpec` of the config-defined BEIR dataset ``name`` with ``options`` (its entry
    without ``kind``). Built whatever the options say, so that the config checks can name the file and
    line of a bad one (each with its declaration's ``problem``, then :func:`beir_options_problem`);
    the readers, ``needs`` and the download raise :class:`ReaderError` for options that are wrong."""
    hub, path = options.get("hub"), options.get("path")
    source = f"hub {hub}@{str(options.get('revision'))[:12]}" if hub else f"folder {path}"
    language = options.get("language") or f"from the corpus field {options.get('language_field')!r}"
    return DatasetSpec(
        name=name,
        kind=BEIR_KIND,
        languages=(str(options["language"]),) if isinstance(options.get("language"), str) else (),
        description=f"a dataset in BEIR's layout ({source}; language {language})",
        licence="as its source states (a BEIR folder or hub dataset defined in the config)",
        homepage=f"https://huggingface.co/datasets/{hub}" if hub else "",
        splits=("test", "valid", "train", POOL_SPLIT),
        reader=read_beir,
        qrels=read_beir_qrels,
        needs=beir_needs,
        options=BEIR_OPTIONS,
    )


def beir_folder(raw_dir: Path, options: dict[str, Any]) -> Path:
    """Where the BEIR files lie: ``path`` (relative to the working directory, the project root, when
    not absolute), else ``raw_dir`` (data/raw/<name>/, where :func:`fetch_hub` writes a hub dataset).
    Raises :class:`ReaderError` for options :func:`beir_options_problem` refuses."""
    problem = beir_options_problem({key: value for key, value in options.items() if key != "kind"})
    if problem is not None:
        raise ReaderError(f"option {problem[0]!r} of a BEIR dataset: {problem[1]}")
    if options.get("path"):
        return Path(os.path.expanduser(str(options["path"])))
    return Path(raw_dir)


def _qrels_stems(folder: Path, options: dict[str, Any]) -> tuple[str, ...]:
    """The qrels files read (BEIR stems, in BEIR_SPLITS order): ``splits``, else those present."""
    wanted = options.get("splits")
    if wanted is not None:
        return tuple(stem for stem in BEIR_SPLITS if stem in wanted)
    return tuple(stem for stem in BEIR_SPLITS if (folder / QRELS_DIR / f"{stem}.tsv").is_file())


def beir_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """corpus.jsonl, queries.jsonl and the qrels files read (absolute paths for a ``path`` folder)."""
    folder = beir_folder(raw_dir, options)
    stems = _qrels_stems(folder, options) or ("test",)
    if options.get("path"):
        base = folder.resolve()
        return tuple(
            Need(str(base / rel)) for rel in (CORPUS_FILE, QUERIES_FILE, *(f"{QRELS_DIR}/{s}.tsv" for s in stems))
        )
    return tuple(Need(rel) for rel in (CORPUS_FILE, QUERIES_FILE, *(f"{QRELS_DIR}/{s}.tsv" for s in stems)))


def _require(folder: Path, relative: str, options: dict[str, Any]) -> Path:
    path = folder / relative
    if path.is_file():
        return path
    how = (
        f"the BEIR folder {options['path']!r} (option `path`) lacks it"
        if options.get("path")
        else f"`csbench download` writes it from the hub dataset {options.get('hub')!r}"
    )
    raise ReaderError(f"{path}: missing file of a BEIR dataset; {how}")


# --------------------------------------------------------------------------- qrels


class _Qrels:
    """The judgements of the splits read: split -> query -> doc -> grade (insertion = file order),
    and the line of each query's first judgement (for skips)."""

    def __init__(self) -> None:
        self.grades: dict[str, dict[str, dict[str, int]]] = {}
        self.first_line: dict[tuple[str, str], tuple[Path, int]] = {}

    def relevant_docs(self) -> set[str]:
        return {
            doc for queries in self.grades.values() for docs in queries.values() for doc, g in docs.items() if g > 0
        }

    def judged_queries(self) -> set[str]:
        return {query for queries in self.grades.values() for query in queries}


def _read_qrels(folder: Path, options: dict[str, Any], report: SkipReport) -> _Qrels:
    stems = _qrels_stems(folder, options)
    if not stems:
        raise ReaderError(f"{folder / QRELS_DIR}: no qrels file (test.tsv, dev.tsv or train.tsv) in the BEIR folder")
    qrels = _Qrels()
    for stem in stems:
        path = _require(folder, f"{QRELS_DIR}/{stem}.tsv", options)
        split = BEIR_SPLITS[stem]
        queries = qrels.grades.setdefault(split, {})
        used = 0
        first_bad: tuple[int, str] | None = None
        first = True
        for line, text in iter_lines(path, report):
            cells = text.split("\t")
            if first:
                first = False
                if len(cells) == 3 and not _is_int(cells[2].strip()):
                    continue  # the header (BEIR: query-id, corpus-id, score)
            if len(cells) != 3:
                reason = f"expected 3 tab-separated columns (query-id, corpus-id, score), found {len(cells)}"
                report.skip("bad qrels line", path, line, reason)
                first_bad = first_bad or (line, reason)
                continue
            query, doc, grade_text = (cell.strip() for cell in cells)
            if not query or not doc:
                report.skip("bad qrels line", path, line, "empty query or document id")
                first_bad = first_bad or (line, "empty query or document id")
                continue
            grade = _grade(grade_text)
            if grade is None:
                report.skip("grade is not an integer", path, line, repr(grade_text))
                first_bad = first_bad or (line, f"grade {grade_text!r} is not an integer")
                continue
            docs = queries.setdefault(query, {})
            if doc in docs:
                same = docs[doc] == grade
                report.skip("duplicate judgement" if same else "conflicting judgement", path, line, f"{query} {doc}")
                continue
            docs[doc] = grade
            qrels.first_line.setdefault((split, query), (path, line))
            used += 1
        if not used:
            where = f"{path}:{first_bad[0]}: {first_bad[1]}" if first_bad else f"{path}: no judgement"
            raise ReaderError(f"{where} (no usable line in the qrels file)")
    return qrels


def _is_int(text: str) -> bool:
    return _grade(text) is not None


def _grade(text: str) -> int | None:
    """An integer grade: ``2``, also ``2.0`` (hub exports write floats); None for anything else."""
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


# --------------------------------------------------------------------------- corpus and queries


def _text_of(item: dict[str, Any], options: dict[str, Any]) -> str | None:
    text = item.get("text")
    if not isinstance(text, str):
        return None
    title = item.get("title")
    if options.get("title", "prepend") == "prepend" and isinstance(title, str) and title.strip():
        return f"{title}\n{text}"
    return text


def _documents(folder: Path, options: dict[str, Any], report: SkipReport) -> Iterator[tuple[int, str, str, str]]:
    """(line, id, text after the title rule, language) of every usable document of corpus.jsonl, in
    file order. Raises ReaderError for an id twice (both lines) or a file without a usable line."""
    path = _require(folder, CORPUS_FILE, options)
    seen: dict[str, int] = {}
    field = options.get("language_field")
    language = str(options.get("language") or "")
    any_line = False
    for line, text in iter_lines(path, report):
        any_line = True
        item = _json_object(text, path, line, report)
        if item is None:
            continue
        doc_id = item.get("_id")
        if doc_id is None or isinstance(doc_id, (dict, list, bool)) or not str(doc_id).strip():
            report.skip("missing field '_id'", path, line)
            continue
        doc_id = str(doc_id)
        if doc_id in seen:
            raise ReaderError(f"{path}:{line}: document id {doc_id!r} also on line {seen[doc_id]}")
        seen[doc_id] = line
        body = _text_of(item, options)
        if body is None:
            report.skip("missing field 'text'", path, line, doc_id)
            continue
        if not body.strip():
            report.skip("empty document", path, line, doc_id)
            continue
        if field:
            value = item.get(field)
            if not isinstance(value, str) or not value.strip():
                report.skip(f"missing language field {field!r}", path, line, doc_id)
                continue
            doc_language = value.strip().lower()
        else:
            doc_language = language
        yield line, doc_id, body, doc_language
    if not any_line:
        raise ReaderError(f"{path}: empty corpus")


def _json_object(text: str, path: Path, line: int, report: SkipReport) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        report.skip("bad JSON", path, line, error.msg)
        return None
    if not isinstance(value, dict):
        report.skip("not a JSON object", path, line, type(value).__name__)
        return None
    return value


def _queries(folder: Path, options: dict[str, Any], wanted: set[str], report: SkipReport) -> dict[str, str]:
    """query id -> text of the queries of ``wanted`` (the judged ones) in queries.jsonl; the others
    are read for their ids only (an id twice is a ReaderError naming both lines)."""
    path = _require(folder, QUERIES_FILE, options)
    seen: dict[str, int] = {}
    texts: dict[str, str] = {}
    for line, text in iter_lines(path, report):
        item = _json_object(text, path, line, report)
        if item is None:
            continue
        query_id = item.get("_id")
        if query_id is None or isinstance(query_id, (dict, list, bool)) or not str(query_id).strip():
            report.skip("missing field '_id'", path, line)
            continue
        query_id = str(query_id)
        if query_id in seen:
            raise ReaderError(f"{path}:{line}: query id {query_id!r} also on line {seen[query_id]}")
        seen[query_id] = line
        body = item.get("text")
        if not isinstance(body, str) or not body.strip():
            report.skip("empty query", path, line, query_id)
            continue
        if query_id in wanted:
            texts[query_id] = body.strip()
    if not seen:
        raise ReaderError(f"{path}: no query with an '_id'")
    return texts


def _digest(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()


def _merge_map(folder: Path, options: dict[str, Any]) -> dict[str, str]:
    """``dedupe``: document id -> the first id (file order) with the same text, for every later copy."""
    first: dict[bytes, str] = {}
    merged: dict[str, str] = {}
    for _, doc_id, body, _ in _documents(folder, options, SkipReport()):
        kept = first.setdefault(_digest(body), doc_id)
        if kept != doc_id:
            merged[doc_id] = kept
    return merged


def _remapped(qrels: _Qrels, merged: dict[str, str]) -> None:
    """Judgements of merged documents moved onto the kept id, the highest grade where several meet."""
    if not merged:
        return
    for queries in qrels.grades.values():
        for query, docs in queries.items():
            if not any(doc in merged for doc in docs):
                continue
            moved: dict[str, int] = {}
            for doc, grade in docs.items():
                target = merged.get(doc, doc)
                moved[target] = max(grade, moved[target]) if target in moved else grade
            queries[query] = moved


def read_beir(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """The corpus (split ``codebase``) then the judged queries of each split read (see the module)."""
    folder = beir_folder(raw_dir, options)
    qrels = _read_qrels(folder, options, report)
    merged = _merge_map(folder, options) if options.get("dedupe") else {}
    _remapped(qrels, merged)
    relevant = qrels.relevant_docs()
    texts: dict[str, tuple[str, str]] = {}  # relevant document -> (text, language)
    for _, doc_id, body, language in _documents(folder, options, report):
        if doc_id in merged:
            continue
        if doc_id in relevant:
            texts[doc_id] = (body, language)
        yield make_record(id=doc_id, language=language, code=body, url=doc_id, split=POOL_SPLIT)
    if merged:
        log.info("%s: dedupe merged %d document(s) onto an earlier copy", folder, len(merged))
    queries = _queries(folder, options, qrels.judged_queries(), report)
    for split, judged in qrels.grades.items():
        for query_id, docs in judged.items():
            if not any(grade > 0 for grade in docs.values()):
                continue  # judged, nothing relevant: in the qrels (grade 0), no record
            if query_id not in queries:
                path, line = qrels.first_line[(split, query_id)]
                report.skip("query absent from queries.jsonl", path, line, query_id)
                continue
            best = None
            for doc, grade in docs.items():  # file order: the first among equal grades wins
                if grade > 0 and doc in texts and (best is None or grade > docs[best]):
                    best = doc
            code, language = texts[best] if best is not None else ("", str(options.get("language") or ""))
            yield make_record(
                id=query_id, language=language, query=queries[query_id], code=code, url=best or "", split=split
            )


def read_beir_qrels(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[tuple[str, str, str, int]]:
    """(split, query id, document id, grade) of every judgement of the splits read, in file order
    (``dedupe``: moved onto the kept copies). Judgements of a query absent from queries.jsonl are
    skipped (counted once per query); a document absent from the corpus is kept, counted as
    "document absent from the corpus (kept)"."""
    folder = beir_folder(raw_dir, options)
    qrels = _read_qrels(folder, options, report)
    merged = _merge_map(folder, options) if options.get("dedupe") else {}
    _remapped(qrels, merged)
    corpus = {doc_id for _, doc_id, _, _ in _documents(folder, options, SkipReport())}
    queries = _queries(folder, options, qrels.judged_queries(), SkipReport())
    for split, judged in qrels.grades.items():
        for query_id, docs in judged.items():
            if query_id not in queries:
                path, line = qrels.first_line[(split, query_id)]
                report.skip("query absent from queries.jsonl", path, line, f"{query_id}: {len(docs)} judgement(s)")
                continue
            for doc, grade in docs.items():
                if doc not in corpus:
                    path, line = qrels.first_line[(split, query_id)]
                    report.skip("document absent from the corpus (kept)", path, line, f"{query_id} {doc}")
                yield split, query_id, doc, grade


# --------------------------------------------------------------------------- audit


def beir_audit(raw_dir: Path, options: dict[str, Any], examples: int = 10) -> dict[str, Any]:
    """The dataset card's BEIR section: what the numbers of a run on this dataset can mean.

    ``documents``, ``skipped`` (the readers' skips), per split ``queries`` (with a relevant
    document: the records), ``judged_queries``, ``qrels_rows``, ``relevant_per_query`` (mean / max over
    the queries with one), ``grades`` (grade -> judgements), ``absent_documents`` (judgements naming a
    document absent from the corpus, and distinct such documents), ``queries_without_document`` (a
    record whose code is "": none of its relevant documents is in the corpus), ``queries_absent`` (judged
    queries absent from queries.jsonl); over the corpus ``duplicates`` (groups of documents with the
    same text after the title rule, and the documents in them) and ``ties`` (per query, documents not
    judged for it whose text equals one of its relevant documents': they tie with the labelled one
    for every model; ``judgements`` such pairs, ``queries`` queries with one); ``dedupe`` what
    ``dedupe: true`` merged (else the count it would merge)."""
    folder = beir_folder(raw_dir, options)
    report = SkipReport()
    qrels = _read_qrels(folder, options, report)
    groups: dict[bytes, list[str]] = {}
    doc_digest: dict[str, bytes] = {}
    documents = 0
    for _, doc_id, body, _ in _documents(folder, options, report):
        documents += 1
        digest = _digest(body)
        groups.setdefault(digest, []).append(doc_id)
        doc_digest[doc_id] = digest
    duplicate_groups = [ids for ids in groups.values() if len(ids) > 1]
    merged = {doc: ids[0] for ids in duplicate_groups for doc in ids[1:]}
    dedupe = bool(options.get("dedupe"))
    ties_before = _ties(qrels, doc_digest, groups)
    if dedupe:
        _remapped(qrels, merged)
    queries = _queries(folder, options, qrels.judged_queries(), report)
    splits: dict[str, Any] = {}
    for split, judged in qrels.grades.items():
        grades: Counter[int] = Counter()
        relevant_counts = []
        absent_rows, absent_docs, no_document, missing_queries = 0, set(), 0, 0
        for query_id, docs in judged.items():
            grades.update(docs.values())
            for doc in docs:
                if doc not in doc_digest and doc not in merged:
                    absent_rows += 1
                    absent_docs.add(doc)
            relevant = [doc for doc, grade in docs.items() if grade > 0]
            if query_id not in queries:
                missing_queries += 1
                continue
            if relevant:
                relevant_counts.append(len(relevant))
                if not any(doc in doc_digest for doc in relevant):
                    no_document += 1
        splits[split] = {
            "queries": len(relevant_counts),
            "judged_queries": len(judged),
            "qrels_rows": sum(len(docs) for docs in judged.values()),
            "relevant_per_query": {
                "mean": round(sum(relevant_counts) / len(relevant_counts), 4) if relevant_counts else 0.0,
                "max": max(relevant_counts, default=0),
                "queries_with_several": sum(1 for n in relevant_counts if n > 1),
            },
            "grades": {str(g): n for g, n in sorted(grades.items())},
            "absent_documents": {"judgements": absent_rows, "documents": len(absent_docs)},
            "queries_without_document": no_document,
            "queries_absent": missing_queries,
        }
    return {
        "kind": BEIR_KIND,
        "source": {"hub": options.get("hub"), "revision": options.get("revision")}
        if options.get("hub")
        else {"path": str(options.get("path"))},
        "title": options.get("title", "prepend"),
        "documents": documents,
        "skipped": report.as_dict(),
        "splits": splits,
        "duplicates": {
            "groups": len(duplicate_groups),
            "documents": sum(len(ids) for ids in duplicate_groups),
            "examples": [ids[:5] for ids in duplicate_groups[:examples]],
        },
        "ties": ties_before,
        "dedupe": {
            "enabled": dedupe,
            "merged": len(merged),
            "examples": {doc: merged[doc] for doc in list(merged)[:examples]},
        },
    }


def _ties(qrels: _Qrels, doc_digest: dict[str, bytes], groups: dict[bytes, list[str]]) -> dict[str, Any]:
    """Per split: (query, document) pairs where the document is not judged for the query and its text
    equals that of one of the query's relevant documents; the queries with such a pair."""
    out: dict[str, Any] = {}
    for split, judged in qrels.grades.items():
        pairs, queries = 0, 0
        for docs in judged.values():
            twins: set[str] = set()
            for doc, grade in docs.items():
                if grade > 0 and doc in doc_digest:
                    twins.update(other for other in groups[doc_digest[doc]] if other not in docs)
            pairs += len(twins)
            queries += bool(twins)
        out[split] = {"judgements": pairs, "queries": queries}
    return out


# --------------------------------------------------------------------------- hub


def _hub_help(hub_id: str, revision: str) -> str:
    return (
        "To use it offline, load it once on a machine with internet into the Hugging Face cache, then copy "
        "that cache here (the same HF_HOME / HF_DATASETS_CACHE, default ~/.cache/huggingface/datasets):\n"
        '    python -c "import datasets; [datasets.load_dataset('
        f"'{hub_id}', c, revision='{revision}') for c in ('corpus', 'queries', 'default')]\"\n"
        "and run with HF_DATASETS_OFFLINE=1 (or HF_HUB_OFFLINE=1)"
    )


def _load_config(hub_id: str, config: str, revision: str, cache_dir: Path | None) -> Any:
    """``datasets.load_dataset(hub_id, config, revision=revision)`` as a DatasetDict; raises
    :class:`ReaderError` saying how to pre-download it when it is neither reachable nor cached, or
    when the cache holds another revision."""
    import datasets

    try:
        loaded = datasets.load_dataset(
            hub_id, config, revision=revision, cache_dir=str(cache_dir) if cache_dir else None
        )
    except (ConnectionError, FileNotFoundError, ValueError, OSError) as error:
        offline = datasets.config.HF_HUB_OFFLINE
        state = "offline (HF_DATASETS_OFFLINE / HF_HUB_OFFLINE set)" if offline else "not reachable"
        raise ReaderError(
            f"hub dataset {hub_id!r} config {config!r} at revision {revision}: {state} and not in the local "
            f"cache ({cache_dir or datasets.config.HF_DATASETS_CACHE}): {error}.\n{_hub_help(hub_id, revision)}"
        ) from None
    for name, split in loaded.items():
        files = [entry.get("filename", "") for entry in split.cache_files]
        found = {Path(f).parent.name for f in files}
        if files and revision not in found:
            raise ReaderError(
                f"hub dataset {hub_id!r} config {config!r}: the cache holds revision {', '.join(sorted(found))} of "
                f"split {name!r}, not {revision} (the config's `revision`).\n{_hub_help(hub_id, revision)}"
            )
    return loaded


def _only_split(loaded: Any, hub_id: str, config: str) -> Any:
    if config in loaded:
        return loaded[config]
    if len(loaded) == 1:
        return next(iter(loaded.values()))
    raise ReaderError(f"hub dataset {hub_id!r} config {config!r}: several splits ({', '.join(loaded)}), expected one")


def _write_jsonl(rows: Any, path: Path, what: str) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            if "_id" not in row and "id" in row:  # MTEB's newer datasets name it `id` (its loader renames `_id`)
                row = {"_id": row["id"], **{k: v for k, v in row.items() if k != "id"}}
            if "_id" not in row:
                raise ReaderError(f"{what}: a row without '_id' or 'id' (columns {', '.join(row)})")
            row = {**row, "_id": str(row["_id"])}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def fetch_hub(hub_id: str, revision: str, target: Path, cache_dir: Path | None = None) -> dict[str, Any]:
    """Write the hub dataset ``hub_id`` at ``revision`` into ``target`` in BEIR's layout: its
    ``corpus`` config as corpus.jsonl, ``queries`` as queries.jsonl, the qrels (config ``default``,
    else ``qrels``) as ``qrels/<split>.tsv`` (hub split ``valid`` / ``validation`` / ``dev`` as dev.tsv),
    and HUB.json recording what was written. Column names as MTEB's retrieval loader reads them:
    ``_id`` (or ``id``), ``title``, ``text``; ``query-id``, ``corpus-id``, ``score``. Loaded with
    ``datasets.load_dataset`` (offline: from the local HF cache, whose revision must be ``revision``);
    files are written beside and renamed into place, so ``target`` never holds half a dataset.
    Returns the HUB.json record."""
    if not _COMMIT.fullmatch(revision):
        raise ReaderError(f"hub dataset {hub_id!r}: revision {revision!r} is not a commit (40 hex digits)")
    corpus = _only_split(_load_config(hub_id, "corpus", revision, cache_dir), hub_id, "corpus")
    queries = _only_split(_load_config(hub_id, "queries", revision, cache_dir), hub_id, "queries")
    try:
        qrels = _load_config(hub_id, "default", revision, cache_dir)
        qrels_config = "default"
    except ReaderError as error:
        try:
            qrels = _load_config(hub_id, "qrels", revision, cache_dir)
        except ReaderError:
            raise error from None  # neither: the error of `default`, the config CoIR and MTEB publish
        qrels_config = "qrels"
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"hub": hub_id, "revision": revision, "qrels_config": qrels_config, "files": {}}
    with tempfile.TemporaryDirectory(prefix=".hub-", dir=target) as tmp:
        staging = Path(tmp)
        (staging / QRELS_DIR).mkdir()
        record["files"][CORPUS_FILE] = _write_jsonl(corpus, staging / CORPUS_FILE, f"{hub_id} corpus")
        record["files"][QUERIES_FILE] = _write_jsonl(queries, staging / QUERIES_FILE, f"{hub_id} queries")
        for split, rows in qrels.items():
            stem = HUB_SPLIT_STEMS.get(split)
            if stem is None:
                log.warning("%s: qrels split %r is not test / dev / valid / train: not written", hub_id, split)
                continue
            relative = f"{QRELS_DIR}/{stem}.tsv"
            if relative in record["files"]:
                raise ReaderError(f"hub dataset {hub_id!r}: two qrels splits map to {relative}")
            missing = [c for c in QRELS_HEADER if c not in rows.column_names]
            if missing:
                raise ReaderError(f"hub dataset {hub_id!r} qrels split {split!r}: no column(s) {', '.join(missing)}")
            count = 0
            with (staging / relative).open("w", encoding="utf-8") as handle:
                handle.write("\t".join(QRELS_HEADER) + "\n")
                for row in rows.select_columns(list(QRELS_HEADER)):
                    score = row["score"]
                    score = int(score) if isinstance(score, float) and score.is_integer() else score
                    handle.write(f"{row['query-id']}\t{row['corpus-id']}\t{score}\n")
                    count += 1
            record["files"][relative] = count
        (target / QRELS_DIR).mkdir(exist_ok=True)
        for stale in (target / QRELS_DIR).glob("*.tsv"):  # another revision's split this one lacks
            if f"{QRELS_DIR}/{stale.name}" not in record["files"]:
                stale.unlink()
        for relative in record["files"]:
            os.replace(staging / relative, target / relative)
    (target / HUB_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return record


def download_beir(name: str, options: dict[str, Any], target: Path, cache_dir: Path | None = None) -> str:
    """The download phase's part for a BEIR dataset, before the files are verified and recorded: a
    hub dataset is written into ``target`` (data/raw/<name>/) by :func:`fetch_hub` unless HUB.json
    there already records this hub id and revision with its files present; a folder (``path``) needs no
    download (its files are verified and recorded where they lie). Returns what was done, in words."""
    beir_folder(Path(target), options)  # the options' problems, as a ReaderError
    if not options.get("hub"):
        return f"{name} is a BEIR folder ({options.get('path')}): nothing to download, its files are recorded"
    hub_id, revision = str(options["hub"]), str(options["revision"])
    marker = Path(target) / HUB_FILE
    if marker.is_file():
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            recorded = {}
        present = all((Path(target) / rel).is_file() for rel in recorded.get("files", {}))
        if recorded.get("hub") == hub_id and recorded.get("revision") == revision and present:
            return f"{name}: {hub_id}@{revision[:12]} already in {target}"
    record = fetch_hub(hub_id, revision, Path(target), cache_dir=cache_dir)
    rows = ", ".join(f"{rel} {n}" for rel, n in record["files"].items())
    return f"{name}: {hub_id}@{revision[:12]} written to {target} ({rows})"


def beir_audit_markdown(audit: dict[str, Any]) -> list[str]:
    """The dataset card's lines for :func:`beir_audit` (each block led by a blank line)."""
    lines = ["", "## BEIR judgements", ""]
    lines += [
        "| split | queries (a relevant document) | judged queries | judgements | relevant per query (mean / max) "
        "| grades | judgements of absent documents (documents) | queries without their document |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for split, s in audit["splits"].items():
        grades = ", ".join(f"{g}: {n}" for g, n in s["grades"].items())
        absent = s["absent_documents"]
        per = s["relevant_per_query"]
        lines.append(
            f"| {split} | {s['queries']} | {s['judged_queries']} | {s['qrels_rows']} | {per['mean']} / {per['max']} "
            f"| {grades} | {absent['judgements']} ({absent['documents']}) | {s['queries_without_document']} |"
        )
    dup, dedupe = audit["duplicates"], audit["dedupe"]
    ties = ", ".join(f"{split} {t['judgements']} in {t['queries']} queries" for split, t in audit["ties"].items())
    lines += [
        "",
        f"Corpus: {audit['documents']} documents; {dup['documents']} in {dup['groups']} groups of identical text "
        f"(title rule `{audit['title']}`). Unjudged documents identical to a query's relevant one (they tie with it "
        f"for every model): {ties}.",
        "",
        (
            f"De-duplication (`dedupe: true`): {dedupe['merged']} documents merged onto the first copy, their "
            "judgements moved onto it (highest grade)."
            if dedupe["enabled"]
            else f"De-duplication is off (`dedupe: false`, the default); it would merge {dedupe['merged']} documents."
        ),
        "",
        "Judgements naming a document absent from the corpus are kept: they count in recall's denominator, as in "
        "trec_eval and BEIR.",
    ]
    return lines
