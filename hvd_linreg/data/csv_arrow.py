"""A CSV split's columns parsed by pyarrow's CSV reader, when pyarrow is installed: the same
values, texts and missing cells as the tool's own parser (data/csv.py), in C++ rather than
Python (docs/performance.md, section 11). Where the two could differ, this parser declines
(None) and the split goes to the tool's own: a line that pyarrow cannot read, a cell that
pyarrow's float parser refuses but Python's accepts (' 1.5', '1_000'), a word in a column of
numbers, a row whose every used cell is missing (a line of blanks is no row to the tool's
parser). The tool's parser then also names the line of whatever is wrong."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from hvd_linreg.data.categorical import Words
from hvd_linreg.data.missing import MISSING_CELLS, is_missing

# pyarrow's reads of a split: blocks this large (its default is 1 MB; larger ones parse a
# little faster and stay small beside the split).
BLOCK_BYTES = 16 << 20

Column = tuple[np.ndarray, Words | None]  # values (float64, NaN where missing), text


def parse_split(
    data: bytes,
    num_columns: int,
    keep: Sequence[int],
    words_allowed: frozenset[int],
    as_text: frozenset[int],
) -> list[Column] | None:
    """The columns `keep` of the split's rows, as data/csv.py's _parse_column reads them: a
    column of numbers (and missing cells) as float64; a column in as_text, or in words_allowed
    with a word in it, as its Words (values 0, NaN where missing). None where pyarrow cannot
    be trusted to read the split as the tool's parser does."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:
        return None
    names = [f"c{j}" for j in range(num_columns)]  # the header's names may repeat
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(
                column_names=names, use_threads=False, block_size=BLOCK_BYTES
            ),
            parse_options=pacsv.ParseOptions(newlines_in_values=b'"' in data),
            convert_options=pacsv.ConvertOptions(
                include_columns=[names[j] for j in keep],
                column_types={names[j]: pa.string() for j in keep},
                null_values=sorted(MISSING_CELLS),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowException, ValueError):
        return None
    columns = []
    for j in keep:
        column = _column(table.column(names[j]), j in words_allowed, j in as_text)
        if column is None:
            return None
        columns.append(column)
    if columns and table.num_rows:
        empty = np.logical_and.reduce([np.isnan(values) for values, _ in columns])
        if empty.any():  # a line of blanks, or a row with every used cell missing
            return None
    return columns


def _column(cells, words_allowed: bool, as_text: bool) -> Column | None:
    """One column's cells (a pyarrow string column, null where missing) as values and text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not as_text:
        try:  # pyarrow's float parser reads a subset of what Python's float() reads
            return pc.cast(cells, pa.float64()).to_numpy(), None  # a null: NaN
        except pa.ArrowInvalid:
            pass
    raw = Words.of_arrow(cells)
    texts = [None if c is None or is_missing(c) else c.strip() for c in raw.texts]
    index = raw.index
    missing = np.array([t is None for t in texts])[index]
    if not as_text:
        numbers = [_float(t) for t in texts]
        if all(n is not None for t, n in zip(texts, numbers) if t is not None):
            lookup = np.array([np.nan if n is None else n for n in numbers], np.float64)
            return lookup[index], None
        if not words_allowed:
            return None  # a word among numbers: the tool's parser names its line
    return np.where(missing, np.nan, 0.0), Words(index, texts)


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
