"""This rank's shard of the global dataset: synthetic (as in the seed) or read from a file.

Layout contract (the README repeats it; tests/reference.py simulates it). With N rows, s ranks,
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
under s * g rows (under s with g = 1, as before #12). Read: a rank reads its runs and its piece
of the rest, about 1/s of a file, where runs are long enough to read alone; shorter runs share
pages with the other ranks' rows, and a rank reads whole strides of s * g rows.
"""

from __future__ import annotations

import csv
import io
import os
import zipfile
from collections.abc import Callable, Iterator
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
        return np.r_[runs, self.tail.start : self.tail.stop][self.held_positions()]

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
    """g, the rows of each run (README, layout): 1 on one rank, for data that is not read by
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

    def parts(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        step = max(1, _PART_BYTES // self.row_bytes)
        for first in range(start, stop, step):
            yield self.read(first, min(first + step, stop))


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
        with _open_without_readahead(self.path) as f:
            done = 0
            while done < len(buffer):
                got = os.preadv(f.fileno(), [buffer[done:]], position + done)
                if got == 0:
                    raise UsageError(f"{self.path} ends before its array does (truncated?)")
                done += got
        return out


def _open_without_readahead(path):
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
    job: the ranks' collectives, which reading a CSV file on several ranks needs."""
    if cfg.synthetic:
        num_samples = cfg.num_samples or SYNTHETIC_SAMPLES
        num_features = cfg.num_features or SYNTHETIC_FEATURES
        # Runs of 1 row: no file is read, so longer runs would only leave out more rows.
        layout = _layout(num_samples, rank, size, cfg.batch_size)
        X, y = synthetic_rows(cfg.seed, layout.rows(), num_features, cfg.dtype or "float32")
        return Shard(X, y, layout, "synthetic", true_weights(num_features).tolist(), TRUE_BIAS)
    return read_shard(cfg, rank, size, job)


