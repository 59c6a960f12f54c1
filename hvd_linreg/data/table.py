"""A dataset read by ranges of rows: the Table every random-access reader returns, and the
pieces readers share (reads across files, stored arrays read with pread)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from hvd_linreg.data.missing import file_row
from hvd_linreg.errors import UsageError

# Reads of this many bytes at most: a part in memory stays small beside the shard.
PART_BYTES = 8 << 20


@dataclass(frozen=True)
class Table:
    """A data file's rows, read by ranges of rows: features and target."""

    read: Callable[[int, int], tuple[np.ndarray, np.ndarray]]  # rows [start, stop): X, y
    num_rows: int
    num_features: int
    row_bytes: int  # a row's bytes in the file
    dtype: np.dtype  # the file's own precision (own_dtype)
    columns: tuple[str, ...] | None = None  # the features' names then the target's, if named
    file_rows: tuple[int, ...] | None = None  # rows of each file, in order, when several
    whole_rows: int = 0  # the most rows read whole to read any of them: a Parquet row group
    # categorical columns (data/categorical.py): each one's name -> its levels; the features
    # are then their dummies, and sources the data's columns they come from
    levels: dict[str, list] | None = None
    sources: tuple[str, ...] | None = None
    # --missing drop: the files' rows dropped (0-based over the files, sorted); the table's
    # rows are the others, in order, and file_rows counts them all
    dropped: np.ndarray | None = None
    # a categorical column's position among the columns -> its levels, where the table reads
    # it as its level codes (CodedFeatures: the shard writes the dummies as it is read)
    coded: dict[int, list] | None = None
    # a target of words or categories: its levels, the target each row's level's number
    target_levels: list | None = None

    def parts(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Rows start .. stop - 1, in reads of at most PART_BYTES."""
        step = max(1, PART_BYTES // self.row_bytes)
        for first in range(start, stop, step):
            yield self.read(first, min(first + step, stop))


def own_dtype(*dtypes) -> np.dtype:
    """The precision a file trains in when --dtype is not given: float32 for what float32 holds
    exactly (float32, float16, small integers, booleans), float64 for anything wider."""
    return np.dtype(np.float64 if np.result_type(np.float32, *dtypes).itemsize > 4 else np.float32)


def read_across(
    starts: np.ndarray, read_part: Callable[[int, int, int], tuple], num_features: int, dtype
) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
    """A Table's read over parts laid end to end (files, row groups): part i holds the global
    rows starts[i] .. starts[i + 1] - 1, and read_part(i, lo, hi) reads its rows lo .. hi - 1."""

    def read(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        pieces = []
        for i in range(max(int(np.searchsorted(starts, start, "right")) - 1, 0), len(starts) - 1):
            if starts[i] >= stop:
                break
            lo, hi = max(start, starts[i]) - starts[i], min(stop, starts[i + 1]) - starts[i]
            if hi > lo:
                pieces.append(read_part(i, int(lo), int(hi)))
        if len(pieces) == 1:
            return pieces[0]
        if not pieces:
            return np.empty((0, num_features), dtype), np.empty(0, dtype)
        return np.concatenate([X for X, _ in pieces]), np.concatenate([y for _, y in pieces])

    return read


def without_rows(table: Table, dropped: np.ndarray) -> Table:
    """The table without its rows `dropped` (sorted; rows of the files): its row i is the
    i-th row kept, read as a range of the files' rows with the dropped ones taken out."""
    if not len(dropped):
        return table

    def read(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        if stop <= start:
            return table.read(0, 0)
        first, last = file_row(start, dropped), file_row(stop - 1, dropped)
        X, y = table.read(first, last + 1)
        gone = dropped[np.searchsorted(dropped, first) : np.searchsorted(dropped, last)] - first
        if len(gone):
            keep = np.ones(len(y), bool)
            keep[gone] = False
            X, y = X[keep], y[keep]
        return X, y

    return replace(table, read=read, num_rows=table.num_rows - len(dropped), dropped=dropped)


def rows_of(table: Table, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The table's rows ids (increasing), each read spanning no more than PART_BYTES of rows."""
    if len(ids) == 0:
        return table.read(0, 0)
    step = max(1, PART_BYTES // table.row_bytes)
    parts, at = [], 0
    while at < len(ids):
        first = int(ids[at])
        end = int(np.searchsorted(ids, first + step))
        X, y = table.read(first, int(ids[end - 1]) + 1)
        keep = ids[at:end] - first
        parts.append((X[keep], y[keep]))
        at = end
    return np.concatenate([X for X, _ in parts]), np.concatenate([y for _, y in parts])


@dataclass(frozen=True)
class StoredArray:
    """A C-ordered array in a file at an offset (a .npy, a stored .npz member), read by ranges
    of rows with pread: the kernel reads just those bytes, where page faults on a memory map
    would read up to read_ahead_kb (megabytes) around each."""

    path: str
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize

    def reshape(self, *shape: int) -> StoredArray:
        """The same bytes as another C-ordered shape; one -1 stands for what is left."""
        known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
        size = int(np.prod(self.shape, dtype=np.int64))
        return replace(self, shape=tuple(size // known if n == -1 else n for n in shape))

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(len(self))
        out = np.empty((max(stop - start, 0), *self.shape[1:]), self.dtype)
        buffer = memoryview(out.reshape(-1).view(np.uint8))
        position = self.offset + start * self.row_bytes
        with open_without_readahead(self.path) as f:
            done = 0
            while done < len(buffer):
                got = os.preadv(f.fileno(), [buffer[done:]], position + done)
                if got == 0:
                    raise UsageError(f"{self.path} ends before its array does (truncated?)")
                done += got
        return out


def open_without_readahead(path):
    """The file, unbuffered, read as asked: any read through readahead (a buffered header
    read too) marks pages whose later reads fetch megabytes beyond what is asked for."""
    f = open(path, "rb", buffering=0)
    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
    return f
