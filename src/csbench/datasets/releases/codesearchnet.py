"""CodeSearchNet (Husain et al. 2019): the original release and the CodeXGLUE / GraphCodeBERT-filtered one.

``csn-{lang}``: the official zip per language, unpacked as
``{lang}/final/jsonl/{train,valid,test}/{lang}_{split}_{n}.jsonl.gz``.

``csn-filtered-{lang}``: the filtered variant GraphCodeBERT, COBE and the lexical-focus thesis use
(filters in COBE section II-A; sizes in COBE Table II). Its kits (CodeXGLUE code-to-text and
GraphCodeBERT code search ``dataset.zip``) hold URL lists plus a script that filters the original
zip into ``dataset/{lang}/{train,valid,test,codebase}.jsonl``. The reader reads those jsonl files;
where one is absent but its URL list ``dataset/{lang}/{split}.txt`` and the unpacked original zip
are present, it applies the list itself (same records, order of the original release).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import (
    POOL_SPLIT,
    SPLITS,
    DatasetSpec,
    Need,
    Reader,
    ReaderError,
    Record,
    RemoteFile,
    SkipReport,
    splits_option,
)
from csbench.datasets.releases._formats import (
    RecordChecker,
    iter_jsonl,
    iter_lines,
    make_record,
    missing,
    selected_splits,
    text_field,
)

LANGUAGES = ("go", "java", "javascript", "php", "python", "ruby")

CITATION = (
    "Husain, Wu, Gazit, Allamanis, Brockschmidt. CodeSearchNet Challenge: Evaluating the State of "
    "Semantic Code Search. arXiv:1909.09436, 2019."
)
FILTERED_CITATION = (
    "Guo et al. GraphCodeBERT: Pre-training Code Representations with Data Flow. ICLR 2021; "
    "Lu et al. CodeXGLUE: A Machine Learning Benchmark Dataset for Code Understanding and Generation. "
    "arXiv:2102.04664, 2021; data: " + CITATION
)
LICENCE = (
    "per source repository (CodeSearchNet kept only repositories whose licence permits redistribution; "
    "the {lang}_licenses.pkl of each zip lists them); corpus scripts MIT"
)
HOMEPAGE = "https://github.com/github/CodeSearchNet"

_S3 = "https://s3.amazonaws.com/code-search-net/CodeSearchNet/v2/{lang}.zip"
_HF = "https://huggingface.co/datasets/code-search-net/code_search_net/resolve/main/data/{lang}.zip"
_ZENODO = "https://zenodo.org/record/7857872/files/{lang}.zip"
_CODEXGLUE_KIT_PATH = "Code-Text/code-to-text/dataset.zip"
_CODEXGLUE_KIT = "https://github.com/microsoft/CodeXGLUE/raw/main/" + _CODEXGLUE_KIT_PATH
_GRAPHCODEBERT_KIT_PATH = "GraphCodeBERT/codesearch/dataset.zip"
_GRAPHCODEBERT_KIT = "https://github.com/microsoft/CodeBERT/raw/master/" + _GRAPHCODEBERT_KIT_PATH
# The commits the kits' git object ids (pinned below) were read at: microsoft/CodeXGLUE ac74a62 (the
# kit last changed in 90f11dc) and microsoft/CodeBERT c0de43d (last changed in 03631d3).
_CODEXGLUE_COMMIT = "ac74a62802a0dd159b3258c78a2df8ad36cdf2b9"
_CODEBERT_COMMIT = "c0de43d3aaf38e89290f1efb771f8de845e7a489"
CODEXGLUE_KIT_FILE = "codexglue-code-to-text-dataset.zip"
GRAPHCODEBERT_KIT_FILE = "graphcodebert-codesearch-dataset.zip"

# Bytes and SHA-256 of each S3 zip as recorded by Hugging Face's code_search_net dataset_infos.json.
# Not pinned as checksums: the zips are in no git repository, and no copy could be read here to verify them.
_ZIP_FACTS = {
    "go": (487525935, "15d23f01dc2796447e1736263e6830079289d5ef41f09988011afdcf8da6b6e5"),
    "java": (1060569153, "05f9204b1808413fab30f0e69229e298f6de4ad468279d53a2aa5797e3a78c17"),
    "javascript": (1664713350, "fdc743f5af27f90c77584a2d29e2b7f8cecdd00c37b433c385b888ee062936dd"),
    "php": (851894048, "c3bbf0d1b10010f88b058faea876f1f5471758399e30d58c11f78ff53660ce00"),
    "python": (940909997, "7223c6460bebfa85697b586da91e47bc5d64790a4d60bba5917106458ab6b40e"),
    "ruby": (111758028, "67aee5812d0f994df745c771c7791483f2b060561495747d424e307af4b342e6"),
}

# Records per split of the original release (Hugging Face code_search_net dataset_infos.json, which
# counts the jsonl.gz lines of the official zips).
ORIGINAL_COUNTS = {
    "go": {"train": 317832, "valid": 14242, "test": 14291},
    "java": {"train": 454451, "valid": 15328, "test": 26909},
    "javascript": {"train": 123889, "valid": 8253, "test": 6483},
    "php": {"train": 523712, "valid": 26015, "test": 28391},
    "python": {"train": 412178, "valid": 23107, "test": 22176},
    "ruby": {"train": 48791, "valid": 2209, "test": 2279},
}

# COBE Table II (= GraphCodeBERT code search README): train / val / test / codebase.
FILTERED_COUNTS = {
    "go": {"train": 167288, "valid": 7325, "test": 8122, POOL_SPLIT: 28120},
    "java": {"train": 164923, "valid": 5183, "test": 10955, POOL_SPLIT: 40347},
    "javascript": {"train": 58025, "valid": 3885, "test": 3291, POOL_SPLIT: 13981},
    "php": {"train": 241241, "valid": 12982, "test": 14014, POOL_SPLIT: 52660},
    "python": {"train": 251820, "valid": 13914, "test": 14918, POOL_SPLIT: 43827},
    "ruby": {"train": 24927, "valid": 1400, "test": 1261, POOL_SPLIT: 4360},
}

# SHA-256 of complete filtered files identical to copies in shared/data/codesearchnet/ruby/
# (CodeXGLUE code-to-text output of the filter).
_FILTERED_SHA256 = {
    ("ruby", "test"): "fb0b4bfdf5bcecea6ddcb31f53daf3bfa38f4db73d3ab6e820a20335c5ebd3c2",
    ("ruby", "valid"): "6e74a8e735963b6862a5ae1fc8d713644f4f0f44a60a4c9f1f7ae6e05c06b135",
}
_FILTERED_SIZE = {("ruby", "test"): 2905839, ("ruby", "valid"): 3075143}

_PART = re.compile(r"_(\d+)\.jsonl(\.gz)?$")


# --------------------------------------------------------------------------- shared record parsing


def csn_record(
    item: dict[str, Any],
    *,
    language: str,
    split: str,
    path: Path,
    line: int,
    report: SkipReport,
    code_keys: tuple[str, ...] = ("code",),
) -> Record | None:
    """A record from one CodeSearchNet-style json line, or None (counted in ``report``).

    query = ``" ".join(docstring_tokens)`` (as CodeBERT / GraphCodeBERT do); code = the first of
    ``code_keys`` present; docstring = ``docstring``; id = url."""
    code_key = next((key for key in code_keys if item.get(key) is not None), code_keys[0])
    absent = missing(item, (code_key, "url") if split == POOL_SPLIT else (code_key, "docstring_tokens", "url"))
    if absent:
        report.skip(f"missing field {absent!r}", path, line)
        return None
    code = item[code_key]
    if not isinstance(code, str):
        report.skip(f"{code_key!r} is not a string", path, line)
        return None
    query = text_field(item, "docstring_tokens")
    if query is None:
        if split != POOL_SPLIT or item.get("docstring_tokens") is not None:
            report.skip("'docstring_tokens' is not a token list", path, line)
            return None
        query = ""
    docstring = item.get("docstring")
    return make_record(
        id=item["url"],
        language=item.get("language") or language,
        query=query.strip(),
        code=code,
        func_name=item.get("func_name"),
        repo=item.get("repo"),
        path=item.get("path"),
        url=item["url"],
        split=split,
        docstring=docstring if isinstance(docstring, str) else "",
    )


def read_csn_jsonl(
    path: Path,
    *,
    dataset: str,
    language: str,
    split: str,
    report: SkipReport,
    checker: RecordChecker,
    code_keys: tuple[str, ...] = ("code",),
) -> Iterator[Record]:
    """Stream the checked records of one CodeSearchNet-style jsonl(.gz) file."""
    for line, item in iter_jsonl(path, report):
        record = csn_record(
            item,
            language=language,
            split=split,
            path=path,
            line=line,
            report=report,
            code_keys=code_keys,
        )
        if record is not None and checker.ok(record, path, line):
            yield record


def original_parts(raw_dir: Path, language: str, split: str, dataset: str) -> list[Path]:
    """The ``{lang}_{split}_{n}.jsonl.gz`` files of one split of an unpacked official zip, by n."""
    directory = Path(raw_dir) / language / "final" / "jsonl" / split
    if not directory.is_dir():
        raise ReaderError(
            f"{directory}: missing directory of dataset {dataset!r} (the unpacked {language}.zip of the "
            f"CodeSearchNet release); `csbench download --dataset {dataset}` fetches it, or unzip "
            f"{_S3.format(lang=language)} into {raw_dir} by hand"
        )
    parts = [p for p in directory.iterdir() if p.is_file() and _PART.search(p.name)]
    if not parts:
        raise ReaderError(f"{directory}: no {language}_{split}_N.jsonl.gz files in it (dataset {dataset!r})")
    return sorted(parts, key=lambda p: int(_PART.search(p.name).group(1)))  # type: ignore[union-attr]


# --------------------------------------------------------------------------- csn-{lang}


def _parts_need(language: str, split: str) -> Need:
    """The ``{lang}_{split}_N.jsonl.gz`` files of one split of the unpacked official zip."""
    return Need(f"{language}/final/jsonl/{split}/", sources=(f"{language}.zip",), pattern=_PART.pattern)


def _original_needs(language: str, dataset: str) -> Callable[[dict[str, Any], Path], tuple[Need, ...]]:
    def needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
        """The part files of each split read, from the official zip."""
        return tuple(_parts_need(language, split) for split in selected_splits(options, SPLITS, dataset))

    return needs


def _original_reader(language: str, dataset: str) -> Reader:
    def read(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
        """Records of the official CodeSearchNet release for one language (all splits, streamed)."""
        checker = RecordChecker(report)
        for split in selected_splits(options, SPLITS, dataset):
            for part in original_parts(raw_dir, language, split, dataset):
                yield from read_csn_jsonl(
                    part, dataset=dataset, language=language, split=split, report=report, checker=checker
                )

    read.__name__ = f"read_{dataset.replace('-', '_')}"
    return read


def _zip_file(language: str) -> RemoteFile:
    size, hf_sha = _ZIP_FACTS[language]
    return RemoteFile(
        path=f"{language}.zip",
        urls=(_S3.format(lang=language), _HF.format(lang=language), _ZENODO.format(lang=language)),
        sha256=None,
        size=size,
        extract=True,
        note=(
            f"unpacks to {language}/final/jsonl/{{train,valid,test}}/{language}_{{split}}_N.jsonl.gz plus "
            f"{language}_dedupe_definitions_v2.pkl and {language}_licenses.pkl. Official S3 bucket first (403 for "
            "many users); mirrors: the Hugging Face code-search-net/code_search_net repository's data/ folder and "
            "Zenodo record 7857872 (used by CodeXGLUE's code-to-text instructions). Not pinned: the zip is in no "
            "git repository, and no copy could be read here (Hugging Face's dataset_infos.json records sha256 "
            f"{hf_sha} for the S3 zip, not verified here). "
        ),
    )


def original_spec(language: str) -> DatasetSpec:
    """``csn-{language}``: the official CodeSearchNet release for one language."""
    name = f"csn-{language}"
    return DatasetSpec(
        name=name,
        kind="release",
        languages=(language,),
        description=(
            f"CodeSearchNet corpus, {language}: documented functions with the official train/valid/test split "
            "(query = docstring tokens joined by spaces, as CodeBERT does)"
        ),
        licence=LICENCE.format(lang=language),
        citation=CITATION,
        homepage=HOMEPAGE,
        splits=SPLITS,
        files=(_zip_file(language),),
        reader=_original_reader(language, name),
        needs=_original_needs(language, name),
        options=(splits_option(SPLITS),),
        expected_counts=dict(ORIGINAL_COUNTS[language]),
    )


# --------------------------------------------------------------------------- csn-filtered-{lang}

FILTERED_SPLITS = (*SPLITS, POOL_SPLIT)


def _read_url_list(path: Path, report: SkipReport) -> set[str]:
    return {text.strip() for _, text in iter_lines(path, report)}


def _filtered_needs(language: str, dataset: str) -> Callable[[dict[str, Any], Path], tuple[Need, ...]]:
    def needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
        """Per split read, as the reader chooses: ``dataset/{lang}/{split}.jsonl`` where present; else
        its URL list ``{split}.txt`` (from a kit) and the part files of the official zip."""
        base = Path(raw_dir) / "dataset" / language
        found: list[Need] = []
        by_list = False
        for split in selected_splits(options, FILTERED_SPLITS, dataset):
            if (base / f"{split}.jsonl").is_file():
                found.append(Need(f"dataset/{language}/{split}.jsonl"))
                continue
            kits = (GRAPHCODEBERT_KIT_FILE,) if split == POOL_SPLIT else (CODEXGLUE_KIT_FILE, GRAPHCODEBERT_KIT_FILE)
            found.append(Need(f"dataset/{language}/{split}.txt", sources=kits))
            by_list = True
        if by_list:  # a URL list is applied to every split of the release
            found.extend(_parts_need(language, split) for split in SPLITS)
        return tuple(found)

    return needs


def _filtered_reader(language: str, dataset: str) -> Reader:
    def read(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
        """Records of the filtered CodeSearchNet for one language: ``dataset/{lang}/{split}.jsonl``,
        or the URL list ``dataset/{lang}/{split}.txt`` applied to the unpacked original zip."""
        raw_dir = Path(raw_dir)
        base = raw_dir / "dataset" / language
        checker = RecordChecker(report)
        by_list: dict[str, str] = {}  # url -> split, for splits read through their URL lists
        list_splits: list[str] = []
        for split in selected_splits(options, FILTERED_SPLITS, dataset):
            jsonl, url_list = base / f"{split}.jsonl", base / f"{split}.txt"
            if jsonl.is_file():
                yield from read_csn_jsonl(
                    jsonl, dataset=dataset, language=language, split=split, report=report, checker=checker
                )
            elif url_list.is_file():
                list_splits.append(split)
                for url in _read_url_list(url_list, report):
                    by_list.setdefault(url, split)
            else:
                raise ReaderError(
                    f"{jsonl}: missing file of dataset {dataset!r}; `csbench download --dataset {dataset}` fetches "
                    f"the filter kits and the {language}.zip release, and `bash run.sh` inside dataset/ writes it "
                    f"(or the URL list {url_list.name} next to it lets csbench filter the release itself)"
                )
        if not list_splits:
            return
        found = dict.fromkeys(list_splits, 0)
        for part_split in SPLITS:
            for part in original_parts(raw_dir, language, part_split, dataset):
                for line, item in iter_jsonl(part, report):
                    split = by_list.get(item.get("url"))  # type: ignore[arg-type]
                    if split is None:
                        continue
                    found[split] += 1
                    record = csn_record(item, language=language, split=split, path=part, line=line, report=report)
                    if record is not None and checker.ok(record, part, line):
                        yield record
        listed = {split: 0 for split in list_splits}
        for split in by_list.values():
            listed[split] += 1
        for split in list_splits:
            for _ in range(listed[split] - found[split]):
                report.skip("listed url not in the original release", base / f"{split}.txt")

    read.__name__ = f"read_{dataset.replace('-', '_')}"
    return read


def _filtered_files(language: str) -> tuple[RemoteFile, ...]:
    files = [
        _zip_file(language),
        RemoteFile(
            path=CODEXGLUE_KIT_FILE,
            urls=(
                f"https://github.com/microsoft/CodeXGLUE/raw/{_CODEXGLUE_COMMIT}/{_CODEXGLUE_KIT_PATH}",
                _CODEXGLUE_KIT,
            ),
            sha256=None,
            pins=("git-blob:4a9e2be266988cb5fe0c27fa1e0e52cc59587ded",),
            extract=True,
            unpacks_to=("dataset/",),
            note=(
                "CodeXGLUE code-to-text filter kit: unpacks to dataset/{lang}/{train,valid,test}.txt (the URLs kept "
                "by the filter) and dataset/preprocess.py. Pinned by its git object id at microsoft/CodeXGLUE commit "
                "ac74a62 (Code-Text/code-to-text/dataset.zip); sha256 not pinned: the blob, 4 MiB or more, was not "
                "in the snapshot read"
            ),
        ),
        RemoteFile(
            path=GRAPHCODEBERT_KIT_FILE,
            urls=(
                f"https://github.com/microsoft/CodeBERT/raw/{_CODEBERT_COMMIT}/{_GRAPHCODEBERT_KIT_PATH}",
                _GRAPHCODEBERT_KIT,
            ),
            sha256=None,
            pins=("git-blob:e229c0247430feeb5a3c0f22ffd7acbe3b2165f4",),
            extract=True,
            unpacks_to=("dataset/",),
            note=(
                "GraphCodeBERT code-search kit (same filter, plus the retrieval pool): unpacks to dataset/ with "
                "{lang}/{train,valid,test,codebase}.txt and run.sh, which writes "
                "dataset/{lang}/{train,valid,test,codebase}.jsonl. Pinned by its git object id at microsoft/CodeBERT "
                "commit c0de43d (GraphCodeBERT/codesearch/dataset.zip, last changed in 03631d3); sha256 not pinned: "
                "the blob, 4 MiB or more, was not in the snapshot read"
            ),
        ),
    ]
    for split in FILTERED_SPLITS:
        sha = _FILTERED_SHA256.get((language, split))
        files.append(
            RemoteFile(
                path=f"dataset/{language}/{split}.jsonl",
                urls=(),
                sha256=sha,
                size=_FILTERED_SIZE.get((language, split)),
                note=(
                    "derived, not downloadable on its own: written by the kits' preprocessing (run.sh / "
                    "preprocess.py) from the official zip; "
                    + (
                        "sha256 of the CodeXGLUE code-to-text output (identical copy in shared/data)"
                        if sha
                        else "Not pinned: no repository holds the derived file, and no copy could be read here. "
                    )
                ),
            )
        )
    return tuple(files)


def filtered_spec(language: str) -> DatasetSpec:
    """``csn-filtered-{language}``: the CodeXGLUE / GraphCodeBERT-filtered CodeSearchNet with its pool."""
    name = f"csn-filtered-{language}"
    return DatasetSpec(
        name=name,
        kind="release",
        languages=(language,),
        description=(
            f"CodeSearchNet {language} filtered as in CodeXGLUE / GraphCodeBERT (parsable code, 3-256 docstring "
            "tokens, no URLs or HTML, English), with GraphCodeBERT's retrieval pool as split 'codebase'; "
            "a query's correct code is the codebase record with the same url"
        ),
        licence=LICENCE.format(lang=language) + "; kits: MIT (CodeXGLUE, CodeBERT repositories)",
        citation=FILTERED_CITATION,
        homepage="https://github.com/microsoft/CodeBERT/tree/master/GraphCodeBERT/codesearch",
        splits=FILTERED_SPLITS,
        files=_filtered_files(language),
        reader=_filtered_reader(language, name),
        needs=_filtered_needs(language, name),
        options=(splits_option(FILTERED_SPLITS),),
        expected_counts=dict(FILTERED_COUNTS[language]),
    )


ORIGINAL = tuple(original_spec(language) for language in LANGUAGES)
FILTERED = tuple(filtered_spec(language) for language in LANGUAGES)
