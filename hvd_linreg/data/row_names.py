"""How messages name a row of the data: a CSV or libsvm file's by its line, as an editor
counts lines (the header is line 1); a Parquet, .npy or .npz file's by its row, from 0, as
pandas and NumPy index them; the rows fit() is given by their row in that rank's arrays or
DataFrame, from 0. Only a run that stops names a row: the file is then read once more."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

from hvd_linreg.data.csv_parse import long_fields


def row_name(path, row: int) -> str:
    """A data file's row (from 0, over the rows after any header) as a message names it."""
    if Path(path).suffix.lower() != ".csv":
        return f"{path} row {row}"
    lines = _record_lines(path)
    line = next(itertools.islice(lines, row + 1, None), None)  # the header's is the first
    return f"{path} line {line}" if line is not None else f"{path} row {row}"


def row_name_in(files: list[Path], row: int) -> str:
    """The row of the files read one after another (from 0) as a message names it."""
    for path in files[:-1]:
        count = _rows_in(path)
        if row < count:
            return row_name(path, row)
        row -= count
    return row_name(files[-1], row)


def _record_lines(path):
    """The line on which each record of a CSV file ends, blank lines not being records."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f, long_fields():
        reader = csv.reader(f)
        for cells in reader:
            if cells and any(c.strip() for c in cells):
                yield reader.line_num


def _rows_in(path: Path) -> int:
    """A data file's rows: a CSV file's records after the header, a Parquet file's rows."""
    if Path(path).suffix.lower() == ".csv":
        return max(sum(1 for _ in _record_lines(path)) - 1, 0)
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows
