"""A CSV split's rows parsed: by pyarrow's reader where it reads them as the tool does
(data/csv_arrow.py), else by the tool's own parser (Python's csv module and NumPy), which also
names the line of whatever is wrong. Columns a split does not use are not parsed; a column of
features with words is read as text (data/categorical.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from operator import itemgetter

import numpy as np

from hvd_linreg.data.categorical import Levels, Words, codes, level_name, reads_as_number
from hvd_linreg.data.columns import column_list
from hvd_linreg.data.csv_arrow import parse_split
from hvd_linreg.data.csv_ranges import Buffer
from hvd_linreg.data.missing import is_missing


@dataclass
class CsvSplit:
    """What one rank parsed of a CSV file: the lines that start in its byte range."""

    rows: np.ndarray  # (rows, columns) float64
    num_lines: int  # physical lines, blank ones included: for line numbers in messages
    # (line within the split, what is wrong, whether it is a missing value)
    problem: tuple[int, str, bool] | None = None
    # --missing drop: the split's rows dropped (0-based among its rows, before dropping)
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the kept rows' text of the columns read as text
    words: dict[int, Words] = field(default_factory=dict)


@dataclass(frozen=True)
class Kinds:
    """How a split's columns are read beside numbers (data/categorical.py)."""

    words: frozenset[int] = frozenset()  # a word here makes the column categorical
    as_text: frozenset[int] = frozenset()  # read as text, numbers too: categorical by words
    given: Levels = field(default_factory=dict)  # encoded now by these levels (a model's)


NO_WORDS = Kinds()


# The csv module refuses a field longer than its limit (131,072 characters by default); a
# column of long text, or a long column name, is data like any other, so the tool's every read
# with the csv module lifts the limit while it reads (long_fields). The limit is the process's.
FIELD_SIZE_LIMIT = 2**31 - 1  # the largest that a C long holds on every platform


@contextmanager
def long_fields() -> Iterator[None]:
    """The csv module's readers take fields of any length (up to FIELD_SIZE_LIMIT) inside the
    block; its limit is as it was after."""
    limit = csv.field_size_limit(FIELD_SIZE_LIMIT)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


# Rows parsed at a time (parse_csv_split): their cells as Python strings take about 350 bytes
# a row of five columns, a few hundred MB at most.
PARSE_ROWS = 1 << 20


def parse_csv_split(
    data: Buffer,
    names: list[str],
    used: list[int] | None = None,
    drop: bool = False,
    kinds: Kinds = NO_WORDS,
) -> CsvSplit:
    """The lines' rows (see _parse_text), parsed by pyarrow where it reads them as the tool's
    own parser does (data/csv_arrow.py), else by that parser."""
    keep = list(range(len(names))) if used is None else sorted(set(used))
    split = _arrow_split(data, names, keep, drop, kinds)
    if split is not None:
        return split
    return _parse_text(str(data, "utf-8", "replace"), names, keep, drop, kinds)


def _arrow_split(
    data: Buffer, names: list[str], keep: list[int], drop: bool, kinds: Kinds
) -> CsvSplit | None:
    """_parse_text's split by pyarrow; None where there is a problem to name (the tool's
    parser names its line) or pyarrow declines."""
    parsed = parse_split(data, len(names), keep, kinds.words, kinds.as_text)
    if parsed is None:
        return None
    table, missing = parsed.table, parsed.missing
    if keep and parsed.empty.any():  # a line of blanks, or a row with every used cell missing
        return None
    words = {j: text for j, text in parsed.words.items() if j not in kinds.given}
    for j in (j for j in keep if j in kinds.given):  # coded now, by a model's levels
        given, values, text = kinds.given[j], table[:, j], parsed.words.get(j)
        found = text.codes(given) if text is not None else codes(values, given)
        if (~np.isnan(values) & (found < 0)).any():
            return None  # a level the model does not know
        table[:, j] = np.where(np.isnan(values), np.nan, found)
    if missing.any() and not drop:
        return None
    if missing.any():
        table = table[~missing]
        words = {j: w.rows(~missing) for j, w in words.items()}
    return CsvSplit(table, parsed.num_lines, dropped=np.flatnonzero(missing), words=words)


def _parse_text(text: str, names: list[str], keep: list[int], drop: bool, kinds: Kinds) -> CsvSplit:
    """The lines' rows: the columns `used` (by default all) parsed as numbers, the others NaN.
    A word in a column kinds.words may hold makes the column's text the split's words;
    kinds.as_text columns are read as text; kinds.given columns are encoded with those levels.
    The first problem by row (a word where a number belongs, a missing value, an unknown level,
    a line with too many fields) is the split's, except that with drop a missing value drops
    its row. Parsed PARSE_ROWS rows at a time: their cells, as Python strings, stay small."""
    num_columns = len(names)
    num_lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    reader = csv.reader(io.StringIO(text, newline=""))
    tables, words, dropped, done = [], [], [], 0
    with long_fields():
        for records, stop in _record_batches(reader, num_columns, keep):
            table, worded, gone, problem = _parse_records(records, names, keep, drop, kinds)
            problem = problem or stop
            if problem is not None:
                row, what, is_missing, line = problem
                line = line if line is not None else line_of(text, done + row)
                return CsvSplit(np.zeros((0, num_columns)), num_lines, (line, what, is_missing))
            tables.append(table)
            words.append(worded)
            dropped.append(done + gone)
            done += len(records)
    columns = {j for worded in words for j in worded}
    if any(worded.keys() != columns for worded in words):  # words in some parts only: as text
        return _parse_text(text, names, keep, drop, replace(kinds, as_text=frozenset(columns)))
    return CsvSplit(
        np.concatenate(tables),
        num_lines,
        dropped=np.concatenate(dropped),
        words={j: Words.concat([worded[j] for worded in words]) for j in columns},
    )


