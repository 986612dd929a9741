"""CoSQA (Huang et al. 2021): real Bing web queries paired with Python functions, labelled by humans.

Three datasets from two releases:

``cosqa``
    CodeXGLUE NL-code-search-WebQuery ``CoSQA/cosqa-{train,dev}.json`` (20,000 / 604 labelled pairs).
    Only label-1 pairs become records; label-0 pairs are counted as "negative pair".
    :func:`csbench.datasets.releases._formats.read_labelled_pairs` gives all pairs with labels.
``cosqa-retrieval``
    CoCLR ``data/search``: ``cosqa-retrieval-{dev,test}-500.json`` queries whose ``retrieval_idx``
    points into ``code_idx_map.txt`` (a JSON object code -> index, 6,267 functions). The pool becomes
    split ``codebase`` with url ``cosqa://code/<index>``; each query gets the url of its code.
``cosqa-webquerytest``
    CodeXGLUE ``data/test_webquery.json``: 1,046 query-code pairs whose labels CodeXGLUE keeps for
    its leaderboard (the public answers file holds 5 example lines). Every pair is a record; give
    ``options["labels"]`` (a file of ``idx<TAB>label`` lines) to keep only label-1 pairs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import POOL_SPLIT, DatasetSpec, ReaderError, Record, RemoteFile, SkipReport
from csbench.datasets.releases._formats import (
    RecordChecker,
    iter_json_array,
    iter_json_object,
    iter_lines,
    make_record,
    missing,
    require_file,
    selected_splits,
)

CITATION = (
    "Huang, Tang, Shou, Gong, Xu, Jiang, Zhou, Duan. CoSQA: 20,000+ Web Queries for Code Search and Question "
    "Answering. ACL 2021."
)
LICENCE = "C-UDA (Computational Use of Data Agreement); CoCLR code MIT"
_CODEXGLUE = "https://raw.githubusercontent.com/microsoft/CodeXGLUE/main/Text-Code/NL-code-search-WebQuery/"
_COCLR = "https://raw.githubusercontent.com/Jun-jie-Huang/CoCLR/main/data/"
_HF = "https://huggingface.co/datasets/gonglinyuan/CoSQA/resolve/main/"


def pool_url(index: int | str) -> str:
    """The synthetic url shared by a CoSQA pool function and the queries it answers."""
    return f"cosqa://code/{index}"


def _pair_record(
    item: Any, path: Path, line: int, split: str, report: SkipReport, *, require_label: bool = True
) -> tuple[Record, Any] | None:
    """(record, label) of one CoSQA-style pair, or None (counted) when it is malformed."""
    if not isinstance(item, dict):
        report.skip("not a JSON object", path, line)
        return None
    absent = missing(item, ("idx", "doc", "code", "label") if require_label else ("idx", "doc", "code"))
    if absent:
        report.skip(f"missing field {absent!r}", path, line)
        return None
    if not isinstance(item["doc"], str) or not isinstance(item["code"], str):
        report.skip("'doc' or 'code' is not a string", path, line)
        return None
    docstring = item.get("docstring_tokens")
    record = make_record(
        id=item["idx"],
        language="python",
        query=item["doc"].strip(),
        code=item["code"],
        split=split,
        url=f"cosqa://pair/{item['idx']}",
        docstring=docstring if isinstance(docstring, str) else "",
    )
    return record, item.get("label")


# --------------------------------------------------------------------------- cosqa

PAIR_FILES = {"train": "cosqa-train.json", "valid": "cosqa-dev.json"}


def read_cosqa(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """Label-1 pairs of ``cosqa-train.json`` (train) and ``cosqa-dev.json`` (valid)."""
    checker = RecordChecker(report)
    for split in selected_splits(options, PAIR_FILES, "cosqa"):
        path = require_file(raw_dir, PAIR_FILES[split], "cosqa", _CODEXGLUE + "CoSQA/" + PAIR_FILES[split])
        for line, item in iter_json_array(path, report):
            parsed = _pair_record(item, path, line, split, report)
            if parsed is None:
                continue
            record, label = parsed
            if label == 0:
                report.skip("negative pair", path, line)
            elif label != 1 or isinstance(label, bool):
                report.skip("label is not 0 or 1", path, line, repr(label))
            elif checker.ok(record, path, line):
                yield record


COSQA = DatasetSpec(
    name="cosqa",
    kind="release",
    languages=("python",),
    description=(
        "CoSQA query-code pairs (CodeXGLUE NL-code-search-WebQuery): 20,000 train / 604 dev pairs with human "
        "match labels; records are the label-1 pairs (dev: 313 of 604), label-0 pairs are counted as negatives"
    ),
    licence=LICENCE,
    citation=CITATION,
    homepage="https://github.com/microsoft/CodeXGLUE/tree/main/Text-Code/NL-code-search-WebQuery",
    splits=("train", "valid"),
    files=(
        RemoteFile(
            path="cosqa-train.json",
            urls=(_CODEXGLUE + "CoSQA/cosqa-train.json", _COCLR + "qa/cosqa-train.json", _HF + "cosqa-train.json"),
            sha256=None,
            note=(
                "JSON array of {idx, doc, code, code_tokens, docstring_tokens, label}; CodeXGLUE first, then the "
                "CoCLR repository's copy and the Hugging Face gonglinyuan/CoSQA mirror. Not pinned: no copy was "
                "available offline"
            ),
        ),
        RemoteFile(
            path="cosqa-dev.json",
            urls=(_CODEXGLUE + "CoSQA/cosqa-dev.json", _COCLR + "qa/cosqa-dev.json", _HF + "cosqa-dev.json"),
            sha256="247d48d6072f122cdd16b38974d50bc3253d80d42c3ca89790df3a7a28627cad",
            size=400120,
            note="sha256 of the identical copy in shared/data/cosqa",
        ),
    ),
    reader=read_cosqa,
)


# --------------------------------------------------------------------------- cosqa-retrieval

POOL_FILE = "code_idx_map.txt"
QUERY_FILES = {"valid": "cosqa-retrieval-dev-500.json", "test": "cosqa-retrieval-test-500.json"}


def read_cosqa_retrieval(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """The 6,267-function pool (split ``codebase``) and the dev / test queries pointing into it."""
    checker = RecordChecker(report)
    splits = selected_splits(options, ("valid", "test", POOL_SPLIT), "cosqa-retrieval")
    pool: set[int] | None = None
    if POOL_SPLIT in splits:
        pool = set()
        path = require_file(raw_dir, POOL_FILE, "cosqa-retrieval", _COCLR + "search/" + POOL_FILE)
        for line, code, index in iter_json_object(path, report):
            if isinstance(index, bool) or not isinstance(index, int):
                report.skip("pool index is not an integer", path, line, repr(index))
                continue
            record = make_record(
                id=f"cosqa-code-{index}", language="python", code=code, url=pool_url(index), split=POOL_SPLIT
            )
            if checker.ok(record, path, line):
                pool.add(index)
                yield record
    for split in splits:
        if split == POOL_SPLIT:
            continue
        path = require_file(raw_dir, QUERY_FILES[split], "cosqa-retrieval", _COCLR + "search/" + QUERY_FILES[split])
        for line, item in iter_json_array(path, report):
            parsed = _pair_record(item, path, line, split, report)
            if parsed is None:
                continue
            record, label = parsed
            if label != 1 or isinstance(label, bool):
                report.skip("negative pair" if label == 0 else "label is not 0 or 1", path, line)
                continue
            index = item.get("retrieval_idx")
            if isinstance(index, bool) or not isinstance(index, int):
                report.skip("missing field 'retrieval_idx'", path, line)
                continue
            if pool is not None and index not in pool:
                report.skip("retrieval_idx not in the pool", path, line, str(index))
                continue
            record["url"] = pool_url(index)
            if checker.ok(record, path, line):
                yield record


COSQA_RETRIEVAL = DatasetSpec(
    name="cosqa-retrieval",
    kind="release",
    languages=("python",),
    description=(
        "CoSQA code retrieval (CoCLR): 500 dev and 500 test web queries, each answered by one function of a "
        "6,267-function pool (split 'codebase'); a query's correct code is the pool record with the same url"
    ),
    licence=LICENCE,
    citation=CITATION,
    homepage="https://github.com/Jun-jie-Huang/CoCLR",
    splits=("valid", "test", POOL_SPLIT),
    files=(
        RemoteFile(
            path=POOL_FILE,
            urls=(_COCLR + "search/" + POOL_FILE,),
            sha256="be8a910ca03cb9f1b38a0eba6dc8109eeb8040a40aaba1a467a7b8426d261f3f",
            size=2090564,
            note="JSON object {code: index}; sha256 of the identical copy in shared/data/cosqa",
        ),
        RemoteFile(
            path=QUERY_FILES["valid"],
            urls=(_COCLR + "search/" + QUERY_FILES["valid"],),
            sha256="ccdfffee7ae1f1cf1a0406566a61c984f4fbce678c8ea108eedd03d11bff9518",
            size=358032,
            note="JSON array with retrieval_idx; sha256 of the identical copy in shared/data/cosqa",
        ),
        RemoteFile(
            path=QUERY_FILES["test"],
            urls=(_COCLR + "search/" + QUERY_FILES["test"],),
            sha256=None,
            note="JSON array with retrieval_idx. Not pinned: no copy was available offline",
        ),
    ),
    reader=read_cosqa_retrieval,
    expected_counts={"valid": 500, "test": 500, POOL_SPLIT: 6267},
)


# --------------------------------------------------------------------------- cosqa-webquerytest

WEBQUERY_FILE = "test_webquery.json"


def _labels(path: Path, report: SkipReport) -> dict[str, int]:
    labels: dict[str, int] = {}
    for line, text in iter_lines(path, report):
        parts = text.split("\t")
        if len(parts) != 2 or parts[1].strip() not in ("0", "1"):
            raise ReaderError(f"{path}:{line}: expected 'idx<TAB>0|1'")
        labels[parts[0].strip()] = int(parts[1])
    return labels


def read_cosqa_webquerytest(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """The WebQueryTest pairs (split ``test``); with ``options["labels"]`` only label-1 pairs."""
    selected_splits(options, ("test",), "cosqa-webquerytest")
    path = require_file(raw_dir, WEBQUERY_FILE, "cosqa-webquerytest", _CODEXGLUE + "data/" + WEBQUERY_FILE)
    labels = None
    if options.get("labels"):
        labels_path = Path(options["labels"])
        if not labels_path.is_absolute():
            labels_path = Path(raw_dir) / labels_path
        if not labels_path.is_file():
            raise ReaderError(f"{labels_path}: labels file (options.labels) not found")
        labels = _labels(labels_path, report)
    checker = RecordChecker(report)
    for line, item in iter_json_array(path, report):
        parsed = _pair_record(item, path, line, "test", report, require_label=False)
        if parsed is None:
            continue
        record, _ = parsed
        if labels is not None:
            label = labels.get(record["id"])
            if label is None:
                report.skip("no label", path, line, record["id"])
                continue
            if label == 0:
                report.skip("negative pair", path, line)
                continue
        if checker.ok(record, path, line):
            yield record


COSQA_WEBQUERYTEST = DatasetSpec(
    name="cosqa-webquerytest",
    kind="release",
    languages=("python",),
    description=(
        "CodeXGLUE WebQueryTest: 1,046 Bing query / Python function pairs; the match labels are held by the "
        "CodeXGLUE leaderboard, so all pairs are records unless a labels file is given (options.labels)"
    ),
    licence=LICENCE,
    citation=CITATION,
    homepage="https://github.com/microsoft/CodeXGLUE/tree/main/Text-Code/NL-code-search-WebQuery",
    splits=("test",),
    files=(
        RemoteFile(
            path=WEBQUERY_FILE,
            urls=(_CODEXGLUE + "data/" + WEBQUERY_FILE, _COCLR + "qa/" + WEBQUERY_FILE),
            sha256=None,
            note=(
                "JSON array of {idx, doc, code}; CodeXGLUE first, then the CoCLR repository's copy. "
                "Not pinned: no copy was available offline"
            ),
        ),
    ),
    reader=read_cosqa_webquerytest,
    expected_counts={"test": 1046},
    defaults={"labels": None},
)
