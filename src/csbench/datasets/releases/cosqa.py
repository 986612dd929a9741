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
    ``test_webquery.json``: 1,046 query-code pairs with human match labels. CodeXGLUE's copy
    (``data/test_webquery.json``) has no ``label`` field (its leaderboard keeps the labels; its
    ``evaluator/webquery_answers.txt`` holds 5 example ``idx<TAB>label`` lines); the copy in the
    first commit of the CoCLR repository (``data/qa/test_webquery.json``, code with its newlines)
    carries ``label`` on every pair: 422 are 1, 624 are 0. Records are the label-1 pairs, the
    label of a pair coming from its ``label`` field or from ``options["labels"]`` (a file of
    ``idx<TAB>label`` lines, the format CodeXGLUE's evaluator reads); where both give a label they
    must agree (else :class:`ReaderError` naming both files, lines and the idx). Without any label
    (CodeXGLUE's copy, no labels file) every pair is a record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import (
    POOL_SPLIT,
    DatasetOption,
    DatasetSpec,
    Need,
    ReaderError,
    Record,
    RemoteFile,
    SkipReport,
    splits_option,
)
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
# Commits whose files the pins below were measured on (newest commits read of each repository).
_CODEXGLUE_COMMIT = "ac74a62802a0dd159b3258c78a2df8ad36cdf2b9"
_COCLR_COMMIT = "14ebcacf9e9bc3e7109102632bc63047876f27d2"
_COCLR_LABELLED_COMMIT = "778daa8aa9ac1dbee8839775edfce191d356861e"  # the one commit with data/qa/test_webquery.json
_CODEXGLUE_AT = f"https://raw.githubusercontent.com/microsoft/CodeXGLUE/{_CODEXGLUE_COMMIT}/Text-Code/NL-code-search-WebQuery/"
_COCLR_AT = f"https://raw.githubusercontent.com/Jun-jie-Huang/CoCLR/{_COCLR_COMMIT}/data/"


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


def cosqa_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """The pair file of each split read."""
    return tuple(Need(PAIR_FILES[split]) for split in selected_splits(options, PAIR_FILES, "cosqa"))


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
            urls=(
                _CODEXGLUE_AT + "CoSQA/cosqa-train.json",
                _CODEXGLUE + "CoSQA/cosqa-train.json",
                _COCLR + "qa/cosqa-train.json",
                _HF + "cosqa-train.json",
            ),
            sha256=None,
            pins=("git-blob:2a6097da0e2c714fd4b43176d6aaa7ae5eb58b89",),
            note=(
                "JSON array of {idx, doc, code, code_tokens, docstring_tokens, label}; CodeXGLUE first, then the "
                "CoCLR repository's copy and the Hugging Face gonglinyuan/CoSQA mirror. Pinned by its git object "
                "id, the same blob in microsoft/CodeXGLUE (commit ac74a62, Text-Code/NL-code-search-WebQuery/CoSQA/"
                "cosqa-train.json), Jun-jie-Huang/CoCLR (14ebcac, data/qa/) and drndr/gencodesearchnet (70db22a, "
                "data/clf/cosqa/); sha256 not pinned: the blob, 4 MiB or more, was in none of the snapshots read"
            ),
        ),
        RemoteFile(
            path="cosqa-dev.json",
            urls=(
                _CODEXGLUE_AT + "CoSQA/cosqa-dev.json",
                _CODEXGLUE + "CoSQA/cosqa-dev.json",
                _COCLR + "qa/cosqa-dev.json",
                _HF + "cosqa-dev.json",
            ),
            sha256="247d48d6072f122cdd16b38974d50bc3253d80d42c3ca89790df3a7a28627cad",
            size=400120,
            note=(
                "sha256 of the identical copy in shared/data/cosqa, and of the blobs at microsoft/CodeXGLUE commit "
                "ac74a62 (Text-Code/NL-code-search-WebQuery/CoSQA/cosqa-dev.json) and Jun-jie-Huang/CoCLR 14ebcac "
                "(data/qa/cosqa-dev.json)"
            ),
        ),
    ),
    reader=read_cosqa,
    needs=cosqa_needs,
    options=(splits_option(tuple(PAIR_FILES)),),
)


# --------------------------------------------------------------------------- cosqa-retrieval

