"""CSV files: every rank parses the lines that start in its byte range of the files, as
Hadoop's input splits cut a file, and the rows then go to the ranks that hold them (one
alltoall). A line's place in the file is not known before the lines ahead of it are read, so
CSV is not read by ranges of rows like the formats that give a Table."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from hvd_linreg.config import Config, UsageError
from hvd_linreg.data.columns import (
    check_same_columns,
    choose_columns,
    column_labels,
    column_list,
)
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


class _Scattered(NamedTuple):
    """This rank's rows of CSV files, as parsed, and what the ranks' parsing found."""

    rows: np.ndarray  # float64, every column, in file order; those not used NaN
    counts: list[int]  # every rank's rows
    file_rows: list[int]  # every file's rows (kept)
    file_lengths: list[int]  # every file's rows, dropped ones included
    dropped: np.ndarray  # the rows dropped, 0-based over the files, sorted


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
    parsed = _scattered_rows(headers, rank, size, job, used, spec.missing == "drop", HINT)
    rows, counts, dropped = parsed.rows, parsed.counts, parsed.dropped
    dropped_ids = dropped if len(dropped) else None  # the shard's and the messages' mapping
    if sum(parsed.file_rows) == 0:
        if len(dropped):
            raise UsageError(
                f"every row of {cfg.data} has a missing value in a column the run uses "
                f"({column_list([names[j] for j in used])}): --missing drop leaves none"
            )
        raise UsageError(f"{cfg.data} has a header but no data rows")
    holdout = Holdout.of(cfg, sum(parsed.file_rows))
    layout = layout_for(holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched)
    table, validation = to_owners(rows, sum(counts[:rank]), holdout, layout, job)
    dtype = spec.dtype or "float64"  # decimal text: float64 keeps what it says
    labels = column_labels(names[j] for j in [*chosen, t])
    where = RowNames(files, tuple(parsed.file_lengths), labels, carried, dropped_ids)
    features = chosen[: len(chosen) - len(carried)]
    X, y, C = _columns(table, chosen, t, dtype, len(carried))
    shard = Shard(
        X,
        y,
        layout,
        cfg.data,
        feature_names=tuple(names[j] for j in features),
        target_name=names[t],
        carried=C,
        carried_columns=carried,
        dropped=dropped_ids,
    )
    where.check_shard(shard, holdout.file_row(layout))
    if holdout.held_out:
        X, y, C = _columns(validation, chosen, t, dtype, len(carried))
        shard = with_validation(shard, holdout, holdout.piece(rank, size), X, y, where, C)
    return shard


CSV = ScatterReader(read_csv_shard, note="(with a header line)")


def read_csv_split(
    header: CsvHeader, rank: int, size: int, job: Job | None, used: list[int] | None = None
) -> tuple[np.ndarray, list[int]]:
    """This rank's rows (float64, every column, in file order): the lines that start in its
    1/size of the file's bytes; and every rank's number of rows. Only the columns `used` (by
    default all) are parsed; the others are NaN. The file's first problem is raised on every
    rank."""
    parsed = _scattered_rows([header], rank, size, job, used)
    if sum(parsed.counts) == 0:
        raise UsageError(f"{header.path} has a header but no data rows")
    return parsed.rows, parsed.counts


def _scattered_rows(
    headers: list[CsvHeader],
    rank: int,
    size: int,
    job: Job | None,
    used: list[int] | None,
    drop: bool = False,
    hint: str = "fill it",
) -> _Scattered:
    """This rank's rows of the files (float64, every column, in file order; those not `used`
    NaN), what every rank and file holds, and, with drop, the rows dropped for a missing value
    in a column used. The files' first problem is raised on every rank (a missing value's
    with the hint)."""
    names = headers[0].names
    texts = csv_split_texts([(h.path, h.data_start) for h in headers], rank, size)
    splits = [(i, _parse_csv_split(text, names, used, drop)) for i, text in texts]
    summary = [(i, len(s.rows), s.num_lines, s.problem, s.dropped) for i, s in splits]
    every = job.allgather(summary) if size > 1 else [summary]
    file_rows, lines_before = [0] * len(headers), [1] * len(headers)  # 1: the header
    lengths, dropped = [0] * len(headers), []  # (file, its rows before the split, the split's)
    for i, num_rows, num_lines, problem, gone in (piece for pieces in every for piece in pieces):
        if problem is not None:  # the first problem in the files, on every rank
            line, (what, missing) = lines_before[i] + problem[0], problem[1:]
            raise UsageError(f"{headers[i].path} line {line}: {what}" + f"; {hint}" * missing)
        lines_before[i] += num_lines
        file_rows[i] += num_rows
        if len(gone):
            dropped.append((i, lengths[i], gone))
        lengths[i] += num_rows + len(gone)
    starts = np.cumsum([0, *lengths])
    ids = [starts[i] + before + gone for i, before, gone in dropped]
    rows = np.concatenate([s.rows for _, s in splits] or [np.zeros((0, len(names)))])
    counts = [sum(piece[1] for piece in pieces) for pieces in every]
    return _Scattered(
        rows, counts, file_rows, lengths, np.concatenate([np.zeros(0, np.int64), *ids])
    )


def _columns(table: np.ndarray, chosen: list[int], t: int, dtype, carried: int = 0) -> tuple:
    """The chosen columns of a CSV's rows as the features, column t as the target, and the
    chosen's last `carried` as the carried columns (float64; None when there are none)."""
    features = chosen[: len(chosen) - carried]
    X = aligned_empty((len(table), len(features)), dtype)
    X[...] = table[:, features]
    y = aligned_empty((len(table),), dtype)
    y[...] = table[:, t]
    C = table[:, chosen[len(features) :]] if carried else None
    return X, y, C


