"""CSV files: every rank parses the lines that start in its byte range of the files, as
Hadoop's input splits cut a file, and the rows then go to the ranks that hold them (one
alltoall). A line's place in the file is not known before the lines ahead of it are read, so
CSV is not read by ranges of rows like the formats that give a Table."""

from __future__ import annotations

import csv
import io
import mmap
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hvd_linreg.config import Config, UsageError
from hvd_linreg.data.categorical import (
    CodedFeatures,
    Levels,
    Refuse,
    Words,
    agree_levels,
    codes,
    expand,
    expanded_names,
    level_name,
    mixed_column,
    named_columns,
    sources,
    width,
)
from hvd_linreg.data.columns import (
    check_same_columns,
    choose_columns,
    column_labels,
    column_list,
)
from hvd_linreg.data.csv_arrow import count_octets, parse_split
from hvd_linreg.data.holdout import Holdout, to_owners
from hvd_linreg.data.layout import layout_for
from hvd_linreg.data.missing import HINT, is_missing
from hvd_linreg.data.shard import RowNames, Shard, with_validation
from hvd_linreg.data.spec import DataSpec, ScatterReader
from hvd_linreg.data.table import aligned_empty
from hvd_linreg.ranks import Job


@dataclass
class _CsvSplit:
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
class _Kinds:
    """How a split's columns are read beside numbers (data/categorical.py)."""

    words: frozenset[int] = frozenset()  # a word here makes the column categorical
    as_text: frozenset[int] = frozenset()  # read as text, numbers too: categorical by words
    given: Levels = field(default_factory=dict)  # encoded now by these levels (a model's)


NO_WORDS = _Kinds()

# A split's bytes: mapped from the file (_csv_lines), or read where quotes decide its cuts
Buffer = bytes | memoryview


# Rows parsed at a time (_parse_csv_split): their cells as Python strings take about 350 bytes
# a row of five columns, a few hundred MB at most.
PARSE_ROWS = 1 << 20


class _Scattered(NamedTuple):
    """This rank's rows of CSV files, as parsed, and what the ranks' parsing found."""

    rows: np.ndarray  # float64, every column, in file order; those not used NaN
    counts: list[int]  # every rank's rows
    file_rows: list[int]  # every file's rows (kept)
    file_lengths: list[int]  # every file's rows, dropped ones included
    dropped: np.ndarray  # the rows dropped, 0-based over the files, sorted
    levels: Levels  # the categorical columns' levels; their cells in rows are level codes


@dataclass(frozen=True)
class CsvHeader:
    """A CSV file's header line: its column names, and where the data after it starts."""

    path: Path
    names: list[str]
    data_start: int  # the header's length in bytes


def csv_header(p: Path) -> CsvHeader:
    """The header line of the CSV file p; UsageError when it has none."""
    with open(p, "rb") as f:
        first = f.readline()
    header = next(csv.reader([first.decode("utf-8", errors="replace")]), None)
    if not header or not any(h.strip() for h in header):
        raise UsageError(f"{p} is empty; a CSV file needs a header line and data rows")
    return CsvHeader(p, [h.strip() for h in header], len(first))


