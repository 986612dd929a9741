"""Attack a dataset too large to hold: its splits read and written a batch of rows at a time.

``run_attack`` (``csbench.attacks.engine``) holds every split, the distinct snippets, their attacked code
and renamings at once: some 5 KiB per function, 5.9 GiB for a corpus of a million. ``attack_batches``
gives the same splits, row for row, holding at most ``batch_rows`` rows of them (and their distinct
snippets) at a time, plus what it must hold for the whole dataset:

- one 16-byte key per row (BLAKE2b of its language and code), to tell the distinct snippets of the dataset
  apart: a snippet is attacked where it first occurs, in dataset order (train, valid, test, codebase), and
  its later occurrences (a test function in the codebase) take the same attacked code;
- the attacked code and renaming of a snippet that occurs again in a later batch, written to a temporary
  file beside the output (not held) and read back where it occurs;
- a dataset-wide renaming's statistics (``csbench.attacks.spec.Survey``: ``most_popular``'s name counts per
  language, ``k_shift_dataset``'s last k snippets), gathered by a first pass over the batches.

The chunks of distinct snippets are the first occurrences of each batch of rows. Snippet-local attacks
give the same result however the dataset is cut (each snippet's attack depends on it alone); a
dataset-wide renaming's proposals for a chunk take the chunk's context from the survey, and are those of
the whole dataset at once (tests/attacks/test_attack_stream.py: every registered attack, on real code,
cut into batches of several sizes, equals ``run_attack``). The report counts each distinct snippet once,
as ``run_attack``'s does. A dataset-wide renaming costs one more pass over the dataset (two when two are
composed), which ``run_attack`` does not need: the ``attack`` phase streams only a dataset of more than
``batch_rows`` rows. The survey pass keeps each chunk's analyses in a temporary file (``_KeptAnalyses``, as JSON),
so the renaming pass parses and analyses nothing again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from csbench.attacks.engine import AttackReport, attack_snippets, attacked_frame, survey_snippets
from csbench.attacks.renaming import Analysis
from csbench.attacks.spec import Component, check_languages, parse_spec
from csbench.code.languages.base import Identifiers
from csbench.digests import text_key, text_keys

log = logging.getLogger("csbench")

# rows of a split read, attacked and written at once by the ``attack`` phase (``csbench attack --batch-rows``):
# what bounds the phase's memory; the prepared splits of a large local corpus have row groups of this size
ATTACK_BATCH_ROWS = 20_000

# (split, the columns wanted or None for all) -> its rows, a DataFrame of at most ``batch_rows`` rows at a
# time, in order (at least one frame, empty for an empty split: it gives the attacked split its columns);
# called once per pass (the key and survey passes read only SNIPPET_COLUMNS)
RowBatches = Callable[[str, "list[str] | None"], Iterator[pd.DataFrame]]
SNIPPET_COLUMNS = ["language", "code"]
# (split, its next attacked rows): the writer of the attacked splits, called in dataset order
Sink = Callable[[str, pd.DataFrame], None]


def snippet_key(language: str, code: str) -> bytes:
    """The 16 bytes that stand for a (language, code) snippet: the key (``csbench.digests.text_key``,
    BLAKE2b-128) of both, a NUL between (no language name holds one)."""
    return text_key(f"{language}\0{code}")


def snippet_keys(languages: list[str], codes: list[str]) -> np.ndarray:
    """``snippet_key`` of each (language, code), as the rows of an (n, 2) uint64 array."""
    return text_keys(f"{language}\0{code}" for language, code in zip(languages, codes, strict=True))


class _Occurrences:
    """Where each row's snippet first occurs: built from every row's key (``snippet_keys`` of each batch
    of rows, in dataset order). Holds 9 bytes per row (built: 16, and ``np.unique``'s sort of them)."""

    def __init__(self, keys: list[np.ndarray]) -> None:
        rows = np.concatenate(keys) if keys else np.zeros((0, 2), np.uint64)
        keys.clear()
        _, first, inverse, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True, return_counts=True)
        del rows
        inverse = inverse.reshape(-1)
        self.first = first[inverse]  # per row: the row where its snippet first occurs
        self.repeated = counts[inverse] > 1  # per row: its snippet occurs more than once
        self.rows = len(inverse)

    def batch(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """For rows [start, stop): the row of each's first occurrence, and whether each is one."""
        first = self.first[start:stop]
        return first, first == np.arange(start, stop)


class _Spill:
    """The attacked code and renaming of snippets that occur again in a later batch, in a temporary file
    (removed when closed) beside the output, read back by position."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.handle = tempfile.TemporaryFile(dir=folder, prefix=".attack-spill-")  # noqa: SIM115 - closed by close
        self.where: dict[int, tuple[int, int, int]] = {}  # first row -> (offset, code bytes, renaming bytes)
        self.end = 0

    def put(self, row: int, code: str, text: str) -> None:
        data_code, data_text = code.encode(), text.encode()
        self.handle.write(data_code + data_text)
        self.where[row] = (self.end, len(data_code), len(data_text))
        self.end += len(data_code) + len(data_text)

    def get(self, row: int) -> tuple[str, str]:
        offset, n_code, n_text = self.where[row]
        self.handle.flush()
        data = os.pread(self.handle.fileno(), n_code + n_text, offset)
        return data[:n_code].decode(), data[n_code:].decode()

    def close(self) -> None:
        self.handle.close()


def attack_batches(
    spec: str,
    splits: Sequence[str],
    batches: RowBatches,
    sink: Sink,
    spill_dir: Path,
    attack_params: dict[str, dict[str, Any]] | None = None,
    workers: int = 1,
    progress: bool = True,
    keep_analyses: bool = True,
) -> AttackReport:
    """Attack a dataset's ``splits`` (in dataset order) read by ``batches``, writing each batch's attacked
    rows to ``sink`` as ``run_attack`` would have attacked them; the report. ``spill_dir``: where the
    temporary files go (the output's folder): the repeated snippets' attacked code and, unless
    ``keep_analyses`` is false, the analyses of a dataset-wide renaming's survey pass (``_KeptAnalyses``)."""
    started = time.perf_counter()
    components = parse_spec(spec, attack_params)
    keys: list[np.ndarray] = []
    found: set[str] = set()
    bar = tqdm(desc=f"{spec}: snippet keys", unit="fn", disable=not progress, mininterval=2)
    for split in splits:
        for frame in batches(split, SNIPPET_COLUMNS):
            languages, codes = frame["language"].tolist(), frame["code"].tolist()
            found.update(languages)
            keys.append(snippet_keys(languages, codes))
            bar.update(len(languages))
    bar.close()
    check_languages(spec, components, sorted(found))
    occurrences = _Occurrences(keys)
    kept = _KeptAnalyses(spill_dir) if keep_analyses else None
    try:
        contexts = _survey(spec, components, splits, batches, occurrences, workers, progress, kept)
        report = AttackReport(spec)
        spill = _Spill(spill_dir)
        try:
            bar = tqdm(total=occurrences.rows, desc=spec, unit="fn", disable=not progress, mininterval=2)
            for chunk, (split, start, frame, first, new) in enumerate(_chunks(splits, batches, occurrences, None)):
                unique = _unique(frame, new)
                chunk_contexts = {step: per_chunk[chunk] for step, per_chunk in contexts.items()}
                chunk_kept = kept.chunk(chunk) if kept is not None else None
                codes, texts = attack_snippets(
                    spec, components, unique, workers, False, report, chunk_contexts, chunk_kept
                )
                sink(split, attacked_frame(frame, *_rows(start, first, new, codes, texts, occurrences, spill)))
                bar.update(len(frame))
            bar.close()
        finally:
            spill.close()
    finally:
        if kept is not None:
            kept.close()
    report.seconds = time.perf_counter() - started
    return report


def _chunks(
    splits: Sequence[str], batches: RowBatches, occurrences: _Occurrences, columns: list[str] | None
) -> Iterator[tuple[str, int, pd.DataFrame, np.ndarray, np.ndarray]]:
    """Each batch of rows in dataset order (its ``columns``, None: all): (split, its first row, the rows,
    where each's snippet first occurs, whether each is that first occurrence)."""
    start = 0
    for split in splits:
        for frame in batches(split, columns):
            first, new = occurrences.batch(start, start + len(frame))
            yield split, start, frame, first, new
            start += len(frame)


def _unique(frame: pd.DataFrame, new: np.ndarray) -> list[tuple[str, str]]:
    """The snippets that first occur in this batch, in order."""
    languages, codes = frame["language"].tolist(), frame["code"].tolist()
    return [(languages[i], codes[i]) for i in np.flatnonzero(new)]


def _rows(
    start: int,
    first: np.ndarray,
    new: np.ndarray,
    codes: list[str],
    texts: list[str],
    occurrences: _Occurrences,
    spill: _Spill,
) -> tuple[list[str], list[str]]:
    """Every row's attacked code and renaming: its own where it first occurs (spilled if it occurs again),
    else the first occurrence's, from this batch or from the spill."""
    here: dict[int, int] = {}  # first row -> its position among this batch's new snippets
    out_codes: list[str] = []
    out_texts: list[str] = []
    repeated = occurrences.repeated[start : start + len(first)]
    for offset, (row, is_new) in enumerate(zip(first.tolist(), new.tolist(), strict=True)):
        if is_new:
            j = here[row] = len(here)
            code, text = codes[j], texts[j]
            if repeated[offset]:
                spill.put(row, code, text)
        elif row in here:
            code, text = codes[here[row]], texts[here[row]]
        else:
            code, text = spill.get(row)
        out_codes.append(code)
        out_texts.append(text)
    return out_codes, out_texts


def _survey(
    spec: str,
    components: Sequence[Component],
    splits: Sequence[str],
    batches: RowBatches,
    occurrences: _Occurrences,
    workers: int,
    progress: bool,
    kept: _KeptAnalyses | None = None,
) -> dict[int, list[Any]]:
    """Renaming step -> each chunk's context, for the dataset-wide renaming steps of the spec (one pass over
    the dataset each, the earlier steps applied); a step whose parameters need no survey gets ``None``.
    ``kept``: where each chunk's analyses at each surveyed step are kept for the passes after."""
    contexts: dict[int, list[Any]] = {}
    renamings = [c for c in components if c.attack.kind == "renaming"]
    for step, component in enumerate(renamings):
        plan = component.attack.survey
        if plan is None:
            continue
        if not plan.wanted(component.params):
            contexts[step] = _Every(None)
            continue
        statistics = []
        bar = tqdm(total=occurrences.rows, desc=f"{spec}: survey", unit="fn", disable=not progress, mininterval=2)
        for chunk, (_, _, frame, _, new) in enumerate(_chunks(splits, batches, occurrences, SNIPPET_COLUMNS)):
            earlier = {s: per_chunk[chunk] for s, per_chunk in contexts.items()}
            chunk_kept = kept.chunk(chunk) if kept is not None else None
            unique = _unique(frame, new)
            statistics.append(survey_snippets(spec, components, unique, workers, step, earlier, chunk_kept))
            bar.update(len(frame))
        bar.close()
        contexts[step] = plan.contexts(statistics, component.params)
    return contexts


_KEPT_PIECE = 1024  # analyses encoded at once (one line of JSON)
_JSON = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))  # (a lone surrogate as \\udcxx, read back)


