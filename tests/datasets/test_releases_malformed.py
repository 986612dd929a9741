"""Malformed input to the release readers: bad records are counted skips naming ``file:line``;
unusable files raise ``ReaderError`` naming the file (and line)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from csbench.datasets.base import POOL_SPLIT, RECORD_COLUMNS, ReaderError, SkipReport
from csbench.datasets.releases import RELEASES, _formats
from csbench.datasets.releases._formats import (
    iter_json_array,
    iter_json_object,
    iter_lines,
    read_labelled_pairs,
    split_gecs_input,
)
from csbench.datasets.releases.csn_challenge import load_annotations, load_queries

SPECS = {spec.name: spec for spec in RELEASES}


def read(name: str, raw_dir: Path, **options) -> tuple[list[dict], SkipReport]:
    report = SkipReport()
    return list(SPECS[name].reader(raw_dir, options, report)), report


def csn_line(url: str, tokens: list[str] | None = None, code: str = "def f():\n    return 1", **extra) -> bytes:
    item = {"url": url, "code": code, "docstring_tokens": ["Return", "one"] if tokens is None else tokens}
    item.update(extra)
    return json.dumps(item).encode() + b"\n"


# --------------------------------------------------------------------------- jsonl


def test_jsonl_bad_records_are_counted_with_file_and_line(tmp_path):
    lines = [
        csn_line("u1"),  # 1 good
        b'{"url": "u2", "code": "x",\n',  # 2 bad JSON
        json.dumps({"url": "u3", "docstring_tokens": ["a"]}).encode() + b"\n",  # 3 missing code
        b'{"url": "u4", "code": "caf\xe9", "docstring_tokens": ["a"]}\n',  # 4 Latin-1 byte
        csn_line("u5", tokens=[]),  # 5 empty query
        csn_line("u1"),  # 6 duplicate id
        b"\n",  # 7 blank: ignored
        b"[1, 2]\n",  # 8 not an object
        csn_line("u9", tokens=["  "]),  # 9 white space only: empty query
        csn_line("u10", code="   "),  # 10 empty code
        csn_line("u11"),  # 11 good
    ]
    path = tmp_path / "dataset" / "ruby" / "test.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))
    records, report = read("csn-filtered-ruby", tmp_path, splits=["test"])
    assert [r["id"] for r in records] == ["u1", "u11"]
    assert all(tuple(r) == RECORD_COLUMNS for r in records)
    assert report.counts == {
        "bad JSON": 1,
        "missing field 'code'": 1,
        "non-UTF-8 bytes": 1,
        "empty query": 2,
        "duplicate id": 1,
        "not a JSON object": 1,
        "empty code": 1,
    }
    examples = report.examples
    assert any(e.startswith("test.jsonl:2: bad JSON") for e in examples)
    assert "test.jsonl:3: missing field 'code'" in examples
    assert any(e.startswith("test.jsonl:4: non-UTF-8 bytes") for e in examples)
    assert "test.jsonl:5: empty query" in examples
    assert "test.jsonl:6: duplicate id (u1)" in examples
    assert "test.jsonl:10: empty code" in examples


def test_pool_records_may_have_no_query(tmp_path):
    path = tmp_path / "dataset" / "ruby" / "codebase.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(csn_line("u1", tokens=[]) + json.dumps({"url": "u2", "code": "def g(): pass"}).encode() + b"\n")
    records, report = read("csn-filtered-ruby", tmp_path, splits=[POOL_SPLIT])
    assert [r["id"] for r in records] == ["u1", "u2"] and not report.counts


def test_missing_file_names_it_and_the_download_command(tmp_path):
    with pytest.raises(ReaderError) as error:
        read("csn-filtered-ruby", tmp_path, splits=["test"])
    message = str(error.value)
    assert str(tmp_path / "dataset" / "ruby" / "test.jsonl") in message
    assert "csbench download --dataset csn-filtered-ruby" in message
    for name, options in [
        ("cosqa", {}),
        ("cosqa-retrieval", {}),
        ("advtest", {}),
        ("tl-codesum", {}),
        ("statcodesearch", {}),
        ("gecs-csn-go", {}),
        ("csn-go", {}),
        ("funcom", {}),
    ]:
        with pytest.raises(ReaderError, match=f"csbench download --dataset {name}"):
            read(name, tmp_path, **options)


def test_unknown_split_is_refused(tmp_path):
    with pytest.raises(ReaderError, match="no split"):
        read("cosqa", tmp_path, splits=["test"])


def test_truncated_gzip_part_raises(tmp_path):
    part = tmp_path / "ruby" / "final" / "jsonl" / "test" / "ruby_test_0.jsonl.gz"
    part.parent.mkdir(parents=True)
    data = gzip.compress(csn_line("u1") * 2000)
    part.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReaderError, match=r"ruby_test_0\.jsonl\.gz"):
        read("csn-ruby", tmp_path, splits=["test"])


def test_iter_lines_reads_gzip(tmp_path):
    path = tmp_path / "a.txt.gz"
    path.write_bytes(gzip.compress(b"one\n\ntwo\r\n"))
    assert list(iter_lines(path, SkipReport())) == [(1, "one"), (3, "two")]


# --------------------------------------------------------------------------- JSON arrays and objects


def cosqa_item(idx: str, label: int = 1, doc: str = "python read file", code: str = "def f(): pass") -> dict:
    return {"idx": idx, "doc": doc, "code": code, "docstring_tokens": "Read .", "label": label}


def test_json_array_bad_elements_are_counted_with_line(tmp_path):
    items = [
        json.dumps(cosqa_item("a"), indent=1),  # lines 2-8
        json.dumps({"idx": "b", "doc": "q", "label": 1}),  # 9: missing code
        json.dumps(cosqa_item("c", doc="   ")),  # 10: empty query
        json.dumps(cosqa_item("d", label=0)),  # 11: negative
    ]
    text = "[\n" + ",\n".join(items) + ",\n"
    data = text.encode() + b'{"idx": "e", "doc": "caf' + b"\xe9" + b'", "code": "x", "label": 1},\n'
    data += json.dumps(cosqa_item("f")).encode() + b"\n]\n"
    (tmp_path / "cosqa-dev.json").write_bytes(data)
    records, report = read("cosqa", tmp_path, splits=["valid"])
    assert [r["id"] for r in records] == ["a", "f"]
    assert report.counts == {"missing field 'code'": 1, "empty query": 1, "negative pair": 1, "non-UTF-8 bytes": 1}
    assert report.examples == [
        "cosqa-dev.json:9: missing field 'code'",
        "cosqa-dev.json:10: empty query",
        "cosqa-dev.json:11: negative pair",
        "cosqa-dev.json:12: non-UTF-8 bytes",
    ]


def test_json_array_syntax_error_raises_with_line(tmp_path):
    path = tmp_path / "cosqa-dev.json"
    path.write_text('[\n {"idx": "a", "doc": "q", "code": "c", "label": 1},\n {"idx": "b", "doc": }\n]\n')
    with pytest.raises(ReaderError, match=r"cosqa-dev\.json:3: invalid JSON"):
        read("cosqa", tmp_path, splits=["valid"])
    path.write_text('{"idx": "a"}')
    with pytest.raises(ReaderError, match=r"cosqa-dev\.json:1: expected a JSON array"):
        read("cosqa", tmp_path, splits=["valid"])
    path.write_text('[{"idx": "a", "doc": "q", "code": "c", "label": 1}] trailing')
    with pytest.raises(ReaderError, match="unexpected data after the JSON array"):
        read("cosqa", tmp_path, splits=["valid"])


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_json_streaming_across_chunk_boundaries(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(_formats, "_CHUNK", chunk)
    array = [{"k": "välue ☃ \u00e9", "n": 12345678901234567890, "f": -1.5e-7, "t": True, "z": None}, [], "x", 7]
    (tmp_path / "a.json").write_text(json.dumps(array, indent=2, ensure_ascii=False), encoding="utf-8")
    got = list(iter_json_array(tmp_path / "a.json", SkipReport()))
    assert [value for _, value in got] == array
    assert [line for line, _ in got] == [2, 9, 10, 11]
    mapping = {"def f():\n    return 'é'": 0, "b": 1, "": 2}
    (tmp_path / "o.json").write_text(json.dumps(mapping, indent=1, ensure_ascii=False), encoding="utf-8")
    assert {k: v for _, k, v in iter_json_object(tmp_path / "o.json", SkipReport())} == mapping
    (tmp_path / "e.json").write_text("[]")
    assert list(iter_json_array(tmp_path / "e.json", SkipReport())) == []


def test_cosqa_retrieval_query_outside_pool(tmp_path):
    (tmp_path / "code_idx_map.txt").write_text(json.dumps({"def f(): pass": 0, "def g(): pass": "one"}))
    query = {**cosqa_item("q1", code="def f(): pass"), "retrieval_idx": 0}
    stray = {**cosqa_item("q2"), "retrieval_idx": 5}
    no_idx = cosqa_item("q3")
    (tmp_path / "cosqa-retrieval-dev-500.json").write_text(json.dumps([query, stray, no_idx], indent=0))
    records, report = read("cosqa-retrieval", tmp_path, splits=["valid", POOL_SPLIT])
    assert [(r["split"], r["url"]) for r in records] == [(POOL_SPLIT, "cosqa://code/0"), ("valid", "cosqa://code/0")]
    assert report.counts == {
        "pool index is not an integer": 1,
        "retrieval_idx not in the pool": 1,
        "missing field 'retrieval_idx'": 1,
    }


def test_webquerytest_labels_option(tmp_path):
    pairs = [{"idx": f"webquery-test-{i}", "doc": f"query {i}", "code": f"def f{i}(): pass"} for i in (1, 2, 3)]
    (tmp_path / "test_webquery.json").write_text(json.dumps(pairs))
    records, report = read("cosqa-webquerytest", tmp_path)
    assert len(records) == 3 and not report.counts
    (tmp_path / "answers.txt").write_text("webquery-test-1\t1\nwebquery-test-2\t0\n")
    records, report = read("cosqa-webquerytest", tmp_path, labels="answers.txt")
    assert [r["id"] for r in records] == ["webquery-test-1"]
    assert report.counts == {"negative pair": 1, "no label": 1}


# --------------------------------------------------------------------------- GeCS


def test_gecs_malformed_lines(tmp_path):
    lines = [
        {"input": "Return one [CODESPLIT] def f(): return 1", "target": 1},
        {"input": "Return two [SEP] def g(): return 2", "target": 0},
        {"input": "no separator here", "target": 1},
        {"input": "a [SEP] b", "target": 2},
        {"target": 1},
        {"input": "   [CODESPLIT] def h(): pass", "target": 1},
    ]
    path = tmp_path / "test_go.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    records, report = read("gecs-csn-go", tmp_path)
    assert [(r["query"], r["code"]) for r in records] == [("Return one", "def f(): return 1")]
    assert report.counts == {
        "negative pair": 1,
        "no [CODESPLIT] / [SEP] separator": 1,
        "target is not 0 or 1": 1,
        "missing field 'input'": 1,
        "empty query": 1,
    }
    assert "test_go.jsonl:3: no [CODESPLIT] / [SEP] separator" in report.examples
    with pytest.raises(ReaderError, match=r"test_go\.jsonl:3: no \[CODESPLIT\]"):
        list(read_labelled_pairs(path))
    pairs = list(read_labelled_pairs(path, SkipReport()))
    assert [(label, line) for _, _, label, line in pairs] == [(1, 1), (0, 2), (1, 6)]


def test_split_gecs_input():
    assert split_gecs_input("a b [CODESPLIT] x = [SEP] y") == ("a b", "x = [SEP] y")
    assert split_gecs_input("q [SEP] c") == ("q", "c")
    assert split_gecs_input("q[SEP]c") == ("q", "c")
    assert split_gecs_input("nothing") is None


# --------------------------------------------------------------------------- TL-CodeSum


def write_tl(tmp_path: Path, code: bytes, nl: bytes) -> None:
    base = tmp_path / "data" / "valid"
    base.mkdir(parents=True, exist_ok=True)
    (base / "valid.token.code").write_bytes(code)
    (base / "valid.token.nl").write_bytes(nl)


def test_tl_codesum_malformed(tmp_path):
    write_tl(
        tmp_path,
        b"1\tpublic void a ( ) { }\n2\tint b ( ) { return 1 ; }\nno tab here\n4\tvoid d ( ) { }\n5\tvoid e ( ) { }\n",
        b"1\tdoes a\n2\treturns caf\xe9\n3\tthree\n4\t\n5\tdoes e\n",
    )
    records, report = read("tl-codesum", tmp_path, splits=["valid"])
    assert [r["id"] for r in records] == ["tl-codesum:1", "tl-codesum:5"]
    assert report.counts == {"non-UTF-8 bytes": 1, "missing field 'id' (no tab)": 1, "empty query": 1}
    assert any(e.startswith("valid.token.nl:2: non-UTF-8 bytes") for e in report.examples)
    assert "valid.token.code:3: missing field 'id' (no tab)" in report.examples
    assert "valid.token.nl:4: empty query" in report.examples


def test_tl_codesum_misaligned_files_raise(tmp_path):
    write_tl(tmp_path, b"1\ta\n2\tb\n", b"1\tx\n3\ty\n")
    with pytest.raises(ReaderError, match=r"valid\.token\.code:2 and .*valid\.token\.nl:2: ids '2' and '3' differ"):
        read("tl-codesum", tmp_path, splits=["valid"])
    write_tl(tmp_path, b"1\ta\n2\tb\n", b"1\tx\n")
    with pytest.raises(ReaderError, match="different numbers of lines"):
        read("tl-codesum", tmp_path, splits=["valid"])


# --------------------------------------------------------------------------- StatCodeSearch


def test_statcodesearch_json_malformed(tmp_path):
    items = [
        {"ID": 1, "Comment": "fit model", "Code": "lm(y ~ x)", "Label": "Statistical Modeling"},
        {"ID": 2, "Comment": "plot"},
        {"ID": 3, "Comment": "", "Code": "plot(x)"},
    ]
    (tmp_path / "statcodesearch.json").write_text(json.dumps(items, indent=2))
    records, report = read("statcodesearch", tmp_path)
    assert [r["id"] for r in records] == ["statcodesearch:1"]
    assert report.counts == {"missing field 'Code'": 1, "empty query": 1}
    with pytest.raises(ReaderError, match=r"options\.format"):
        read("statcodesearch", tmp_path, format="csv")


# --------------------------------------------------------------------------- CodeSearchNet Challenge


def test_challenge_loaders_validate(tmp_path):
    header = "Language,Query,GitHubUrl,Relevance,Notes\n"
    path = tmp_path / "annotationStore.csv"
    path.write_text(header + "Go,sort list,https://github.com/a/b/blob/c/d.go#L1-L2,3,\n" + 'Go,x,https://g/h,"4",\n')
    with pytest.raises(ReaderError, match=r"annotationStore\.csv:3: Relevance 4 is outside 0-3"):
        load_annotations(path)
    path.write_text(header + "Go,sort list,https://github.com/a,high,\n")
    with pytest.raises(ReaderError, match=r"annotationStore\.csv:2: Relevance 'high' is not an integer"):
        load_annotations(path)
    path.write_text("Language,Query,Url,Relevance,Notes\n")
    with pytest.raises(ReaderError, match=r"annotationStore\.csv:1: expected the header"):
        load_annotations(path)
    path.write_text(header + 'Go,q,https://github.com/a,2,"multi\nline note"\nGo,q,https://github.com/b,1\n')
    with pytest.raises(ReaderError, match=r"annotationStore\.csv:4: expected 5 columns"):
        load_annotations(path)
    path.write_bytes(header.encode() + b"Go,caf\xe9,https://github.com/a,2,\n")
    with pytest.raises(ReaderError, match=r"annotationStore\.csv:2: not UTF-8"):
        load_annotations(path)
    queries = tmp_path / "queries.csv"
    queries.write_text("question\nsort\n")
    with pytest.raises(ReaderError, match=r"queries\.csv:1: expected the header 'query'"):
        load_queries(queries)
    queries.write_text("query\nsort list\n\nparse json\n")
    assert load_queries(queries) == ["sort list", "parse json"]
    with pytest.raises(ReaderError, match="csbench download --dataset csn-challenge"):
        load_queries(tmp_path / "absent.csv")
