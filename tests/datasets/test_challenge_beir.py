"""``csbench challenge-beir``: the CodeSearchNet Challenge's queries and expert annotations of one language
as a BEIR folder with graded qrels, over a corpus of CodeSearchNet functions (real files of the shared
data), read back by the BEIR reader as a study reads it."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import pytest

from csbench.cli import main
from csbench.datasets.base import ReaderError, SkipReport
from csbench.datasets.beir import read_beir, read_beir_qrels


@pytest.fixture
def challenge(shared_data: Path) -> Path:
    return shared_data / "codesearchnet"


def _annotated_ruby(challenge: Path) -> dict[tuple[str, str], list[int]]:
    grades: dict[tuple[str, str], list[int]] = {}
    with open(challenge / "challenge/annotationStore.csv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Language"].lower() == "ruby":
                grades.setdefault((row["Query"].lower(), row["GitHubUrl"]), []).append(int(row["Relevance"]))
    return grades


def test_the_folder_holds_the_queries_the_ruby_judgements_and_the_corpus(
    challenge: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "challenge-ruby"
    corpus = [challenge / "ruby/test.jsonl", challenge / "ruby/valid.jsonl"]
    argv = ["challenge-beir", "--language", "ruby", "--out", str(out)]
    argv += ["--queries", str(challenge / "challenge/queries.csv")]
    argv += ["--annotations", str(challenge / "challenge/annotationStore.csv")]
    for file in corpus:
        argv += ["--corpus", str(file)]
    assert main(argv) == 0
    message = capsys.readouterr().err
    annotated = _annotated_ruby(challenge)
    assert f"99 queries, {len(annotated)} judgements" in message and "2 of them in the corpus of 2661" in message
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert [q["_id"] for q in queries] == [f"q{i}" for i in range(1, 100)]
    rows = (out / "qrels/test.tsv").read_text().splitlines()
    assert rows[0] == "query-id\tcorpus-id\tscore" and len(rows) - 1 == len(annotated)
    # each grade is the annotators' mean rounded half up
    text = {q["_id"]: q["text"].lower() for q in queries}
    for line in rows[1:]:
        query, url, grade = line.split("\t")
        values = annotated[(text[query], url)]
        assert int(grade) == int(sum(values) / len(values) + 0.5), (query, url, values)
    # what a `kind: beir` dataset reads from it
    options = {"path": str(out), "language": "ruby", "title": "prepend", "splits": None, "dedupe": False}
    records = list(read_beir(out, options, SkipReport()))
    codebase = [r for r in records if r["split"] == "codebase"]
    tests = [r for r in records if r["split"] == "test"]
    assert len(codebase) == 2661
    assert sum(1 for r in tests if r["code"]) == 2  # the two annotated functions that are in the corpus
    judgements = list(read_beir_qrels(out, options, SkipReport()))
    assert len(judgements) == len(annotated)


def test_max_docs_keeps_every_annotated_function(challenge: Path, tmp_path: Path) -> None:
    from csbench.datasets.challenge_beir import write_challenge_beir

    made = write_challenge_beir(
        challenge / "challenge/queries.csv",
        challenge / "challenge/annotationStore.csv",
        [challenge / "ruby/test.jsonl", challenge / "ruby/valid.jsonl"],
        "ruby",
        tmp_path / "small",
        max_docs=100,
    )
    assert made["documents"] == 102 and made["judged_documents_in_corpus"] == 2


def test_gzipped_corpus_and_errors_naming_the_file(challenge: Path, tmp_path: Path) -> None:
    from csbench.datasets.challenge_beir import write_challenge_beir

    packed = tmp_path / "test.jsonl.gz"
    with open(challenge / "ruby/test.jsonl", "rb") as source, gzip.open(packed, "wb") as target:
        shutil.copyfileobj(source, target)
    files = (challenge / "challenge/queries.csv", challenge / "challenge/annotationStore.csv")
    made = write_challenge_beir(*files, [packed], "ruby", tmp_path / "gz")
    assert made["documents"] == 1261
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"url": "u", "code": "x"}\nnot json\n')
    with pytest.raises(ReaderError, match=r"bad\.jsonl:2: not JSON"):
        write_challenge_beir(*files, [bad], "ruby", tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # nothing half-written
    with pytest.raises(ReaderError, match=r"absent\.jsonl: no such corpus file"):
        write_challenge_beir(*files, [tmp_path / "absent.jsonl"], "ruby", tmp_path / "none")
    with pytest.raises(ValueError, match="no annotation of language 'cobol'"):
        write_challenge_beir(*files, [packed], "cobol", tmp_path / "cobol")