def read_csv_shard(files: list[Path], cfg: Config, rank: int, size: int, job: Job | None) -> Shard:
    """Each rank parses the lines of its byte range of the files; the rows then go to the ranks
    that hold them by the layout and the validation split (one alltoall), so no rank reads more
    than its part."""
    headers = [csv_header(p) for p in files]
    names = headers[0].names
    for header in headers[1:]:
        check_same_columns(files[0], names, header.path, header.names)
    spec = DataSpec.of(cfg)
    chosen, t = choose_columns(names, spec.target, spec.features, files[0], spec.carried)
    carried = spec.carried
    used = [*chosen, t]  # the other columns are not parsed: an ID or a word there is no obstacle
    features = chosen[: len(chosen) - len(carried)]
    named = named_columns(spec.categorical, names, features, files[0])
    categorical = Categorical(frozenset(features), named, spec.max_levels)
    drop = spec.missing == "drop"
    parsed = _scattered_rows(headers, rank, size, job, used, drop, HINT, None, categorical)
    rows, counts, dropped, levels = parsed.rows, parsed.counts, parsed.dropped, parsed.levels
    dropped_ids = dropped if len(dropped) else None  # the shard's and the messages' mapping
    if sum(parsed.file_rows) == 0:
        if len(dropped):
            raise UsageError(
                f"every row of {cfg.data} has a missing value in a column the run uses "
                f"({column_list([names[j] for j in used])}): --missing drop leaves none"
            )
        raise UsageError(f"{cfg.data} has a header but no data rows")
    holdout = Holdout.of(cfg, sum(parsed.file_rows))
    kept = None if holdout.held_out else counts  # the rows as parsed, where no row is held out
    layout = layout_for(
        holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched, counts=kept
    )
    table, validation = to_owners(rows, sum(counts[:rank]), holdout, layout, job)
    dtype = spec.dtype or "float64"  # decimal text: float64 keeps what it says
    feature_names = expanded_names(names, features, levels)
    labels = column_labels(
        [*sources(names, features, levels), *(names[j] for j in used[len(features) :])]
    )
    where = RowNames(files, tuple(parsed.file_lengths), labels, carried, dropped_ids)
    X, y, C = _columns(table, chosen, t, dtype, len(carried), levels, coded=True)
    shard = Shard(
        X,
        y,
        layout,
        cfg.data,
        feature_names=tuple(feature_names),
        target_name=names[t],
        levels={names[j]: levels[j] for j in features if j in levels},
        columns=tuple(names[j] for j in features),
        carried=C,
        carried_columns=carried,
        dropped=dropped_ids,
    )
    # the training rows as held: a categorical column's codes, named by its column
    replace(where, labels=column_labels([names[j] for j in used])).check_shard(
        shard, holdout.file_row(layout)
    )
    if holdout.held_out:
        X, y, C = _columns(validation, chosen, t, dtype, len(carried), levels)
        shard = with_validation(shard, holdout, holdout.piece(rank, size), X, y, where, C)
    return shard


CSV = ScatterReader(read_csv_shard, note="(with a header line)")


def read_csv_split(
    header: CsvHeader,
    rank: int,
    size: int,
    job: Job | None,
    used: list[int] | None = None,
    levels: Levels | None = None,
) -> tuple[np.ndarray, list[int]]:
    """This rank's rows (float64, every column, in file order): the lines that start in its
    1/size of the file's bytes; and every rank's number of rows. Only the columns `used` (by
    default all) are parsed; the others are NaN. The categorical columns `levels` (a model's)
    hold their level codes. The file's first problem (a level not among the model's too) is
    raised on every rank."""
    parsed = _scattered_rows([header], rank, size, job, used, given=levels)
    if sum(parsed.counts) == 0:
        raise UsageError(f"{header.path} has a header but no data rows")
    return parsed.rows, parsed.counts


class Categorical(NamedTuple):
    """A training run's categorical columns (data/categorical.py): those --categorical names,
    and those of the features a word turns up in."""

    features: frozenset[int]  # the columns that may hold words: the features
    named: frozenset[int]  # --categorical's: categorical even when they hold numbers only
    max_levels: int


def _scattered_rows(
    headers: list[CsvHeader],
    rank: int,
    size: int,
    job: Job | None,
    used: list[int] | None,
    drop: bool = False,
    hint: str = "fill it",
    given: Levels | None = None,
    categorical: Categorical | None = None,
) -> _Scattered:
    """This rank's rows of the files (float64, every column, in file order; those not `used`
    NaN; a categorical column's cells its level codes), what every rank and file holds, and,
    with drop, the rows dropped for a missing value in a column used. The levels are given
    (a model's: a level it does not know is a problem), or with categorical agreed by the
    ranks. The files' first problem is raised on every rank (a missing value's with the
    hint)."""
    names = headers[0].names
    # a Parquet file's booleans as CSV writes them: True, False
    given = {
        j: [str(v) if isinstance(v, bool) else v for v in vs] for j, vs in (given or {}).items()
    }
    as_text = frozenset(j for j, levels in given.items() if levels and isinstance(levels[0], str))
    kinds = _Kinds(categorical.features if categorical else frozenset(), as_text, given)
    files = [(h.path, h.data_start) for h in headers]
    texts = _split_bytes(files, rank, size, split_quotes(files, rank, size, job))
    splits = [_parse_csv_split(data, names, used, drop, kinds) for _, data in texts]
    summary = [
        (i, len(s.rows), s.num_lines, s.problem, s.dropped, sorted(s.words))
        for (i, _), s in zip(texts, splits)
    ]
    every = job.allgather(summary) if size > 1 else [summary]
    file_rows, lines_before = [0] * len(headers), [1] * len(headers)  # 1: the header
    lengths, dropped = [0] * len(headers), []  # (file, its rows before the split, the split's)
    first_lines = []  # the line before each of this rank's splits
    for r, pieces in enumerate(every):
        for i, num_rows, num_lines, problem, gone, _ in pieces:
            if problem is not None:  # the first problem in the files, on every rank
                line, (what, missing) = lines_before[i] + problem[0], problem[1:]
                raise UsageError(f"{headers[i].path} line {line}: {what}" + f"; {hint}" * missing)
            if r == rank:
                first_lines.append(lines_before[i])
            lines_before[i] += num_lines
            file_rows[i] += num_rows
            if len(gone):
                dropped.append((i, lengths[i], gone))
            lengths[i] += num_rows + len(gone)
    levels = dict(given)
    if categorical is not None:
        worded = frozenset(j for pieces in every for piece in pieces for j in piece[5])
        splits = [
            s
            if worded <= s.words.keys()
            else _parse_csv_split(data, names, used, drop, _Kinds(as_text=worded))
            for (_, data), s in zip(texts, splits)
        ]

        def refuse(j: int, number: str, _word: bool) -> UsageError:
            """A column of numbers with a word: the files' first word in it, found by the
            ranks together (each its own first, one allgather)."""
            mine = _first_word(j, texts, splits, first_lines)
            found = [f for f in (job.allgather(mine) if size > 1 else [mine]) if f is not None]
            i, line, word = min(found)
            return mixed_column(f"{headers[i].path} line {line}", word, names[j], number)

        rows = sum(piece[1] for pieces in every for piece in pieces)
        levels = _agreed_levels(splits, names, worded, categorical, job, rows, refuse)
    starts = np.cumsum([0, *lengths])
    ids = [starts[i] + before + gone for i, before, gone in dropped]
    if len(splits) == 1:  # one file's range: no copy
        rows = splits[0].rows
    else:
        rows = np.concatenate([s.rows for s in splits] or [np.zeros((0, len(names)))])
    counts = [sum(piece[1] for piece in pieces) for pieces in every]
    return _Scattered(
        rows, counts, file_rows, lengths, np.concatenate([np.zeros(0, np.int64), *ids]), levels
    )


