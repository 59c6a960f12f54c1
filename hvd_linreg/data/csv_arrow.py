"""A CSV split's columns parsed by pyarrow's CSV reader, when pyarrow is installed: the same
values, texts and missing cells as the tool's own parser (data/csv.py), in C++ rather than
Python (docs/performance.md, section 11). Where the two could differ, this parser declines
(None) and the split goes to the tool's own: a line that pyarrow cannot read, a cell that
pyarrow's float parser refuses but Python's accepts (' 1.5', '1_000'), a word in a column of
numbers, a row whose every used cell is missing (a line of blanks is no row to the tool's
parser). The tool's parser then also names the line of whatever is wrong."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from hvd_linreg.data.categorical import Words
from hvd_linreg.data.missing import MISSING_CELLS, is_missing

# pyarrow's reads of a split: blocks this large (its default is 1 MB; larger ones parse a
# little faster and stay small beside the split).
BLOCK_BYTES = 16 << 20
# The first lines' bytes, read first to find the columns of text: a column refused as numbers
# costs a read up to its refusal, a block.
SNIFF_BYTES = 64 << 10

# a column's values (float64, NaN where missing) in pieces, pyarrow's blocks; or its text
Column = tuple[list[np.ndarray], None] | tuple[None, Words]


def parse_split(
    data: bytes,
    num_columns: int,
    keep: Sequence[int],
    words_allowed: frozenset[int],
    as_text: frozenset[int],
) -> list[Column] | None:
    """The columns `keep` of the split's rows, as data/csv.py's _parse_column reads them: a
    column of numbers (and missing cells) as float64; a column in as_text, or in words_allowed
    with a word in it, as its Words. None where pyarrow cannot be trusted to read the split as
    the tool's parser does.

    pyarrow converts each column as it parses: numbers to float64, text to a dictionary (each
    block's distinct texts and an index a row). A column in words_allowed that its float parser
    refuses is read again as text; any other refusal reads every column as text, and the cells
    are judged here, as Python's float() reads them."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    text = set(as_text) & set(keep)
    head = data[: data.rfind(b"\n", 0, SNIFF_BYTES) + 1]
    try:
        if len(head) < len(data):  # the text columns of the first lines, at their cost
            _typed_read(head, num_columns, keep, words_allowed, text)
        table = _typed_read(data, num_columns, keep, words_allowed, text)
    except (pa.ArrowException, ValueError):
        return None
    if table is None:
        try:
            table = _read(data, num_columns, keep, set(keep), dictionary=False)
        except (pa.ArrowException, ValueError):
            return None
    columns = []
    for j in keep:
        column = _column(table.column(f"c{j}"), j in words_allowed, j in as_text)
        if column is None:
            return None
        columns.append(column)
    return columns


def _typed_read(data: bytes, num_columns: int, keep, words_allowed, text: set):
    """_read's table, each column in words_allowed that pyarrow's float parser refuses added
    to text and read again as text; None where another column is refused."""
    import pyarrow as pa

    while True:
        try:
            return _read(data, num_columns, keep, text)
        except pa.ArrowInvalid as e:
            j = _refused_column(str(e))
            if j is None or j not in words_allowed or j in text:
                return None
            text.add(j)  # a word, or a number only Python's float() reads: judged as text


def _read(data: bytes, num_columns: int, keep: Sequence[int], text: set, dictionary=True):
    """pyarrow's table of the columns keep, those in text as text (dictionary: its distinct
    texts and an index a row), the others as float64; a null where a cell is missing."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"c{j}" for j in range(num_columns)]  # the header's names may repeat
    as_text = pa.dictionary(pa.int32(), pa.string()) if dictionary else pa.string()
    return pacsv.read_csv(
        pa.BufferReader(data),  # the bytes as they are, not copied
        read_options=pacsv.ReadOptions(
            column_names=names, use_threads=False, block_size=BLOCK_BYTES
        ),
        parse_options=pacsv.ParseOptions(newlines_in_values=b'"' in data),
        convert_options=pacsv.ConvertOptions(
            include_columns=[names[j] for j in keep],
            column_types={names[j]: as_text if j in text else pa.float64() for j in keep},
            null_values=sorted(MISSING_CELLS),
            strings_can_be_null=True,
        ),
    )


def _refused_column(message: str) -> int | None:
    """The column of pyarrow's conversion error ("In CSV column #2: ... to double: ..."),
    or None for any other error."""
    found = re.match(r"In CSV column #(\d+): .*CSV conversion error to double", message)
    return int(found[1]) if found else None


def _column(cells, words_allowed: bool, as_text: bool) -> Column | None:
    """One column's cells as pyarrow read them (float64, a dictionary or strings; null where
    missing) as values or text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_floating(cells.type):  # pyarrow's parse, each block as it is: a null NaN
        return [chunk.to_numpy(zero_copy_only=False) for chunk in cells.chunks], None
    if pa.types.is_dictionary(cells.type):
        raw = Words.of_dictionary(cells)
    else:
        if not as_text:
            try:  # pyarrow's float parser reads a subset of what Python's float() reads
                return [pc.cast(cells, pa.float64()).to_numpy()], None
            except pa.ArrowInvalid:
                pass
        raw = Words.of_arrow(cells)
    texts = [None if c is None or is_missing(c) else c.strip() for c in raw.texts]
    index = raw.index
    if not as_text:
        numbers = [_float(t) for t in texts]
        if all(n is not None for t, n in zip(texts, numbers) if t is not None):
            lookup = np.array([np.nan if n is None else n for n in numbers], np.float64)
            return [lookup[index]], None
        if not words_allowed:
            return None  # a word among numbers: the tool's parser names its line
    return None, Words(index, texts)


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
