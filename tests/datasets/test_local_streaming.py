"""A local corpus streamed into its split files (``build_local_corpus(out=)``, what ``csbench prepare``
does, issue #28: memory bounded by a batch, not by the corpus) writes what the whole-frame path wrote:
the same parquet bytes where a split fits one row group, the same table in several row groups, and the
same card; an error half way leaves no split file and no temporary behind."""

from __future__ import annotations

import errno
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from csbench.code.extract import FilterSettings
from csbench.datasets import local
from csbench.datasets.prepare import code_layout_of
from csbench.io import DiskFullError, write_parquet
from csbench.paths import ALL_SPLITS

# real functions: the first 60 files of the running interpreter's standard library (as tiny.yaml)
OPTIONS = {
    "language": "python",
    "source": local.STDLIB,
    "exclude_dirs": ["site-packages", "test", "tests", "idle_test", "__pycache__"],
    "max_files": 60,
}
SPLITS = local.SplitSettings(60, 20, 20)


def _old(tmp_path, splits=SPLITS):
    """The split files and card as the prepare phase wrote them before streaming: the whole frame,
    then ``write_parquet`` of each split and its ``code_layout``."""
    frame, card = local.build_local_corpus("stdlib-part", OPTIONS, FilterSettings(), splits, progress=False)
    folder = tmp_path / "old"
    folder.mkdir()
    for split in ALL_SPLITS:
        records = frame[frame["split"] == split].reset_index(drop=True)
        write_parquet(folder / f"{split}.parquet", records)
        if split in card["splits"]:
            card["splits"][split]["code_layout"] = code_layout_of(records["language"], records["code"])
    return folder, frame, card


def _json(card: dict) -> str:
    """A card as written (NaN, the mean of an empty split, compares equal to itself here)."""
    return json.dumps(card, sort_keys=True)


def _new(tmp_path, batch_rows, splits=SPLITS):
    folder = tmp_path / f"new-{batch_rows}"
    frame, card = local.build_local_corpus(
        "stdlib-part", OPTIONS, FilterSettings(), splits, progress=False, out=folder, batch_rows=batch_rows
    )
    assert frame is None
    return folder, card


def test_one_row_group_per_split_is_byte_identical(tmp_path) -> None:
    old, frame, old_card = _old(tmp_path)
    assert len(frame) > 300 and set(frame["split"]) == {"train", "valid", "test"}  # a real corpus, every split
    new, new_card = _new(tmp_path, batch_rows=100_000)
    assert _json(new_card) == _json(old_card)
    for split in ALL_SPLITS:
        assert (new / f"{split}.parquet").read_bytes() == (old / f"{split}.parquet").read_bytes(), split
    assert sorted(p.name for p in new.iterdir()) == sorted(f"{s}.parquet" for s in ALL_SPLITS)


def test_small_batches_write_the_same_table_in_several_row_groups(tmp_path) -> None:
    old, frame, old_card = _old(tmp_path)
    new, new_card = _new(tmp_path, batch_rows=7)
    assert _json(new_card) == _json(old_card)
    train = pq.ParquetFile(new / "train.parquet")
    assert train.metadata.num_row_groups == -(-int((frame["split"] == "train").sum()) // 7)
    for split in ALL_SPLITS:
        written, expected = pq.read_table(new / f"{split}.parquet"), pq.read_table(old / f"{split}.parquet")
        assert written.schema.equals(expected.schema, check_metadata=True), split
        assert written.equals(expected), split
        pd.testing.assert_frame_equal(written.to_pandas(), expected.to_pandas())


@pytest.mark.parametrize("percent", [(100, 0, 0), (0, 0, 100)], ids=["all-train", "all-test"])
@pytest.mark.parametrize("batch_rows", [50, 100_000])
def test_empty_splits_are_written_as_before(tmp_path, percent, batch_rows) -> None:
    """An empty split is typed as the records (as a filtered frame was), also when it comes first."""
    splits = local.SplitSettings(*percent)
    old, _, old_card = _old(tmp_path, splits)
    new, new_card = _new(tmp_path, batch_rows=batch_rows, splits=splits)
    assert _json(new_card) == _json(old_card)
    full = "train" if percent[0] else "test"
    for split in ALL_SPLITS:
        written, expected = (new / f"{split}.parquet").read_bytes(), (old / f"{split}.parquet").read_bytes()
        if split != full or batch_rows == 100_000:
            assert written == expected, split
        assert pq.read_table(new / f"{split}.parquet").equals(pq.read_table(old / f"{split}.parquet")), split


def test_an_error_half_way_leaves_nothing_behind(tmp_path, monkeypatch) -> None:
    """The extraction fails after some row groups were written: no split file, no temporary."""
    real = local._extract_file
    seen = []

    def failing(job):
        seen.append(job)
        if len(seen) == 40:
            raise RuntimeError("worker died")
        return real(job)

    monkeypatch.setattr(local, "_extract_file", failing)
    folder = tmp_path / "out"
    with pytest.raises(RuntimeError, match="worker died"):
        local.build_local_corpus(
            "stdlib-part", OPTIONS, FilterSettings(), SPLITS, progress=False, out=folder, batch_rows=5
        )
    assert list(folder.iterdir()) == []


def test_a_full_disk_names_the_split_and_removes_its_temporary(tmp_path, monkeypatch) -> None:
    """ENOSPC while the third row group is written: DiskFullError naming that split's file, nothing left."""
    real = pq.ParquetWriter.write_table
    calls = []

    def write_table(self, table, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    folder = tmp_path / "out"
    with pytest.raises(DiskFullError) as raised:
        local.build_local_corpus(
            "stdlib-part", OPTIONS, FilterSettings(), SPLITS, progress=False, out=folder, batch_rows=5
        )
    assert raised.value.path in {folder / f"{split}.parquet" for split in ALL_SPLITS}
    assert list(folder.iterdir()) == []
