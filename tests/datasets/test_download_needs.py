"""Issue 21, item 8: download requires exactly what the configured reader reads.

The class-level test runs every release's reader, with several option settings, on a data/raw
directory holding exactly the paths its ``needs`` names (minimal valid content), and records every
file the reader opens (an audit hook): the reader must open all of them and nothing else. The other
tests are the cases the issue names, offline: a StatCodeSearch format whose file is not read, the
language zip of csn-filtered-<lang> when the extracted jsonl files are there, and a kit folder taken
as "placed by hand" because unrelated files sat in it.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from csbench.datasets import DATASETS
from csbench.datasets.base import SkipReport
from csbench.datasets.download import DownloadError, fetch_dataset
from csbench.datasets.releases import RELEASES

OFFLINE = {"offline": True, "progress": False}


# --------------------------------------------------------------------------- what a reader opens

_OPENED: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(Path(args[0].decode() if isinstance(args[0], bytes) else args[0]).resolve()))


sys.addaudithook(_audit)


@contextmanager
def opened_files() -> Iterator[list[str]]:
    """Every file opened inside the block (resolved paths)."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


def minimal_content(name: str) -> bytes:
    """A valid file of no records for each format the readers take."""
    if name.endswith(".gz"):
        return gzip.compress(b"")
    if name in ("code_idx_map.txt", "functions.json", "comments.json"):  # JSON objects
        return b"{}"
    if name.endswith(".json"):
        return b"[]"
    return b""


def materialise(spec, options: dict, raw: Path, outside: Path) -> set[str]:
    """Create exactly what ``spec.needs`` names (a directory: one file matching its pattern);
    return the resolved paths of the files created."""
    created: set[str] = set()
    for _ in range(3):  # needs may depend on what is present: until nothing new is needed
        new = False
        for need in spec.needs(options, raw):
            target = Path(need.path) if Path(need.path).is_absolute() else raw / need.path
            if need.path.endswith("/"):
                name = "x_0.jsonl.gz" if need.pattern else "x.jsonl"
                assert not need.pattern or re.search(need.pattern, name)
                target = target / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(minimal_content(target.name))
                created.add(str(target.resolve()))
                new = True
        if not new:
            return created
    raise AssertionError(f"{spec.name}: needs never settle")


# (dataset, options, files placed first): the readers' choices of what to read
CASES = [
    ("statcodesearch", {}, ()),
    ("statcodesearch", {"format": "gecs"}, ()),
    ("statcodesearch", {"file": "mine.json"}, ()),
    ("statcodesearch", {"format": "gecs", "file": "OUTSIDE/elsewhere.jsonl"}, ()),
    *((f"gecs-csn-{lang}", {}, ()) for lang in ("go", "java", "javascript", "php", "ruby")),
    ("gecs-csn-go", {"file": "go_test_sample.jsonl"}, ()),
    ("cosqa", {}, ()),
    ("cosqa", {"splits": ["valid"]}, ()),
    ("cosqa-retrieval", {}, ()),
    ("cosqa-retrieval", {"splits": ["valid"]}, ()),
    ("cosqa-webquerytest", {}, ()),
    ("cosqa-webquerytest", {"labels": "answers.txt"}, ()),
    ("tl-codesum", {}, ()),
    ("tl-codesum", {"splits": ["valid", "test"]}, ()),
    ("funcom", {}, ()),
    ("funcom", {"splits": ["test"]}, ()),
    ("advtest", {}, ()),
    ("advtest", {"splits": ["test"]}, ()),
    *((f"csn-{lang}", {}, ()) for lang in ("go", "java", "javascript", "php", "python", "ruby")),
    ("csn-ruby", {"splits": ["test"]}, ()),
    *((f"csn-filtered-{lang}", {}, ()) for lang in ("go", "java", "javascript", "php", "python", "ruby")),
    ("csn-filtered-ruby", {"splits": ["test", "codebase"]}, ()),
    ("csn-filtered-go", {}, tuple(f"dataset/go/{s}.jsonl" for s in ("train", "valid", "test", "codebase"))),
    ("csn-filtered-go", {}, ("dataset/go/test.jsonl", "dataset/go/codebase.jsonl")),
]