def _agreed_levels(
    splits: list[_CsvSplit],
    names: list[str],
    worded: frozenset[int],
    categorical: Categorical,
    job: Job | None,
    rows: int,
    refuse: Refuse,
) -> Levels:
    """The levels of the categorical columns (those with a word on any rank, and those
    --categorical names), agreed by the ranks over the files' rows; each split's cells in
    them become level codes. A column of numbers with a word, not named, is refused."""
    columns = sorted(worded | categorical.named)
    if not columns:
        return {}
    local: dict[int, set] = {j: set() for j in columns}
    splits = [s for s in splits if len(s.rows)]  # a split of no rows has no words
    for s in splits:
        for j in columns:
            local[j].update(
                s.words[j].present() if j in worded else np.unique(s.rows[:, j]).tolist()
            )
    inferred = worded - categorical.named
    levels = agree_levels(local, names, categorical.max_levels, job, rows, inferred, refuse)
    for s in splits:
        for j in columns:
            if j in worded:
                s.words[j].codes(levels[j], out=s.rows[:, j])
            else:
                s.rows[:, j] = codes(s.rows[:, j], levels[j])
    return levels


def _first_word(
    j: int, texts: list[tuple[int, Buffer]], splits: list[_CsvSplit], first_lines: list[int]
) -> tuple[int, int, str] | None:
    """This rank's first word in column j (a cell neither missing nor a number), as (file,
    line, its text); None where its splits hold none."""
    for (i, data), split, before in zip(texts, splits, first_lines):
        words = split.words.get(j)
        row = words.first_word() if words is not None else None
        if row is not None:
            text = words.texts[words.index[row]]
            every_row = np.delete(np.arange(len(split.rows) + len(split.dropped)), split.dropped)
            return i, before + _line_of(str(data, "utf-8", "replace"), int(every_row[row])), text
    return None


def _columns(
    table: np.ndarray,
    chosen: list[int],
    t: int,
    dtype,
    carried: int,
    levels: Levels,
    coded: bool = False,
) -> tuple:
    """The chosen columns of a CSV's rows as the features (a categorical one as its dummies;
    with coded, as CodedFeatures, which write them as they are read), column t as the target,
    and the chosen's last `carried` as the carried columns (float64; None when there are
    none)."""
    features = chosen[: len(chosen) - carried]
    C = table[:, chosen[len(features) :]] if carried else None
    if coded and any(j in levels for j in features):
        at = {j: i for i, j in enumerate(features)}
        held = {at[j]: levels[j] for j in features if j in levels}
        # views where the features are the table's columns a..b and it holds little else
        a, b = features[0], features[-1] + 1
        view = features == list(range(a, b)) and table.shape[1] <= 2 * len(features)
        X = CodedFeatures(table[:, a:b] if view else table[:, features], held, np.dtype(dtype))
        y = table[:, t] if view and X.dtype == table.dtype else _copy(table[:, t], dtype)
        return X, y, C
    y = _copy(table[:, t], dtype)
    X = aligned_empty((len(table), sum(width(j, levels) for j in features)), dtype)
    expand(table, features, levels, X)
    return X, y, C


