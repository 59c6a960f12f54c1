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
    solution, the final loss) see all N rows.
A shard in memory holds its n rows, then a copy of their first B - g, then its piece of the
rest: a batch starts at a multiple of g below n, so every batch is one slice (train.py).
Kept: k ranks with batch B walk the same batches as 1 rank with batch k * B when both use the
same N_sgd (whenever k * g divides N); a checkpoint resumes exactly on another number of ranks
with the same global batch and the same N_sgd (otherwise the resume warns). Left out of SGD:
under s * g rows (under s with g = 1). Read: a rank reads its runs and its piece
of the rest, about 1/s of a file, where runs are long enough to read alone; shorter runs share
pages with the other ranks' rows, and a rank reads whole strides of s * g rows.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hvd_linreg.config import SYNTHETIC_FEATURES, SYNTHETIC_SAMPLES, Config, UsageError
from hvd_linreg.ranks import Job, memory_per_rank

TRUE_BIAS = 2.0
NOISE_STDDEV = 0.1


def true_weights(num_features: int) -> np.ndarray:
    """w_true[j] = 5 / (j + 1): 5 for the seed's single feature, distinct for every feature."""
    return 5.0 / np.arange(1, num_features + 1, dtype=np.float64)


@dataclass(frozen=True)
class Layout:
    """Which of the N global rows this rank holds, by the layout contract above."""

    num_rows: int  # N, every row of the dataset
    rank: int
    size: int
    batch_size: int  # B, per rank
    run: int = 1  # g: the rows of each of the rank's runs; divides B

    @property
    def global_batch(self) -> int:
        return self.size * self.batch_size

    @property
    def stride(self) -> int:  # s * g: from one of a rank's runs to its next
        return self.size * self.run

    @property
    def num_runs(self) -> int:  # m: this rank's runs
        return self.num_rows // self.stride

    @property
    def num_batched(self) -> int:  # N_sgd: rows in some batch
        return self.num_runs * self.stride

    @property
    def num_train(self) -> int:  # n: this rank's rows in batches
        return self.num_runs * self.run

    @property
    def num_wrap(self) -> int:
        """Rows held twice: a batch starts at a multiple of g below n, so a copy of the first
        B - g rows after the n makes every batch one slice, also one that wraps around."""
        return self.batch_size - self.run

    def _tail_start(self, rank: int) -> int:
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
        runs = (runs + self.rank * self.run + np.arange(self.run)).ravel()
        tail = np.arange(self.tail.start, self.tail.stop, dtype=np.int64)
        return np.concatenate([runs, runs[: self.num_wrap], tail])

    def global_row(self, local: int) -> int:
        """The global id of this rank's row number local (its runs, then its tail piece)."""
        if local >= self.num_train:
            return self.tail.start + local - self.num_train
        run, j = divmod(local, self.run)
        return run * self.stride + self.rank * self.run + j

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The rank that holds each of the global row ids."""
        batched = ids < self.num_batched
        tail_starts = [self._tail_start(r) for r in range(self.size)]
        in_tail = np.searchsorted(tail_starts, ids, side="right") - 1
        return np.where(batched, (ids % self.stride) // self.run, in_tail)

    def take(
        self, table: Table, dtype, rows: range, tail: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of table, as dtype, in aligned arrays: its rows in batches
        rows.start .. rows.stop - 1 (multiples of g), taken mod n, then (with tail) its piece
        of the rows in no batch. Rows it holds twice are read once."""
        once = range(rows.start, min(rows.stop, rows.start + self.num_train))
        tail = self.tail if tail else slice(0, 0)
        X = aligned_empty((len(rows) + tail.stop - tail.start, table.num_features), dtype)
        y = aligned_empty((len(X),), dtype)
        at = 0
        for X_part, y_part in self._parts(table, once):
            X[at : at + len(y_part)], y[at : at + len(y_part)] = X_part, y_part
            at += len(y_part)
        X[at : len(rows)], y[at : len(rows)] = X[: len(rows) - at], y[: len(rows) - at]
        at = len(rows)
        for X_part, y_part in table.parts(tail.start, tail.stop):
            X[at : at + len(y_part)], y[at : at + len(y_part)] = X_part, y_part
            at += len(y_part)
        return X, y

    def _parts(self, table: Table, rows: range) -> Iterator[tuple]:
        """This rank's rows in batches rows.start .. rows.stop - 1, taken mod n, in order."""
        g, m = self.run, self.num_runs
        first = rows.start // g
        while first < rows.stop // g:  # up to the end of the shard, then on from its start
            count = min(rows.stop // g - first, m - first % m)
            yield from self._runs(table, first % m, first % m + count)
            first += count

    def _runs(self, table: Table, first: int, last: int) -> Iterator[tuple]:
        """This rank's runs first .. last - 1, read in parts of at most _PART_BYTES."""
        g, S, at = self.run, self.stride, self.rank * self.run
        if g * table.row_bytes >= _MIN_RUN_BYTES:  # read each run: only this rank's pages
            for q in range(first, last):
                yield from table.parts(q * S + at, q * S + at + g)
            return
        # Shorter runs share pages with the other ranks': read whole strides, keep this rank's.
        per_read = max(1, _PART_BYTES // (S * table.row_bytes))
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


# Reads of this many bytes at most, and runs at least this long are read alone: then the pages
# at a run's two ends, which it shares with other ranks' rows, add under 4 % to what is read.
_PART_BYTES = 8 << 20
_MIN_RUN_BYTES = 256 << 10


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

    def parts(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        step = max(1, _PART_BYTES // self.row_bytes)
        for first in range(start, stop, step):
            yield self.read(first, min(first + step, stop))


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


def _stored_array(p: Path, f, position: int) -> StoredArray | None:
    """The .npy array whose header starts at position in the open file f; None when it is
    not one StoredArray reads (Fortran order, or a format NumPy has no header reader for)."""
    f.seek(position)
    read_header = _NPY_HEADER_READERS.get(np.lib.format.read_magic(f))
    if read_header is None:
        return None
    shape, fortran, dtype = read_header(f)
    if dtype.hasobject:
        raise ValueError("the array holds Python objects, not numbers")
    if fortran or not shape:
        return None
    array = StoredArray(str(p), f.tell(), shape, dtype)
    if os.fstat(f.fileno()).st_size < array.offset + len(array) * array.row_bytes:
        raise ValueError("the file ends before its array does (truncated?)")
    return array


@dataclass
class Shard:
    X: np.ndarray  # (rows, num_features) float32 or float64: the rows of Layout.rows()
    y: np.ndarray  # (rows,), the dtype of X
    layout: Layout
    source: str  # "synthetic" or the data file's path
    w_true: list | None = None  # known for synthetic data only
    b_true: float | None = None
    # Set when the shard is larger than the memory the rank may use: X and y then hold only
    # its first run, and the rest is read from the file as it is used (blocks, train.py).
    table: Table | None = None
    feature_names: tuple[str, ...] | None = None  # from a CSV or Parquet file's columns
    target_name: str | None = None  # the same
    # --validation_fraction: this rank's piece of the held-out rows (X, y), and their number
    # over all ranks; the layout above then numbers the training rows alone.
    validation: tuple[np.ndarray, np.ndarray] | None = None
    num_validation: int = 0
    # Rows of the file read whole (Parquet's largest row group) when that is more than a run:
    # then a rank reads rows of other ranks too (train.prepare warns).
    oversized_reads: int = 0

    @property
    def num_features(self) -> int:
        return self.X.shape[1]

    @property
    def num_samples(self) -> int:
        """Rows in the whole dataset, over all ranks."""
        return self.layout.num_rows

    @property
    def num_train(self) -> int:
        """This rank's rows that SGD's batches use, n: the first n of X and y (in memory),
        followed by a copy of the first layout.num_wrap of them."""
        return self.layout.num_train

    @property
    def dtype(self) -> str:
        return self.X.dtype.name

    def validation_blocks(self, max_rows: int = 1 << 15) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """This rank's validation rows in blocks of max_rows (none without a held-out set)."""
        X, y = self.validation if self.validation is not None else (self.X[:0], self.y[:0])
        for start in range(0, len(y), max_rows):
            yield X[start : start + max_rows], y[start : start + max_rows]

    def blocks(self, max_rows: int = 1 << 15) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All of this rank's rows, each once, runs then tail, in blocks of about max_rows."""
        layout, n = self.layout, self.layout.num_train
        if self.table is None:
            tail = n + layout.num_wrap  # after the copy of the first rows
            for rows in (range(0, n), range(tail, len(self.y))):
                for start in range(rows.start, rows.stop, max_rows):
                    stop = min(start + max_rows, rows.stop)
                    yield self.X[start:stop], self.y[start:stop]
            return
        step = max(1, max_rows // layout.run) * layout.run
        for start in range(0, n, step):
            yield layout.take(self.table, self.dtype, range(start, min(start + step, n)))
        yield layout.take(self.table, self.dtype, range(0), tail=True)


def load_shard(cfg: Config, rank: int, size: int, job: Job | None = None) -> Shard:
    """Build or read only this rank's rows; raise UsageError for anything the user can fix.
    job: the ranks' collectives, which reading a CSV file on several ranks needs, and the
    cores this rank may use, which building synthetic rows uses."""
    if cfg.synthetic:
        num_features = cfg.num_features or SYNTHETIC_FEATURES
        holdout = Holdout.of(cfg, cfg.num_samples or SYNTHETIC_SAMPLES)
        # Runs of 1 row: no file is read, so longer runs would only leave out more rows.
        layout = _layout(holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched)

        def rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            dtype, threads = cfg.dtype or "float32", job.threads if job else 1
            return synthetic_rows(cfg.seed, ids, num_features, dtype, threads)

        validation = rows(holdout.piece(rank, size)) if holdout.held_out else None
        shard = Shard(*rows(holdout.global_ids(layout.rows())), layout, "synthetic")
        return replace(
            shard,
            w_true=true_weights(num_features).tolist(),
            b_true=TRUE_BIAS,
            validation=validation,
            num_validation=len(holdout.validation),
        )
    return read_shard(cfg, rank, size, job)


def _layout(
    num_samples: int,
    rank: int,
    size: int,
    batch_size: int,
    row_bytes: int | None = None,
    whole_batches: bool = False,
    batched: bool = True,
) -> Layout:
    """The layout of num_samples rows; row_bytes: a row's bytes in a file read by ranges of
    rows, which sets the runs' length (run_length); whole_batches: runs of B rows; batched:
    False for --solver exact, which takes no batch: a B above the shard is cut to it."""
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
    return Layout(num_samples, rank, size, batch_size, run)


# --- Synthetic data --------------------------------------------------------------------------
# Every value is a pure function of (seed, row, column): a counter-based generator. A rank
# computes exactly its own rows, and the global dataset is the same for any number of ranks.

_GOLDEN = np.uint32(0x9E3779B9)  # 2**32 / golden ratio: spreads consecutive integers apart


def _mix32(x: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """A bijective 32-bit hash (lowbias32) of every element of x, in place: each output bit
    depends on every input bit, so consecutive counters give unrelated values."""
    np.right_shift(x, np.uint32(16), out=scratch)
    x ^= scratch
    x *= np.uint32(0x7FEB352D)
    np.right_shift(x, np.uint32(15), out=scratch)
    x ^= scratch
    x *= np.uint32(0x846CA68B)
    np.right_shift(x, np.uint32(16), out=scratch)
    x ^= scratch
    return x


def _hash32(x: np.ndarray) -> np.ndarray:
    return _mix32(x.astype(np.uint32), np.empty(x.shape, np.uint32))


def _row_keys(seed: int, rows: np.ndarray) -> np.ndarray:
    """One 32-bit key per row id (int64): a hash of the seed and both halves of the id."""
    key = _hash32(np.array([seed & 0xFFFFFFFF], np.uint32) ^ _GOLDEN)
    low = rows.astype(np.uint32)  # the id's low 32 bits
    return _hash32(_hash32(low ^ key) ^ (rows >> 32).astype(np.uint32))


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """np.empty on a 64-byte boundary: TensorFlow can then use the array's memory as a tensor's
    without copying it (train.as_tensor)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def synthetic_rows(
    seed: int, rows: np.ndarray, num_features: int, dtype="float32", threads: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of y = X w_true + 2 + 0.1 noise, x ~ N(0, 1) per feature, for the given row ids.

    Row r's 2h draws (h = (num_features + 2) // 2: its features, then its noise) come from 2h
    uniform 32-bit hashes of (row key, column), paired by Box-Muller: hash k gives a radius,
    hash h + k an angle, and draws k and h + k are the radius times the angle's cosine and sine.
    Computed in float32 (the precision x has in the file-less seed job), one chunk of rows at a
    time, column by column so that every NumPy loop runs over contiguous memory; threads > 1
    share the chunks out (a row's values never depend on which rows are computed with it).
    """
    X = aligned_empty((len(rows), num_features), dtype)
    y = aligned_empty((len(rows),), dtype)
    half = (num_features + 2) // 2
    chunk = max(1, min(len(rows), max(256, _CHUNK_VALUES // (2 * half))))
    starts = range(0, len(rows), chunk)
    # Feature weights, then the noise's: y is one weighted sum of a row's first F + 1 draws.
    weights = np.append(true_weights(num_features), NOISE_STDDEV).astype(np.float32)[:, None]
    columns = (np.arange(2 * half, dtype=np.uint32) * _GOLDEN)[:, None]  # column c's key
    workers = max(1, min(threads, len(starts)))

    def fill(first: int) -> None:
        work = _Work(2 * half, chunk)  # reused chunk after chunk: no fresh memory to fault in
        for start in starts[first::workers]:
            keys = _row_keys(seed, rows[start : start + chunk])
            z = _standard_normal(keys, columns, work)
            n = len(keys)
            for at in range(0, n, _TRANSPOSE_ROWS):  # blocks that stay in the L1 cache
                X[start + at : start + min(at + _TRANSPOSE_ROWS, n)] = z[
                    :num_features, at : at + _TRANSPOSE_ROWS
                ].T
            # Summed over the draws in one fixed order (np.add.reduce along the outer axis
            # adds row after row), the same for every row: a BLAS dot's order depends on a
            # row's place in the chunk, and a row's y must not.
            terms = work.spare(num_features + 1, n).view(np.float32)
            np.multiply(z[: num_features + 1], weights, out=terms)
            target = np.add.reduce(terms, axis=0, out=work.target[:n])
            target += np.float32(TRUE_BIAS)
            y[start : start + n] = target

    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, range(workers)))  # list(): raises what a thread raised
    else:
        fill(0)
    return X, y


# Chunks of this many draws: the working arrays (two of 2 MB) stay in the CPU's cache.
_CHUNK_VALUES = 1 << 19
_TRANSPOSE_ROWS = 256


class _Work:
    """One thread's arrays for chunks of up to `rows` rows of `draws` draws."""

    def __init__(self, draws: int, rows: int):
        self.draws = draws
        self.bits = np.empty(draws * rows, np.uint32)
        self.scratch = np.empty(draws * rows, np.uint32)
        self.target = np.empty(rows, np.float32)

    def hashes(self, n: int) -> np.ndarray:
        return self.bits[: self.draws * n].reshape(self.draws, n)

    def spare(self, draws: int, n: int) -> np.ndarray:
        return self.scratch[: draws * n].reshape(draws, n)


def _standard_normal(keys: np.ndarray, columns: np.ndarray, work: _Work) -> np.ndarray:
    """N(0, 1) float32 draws, shape (len(columns), len(keys)): column-major, row keys inner,
    in work's memory (valid until its next chunk)."""
    half = len(columns) // 2
    u = np.bitwise_xor(keys, columns, out=work.hashes(len(keys)))  # one counter per draw
    _mix32(u, work.spare(len(columns), len(keys)))
    # The hash's top 23 bits as the mantissa of a float32 f = 1 + bits / 2**23 in [1, 2):
    # uniform, and made without a conversion.
    u >>= np.uint32(9)
    u |= np.uint32(0x3F800000)
    z = u.view(np.float32)
    radius, angle = z[:half], z[half:]
    np.subtract(np.float32(2.0), radius, out=radius)  # in (0, 1], exactly: its log is finite
    np.log(radius, out=radius)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    angle *= np.float32(2.0 * np.pi)  # a uniform angle, in [2 pi, 4 pi)
    cosine = np.cos(angle, out=work.spare(half, len(keys)).view(np.float32))
    np.sin(angle, out=angle)
    angle *= radius
    np.multiply(cosine, radius, out=radius)
    return z


# --- Held-out validation rows -----------------------------------------------------------------
# Before the layout: the layout contract numbers the training rows alone, so the training run is
# the one a file of just those rows would give.

_VALIDATION_KEY = 0x76616C6964617465  # "validate"


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function: a bijective 64-bit hash, easy to recompute anywhere."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def is_validation(seed: int, ids: np.ndarray, fraction: float) -> np.ndarray:
    """Whether each global row id is held out: u = (h >> 11) / 2^53 < fraction, where
    h = splitmix64(id XOR splitmix64(seed XOR _VALIDATION_KEY)) (docs/data.md, Validation)."""
    key = _splitmix64(np.array([seed ^ _VALIDATION_KEY], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        h = _splitmix64(ids.astype(np.uint64) ^ key)
    return (h >> np.uint64(11)).astype(np.float64) < fraction * 2.0**53


@dataclass(frozen=True)
class Holdout:
    """Which of the N rows --validation_fraction holds out, whatever the number of ranks. The
    training rows, in order, are renumbered 0 .. num_train - 1 for the layout; the validation
    rows are cut into one consecutive piece per rank."""

    num_rows: int
    validation: np.ndarray  # global ids of the held-out rows, increasing (empty: no split)
    train: np.ndarray | None  # global ids of the training rows, increasing; None: every row

    @classmethod
    def of(cls, cfg: Config, num_rows: int) -> Holdout:
        fraction = cfg.validation_fraction
        if not fraction:
            return cls(num_rows, np.zeros(0, np.int64), None)
        held = is_validation(cfg.seed, np.arange(num_rows, dtype=np.int64), fraction)
        if not held.any():
            raise UsageError(
                f"--validation_fraction {fraction} holds out none of the {num_rows} rows: "
                "use a larger fraction"
            )
        return cls(num_rows, np.flatnonzero(held), np.flatnonzero(~held))

    @property
    def held_out(self) -> bool:
        return self.train is not None

    @property
    def num_train(self) -> int:
        return self.num_rows - len(self.validation)

    def global_ids(self, train_ids: np.ndarray) -> np.ndarray:
        """The global row ids of training rows by their training number."""
        return train_ids if self.train is None else self.train[train_ids]

    def file_row(self, layout: Layout) -> Callable[[int], int]:
        """The global row id of this rank's training row number local (for messages)."""
        return lambda local: int(self.global_ids(layout.global_row(local)))

    def _piece_start(self, rank: int, size: int) -> int:
        return rank * len(self.validation) // size

    def piece(self, rank: int, size: int) -> np.ndarray:
        """The global ids of the validation rows this rank holds."""
        return self.validation[self._piece_start(rank, size) : self._piece_start(rank + 1, size)]

    def owners(self, ids: np.ndarray, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
        """For global row ids: the rank that holds each, and whether it is a validation row."""
        if self.train is None:
            return layout.owners(ids), np.zeros(len(ids), bool)
        held = np.isin(ids, self.validation)
        starts = [self._piece_start(r, layout.size) for r in range(layout.size)]
        position = np.searchsorted(self.validation, ids)
        piece_owner = np.searchsorted(starts, position, side="right") - 1
        train_owner = layout.owners(np.searchsorted(self.train, ids))
        return np.where(held, piece_owner, train_owner), held

    def training_table(self, table: Table) -> Table:
        """The table's training rows, numbered 0 .. num_train - 1."""
        if self.train is None:
            return table
        train = self.train
        return replace(table, read=lambda a, b: rows_of(table, train[a:b]), num_rows=len(train))


def rows_of(table: Table, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The table's rows ids (increasing), each read spanning no more than _PART_BYTES of rows."""
    if len(ids) == 0:
        return table.read(0, 0)
    step = max(1, _PART_BYTES // table.row_bytes)
    parts, at = [], 0
    while at < len(ids):
        first = int(ids[at])
        end = int(np.searchsorted(ids, first + step))
        X, y = table.read(first, int(ids[end - 1]) + 1)
        keep = ids[at:end] - first
        parts.append((X[keep], y[keep]))
        at = end
    return np.concatenate([X for X, _ in parts]), np.concatenate([y for _, y in parts])


# --- Data files ------------------------------------------------------------------------------


def own_dtype(*dtypes) -> np.dtype:
    """The precision a file trains in when --dtype is not given: float32 for what float32 holds
    exactly (float32, float16, small integers, booleans), float64 for anything wider."""
    return np.dtype(np.float64 if np.result_type(np.float32, *dtypes).itemsize > 4 else np.float32)


def read_shard(cfg: Config, rank: int, size: int, job: Job | None = None) -> Shard:
    """This rank's rows of --data (see data_files), in --dtype (default: the files' own, see
    own_dtype); read now, or as used when they do not fit in memory."""
    files = data_files(cfg.data)
    suffix = files[0].suffix.lower()
    if suffix in (".npy", ".npz"):
        for flag, value in (("--target", cfg.target), ("--features", cfg.features)):
            if value is not None:
                raise UsageError(
                    f"{flag} names columns of a CSV or Parquet file; it does not apply to {suffix}"
                )
    if suffix == ".csv":
        return _read_csv(files, cfg, rank, size, job)
    table = open_table(files, cfg)
    if table.num_rows == 0:
        raise UsageError(f"{cfg.data} holds no rows")
    holdout = Holdout.of(cfg, table.num_rows)
    training = holdout.training_table(table)
    # Parquet is read by whole row groups: runs of whole batches keep a rank to its groups.
    whole = suffix == ".parquet"
    layout = _layout(
        training.num_rows, rank, size, cfg.batch_size, table.row_bytes, whole, cfg.batched
    )
    dtype = np.dtype(cfg.dtype or table.dtype)
    shard_bytes = layout.num_held * (table.num_features + 1) * dtype.itemsize
    names = table.columns[:-1] if table.columns else None
    target_name = table.columns[-1] if table.columns else None
    try:
        if shard_bytes > memory_per_rank() * _SHARD_SHARE:
            # Checked now, block by block; read again as training uses it.
            X, y = layout.take(training, dtype, range(layout.run))
            shard = Shard(X, y, layout, cfg.data, table=training, feature_names=names)
            shard = replace(shard, target_name=target_name)
        else:
            held = range(layout.num_train + layout.num_wrap)
            X, y = layout.take(training, dtype, held, tail=True)
            shard = Shard(X, y, layout, cfg.data, feature_names=names, target_name=target_name)
        whole_bytes = table.whole_rows * table.row_bytes
        if size > 1 and table.whole_rows > layout.run and whole_bytes >= _WHOLE_READ_NOTED_BYTES:
            shard = replace(shard, oversized_reads=table.whole_rows)
        locate, labels = _locator(files, table.file_rows), _labels(table, suffix)
        at = 0
        for X, y in shard.blocks():
            _check_finite(X, y, holdout.file_row(layout), locate, labels, at)
            at += len(y)
        if holdout.held_out:  # held in memory: a fraction of the rows, used at log steps
            ids = holdout.piece(rank, size)
            X, y = rows_of(table, ids)
            X, y = X.astype(dtype), y.astype(dtype)
            _check_finite(X, y, lambda i: int(ids[i]), locate, labels)
            shard = replace(shard, validation=(X, y), num_validation=len(holdout.validation))
    except OSError as e:
        raise UsageError(f"cannot read {cfg.data}: {e}") from None
    return shard


# A shard larger than this share of the memory a rank may use is read as it is used: the rest
# is for TensorFlow (about 0.4 GB), the float64 blocks of the passes over the data, and slack.
_SHARD_SHARE = 0.5

# A part read whole (a Parquet row group) smaller than this costs little to read on every rank:
# no warning (pyarrow's default groups of 1 Mi rows are 8 MB from one float64 column).
_WHOLE_READ_NOTED_BYTES = 8 << 20

# The formats a dataset of several files (a directory, a glob) may have.
_MULTI_FILE_FORMATS = (".npy", ".csv", ".parquet")


def data_files(data: str) -> list[Path]:
    """The files --data names: one file; or a directory's files, or a glob's matches, sorted by
    path, all of one format. Names starting with . or _ are skipped (Spark's _SUCCESS, the
    .crc checksums beside its parts)."""
    p = Path(data)
    if p.is_dir():
        files = [f for f in p.iterdir() if not f.name.startswith((".", "_"))]
        if not files:
            raise UsageError(f"data directory {data} holds no data files")
    elif p.exists() or not any(c in data for c in "*?["):
        if not p.exists():
            raise UsageError(f"data file {data} does not exist")
        if not p.is_file():
            raise UsageError(f"data path {data} is not a file")
        return [p]
    else:
        files = [Path(f) for f in glob.glob(data) if not Path(f).name.startswith((".", "_"))]
        if not files:
            raise UsageError(f"--data {data} matches no file")
    files.sort(key=str)
    for f in files:
        if not f.is_file():
            raise UsageError(f"{f} is not a file: --data {data} reads files, not sub-directories")
    formats = {}
    for f in files:
        formats.setdefault(f.suffix.lower(), f)
    if len(formats) > 1:
        raise UsageError(
            f"--data {data} mixes formats ({', '.join(map(str, formats.values()))}): the files "
            "of one dataset must be all .npy, all .csv or all .parquet"
        )
    if len(files) > 1 and files[0].suffix.lower() not in _MULTI_FILE_FORMATS:
        raise UsageError(
            f"--data {data}: a dataset of several files reads .npy, .csv or .parquet files, "
            f"not {files[0].suffix or '(no extension)'} ({files[0]})"
        )
    return files


def _locator(files: list[Path], file_rows: tuple[int, ...] | None):
    """global row -> (the file that holds it, its row there)."""
    starts = np.cumsum([0, *(file_rows or [0])])

    def locate(row: int) -> tuple[Path, int]:
        i = int(np.searchsorted(starts, row, "right")) - 1 if file_rows else 0
        return files[i], row - int(starts[i])

    return locate


def _labels(table: Table, suffix: str) -> list[str]:
    """How messages name the columns of X then y's."""
    if table.columns:
        return [f"column {name!r}" for name in table.columns]
    if suffix == ".npz":
        return [f"X column {j}" for j in range(table.num_features)] + ["y"]
    return [f"column {j}" for j in range(table.num_features + 1)]


def open_table(files: list[Path], cfg: Config) -> Table:
    """The files' rows, one file after another, to be read by ranges (nothing is read yet but
    headers and footers)."""
    suffix = files[0].suffix.lower()
    if suffix == ".parquet":
        from hvd_linreg.parquet import parquet_table  # imports pyarrow: only when needed

        return parquet_table(files, cfg.target, cfg.feature_columns)
    if suffix == ".npy":
        return _npy_table(files)
    if suffix == ".npz":
        return _opened(files[0], _npz_table)
    raise UsageError(
        f"{files[0]}: unknown data format {suffix or '(no extension)'}; use .npy, .npz "
        "(arrays X and y), .csv (with a header line) or .parquet"
    )


def _opened(p: Path, opener: Callable):
    """opener(p), with what goes wrong reading the file said as a UsageError."""
    try:
        return opener(p)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise UsageError(f"cannot read {p}: {e}") from None


def _npy_array(p: Path) -> np.ndarray | StoredArray:
    """A .npy file's one array, (rows, features + target), not read yet but its header."""
    with open_without_readahead(p) as f:
        a = _stored_array(p, f, 0)
    if a is None:
        a = np.load(p, mmap_mode="r", allow_pickle=False)
    _check_numeric(a, str(p))
    if a.ndim != 2 or a.shape[1] < 2:
        raise UsageError(
            f"{p}: a .npy file must hold a 2-D array (rows, features + target), got shape {a.shape}"
        )
    return a


def _npy_table(files: list[Path]) -> Table:
    """Each .npy holds one (rows, features + 1) array, the last column the target; the files
    of a dataset hold as many columns of one dtype."""
    arrays = [_opened(p, _npy_array) for p in files]
    first = arrays[0]
    for p, a in zip(files[1:], arrays[1:]):
        if (a.shape[1], a.dtype) != (first.shape[1], first.dtype):
            raise UsageError(
                f"{p} holds {a.shape[1]} columns of {a.dtype}, but {files[0]} "
                f"{first.shape[1]} of {first.dtype}: the files of one dataset need the same columns"
            )

    def read_file(i: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        part = arrays[i][lo:hi]
        return part[:, :-1], part[:, -1]

    starts = np.cumsum([0, *(len(a) for a in arrays)])
    num_features = first.shape[1] - 1
    return Table(
        read_across(starts, read_file, num_features, first.dtype),
        int(starts[-1]),
        num_features,
        first.shape[1] * first.dtype.itemsize,
        own_dtype(first.dtype),
        file_rows=tuple(len(a) for a in arrays) if len(arrays) > 1 else None,
    )


def _npz_table(p: Path) -> Table:
    X, y = _npz_arrays(p)
    return Table(
        lambda start, stop: (X[start:stop], y[start:stop]),
        len(y),
        X.shape[1],
        (X.shape[1] + 1) * X.dtype.itemsize,
        own_dtype(X.dtype, y.dtype),
    )


def _npz_arrays(p: Path) -> tuple[np.ndarray | StoredArray, np.ndarray | StoredArray]:
    with open_without_readahead(p) as f, zipfile.ZipFile(f) as z:
        names = {Path(n).stem: n for n in z.namelist()}
    missing = [k for k in ("X", "y") if k not in names]
    if missing:
        raise UsageError(
            f"{p}: a .npz file must hold arrays named X and y; missing {', '.join(missing)} "
            f"(found: {', '.join(sorted(names)) or 'nothing'})"
        )
    X, y = (_npz_member(p, names[k]) for k in ("X", "y"))
    for a in (X, y):
        _check_numeric(a, str(p))
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1)
    if X.ndim != 2 or y.ndim != 1:
        raise UsageError(
            f"{p}: X must be (rows, features) and y (rows,); got X {X.shape}, y {y.shape}"
        )
    if len(X) != len(y):
        raise UsageError(f"{p}: X has {len(X)} rows but y has {len(y)}; they must match")
    return X, y


# NumPy's public .npy header readers, by format version (np.savez writes 1.0, or 2.0 for huge
# headers); 3.0 has none, and is read whole.
_NPY_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def _npz_member(p: Path, name: str) -> np.ndarray | StoredArray:
    """An uncompressed .npz member (np.savez) is read by ranges of rows, like a .npy; a
    compressed one, or one StoredArray does not read, is read whole."""
    with open_without_readahead(p) as f, zipfile.ZipFile(f) as z:
        info = z.getinfo(name)
        stored = None
        if info.compress_type == zipfile.ZIP_STORED:
            f.seek(info.header_offset)
            local_header = f.read(30)
            name_len = int.from_bytes(local_header[26:28], "little")
            extra_len = int.from_bytes(local_header[28:30], "little")
            stored = _stored_array(p, f, info.header_offset + 30 + name_len + extra_len)
        if stored is not None:
            return stored
        with z.open(name) as member:
            return np.lib.format.read_array(member, allow_pickle=False)


@dataclass
class _CsvSplit:
    """What one rank parsed of a CSV file: the lines that start in its byte range."""

    rows: np.ndarray  # (rows, columns) float64
    num_lines: int  # physical lines, blank ones included: for line numbers in messages
    problem: tuple[int, str] | None = None  # (line within the split, what is wrong)


@dataclass(frozen=True)
class CsvHeader:
    """A CSV file's header line: its column names, and where the data after it starts."""

    path: Path
    names: list[str]
    data_start: int  # the header's length in bytes


def csv_header(p: Path) -> CsvHeader:
    with open(p, "rb") as f:
        first = f.readline()
    header = next(csv.reader([first.decode("utf-8", errors="replace")]), None)
    if not header or not any(h.strip() for h in header):
        raise UsageError(f"{p} is empty; a CSV file needs a header line and data rows")
    return CsvHeader(p, [h.strip() for h in header], len(first))


def choose_columns(
    names: list[str], target: str | None, features: tuple[str, ...] | None, p: Path
) -> tuple[list[int], int]:
    """The feature columns (--features, in its order; else every column but the target) and
    the target column (--target, else the last) of a file with these column names."""
    for flag, wanted in (("--target", [target] if target else []), ("--features", features or [])):
        for name in wanted:
            if name not in names:
                raise UsageError(
                    f"{flag} {name!r} is not a column of {p}; columns: {column_list(names)}"
                )
    if len(names) < 2:
        raise UsageError(f"{p} has one column; it needs at least one feature and a target")
    t = names.index(target) if target else len(names) - 1
    if features is None:
        return [j for j in range(len(names)) if j != t], t
    if names[t] in features:
        raise UsageError(
            f"--features names {names[t]!r}, the target column of {p}; name another target "
            "with --target"
        )
    return [names.index(name) for name in features], t


def check_same_columns(first: Path, names: list[str], p: Path, theirs: list[str]) -> None:
    """The files of one dataset have the same column names, in the same order."""
    same = f"the files of one dataset need the same columns ({first}: {column_list(names)})"
    for name in theirs:
        if name not in names:
            raise UsageError(f"{p} has a column {name!r} that {first} has not; {same}")
    for name in names:
        if name not in theirs:
            raise UsageError(f"{p} has no column {name!r}; {same}")
    if theirs != names:
        raise UsageError(f"{p} has its columns in another order; {same}")


def column_list(names: list[str]) -> str:
    """Column names for a message: the first 20 of them."""
    return ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")


def csv_split_text(p: Path, data_start: int, rank: int, size: int) -> str:
    """The lines that start in this rank's byte range of the data, as Hadoop's input splits cut
    a file: the range is 1/size of the bytes after the header; a line that began before it is
    the previous rank's, a line that runs past its end is this rank's. So a rank reads its
    range, plus the header and at most one line past it."""
    return "".join(text for _, text in csv_split_texts([(p, data_start)], rank, size))


def csv_split_texts(files: list[tuple[Path, int]], rank: int, size: int) -> list[tuple[int, str]]:
    """This rank's lines of CSV files (path, header length) read one after another: the data
    bytes of all the files are cut in size ranges, and each file's part of this rank's range
    is cut at lines as csv_split_text cuts one file. (file index, its lines), by file."""
    lengths = [p.stat().st_size - data_start for p, data_start in files]
    offsets = np.cumsum([0, *lengths])
    begin, end = rank * int(offsets[-1]) // size, (rank + 1) * int(offsets[-1]) // size
    texts = []
    for i, (p, data_start) in enumerate(files):
        lo, hi = max(begin, offsets[i]) - offsets[i], min(end, offsets[i + 1]) - offsets[i]
        if lo < hi:
            texts.append((i, _csv_lines(p, data_start, data_start + int(lo), data_start + int(hi))))
    return texts


def _csv_lines(p: Path, data_start: int, begin: int, end: int) -> str:
    """The lines of p that start in its bytes begin .. end - 1 (after the header)."""
    with open(p, "rb", buffering=0) as f:
        f.seek(max(begin - 1, data_start))
        if begin > data_start:
            f.readline()  # through the end of the line that began before the range
        text = b""
        while f.tell() < end and (chunk := f.read(end - f.tell())):
            text += chunk
        if text and not text.endswith(b"\n"):
            text += f.readline()  # the line that runs past the end
    return text.decode("utf-8", errors="replace")


def _parse_csv_split(text: str, names: list[str]) -> _CsvSplit:
    num_columns = len(names)
    rows: list[list[float]] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    num_lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    for cells in reader:
        if not cells or all(not c.strip() for c in cells):
            continue  # blank lines are not rows
        if len(cells) != num_columns:
            problem = f"{len(cells)} fields, but the header has {num_columns}"
            return _CsvSplit(np.zeros((0, num_columns)), num_lines, (reader.line_num, problem))
        try:
            rows.append([float(c) for c in cells])
        except ValueError:
            j = next(j for j, c in enumerate(cells) if not _is_float(c))
            problem = f"{cells[j]!r} is not a number (column {names[j]!r})"
            return _CsvSplit(np.zeros((0, num_columns)), num_lines, (reader.line_num, problem))
    return _CsvSplit(np.array(rows, np.float64).reshape(-1, num_columns), num_lines)


def _read_csv(files: list[Path], cfg: Config, rank: int, size: int, job: Job | None) -> Shard:
    """Each rank parses the lines of its byte range of the files; the rows then go to the ranks
    that hold them by the layout and the validation split (one alltoall), so no rank reads more
    than its part."""
    headers = [csv_header(p) for p in files]
    names = headers[0].names
    for header in headers[1:]:
        check_same_columns(files[0], names, header.path, header.names)
    chosen, t = choose_columns(names, cfg.target, cfg.feature_columns, files[0])
    texts = csv_split_texts([(h.path, h.data_start) for h in headers], rank, size)
    splits = [(i, _parse_csv_split(text, names)) for i, text in texts]
    summary = [(i, len(s.rows), s.num_lines, s.problem) for i, s in splits]
    every = job.allgather(summary) if size > 1 else [summary]
    file_rows, lines_before = [0] * len(files), [1] * len(files)  # 1: the header
    for i, num_rows, num_lines, problem in (piece for pieces in every for piece in pieces):
        if problem is not None:  # the first problem in the files, on every rank
            raise UsageError(f"{files[i]} line {lines_before[i] + problem[0]}: {problem[1]}")
        lines_before[i] += num_lines
        file_rows[i] += num_rows
    if sum(file_rows) == 0:
        raise UsageError(f"{cfg.data} has a header but no data rows")
    holdout = Holdout.of(cfg, sum(file_rows))
    layout = _layout(holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched)
    first = sum(n for pieces in every[:rank] for _, n, _, _ in pieces)
    rows = np.concatenate([s.rows for _, s in splits] or [np.zeros((0, len(names)))])
    owners, held = holdout.owners(np.arange(first, first + len(rows)), layout)
    order = np.argsort(owners, kind="stable")  # by rank, and in file order within each
    sent = np.bincount(owners, minlength=size)
    if holdout.held_out:  # a last column tells the receiver which rows are validation rows
        rows = np.c_[rows, held]
    table = job.alltoall(rows[order], sent) if size > 1 else rows
    if holdout.held_out:
        held = table[:, -1] == 1
        table, validation = table[~held, :-1], table[held, :-1]
    table = table[layout.held_positions()]  # received in file order: runs, then tail
    dtype = cfg.dtype or "float64"  # decimal text: float64 keeps what it says
    locate = _locator(files, tuple(file_rows))
    labels = [f"column {names[j]!r}" for j in [*chosen, t]]
    X, y = _columns(table, chosen, t, dtype)
    n, copy_end = layout.num_train, layout.num_train + layout.num_wrap
    _check_finite(X[:n], y[:n], holdout.file_row(layout), locate, labels)
    _check_finite(X[copy_end:], y[copy_end:], holdout.file_row(layout), locate, labels, n)
    features = tuple(names[j] for j in chosen)
    shard = Shard(X, y, layout, cfg.data, feature_names=features, target_name=names[t])
    if holdout.held_out:
        ids = holdout.piece(rank, size)
        X, y = _columns(validation, chosen, t, dtype)
        _check_finite(X, y, lambda i: int(ids[i]), locate, labels)
        shard = replace(shard, validation=(X, y), num_validation=len(holdout.validation))
    return shard


def _columns(table: np.ndarray, chosen: list[int], t: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """The chosen columns of a CSV's rows as the features, column t as the target."""
    X = aligned_empty((len(table), len(chosen)), dtype)
    X[...] = table[:, chosen]
    y = aligned_empty((len(table),), dtype)
    y[...] = table[:, t]
    return X, y


def read_csv_split(
    header: CsvHeader, rank: int, size: int, job: Job | None
) -> tuple[np.ndarray, list[int]]:
    """This rank's rows (float64, every column, in file order): the lines that start in its
    1/size of the file's bytes; and every rank's number of rows. The file's first problem is
    raised on every rank."""
    p = header.path
    split = _parse_csv_split(csv_split_text(p, header.data_start, rank, size), header.names)
    summary = (len(split.rows), split.num_lines, split.problem)
    splits = job.allgather(summary) if size > 1 else [summary]
    lines_before = 1  # the header
    for _, num_lines, problem in splits:  # the first problem in the file, on every rank
        if problem is not None:
            raise UsageError(f"{p} line {lines_before + problem[0]}: {problem[1]}")
        lines_before += num_lines
    counts = [n for n, _, _ in splits]
    if sum(counts) == 0:
        raise UsageError(f"{p} has a header but no data rows")
    return split.rows, counts


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_numeric(a: np.ndarray, path: str) -> None:
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise UsageError(f"{path}: arrays must be numeric, got dtype {a.dtype}")


def _check_finite(
    X: np.ndarray,
    y: np.ndarray,
    row_of: Callable[[int], int],
    locate: Callable,
    labels: list[str],
    first: int = 0,
) -> None:
    """X and y are rows first, first + 1, ... of a set whose global row ids row_of gives;
    locate turns a global row id into (file, row in it); labels name the columns."""
    bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(y))
    if bad.any():
        local = int(np.argmax(bad))
        path, row = locate(row_of(first + local))
        column = labels[int(np.argmax(~np.isfinite(np.append(X[local], y[local]))))]
        raise UsageError(
            f"{path}: data row {row} (0-based) holds NaN or inf in {column}; clean or drop "
            "such rows"
        )