def csv_split_text(p: Path, data_start: int, rank: int, size: int) -> str:
    """The lines that start in this rank's byte range of the data, as Hadoop's input splits cut
    a file: the range is 1/size of the bytes after the header; a line that began before it is
    the previous rank's, a line that runs past its end is this rank's. So a rank reads its
    range, plus the header and at most one line past it."""
    return "".join(text for _, text in csv_split_texts([(p, data_start)], rank, size))


def csv_split_texts(files: list[tuple[Path, int]], rank: int, size: int) -> list[tuple[int, str]]:
    """This rank's lines of CSV files (path, header length) read one after another: the data
    bytes of all the files are cut in size ranges, and each file's part of this rank's range
    is cut at lines as csv_split_text cuts one file. (file index, its lines), by file."""
    lengths = [p.stat().st_size - data_start for p, data_start in files]
    offsets = np.cumsum([0, *lengths])
    begin, end = rank * int(offsets[-1]) // size, (rank + 1) * int(offsets[-1]) // size
    texts = []
    for i, (p, data_start) in enumerate(files):
        lo, hi = max(begin, offsets[i]) - offsets[i], min(end, offsets[i + 1]) - offsets[i]
        if lo < hi:
            texts.append((i, _csv_lines(p, data_start, data_start + int(lo), data_start + int(hi))))
    return texts


def _csv_lines(p: Path, data_start: int, begin: int, end: int) -> str:
    """The lines of p that start in its bytes begin .. end - 1 (after the header)."""
    with open(p, "rb", buffering=0) as f:
        f.seek(max(begin - 1, data_start))
        if begin > data_start:
            f.readline()  # through the end of the line that began before the range
        text = b""
        while f.tell() < end and (chunk := f.read(end - f.tell())):
            text += chunk
        if text and not text.endswith(b"\n"):
            text += f.readline()  # the line that runs past the end
    return text.decode("utf-8", errors="replace")


def _parse_csv_split(
    text: str, names: list[str], used: list[int] | None = None, drop: bool = False
) -> _CsvSplit:
    """The lines' rows: the columns `used` (by default all) parsed as numbers, the others NaN.
    A missing value in a column used (missing.py) is the split's problem, or with drop its
    row is dropped."""
    num_columns = len(names)
    keep = list(range(num_columns)) if used is None else sorted(set(used))
    rows: list[list[float]] = []
    reader = csv.reader(io.StringIO(text, newline=""))
    num_lines = text.count("\n") + (not text.endswith("\n") and bool(text))

    def failed(line: int, problem: str) -> _CsvSplit:
        # a missing value in an earlier row is the first problem
        earlier = _first_missing(text, names, keep, np.array(rows).reshape(-1, len(keep)))
        return _CsvSplit(np.zeros((0, num_columns)), num_lines, earlier or (line, problem, False))

    for cells in reader:
        if not cells or all(not c.strip() for c in cells):
            continue  # blank lines are not rows
        if len(cells) != num_columns:
            return failed(reader.line_num, f"{len(cells)} fields, but the header has {num_columns}")
        try:
            rows.append([float(cells[j]) for j in keep])
        except ValueError:
            j = next((j for j in keep if not (_is_float(cells[j]) or is_missing(cells[j]))), None)
            if j is None:  # only missing values: NaN, for the check below
                rows.append([float(cells[j]) if _is_float(cells[j]) else np.nan for j in keep])
                continue
            return failed(reader.line_num, f"{cells[j]!r} is not a number (column {names[j]!r})")
    parsed = np.array(rows, np.float64).reshape(-1, len(keep))
    dropped = np.zeros(0, np.int64)
    missing = np.isnan(parsed).any(axis=1)
    if missing.any():
        if not drop:
            problem = _first_missing(text, names, keep, parsed)
            return _CsvSplit(np.zeros((0, num_columns)), num_lines, problem)
        dropped, parsed = np.flatnonzero(missing), parsed[~missing]
    if len(keep) == num_columns:
        return _CsvSplit(parsed, num_lines, dropped=dropped)
    table = np.full((len(parsed), num_columns), np.nan)
    table[:, keep] = parsed
    return _CsvSplit(table, num_lines, dropped=dropped)


def _first_missing(
    text: str, names: list[str], keep: list[int], parsed: np.ndarray
) -> tuple[int, str, bool] | None:
    """(line within the split, the problem, True) of the first of the parsed rows with a missing
    value, or None: the lines are read once more, as only a run that stops does."""
    missing = np.isnan(parsed).any(axis=1)
    if not missing.any():
        return None
    wanted, row = int(np.argmax(missing)), -1
    reader = csv.reader(io.StringIO(text, newline=""))
    for cells in reader:
        if cells and any(c.strip() for c in cells):
            row += 1
            if row == wanted:
                j = keep[int(np.argmax(np.isnan(parsed[wanted])))]
                return (
                    reader.line_num,
                    f"a missing value ({cells[j]!r}) in column {names[j]!r}",
                    True,
                )
    raise AssertionError("a parsed row is not in its text")


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
