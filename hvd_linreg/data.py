"""This rank's shard of the global dataset: synthetic (as in the seed) or read from a file.

Layout contract (the README repeats it; tests/reference.py simulates it). With N rows, s ranks,
B rows per rank per step and G = s * B rows per step (the global batch):
  * SGD uses the first N_sgd = (N // G) * G rows: a whole number C = N // G of global batches;
  * step i's global batch is the rows c * G + k, k = 0 .. G-1, with c = i mod C, whatever s;
    rank r takes the r-th B-row slice of it, the rows c * G + r * B + j, j = 0 .. B-1;
  * so rank r's shard is C runs of B consecutive rows, G apart (n = C * B rows), and step i
    uses the shard's rows i * B + j taken mod n: always one slice (train.py);
  * the last N - N_sgd rows (fewer than G) are in no batch: they are cut into s consecutive
    pieces, one per rank, so that the passes over the whole dataset (the exact solution, the
    final loss) see all N rows.
Kept: step i's global batch depends on G alone, so k ranks with batch B walk the same batches
as 1 rank with batch k * B, and a checkpoint resumes exactly on another number of ranks with
the same global batch. Gained: a rank reads only its runs and its piece of the rest, about 1/s
of a file, in runs of B rows (page granularity), instead of every page. Given up: up to G - 1
rows are left out of SGD (s - 1 before).
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

    @property
    def global_batch(self) -> int:
        return self.size * self.batch_size

    @property
    def num_batches(self) -> int:  # C: global batches in an epoch
        return self.num_rows // self.global_batch

    @property
    def num_batched(self) -> int:  # N_sgd: rows in some batch
        return self.num_batches * self.global_batch

    @property
    def num_train(self) -> int:  # n: this rank's rows in batches
        return self.num_batches * self.batch_size

    def _tail_start(self, rank: int) -> int:
        return self.num_batched + rank * (self.num_rows - self.num_batched) // self.size

    @property
    def tail(self) -> slice:
        """This rank's piece of the rows in no batch."""
        return slice(self._tail_start(self.rank), self._tail_start(self.rank + 1))

    @property
    def num_local(self) -> int:
        return self.num_train + self.tail.stop - self.tail.start

    def rows(self) -> np.ndarray:
        """The global row ids this rank holds, in its order: its runs, then its tail piece."""
        ids = np.arange(self.num_batched, dtype=np.int64)
        runs = ids.reshape(self.num_batches, self.size, self.batch_size)[:, self.rank]
        return np.concatenate([runs.ravel(), np.arange(self.tail.start, self.tail.stop)])

    def global_row(self, local: int) -> int:
        """The global id of this rank's row number local."""
        if local >= self.num_train:
            return self.tail.start + local - self.num_train
        run, j = divmod(local, self.batch_size)
        return run * self.global_batch + self.rank * self.batch_size + j

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The rank that holds each of the global row ids."""
        batched = ids < self.num_batched
        tail_starts = [self._tail_start(r) for r in range(self.size)]
        in_tail = np.searchsorted(tail_starts, ids, side="right") - 1
        return np.where(batched, (ids % self.global_batch) // self.batch_size, in_tail)

    def take(
        self, table: Table, dtype, batches: range, tail: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of table, as dtype, in aligned arrays: its runs of the given global
        batches, then (with tail) its piece of the rows in no batch."""
        tail = self.tail if tail else slice(0, 0)
        num_rows = len(batches) * self.batch_size + tail.stop - tail.start
        X = aligned_empty((num_rows, table.num_features), dtype)
        y = aligned_empty((num_rows,), dtype)
        at = 0
        for X_part, y_part in self._parts(table, batches, tail):
            X[at : at + len(y_part)], y[at : at + len(y_part)] = X_part, y_part
            at += len(y_part)
        return X, y

    def _parts(self, table: Table, batches: range, tail: slice) -> Iterator[tuple]:
        """This rank's rows in order, read in parts of at most _PART_BYTES."""
        B, G = self.batch_size, self.global_batch
        if B * table.row_bytes >= _MIN_RUN_BYTES:  # read each run: only this rank's pages
            for c in batches:
                yield from table.parts(c * G + self.rank * B, c * G + (self.rank + 1) * B)
        else:  # shorter runs share pages with the other ranks': read whole global batches
            per_read = max(1, _PART_BYTES // (G * table.row_bytes))
            for first in range(batches.start, batches.stop, per_read):
                k = min(per_read, batches.stop - first)
                X, y = table.read(first * G, (first + k) * G)
                mine = np.s_[:, self.rank]
                yield (
                    X.reshape(k, self.size, B, -1)[mine].reshape(k * B, -1),
                    y.reshape(k, self.size, B)[mine].reshape(-1),
                )
        yield from table.parts(tail.start, tail.stop)


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
    X: np.ndarray  # (rows, num_features) float32 or float64: this rank's runs, then its tail
    y: np.ndarray  # (rows,), the dtype of X
    layout: Layout
    source: str  # "synthetic" or the data file's path
    w_true: list | None = None  # known for synthetic data only
    b_true: float | None = None
    # Set when the shard is larger than the memory the rank may use: X and y then hold only
    # its first run, and the rest is read from the file as it is used (blocks, train.py).
    table: Table | None = None
    feature_names: tuple[str, ...] | None = None  # the columns of X, where the file names them

    @property
    def num_features(self) -> int:
        return self.X.shape[1]

    @property
    def num_samples(self) -> int:
        """Rows in the whole dataset, over all ranks."""
        return self.layout.num_rows

    @property
    def num_train(self) -> int:
        """This rank's rows that SGD's batches use: the first num_train of X and y."""
        return self.layout.num_train

    @property
    def dtype(self) -> str:
        return self.X.dtype.name

    def blocks(self, max_rows: int = 1 << 15) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All of this rank's rows, runs then tail, in blocks of about max_rows."""
        if self.table is None:
            for start in range(0, len(self.y), max_rows):
                yield self.X[start : start + max_rows], self.y[start : start + max_rows]
            return
        layout, per_block = self.layout, max(1, max_rows // self.layout.batch_size)
        for first in range(0, layout.num_batches, per_block):
            last = min(first + per_block, layout.num_batches)
            yield layout.take(self.table, self.dtype, range(first, last))
        yield layout.take(self.table, self.dtype, range(0), tail=True)


def load_shard(cfg: Config, rank: int, size: int, job: Job | None = None) -> Shard:
    """Build or read only this rank's rows; raise UsageError for anything the user can fix.
    job: the ranks' collectives, which reading a CSV file on several ranks needs."""
    if cfg.synthetic:
        num_samples = cfg.num_samples or SYNTHETIC_SAMPLES
        num_features = cfg.num_features or SYNTHETIC_FEATURES
        layout = _layout(num_samples, rank, size, cfg.batch_size)
        X, y = synthetic_rows(cfg.seed, layout.rows(), num_features, cfg.dtype or "float32")
        return Shard(X, y, layout, "synthetic", true_weights(num_features).tolist(), TRUE_BIAS)
    return read_shard(cfg, rank, size, job)


def _layout(num_samples: int, rank: int, size: int, batch_size: int) -> Layout:
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
    return Layout(num_samples, rank, size, batch_size)


# --- Synthetic data --------------------------------------------------------------------------
# Every value is a pure function of (seed, row, column): a counter-based generator. A rank
# computes exactly its own rows, and the global dataset is the same for any number of ranks.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _standard_normal(seed: int, counters: np.ndarray) -> np.ndarray:
    """Two N(0, 1) draws per counter (Box-Muller on the two 32-bit halves of one hash),
    returned side by side: shape counters.shape[:-1] + (2 * counters.shape[-1],)."""
    key = _splitmix64(np.array([seed], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        h = _splitmix64(counters.astype(np.uint64) ^ key)
    radius = np.sqrt(-2.0 * np.log(((h >> np.uint64(32)).astype(np.float64) + 0.5) / 2.0**32))
    angle = (2.0 * np.pi / 2.0**32) * (h & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.concatenate([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """np.empty on a 64-byte boundary: TensorFlow can then use the array's memory as a tensor's
    without copying it (train.as_tensor)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def synthetic_rows(
    seed: int, rows: np.ndarray, num_features: int, dtype="float32", chunk_rows: int = 1 << 14
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of y = X w_true + 2 + 0.1 noise, x ~ N(0, 1) per feature, for the given row ids.

    Chunks of 16 K rows: as fast as larger ones, and their float64 temporaries stay small.
    """
    w_true = true_weights(num_features)
    X = aligned_empty((len(rows), num_features), dtype)
    y = aligned_empty((len(rows),), dtype)
    width = (num_features + 2) // 2  # hashes per row: each gives two draws
    for start in range(0, len(rows), chunk_rows):
        ids = rows[start : start + chunk_rows]
        counters = ids[:, None] * width + np.arange(width, dtype=np.int64)
        z = _standard_normal(seed, counters)  # features first; column num_features is noise
        x = z[:, :num_features]
        X[start : start + len(ids)] = x
        y[start : start + len(ids)] = x @ w_true + TRUE_BIAS + NOISE_STDDEV * z[:, num_features]
    return X, y


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
        X, y, layout, names = _read_csv(p, target, cfg, rank, size, job)
        return Shard(X, y, layout, path, feature_names=names)
    table = open_table(p)
    if table.num_rows == 0:
        raise UsageError(f"{path} holds no rows")
    layout = _layout(table.num_rows, rank, size, cfg.batch_size)
    dtype = np.dtype(cfg.dtype or table.dtype)
    shard_bytes = layout.num_local * (table.num_features + 1) * dtype.itemsize
    try:
        if shard_bytes > memory_per_rank() * _SHARD_SHARE:
            # Checked now, block by block; read again as training uses it.
            shard = Shard(*layout.take(table, dtype, range(1)), layout, path, table=table)
        else:
            X, y = layout.take(table, dtype, range(layout.num_batches), tail=True)
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


def _target_column(header: CsvHeader, target: str | None) -> int:
    names, p = header.names, header.path
    if target is None:
        t = len(names) - 1
    elif target in names:
        t = names.index(target)
    else:
        raise UsageError(f"--target {target!r} is not a column of {p}; columns: {', '.join(names)}")
    if len(names) < 2:
        raise UsageError(f"{p} has one column; it needs at least one feature and a target")
    return t


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


def read_csv_split(
    header: CsvHeader, rank: int, size: int, job: Job | None
) -> tuple[np.ndarray, list[int]]:
    """This rank's rows (float64, every column, in file order): the lines that start in its
    1/size of the file's bytes; and every rank's number of rows. The file's first problem is
    raised on every rank."""
    p = header.path
    num_columns = len(header.names)
    split = _parse_csv_split(csv_split_text(p, header.data_start, rank, size), num_columns)
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


def _read_csv(
    p: Path, target: str | None, cfg: Config, rank: int, size: int, job: Job | None
) -> tuple[np.ndarray, np.ndarray, Layout, tuple[str, ...]]:
    """Each rank parses the lines of its byte range; the rows then go to the ranks that hold
    them by the layout (one alltoall), so no rank reads more than its part of the file.
    Returns X, y, the layout and the features' names."""
    header = csv_header(p)
    t = _target_column(header, target)
    rows, counts = read_csv_split(header, rank, size, job)
    layout = _layout(sum(counts), rank, size, cfg.batch_size)
    first = sum(counts[:rank])
    owners = layout.owners(np.arange(first, first + len(rows)))
    order = np.argsort(owners, kind="stable")  # by rank, and in file order within each
    sent = np.bincount(owners, minlength=size)
    table = job.alltoall(rows[order], sent) if size > 1 else rows
    dtype = cfg.dtype or "float64"  # decimal text: float64 keeps what it says
    X = aligned_empty((len(table), len(header.names) - 1), dtype)
    X[...] = np.delete(table, t, axis=1)
    y = aligned_empty((len(table),), dtype)
    y[...] = table[:, t]
    _check_finite(X, y, str(p), layout)
    return X, y, layout, tuple(header.names[:t] + header.names[t + 1 :])


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
