"""This rank's shard of the global dataset: synthetic (as in the seed) or read from a file.

Sharding contract (the README repeats it; tests rely on it):
  * the global dataset has N rows; with s ranks only the first (N // s) * s are used;
  * rank r owns global rows r, r + s, r + 2s, ... (its shard, n = N // s rows);
  * step i uses the shard's rows (i * B + j) mod n for j = 0 .. B-1 (see train.py).
So k ranks with batch B walk the same global batches as 1 rank with batch k * B.
"""

from __future__ import annotations

import csv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvd_linreg.config import SYNTHETIC_FEATURES, SYNTHETIC_SAMPLES, Config, UsageError

TRUE_BIAS = 2.0
NOISE_STDDEV = 0.1


def true_weights(num_features: int) -> np.ndarray:
    """w_true[j] = 5 / (j + 1): 5 for the seed's single feature, distinct for every feature."""
    return 5.0 / np.arange(1, num_features + 1, dtype=np.float64)


@dataclass
class Shard:
    X: np.ndarray  # (n, num_features) float32, this rank's rows only
    y: np.ndarray  # (n,) float32
    num_samples: int  # global rows in use: N // size * size
    num_dropped: int  # global rows beyond the last multiple of size
    source: str  # "synthetic" or the data file's path
    w_true: list | None = None  # known for synthetic data only
    b_true: float | None = None

    @property
    def num_features(self) -> int:
        return self.X.shape[1]