def _layout(
    num_samples: int, rank: int, size: int, batch_size: int, row_bytes: int | None = None
) -> Layout:
    """The layout of num_samples rows; row_bytes: a row's bytes in a file read by ranges of
    rows, which sets the runs' length (run_length)."""
    if num_samples < size:
        raise UsageError(
            f"{num_samples} samples cannot be split over {size} ranks: "
            "use more samples or fewer ranks"
        )
    shard = num_samples // size
    if batch_size > shard:
        raise UsageError(
            f"--batch_size {batch_size} is larger than each rank's shard of {shard} rows "
            f"({num_samples} samples over {size} ranks): use --batch_size {shard} or less, "
            "more samples, or fewer ranks"
        )
    return Layout(num_samples, rank, size, batch_size, run_length(size, batch_size, row_bytes))


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
    seed: int, rows: np.ndarray, num_features: int, dtype="float32"
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of y = X w_true + 2 + 0.1 noise, x ~ N(0, 1) per feature, for the given row ids.

    Row r's 2h draws (h = (num_features + 2) // 2: its features, then its noise) come from 2h
    uniform 32-bit hashes of (row key, column), paired by Box-Muller: hash k gives a radius,
    hash h + k an angle, and draws k and h + k are the radius times the angle's cosine and sine.
    Computed in float32 (the precision x has in the file-less seed job), one chunk of rows at a
    time, column by column so that every NumPy loop runs over contiguous memory.
    """
    half = (num_features + 2) // 2
    columns = (np.arange(2 * half, dtype=np.uint32) * _GOLDEN)[:, None]
    w_true = true_weights(num_features).astype(np.float32)
    X = aligned_empty((len(rows), num_features), dtype)
    y = aligned_empty((len(rows),), dtype)
    chunk = max(256, _CHUNK_VALUES // (2 * half))
    for start in range(0, len(rows), chunk):
        keys = _row_keys(seed, rows[start : start + chunk])
        z = _standard_normal(keys, columns, half)
        x = z[:num_features]
        X[start : start + len(keys)] = x.T
        # Term by term, not a BLAS dot: its order of summation depends on where a row falls
        # in a chunk, and a row's y must not.
        target = np.float32(NOISE_STDDEV) * z[num_features] + np.float32(TRUE_BIAS)
        for w_j, x_j in zip(w_true, x):
            target += w_j * x_j
        y[start : start + len(keys)] = target
    return X, y


# Chunks of this many draws: the working arrays (a few of 2 MB) stay in the CPU's cache.
_CHUNK_VALUES = 1 << 19


def _standard_normal(keys: np.ndarray, columns: np.ndarray, half: int) -> np.ndarray:
    """N(0, 1) float32 draws, shape (2 * half, len(keys)): column-major, row keys inner."""
    u = keys ^ columns  # (2 * half, rows): one counter per draw
    _mix32(u, np.empty_like(u))
    z = np.empty(u.shape, np.float32)
    radius, angle = z[:half], z[half:]
    # The top 24 bits, as float32 holds them exactly: 1 - u / 2**24 is in (0, 1], its log finite.
    u[:half] >>= np.uint32(8)
    np.multiply(u[:half], np.float32(2.0**-24), out=radius, casting="unsafe")
    np.subtract(np.float32(1.0), radius, out=radius)
    np.log(radius, out=radius)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    np.multiply(u[half:], np.float32(2.0 * np.pi / 2.0**32), out=angle, casting="unsafe")
    cosine = np.cos(angle)
    np.sin(angle, out=angle)
    angle *= radius
    np.multiply(cosine, radius, out=radius)
    return z


# --- Data files ------------------------------------------------------------------------------


def own_dtype(*dtypes) -> np.dtype:
    """The precision a file trains in when --dtype is not given: float32 for what float32 holds
    exactly (float32, float16, small integers, booleans), float64 for anything wider."""
    return np.dtype(np.float64 if np.result_type(np.float32, *dtypes).itemsize > 4 else np.float32)


def read_shard(cfg: Config, rank: int, size: int, job: Job | None = None) -> Shard:
    """This rank's rows of the --data file (.npy/.npz/.csv), in --dtype (default: the file's
    own, see own_dtype); read now, or as used when they do not fit in memory."""
    path, target = cfg.data, cfg.target
    p = Path(path)
    if not p.exists():
        raise UsageError(f"data file {path} does not exist")
    if not p.is_file():
        raise UsageError(f"data path {path} is not a file")
    suffix = p.suffix.lower()
    if target is not None and suffix != ".csv":
        raise UsageError("--target names a CSV column; it does not apply to " + suffix)
    if suffix == ".csv":
        return Shard(*_read_csv(p, target, cfg, rank, size, job), path)
    table = open_table(p)
    if table.num_rows == 0:
        raise UsageError(f"{path} holds no rows")
    layout = _layout(table.num_rows, rank, size, cfg.batch_size, table.row_bytes)
    dtype = np.dtype(cfg.dtype or table.dtype)
    shard_bytes = layout.num_held * (table.num_features + 1) * dtype.itemsize
    try:
        if shard_bytes > memory_per_rank() * _SHARD_SHARE:
            # Checked now, block by block; read again as training uses it.
            first_run = range(layout.run)
            shard = Shard(*layout.take(table, dtype, first_run), layout, path, table=table)
        else:
            held = range(layout.num_train + layout.num_wrap)
            X, y = layout.take(table, dtype, held, tail=True)
            shard = Shard(X, y, layout, path)
        at = 0
        for X, y in shard.blocks():
            _check_finite(X, y, path, layout, at)
            at += len(y)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    return shard


# A shard larger than this share of the memory a rank may use is read as it is used: the rest
# is for TensorFlow (about 0.4 GB), the float64 blocks of the passes over the data, and slack.
_SHARD_SHARE = 0.5


def open_table(p: Path) -> Table:
    """A .npy or .npz file's rows, to be read by ranges (nothing is read yet but headers)."""
    try:
        if p.suffix.lower() == ".npy":
            with _open_without_readahead(p) as f:
                a = _stored_array(p, f, 0)
            if a is None:
                a = np.load(p, mmap_mode="r", allow_pickle=False)
            return _npy_table(a, str(p))
        if p.suffix.lower() == ".npz":
            return _npz_table(p)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise UsageError(f"cannot read {p}: {e}") from None
    raise UsageError(
        f"{p}: unknown data format {p.suffix or '(no extension)'}; "
        "use .npy, .npz (arrays X and y) or .csv (with a header line)"
    )


