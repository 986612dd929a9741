"""BEIR folders built from the real data in ../shared/data (issue #27), for the BEIR reader's tests and
the end-to-end studies: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/{test,dev}.tsv`` as BEIR, CoIR and
MTEB lay them out. Each builder skips the calling test (``pytest.skip`` with the reason) when the shared
data is absent, and writes nothing into the repository.

:func:`cosqa_beir` (CoSQA, Python): how the judgements are derived from the real files
-------------------------------------------------------------------------------------
Inputs: ``cosqa/code_idx_map.txt`` (the CoCLR retrieval pool: 6,267 functions, ``{code: index}``),
``cosqa/cosqa-retrieval-dev-500.json`` (500 queries, each a CoSQA label-1 pair whose ``retrieval_idx``
is the pool function that answers it) and ``cosqa/cosqa-dev.json`` (604 query / function pairs with a
human ``label``: 313 are 1, 291 are 0). Every one of the 604 dev functions is in the pool (same text),
so both files judge pool functions.

* corpus: the pool, ``_id`` = the function's index, ``title`` "", ``text`` the code;
* queries: the 500 retrieval queries (``_id`` = their ``idx``, ``cosqa-train-<n>``) and the 604 dev
  queries (``cosqa-dev-<n>``);
* grades, all from real labels: the retrieval answer of a retrieval query **2** (an accepted CoSQA
  match, chosen as the query's answer by CoCLR); a dev pair labelled 1 **1**; a dev pair labelled 0 an
  explicit **0** (judged not relevant);
* the real files hold *no* query with several judged functions: each retrieval query has one answer,
  the 604 dev queries are all distinct, and the 14 dev pairs that are also retrieval queries (the same
  ``idx``, query and function: CoCLR drew some retrieval queries from CoSQA dev) judge that query's own
  answer. Those 14 are one query each (grade 2). To get queries with several relevant functions,
  queries asking the same thing are merged, by one rule applied to every pair (:func:`_same_question`):
  their texts, lowercased with every character but letters, digits and ``_`` read as a space, have the
  same set of words, or a difflib ratio of at least 0.9. A dev query merges into the first retrieval
  query it matches; a retrieval query into the first earlier one it matches (file order). The merged
  judgements are the union (the highest grade where two judge the same function). On the real files
  the rule merges 4 queries (``construction.json`` in the folder lists them):
  ``python "not is none" "is not none"`` into ``python is not not none`` (functions 208 and 908, both
  grade 2); the dev query ``remove whitespaces from string python`` (function 3180, label 1) into the
  retrieval query ``remove white spaces from string in python`` (function 366): the query with several
  relevant codes at different grades, 366 at 2 and 3180 at 1 (:data:`MULTI_GRADED_QUERY`); and two dev
  queries whose function is their retrieval twin's answer (``python image shape detect``, ``python
  check for numeric type``: nothing added);
* ``qrels/test.tsv``: the 499 retrieval queries left, 501 judgements (500 at grade 2, 1 at grade 1);
  ``qrels/dev.tsv``: the 587 dev queries not merged, 296 at grade 1 and 291 at an explicit grade 0
  (prepared: 296 valid records; a query judged only 0 has none). No two pool functions share a text
  (the audit's duplicates and ties are 0 on this folder).

:func:`challenge_beir` (CodeSearchNet Challenge)
------------------------------------------------
queries = the 99 queries of ``codesearchnet/challenge/queries.csv`` (``_id`` ``q<n>``, n their 1-based
position), qrels/test.tsv = the expert annotations of one language, as
:func:`csbench.evaluate.qrels.challenge_qrels` makes them (document id = the GitHub URL, grade = the
mean over the annotators rounded half up), corpus = the CodeSearchNet functions of
``codesearchnet/<language>/{test,valid}.jsonl`` (``_id`` their url, ``text`` their code, ``language``
field). For Ruby, 2 of the 305 annotated URLs are in that corpus: most judgements name absent
documents, as they would for any corpus that is not the one the annotators saw, and the audit shows it.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
COSQA = SHARED_DATA / "cosqa"
CHALLENGE = SHARED_DATA / "codesearchnet" / "challenge"

COSQA_REVISION_NOTE = "CoCLR code_idx_map.txt + cosqa-retrieval-dev-500.json, CodeXGLUE cosqa-dev.json"
MULTI_GRADED_QUERY = "remove white spaces from string in python"  # 366 at grade 2, 3180 at grade 1
QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


def _need(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.skip(f"shared data not found: {', '.join(missing)} (it sits beside the project checkout)")


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w]", " ", text.lower()).split())


def _same_question(a: str, b: str) -> bool:
    """The merge rule of :func:`cosqa_beir` (see the module docstring)."""
    x, y = _words(a), _words(b)
    if set(x.split()) == set(y.split()):
        return True
    matcher = difflib.SequenceMatcher(None, x, y)
    return matcher.real_quick_ratio() >= 0.9 and matcher.quick_ratio() >= 0.9 and matcher.ratio() >= 0.9


def write_beir(
    out: Path, corpus: list[dict], queries: list[dict], qrels: dict[str, list[tuple[str, str, int]]]
) -> Path:
    """Write a BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv (with BEIR's header)."""
    out = Path(out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for row in corpus:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for row in queries:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    for split, rows in qrels.items():
        with (out / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as handle:
            handle.write(QRELS_HEADER)
            for query, doc, grade in rows:
                handle.write(f"{query}\t{doc}\t{grade}\n")
    return out


def _trimmed(corpus: list[dict], qrels: dict[str, list[tuple[str, str, int]]], max_docs: int | None) -> list[dict]:
    """``corpus`` less its unjudged documents beyond the first ``max_docs`` of them (file order): every
    judged document stays, so every judgement keeps its document (a quicker study, the same queries)."""
    if max_docs is None:
        return corpus
    judged = {doc for rows in qrels.values() for _, doc, _ in rows}
    kept, others = [], 0
    for row in corpus:
        if row["_id"] in judged:
            kept.append(row)
        elif others < max_docs:
            kept.append(row)
            others += 1
    return kept


def cosqa_beir(out: Path, max_docs: int | None = None) -> Path:
    """The CoSQA BEIR folder (see the module docstring); ``out``, with ``construction.json`` listing the
    merges and the counts. ``max_docs``: keep only that many unjudged functions besides the judged ones
    (all 6,267 by default)."""
    pool_file, retrieval_file, dev_file = (
        COSQA / "code_idx_map.txt",
        COSQA / "cosqa-retrieval-dev-500.json",
        COSQA / "cosqa-dev.json",
    )
    _need(pool_file, retrieval_file, dev_file)
    pool = json.loads(pool_file.read_text(encoding="utf-8"))
    retrieval = json.loads(retrieval_file.read_text(encoding="utf-8"))
    dev = json.loads(dev_file.read_text(encoding="utf-8"))
    corpus = [
        {"_id": str(index), "title": "", "text": code} for code, index in sorted(pool.items(), key=lambda x: x[1])
    ]
    # 14 dev pairs are retrieval queries too (same idx, query and function): one query each
    texts = {item["idx"]: item["doc"].strip() for item in (*retrieval, *dev)}
    queries = [{"_id": idx, "text": query} for idx, query in texts.items()]
    # judgements per query, in file order: retrieval answers grade 2, dev labels 1 / 0
    test: dict[str, dict[str, int]] = {item["idx"]: {str(item["retrieval_idx"]): 2} for item in retrieval}
    shared = [item["idx"] for item in dev if item["idx"] in test]
    dev_qrels: dict[str, dict[str, int]] = {
        item["idx"]: {str(pool[item["code"]]): int(item["label"])} for item in dev if item["idx"] not in test
    }
    text = texts
    merges = []
    kept: list[str] = []  # retrieval queries not merged, file order
    for item in retrieval:
        into = next((k for k in kept if _same_question(text[k], text[item["idx"]])), None)
        if into is None:
            kept.append(item["idx"])
            continue
        merges.append({"merged": item["idx"], "into": into, "texts": [text[item["idx"]], text[into]]})
    for item in dev:
        if item["idx"] in test:
            continue
        into = next((k for k in kept if _same_question(text[k], text[item["idx"]])), None)
        if into is not None:
            merges.append({"merged": item["idx"], "into": into, "texts": [text[item["idx"]], text[into]]})
    for merge in merges:
        source = test.pop(merge["merged"], None) or dev_qrels.pop(merge["merged"])
        target = test[merge["into"]]
        for doc, grade in source.items():
            target[doc] = max(grade, target.get(doc, grade))
    qrels = {
        "test": [(q, d, g) for q, docs in test.items() for d, g in docs.items()],
        "dev": [(q, d, g) for q, docs in dev_qrels.items() for d, g in docs.items()],
    }
    write_beir(out, _trimmed(corpus, qrels, max_docs), queries, qrels)
    construction = {
        "sources": COSQA_REVISION_NOTE,
        "grades": {"2": "retrieval answer", "1": "cosqa-dev label 1", "0": "cosqa-dev label 0 (explicit)"},
        "merge_rule": "same word set after lowercasing (non-word characters as spaces), or difflib ratio >= 0.9",
        "merges": merges,
        "in_both_files": shared,  # the same pair (idx, query, function) in both files: one query, grade 2
    }
    (Path(out) / "construction.json").write_text(json.dumps(construction, indent=2) + "\n", encoding="utf-8")
    return Path(out)


def challenge_beir(out: Path, language: str = "ruby", max_docs: int | None = None) -> Path:
    """The CodeSearchNet Challenge BEIR folder of ``language`` (see the module docstring), written by
    csbench's own ``csbench challenge-beir`` code; ``max_docs`` as :func:`cosqa_beir`'s."""
    from csbench.datasets.challenge_beir import write_challenge_beir

    queries_file, annotations_file = CHALLENGE / "queries.csv", CHALLENGE / "annotationStore.csv"
    csn = SHARED_DATA / "codesearchnet" / language
    corpus = [csn / "test.jsonl", csn / "valid.jsonl"]
    _need(queries_file, annotations_file, *corpus)
    write_challenge_beir(queries_file, annotations_file, corpus, language, out, max_docs)
    return Path(out)


def populate_hf_cache(
    folder: Path, hub_id: str, revision: str, cache_dir: Path, qrels_splits: dict[str, str] | None = None
) -> Path:
    """Put the BEIR folder ``folder`` into the Hugging Face ``datasets`` cache ``cache_dir`` as the hub
    dataset ``hub_id`` at ``revision`` would be cached there after ``datasets.load_dataset(hub_id,
    config, revision=revision)`` of its three configs on a machine with internet, so that the same call
    with ``HF_DATASETS_OFFLINE=1`` / ``HF_HUB_OFFLINE=1`` loads it.

    How: datasets' own ``Json`` builder (the packaged module that loads a hub repository's ``.jsonl``
    files) prepares each config from the folder's files into
    ``<cache_dir>/<namespace>___<name>/<config>/0.0.0/<revision>/`` (``download_and_prepare(output_dir=
    ...)``): the directory a hub load writes (``DatasetBuilder._relative_data_dir``: namespace___name,
    config id, version, the commit hash) and the one ``datasets.load`` falls back to offline
    (``CachedDatasetModuleFactory`` and the ``cache`` packaged module: the config's directory whose
    ``dataset_info.json`` names the config). Configs as CoIR and MTEB publish them: ``corpus`` (split
    ``corpus``: _id, title, text, ...), ``queries`` (split ``queries``), ``default`` (the qrels: query-id,
    corpus-id, score, one split per qrels file; ``qrels_splits`` renames them, e.g. ``{"dev":
    "valid"}`` as CoIR names its dev split). Returns the dataset's cache directory."""
    from datasets.naming import camelcase_to_snakecase
    from datasets.packaged_modules.json.json import Json

    folder, cache_dir = Path(folder), Path(cache_dir)
    namespace, name = hub_id.split("/")
    root = cache_dir / f"{namespace}___{camelcase_to_snakecase(name)}"
    staging = cache_dir / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    qrels_files = {}
    for tsv in sorted((folder / "qrels").glob("*.tsv")):
        split = (qrels_splits or {}).get(tsv.stem, tsv.stem)
        target = staging / f"qrels-{split}.jsonl"
        with tsv.open(encoding="utf-8") as source, target.open("w", encoding="utf-8") as out:
            next(source)  # the header
            for line in source:
                query, doc, score = line.rstrip("\n").split("\t")
                out.write(json.dumps({"query-id": query, "corpus-id": doc, "score": int(score)}) + "\n")
        qrels_files[split] = str(target)
    configs = {
        "corpus": {"corpus": str(folder / "corpus.jsonl")},
        "queries": {"queries": str(folder / "queries.jsonl")},
        "default": qrels_files,
    }
    for config, files in configs.items():
        builder = Json(cache_dir=str(staging / "build"), dataset_name=name, config_name=config, data_files=files)
        builder.download_and_prepare(output_dir=str(root / config / "0.0.0" / revision))
    return root