POOL_FILE = "code_idx_map.txt"
QUERY_FILES = {"valid": "cosqa-retrieval-dev-500.json", "test": "cosqa-retrieval-test-500.json"}


def cosqa_retrieval_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """The pool file (split codebase) and the query file of each other split read."""
    splits = selected_splits(options, ("valid", "test", POOL_SPLIT), "cosqa-retrieval")
    return tuple(Need(POOL_FILE if split == POOL_SPLIT else QUERY_FILES[split]) for split in splits)


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
            urls=(_COCLR_AT + "search/" + POOL_FILE, _COCLR + "search/" + POOL_FILE),
            sha256="be8a910ca03cb9f1b38a0eba6dc8109eeb8040a40aaba1a467a7b8426d261f3f",
            size=2090564,
            note=(
                "JSON object {code: index}; sha256 of the identical copy in shared/data/cosqa and of the blob at "
                "Jun-jie-Huang/CoCLR commit 14ebcac (data/search/code_idx_map.txt)"
            ),
        ),
        RemoteFile(
            path=QUERY_FILES["valid"],
            urls=(_COCLR_AT + "search/" + QUERY_FILES["valid"], _COCLR + "search/" + QUERY_FILES["valid"]),
            sha256="ccdfffee7ae1f1cf1a0406566a61c984f4fbce678c8ea108eedd03d11bff9518",
            size=358032,
            note=(
                "JSON array with retrieval_idx; sha256 of the identical copy in shared/data/cosqa and of the blob at "
                "Jun-jie-Huang/CoCLR commit 14ebcac (data/search/cosqa-retrieval-dev-500.json)"
            ),
        ),
        RemoteFile(
            path=QUERY_FILES["test"],
            urls=(_COCLR_AT + "search/" + QUERY_FILES["test"], _COCLR + "search/" + QUERY_FILES["test"]),
            sha256="27d3552b2e7dd86cf9f9a0b3c135e6777d4faafa9c29fb1b9b01ece945974ad6",
            size=350937,
            note=(
                "JSON array with retrieval_idx (500 queries); sha256 of the blob at Jun-jie-Huang/CoCLR commit "
                "14ebcac (data/search/cosqa-retrieval-test-500.json)"
            ),
        ),
    ),
    reader=read_cosqa_retrieval,
    needs=cosqa_retrieval_needs,
    options=(splits_option(("valid", "test", POOL_SPLIT)),),
    expected_counts={"valid": 500, "test": 500, POOL_SPLIT: 6267},
)


# --------------------------------------------------------------------------- cosqa-webquerytest

WEBQUERY_FILE = "test_webquery.json"


def _labels(path: Path, report: SkipReport) -> dict[str, tuple[int, int]]:
    """idx -> (label, line) of a labels file of ``idx<TAB>0|1`` lines (CodeXGLUE's answers format)."""
    labels: dict[str, tuple[int, int]] = {}
    for line, text in iter_lines(path, report):
        parts = text.split("\t")
        if len(parts) != 2 or parts[1].strip() not in ("0", "1") or not parts[0].strip():
            raise ReaderError(f"{path}:{line}: expected 'idx<TAB>0|1', got {text!r}")
        idx = parts[0].strip()
        if idx in labels:
            raise ReaderError(f"{path}:{line}: idx {idx!r} labelled twice (first on line {labels[idx][1]})")
        labels[idx] = (int(parts[1]), line)
    return labels


def _file_label(item: Any) -> Any:
    """The pair's own ``label`` field as 0 / 1 (CodeXGLUE's reader takes ``str(label)``: ints or digit
    strings); None when absent; the raw value when it is something else."""
    if not isinstance(item, dict) or "label" not in item:
        return None
    label = item["label"]
    if isinstance(label, bool):
        return label
    if label in (0, 1, "0", "1"):
        return int(label)
    return label


def _has_file_labels(path: Path) -> bool:
    """Whether any pair of the data file carries a ``label`` field (a first streaming pass)."""
    return any(isinstance(item, dict) and "label" in item for _, item in iter_json_array(path, SkipReport()))


def webquerytest_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """The pairs file, and the labels file where ``options["labels"]`` names one."""
    selected_splits(options, ("test",), "cosqa-webquerytest")
    return (Need(WEBQUERY_FILE), *((Need(str(options["labels"])),) if options.get("labels") else ()))


