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

from csbench.datasets.base import SPLITS, DatasetSpec, Record, RemoteFile, SkipReport
from csbench.datasets.releases._formats import RecordChecker, require_file, selected_splits
from csbench.datasets.releases.codesearchnet import read_csn_jsonl

NAME = "advtest"
_KIT = "https://github.com/microsoft/CodeXGLUE/raw/main/Text-Code/NL-code-search-Adv/dataset.zip"
_PYTHON_ZIP = (
    "https://s3.amazonaws.com/code-search-net/CodeSearchNet/v2/python.zip",
    "https://huggingface.co/datasets/code-search-net/code_search_net/resolve/main/data/python.zip",
    "https://zenodo.org/record/7857872/files/python.zip",
)
# ``function`` is the normalised code of valid / test; train has only ``code``.
CODE_KEYS = ("function", "code")


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
                "S3 first, then the Hugging Face and Zenodo 7857872 mirrors. Not pinned: no copy was available "
                "offline (Hugging Face records sha256 7223c6460bebfa85697b586da91e47bc5d64790a4d60bba5917106458ab6b40e)"
            ),
        ),
        RemoteFile(
            path="advtest-dataset.zip",
            urls=(_KIT,),
            sha256=None,
            extract=True,
            unpacks_to=("dataset/",),
            note=(
                "CodeXGLUE NL-code-search-Adv kit: unpacks to dataset/ with preprocess.py, which (run inside "
                "dataset/ with the unpacked python/ beside it) writes dataset/{train,valid,test}.jsonl. "
                "Not pinned: no copy was available offline"
            ),
        ),
        *(
            RemoteFile(
                path=f"dataset/{split}.jsonl",
                urls=(),
                sha256=None,
                note=(
                    "derived, not downloadable on its own: written by the kit's preprocess.py; not pinned "
                    "(shared/data holds only a 100-record sample of train)"
                ),
            )
            for split in SPLITS
        ),
    ),
    reader=read_advtest,
    expected_counts={"train": 251820, "valid": 9604, "test": 19210},
)