def _copy(column: np.ndarray, dtype) -> np.ndarray:
    """A table's column as an aligned array of dtype."""
    out = aligned_empty((len(column),), dtype)
    out[...] = column
    return out


def csv_split_text(p: Path, data_start: int, rank: int, size: int) -> str:
    """The lines that start in this rank's byte range of the data, as Hadoop's input splits cut
    a file: the range is 1/size of the bytes after the header; a line that began before it is
    the previous rank's, a line that runs past its end is this rank's. So a rank reads its
    range, plus the header and at most one line past it."""
    return "".join(text for _, text in csv_split_texts([(p, data_start)], rank, size))


def csv_split_texts(
    files: list[tuple[Path, int]], rank: int, size: int, quotes: dict[int, int] | None = None
) -> list[tuple[int, str]]:
    """This rank's lines of CSV files (path, header length) read one after another: the data
    bytes of all the files are cut in size ranges, and each file's part of this rank's range
    is cut at lines as csv_split_text cuts one file. (file index, its lines), by file.

    quotes: for each file that holds a double quote, the quotes in its bytes before this
    rank's part (split_quotes): its parts are then cut at the line breaks outside quoted
    fields (RFC 4180: a quoted field may hold line breaks)."""
    return [
        (i, str(data, "utf-8", "replace")) for i, data in _split_bytes(files, rank, size, quotes)
    ]


def _split_bytes(
    files: list[tuple[Path, int]], rank: int, size: int, quotes: dict[int, int] | None = None
) -> list[tuple[int, Buffer]]:
    """csv_split_texts' lines as the files' bytes."""
    texts = []
    for i, (p, data_start), lo, hi in _pieces(files, rank, size):
        begin, end = data_start + lo, data_start + hi
        if quotes is not None and i in quotes:
            texts.append((i, _quoted_csv_lines(p, data_start, begin, end, quotes[i])))
        else:
            texts.append((i, _csv_lines(p, data_start, begin, end)))
    return texts


def split_quotes(
    files: list[tuple[Path, int]], rank: int, size: int, job: Job | None
) -> dict[int, int]:
    """For each file with a double quote in it, the quotes before this rank's part of it: every
    rank counts those of its own part (one more read of it) and one allgather sums them. One
    rank reads the files whole, so no cut is inside a quoted field: nothing to count."""
    if size == 1:
        return {}
    mine = {
        i: _count_quotes(p, data_start + lo, data_start + hi)
        for i, (p, data_start), lo, hi in _pieces(files, rank, size)
    }
    every = job.allgather(mine) if size > 1 else [mine]
    quoted = {i for counts in every for i, n in counts.items() if n}
    return {i: sum(counts.get(i, 0) for counts in every[:rank]) for i in quoted}


def _pieces(files: list[tuple[Path, int]], rank: int, size: int):
    """(file index, (path, header length), lo, hi): the data bytes lo .. hi - 1 of each file
    in this rank's range of all the files' data bytes."""
    lengths = [p.stat().st_size - data_start for p, data_start in files]
    offsets = np.cumsum([0, *lengths])
    begin, end = rank * int(offsets[-1]) // size, (rank + 1) * int(offsets[-1]) // size
    for i, file in enumerate(files):
        lo, hi = max(begin, offsets[i]) - offsets[i], min(end, offsets[i + 1]) - offsets[i]
        if lo < hi:
            yield i, file, int(lo), int(hi)


def _csv_lines(p: Path, data_start: int, begin: int, end: int) -> memoryview:
    """The lines of p that start in its bytes begin .. end - 1 (after the header), mapped
    from the page cache, not copied: a rank's range is read by the parser that reads it."""
    mapped = _mapped(p)
    start = begin
    if begin > data_start:  # past the end of the line that began before the range
        start = _line_end(mapped, begin - 1)
    if start >= end:
        return memoryview(b"")  # the line that began before the range runs past its end
    stop = end if mapped[end - 1] == ord("\n") else _line_end(mapped, end)
    return memoryview(mapped)[start:stop]


def _mapped(p: Path) -> mmap.mmap:
    """p's bytes, mapped read-only and read ahead of the parser (not around each page); p is
    not empty (it has a header)."""
    with open(p, "rb", buffering=0) as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def _line_end(mapped: mmap.mmap, at: int) -> int:
    """Just past the first line break at or after byte `at`; the file's end if none."""
    found = mapped.find(b"\n", at)
    return len(mapped) if found < 0 else found + 1


