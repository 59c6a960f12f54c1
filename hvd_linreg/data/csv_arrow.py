"""A CSV split's columns parsed by pyarrow's CSV reader, when pyarrow is installed: the same
values, texts and missing cells as the tool's own parser (data/csv_parse.py), in C++ rather than
Python (docs/performance.md, section 11). Where the two could differ, this parser declines
(None) and the split goes to the tool's own: a line that pyarrow cannot read, a cell that
pyarrow's float parser refuses but Python's accepts (' 1.5', '1_000'), a word in a column of
numbers, a row whose every used cell is missing (a line of blanks is no row to the tool's
parser). The tool's parser then also names the line of whatever is wrong."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from hvd_linreg.data.categorical import Words
from hvd_linreg.data.missing import MISSING_CELLS, is_missing
from hvd_linreg.runtime.buffers import aligned_empty

# pyarrow's reads of a split: blocks this large (its default is 1 MB). A block and its
# columns stay in the cache while they are written into the table: 1 GB at 2 ranks took
# 2.7-2.8 s with 4 MB blocks, 2.9-3.0 s with 1 MB and 3.2-3.9 s with 16 MB.
BLOCK_BYTES = 4 << 20
# The first lines' bytes, read first to find the columns of text: a column refused as numbers
# costs a read up to its refusal, a block.
SNIFF_BYTES = 64 << 10


class Parsed(NamedTuple):
    """A split's rows as pyarrow read them."""

    # (rows, columns) float64: the kept columns' values, NaN where missing (a column of text:
    # 0, its cells in words); the other columns NaN
    table: np.ndarray
    words: dict[int, Words]  # the columns read as text
    missing: np.ndarray  # whether a kept cell of the row is missing
    empty: np.ndarray  # whether every kept cell of the row is missing
    num_lines: int  # physical lines, blank ones included


def parse_split(
    data: bytes | memoryview,
    num_columns: int,
    keep: Sequence[int],
    words_allowed: frozenset[int],
    as_text: frozenset[int],
) -> Parsed | None:
    """The columns `keep` of the split's rows, as data/csv_parse.py's _parse_column reads them: a
    column of numbers (and missing cells) as float64; a column in as_text, or in words_allowed
    with a word in it, as its Words. None where pyarrow cannot be trusted to read the split as
    the tool's parser does.

    pyarrow converts each column as it parses: numbers to float64, text to a dictionary (each
    block's distinct texts and an index a row), block by block into one table. A column in
    words_allowed that its float parser refuses is read again as text; any other refusal reads
    every column as text. The texts are judged here, as Python's float() reads them."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    text = set(as_text) & set(keep)
    head = data[: bytes(data[:SNIFF_BYTES]).rfind(b"\n") + 1]
    lines = count_lines(data)
    try:
        if len(head) < len(data):  # the text columns of the first lines, at their cost
            _typed(lambda t: _read(head, num_columns, keep, t), words_allowed, text)
        read = _typed(lambda t: _stream(data, num_columns, keep, t, lines), words_allowed, text)
        if read is None:  # every column as text
            read = _strings(data, num_columns, keep, as_text)
    except (pa.ArrowException, ValueError):
        return None
    rows, raw = read
    for j, cells in raw.items():
        if not rows.put_text(j, cells, j in words_allowed, j in as_text):
            return None  # a word among numbers: the tool's parser names its line
    return rows.parsed(lines)


def count_lines(data: bytes | memoryview) -> int:
    """The physical lines of a split's bytes (the last may have no line break)."""
    return count_octets(data, b"\n") + (len(data) > 0 and data[-1] != ord("\n"))


def count_octets(data, octet: bytes, begin: int = 0, end: int | None = None) -> int:
    """How often octet (one byte) occurs in data's bytes begin .. end - 1 (a buffer: bytes, a
    memoryview, a file's mmap), counted in parts of the bytes as they are."""
    octets, step = np.frombuffer(data, np.uint8), 4 << 20
    end, value = len(octets) if end is None else end, ord(octet)
    return sum(
        int(np.count_nonzero(octets[k : min(k + step, end)] == value))
        for k in range(begin, end, step)
    )


class _Rows:
    """A split's table as pyarrow's blocks are written into it, and which rows miss a kept
    cell."""

    def __init__(self, bound: int, num_columns: int, keep: Sequence[int]):
        self.table = aligned_empty((bound, num_columns), np.float64)
        self.missing, self.empty = np.zeros(bound, bool), np.ones(bound, bool)
        self.unused = [j for j in range(num_columns) if j not in keep]
        self.words: dict[int, Words] = {}

    def cut(self, rows: int) -> None:
        """Keep the first rows: those written (the table was sized by a bound)."""
        self.table, self.missing, self.empty = (
            self.table[:rows],
            self.missing[:rows],
            self.empty[:rows],
        )

    def put(self, j: int, at: int, values: np.ndarray) -> None:
        """Column j's rows at, at + 1, ...: values, NaN where missing."""
        rows = slice(at, at + len(values))
        self.table[rows, j] = values
        nan = np.isnan(values)
        self.missing[rows] |= nan
        self.empty[rows] &= nan

    def put_text(self, j: int, raw: Words, words_allowed: bool, as_text: bool) -> bool:
        """Column j's cells read as text (raw: as pyarrow read them), judged as the tool's
        parser judges them: stripped, missing where MISSING_CELLS holds them; numbers (not
        as_text) where every text is one; else its Words, where words are allowed. False
        where they are not."""
        texts = [None if t is None or is_missing(t) else t.strip() for t in raw.texts]
        numbers = [_float(t) for t in texts]
        if not as_text and all(n is not None for t, n in zip(texts, numbers) if t is not None):
            lookup = np.array([np.nan if n is None else n for n in numbers], np.float64)
        elif as_text or words_allowed:
            lookup = np.array([np.nan if t is None else 0.0 for t in texts])
            self.words[j] = Words(raw.index, texts)
        else:
            return False
        step = 1 << 20  # in parts: no column-sized array beside the table
        for at in range(0, len(raw.index), step):
            self.put(j, at, lookup[raw.index[at : at + step]])
        return True

    def parsed(self, lines: int) -> Parsed:
        self.table[:, self.unused] = np.nan
        return Parsed(self.table, self.words, self.missing, self.empty, lines)


