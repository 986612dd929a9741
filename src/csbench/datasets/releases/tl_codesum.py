"""TL-CodeSum (Hu et al. 2018): Java methods and their Javadoc summaries, already tokenised.

Repository layout ``data/{split}/{split}.token.code`` and ``.token.nl``: one ``id<TAB>tokens`` line
per method, the two files aligned line by line with equal ids. The reader streams both files in
lockstep; an id mismatch means the files are not aligned and raises :class:`ReaderError`.
Splits 69,708 / 8,714 / 8,714 (SPEC; thesis Table 2.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any

from csbench.datasets.base import SPLITS, DatasetSpec, Need, ReaderError, Record, RemoteFile, SkipReport, splits_option
from csbench.datasets.releases._formats import RecordChecker, make_record, require_file, selected_splits

NAME = "tl-codesum"
_COMMIT = "51b6849d18343605a2de94b12c75ab8a6f29b3ec"  # the commit of xing-hu/TL-CodeSum that added data/
_RAW = "https://raw.githubusercontent.com/xing-hu/TL-CodeSum/"

# SHA-256 and bytes of the blobs at _COMMIT (valid: identical to the copies in shared/data/tl_codesum);
# the same blobs at f2c176e, the newest commit read.
_SHA256 = {
    ("valid", "code"): ("e2f6a12244ea0f1078fc10ad3db3fce61bce3e0182e14b334e280475845d7477", 4063597),
    ("valid", "nl"): ("b5e729fd0f35f07a8c8ef32bd141b2c0db1a536021eed2b3db6bfaffc659508c", 873028),
    ("test", "code"): ("45200ca3034a13da30de45f65204d1ee315ddf2774718d1c2953f6b7de267eef", 4109556),
    ("test", "nl"): ("8423e91de9fabef049b350c58df4772539cc14b6a7b35129e9ef877cdf52efaa", 862021),
}
# Git object ids of the training files at _COMMIT (and f2c176e): the blobs, 4 MiB or more, were not in
# the snapshot read, so their sha256 is not known here.
_GIT_BLOB = {
    ("train", "code"): "d1e00f9ba1786415d27e29ec2204d5eb30e242b4",
    ("train", "nl"): "6705f7c3ee36a5325788a02c20ac0aa1e3317170",
}


def split_file(split: str, kind: str) -> str:
    """Path of one TL-CodeSum file inside the repository (and under data/raw/tl-codesum/)."""
    return f"data/{split}/{split}.token.{kind}"


def tl_codesum_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """The code and summary files of each split read."""
    return tuple(
        Need(split_file(split, kind)) for split in selected_splits(options, SPLITS, NAME) for kind in ("code", "nl")
    )


def read_tl_codesum(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """TL-CodeSum records: query = the summary tokens, code = the method tokens, id ``tl-codesum:<id>``.

    The two files are read raw line by raw line in lockstep, so a line that is not UTF-8 drops its
    pair (counted) without shifting the alignment of the following lines."""
    checker = RecordChecker(report)
    for split in selected_splits(options, SPLITS, NAME):
        code_path = require_file(raw_dir, split_file(split, "code"), NAME, _RAW + "master/" + split_file(split, "code"))
        nl_path = require_file(raw_dir, split_file(split, "nl"), NAME, _RAW + "master/" + split_file(split, "nl"))
        yield from _read_pair_files(code_path, nl_path, split, report, checker)


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, raw


def _decode(raw: bytes, path: Path, line: int, report: SkipReport) -> tuple[str | None, str] | None:
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as error:
        report.skip("non-UTF-8 bytes", path, line, f"byte {error.start}")
        return None
    ident, tab, tokens = text.partition("\t")
    return (ident.strip() if tab else None), tokens.strip()


def _read_pair_files(
    code_path: Path, nl_path: Path, split: str, report: SkipReport, checker: RecordChecker
) -> Iterator[Record]:
    for code_item, nl_item in zip_longest(_raw_lines(code_path), _raw_lines(nl_path)):
        if code_item is None or nl_item is None:
            longer, item = (nl_path, nl_item) if code_item is None else (code_path, code_item)
            raise ReaderError(
                f"{longer}:{item[0]}: {code_path.name} and {nl_path.name} have different numbers of lines "
                "(the files must be aligned line by line)"
            )
        (code_line, code_raw), (nl_line, nl_raw) = code_item, nl_item
        code = _decode(code_raw, code_path, code_line, report)
        nl = _decode(nl_raw, nl_path, nl_line, report)
        if code is None or nl is None:
            continue
        (code_id, code_tokens), (nl_id, nl_tokens) = code, nl
        if code_id is None or nl_id is None:
            bad_path, bad_line = (code_path, code_line) if code_id is None else (nl_path, nl_line)
            report.skip("missing field 'id' (no tab)", bad_path, bad_line)
            continue
        if code_id != nl_id:
            raise ReaderError(
                f"{code_path}:{code_line} and {nl_path}:{nl_line}: ids {code_id!r} and {nl_id!r} differ "
                "(the files must be aligned line by line)"
            )
        if not nl_tokens:
            report.skip("empty query", nl_path, nl_line)
            continue
        record = make_record(
            id=f"{NAME}:{code_id}",
            language="java",
            query=nl_tokens,
            code=code_tokens,
            url=f"{NAME}://{code_id}",
            split=split,
            docstring=nl_tokens,
        )
        if checker.ok(record, code_path, code_line):
            yield record


def _file(split: str, kind: str) -> RemoteFile:
    sha, size = _SHA256.get((split, kind), (None, None))
    blob = _GIT_BLOB.get((split, kind))
    relative = split_file(split, kind)
    if sha:
        pinned = f"sha256 of the blob at xing-hu/TL-CodeSum commit {_COMMIT[:7]} ({relative})"
        pinned += "; identical to the copy in shared/data/tl_codesum" if split == "valid" else ""
    else:
        pinned = (
            f"pinned by its git object id at xing-hu/TL-CodeSum commit {_COMMIT[:7]} ({relative}); sha256 not "
            "pinned: the blob, 4 MiB or more, was not in the snapshot read"
        )
    return RemoteFile(
        path=relative,
        urls=(_RAW + f"{_COMMIT}/{relative}", _RAW + f"master/{relative}"),
        sha256=sha,
        size=size,
        pins=(f"git-blob:{blob}",) if blob else (),
        note=f"id<TAB>tokens lines; {pinned}",
    )


SPEC = DatasetSpec(
    name=NAME,
    kind="release",
    languages=("java",),
    description="TL-CodeSum: Java methods and the first sentence of their Javadoc, tokenised and lower-cased",
    licence="not stated by its authors (research use)",
    citation=(
        "Hu, Li, Xia, Lo, Lu, Jin. Summarizing Source Code with Transferred API Knowledge. IJCAI 2018, pp. 2269-2275."
    ),
    homepage="https://github.com/xing-hu/TL-CodeSum",
    splits=SPLITS,
    files=tuple(_file(split, kind) for split in SPLITS for kind in ("code", "nl")),
    reader=read_tl_codesum,
    needs=tl_codesum_needs,
    options=(splits_option(SPLITS),),
    expected_counts={"train": 69708, "valid": 8714, "test": 8714},
)
