"""--formula: each rank reads its rows of --data's CSV or Parquet files as a pandas DataFrame
(its cells as pandas reads them, words as words) and builds the formula's columns from them
(formulas.py); the rows then go where the layout puts them, as fit()'s rows do (memory.py).
predict and evaluate read a file's rows the same way and apply the stored formula to them.

A rank's rows are contiguous and in file order: a CSV file's lines that start in its 1/size of
the bytes (csv_ranges.py), or a Parquet dataset's rows [rank·n/size, (rank+1)·n/size)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from hvd_linreg.data import formulas, frames
from hvd_linreg.data.csv import csv_header
from hvd_linreg.data.csv_ranges import csv_split_texts, split_quotes
from hvd_linreg.data.files import data_files
from hvd_linreg.data.memory import memory_shard
from hvd_linreg.data.missing import HINT, MISSING_CELLS
from hvd_linreg.data.parquet import _import_parquet, parquet_columns
from hvd_linreg.data.row_names import row_name_in
from hvd_linreg.data.rows import Carried, Rows
from hvd_linreg.data.shard import Shard
from hvd_linreg.errors import UsageError, agreed
from hvd_linreg.runtime.ranks import Job

FORMATS = (".csv", ".parquet")


def formula_shard(cfg, job: Job) -> Shard:
    """This rank's shard of --data's rows, its features the formula's columns (the shard
    stores the formula for --export)."""
    carried = Carried(cfg.weights, cfg.offset, cfg.exposure, cfg.fold_column, cfg.groups)
    files = agreed(job, lambda: data_files(cfg.data))
    frame, first = rank_frame(files, job, _wanted(cfg.formula, carried))
    frame, dropped, rows = complete_rows(job, frame, first, carried, cfg.missing, files)
    for flag, name in zip(carried.roles, carried.names):
        if name not in frame.columns:
            raise UsageError(f"--data {cfg.data} has no column {name!r} ({flag})")
    design = formulas.design(job, cfg.formula, frame, cfg.max_levels)
    given = {name: frame[name].to_numpy() for name in carried.names}
    if carried.group is not None:
        given[carried.group] = frames.cluster_numbers(job, given[carried.group])
    weights, offset, fold, groups, exposure = (
        None if n is None else given[n] for n in _carried_names(carried)
    )
    shard = memory_shard(
        cfg,
        job,
        design.X,
        design.y,
        weights,
        offset,
        fold,
        groups,
        exposure=exposure,
        names=carried,
        source=cfg.data,
        where=lambda i: row_name_in(files, int(rows[i])),
    )
    shard.formula = design.stored()
    shard.dropped = dropped
    return shard


def formula_rows(model, path: Path, job: Job, need_target: bool) -> Rows:
    """This rank's block of a file's rows (predict, evaluate) as a formula model's design
    columns, its target (empty without one) and the weights and offsets the model has."""
    design = formulas.Design.of_stored(model.formula)
    carried = model.carried
    frame, first = rank_frame([path], job, {*design.variables, *carried.names, *design.target})
    error, rows = None, None
    try:
        weight = carried.weight if need_target and carried.weight in frame.columns else None
        carried = Carried(weight, carried.offset, carried.exposure)
        frame, _, _ = _complete(frame, first, carried, "error", [path])
        X = design.new_rows(frame)
        y = design.target_of(frame, model.target_levels) if need_target else np.empty(len(X))[:0]
        values = [frame[n].to_numpy(np.float64) for n in carried.names]
        C = np.column_stack(values) if values else None
        rows = carried.rows(X, y, C)
    except UsageError as e:
        error = e
    job.agree(error)
    return rows


def rank_frame(files: list[Path], job: Job, wanted: set[str] | None, what: str = "--formula"):
    """This rank's rows of the files as a DataFrame of their columns that are in wanted (None:
    all), and its first row's number in the dataset; what: what reads them, for a message."""
    import pandas as pd

    error, parts = None, []
    try:
        suffix = files[0].suffix.lower()
        if suffix not in FORMATS:
            raise UsageError(
                f"{what} reads the named columns of CSV or Parquet files, not {suffix or 'a'} "
                f"file ({files[0]})"
            )
        headers = [csv_header(p) for p in files] if suffix == ".csv" else None
    except UsageError as e:
        error = e
    job.agree(error)
    if headers is not None:
        pieces = [(h.path, h.data_start) for h in headers]
        quotes = split_quotes(pieces, job.rank, job.size, job)
        texts = csv_split_texts(pieces, job.rank, job.size, quotes)
    try:
        if headers is not None:
            parts = [_csv_frame(headers[i], text, wanted) for i, text in texts if text.strip()]
        else:
            parts = _parquet_frames(files, job, wanted)
    except UsageError as e:
        error = e
    job.agree(error)
    frame = pd.concat(parts, ignore_index=True) if parts else _empty(files, headers, wanted)
    counts = job.allgather(len(frame), name="formula_rows")
    return frame, sum(counts[: job.rank])