def test_every_release_with_a_reader_is_covered():
    assert {name for name, _, _ in CASES} == {spec.name for spec in RELEASES if spec.reader is not None}
    assert all(spec.needs is not None for spec in RELEASES if spec.reader is not None)


@pytest.mark.parametrize(("name", "options", "present"), CASES, ids=lambda v: str(v) if v else "-")
def test_download_needs_exactly_the_files_the_reader_reads(name, options, present, tmp_path):
    spec = DATASETS.get(name)
    raw, outside = tmp_path / "raw" / name, tmp_path / "outside"
    raw.mkdir(parents=True)
    options = {k: str(v).replace("OUTSIDE", str(outside)) if k == "file" else v for k, v in options.items()}
    options = {**spec.defaults, **options}
    for rel in present:
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_bytes(minimal_content(Path(rel).name))
    created = materialise(spec, options, raw, outside) | {str((raw / rel).resolve()) for rel in present}
    (raw / "UNRELATED.txt").write_text("a file no reader reads\n")
    with opened_files() as opened:
        records = list(spec.reader(raw, options, SkipReport()))
    assert records == []
    read = {path for path in opened if path.startswith(str(raw.resolve())) or path.startswith(str(outside))}
    assert read == created


# --------------------------------------------------------------------------- the cases the issue names


def _with_pin(spec, path: str, data: bytes):
    """The spec with the file at ``path`` pinned to ``data`` (a stand-in for the real release file)."""
    files = tuple(
        dataclasses.replace(f, sha256=hashlib.sha256(data).hexdigest(), size=len(data)) if f.path == path else f
        for f in spec.files
    )
    return dataclasses.replace(spec, files=files)


def test_statcodesearch_needs_only_the_file_of_its_format(tmp_path, no_network):
    data = b'[{"ID": 1, "Comment": "plot the data", "Code": "plot(x)", "Label": "Visualization"}]\n'
    spec = _with_pin(DATASETS.get("statcodesearch"), "statcodesearch.json", data)
    (tmp_path / "statcodesearch").mkdir()
    (tmp_path / "statcodesearch" / "statcodesearch.json").write_bytes(data)
    manifest = fetch_dataset(spec, tmp_path, **OFFLINE)  # the default format, json: no test_statcodesearch.jsonl
    assert [e["path"] for e in manifest["files"]] == ["statcodesearch.json"]
    assert manifest["reads"]["statcodesearch.json"]["verified"] == "pinned checksum"

    with pytest.raises(DownloadError) as failed:  # format gecs: the Zenodo file and nothing else
        fetch_dataset(spec, tmp_path, options={"format": "gecs"}, **OFFLINE)
    assert "test_statcodesearch.jsonl" in str(failed.value) and "* statcodesearch.json" not in str(failed.value)
    (tmp_path / "statcodesearch" / "mine.jsonl").write_text('{"input": "a [CODESPLIT] b", "target": 1}\n')
    mine = fetch_dataset(spec, tmp_path, options={"format": "gecs", "file": "mine.jsonl"}, **OFFLINE)
    assert list(mine["reads"]) == ["mine.jsonl"] and mine["reads"]["mine.jsonl"]["source"] == "placed by hand"


def _ruby_jsonl(shared_data: Path, raw: Path, splits: tuple[str, ...]) -> None:
    base = raw / "csn-filtered-ruby" / "dataset" / "ruby"
    base.mkdir(parents=True, exist_ok=True)
    for split in splits:
        source = shared_data / "codesearchnet" / "ruby" / f"{split}.jsonl"
        (base / f"{split}.jsonl").write_bytes(source.read_bytes() if source.is_file() else b"")