def _npy_table(a: np.ndarray | StoredArray, path: str) -> Table:
    """A .npy holds one (N, features + 1) array; its last column is the target."""
    _check_numeric(a, path)
    if a.ndim != 2 or a.shape[1] < 2:
        raise UsageError(
            f"{path}: a .npy file must hold a 2-D array (rows, features + target), "
            f"got shape {a.shape}"
        )

    def read(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        part = a[start:stop]
        return part[:, :-1], part[:, -1]

    return Table(read, len(a), a.shape[1] - 1, a.shape[1] * a.dtype.itemsize, own_dtype(a.dtype))


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
    with _open_without_readahead(p) as f, zipfile.ZipFile(f) as z:
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
    with _open_without_readahead(p) as f, zipfile.ZipFile(f) as z:
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


def _csv_header(p: Path, target: str | None) -> tuple[list[str], int, int]:
    """The header's column names, the target's column and the header's length in bytes."""
    with open(p, "rb") as f:
        first = f.readline()
    header = next(csv.reader([first.decode("utf-8", errors="replace")]), None)
    if not header or not any(h.strip() for h in header):
        raise UsageError(f"{p} is empty; a CSV file needs a header line and data rows")
    header = [h.strip() for h in header]
    if target is None:
        t = len(header) - 1
    elif target in header:
        t = header.index(target)
    else:
        raise UsageError(
            f"--target {target!r} is not a column of {p}; columns: {', '.join(header)}"
        )
    if len(header) < 2:
        raise UsageError(f"{p} has one column; it needs at least one feature and a target")
    return header, t, len(first)


def csv_split_text(p: Path, data_start: int, rank: int, size: int) -> str:
    """The lines that start in this rank's byte range of the data, as Hadoop's input splits cut
    a file: the range is 1/size of the bytes after the header; a line that began before it is
    the previous rank's, a line that runs past its end is this rank's. So a rank reads its
    range, plus the header and at most one line past it."""
    length = p.stat().st_size - data_start
    begin = data_start + rank * length // size
    end = data_start + (rank + 1) * length // size
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


def _parse_csv_split(text: str, num_columns: int) -> _CsvSplit:
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
            bad = next(c for c in cells if not _is_float(c))
            problem = f"{bad!r} is not a number"
            return _CsvSplit(np.zeros((0, num_columns)), num_lines, (reader.line_num, problem))
    return _CsvSplit(np.array(rows, np.float64).reshape(-1, num_columns), num_lines)


def _read_csv(
    p: Path, target: str | None, cfg: Config, rank: int, size: int, job: Job | None
) -> tuple[np.ndarray, np.ndarray, Layout]:
    """Each rank parses the lines of its byte range; the rows then go to the ranks that hold
    them by the layout (one alltoall), so no rank reads more than its part of the file."""
    header, t, data_start = _csv_header(p, target)
    split = _parse_csv_split(csv_split_text(p, data_start, rank, size), len(header))
    summary = (len(split.rows), split.num_lines, split.problem)
    splits = job.allgather(summary) if size > 1 else [summary]
    lines_before = 1  # the header
    for _, num_lines, problem in splits:  # the first problem in the file, on every rank
        if problem is not None:
            raise UsageError(f"{p} line {lines_before + problem[0]}: {problem[1]}")
        lines_before += num_lines
    counts = [n for n, _, _ in splits]
    num_rows = sum(counts)
    if num_rows == 0:
        raise UsageError(f"{p} has a header but no data rows")
    layout = _layout(num_rows, rank, size, cfg.batch_size)
    first = sum(counts[:rank])
    owners = layout.owners(np.arange(first, first + len(split.rows)))
    order = np.argsort(owners, kind="stable")  # by rank, and in file order within each
    sent = np.bincount(owners, minlength=size)
    table = job.alltoall(split.rows[order], sent) if size > 1 else split.rows
    table = table[layout.held_positions()]  # received in file order: runs, then tail
    dtype = cfg.dtype or "float64"  # decimal text: float64 keeps what it says
    X = aligned_empty((len(table), len(header) - 1), dtype)
    X[...] = np.delete(table, t, axis=1)
    y = aligned_empty((len(table),), dtype)
    y[...] = table[:, t]
    n, copy_end = layout.num_train, layout.num_train + layout.num_wrap
    _check_finite(X[:n], y[:n], str(p), layout)
    _check_finite(X[copy_end:], y[copy_end:], str(p), layout, n)
    return X, y, layout


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_numeric(a: np.ndarray, path: str) -> None:
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise UsageError(f"{path}: arrays must be numeric, got dtype {a.dtype}")


def _check_finite(X: np.ndarray, y: np.ndarray, path: str, layout: Layout, first: int = 0) -> None:
    """X and y are this rank's rows from its row number first on."""
    bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(y))
    if bad.any():
        row = layout.global_row(first + int(np.argmax(bad)))
        raise UsageError(
            f"{path}: data row {row} (0-based) holds NaN or inf; clean or drop such rows"
        )