def _bytes_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _encode_analysed(item: tuple) -> list:
    """An ``_analyse_batch`` result as JSON values: (Analysis or None, kept code, error)."""
    analysis, kept, error = item
    if analysis is None:
        return [None, kept, error]
    ids = analysis.identifiers
    return [
        [
            analysis.language,
            _bytes_text(analysis.data),
            [[a, b, _bytes_text(text)] for a, b, text in analysis.edits],
            list(ids.names),
            ids.roles,
            ids.occurrences,
            sorted(ids.reserved),
            sorted(ids.members),
            sorted(ids.fun_keywords),
        ],
        kept,
        error,
    ]


def _decode_analysed(item: list) -> tuple:
    plain, kept, error = item
    if plain is None:
        return None, kept, error
    language, data, edits, names, roles, occurrences, reserved, members, fun_keywords = plain
    ids = Identifiers(
        names=tuple(names),
        roles=roles,
        occurrences={name: tuple(map(tuple, spans)) for name, spans in occurrences.items()},
        reserved=frozenset(reserved),
        members=frozenset(members),
        fun_keywords=frozenset(fun_keywords),
    )
    edits = tuple((a, b, _text_bytes(text)) for a, b, text in edits)
    return Analysis(language, _text_bytes(data), edits, ids), kept, error