def test_csn_filtered_needs_no_language_zip_where_the_jsonl_files_are(shared_data, tmp_path, no_network):
    """The 111 MB ruby.zip (and both kits) were required although the reader reads the jsonl files."""
    _ruby_jsonl(shared_data, tmp_path, ("train", "valid", "test", "codebase"))  # test / valid: the real ones
    manifest = fetch_dataset(DATASETS.get("csn-filtered-ruby"), tmp_path, **OFFLINE)
    assert sorted(manifest["reads"]) == [f"dataset/ruby/{s}.jsonl" for s in ("codebase", "test", "train", "valid")]
    assert manifest["reads"]["dataset/ruby/test.jsonl"]["verified"] == "pinned checksum"
    assert manifest["files"] == [] or all(e["path"].startswith("dataset/") for e in manifest["files"])
    assert not (tmp_path / "csn-filtered-ruby" / "ruby").exists()


def test_a_kit_folder_is_not_taken_as_placed_by_hand_because_other_files_sit_in_it(
    shared_data, tmp_path, no_network
):
    """dataset/ holding the test / valid jsonl is not the kits' extracted content: the train and
    codebase URL lists are still missing, and the error names the kits they come from."""
    _ruby_jsonl(shared_data, tmp_path, ("valid", "test"))
    with pytest.raises(DownloadError) as failed:
        fetch_dataset(DATASETS.get("csn-filtered-ruby"), tmp_path, **OFFLINE)
    message = str(failed.value)
    assert "codexglue-code-to-text-dataset.zip" in message and "graphcodebert-codesearch-dataset.zip" in message
    assert "dataset/ruby/train.txt" in message and "dataset/ruby/codebase.txt" in message
    assert "ruby.zip" in message  # the URL lists are applied to the official release
    recorded = json.loads((tmp_path / "csn-filtered-ruby" / "MANIFEST.json").read_text())
    assert [e["path"] for e in recorded["files"]] == ["dataset/ruby/valid.jsonl", "dataset/ruby/test.jsonl"]
    assert recorded["complete"] is False


def test_csn_filtered_with_its_splits_option_needs_only_those(shared_data, tmp_path, no_network):
    _ruby_jsonl(shared_data, tmp_path, ("valid", "test"))
    options = {"splits": ["valid", "test"]}
    manifest = fetch_dataset(DATASETS.get("csn-filtered-ruby"), tmp_path, options=options, **OFFLINE)
    assert sorted(manifest["reads"]) == ["dataset/ruby/test.jsonl", "dataset/ruby/valid.jsonl"]


def test_advtest_needs_no_zip_where_the_derived_files_are_and_says_how_to_derive_them(tmp_path, no_network):
    spec = DATASETS.get("advtest")
    for split in ("train", "valid", "test"):
        path = tmp_path / "advtest" / "dataset" / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    manifest = fetch_dataset(spec, tmp_path, **OFFLINE)  # no python.zip (940 MB), no kit
    assert sorted(manifest["reads"]) == [f"dataset/{s}.jsonl" for s in ("test", "train", "valid")]

    with pytest.raises(DownloadError) as failed:  # none there: what the reader reads, and how to derive it
        fetch_dataset(spec, tmp_path / "elsewhere", options={"splits": ["test"]}, **OFFLINE)
    message = str(failed.value)
    assert "* dataset/test.jsonl" in message and "derived: the kit's preprocess.py" in message
    assert "python.zip" in message and "advtest-dataset.zip" in message and "dataset/train.jsonl" not in message


def test_csn_needs_only_the_part_files_of_the_splits_it_reads(tmp_path, no_network):
    parts = tmp_path / "csn-ruby" / "ruby" / "final" / "jsonl" / "test"
    parts.mkdir(parents=True)
    (parts / "ruby_test_0.jsonl.gz").write_bytes(gzip.compress(b""))
    (parts / "notes.txt").write_text("not read\n")
    manifest = fetch_dataset(DATASETS.get("csn-ruby"), tmp_path, options={"splits": ["test"]}, **OFFLINE)
    assert list(manifest["reads"]) == ["ruby/final/jsonl/test/ruby_test_0.jsonl.gz"]
    with pytest.raises(DownloadError, match=r"ruby/final/jsonl/train/"):
        fetch_dataset(DATASETS.get("csn-ruby"), tmp_path, **OFFLINE)


@pytest.fixture
def no_network(monkeypatch) -> None:
    import urllib.request

    def refuse(*args, **kwargs):
        raise AssertionError("the network was used")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
