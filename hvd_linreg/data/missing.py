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
