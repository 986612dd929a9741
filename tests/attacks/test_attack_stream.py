"""A dataset attacked a batch of rows at a time (``csbench.attacks.stream``, issue #28: the attack phase's
memory bounded by ``--batch-rows``, not by the corpus) gives what ``run_attack`` gives all at once: the
same attacked code and renaming in every row of every split, the same report, for every registered
attack and for compositions with one or two dataset-wide renamings, however the rows are cut, on real
released code of all seven languages with repeated snippets within and across splits (a test function in
the codebase, as CodeSearchNet's). And the ``attack`` phase holds no more than ``--batch-rows`` rows
at a time."""

from __future__ import annotations

import filecmp
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from test_attack_digests import real_sets

from csbench.attacks import ATTACKS, languages, parse_spec, run_attack
from csbench.attacks import engine as E
from csbench.attacks import stream as S
from csbench.cli import main
from csbench.io import ParquetStream, write_parquet
from csbench.paths import ALL_SPLITS
from csbench.stamps import STAMP_FILE

PER_SET = 24  # functions of each real set


@pytest.fixture(scope="module")
def dataset() -> dict[str, pd.DataFrame]:
    """Real functions of every set of ../shared/data in four splits, in an interleaved order (languages
    mixed within each batch); the codebase repeats the test split's functions among others, and the train
    split holds a function twice."""
    sets = real_sets()
    if not sets:
        pytest.skip("no real code sets in ../shared/data")
    rows = []
    for name, (language, codes) in sets.items():
        rows += [(f"{name}-{i}", language, code) for i, code in enumerate(codes[:PER_SET])]
    rows.sort(key=lambda row: (int(row[0].rsplit("-", 1)[1]), row[0]))
    frame = pd.DataFrame(rows, columns=["id", "language", "code"])
    frame["query"] = [f"query {i}" for i in range(len(frame))]
    n = len(frame)
    train, valid, test = frame[: n // 2], frame[n // 2 : 2 * n // 3], frame[2 * n // 3 : 5 * n // 6]
    rest = frame[5 * n // 6 :]
    train = pd.concat([train, train[3:5]])  # a function twice in train, in two different batches below
    codebase = pd.concat([rest[: len(rest) // 2], test, rest[len(rest) // 2 :]])
    return {
        split: part.reset_index(drop=True)
        for split, part in zip(ALL_SPLITS, (train, valid, test, codebase), strict=True)
    }


def _for(spec: str, dataset: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The rows of the languages the spec is implemented for."""
    langs = set(languages(parse_spec(spec)))
    return {split: f[f["language"].isin(langs)].reset_index(drop=True) for split, f in dataset.items()}


def _streamed(spec, splits: dict[str, pd.DataFrame], rows: int, tmp_path: Path, params=None, workers=1, **options):
    """``attack_batches`` over ``splits`` cut into batches of ``rows`` rows: the attacked splits and report."""
    seen: list[int] = []

    def batches(split: str, columns: list[str] | None) -> Iterator[pd.DataFrame]:
        frame = splits[split] if columns is None else splits[split][columns]
        if frame.empty:
            yield frame
        for start in range(0, len(frame), rows):
            yield frame[start : start + rows].reset_index(drop=True)

    out: dict[str, list[pd.DataFrame]] = {split: [] for split in splits}

    def sink(split: str, frame: pd.DataFrame) -> None:
        seen.append(len(frame))
        out[split].append(frame)

    report = S.attack_batches(
        spec, list(splits), batches, sink, tmp_path, params, workers=workers, progress=False, **options
    )
    assert max(seen) <= rows
    assert list(tmp_path.iterdir()) == []  # the spill file is gone
    return {split: pd.concat(frames, ignore_index=True) for split, frames in out.items()}, report


def _same(spec, dataset, rows, tmp_path, params=None, workers=1) -> None:
    splits = _for(spec, dataset)
    whole, whole_report = run_attack(spec, splits, params, progress=False)
    parts, parts_report = _streamed(spec, splits, rows, tmp_path, params, workers)
    for split in splits:
        pd.testing.assert_frame_equal(parts[split], whole[split], check_dtype=False, obj=f"{spec} {split}")
        assert parts[split].dtypes.to_dict() == whole[split].dtypes.to_dict() or whole[split].empty
    one, other = whole_report.as_dict(), parts_report.as_dict()
    one.pop("seconds"), other.pop("seconds")
    assert other == one


SPECS = [name for name in ATTACKS.names() if name != "translation"]
COMPOSED = [
    "most_popular+k_shift_dataset-2",  # two dataset-wide renamings: two survey passes, the second after the first
    "k_shift_dataset-5+ordered_id",
    "ordered_id+most_popular",
    "k_shift_dataset-64",  # k larger than most languages' snippets: the donors wrap around more than once
    "advtest_normalize+k_shift_dataset",
]


@pytest.mark.parametrize("spec", SPECS + COMPOSED)
@pytest.mark.parametrize("rows", [7, 50])
def test_streamed_attack_equals_the_attack_at_once(spec, rows, dataset, tmp_path) -> None:
    _same(spec, dataset, rows, tmp_path)


def test_streamed_attack_over_workers_and_single_rows(dataset, tmp_path) -> None:
    _same("k_shift_dataset-3", dataset, 1, tmp_path / "one")  # every batch one row: most chunks empty of new snippets
    _same("most_popular", dataset, 13, tmp_path / "workers", workers=2)


def test_a_fixed_ranking_needs_no_survey(dataset, tmp_path, monkeypatch) -> None:
    """most_popular with the thesis's fixed ranking proposes locally: no survey pass, the same output."""
    calls = []
    monkeypatch.setattr(S, "survey_snippets", lambda *a, **k: calls.append(1))
    _same("most_popular", dataset, 9, tmp_path, {"most_popular": {"ranking": ["x", "y", "value", "data"]}})
    assert calls == []


@pytest.mark.skipif(shutil.which("apertium") is None, reason="apertium is not installed (scripts/setup.sh does)")
@pytest.mark.parametrize("spec", ["translation", "most_popular+translation"])
def test_streamed_translation_equals_the_attack_at_once(spec, dataset, tmp_path) -> None:
    small = {split: frame[:12] for split, frame in dataset.items()}
    _same(spec, small, 5, tmp_path)


def _analyses(monkeypatch) -> list[int]:
    """Counts the snippets parsed and analysed for a renaming from now on (``renaming.analyse``)."""
    from csbench.attacks import renaming as R

    calls: list[int] = []
    real = R.analyse
    monkeypatch.setattr(R, "analyse", lambda *args, **kwargs: (calls.append(1), real(*args, **kwargs))[1])
    return calls


@pytest.mark.parametrize(
    ("spec", "passes"),
    [
        ("most_popular", 1),  # analysed by the survey, renamed from its analyses
        ("k_shift_dataset-3", 1),
        ("ordered_id+most_popular", 2),  # ordered_id, then most_popular's survey, each once
        ("most_popular+k_shift_dataset-2", 2),  # two dataset-wide steps: each step's analyses made once
        ("advtest_normalize+k_shift_dataset", 1),  # the rewrite parses on its own (not counted)
    ],
)
def test_a_streamed_dataset_wide_renaming_analyses_each_snippet_once(spec, passes, dataset, tmp_path, monkeypatch):
    """The survey pass keeps its analyses for the renaming pass (and a later step's survey): each distinct
    snippet is analysed once per renaming step, as in ``run_attack``, not once more per pass. Checked
    to fail when the analyses are not kept (``keep_analyses=False``, or the code before: 2, 2, 4, 5 and 2 passes)."""
    splits = _for(spec, dataset)
    distinct = len({(lang, code) for f in splits.values() for lang, code in zip(f["language"], f["code"], strict=True)})
    calls = _analyses(monkeypatch)
    whole, _ = run_attack(spec, splits, progress=False)
    assert len(calls) == passes * distinct
    calls.clear()
    parts, _ = _streamed(spec, splits, 11, tmp_path)
    assert len(calls) == passes * distinct
    for split in splits:
        pd.testing.assert_frame_equal(parts[split], whole[split], check_dtype=False, obj=f"{spec} {split}")


class _FullDisk:
    """A file on a disk that is full once ``room`` bytes are written to it: a write past it raises ENOSPC
    (the bytes that fit are written, as a real disk does)."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data) -> int:
        import errno

        fits = max(0, min(len(data), self.room - self.handle.tell()))
        self.handle.write(bytes(data[:fits]))
        if fits < len(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return fits

    def __getattr__(self, name):
        return getattr(self.handle, name)


def test_a_stream_that_cannot_keep_its_analyses_analyses_again(dataset, tmp_path, monkeypatch, caplog) -> None:
    """A full disk while the survey keeps its analyses: warned once, the chunks analysed again, the same
    output; and ``keep_analyses=False`` analyses every snippet in every pass, to the same output."""
    spec = "most_popular+k_shift_dataset-2"
    splits = _for(spec, dataset)
    whole, whole_report = run_attack(spec, splits, progress=False)
    calls = _analyses(monkeypatch)
    room = 40 * 2**10  # bytes: some chunks kept, then the disk is full
    real_open = S._KeptAnalyses._open
    sizes: list[int] = []
    real_close = S._KeptAnalyses.close
    monkeypatch.setattr(S._KeptAnalyses, "_open", lambda self: _FullDisk(real_open(self), room))
    monkeypatch.setattr(S._KeptAnalyses, "close", lambda self: (sizes.append(self.bytes), real_close(self))[1])
    with caplog.at_level("WARNING", logger="csbench"):
        parts, report = _streamed(spec, splits, 11, tmp_path)
    assert len([r for r in caplog.records if "could not keep" in r.getMessage()]) == 1
    assert 0 < sizes[0] <= room
    one, other = whole_report.as_dict(), report.as_dict()
    one.pop("seconds"), other.pop("seconds")
    assert other == one
    once = len(calls)
    monkeypatch.setattr(S._KeptAnalyses, "_open", real_open)
    calls.clear()
    twice, _ = _streamed(spec, splits, 11, tmp_path, keep_analyses=False)
    assert once < len(calls)  # the chunks kept before the disk was full were used
    for split in splits:
        pd.testing.assert_frame_equal(parts[split], whole[split], check_dtype=False, obj=f"{spec} {split}")
        pd.testing.assert_frame_equal(twice[split], whole[split], check_dtype=False, obj=f"{spec} {split}")


@pytest.mark.parametrize("piece", [1, 1024])  # one pickle per analysis, one for all
def test_kept_analyses_are_taken_back_only_for_the_same_jobs(piece, tmp_path, monkeypatch) -> None:
    from csbench.attacks import renaming as R

    monkeypatch.setattr(S, "_KEPT_PIECE", piece)
    jobs = [("def f(a):\n    return a\n", "python", False), ("def g(b):\n    return b\n", "python", True)]
    analysed = [(R.analyse(code, lang, keep), "", "") for code, lang, keep in jobs]
    kept = S._KeptAnalyses(tmp_path / "out")
    view = kept.chunk(3)
    assert view.take(0, "analysed", jobs) is None  # nothing kept yet
    view.put(0, "analysed", jobs, analysed)
    assert view.take(0, "analysed", jobs) == analysed == view.take(0, "analysed", jobs)  # taken any number of times
    assert kept.chunk(2).take(0, "analysed", jobs) is None  # another chunk
    assert view.take(1, "analysed", jobs) is None and view.take(0, "renamed", jobs) is None  # another step, kind
    assert view.take(0, "analysed", [jobs[0], (jobs[1][0], "python", False)]) is None  # comments kept: other jobs
    assert view.take(0, "analysed", jobs[:1]) is None
    view.put(1, "renamed", jobs[:1], [("renamed code", {"f": "g"}, "")])  # after the first: read back by position
    assert view.take(1, "renamed", jobs[:1]) == [("renamed code", {"f": "g"}, "")]
    assert view.take(0, "analysed", jobs) == analysed
    assert list((tmp_path / "out").iterdir()) == []  # the file has no name
    kept.close()


def test_kept_analyses_come_back_equal_on_real_code(tmp_path) -> None:
    """Every field of the kept analyses survives the file (JSON, not pickle): names, roles, spans, reserved
    names, members, a PHP function's keywords, the comment edits, the failures, in the seven languages."""
    from test_settle_accepted import _codes

    from csbench.attacks import renaming as R
    from csbench.code.identifiers import IMPLEMENTED

    kept = S._KeptAnalyses(tmp_path)
    fields = {"members": 0, "fun_keywords": 0, "edits": 0, "failures": 0}
    for step, language in enumerate(IMPLEMENTED):
        jobs = [(code, language, False) for code in _codes(language)[:150]] + [("x", "no such language", False)]
        analysed = [E._analyse_job(job) for job in jobs]
        fields["members"] += sum(bool(a and a.identifiers.members) for a, _, _ in analysed)
        fields["fun_keywords"] += sum(bool(a and a.identifiers.fun_keywords) for a, _, _ in analysed)
        fields["edits"] += sum(bool(a and a.edits) for a, _, _ in analysed)
        fields["failures"] += sum(a is None for a, _, _ in analysed)
        kept.chunk(0).put(step, "analysed", jobs, analysed)
        assert kept.chunk(0).take(step, "analysed", jobs) == analysed, language
        renamed = E._rename_analysed(analysed, [j[1] for j in jobs], [j[0] for j in jobs], R.ordered_id, {})
        kept.chunk(1).put(step, "renamed", jobs, renamed)
        assert kept.chunk(1).take(step, "renamed", jobs) == renamed, language
    assert all(fields.values()), fields  # each field was exercised
    kept.close()


def test_snippet_keys_tell_language_and_code_apart() -> None:
    pairs = [("python", "x"), ("ruby", "x"), ("python", "x "), ("pytho", "nx")]
    keys = {S.snippet_key(language, code) for language, code in pairs}
    assert len(keys) == 4 and all(len(key) == 16 for key in keys)


# ------------------------------------------------------------------------------------- the parquet stream


def test_one_frame_gives_write_parquet_bytes_and_more_give_row_groups(dataset, tmp_path) -> None:
    frame = dataset["train"]
    write_parquet(tmp_path / "whole.parquet", frame)
    stream = ParquetStream(tmp_path / "one.parquet")
    stream.write(frame)
    stream.close()
    assert filecmp.cmp(tmp_path / "whole.parquet", tmp_path / "one.parquet", shallow=False)
    stream = ParquetStream(tmp_path / "parts.parquet")
    for start in range(0, len(frame), 10):
        stream.write(frame[start : start + 10])
    stream.close()
    assert pq.ParquetFile(tmp_path / "parts.parquet").metadata.num_row_groups == -(-len(frame) // 10)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "parts.parquet"), frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet", "parts.parquet", "whole.parquet"]


def test_an_untyped_first_frame_takes_the_given_types(tmp_path) -> None:
    import pyarrow as pa

    types = pa.schema([("code", pa.string()), ("renaming", pa.string())])
    stream = ParquetStream(tmp_path / "s.parquet", types)
    stream.write(pd.DataFrame({"code": [None, None], "renaming": ["{}", "{}"]}))
    stream.write(pd.DataFrame({"code": ["x"], "renaming": ["{}"]}))
    stream.close()
    assert pq.read_schema(tmp_path / "s.parquet").field("code").type == pa.string()
    back = pd.read_parquet(tmp_path / "s.parquet")["code"]
    assert back.isna().tolist() == [True, True, False] and back[2] == "x"


def test_an_error_leaves_neither_file_nor_temporary(tmp_path) -> None:
    stream = ParquetStream(tmp_path / "s.parquet")
    stream.write(pd.DataFrame({"code": ["x"]}))
    with pytest.raises((TypeError, ValueError, Exception)):
        stream.write(pd.DataFrame({"code": [object()]}))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no rows were written"):
        ParquetStream(tmp_path / "t.parquet").close()


# ------------------------------------------------------------------------------------------- the phase

STDLIB_FILES = ("textwrap.py", "shlex.py", "fnmatch.py", "colorsys.py", "calendar.py", "glob.py", "string.py")
ATTACKS_RUN = ["ordered_id", "most_popular", "k_shift_dataset-2"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mini study of real standard-library functions, prepared into four splits."""
    stdlib = Path(sys.modules["os"].__file__).parent
    if not all((stdlib / name).is_file() for name in STDLIB_FILES):
        pytest.skip(f"the standard library's sources are not at {stdlib}")
    root = tmp_path_factory.mktemp("attack-stream")
    (root / "corpus").mkdir()
    for name in STDLIB_FILES:
        shutil.copy(stdlib / name, root / "corpus" / name)
    config = {
        "study": "stream",
        "grid": {"datasets": ["mini"], "attacks": ATTACKS_RUN, "models": ["bm25"]},
        "datasets": {"mini": {"kind": "local-source", "language": "python", "source": str(root / "corpus")}},
        "extraction": {"min_query_tokens": 3, "min_code_lines": 3, "split": {"train": 50, "valid": 20, "test": 30}},
        "models": {},
        "evaluation": {"protocols": ["full-corpus"], "run_depth": 10},
    }
    (root / "study.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    _in(root, ["prepare", "--dataset", "mini"])
    return root


def _in(root: Path, args: list[str]) -> None:
    import os

    old = Path.cwd()
    os.chdir(root)
    try:
        assert main(["--quiet", args[0], "--config", "study.yaml", *args[1:]]) == 0
    finally:
        os.chdir(old)


@pytest.mark.parametrize("spec", ATTACKS_RUN)
def test_the_phase_in_batches_writes_the_splits_it_writes_at_once(spec, project, monkeypatch) -> None:
    folder = project / "data" / "attacked" / "mini" / spec
    _in(project, ["attack", "--dataset", "mini", "--attack", spec])
    whole = {split: pd.read_parquet(folder / f"{split}.parquet") for split in ALL_SPLITS}
    whole_report = json.loads((folder / "attack.json").read_text())
    prepared = sum(len(pd.read_parquet(project / "data/prepared/mini" / f"{s}.parquet")) for s in ALL_SPLITS)
    assert prepared > 40

    held: list[int] = []  # every batch of rows attacked or written at once
    real_attack, real_write = S.attack_snippets, ParquetStream.write

    def attack_snippets(spec, components, unique, *args, **kwargs):
        held.append(len(unique))
        return real_attack(spec, components, unique, *args, **kwargs)

    monkeypatch.setattr(S, "attack_snippets", attack_snippets)
    monkeypatch.setattr(ParquetStream, "write", lambda self, frame: (held.append(len(frame)), real_write(self, frame)))
    monkeypatch.setattr("csbench.attacks.run_attack", None)  # the phase must not fall back to the whole dataset
    _in(project, ["attack", "--dataset", "mini", "--attack", spec, "--batch-rows", "7"])
    assert held and max(held) <= 7
    for split in ALL_SPLITS:
        parts = pq.ParquetFile(folder / f"{split}.parquet")
        assert parts.metadata.num_row_groups == max(1, -(-len(whole[split]) // 7))
        pd.testing.assert_frame_equal(parts.read().to_pandas(), whole[split], obj=f"{spec} {split}")
    report = json.loads((folder / "attack.json").read_text())
    report.pop("seconds"), whole_report.pop("seconds")
    assert report == whole_report
    written = sorted(p.name for p in folder.iterdir())
    assert written == sorted([*(f"{s}.parquet" for s in ALL_SPLITS), "attack.json", STAMP_FILE])  # no spill left
    _in(project, ["index", "--dataset", "mini", "--attack", spec, "--model", "bm25"])  # the stamp is good
