"""The CodeSearchNet Challenge as a BEIR folder (``csbench challenge-beir``): its 99 queries, its expert
annotations of one language as graded qrels (:func:`csbench.evaluate.qrels.challenge_qrels`: query ids
``q1`` ... ``q99`` in queries.csv order, document id = the GitHub URL, grade = the annotators' mean
relevance rounded half up), and a corpus of CodeSearchNet functions (jsonl files with ``url``, ``code``
and ``language``, plain or gzipped, as the CodeSearchNet and CodeXGLUE releases ship them). A study then
reads the folder as any BEIR dataset (``datasets: {name: {kind: beir, path: DIR, language: <lang>}}``)
and scores it with the ``qrels`` protocol: trec_eval's nDCG, not relevanceeval's (whose fractional
means and 2^rel - 1 gains ``csbench challenge`` keeps).

The Challenge annotates functions of the whole CodeSearchNet corpus (about 6 million with the
undocumented ones): a corpus of fewer functions leaves judgements naming absent documents, which
csbench keeps (they count in recall's denominator) and the dataset card counts.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import ReaderError

QRELS_HEADER = "query-id\tcorpus-id\tscore\n"


def corpus_functions(files: Iterable[Path], language: str) -> Iterator[dict[str, str]]:
    """BEIR corpus rows (``_id`` = url, ``title`` "", ``text`` = code, ``language``) of the functions of
    ``language`` in CodeSearchNet jsonl ``files``, in file order, each url once (the first)."""
    seen: set[str] = set()
    for file in files:
        file = Path(file)
        if not file.is_file():
            raise ReaderError(f"{file}: no such corpus file")
        opener = gzip.open if file.suffix == ".gz" else open
        with opener(file, "rt", encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as error:
                    raise ReaderError(f"{file}:{line_number}: not JSON ({error.msg})") from None
                missing = [key for key in ("url", "code") if not isinstance(item.get(key), str)]
                if missing:
                    raise ReaderError(f"{file}:{line_number}: no {' / '.join(missing)} string")
                if str(item.get("language", language)).lower() != language or item["url"] in seen:
                    continue
                seen.add(item["url"])
                yield {"_id": item["url"], "title": "", "text": item["code"], "language": language}


def write_challenge_beir(
    queries_file: Path,
    annotations_file: Path,
    corpus_files: Iterable[Path],
    language: str,
    out: Path,
    max_docs: int | None = None,
) -> dict[str, Any]:
    """Write the Challenge's BEIR folder of ``language`` into ``out`` (replaced atomically: written beside
    it, then renamed); what it holds. ``max_docs``: keep only that many functions the annotations do not
    name (file order) besides every one they name (a smaller corpus for a quick study)."""
    from csbench.datasets.releases.csn_challenge import load_annotations, load_queries
    from csbench.evaluate.qrels import challenge_qrels, challenge_query_ids

    language = language.lower()
    texts = load_queries(queries_file)
    annotations = load_annotations(annotations_file)
    ids = challenge_query_ids(annotations, texts)
    judgements = challenge_qrels(annotations, texts, language=language)
    if judgements.empty:
        raise ValueError(f"{annotations_file}: no annotation of language {language!r}")
    rows = list(zip(judgements["query_id"], judgements["doc_id"], judgements["relevance"].astype(int), strict=True))
    judged = {doc for _, doc, _ in rows}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        documents, present, others = 0, set(), 0
        with (staging / "corpus.jsonl").open("w", encoding="utf-8") as handle:
            for row in corpus_functions(corpus_files, language):
                if row["_id"] in judged:
                    present.add(row["_id"])
                elif max_docs is not None and others >= max_docs:
                    continue
                else:
                    others += 1
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                documents += 1
        with (staging / "queries.jsonl").open("w", encoding="utf-8") as handle:
            for text in texts:
                handle.write(json.dumps({"_id": ids[text.lower()], "text": text}, ensure_ascii=False) + "\n")
        (staging / "qrels").mkdir()
        with (staging / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
            handle.write(QRELS_HEADER)
            handle.writelines(f"{query}\t{doc}\t{grade}\n" for query, doc, grade in rows)
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {
        "folder": str(out),
        "language": language,
        "queries": len(texts),
        "judgements": len(rows),
        "judged_documents": len(judged),
        "judged_documents_in_corpus": len(present),
        "documents": documents,
    }