def _parse_records(
    records: list[Sequence[str]], names: list[str], keep: list[int], drop: bool, kinds: Kinds
) -> tuple:
    """parse_csv_split's work on some of its rows: (their table, their words, the rows
    dropped, None), or (None, None, None, the first problem: (row, what, whether a missing
    value, None))."""
    num_columns = len(names)
    problems: list[tuple[int, str, bool, None]] = []
    table = np.full((len(records), num_columns), np.nan)
    words: dict[int, Words] = {}
    special = kinds.as_text | kinds.given.keys()
    numbers = None if special & set(keep) else _numbers(records, len(keep))
    if numbers is not None:  # the common case: every cell used a number, or NaN
        table[:, keep] = numbers
    for j, cells in zip(keep, zip(*records) if records and numbers is None else []):
        values, text_of, bad = _parse_column(cells, j in kinds.words, j in kinds.as_text)
        table[:, j] = values
        if bad is not None:
            problems.append(
                (bad, f"{cells[bad]!r} is not a number (column {names[j]!r})", False, None)
            )
        if j in kinds.given:
            given = kinds.given[j]
            found = text_of.codes(given) if text_of is not None else codes(values, given)
            unknown = _first(~np.isnan(values) & (found < 0))
            if unknown is not None:
                level = cells[unknown].strip()
                what = (
                    f"{level!r} in column {names[j]!r} is not one of the levels the model was "
                    f"fitted with ({column_list([level_name(v) for v in kinds.given[j]])})"
                )
                problems.append((unknown, what, False, None))
            table[:, j] = np.where(np.isnan(values), np.nan, found)
        elif text_of is not None:
            words[j] = text_of
    missing = np.isnan(table[:, keep]).any(axis=1)
    if missing.any() and not drop:
        row = int(np.argmax(missing))
        j = keep[int(np.argmax(np.isnan(table[row, keep])))]
        cell = records[row][keep.index(j)]
        problems.append((row, f"a missing value ({cell!r}) in column {names[j]!r}", True, None))
    if problems:
        return None, None, None, min(problems, key=lambda p: p[0])
    dropped = np.flatnonzero(missing)
    if len(dropped):
        table = table[~missing]
        words = {j: w.rows(~missing) for j, w in words.items()}
    return table, words, dropped, None


def _record_batches(reader, num_columns: int, keep: list[int]):
    """(the cells `keep` of up to PARSE_ROWS rows, None), blank lines not being rows; the last
    batch with the problem of a line with another number of fields, where reading stopped."""
    size = PARSE_ROWS
    take = itemgetter(*keep) if len(keep) > 1 else (lambda cells: [cells[j] for j in keep])
    records: list[Sequence[str]] = []
    for cells in reader:
        if len(cells) == num_columns and cells[0].strip():  # most rows: no blank check
            records.append(take(cells))
        elif not cells or all(not c.strip() for c in cells):
            continue  # blank lines are not rows
        elif len(cells) != num_columns:
            what = f"{len(cells)} fields, but the header has {num_columns}"
            yield records, (len(records), what, False, reader.line_num)
            return
        else:
            records.append(take(cells))
        if len(records) == size:
            yield records, None
            records = []
    yield records, None


def _numbers(records: list[Sequence[str]], width: int) -> np.ndarray | None:
    """The records' cells as float64 (NaN spelled nan or NaN), or None if one is not a number."""
    try:
        return np.array(records, np.float64).reshape(-1, width)
    except ValueError:
        return None


def _parse_column(
    cells: tuple[str, ...], words_allowed: bool, as_text: bool
) -> tuple[np.ndarray, Words | None, int | None]:
    """A column's cells: their values (float64; NaN where missing), their stripped text when the
    column is read as text (as_text, or words_allowed and a word is among them; None where
    missing), and the first cell that is neither a number nor missing where no word is allowed."""
    if not as_text:
        try:
            return np.array(cells, np.float64), None, None
        except ValueError:
            pass
    # Each distinct cell is looked at once: a categorical column holds few of them.
    distinct = set(cells)
    gaps = {c for c in distinct if is_missing(c)}
    numbers = {c for c in distinct - gaps if reads_as_number(c)}
    missing = np.fromiter(map(gaps.__contains__, cells), bool, len(cells))
    if not as_text and len(gaps) + len(numbers) == len(distinct):  # numbers and gaps only
        values = [np.nan if m else float(c) for c, m in zip(cells, missing)]
        return np.array(values, np.float64), None, None
    if not as_text and not words_allowed:
        word = np.fromiter((c not in gaps and c not in numbers for c in cells), bool, len(cells))
        return np.where(missing, np.nan, 0.0), None, int(np.argmax(word))
    stripped = {c: None if c in gaps else c.strip() for c in distinct}
    return np.where(missing, np.nan, 0.0), Words.of(cells, stripped), None


def _first(mask: np.ndarray) -> int | None:
    return int(np.argmax(mask)) if mask.any() else None


def line_of(text: str, wanted: int) -> int:
    """The line (within the split) of its row `wanted`: the lines are read once more, as only
    a run that stops does."""
    row = -1
    reader = csv.reader(io.StringIO(text, newline=""))
    with long_fields():
        for cells in reader:
            if cells and any(c.strip() for c in cells):
                row += 1
                if row == wanted:
                    return reader.line_num
    raise AssertionError("a parsed row is not in its text")
