"""Parquet files (--data x.parquet, or a directory or glob of them) as one Table.

A Parquet file is cut into row groups, and its footer gives each group's row count; so the
rows [start, stop) that the layout hands a rank are read as the row groups holding them, and of
those only the chosen columns. A rank whose runs cover whole row groups reads only its own.
pyarrow is imported only when a Parquet file is read: start-up stays fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hvd_linreg.data.categorical import (
    Levels,
    Words,
    agree_levels,
    codes,
    level_name,
    mixed_column,
    named_columns,
)
from hvd_linreg.data.columns import check_same_columns, choose_columns, column_list
from hvd_linreg.data.missing import HINT
from hvd_linreg.data.row_names import row_name
from hvd_linreg.data.spec import DataSpec, TableReader
from hvd_linreg.data.table import (
    Table,
    open_without_readahead,
    own_dtype,
    read_across,
    without_rows,
)
from hvd_linreg.errors import UsageError


def parquet_table(
    files: list[Path], spec: DataSpec, dropped: np.ndarray | None = None, job=None
) -> Table:
    """The files' rows, in order, as one Table of the chosen columns (nothing read yet but
    the footers and the categorical columns, for their levels); UsageError for a file, column
    or type the user can fix. With dropped (rows of the files, sorted: those with a null or
    NaN in a used column), the table is the rows kept, and the levels those rows hold. job:
    the ranks' collectives, with which each rank reads the categorical columns of its share
    of the row groups only (without, one process reads them all)."""
    pq = _import_parquet()
    metadata, schema, names, columns, chosen = _columns(pq, files, spec)
    features = chosen[: len(chosen) - len(spec.carried)]
    numeric, coded, clusters, inferred = _kinds(spec, schema, names, columns, features, files[0])
    dtype = own_dtype(*(_numpy_type(files[0], schema.field(name)) for name in numeric))
    groups = [(p, m, g) for p, m in zip(files, metadata) for g in range(m.num_row_groups)]
    starts = np.cumsum([0] + [m.row_group(g).num_rows for _, m, g in groups])
    levels = (
        _levels(pq, groups, starts, columns, coded, inferred, spec, dropped, job, clusters)
        if coded
        else {}
    )
    features_coded = {j: v for j, v in levels.items() if j not in clusters}
    width = len(columns) - 1  # a categorical column as its codes (CodedFeatures)
    last = {}  # the row group read last: the next read usually starts in it

    def read_group(i: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        if last.get("group") != i:
            last.clear()
            rows = _read_group(pq, *groups[i], columns, dtype, levels, dropped is not None)
            last["group"], last["rows"] = i, rows
        X, y = last["rows"]
        return X[lo:hi], y[lo:hi]

    table = Table(
        read_across(starts, read_group, width, dtype),
        int(starts[-1]),
        width,
        len(columns) * dtype.itemsize,  # as decoded: what a part of a read holds in memory
        dtype,
        tuple(columns),
        tuple(m.num_rows for m in metadata),
        whole_rows=int(np.diff(starts).max(initial=0)),
        levels={columns[j]: v for j, v in features_coded.items()} if features_coded else None,
        sources=tuple(names[j] for j in features) if features_coded else None,
        coded=features_coded or None,
        target_levels=levels.get(len(columns) - 1),
    )
    return table if dropped is None else without_rows(table, dropped)


def _kinds(spec: DataSpec, schema, names: list[str], columns: list[str], features, path: Path):
    """The columns read as numbers (by name); and by their positions among those read, the
    columns read as codes, those of them that are labels (not a feature's levels), and the
    categorical features known by their words alone."""
    named = named_columns(spec.categorical, names, features, path)
    categorical = [j for j in features if j in named or _holds_levels(schema.field(names[j]).type)]
    # --groups of words: cluster labels, numbered as levels are (not a feature's levels); so
    # is a target of words, booleans or categories (a binary family's yes and no)
    group, target = spec.carried.group, columns[-1]
    labels = [names.index(n) for n in (group, target) if n and _holds_levels(schema.field(n).type)]
    numeric = [name for name in columns if names.index(name) not in categorical + labels]
    coded = [columns.index(names[j]) for j in categorical + labels]
    clusters = frozenset(columns.index(names[j]) for j in labels)
    # string columns are categorical by their words; a dictionary (pandas' category) or
    # boolean column, or one --categorical names, by the user's choice
    inferred = frozenset(
        columns.index(names[j])
        for j in categorical
        if j not in named and _is_text(schema.field(names[j]).type)
    )
    return numeric, coded, clusters, inferred


def _columns(pq, files: list[Path], spec: DataSpec):
    """The files' footers, their schema (the same in each), its column names, the columns
    used (the chosen ones, then the target) and the chosen columns' positions."""
    metadata = [_footer(pq, p) for p in files]
    schema = metadata[0].schema.to_arrow_schema()
    for p, m in zip(files[1:], metadata[1:]):
        _check_same_columns(files[0], schema, p, m.schema.to_arrow_schema())
    names = schema.names
    chosen, t = choose_columns(names, spec.target, spec.features, files[0], spec.carried)
    return metadata, schema, names, [names[j] for j in [*chosen, t]], chosen


def parquet_table_of_ranks(files: list[Path], spec: DataSpec, job) -> Table:
    """parquet_table read by the ranks together: each finds the levels in its share of the
    row groups. With --missing drop, without the rows that hold a null or a NaN in a used
    column: each rank looks for them in its share of the row groups (the used columns, read
    once more) and one allgather joins what the ranks found, so every rank drops the same
    rows at any rank count."""
    if spec.missing != "drop":
        return parquet_table(files, spec, job=job)
    import pyarrow as pa
    import pyarrow.compute as pc

    pq = _import_parquet()
    metadata, _, _, columns, _ = _columns(pq, files, spec)
    groups = [(p, m, g) for p, m in zip(files, metadata) for g in range(m.num_row_groups)]
    starts = np.cumsum([0] + [m.row_group(g).num_rows for _, m, g in groups])
    found = []
    for i in _share(len(groups), job):
        rows = _read_row_groups(pq, *groups[i], columns)
        missing = np.zeros(rows.num_rows, bool)
        for column in rows.columns:
            missing |= column.is_null().to_numpy(zero_copy_only=False)
            if pa.types.is_floating(column.type):
                missing |= pc.is_nan(column).fill_null(False).to_numpy(zero_copy_only=False)
        found.append(starts[i] + np.flatnonzero(missing))
    mine = np.concatenate([np.zeros(0, np.int64), *found])
    every = job.allgather(mine) if job is not None and job.size > 1 else [mine]
    return parquet_table(files, spec, np.sort(np.concatenate(every)), job)


def _share(num_groups: int, job) -> np.ndarray:
    """The row groups (their positions) this rank reads of what the ranks read together."""
    rank, size = (job.rank, job.size) if job is not None else (0, 1)
    return np.array_split(np.arange(num_groups), size)[rank]


def _read_row_groups(pq, p: Path, metadata, groups: int | list[int], columns: list[str]):
    """The row group (or groups) of p, only the columns named; the footer read at the start is
    passed in, so only the column chunks are read."""
    import pyarrow as pa

    try:
        with open_without_readahead(p) as f:
            parquet = pq.ParquetFile(f, metadata=metadata)
            if isinstance(groups, list):
                return parquet.read_row_groups(groups, columns=columns)
            return parquet.read_row_group(int(groups), columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise UsageError(f"cannot read {p}: {e}") from None


def _holds_levels(arrow_type) -> bool:
    """A Parquet column of words, a dictionary or booleans: categorical (data/categorical.py)."""
    import pyarrow as pa

    return (
        _is_text(arrow_type)
        or pa.types.is_dictionary(arrow_type)
        or pa.types.is_boolean(arrow_type)
    )


def _is_text(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def _levels(
    pq,
    groups: list,
    starts: np.ndarray,
    columns: list[str],
    coded: list[int],
    inferred: frozenset[int],
    spec: DataSpec,
    dropped: np.ndarray | None,
    job,
    clusters: frozenset[int] = frozenset(),
) -> Levels:
    """The levels of the columns `coded` (positions among `columns`) over the row groups, in
    the rows kept, sorted: each rank collects those of its share of the groups (those columns
    alone, decoded by pyarrow) and one allgather joins them (agree_levels), so every rank has
    the same levels at any rank count. A string column (`inferred`) that holds numbers is
    refused: a typo, or numbers written as text, is not a category."""
    names = [columns[j] for j in coded]
    found: dict[int, set] = {j: set() for j in coded}
    for i in _share(len(groups), job):
        rows, _ = _kept_rows(pq, groups, starts, i, names, dropped)
        for j, name in zip(coded, names):
            found[j].update(v for v in rows.column(name).unique().to_pylist() if v is not None)

    def refuse(j: int, number: str, word: bool) -> UsageError:
        """A string column that holds numbers: named by its first word, found by the ranks
        together (each its own first, one allgather); or, without words, as numbers."""
        path = groups[0][0]
        if not word:
            return UsageError(
                f"{path}: column {columns[j]!r} is text whose every value reads as a number "
                f"({number!r} among them); write it as numbers, or name it in --categorical to "
                "read each of its values as a level"
            )
        mine = None
        for i in _share(len(groups), job):
            rows, kept = _kept_rows(pq, groups, starts, i, [columns[j]], dropped)
            words = Words.of_arrow(rows.column(0))
            row = words.first_word()
            if row is not None:
                file_row = int(starts[i] - starts[i - groups[i][2]] + kept[row])
                mine = (i, file_row, words.texts[words.index[row]])
                break
        every = job.allgather(mine) if job is not None and job.size > 1 else [mine]
        i, row, text = min(f for f in every if f is not None)
        where = row_name(groups[i][0], row)
        return mixed_column(where, text, columns[j], number)

    rows = int(starts[-1]) - (0 if dropped is None else len(dropped))
    inferred = inferred - clusters
    return agree_levels(found, columns, spec.max_levels, job, rows, inferred, refuse, clusters)


def _kept_rows(pq, groups: list, starts: np.ndarray, i: int, names: list[str], dropped):
    """Row group i's columns `names`, without the rows dropped; and the kept rows' positions
    in the group."""
    import pyarrow as pa

    rows = _read_row_groups(pq, *groups[i], names)
    keep = np.ones(rows.num_rows, bool)
    if dropped is not None:
        keep[dropped[(dropped >= starts[i]) & (dropped < starts[i + 1])] - starts[i]] = False
        rows = rows.filter(pa.array(keep))
    return rows, np.flatnonzero(keep)


PARQUET = TableReader(
    parquet_table, named_columns=True, whole_batches=True, open_ranked=parquet_table_of_ranks
)


def _import_parquet():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError(
            "reading Parquet needs pyarrow: pip install pyarrow (ci/requirements.txt pins the "
            "version tested)"
        ) from None
    return pq


def _footer(pq, p: Path):
    import pyarrow as pa

    try:
        with open_without_readahead(p) as f:
            return pq.ParquetFile(f).metadata
    except pa.ArrowInvalid as e:
        raise UsageError(f"{p} is not a Parquet file ({e})") from None
    except (OSError, pa.ArrowException) as e:
        raise UsageError(f"cannot read {p}: {e}") from None


def _check_same_columns(first: Path, schema, p: Path, theirs) -> None:
    """The files of one dataset have the same columns, by name, order and type."""
    check_same_columns(first, schema.names, p, theirs.names)
    for field in schema:
        if theirs.field(field.name).type != field.type:
            raise UsageError(
                f"{p}: column {field.name!r} is {theirs.field(field.name).type}, but "
                f"{field.type} in {first}; the files of one dataset need the same columns"
            )


def _numpy_type(p: Path, field) -> np.dtype:
    import pyarrow as pa

    if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)) and not (
        pa.types.is_boolean(field.type)
    ):
        raise UsageError(
            f"{p}: column {field.name!r} is {field.type}, not numbers; choose numeric columns "
            "with --features and --target, or cast this one to float64"
        )
    return np.dtype(field.type.to_pandas_dtype())


def _read_group(
    pq,
    p: Path,
    metadata,
    group: int,
    columns: list[str],
    dtype: np.dtype,
    levels: Levels,
    nulls: bool = False,
):
    """One row group's chosen columns as X (rows, a column each but the target's: a
    categorical column, by its position in levels, as its level codes) and y, in dtype; a
    null is refused, or with nulls (its row is being dropped) NaN."""
    rows = _read_row_groups(pq, p, metadata, group, columns)
    X = np.empty((rows.num_rows, len(columns) - 1), dtype)
    y = np.empty(rows.num_rows, dtype)
    for j, name in enumerate(columns):
        column = rows.column(name)
        if column.null_count and not nulls:
            first = sum(metadata.row_group(g).num_rows for g in range(group))
            row = first + int(np.argmax(column.is_null().to_numpy(zero_copy_only=False)))
            raise UsageError(f"{row_name(p, row)}: column {name!r} is null; {HINT}")
        out = X[:, j] if j < len(columns) - 1 else y
        if j in levels:
            first = sum(metadata.row_group(g).num_rows for g in range(group))
            # with nulls, a level of the rows being dropped only is none of the levels: NaN
            out[...] = _level_codes(p, name, column, levels[j], first, strict=not nulls)
        else:
            out[...] = column.to_numpy()
    return X, y


def parquet_columns(p: Path) -> tuple[list[str], int]:
    """The Parquet file's column names and its rows, from its footer."""
    metadata = _footer(_import_parquet(), p)
    return metadata.schema.to_arrow_schema().names, metadata.num_rows


def parquet_rows(p: Path, used: list[int], start: int, stop: int, levels: Levels) -> np.ndarray:
    """Rows start .. stop - 1 of the Parquet file p as float64, a column per column of the
    file: those `used` read (a null NaN), the others NaN. A categorical column (in levels,
    a model's) holds its level codes; a value that is not one of its levels is a UsageError
    naming it, its column and its row."""
    import pyarrow as pa

    pq = _import_parquet()
    metadata = _footer(pq, p)
    schema = metadata.schema.to_arrow_schema()
    sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    starts = np.cumsum([0, *sizes])
    groups = [g for g in range(len(sizes)) if starts[g] < stop and starts[g + 1] > start]
    names = [schema.names[j] for j in used]
    rows = _read_row_groups(pq, p, metadata, groups, names)
    first = int(starts[groups[0]]) if groups else start
    rows = rows.slice(start - first, stop - start)
    out = np.full((stop - start, len(schema.names)), np.nan)
    for j, name in zip(used, names):
        column = rows.column(name)
        if j in levels:
            out[:, j] = _level_codes(p, name, column, levels[j], start)
        else:
            _numpy_type(p, schema.field(name))
            out[:, j] = column.cast(pa.float64()).fill_null(np.nan).to_numpy()
    return out


def _level_codes(
    p: Path, name: str, column, levels: list, start: int, strict: bool = True
) -> np.ndarray:
    """A categorical column's cells (pyarrow) as their codes among the levels (a model's, or
    the data's); NaN where null. A value that is none of them is a UsageError, or NaN where
    not strict."""
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if levels and not isinstance(levels[0], (str, bool)):  # numbers used as codes
        if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
            raise UsageError(
                f"{p}: column {name!r} is {column.type}, but the model's levels of it are numbers"
            )
        values = column.cast(pa.float64()).fill_null(np.nan).to_numpy()
        found = codes(values, levels)
    else:
        words = Words.of_arrow(column)
        texts = words.texts
        if not pa.types.is_boolean(column.type):  # as a CSV file's text would be
            texts = [v if v is None else str(v) for v in texts]
        found = Words(words.index, texts).codes(levels)
        values = np.where(np.array([v is None for v in texts])[words.index], np.nan, 0.0)
    missing = np.isnan(values)
    unknown = np.flatnonzero(~missing & (found < 0))
    if len(unknown) and strict:
        row = int(unknown[0])
        level = column[row].as_py()
        raise UsageError(
            f"{row_name(p, start + row)}: {level!r} in column {name!r} is not one of "
            f"the levels the model was fitted with ({column_list([level_name(v) for v in levels])})"
        )
    return np.where(missing | (found < 0), np.nan, found)