def read_cosqa_webquerytest(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """The label-1 WebQueryTest pairs (split ``test``); every pair when no label is given anywhere.

    A pair's label is its ``label`` field, else its line of ``options["labels"]``; a labelled
    pair without a label is skipped as "no label", a label other than 0 / 1 as "label is not 0 or
    1", and a pair both label and disagree on raises :class:`ReaderError`."""
    selected_splits(options, ("test",), "cosqa-webquerytest")
    path = require_file(raw_dir, WEBQUERY_FILE, "cosqa-webquerytest", _CODEXGLUE + "data/" + WEBQUERY_FILE)
    labels_path: Path | None = None
    labels: dict[str, tuple[int, int]] = {}
    if options.get("labels"):
        labels_path = Path(options["labels"])
        if not labels_path.is_absolute():
            labels_path = Path(raw_dir) / labels_path
        if not labels_path.is_file():
            raise ReaderError(f"{labels_path}: labels file (options.labels) not found")
        labels = _labels(labels_path, report)
    labelled = labels_path is not None or _has_file_labels(path)
    checker = RecordChecker(report)
    for line, item in iter_json_array(path, report):
        parsed = _pair_record(item, path, line, "test", report, require_label=False)
        if parsed is None:
            continue
        record, _ = parsed
        own = _file_label(item)
        given = labels.get(record["id"])
        if own is not None and given is not None and own in (0, 1) and own != given[0]:
            raise ReaderError(
                f"{path}:{line}: idx {record['id']!r} is labelled {own} here but {given[0]} in {labels_path}:"
                f"{given[1]} (options.labels); remove one of the two or correct it"
            )
        label = own if own is not None else (given[0] if given is not None else None)
        if label is None:
            if labelled:
                report.skip("no label", path, line, record["id"])
                continue
        elif label not in (0, 1) or isinstance(label, bool):
            report.skip("label is not 0 or 1", path, line, repr(item.get("label")))
            continue
        elif label == 0:
            report.skip("negative pair", path, line)
            continue
        if checker.ok(record, path, line):
            yield record


COSQA_WEBQUERYTEST = DatasetSpec(
    name="cosqa-webquerytest",
    kind="release",
    languages=("python",),
    description=(
        "CodeXGLUE WebQueryTest: 1,046 Bing query / Python function pairs with human match labels (422 matches); "
        "records are the label-1 pairs, labels read from the file's label field (CoCLR's copy) or from a labels "
        "file (options.labels); CodeXGLUE's copy has none, and then every pair is a record"
    ),
    licence=LICENCE,
    citation=CITATION,
    homepage="https://github.com/microsoft/CodeXGLUE/tree/main/Text-Code/NL-code-search-WebQuery",
    splits=("test",),
    files=(
        RemoteFile(
            path=WEBQUERY_FILE,
            urls=(
                _CODEXGLUE_AT + "data/" + WEBQUERY_FILE,
                _CODEXGLUE + "data/" + WEBQUERY_FILE,
                f"https://raw.githubusercontent.com/Jun-jie-Huang/CoCLR/{_COCLR_LABELLED_COMMIT}/data/qa/{WEBQUERY_FILE}",
            ),
            sha256="a96ce5afe45c414251defac32b4af6c2a872c4ea3dc46f7c7c1f83eab142139f",
            pins=("sha256:7f255dac10e521ccc51a68caaa83a4ab064bb6617d40bbf39618144d5cdea933",),
            note=(
                "two published versions, both pinned: CodeXGLUE's JSON array of {idx, doc, code} (392,308 bytes; "
                "sha256 of the blob at microsoft/CodeXGLUE commit ac74a62, Text-Code/NL-code-search-WebQuery/data/"
                "test_webquery.json), and CoCLR's with a label on every pair and code with its newlines (695,178 "
                "bytes; sha256 of the blob at Jun-jie-Huang/CoCLR commit 778daa8, data/qa/test_webquery.json, "
                "deleted by the next commit)"
            ),
        ),
    ),
    reader=read_cosqa_webquerytest,
    needs=webquerytest_needs,
    # no expected_counts: 422 records with labels, 1,046 without (CodeXGLUE's unlabelled copy)
    options=(
        DatasetOption(
            "labels",
            "file",
            "a file of `idx<TAB>0|1` lines (CodeXGLUE's answers format): only label-1 pairs become records; "
            "where the data file has its own `label` field the two must agree",
        ),
    ),
)