def _quoted_csv_lines(p: Path, data_start: int, begin: int, end: int, before: int) -> bytes:
    """The records of p that start in its bytes begin .. end - 1, a record ending at a line
    break outside quotes: after an even number of double quotes since the data's start
    (before: the quotes ahead of begin)."""
    inside = _count_quotes(p, begin, end)
    with open(p, "rb", buffering=0) as f:
        start = begin
        if begin > data_start:  # past the end of the record that began before the range
            f.seek(begin - 1)
            start = _record_end(f, begin - 1, (before - (f.read(1) == b'"')) % 2)
        if start >= end:
            return b""  # no record starts in the range: a quoted field spans it
        f.seek(end - 1)
        last = f.read(1) == b'"'
        stop = _record_end(f, end - 1, (before + inside - last) % 2)
        f.seek(start)
        return f.read(stop - start)


def _record_end(f, at: int, odd: int) -> int:
    """Where the first record end at or after byte `at` of f is: just past a line break that
    follows an even number of quotes (odd: whether the quotes before `at` are odd); or the
    file's end."""
    f.seek(at)
    while chunk := f.read(1 << 20):
        k = 0
        while (line_break := chunk.find(b"\n", k)) >= 0:
            odd ^= chunk.count(b'"', k, line_break) & 1
            if not odd:
                return at + line_break + 1
            k = line_break + 1
        odd ^= chunk.count(b'"', k) & 1
        at += len(chunk)
    return at


def _count_quotes(p: Path, begin: int, end: int) -> int:
    """The double quotes in p's bytes begin .. end - 1."""
    mapped = _mapped(p)
    if mapped.find(b'"', begin, end) < 0:  # at memchr's speed: most files hold no quote
        return 0
    return count_octets(mapped, b'"', begin, end)


def _parse_csv_split(
    data: Buffer,
    names: list[str],
    used: list[int] | None = None,
    drop: bool = False,
    kinds: _Kinds = NO_WORDS,
) -> _CsvSplit:
    """The lines' rows (see _parse_text), parsed by pyarrow where it reads them as the tool's
    own parser does (data/csv_arrow.py), else by that parser."""
    keep = list(range(len(names))) if used is None else sorted(set(used))
    split = _arrow_split(data, names, keep, drop, kinds)
    if split is not None:
        return split
    return _parse_text(str(data, "utf-8", "replace"), names, keep, drop, kinds)


def _arrow_split(
    data: Buffer, names: list[str], keep: list[int], drop: bool, kinds: _Kinds
) -> _CsvSplit | None:
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
    return _CsvSplit(table, parsed.num_lines, dropped=np.flatnonzero(missing), words=words)


def _parse_text(
    text: str, names: list[str], keep: list[int], drop: bool, kinds: _Kinds
) -> _CsvSplit:
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
    for records, stop in _record_batches(reader, num_columns, keep):
        table, worded, gone, problem = _parse_records(records, names, keep, drop, kinds)
        problem = problem or stop
        if problem is not None:
            row, what, is_missing, line = problem
            line = line if line is not None else _line_of(text, done + row)
            return _CsvSplit(np.zeros((0, num_columns)), num_lines, (line, what, is_missing))
        tables.append(table)
        words.append(worded)
        dropped.append(done + gone)
        done += len(records)
    columns = {j for worded in words for j in worded}
    if any(worded.keys() != columns for worded in words):  # words in some parts only: as text
        return _parse_text(text, names, keep, drop, replace(kinds, as_text=frozenset(columns)))
    return _CsvSplit(
        np.concatenate(tables),
        num_lines,
        dropped=np.concatenate(dropped),
        words={j: Words.concat([worded[j] for worded in words]) for j in columns},
    )


def _parse_records(
    records: list[Sequence[str]], names: list[str], keep: list[int], drop: bool, kinds: _Kinds
) -> tuple:
    """_parse_csv_split's work on some of its rows: (their table, their words, the rows
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
    numbers = {c for c in distinct - gaps if _is_float(c)}
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


def _line_of(text: str, wanted: int) -> int:
    """The line (within the split) of its row `wanted`: the lines are read once more, as only
    a run that stops does."""
    row = -1
    reader = csv.reader(io.StringIO(text, newline=""))
    for cells in reader:
        if cells and any(c.strip() for c in cells):
            row += 1
            if row == wanted:
                return reader.line_num
    raise AssertionError("a parsed row is not in its text")


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
