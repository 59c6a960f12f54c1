""".npy and .npz files: arrays read by ranges of rows straight from the file where it is laid
out as one C-ordered array, else read whole."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from hvd_linreg.data.spec import DataSpec, TableReader
from hvd_linreg.data.table import StoredArray, Table, open_without_readahead, own_dtype, read_across
from hvd_linreg.errors import UsageError


def npy_table(files: list[Path], spec: DataSpec) -> Table:
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


def npz_table(files: list[Path], spec: DataSpec) -> Table:
    """A .npz file's arrays X (rows, features) and y (rows,), and the arrays the carried
    columns name (--weights w: an array w of one value per row), read as X's last columns."""
    return _opened(files[0], lambda p: _npz_table(p, spec.carried.names))


def npz_labels(num_features: int) -> list[str]:
    """How messages name a .npz file's columns: X's by position, then y."""
    return [f"X column {j}" for j in range(num_features)] + ["y"]


NPY = TableReader(npy_table)
NPZ = TableReader(
    npz_table, several_files=False, labels=npz_labels, note="(arrays X and y)", named_arrays=True
)


def _opened(p: Path, opener: Callable):
    """opener(p), with what goes wrong reading the file said as a UsageError."""
    try:
        return opener(p)
    except UsageError:  # the opener's own message (a ValueError too): as it is
        raise
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


def _npz_table(p: Path, carried: tuple[str, ...] = ()) -> Table:
    X, y, *more = _npz_arrays(p, carried)

    def read(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        if not more:
            return X[start:stop], y[start:stop]
        return np.column_stack([X[start:stop], *(a[start:stop] for a in more)]), y[start:stop]

    columns = X.shape[1] + len(more)
    dtype = own_dtype(X.dtype, y.dtype) if not more else np.result_type(X.dtype, *more)
    return Table(
        read,
        len(y),
        columns,
        (columns + 1) * np.dtype(dtype).itemsize,
        own_dtype(X.dtype, y.dtype),
    )


def _npz_arrays(p: Path, carried: tuple[str, ...] = ()) -> list[np.ndarray | StoredArray]:
    """X, y and the carried arrays of a .npz file."""
    with open_without_readahead(p) as f, zipfile.ZipFile(f) as z:
        names = {Path(n).stem: n for n in z.namelist()}
    missing = [k for k in ("X", "y") if k not in names]
    if missing:
        raise UsageError(
            f"{p}: a .npz file must hold arrays named X and y; missing {', '.join(missing)} "
            f"(found: {', '.join(sorted(names)) or 'nothing'})"
        )
    for name in carried:
        if name not in names or name in ("X", "y"):
            raise UsageError(
                f"{p} has no array {name!r} beside X and y to read as a column "
                f"(found: {', '.join(sorted(names))})"
            )
    X, y = (_npz_member(p, names[k]) for k in ("X", "y"))
    more = [_npz_member(p, names[k]) for k in carried]
    for a in (X, y, *more):
        _check_numeric(a, str(p))
    for name, a in zip(carried, more):
        if a.ndim != 1 or len(a) != len(y):
            raise UsageError(
                f"{p}: array {name!r} must hold one value per row, ({len(y)},); got {a.shape}"
            )
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
    return [X, y, *more]


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


def _check_numeric(a: np.ndarray, path: str) -> None:
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise UsageError(f"{path}: arrays must be numeric, got dtype {a.dtype}")
