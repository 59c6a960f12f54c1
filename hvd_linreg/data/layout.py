"""This rank's shard of the global dataset: synthetic (as in the seed) or read from a file.

Layout contract (docs/data.md repeats it; tests/reference.py simulates it). With N rows, s ranks,
B rows per rank per step and G = s * B rows per step (the global batch):
  * the rows are cut into runs of g consecutive rows, g a divisor of B (run_length): g = 1
    unless B rows of a .npy/.npz file (Table.row_bytes) reach _MIN_RUN_BYTES, and
    then the smallest divisor of B whose rows do; g = 1 on one rank and for synthetic data
    and CSV, which no rank reads by runs;
  * SGD uses the first N_sgd = N - N mod (s * g) rows; run q of them is rank q mod s's, so
    rank r's shard is n = N_sgd / s rows (runs of g rows, s * g apart), and step i uses the
    shard's rows (i * B + j) mod n, j = 0 .. B-1 (a batch may wrap around the shard's end);
  * hence step i's global batch is the rows (i * G + k) mod N_sgd, k = 0 .. G-1: it depends
    on G and N_sgd alone, not on s;
  * the last N - N_sgd rows (fewer than s * g) are in no batch: they are cut into s
    consecutive pieces, one per rank, so that the passes over the whole dataset (the exact
    solution, the final loss) see all N rows;
  * a run without batches (--solver exact) has N_sgd = 0: all N rows are cut into s consecutive
    pieces, rank r's the rows r * N / s .. (r + 1) * N / s - 1, or, where the rows come to the
    ranks already cut (a CSV's records, parsed by the rank whose byte range holds them; the rows
    each rank gives fit()), the rows each rank has: no row moves.
A shard in memory holds its n rows, then a copy of their first B - g, then its piece of the
rest: a batch starts at a multiple of g below n, so every batch is one slice (trainer.py).
Kept: k ranks with batch B walk the same batches as 1 rank with batch k * B when both use the
same N_sgd (whenever k * g divides N); a checkpoint resumes exactly on another number of ranks
with the same global batch and the same N_sgd (otherwise the resume warns). Left out of SGD:
under s * g rows (under s with g = 1). Read: a rank reads its runs and its piece
of the rest, about 1/s of a file, where runs are long enough to read alone; shorter runs share
pages with the other ranks' rows, and a rank reads whole strides of s * g rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.table import PART_BYTES, Table
from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.buffers import aligned_empty

# Runs at least this long are read alone: then the pages at a run's two ends, which it shares
# with other ranks' rows, add little to what is read.
_MIN_RUN_BYTES = 256 << 10


def global_batch_size(batch_size: int, size: int) -> int:
    """G, the rows of one step over all ranks: B rows on each of size ranks."""
    return batch_size * size


@dataclass(frozen=True)
class Layout:
    """Which of the N global rows this rank holds, by the layout contract above."""

    num_rows: int  # N, every row of the dataset
    rank: int
    size: int
    batch_size: int  # B, per rank
    run_length: int = 1  # g: the rows of each of the rank's runs; divides B
    batched: bool = True  # False for --solver exact: no batch, and no copy of rows for them
    # without batches: each rank's first row, then N (the rows as the ranks have them); None:
    # the even cut
    pieces: tuple[int, ...] | None = None

    @property
    def global_batch(self) -> int:
        """G, the rows of one step over all ranks."""
        return global_batch_size(self.batch_size, self.size)

    @property
    def stride(self) -> int:  # s * g: from one of a rank's runs to its next
        return self.size * self.run_length

    @property
    def num_runs(self) -> int:  # m: this rank's runs (none without batches)
        return self.num_rows // self.stride if self.batched else 0

    @property
    def num_batched(self) -> int:  # N_sgd: rows in some batch
        return self.num_runs * self.stride

    @property
    def num_train(self) -> int:  # n: this rank's rows in batches
        return self.num_runs * self.run_length

    @property
    def num_wrap(self) -> int:
        """Rows held twice: a batch starts at a multiple of g below n, so a copy of the first
        B - g rows after the n makes every batch one slice, also one that wraps around. None
        where no batch is taken."""
        return self.batch_size - self.run_length if self.batched else 0

    def _tail_start(self, rank: int) -> int:
        if self.pieces is not None:
            return self.pieces[rank]
        return self.num_batched + rank * (self.num_rows - self.num_batched) // self.size

    @property
    def tail(self) -> slice:
        """This rank's piece of the rows in no batch."""
        return slice(self._tail_start(self.rank), self._tail_start(self.rank + 1))

    @property
    def num_local(self) -> int:  # rows of this rank, each once
        return self.num_train + self.tail.stop - self.tail.start

    @property
    def num_held(self) -> int:  # rows of a shard in memory: num_local and the copy
        return self.num_local + self.num_wrap

    def held_positions(self) -> np.ndarray:
        """What a shard in memory holds, as positions in this rank's order (its runs, then
        its tail piece): the n rows in batches, the first B - g of them again, the tail."""
        n = self.num_train
        return np.r_[0:n, 0 : self.num_wrap, n : self.num_local]

    def rows(self) -> np.ndarray:
        """The global row ids a shard in memory holds, in its order (held_positions)."""
        runs = np.arange(self.num_runs, dtype=np.int64)[:, None] * self.stride
        runs = (runs + self.rank * self.run_length + np.arange(self.run_length)).ravel()
        tail = np.arange(self.tail.start, self.tail.stop, dtype=np.int64)
        return np.concatenate([runs, runs[: self.num_wrap], tail])

    def global_row(self, local: int) -> int:
        """The global id of this rank's row number local (its runs, then its tail piece)."""
        return int(self.global_rows(np.array([local]))[0])

    def global_rows(self, local: np.ndarray) -> np.ndarray:
        """global_row of each of an array of local row numbers."""
        local = np.asarray(local, np.int64)
        run, j = np.divmod(local, self.run_length)
        batched = run * self.stride + self.rank * self.run_length + j
        return np.where(local >= self.num_train, self.tail.start + local - self.num_train, batched)

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The rank that holds each of the global row ids."""
        batched = ids < self.num_batched
        tail_starts = [self._tail_start(r) for r in range(self.size)]
        in_tail = np.searchsorted(tail_starts, ids, side="right") - 1
        return np.where(batched, (ids % self.stride) // self.run_length, in_tail)

    def take(
        self, table: Table, dtype, rows: range, carried: int = 0, tail: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """This rank's rows of table, as dtype, in aligned arrays: its rows in batches
        rows.start .. rows.stop - 1 (multiples of g), taken mod n, then (with tail) its piece
        of the rows in no batch. Rows it holds twice are read once. (X, y, C): the table's
        last `carried` feature columns are C, in float64 (None when there are none)."""
        once = range(rows.start, min(rows.stop, rows.start + self.num_train))
        tail = self.tail if tail else slice(0, 0)
        p = table.num_features - carried
        X = aligned_empty((len(rows) + tail.stop - tail.start, p), dtype)
        y = aligned_empty((len(X),), dtype)
        C = np.empty((len(X), carried)) if carried else None
        at = 0

        def put(X_part: np.ndarray, y_part: np.ndarray) -> None:
            nonlocal at
            X[at : at + len(y_part)], y[at : at + len(y_part)] = X_part[:, :p], y_part
            if C is not None:
                C[at : at + len(y_part)] = X_part[:, p:]
            at += len(y_part)

        for part in self._parts(table, once):
            put(*part)
        X[at : len(rows)], y[at : len(rows)] = X[: len(rows) - at], y[: len(rows) - at]
        if C is not None:
            C[at : len(rows)] = C[: len(rows) - at]
        at = len(rows)
        for part in table.parts(tail.start, tail.stop):
            put(*part)
        return X, y, C

    def _parts(self, table: Table, rows: range) -> Iterator[tuple]:
        """This rank's rows in batches rows.start .. rows.stop - 1, taken mod n, in order."""
        g, m = self.run_length, self.num_runs
        first = rows.start // g
        while first < rows.stop // g:  # up to the end of the shard, then on from its start
            count = min(rows.stop // g - first, m - first % m)
            yield from self._runs(table, first % m, first % m + count)
            first += count

    def _runs(self, table: Table, first: int, last: int) -> Iterator[tuple]:
        """This rank's runs first .. last - 1, read in parts of at most PART_BYTES."""
        g, S, at = self.run_length, self.stride, self.rank * self.run_length
        if g * table.row_bytes >= _MIN_RUN_BYTES:  # read each run: only this rank's pages
            for q in range(first, last):
                yield from table.parts(q * S + at, q * S + at + g)
            return
        # Shorter runs share pages with the other ranks': read whole strides, keep this rank's.
        per_read = max(1, PART_BYTES // (S * table.row_bytes))
        for q in range(first, last, per_read):
            k = min(per_read, last - q)
            X, y = table.read(q * S, (q + k) * S)
            mine = np.s_[:, self.rank]
            yield (
                X.reshape(k, self.size, g, -1)[mine].reshape(k * g, -1),
                y.reshape(k, self.size, g)[mine].reshape(-1),
            )


def run_length(size: int, batch_size: int, row_bytes: int | None) -> int:
    """g, the rows of each run (docs/data.md, layout): 1 on one rank, for data that is not read by
    ranges of rows (row_bytes None), and where B rows are under _MIN_RUN_BYTES: such runs
    share pages with the other ranks' rows, and a rank reads whole strides anyway. Otherwise
    the smallest divisor of B whose rows reach _MIN_RUN_BYTES: the fewest rows left out
    (under s * g) while each run is still worth reading alone."""
    if size == 1 or row_bytes is None or batch_size * row_bytes < _MIN_RUN_BYTES:
        return 1
    return next(
        g
        for g in range(1, batch_size + 1)
        if batch_size % g == 0 and g * row_bytes >= _MIN_RUN_BYTES
    )


def layout_for(
    num_samples: int,
    rank: int,
    size: int,
    batch_size: int,
    row_bytes: int | None = None,
    whole_batches: bool = False,
    batched: bool = True,
    counts: list[int] | None = None,
) -> Layout:
    """The layout of num_samples rows; row_bytes: a row's bytes in a file read by ranges of
    rows, which sets the runs' length (run_length); whole_batches: runs of B rows; batched:
    False for --solver exact, which takes no batch: a B above the shard is cut to it; counts:
    the rows each rank has (in order), which a layout without batches keeps where they are,
    where every rank has some (else it cuts them evenly)."""
    if num_samples < size:
        raise UsageError(
            f"{num_samples} samples cannot be split over {size} ranks: "
            "use more samples or fewer ranks"
        )
    shard = num_samples // size
    if not batched:
        batch_size = min(batch_size, shard)
    if batch_size > shard:
        raise UsageError(
            f"--batch_size {batch_size} is larger than each rank's shard of {shard} rows "
            f"({num_samples} samples over {size} ranks): use --batch_size {shard} or less, "
            "more samples, or fewer ranks"
        )
    run = batch_size if whole_batches and size > 1 else run_length(size, batch_size, row_bytes)
    kept = not batched and counts is not None and min(counts) > 0
    pieces = tuple(int(c) for c in np.cumsum([0, *counts])) if kept else None
    return Layout(num_samples, rank, size, batch_size, run, batched, pieces)
