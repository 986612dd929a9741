"""A bi-encoder's training split kept in a file (``csbench.train.texts.TextTable``, issue #28: the training
held its split as Python strings, 3.5 GiB for the 1 M growth corpus's 854 k pairs) gives back every row as
it was, streams each column in order, survives pickling into a DataLoader worker, is removed when closed,
refuses a missing value naming its row; and a training over it writes the weights the training over the
rows in memory writes (real standard-library functions, the CodeSearchNet NBoW)."""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from csbench.code.extract import extract_functions
from csbench.train.texts import TextTable, TextTableError

STDLIB_FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "colorsys.py", "calendar.py", "glob.py", "string.py")


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    stdlib = Path(sys.modules["os"].__file__).parent
    if not all((stdlib / name).is_file() for name in STDLIB_FILES):
        pytest.skip(f"the standard library's sources are not at {stdlib}")
    found = [
        fn for name in STDLIB_FILES for fn in extract_functions((stdlib / name).read_text("utf-8"), "python")
    ]
    frame = pd.DataFrame(
        {
            "query": [fn.docstring for fn in found],
            "code": [fn.code for fn in found],
            "language": "python",
        }
    )
    frame.loc[3, "query"] = "naïve façade → ünïcode ✓"  # non-ASCII, several UTF-8 lengths
    frame.loc[7, "query"] = ""  # an empty text is a value too
    assert len(frame) > 60
    return frame


def _batches(frame: pd.DataFrame, size: int):
    for start in range(0, len(frame), size):
        yield frame[start : start + size].reset_index(drop=True)


def test_rows_columns_and_pickling_give_back_what_was_written(rows, tmp_path) -> None:
    columns = ["query", "code", "language"]
    with TextTable.write(_batches(rows, 17), columns, tmp_path) as table:
        assert len(table) == len(rows)
        expected = list(rows[columns].itertuples(index=False, name=None))
        assert [table[i] for i in range(len(table))] == expected
        assert table[-1] == expected[-1]
        with pytest.raises(IndexError):
            table[len(rows)]
        assert list(table.column("code", rows=10)) == rows["code"].tolist()
        assert list(table.column("query")) == rows["query"].tolist()
        copy = pickle.loads(pickle.dumps(table))  # as a DataLoader worker gets it: reopens the file
        assert [copy[i] for i in (0, 3, len(rows) - 1)] == [expected[0], expected[3], expected[-1]]
        copy.close()
        assert table[5] == expected[5]  # the worker's copy does not remove the file
        path = table.path
        assert path.is_file()
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_missing_value_is_refused_naming_its_row_and_leaves_no_file(rows, tmp_path) -> None:
    broken = rows.copy()
    broken.loc[40, "code"] = None
    with pytest.raises(TextTableError, match=r"split\.parquet: row 40 has no 'code' text"):
        TextTable.write(_batches(broken, 16), ["query", "code"], tmp_path, where="split.parquet")
    assert list(tmp_path.iterdir()) == []


def _trained(train, valid: pd.DataFrame, out: Path) -> str:
    from csbench.models import MODELS
    from csbench.models.build import new_encoder
    from csbench.train.bi_encoder import TrainConfig
    from csbench.train.bi_encoder import train as fit

    torch.set_num_threads(1)
    spec = MODELS.get("nbow")
    params = {"dim": 16, "code_min_count": 1, "query_min_count": 1, "max_code_len": 60}
    encoder = new_encoder(spec, params, train, seed=0)
    config = TrainConfig(
        lr=1e-2, epochs=2, batch_size=8, validations_per_epoch=1, patience=None, checkpoint_every=None,
        cpu=True, seed=0, mixed_precision="no",
    )  # fmt: skip
    fit(encoder, train, valid, config, out, progress=False)
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in encoder.parameters())).hexdigest()


def test_training_over_the_table_writes_the_weights_of_training_over_the_rows(rows, tmp_path) -> None:
    train, valid = rows[:-20].reset_index(drop=True), rows[-20:].reset_index(drop=True)
    in_memory = _trained(train, valid, tmp_path / "frame")
    with TextTable.write(_batches(train, 13), ["query", "code", "language"], tmp_path) as table:
        from_file = _trained(table, valid, tmp_path / "table")
    assert from_file == in_memory
    best = sorted(p.name for p in (tmp_path / "frame" / "best").iterdir())
    assert best == sorted(p.name for p in (tmp_path / "table" / "best").iterdir())
    for name in best:
        assert (tmp_path / "frame" / "best" / name).read_bytes() == (tmp_path / "table" / "best" / name).read_bytes()


def test_validation_scores_fewer_queries_at_once_where_the_codes_are_many(rows) -> None:
    """The validation's query x code block is bounded by ``max_scores`` (it was 1,024 x all valid codes:
    450 MiB at the 1 M corpus's 110 k); the MRR is the one of the full-size chunks."""
    from csbench.models import MODELS
    from csbench.models.build import new_encoder
    from csbench.train.bi_encoder import validation_mrr

    encoder = new_encoder(MODELS.get("nbow"), {"dim": 16, "code_min_count": 1, "query_min_count": 1}, rows, seed=0)
    queries, codes, languages = (rows[c].tolist() for c in ("query", "code", "language"))
    shapes: list[tuple[int, int]] = []
    real = encoder.scores

    def scores(q, c):
        shapes.append((q.shape[0], c.shape[0]))
        return real(q, c)

    whole = validation_mrr(encoder, queries, codes, languages)
    assert shapes == []  # (the spy is not in place yet)
    encoder.scores = scores
    bounded = validation_mrr(encoder, queries, codes, languages, max_scores=3 * len(codes))
    assert bounded == whole
    assert shapes and max(rows for rows, _ in shapes) == 3 and sum(rows for rows, _ in shapes) == len(queries)


def test_a_table_a_killed_training_left_is_removed_by_the_next_one(rows, tmp_path) -> None:
    import subprocess

    from csbench.io import HOST

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".csbench-train-texts.{int(gone.stdout)}@{HOST}.abcd1234.tmp"  # its writer is dead
    left.write_bytes(b"x" * 100)
    with TextTable.write(_batches(rows, 50), ["code"], tmp_path) as table:
        assert not left.exists()
        assert [p.name for p in tmp_path.iterdir()] == [table.path.name]
        assert table.path.name.startswith(".csbench-train-texts.") and f"{os.getpid()}@{HOST}" in table.path.name
    assert list(tmp_path.iterdir()) == []
