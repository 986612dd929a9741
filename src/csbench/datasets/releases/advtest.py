"""CodeXGLUE NL-code-search-Adv (AdvTest): Python CodeSearchNet re-filtered, with normalised test code.

The CodeXGLUE kit (``dataset.zip``: URL lists and ``preprocess.py``) filters the official
``python.zip`` into ``dataset/{train,valid,test}.jsonl``. In valid and test the code is normalised
(function name ``Func``, parameters and locals ``arg_i``) and stored as ``function`` /
``function_tokens`` instead of ``code`` / ``code_tokens``; the reader keeps that normalised code.
Splits 251,820 / 9,604 / 19,210 (CodeXGLUE README). The retrieval protocol ``advtest`` ranks every
test query against the test set itself, so there is no separate pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from csbench.datasets.base import SPLITS, DatasetSpec, Need, Record, RemoteFile, SkipReport, splits_option
from csbench.datasets.releases._formats import RecordChecker, require_file, selected_splits
from csbench.datasets.releases.codesearchnet import read_csn_jsonl

NAME = "advtest"
_KIT_PATH = "Text-Code/NL-code-search-Adv/dataset.zip"
# microsoft/CodeXGLUE: 4874f3e last changed the kit (git object id pinned below); ac74a62, the newest
# commit read, holds the same blob.
_KIT_COMMIT = "ac74a62802a0dd159b3258c78a2df8ad36cdf2b9"
_KIT = "https://github.com/microsoft/CodeXGLUE/raw/main/" + _KIT_PATH
_PYTHON_ZIP = (
    "https://s3.amazonaws.com/code-search-net/CodeSearchNet/v2/python.zip",
    "https://huggingface.co/datasets/code-search-net/code_search_net/resolve/main/data/python.zip",
    "https://zenodo.org/record/7857872/files/python.zip",
)
# ``function`` is the normalised code of valid / test; train has only ``code``.
CODE_KEYS = ("function", "code")


DERIVE = (
    "the kit's preprocess.py writes dataset/{train,valid,test}.jsonl from the unpacked python.zip: in "
    "data/raw/advtest/dataset/, `ln -s ../python python` (the copy csbench unpacked; the kit expects it there), "
    "then `python preprocess.py` (CodeXGLUE's README, NL-code-search-Adv)"
)


def advtest_needs(options: dict[str, Any], raw_dir: Path) -> tuple[Need, ...]:
    """``dataset/<split>.jsonl`` of each split read: derived by the kit's script from python.zip."""
    return tuple(
        Need(f"dataset/{split}.jsonl", sources=("python.zip", "advtest-dataset.zip"), derive=DERIVE)
        for split in selected_splits(options, SPLITS, NAME)
    )


def read_advtest(raw_dir: Path, options: dict[str, Any], report: SkipReport) -> Iterator[Record]:
    """Records of ``dataset/{train,valid,test}.jsonl`` (query = docstring tokens joined, id = url)."""
    checker = RecordChecker(report)
    for split in selected_splits(options, SPLITS, NAME):
        path = require_file(raw_dir, f"dataset/{split}.jsonl", NAME, _KIT + " (then run its preprocess.py)")
        yield from read_csn_jsonl(
            path, dataset=NAME, language="python", split=split, report=report, checker=checker, code_keys=CODE_KEYS
        )


SPEC = DatasetSpec(
    name=NAME,
    kind="release",
    languages=("python",),
    description=(
        "CodeXGLUE AdvTest: Python CodeSearchNet re-filtered; in valid and test the function name is Func and "
        "parameters / locals are arg_i (API and attribute names and literals kept)"
    ),
    licence="C-UDA (Computational Use of Data Agreement), as CodeXGLUE; code under its repositories' licences",
    citation=(
        "Lu et al. CodeXGLUE: A Machine Learning Benchmark Dataset for Code Understanding and Generation. "
        "arXiv:2102.04664, 2021."
    ),
    homepage="https://github.com/microsoft/CodeXGLUE/tree/main/Text-Code/NL-code-search-Adv",
    splits=SPLITS,
    files=(
        RemoteFile(
            path="python.zip",
            urls=_PYTHON_ZIP,
            sha256=None,
            size=940909997,
            extract=True,
            note=(
                "the official CodeSearchNet python zip the kit filters (unpacks to python/final/jsonl/...); "
                "S3 first, then the Hugging Face and Zenodo 7857872 mirrors. Not pinned: it is in no git "
                "repository, and no copy could be read here (Hugging Face's dataset_infos.json records sha256 "
                "7223c6460bebfa85697b586da91e47bc5d64790a4d60bba5917106458ab6b40e, not verified here). "
            ),
        ),
        RemoteFile(
            path="advtest-dataset.zip",
            urls=(f"https://github.com/microsoft/CodeXGLUE/raw/{_KIT_COMMIT}/{_KIT_PATH}", _KIT),
            sha256=None,
            pins=("git-blob:42715ad1bc0a134ba7cda59fef11de6d01520f1d",),
            extract=True,
            unpacks_to=("dataset/",),
            note=(
                "CodeXGLUE NL-code-search-Adv kit: unpacks to dataset/ with preprocess.py, which (run inside "
                "dataset/ with the unpacked python/ there) writes dataset/{train,valid,test}.jsonl. Pinned by its "
                "git object id at microsoft/CodeXGLUE commit ac74a62 (Text-Code/NL-code-search-Adv/dataset.zip, "
                "last changed in 4874f3e); sha256 not pinned: the blob, 4 MiB or more, was not in the snapshot read"
            ),
        ),
        *(
            RemoteFile(
                path=f"dataset/{split}.jsonl",
                urls=(),
                sha256=None,
                note=(
                    "derived, not downloadable on its own: written by the kit's preprocess.py. Not pinned: no "
                    "repository holds the derived file (shared/data holds only a 100-record sample of train). "
                ),
            )
            for split in SPLITS
        ),
    ),
    reader=read_advtest,
    needs=advtest_needs,
    options=(splits_option(SPLITS),),
    expected_counts={"train": 251820, "valid": 9604, "test": 19210},
)
