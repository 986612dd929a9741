"""The ``beir`` dataset kind (issue #27): BEIR folders built from the real shared data (tests/beir_folders.py),
their readers, skips and errors, the audit of the dataset card, dedupe, and loading by hub id from a
pre-populated Hugging Face cache, offline."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from beir_folders import MULTI_GRADED_QUERY, challenge_beir, cosqa_beir, populate_hf_cache

from csbench.datasets.base import POOL_SPLIT, DatasetOption, ReaderError, SkipReport, options_markdown
from csbench.datasets.beir import (
    BEIR_OPTIONS,
    beir_audit,
    beir_needs,
    beir_options_problem,
    beir_spec,
    download_beir,
    fetch_hub,
)

REVISION = "bc5efb7e9d437246ce393ed19d772e08e4a79535"  # MTEB's pin of CoIR-Retrieval/cosqa (its CosQA task)
HUB_ID = "CoIR-Retrieval/cosqa"


@pytest.fixture(scope="module")
def cosqa_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cosqa_beir(tmp_path_factory.mktemp("beir") / "cosqa")


@pytest.fixture(scope="module")
def challenge_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return challenge_beir(tmp_path_factory.mktemp("beir") / "challenge-ruby")


def _options(**given) -> dict:
    spec = beir_spec("beir-test", given)
    return {**spec.defaults, **given}


def _read(folder: Path, **given) -> tuple[list[dict], list[tuple], SkipReport, SkipReport]:
    options = _options(path=str(folder), **given)
    spec = beir_spec("beir-test", {k: v for k, v in options.items() if v is not None})
    records_report, qrels_report = SkipReport(), SkipReport()
    records = list(spec.reader(folder, options, records_report))
    qrels = list(spec.qrels(folder, options, qrels_report))
    return records, qrels, records_report, qrels_report


def test_cosqa_folder_reads_with_a_multi_relevant_graded_query(cosqa_folder: Path) -> None:
    records, qrels, report, qrels_report = _read(cosqa_folder, language="python")
    assert Counter(r["split"] for r in records) == {POOL_SPLIT: 6267, "test": 499, "valid": 296}
    assert report.as_dict()["counts"] == {} and qrels_report.as_dict()["counts"] == {}
    assert Counter(split for split, *_ in qrels) == {"test": 501, "valid": 587}
    assert Counter((split, grade) for split, _, _, grade in qrels) == {
        ("test", 2): 500,
        ("test", 1): 1,
        ("valid", 1): 296,
        ("valid", 0): 291,
    }
    pool = {r["id"]: r for r in records if r["split"] == POOL_SPLIT}
    assert all(r["url"] == r["id"] and r["language"] == "python" and r["query"] == "" for r in pool.values())
    (query,) = [r for r in records if r["query"] == MULTI_GRADED_QUERY]
    judged = {doc: grade for split, q, doc, grade in qrels if q == query["id"]}
    assert judged == {"366": 2, "3180": 1}  # the retrieval answer and a dev label-1 code of the merged query
    assert query["split"] == "test" and query["url"] == "366" and query["code"] == pool["366"]["code"]
    # every query record's code is the text of its best-graded relevant document
    best: dict[tuple[str, str], tuple[str, int]] = {}
    for split, q, doc, grade in qrels:
        if grade > 0 and ((split, q) not in best or grade > best[(split, q)][1]):
            best[(split, q)] = (doc, grade)
    for record in records:
        if record["split"] != POOL_SPLIT:
            doc = best[(record["split"], record["id"])][0]
            assert (record["url"], record["code"]) == (doc, pool[doc]["code"])


def test_cosqa_audit_numbers(cosqa_folder: Path) -> None:
    audit = beir_audit(cosqa_folder, _options(path=str(cosqa_folder), language="python"))
    assert audit["documents"] == 6267
    test, valid = audit["splits"]["test"], audit["splits"]["valid"]
    assert (test["queries"], test["judged_queries"], test["qrels_rows"]) == (499, 499, 501)
    assert test["relevant_per_query"] == {"mean": round(501 / 499, 4), "max": 2, "queries_with_several": 2}
    assert test["grades"] == {"1": 1, "2": 500}
    assert (valid["queries"], valid["judged_queries"], valid["qrels_rows"]) == (296, 587, 587)
    assert valid["grades"] == {"0": 291, "1": 296}
    assert test["absent_documents"] == valid["absent_documents"] == {"judgements": 0, "documents": 0}
    assert audit["duplicates"]["groups"] == 0 and audit["ties"]["test"] == {"judgements": 0, "queries": 0}
    assert audit["dedupe"] == {"enabled": False, "merged": 0, "examples": {}}


def test_challenge_folder_keeps_and_counts_absent_documents(challenge_folder: Path) -> None:
    records, qrels, _, qrels_report = _read(challenge_folder, language_field="language")
    assert Counter(r["split"] for r in records) == {POOL_SPLIT: 2661, "test": 84}
    assert {r["language"] for r in records if r["split"] == POOL_SPLIT} == {"ruby"}
    assert len(qrels) == 313 and {q for _, q, _, _ in qrels} <= {f"q{n}" for n in range(1, 100)}
    assert qrels_report.counts == {"document absent from the corpus (kept)": 311}
    present = [r for r in records if r["split"] == "test" and r["code"]]
    assert len(present) == 2  # the two annotated Ruby URLs of the corpus
    audit = beir_audit(challenge_folder, _options(path=str(challenge_folder), language_field="language"))
    test = audit["splits"]["test"]
    assert test["absent_documents"] == {"judgements": 311, "documents": 303}
    assert test["queries_without_document"] == 82 and test["judged_queries"] == 97
    assert test["grades"] == {"0": 122, "1": 104, "2": 54, "3": 33}
    assert test["relevant_per_query"]["max"] == 5


def _small_folder(source: Path, out: Path, docs: int = 40) -> Path:
    """The first ``docs`` documents of the CoSQA folder, its test queries judging them."""
    shutil.copytree(source, out)
    corpus = (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:docs]
    (out / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (out / "qrels" / "dev.tsv").unlink()
    return out


def test_bad_lines_are_skips_with_file_and_line(cosqa_folder: Path, tmp_path: Path) -> None:
    folder = _small_folder(cosqa_folder, tmp_path / "bad")
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")  # line 41
        handle.write(json.dumps({"title": "", "text": "def f(): pass"}) + "\n")  # 42: no _id
    with (folder / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("only\ttwo\n")
        handle.write("cosqa-train-8333\t0\tx\n")
        handle.write("no-such-query\t0\t1\n")
    lines = len((folder / "qrels" / "test.tsv").read_text().splitlines())
    records, qrels, report, qrels_report = _read(folder, language="python")
    assert report.counts["bad JSON"] == 1 and report.counts["missing field '_id'"] == 1
    assert "corpus.jsonl:41: bad JSON" in " ".join(report.examples)
    assert f"test.tsv:{lines - 2}: bad qrels line" in " ".join(report.examples)
    assert f"test.tsv:{lines - 1}: grade is not an integer" in " ".join(report.examples)
    assert f"test.tsv:{lines}: query absent from queries.jsonl" in " ".join(report.examples)
    assert not any(r["id"] == "no-such-query" for r in records)
    assert qrels_report.counts["query absent from queries.jsonl"] == 1
    assert not any(q == "no-such-query" for _, q, _, _ in qrels)
    # judgements of documents beyond the first 40: kept, counted, and the query's code is ""
    absent = qrels_report.counts["document absent from the corpus (kept)"]
    assert absent == sum(1 for _, _, doc, _ in qrels if int(doc) >= 40) > 0
    assert all(r["code"] == "" for r in records if r["split"] == "test" and r["url"] == "")


@pytest.mark.parametrize("file", ["corpus.jsonl", "queries.jsonl"])
def test_duplicate_ids_name_both_lines(cosqa_folder: Path, tmp_path: Path, file: str) -> None:
    folder = _small_folder(cosqa_folder, tmp_path / "dup")
    lines = (folder / file).read_text(encoding="utf-8").splitlines()
    (folder / file).write_text("\n".join([*lines, lines[2]]) + "\n", encoding="utf-8")
    with pytest.raises(ReaderError, match=rf"{file}:{len(lines) + 1}: .* also on line 3"):
        _read(folder, language="python")


def test_a_file_wrong_entirely_is_an_error(cosqa_folder: Path, tmp_path: Path) -> None:
    folder = _small_folder(cosqa_folder, tmp_path / "wrong")
    (folder / "qrels" / "test.tsv").write_text("query-id corpus-id score\nq1 0 1\n", encoding="utf-8")
    with pytest.raises(ReaderError, match=r"test.tsv:1: expected 3 tab-separated columns"):
        _read(folder, language="python")
    (folder / "qrels" / "test.tsv").unlink()
    with pytest.raises(ReaderError, match="no qrels file"):
        _read(folder, language="python")


def _folder_with_a_twin(source: Path, out: Path) -> tuple[Path, str, str, str]:
    """The small folder plus a copy of a judged document's text under a new id (appended last), unjudged:
    a constructed duplicate. (folder, the query judging the original, the original's id, the twin's id)."""
    folder = _small_folder(source, out)
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = [line.split("\t") for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    query, doc = next((q, d) for q, d, g in rows if int(d) < len(corpus) and g == "2")
    twin = {**corpus[int(doc)], "_id": f"twin-of-{doc}"}
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(twin) + "\n")
    return folder, query, doc, twin["_id"]


def test_dedupe_off_by_default_counts_ties(cosqa_folder: Path, tmp_path: Path) -> None:
    folder, _, doc, twin = _folder_with_a_twin(cosqa_folder, tmp_path / "twin")
    options = _options(path=str(folder), language="python")
    assert options["dedupe"] is False
    records = _read(folder, language="python")[0]
    assert twin in {r["id"] for r in records if r["split"] == POOL_SPLIT}
    audit = beir_audit(folder, options)
    assert audit["duplicates"]["groups"] == 1 and audit["duplicates"]["examples"] == [[doc, twin]]
    assert audit["ties"]["test"] == {"judgements": 1, "queries": 1}  # the twin, unjudged, ties with doc
    assert audit["dedupe"]["enabled"] is False and audit["dedupe"]["merged"] == 1  # what it would merge


def test_dedupe_on_collapses_onto_the_first_id(cosqa_folder: Path, tmp_path: Path) -> None:
    folder, query, doc, twin = _folder_with_a_twin(cosqa_folder, tmp_path / "twin")
    with (folder / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write(f"{query}\t{twin}\t1\n")
    plain, plain_qrels, _, _ = _read(folder, language="python")
    assert {(q, d): g for _, q, d, g in plain_qrels if q == query} == {(query, doc): 2, (query, twin): 1}
    records, qrels, _, _ = _read(folder, language="python", dedupe=True)
    assert twin not in {r["id"] for r in records}
    assert (
        len([r for r in records if r["split"] == POOL_SPLIT]) == len([r for r in plain if r["split"] == POOL_SPLIT]) - 1
    )
    assert {(q, d): g for _, q, d, g in qrels if q == query} == {(query, doc): 2}  # max grade kept
    audit = beir_audit(folder, _options(path=str(folder), language="python", dedupe=True))
    assert audit["dedupe"] == {"enabled": True, "merged": 1, "examples": {twin: doc}}


def test_options_and_their_checks(tmp_path: Path) -> None:
    assert beir_options_problem({"path": "x", "language": "python"}) is None
    assert beir_options_problem({"hub": HUB_ID, "revision": REVISION, "language_field": "lang"}) is None
    assert beir_options_problem({"path": "x", "hub": HUB_ID, "language": "python"})[1].startswith("a `kind: beir`")
    assert beir_options_problem({"language": "python"})[0] == "path"
    assert beir_options_problem({"hub": HUB_ID, "language": "python"})[0] == "hub"
    assert beir_options_problem({"hub": HUB_ID, "revision": "main", "language": "python"})[0] == "revision"
    assert beir_options_problem({"path": "x", "revision": REVISION, "language": "python"})[0] == "revision"
    assert beir_options_problem({"path": "x"})[0] == "language"
    assert beir_options_problem({"path": "x", "language": "python", "language_field": "l"})[0] == "language_field"
    assert beir_options_problem({"path": "x", "language": "python", "splits": ["dev"]})[0] == "splits"
    assert beir_options_problem({"path": "x", "language": "python", "dedupe": "yes"})[0] == "dedupe"
    assert beir_options_problem({"path": "x", "language": "python", "titel": "ignore"})[0] == "titel"
    bad = {"hub": HUB_ID, "revision": "v1", "language": "python"}
    spec = beir_spec("mine", bad)  # built all the same: the config checks name the line of the bad option
    with pytest.raises(ReaderError, match="option 'revision' of a BEIR dataset: 'v1' is not a commit"):
        spec.needs({**spec.defaults, **bad}, tmp_path)
    flag, text = DatasetOption("f", "flag", "h", default=False), DatasetOption("t", "text", "h")
    assert flag.problem(True) is None and flag.problem("true") is not None
    assert text.problem("CoIR-Retrieval/cosqa") is None and text.problem("") is not None and text.problem(3)
    table = options_markdown([beir_spec("mine", {"path": "x", "language": "python"})])
    assert "| `mine` | `dedupe` | flag | `true`, `false` | `false` |" in table
    assert "| `mine` | `hub` | text | text | none |" in table
    assert [o.name for o in BEIR_OPTIONS] == [
        "path", "hub", "revision", "language", "language_field", "title", "splits", "dedupe"
    ]  # fmt: skip
    relative = beir_needs({"path": "folder", "language": "python"}, tmp_path)
    assert relative[0].path == str((Path("folder") / "corpus.jsonl").resolve())
    hub = beir_needs({"hub": HUB_ID, "revision": REVISION, "language": "python", "splits": ["test", "dev"]}, tmp_path)
    assert [n.path for n in hub] == ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/dev.tsv"]


def test_title_rule(cosqa_folder: Path, tmp_path: Path) -> None:
    folder = _small_folder(cosqa_folder, tmp_path / "title")
    lines = (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    first = {**json.loads(lines[0]), "title": "strip"}
    (folder / "corpus.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    prepend = {r["id"]: r["code"] for r in _read(folder, language="python")[0] if r["split"] == POOL_SPLIT}
    ignore = {
        r["id"]: r["code"] for r in _read(folder, language="python", title="ignore")[0] if r["split"] == POOL_SPLIT
    }
    assert prepend["0"] == "strip\n" + first["text"] and ignore["0"] == first["text"]
    assert prepend["1"] == ignore["1"]  # an empty title adds nothing


def _rows(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_hub_dataset_loads_offline_from_a_prepopulated_cache(
    cosqa_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # read at import: offline whatever the env
    cache = tmp_path / "hf-cache"
    populate_hf_cache(cosqa_folder, HUB_ID, REVISION, cache, qrels_splits={"dev": "valid"})
    target = tmp_path / "raw" / "cosqa-hub"
    record = fetch_hub(HUB_ID, REVISION, target, cache_dir=cache)
    assert record["files"] == {
        "corpus.jsonl": 6267,
        "queries.jsonl": 1090,
        "qrels/test.tsv": 501,
        "qrels/dev.tsv": 587,
    }
    for name in ("corpus.jsonl", "queries.jsonl"):
        assert _rows(target / name) == _rows(cosqa_folder / name)
    for name in ("qrels/test.tsv", "qrels/dev.tsv"):
        assert (target / name).read_text(encoding="utf-8") == (cosqa_folder / name).read_text(encoding="utf-8")
    # read as a hub dataset: the same records and judgements as the folder
    hub = {"hub": HUB_ID, "revision": REVISION, "language": "python"}
    spec = beir_spec("cosqa-hub", hub)
    options = {**spec.defaults, **hub}
    from_hub = list(spec.reader(target, options, SkipReport()))
    from_folder = _read(cosqa_folder, language="python")[0]
    assert from_hub == from_folder
    assert "already in" in download_beir("cosqa-hub", options, target, cache_dir=cache)


def test_hub_errors_say_how_to_predownload(cosqa_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cache = tmp_path / "hf-cache"
    with pytest.raises(ReaderError) as error:
        fetch_hub(HUB_ID, REVISION, tmp_path / "raw", cache_dir=cache)
    message = str(error.value)
    assert f"datasets.load_dataset('{HUB_ID}', c, revision='{REVISION}')" in message
    assert "HF_DATASETS_OFFLINE=1" in message and "HF_DATASETS_CACHE" in message
    other = "0" * 40
    populate_hf_cache(cosqa_folder, HUB_ID, other, cache)
    with pytest.raises(ReaderError, match=f"holds revision {other} .*not {REVISION}"):
        fetch_hub(HUB_ID, REVISION, tmp_path / "raw", cache_dir=cache)
    assert not (tmp_path / "raw" / "corpus.jsonl").exists()


def test_a_folder_needs_no_download(tmp_path: Path) -> None:
    message = download_beir("mine", {"path": "some/folder", "language": "python"}, tmp_path)
    assert "nothing to download" in message and not any(tmp_path.iterdir())


def test_audit_markdown(challenge_folder: Path) -> None:
    from csbench.datasets.beir import beir_audit_markdown

    audit = beir_audit(challenge_folder, _options(path=str(challenge_folder), language_field="language"))
    text = "\n".join(beir_audit_markdown(audit))
    assert "| test | 84 | 97 | 313 | 2.2738 / 5 | 0: 122, 1: 104, 2: 54, 3: 33 | 311 (303) | 82 |" in text
    assert "De-duplication is off" in text


def test_the_docs_table_of_beir_options_is_the_declarations() -> None:
    """docs/beir.md lists every option of a `kind: beir` dataset exactly as declared (beir.BEIR_OPTIONS)."""
    from csbench.datasets.beir import beir_spec

    docs = (Path(__file__).resolve().parents[2] / "docs" / "beir.md").read_text(encoding="utf-8")
    assert options_markdown([beir_spec("<name>", {})]) in docs