# kind -> (encoder, decoder) of one kept item: "analysed" (``_analyse_batch``), "renamed" (``engine.Renamed``)
_ENCODERS = {"analysed": _encode_analysed, "renamed": list}
_DECODERS = {"analysed": _decode_analysed, "renamed": tuple}


class _KeptAnalyses:
    """What a survey pass made of each chunk, for the passes after it (the renaming pass; a later step's
    survey): the analyses of the surveyed dataset-wide renaming step and the results of the renaming steps
    before it (``csbench.attacks.engine.KeptAnalyses``), so each snippet is parsed and analysed once per
    step, as ``run_attack`` does, not once more per pass (benchmarks/bench_attack_stream.py). They are
    written as lines of JSON (nothing is pickled) into a temporary file beside the output (a few times the
    size of the code, per kept step; removed when closed) that has no name on Linux (``O_TMPFILE``) and is
    written and read back only by this process. A chunk's work is taken back only for the very jobs it was
    made of (their digest, checked); a chunk not kept, or a write that fails (a full disk: warned once,
    nothing more is kept), is worked on again, to the same result."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.handle: Any = None
        # (step, kind, chunk) -> (offset, size, the jobs' digest)
        self.where: dict[tuple[int, str, int], tuple[int, int, bytes]] = {}
        self.end = 0
        self.broken = False

    def _open(self) -> Any:
        self.folder.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile(dir=self.folder, prefix=".attack-analyses-")  # (closed by close)

    def chunk(self, chunk: int) -> _ChunkAnalyses:
        return _ChunkAnalyses(self, chunk)

    def put(self, step: int, kind: str, chunk: int, jobs: list[tuple[str, str, bool]], value: list) -> None:
        if self.broken:
            return
        try:
            if self.handle is None:
                self.handle = self._open()
            self.handle.seek(self.end)
            encode = _ENCODERS[kind]
            for start in range(0, len(value), _KEPT_PIECE):  # one line of JSON per piece: no copy of it all
                self.handle.write(_JSON.encode([encode(v) for v in value[start : start + _KEPT_PIECE]]).encode())
                self.handle.write(b"\n")
            self.handle.flush()
            end = self.handle.tell()
        except OSError as err:  # what was kept before stays whole: nothing is written over it
            self.broken = True
            log.warning("could not keep the attack survey's analyses in %s (%s): the next passes analyse again",
                        self.folder, err)  # fmt: skip
            return
        self.where[step, kind, chunk] = (self.end, end - self.end, _jobs_digest(jobs))
        self.end = end

    def take(self, step: int, kind: str, chunk: int, jobs: list[tuple[str, str, bool]]) -> list | None:
        found = self.where.get((step, kind, chunk))
        if found is None:
            return None
        offset, size, digest = found
        if digest != _jobs_digest(jobs):  # pragma: no cover - the passes analyse the same code (tested)
            log.warning("attack in batches: chunk %d of step %d differs from its survey: attacked again", chunk, step)
            return None
        self.handle.seek(offset)
        value: list = []
        decode = _DECODERS[kind]
        while self.handle.tell() < offset + size:
            value += [decode(v) for v in json.loads(self.handle.readline())]
        if self.handle.tell() != offset + size:  # pragma: no cover - a file changed under this process
            raise OSError(f"the attack's kept analyses: {self.handle.tell() - offset} of {size} bytes read at {offset}")
        return value

    @property
    def bytes(self) -> int:
        return self.end

    def close(self) -> None:
        if self.where:
            log.debug("attack in batches: kept %d analysed chunks, %d bytes", len(self.where), self.end)
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class _ChunkAnalyses:
    """One chunk's view of ``_KeptAnalyses`` (``csbench.attacks.engine.KeptAnalyses``)."""

    __slots__ = ("chunk", "store")

    def __init__(self, store: _KeptAnalyses, chunk: int) -> None:
        self.store, self.chunk = store, chunk

    def put(self, step: int, kind: str, jobs: list[tuple[str, str, bool]], value: list) -> None:
        self.store.put(step, kind, self.chunk, jobs, value)

    def take(self, step: int, kind: str, jobs: list[tuple[str, str, bool]]) -> list | None:
        return self.store.take(step, kind, self.chunk, jobs)


def _jobs_digest(jobs: list[tuple[str, str, bool]]) -> bytes:
    """16 bytes that stand for the analysis jobs: BLAKE2b-128 of their keys (``csbench.digests.text_keys`` of
    language, comments kept and code, as ``snippet_key`` keys a snippet)."""
    keys = text_keys(f"{language}\0{int(keep)}\0{code}" for code, language, keep in jobs)
    return hashlib.blake2b(keys.tobytes(), digest_size=16).digest()


class _Every:
    """The same context for every chunk."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, chunk: int) -> Any:
        return self.value
