"""Missing values (--missing): which CSV cells are missing, and which file row a row kept
after dropping some (--missing drop) was, so that messages about it still name its line.

A cell is missing when, stripped, it is one of MISSING_CELLS: the spellings pandas and R write
for a missing number. A NaN from any source is missing too; inf is a value (and refused as
one). Which rows drop depends on each row alone, so every rank count drops the same rows.
"""

from __future__ import annotations

import numpy as np

MISSING_CELLS = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "NULL"})
HINT = "fill it, or drop such rows with --missing drop"


def is_missing(cell: str) -> bool:
    """Whether a CSV cell holds no value."""
    return cell.strip() in MISSING_CELLS


def file_row(kept: int, dropped: np.ndarray) -> int:
    """The row (0-based, over the dataset's files) of the kept-th row kept, dropped being the
    rows dropped, sorted: the o with o - #{dropped <= o} = kept that is not itself dropped."""
    row = kept
    while (moved := kept + int(np.searchsorted(dropped, row, "right"))) != row:
        row = moved
    return row


def complete(values) -> np.ndarray:
    """Which rows of values (an array, a DataFrame or a Series: fit()'s rows) hold no missing
    value: NaN, None or pandas' NA, in any column."""
    if hasattr(values, "isna"):
        na = values.isna().to_numpy()
    else:
        array = np.asarray(values)
        if array.dtype.kind in "fc":
            na = np.isnan(array)
        elif array.dtype.kind == "O":
            na = np.vectorize(lambda v: v is None or v != v, otypes=[bool])(array)
        else:
            na = np.zeros(array.shape, bool)
    return ~na.reshape(len(na), -1).any(axis=1)


def rows_of(values, keep: np.ndarray):
    """values' rows where keep is true, of the same kind (an array, a DataFrame, a Series)."""
    if values is None:
        return None
    if hasattr(values, "iloc"):
        return values.iloc[np.flatnonzero(keep)]
    return np.asarray(values)[keep]