def _typed(read, words_allowed: frozenset[int], text: set):
    """read(text), each column in words_allowed that pyarrow's float parser refuses added to
    text and read again as text; None where another column is refused."""
    import pyarrow as pa

    while True:
        try:
            return read(text)
        except pa.ArrowInvalid as e:
            j = _refused_column(str(e))
            if j is None or j not in words_allowed or j in text:
                return None
            text.add(j)  # a word, or a number only Python's float() reads: judged as text


def _stream(data, num_columns: int, keep: Sequence[int], text: set, lines: int):
    """pyarrow's parse of the split, block by block, each written into one table as it comes:
    no block is kept, so pyarrow reuses their memory (a fresh page costs more than the copy
    on this VM). lines bounds the rows. (The rows, the columns of text as read.)"""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    reader = pacsv.open_csv(pa.BufferReader(data), **_options(num_columns, keep, text))
    rows = _Rows(lines, num_columns, keep)
    index = {j: np.empty(lines, np.int32) for j in text}
    texts: dict[int, dict[str | None, int]] = {j: {None: 0} for j in text}  # 0: missing
    at = 0
    for block in reader:
        n = block.num_rows
        if at + n > lines:
            raise ValueError("more rows than lines")  # never: a row takes a line at least
        for j in keep:
            cells = block.column(f"c{j}")
            if j in text:
                _dictionary_index(cells, texts[j], index[j][at : at + n])
            else:
                rows.put(j, at, cells.to_numpy(zero_copy_only=False))
        at += n
    rows.cut(at)
    return rows, {j: Words(index[j][:at], list(texts[j])) for j in text}


def _dictionary_index(cells, texts: dict[str | None, int], out: np.ndarray) -> None:
    """A block's dictionary cells as positions in texts (each new text added), into out: the
    block's few texts are looked up once, its indices mapped in one pass."""
    positions = [texts.setdefault(t, len(texts)) for t in cells.dictionary.to_pylist()]
    raw = cells.indices
    values = np.frombuffer(raw.buffers()[1], np.int32, len(raw), raw.offset * 4)
    np.take(np.array(positions or [0], np.int32), values, out=out, mode="clip")
    if raw.null_count:  # a null's index is any number: clipped above, then 0 (missing)
        out[raw.is_null().to_numpy(zero_copy_only=False)] = 0


def _strings(data, num_columns: int, keep: Sequence[int], as_text: frozenset[int]):
    """Every column read as strings: a column that pyarrow casts to float64 (not as_text) is
    its values, any other its texts as read. (The rows, the columns of text as read.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _read(data, num_columns, keep, set(keep), dictionary=False)
    rows, raw = _Rows(table.num_rows, num_columns, keep), {}
    for j in keep:
        cells = table.column(f"c{j}")
        if j not in as_text:
            try:  # pyarrow's float parser reads a subset of what Python's float() reads
                rows.put(j, 0, pc.cast(cells, pa.float64()).to_numpy())
                continue
            except pa.ArrowInvalid:
                pass
        raw[j] = Words.of_arrow(cells)
    return rows, raw


def _options(num_columns: int, keep: Sequence[int], text: set, dictionary=True) -> dict:
    """pyarrow's CSV options for the columns keep, those in text as text (dictionary: its
    distinct texts and an index a row), the others as float64; a null where a cell is
    missing."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [f"c{j}" for j in range(num_columns)]  # the header's names may repeat
    as_text = pa.dictionary(pa.int32(), pa.string()) if dictionary else pa.string()
    return {
        "read_options": pacsv.ReadOptions(
            column_names=names, use_threads=False, block_size=BLOCK_BYTES
        ),
        # a quoted field may hold line breaks: allowed, at no cost measured where none does
        "parse_options": pacsv.ParseOptions(newlines_in_values=True),
        "convert_options": pacsv.ConvertOptions(
            include_columns=[names[j] for j in keep],
            column_types={names[j]: as_text if j in text else pa.float64() for j in keep},
            null_values=sorted(MISSING_CELLS),
            strings_can_be_null=True,
        ),
    }


def _read(data, num_columns: int, keep: Sequence[int], text: set, dictionary=True):
    """pyarrow's table of the columns keep, read whole (_options)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    return pacsv.read_csv(  # the bytes as they are, not copied
        pa.BufferReader(data), **_options(num_columns, keep, text, dictionary)
    )


def _refused_column(message: str) -> int | None:
    """The column of pyarrow's conversion error ("In CSV column #2: ... to double: ..."),
    or None for any other error."""
    found = re.match(r"In CSV column #(\d+): .*CSV conversion error to double", message)
    return int(found[1]) if found else None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
