"""The memory-mapped pair store (csbench.summarization.data): round trip, rebuilds, bounded memory."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from csbench.summarization.data import PairStore, PairStoreError, record_path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _frame(n: int, start: int = 0) -> pa.Table:
    ids = [f"ds:{i}" for i in range(start, start + n)]
    codes = [f"def f{i}(x):\n    # ünïcode {i}\n    return x + {i}\n" * (1 + i % 3) for i in range(start, start + n)]
    queries = [f"adds {i} to x" for i in range(start, start + n)]
    return pa.table({"id": ids, "language": ["python"] * n, "query": queries, "code": codes})


def _write(path: Path, table: pa.Table, row_group_size: int = 1000) -> None:
    pq.write_table(table, path, row_group_size=row_group_size)


def test_round_trip_in_order_with_ids_and_columns(tmp_path: Path) -> None:
    table = _frame(2500)
    _write(tmp_path / "train.parquet", table, row_group_size=700)
    with PairStore(tmp_path / "train.parquet", tmp_path / "cache" / "train.arrow", batch_rows=300) as store:
        assert store.rebuilt and len(store) == 2500
        codes, queries, ids = (table.column(c).to_pylist() for c in ("code", "query", "id"))
        assert [store[i] for i in range(len(store))] == list(zip(codes, queries, strict=True))
        assert list(store) == list(zip(codes, queries, strict=True))
        assert store[-1] == (codes[-1], queries[-1])
        assert [store.ids(i) for i in (0, 299, 300, 2499)] == [ids[0], ids[299], ids[300], ids[2499]]
        assert list(store.codes()) == codes and list(store.codes()) == codes  # re-iterable
        assert list(store.summaries()) == queries and len(store.summaries()) == 2500
        assert sum(len(b) for b in store.summaries().batches()) == 2500
        with pytest.raises(IndexError, match="2500"):
            store[2500]
    record = json.loads(record_path(tmp_path / "cache" / "train.arrow").read_text())
    assert record["rows"] == 2500 and record["source"]["size"] == (tmp_path / "train.parquet").stat().st_size


def test_an_empty_split_is_an_empty_store(tmp_path: Path) -> None:
    _write(tmp_path / "test.parquet", _frame(0))
    with PairStore(tmp_path / "test.parquet", tmp_path / "test.arrow") as store:
        assert len(store) == 0 and list(store.codes()) == []


def test_reused_when_unchanged_or_only_touched_rebuilt_when_changed(tmp_path: Path) -> None:
    parquet, cache = tmp_path / "train.parquet", tmp_path / "train.arrow"
    _write(parquet, _frame(50))
    assert PairStore(parquet, cache).rebuilt
    assert not PairStore(parquet, cache).rebuilt
    os.utime(parquet, ns=(1, 1))  # same bytes, other mtime: hashed, reused, record refreshed
    assert not PairStore(parquet, cache).rebuilt
    assert json.loads(record_path(cache).read_text())["source"]["mtime_ns"] == 1
    _write(parquet, _frame(60, start=100))
    store = PairStore(parquet, cache)
    assert store.rebuilt and len(store) == 60 and store.ids(0) == "ds:100"
    record_path(cache).unlink()  # a writer killed before the record: rebuilt
    assert PairStore(parquet, cache).rebuilt
    record = json.loads(record_path(cache).read_text())
    record_path(cache).write_text(json.dumps({**record, "ipc_bytes": 1}))  # the IPC file is not the one recorded
    assert PairStore(parquet, cache).rebuilt


def test_no_temporary_is_left_and_the_file_is_uncompressed_arrow(tmp_path: Path) -> None:
    _write(tmp_path / "s.parquet", _frame(10))
    PairStore(tmp_path / "s.parquet", tmp_path / "s.arrow")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.arrow", "s.arrow.source.json", "s.parquet"]
    with pa.memory_map(str(tmp_path / "s.arrow")) as source:
        assert pa.ipc.open_file(source).read_all().column("summary")[3].as_py() == "adds 3 to x"
    assert b"adds 3 to x" in (tmp_path / "s.arrow").read_bytes()  # stored as is, not compressed


def test_bad_sources_name_the_file_row_and_column(tmp_path: Path) -> None:
    _write(tmp_path / "nocol.parquet", _frame(5).drop_columns(["query"]))
    with pytest.raises(PairStoreError, match=r"nocol\.parquet: no column 'query'"):
        PairStore(tmp_path / "nocol.parquet", tmp_path / "a.arrow")
    table = _frame(5)
    codes = table.column("code").to_pylist()
    codes[3] = None
    _write(tmp_path / "null.parquet", table.set_column(3, "code", pa.array(codes)))
    with pytest.raises(PairStoreError, match=r"null\.parquet: row 3 \(id 'ds:3'\) has no 'code'"):
        PairStore(tmp_path / "null.parquet", tmp_path / "b.arrow")
    assert not (tmp_path / "b.arrow").exists()
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(PairStoreError, match="not a readable parquet"):
        PairStore(tmp_path / "junk.parquet", tmp_path / "c.arrow")


def test_a_torch_dataloader_reads_it_in_worker_processes(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    _write(tmp_path / "s.parquet", _frame(40))
    store = PairStore(tmp_path / "s.parquet", tmp_path / "s.arrow")
    assert pickle.loads(pickle.dumps(store))[7] == store[7]
    loader = torch.utils.data.DataLoader(store, batch_size=16, num_workers=1, collate_fn=list)
    pairs = [pair for batch in loader for pair in batch]
    assert pairs == list(store)


_MEASURE = textwrap.dedent(
    """
    import json, sys, threading, time
    from pathlib import Path

    def anon_kib():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    peak = [0]
    def sample():
        while True:
            peak[0] = max(peak[0], anon_kib()); time.sleep(0.005)

    from csbench.summarization.data import PairStore  # imports first: their memory is the baseline
    base = anon_kib()
    threading.Thread(target=sample, daemon=True).start()
    t = time.perf_counter()
    store = PairStore(Path(sys.argv[1]), Path(sys.argv[2]))
    built = time.perf_counter() - t
    peak_build = peak[0]
    chars = sum(len(c) for c in store.codes()) + sum(len(s) for s in store.summaries())
    for i in range(0, len(store), 97):
        store[i]
    time.sleep(0.02)
    print(json.dumps({"rows": len(store), "chars": chars, "base_kib": base, "build_peak_kib": peak_build,
                      "peak_kib": peak[0], "build_s": built, "rebuilt": store.rebuilt}))
    """
)


def test_building_and_iterating_300k_pairs_keeps_memory_far_below_the_data(tmp_path: Path) -> None:
    """~300k pairs of realistic sizes (code 120-1900 chars, summary 20-140): the anonymous memory the
    process adds while building and reading the store (peak RssAnon over the baseline) stays far below
    the data. File-backed pages of the mapping are not counted: they are clean and reclaimable."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc/self/status (Linux) to measure RssAnon")
    parquet = tmp_path / "train.parquet"
    lines = [f"    value_{k} = compute(item.field_{k}, options)  # step {k}\n" for k in range(30)]
    with pq.ParquetWriter(
        parquet, pa.schema([("id", pa.string()), ("query", pa.string()), ("code", pa.string())])
    ) as w:
        for start in range(0, 300_000, 20_000):
            rows = range(start, start + 20_000)
            codes = [f"def method_{i}(item, options):\n" + "".join(lines[: 2 + i % 29]) for i in rows]
            queries = [f"computes the values of item {i}" + " and more" * (i % 13) for i in rows]
            w.write_table(pa.table({"id": [f"f:{i}" for i in rows], "query": queries, "code": codes}))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(parquet), str(tmp_path / "train.arrow")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    m = json.loads(out.stdout.strip().splitlines()[-1])
    data_kib = (tmp_path / "train.arrow").stat().st_size // 1024
    grown = m["peak_kib"] - m["base_kib"]
    print(
        f"\npair store: {m['rows']} rows, {m['chars'] / 1e6:.1f} M chars, IPC file {data_kib / 1024:.1f} MiB, "
        f"built in {m['build_s']:.1f} s; RssAnon baseline {m['base_kib'] / 1024:.1f} MiB, "
        f"peak while building +{(m['build_peak_kib'] - m['base_kib']) / 1024:.1f} MiB, "
        f"peak overall +{grown / 1024:.1f} MiB"
    )
    assert m["rows"] == 300_000 and m["rebuilt"]
    assert data_kib > 150 * 1024  # the data is big enough for the bound below to mean something
    assert grown < data_kib / 5, m


def test_tl_codesum_valid_round_trips_through_the_store(shared_data: Path, tmp_path: Path) -> None:
    """The real TL-CodeSum valid split, as the prepare phase's schema holds it: every pair comes back
    equal to the reader's (code, query), in order."""
    from csbench.datasets import DATASETS
    from csbench.datasets.base import SkipReport
    from csbench.datasets.prepare import SCHEMA

    raw = tmp_path / "raw" / "data" / "valid"
    raw.mkdir(parents=True)
    for kind in ("code", "nl"):
        (raw / f"valid.token.{kind}").symlink_to(shared_data / "tl_codesum" / f"valid.token.{kind}")
    records = list(DATASETS.get("tl-codesum").reader(tmp_path / "raw", {"splits": ["valid"]}, SkipReport()))
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    _write(tmp_path / "valid.parquet", table, row_group_size=3000)
    with PairStore(tmp_path / "valid.parquet", tmp_path / "valid.arrow") as store:
        assert len(store) == len(records) == 8714
        assert list(store) == [(r["code"], r["query"]) for r in records]
        assert [store.ids(i) for i in range(0, 8714, 1000)] == [records[i]["id"] for i in range(0, 8714, 1000)]
