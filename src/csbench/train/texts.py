"""Training pairs kept in a file and read back by position: a training's memory does not grow with its split.

A training held its split's (query, code, language) as Python strings: 854,061 pairs of the growth
benchmark's 1 M corpus took 3.5 GiB for a bi-encoder (docs/performance.md); a cross-encoder's matching
pairs read it from the table too (``csbench.train.cross_encoder``, the negatives drawn from
``csbench.digests.text_ids`` of its ``code`` column). :class:`TextTable` writes the rows of
some text columns to one file as they are read (a split's row batches), each row's values one after
another in UTF-8, and keeps only where each value starts (8 bytes per value); ``table[i]`` reads row
``i`` back with one ``os.pread`` (no mapping: the process holds only what it reads). It is a map-style
``torch.utils.data.Dataset`` whose items are the same tuples of strings the in-memory rows were, so a
training over it is the training over them (tests/train/test_text_table.py: the same weights).
``column(name)`` streams one column in order (a vocabulary learnt on the split). The file is removed by
``close`` (or when the table is collected); one a killed training left (named for its process,
``.csbench-train-texts.<pid>@<host>.<random>.tmp``) by the next table written in that folder
(``csbench.io.temporary_beside``). ``DataLoader`` workers pickle its path and offsets and open the
file themselves.

(``csbench.summarization.data.PairStore`` memory-maps an Arrow file instead, and keeps it between runs;
a mapping's touched pages count in the resident set while mapped.)
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch.utils.data import Dataset

from csbench.io import temporary_beside


class TextTableError(ValueError):
    """A row that cannot be stored (a missing value); names where it came from."""


class TextTable(Dataset):
    """Rows of text ``columns`` in a file (see the module docstring)."""

    def __init__(self, path: Path, columns: tuple[str, ...], starts: np.ndarray, owned: bool) -> None:
        self.path, self.columns, self.starts, self.owned = path, columns, starts, owned
        self._fd: int | None = os.open(path, os.O_RDONLY)
        self._rows = (len(starts) - 1) // len(columns)

    @classmethod
    def write(
        cls, batches: Iterable[pd.DataFrame], columns: Sequence[str], folder: str | os.PathLike[str], where: str = ""
    ) -> TextTable:
        """A table of ``columns`` of every row of ``batches`` (in order), in a new file in ``folder``,
        removed when the table is closed. ``where``: the source named by an error."""
        columns = tuple(columns)
        # named for this process (pid@host): a table left by a killed training is removed by the next one
        path = temporary_beside(Path(folder) / "csbench-train-texts")
        handle = open(path, "wb")  # noqa: SIM115 - closed below
        starts: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        end, row = 0, 0
        try:
            with handle:
                for frame in batches:
                    values = [frame[name].tolist() for name in columns]
                    sizes = np.empty((len(frame), len(columns)), dtype=np.int64)
                    chunks = []
                    for i in range(len(frame)):
                        for j, column in enumerate(values):
                            value = column[i]
                            if not isinstance(value, str):
                                raise TextTableError(
                                    f"{where or 'rows'}: row {row + i} has no {columns[j]!r} text ({value!r})"
                                )
                            data = value.encode("utf-8")
                            sizes[i, j] = len(data)
                            chunks.append(data)
                    handle.write(b"".join(chunks))
                    offsets = end + np.cumsum(sizes.reshape(-1))
                    if offsets.size:
                        end = int(offsets[-1])
                    starts.append(offsets)
                    row += len(frame)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return cls(path, columns, np.concatenate(starts), owned=True)

    def __len__(self) -> int:
        return self._rows

    def _read(self, start: int, stop: int) -> bytes:
        if self._fd is None:
            raise ValueError(f"{self.path}: the table is closed")
        return os.pread(self._fd, stop - start, start)

    def __getitem__(self, i: int) -> tuple[str, ...]:
        i = int(i)
        if i < 0:
            i += self._rows
        if not 0 <= i < self._rows:
            raise IndexError(f"row {i} out of range: the table holds {self._rows}")
        width = len(self.columns)
        bounds = self.starts[i * width : (i + 1) * width + 1].tolist()
        data = self._read(bounds[0], bounds[-1])
        first = bounds[0]
        return tuple(data[a - first : b - first].decode("utf-8") for a, b in itertools.pairwise(bounds))

    def column(self, name: str, rows: int = 4096) -> Iterator[str]:
        """The values of column ``name``, in row order, read ``rows`` rows at a time."""
        j = self.columns.index(name)
        width = len(self.columns)
        for first in range(0, self._rows, rows):
            last = min(first + rows, self._rows)
            bounds = self.starts[first * width : last * width + 1]
            data = self._read(int(bounds[0]), int(bounds[-1]))
            base = int(bounds[0])
            for i in range(last - first):
                a, b = int(bounds[i * width + j]) - base, int(bounds[i * width + j + 1]) - base
                yield data[a:b].decode("utf-8")
            del data  # not held while the next rows are read

    def close(self) -> None:
        """Close the file (and remove it, where this table wrote it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.owned:
                self.path.unlink(missing_ok=True)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> TextTable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers: the path and offsets, not the descriptor
        return {"path": self.path, "columns": self.columns, "starts": self.starts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], state["columns"], state["starts"], owned=False)

    def __repr__(self) -> str:
        return f"TextTable({self._rows} rows of {', '.join(self.columns)} in {self.path})"