def _csv_frame(header, text: str, wanted: set[str]):
    import pandas as pd

    names = header.names
    try:
        return pd.read_csv(
            io.StringIO(text),
            header=None,
            names=names,
            usecols=[n for n in names if wanted is None or n in wanted],
            na_values=sorted(MISSING_CELLS),
            keep_default_na=False,
            skipinitialspace=True,  # pandas 3 reads each number as written, as the readers do
        )
    except (ValueError, pd.errors.ParserError) as e:
        raise UsageError(f"cannot read {header.path}: {e}") from None


def _parquet_frames(files: list[Path], job: Job, wanted: set[str]) -> list:
    """The Parquet rows [rank·n/size, (rank+1)·n/size) of the files read one after another."""
    pq = _import_parquet()
    sizes = [parquet_columns(p)[1] for p in files]
    total = sum(sizes)
    start, stop = job.rank * total // job.size, (job.rank + 1) * total // job.size
    parts, at = [], 0
    for p, n in zip(files, sizes):
        lo, hi = max(start - at, 0), min(stop - at, n)
        at += n
        if lo >= hi:
            continue
        names = [c for c in parquet_columns(p)[0] if wanted is None or c in wanted]
        table = pq.read_table(p, columns=names).slice(lo, hi - lo)
        parts.append(table.to_pandas())
    return parts


def _empty(files, headers, wanted: set[str]):
    """A rank without rows: the files' columns, no rows."""
    import pandas as pd

    names = headers[0].names if headers is not None else parquet_columns(files[0])[0]
    return pd.DataFrame({n: [] for n in names if wanted is None or n in wanted})


def complete_rows(job: Job, frame, first: int, carried: Carried, missing: str, files):
    """frame without its rows that lack a value (--missing drop), the dataset's rows dropped,
    every rank's, sorted (None: none), and the dataset's rows of the frame's rows kept; with
    --missing error, UsageError on every rank naming the first such row and column."""
    frame, mine, kept = agreed(job, lambda: _complete(frame, first, carried, missing, files))
    if missing != "drop":
        return frame, None, kept
    every = np.concatenate(job.allgather(mine, name="rows_dropped"))
    return frame, every if len(every) else None, kept


def _complete(frame, first: int, carried: Carried, missing: str, files: list[Path]):
    """frame without its rows that lack a value the model reads (--missing drop), those rows'
    numbers in the dataset and those of the rows kept; with --missing error, UsageError
    naming the first such row and column."""
    na = frame.isna().to_numpy()
    bad = na.any(axis=1)
    if not bad.any():
        return frame, np.empty(0, np.int64), first + np.arange(len(frame))
    if missing == "drop":
        kept = frame.loc[~bad].reset_index(drop=True)
        return kept, first + np.flatnonzero(bad), first + np.flatnonzero(~bad)
    i = int(np.argmax(bad))
    column = frame.columns[int(np.argmax(na[i]))]
    raise UsageError(f"{row_name_in(files, first + i)}: no value in column {column!r}; {HINT}")


def _wanted(formula: str, carried: Carried) -> set[str]:
    """The columns the run reads: the names the formula uses and the carried columns."""
    return {*formulas.names_in(formula), *carried.names}


def _carried_names(carried: Carried) -> list[str | None]:
    """memory_shard's carried arrays by role: weights, offset, fold, groups, exposure."""
    return [carried.weight, carried.offset, carried.fold, carried.group, carried.exposure]


def _files(job: Job, data: str) -> list[Path]:
    error, files = None, None
    try:
        files = data_files(data)
    except UsageError as e:
        error = e
    job.agree(error)
    return files
