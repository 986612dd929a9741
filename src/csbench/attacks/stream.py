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
as ``run_attack``'s does. A dataset-wide renaming costs one more analysis pass over the dataset
(two when two are composed), which ``run_attack`` does not need: the ``attack`` phase streams only a dataset
of more than ``batch_rows`` rows.
"""

from __future__ import annotations

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
from csbench.attacks.spec import Component, check_languages, parse_spec
from csbench.digests import text_key, text_keys

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
) -> AttackReport:
    """Attack a dataset's ``splits`` (in dataset order) read by ``batches``, writing each batch's attacked
    rows to ``sink`` as ``run_attack`` would have attacked them; the report. ``spill_dir``: where the
    temporary file of repeated snippets goes (the output's folder)."""
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
    contexts = _survey(spec, components, splits, batches, occurrences, workers, progress)
    report = AttackReport(spec)
    spill = _Spill(spill_dir)
    try:
        bar = tqdm(total=occurrences.rows, desc=spec, unit="fn", disable=not progress, mininterval=2)
        for chunk, (split, start, frame, first, new) in enumerate(_chunks(splits, batches, occurrences, None)):
            unique = _unique(frame, new)
            chunk_contexts = {step: per_chunk[chunk] for step, per_chunk in contexts.items()}
            codes, texts = attack_snippets(spec, components, unique, workers, False, report, chunk_contexts)
            sink(split, attacked_frame(frame, *_rows(start, first, new, codes, texts, occurrences, spill)))
            bar.update(len(frame))
        bar.close()
    finally:
        spill.close()
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
) -> dict[int, list[Any]]:
    """Renaming step -> each chunk's context, for the dataset-wide renaming steps of the spec (one pass over
    the dataset each, the earlier steps applied); a step whose parameters need no survey gets ``None``."""
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
            statistics.append(survey_snippets(spec, components, _unique(frame, new), workers, step, earlier))
            bar.update(len(frame))
        bar.close()
        contexts[step] = plan.contexts(statistics, component.params)
    return contexts


class _Every:
    """The same context for every chunk."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, chunk: int) -> Any:
        return self.value