def load_shard(cfg: Config, rank: int, size: int) -> Shard:
    """Build or read only this rank's rows; raise UsageError for anything the user can fix."""
    if cfg.synthetic:
        num_samples = cfg.num_samples or SYNTHETIC_SAMPLES
        num_features = cfg.num_features or SYNTHETIC_FEATURES
        _check_fits(num_samples, size, cfg.batch_size)
        rows = np.arange(rank, num_samples // size * size, size, dtype=np.int64)
        X, y = synthetic_rows(cfg.seed, rows, num_features)
        w_true = true_weights(num_features).tolist()
        source, b_true = "synthetic", TRUE_BIAS
    else:
        # Every candidate row r, r+s, ... up to N is read and checked, including the dropped
        # tail, so a bad file is refused whatever the number of ranks.
        X, y, num_samples = read_rows(cfg.data, cfg.target, rank, size)
        _check_fits(num_samples, size, cfg.batch_size)
        keep = num_samples // size
        X, y = X[:keep], y[:keep]
        source, w_true, b_true = cfg.data, None, None
    used = num_samples // size * size
    return Shard(X, y, used, num_samples - used, source, w_true, b_true)


def _check_fits(num_samples: int, size: int, batch_size: int) -> None:
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
    seed: int, rows: np.ndarray, num_features: int, chunk_rows: int = 1 << 14
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of y = X w_true + 2 + 0.1 noise, x ~ N(0, 1) per feature, for the given row ids.

    Chunks of 16 K rows: as fast as larger ones, and their float64 temporaries stay small.
    """
    w_true = true_weights(num_features)
    X = aligned_empty((len(rows), num_features), np.float32)
    y = aligned_empty((len(rows),), np.float32)
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


def read_rows(
    path: str, target: str | None, rank: int, size: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Rows rank, rank + size, ... of a .npy/.npz/.csv file, and the file's row count."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"data file {path} does not exist")
    if not p.is_file():
        raise UsageError(f"data path {path} is not a file")
    suffix = p.suffix.lower()
    if target is not None and suffix != ".csv":
        raise UsageError("--target names a CSV column; it does not apply to " + suffix)
    try:
        if suffix == ".npy":
            X, y = _npy_columns(np.load(p, mmap_mode="r", allow_pickle=False), path)
        elif suffix == ".npz":
            X, y = _npz_arrays(p)
        elif suffix == ".csv":
            return _read_csv(p, target, rank, size)
        else:
            raise UsageError(
                f"{path}: unknown data format {suffix or '(no extension)'}; "
                "use .npy, .npz (arrays X and y) or .csv (with a header line)"
            )
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None
    num_rows = len(y)
    if num_rows == 0:
        raise UsageError(f"{path} holds no rows")
    # Fancy-free strided slicing of a memory map reads only this rank's rows.
    X = np.asarray(X[rank::size], dtype=np.float32)
    y = np.asarray(y[rank::size], dtype=np.float32)
    _check_finite(X, y, path, rank, size)
    return X, y, num_rows


def _npy_columns(a: np.ndarray, path: str) -> tuple[np.ndarray, np.ndarray]:
    """A .npy holds one (N, features + 1) array; its last column is the target."""
    _check_numeric(a, path)
    if a.ndim != 2 or a.shape[1] < 2:
        raise UsageError(
            f"{path}: a .npy file must hold a 2-D array (rows, features + target), "
            f"got shape {a.shape}"
        )
    return a[:, :-1], a[:, -1]


def _npz_arrays(p: Path) -> tuple[np.ndarray, np.ndarray]:
    with zipfile.ZipFile(p) as z:
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


def _npz_member(p: Path, name: str) -> np.ndarray:
    """Memory-map an uncompressed .npz member (np.savez); a compressed one is read whole."""
    with zipfile.ZipFile(p) as z:
        info = z.getinfo(name)
        if info.compress_type != zipfile.ZIP_STORED:
            with z.open(name) as f:
                return np.lib.format.read_array(f, allow_pickle=False)
    with open(p, "rb") as f:
        f.seek(info.header_offset)
        local_header = f.read(30)
        name_len = int.from_bytes(local_header[26:28], "little")
        extra_len = int.from_bytes(local_header[28:30], "little")
        f.seek(info.header_offset + 30 + name_len + extra_len)
        version = np.lib.format.read_magic(f)
        read_header = _NPY_HEADER_READERS.get(version)
        if read_header is None:  # a format NumPy has no public header reader for: read it whole
            with zipfile.ZipFile(p) as z, z.open(name) as member:
                return np.lib.format.read_array(member, allow_pickle=False)
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise ValueError(f"array {name} holds Python objects, not numbers")
        offset = f.tell()
    return np.memmap(
        p, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C"
    )


def _read_csv(
    p: Path, target: str | None, rank: int, size: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Stream the file, parsing only this rank's lines; every rank counts all of them."""
    rows: list[list[float]] = []
    num_rows = 0
    with open(p, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
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
        for cells in reader:
            if not cells or all(not c.strip() for c in cells):
                continue  # blank lines are not rows
            line = reader.line_num
            if num_rows % size == rank:
                if len(cells) != len(header):
                    raise UsageError(
                        f"{p} line {line}: {len(cells)} fields, but the header has {len(header)}"
                    )
                try:
                    rows.append([float(c) for c in cells])
                except ValueError:
                    bad = next(c for c in cells if not _is_float(c))
                    raise UsageError(f"{p} line {line}: {bad!r} is not a number") from None
            num_rows += 1
    if num_rows == 0:
        raise UsageError(f"{p} has a header but no data rows")
    table = np.array(rows, dtype=np.float64).reshape(-1, len(header))
    y = table[:, t].astype(np.float32)
    X = np.delete(table, t, axis=1).astype(np.float32)
    _check_finite(X, y, str(p), rank, size)
    return X, y, num_rows


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_numeric(a: np.ndarray, path: str) -> None:
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise UsageError(f"{path}: arrays must be numeric, got dtype {a.dtype}")


def _check_finite(X: np.ndarray, y: np.ndarray, path: str, rank: int, size: int) -> None:
    bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(y))
    if bad.any():
        row = rank + size * int(np.argmax(bad))
        raise UsageError(
            f"{path}: data row {row} (0-based) holds NaN or inf; clean or drop such rows"
        )
