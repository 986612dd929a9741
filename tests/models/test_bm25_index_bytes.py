"""A BM25 index's saved files are the same bytes in every process (bm25s numbered the vocabulary from a
set, whose order follows each process's string hashing: two runs of one study wrote different index
arrays with the same scores); the scores are bitwise those of bm25s's own vocabulary."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import bm25s
import numpy as np
import pandas as pd
from corpora import local_functions

from csbench.code.tokens import standard_tokens, subtokens
from csbench.models.bm25 import BM25Retriever

QUERIES = ["read a file", "parse the arguments", "return the path of a module", "zzz unknown"]
SCRIPT = """
import hashlib, json, sys, tempfile
from pathlib import Path
sys.path[:0] = [{tests!r}, {root!r}]
from test_bm25_index_bytes import index_and_scores
folder = Path(tempfile.mkdtemp())
digest, scores = index_and_scores(folder)
print(json.dumps({{"files": digest, "scores": hashlib.sha256(scores.tobytes()).hexdigest()}}))
"""


def stdlib_frame(limit: int = 220) -> pd.DataFrame:
    """Real Python functions of the sources installed here (tests/corpora.py)."""
    codes = local_functions("python", limit)
    return pd.DataFrame({"id": [str(i) for i in range(len(codes))], "code": codes, "language": "python",
                         "func_name": [c.split("(")[0].split()[-1] for c in codes]})  # fmt: skip


def index_and_scores(folder: Path) -> tuple[str, np.ndarray]:
    retriever = BM25Retriever()
    retriever.index(stdlib_frame())
    retriever.index_state(folder, "test")
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    digest = hashlib.sha256(b"".join(p.relative_to(folder).as_posix().encode() + p.read_bytes() for p in files))
    return digest.hexdigest(), np.concatenate([retriever.scores(q) for q in QUERIES])


def test_the_saved_index_is_the_same_bytes_whatever_the_string_hashing() -> None:
    tests = str(Path(__file__).resolve().parent)
    script = SCRIPT.format(tests=tests, root=str(Path(tests).parent))
    seen = []
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        seen.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert seen[0] == seen[1] == seen[2]


def test_the_scores_are_bitwise_those_of_bm25s_own_vocabulary() -> None:
    """Both fields (function names and code bodies), against bm25s indexing the same token lists itself."""
    frame = stdlib_frame()
    ours = BM25Retriever()
    ours.index(frame)
    code_tokens = standard_tokens if ours.analyzer == "standard" else subtokens
    fields = {
        "name": ([subtokens(n.rsplit(".", 1)[-1]) for n in frame["func_name"]], ours._name_index),
        "code": ([code_tokens(c) for c in frame["code"]], ours._code_index),
    }
    for documents, index in fields.values():
        theirs = bm25s.BM25(k1=ours.k1, b=ours.b, method=ours.method)
        theirs.index(documents, show_progress=False)
        assert sorted(theirs.vocab_dict) == sorted(index.vocab_dict)  # the same vocabulary, numbered otherwise
        for query in QUERIES:
            tokens = ours.query_tokens(query)
            if tokens:
                assert np.array_equal(index.get_scores(tokens), theirs.get_scores(tokens))
