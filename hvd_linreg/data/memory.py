"""Rows a rank holds in memory (hvd_linreg.fit): each rank passes its own, and the ranks' rows
in rank order are the dataset. They go to the ranks that hold them by the layout and the
validation split (one alltoall), as a CSV's parsed lines do, so a fit on them is the one a
file of the same rows in the same order would give, at any rank count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import sparse

from hvd_linreg.config import Config
from hvd_linreg.data import frames
from hvd_linreg.data.categorical import CodedFeatures, expanded_names
from hvd_linreg.data.holdout import Holdout, to_owners
from hvd_linreg.data.layout import layout_for
from hvd_linreg.data.rows import Carried
from hvd_linreg.data.shard import RowNames, Shard, with_validation
from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import SparseMatrix
from hvd_linreg.runtime.buffers import aligned_empty
from hvd_linreg.runtime.ranks import Job

SOURCE = "the rows passed to fit()"
# What a message about a row that fit() was given tells the user to do.
PYTHON_REMEDY = "fill or drop such rows (missing='drop' drops those with NaN)"
# The carried columns' names, in a model's metadata and in messages.
WEIGHTS, OFFSET, EXPOSURE = "weights", "offset", "exposure"
FOLD, GROUPS = "fold", "groups"


def memory_shard(
    cfg: Config,
    job: Job,
    X: Any,
    y: Any,
    weights: Any = None,
    offset: Any = None,
    fold: Any = None,
    groups: Any = None,
    *,
    exposure: Any = None,
    names: Carried | None = None,
    source: str = SOURCE,
    where: Callable[[int], str] | None = None,
) -> Shard:
    """This rank's shard of the dataset that the ranks' rows X, y (and each row's weight,
    offset, exposure, cross-validation fold and cluster) make in rank order; names: those
    columns' names where a file gives them (--formula), where: how a message names the row i
    of X (a file's line; by default "row i"). Each rank checks its own rows first;
    the ranks agree on the first problem before any rows move. A SciPy sparse X (CSR, CSC,
    COO) stays on the rank that passes it (sparse_shard)."""
    if sparse.issparse(X):
        given = dict(weights=weights, offset=offset, exposure=exposure, fold=fold, groups=groups)
        return sparse_shard(cfg, job, X, y, _carried(**given, names=names), given, source)
    X, levels, columns = _coded(cfg, job, X)
    y, target_levels = _target_levels(job, y)
    carried = _carried(weights, offset, exposure, fold, groups, names)
    given = [v for v in (weights, offset, exposure, fold, groups) if v is not None]
    names, target, rows = _agreed_rows(job, X, y, carried, given, where)
    counts = _counts(job, len(rows), names)
    total = sum(counts)
    if total == 0:
        raise UsageError("fit() was given no rows on any rank")
    holdout = Holdout.of(cfg, total)
    kept = None if holdout.held_out else counts  # the rows as given, where no row is held out
    layout = layout_for(
        holdout.num_train, job.rank, job.size, cfg.batch_size, batched=cfg.batched, counts=kept
    )
    table, validation = to_owners(rows, sum(counts[: job.rank]), holdout, layout, job)
    dtype = cfg.dtype or _own_dtype(X)
    p = len(names)
    held = {j: levels[name] for j, name in enumerate(names) if name in levels}
    X_rows, y_rows = _split(table, p, dtype)
    shard = Shard(
        CodedFeatures(X_rows, held, np.dtype(dtype)) if held else X_rows,
        y_rows,
        layout,
        source,
        feature_names=tuple(expanded_names(names, range(p), held)) if _named(X) else None,
        target_name=target,
        carried=table[:, p:-1] if len(carried) else None,
        carried_columns=carried,
        levels=levels or None,
        columns=columns,
        target_levels=target_levels,
        where=None if holdout.held_out else where or _row,  # rows moved: none to name
    )
    if holdout.held_out:
        shard = _held_out(job, shard, holdout, validation, names, held, target)
    return shard


def _agreed_rows(job: Job, X, y, carried: Carried, given: list, where=None):
    """_own_rows of this rank, once every rank has checked its own: the first problem of any
    rank is raised on all of them."""
    error, found = None, None
    try:
        found = _own_rows(X, y, carried, given, where)
    except UsageError as e:
        error = e
    job.agree(error)
    return found


def _held_out(job: Job, shard: Shard, holdout, validation, names, held, target) -> Shard:
    """The shard with this rank's validation rows (held: the categorical columns' levels by
    index among names)."""
    p, dtype, carried = len(names), shard.dtype, shard.carried_columns
    features = expanded_names(names, range(p), held)
    where = RowNames([shard.source], None, [*_labels(features, carried), target or "y"], carried)
    X_held, y_held = _split(validation, p, dtype)
    if held:  # few rows: their dummies, as a file's held-out rows have them
        X_held = CodedFeatures(X_held, held, np.dtype(dtype))[:]
    C = validation[:, p:-1] if len(carried) else None
    piece = holdout.piece(job.rank, job.size)
    return with_validation(shard, holdout, piece, X_held, y_held, where, C)


def sparse_shard(
    cfg: Config, job: Job, X, y, carried: Carried, given: dict, source: str = SOURCE
) -> Shard:
    """The shard of a SciPy sparse X: each rank keeps the rows it passes (no alltoall of its
    columns: only the exact solvers take it, and they take no batches), as a CSR design matrix
    (matrix/sparse.py). Every rank's X must have the dataset's columns; each rank passes some
    rows."""
    if cfg.solver == "sgd":
        raise UsageError(
            "a sparse X is fitted by solver='exact': SGD's batches would be its dense rows"
        )
    if cfg.validation_fraction:
        raise UsageError(
            "validation_fraction does not take a sparse X (its rows stay where they are given): "
            "hold out rows yourself and score them with the result's predict()"
        )
    error, rows = None, None
    try:
        X = _finite_sparse(X)
        values = [v for v in given.values() if v is not None]
        _, target, rows = _own_rows(np.zeros((X.shape[0], 0)), y, carried, values)
    except UsageError as e:
        error = e
    job.agree(error)
    every = job.allgather((X.shape[0], X.shape[1]), name="fit_sparse_rows")
    for rank, (_, width) in enumerate(every):
        if width != every[0][1]:
            raise UsageError(
                f"X has {every[0][1]} columns on rank 0 but {width} on rank {rank}: every "
                "rank's sparse X has the dataset's columns (give each its shape=)"
            )
    counts = [n for n, _ in every]
    if min(counts) == 0:
        raise UsageError(
            f"rank {counts.index(0)} passed no rows: with a sparse X every rank passes some"
        )
    layout = layout_for(
        sum(counts), job.rank, job.size, cfg.batch_size, batched=False, counts=counts
    )
    dtype = cfg.dtype or ("float32" if X.dtype == np.float32 else "float64")
    y_rows = aligned_empty((len(rows),), dtype)
    y_rows[...] = rows[:, -1]
    return Shard(
        SparseMatrix(X.astype(dtype)),
        y_rows,
        layout,
        source,
        target_name=target,
        carried=rows[:, :-1] if len(carried) else None,
        carried_columns=carried,
    )


def _finite_sparse(X):
    """X as CSR, its stored values all finite numbers; UsageError naming the first row that
    holds NaN or inf."""
    X = sparse.csr_matrix(X)
    if X.dtype.kind not in "biuf":
        raise UsageError(f"X holds {X.dtype} values, not numbers")
    X = X.astype(np.float64) if X.dtype.kind != "f" else X
    bad = ~np.isfinite(X.data)
    if bad.any():
        row = int(np.searchsorted(X.indptr, np.argmax(bad), side="right")) - 1
        raise UsageError(f"row {row}: NaN or inf in X; fill or drop such rows")
    return X


def _counts(job: Job, count: int, names) -> list[int]:
    """Every rank's number of rows, the ranks having passed the same columns."""
    every = job.allgather((count, names), name="fit_rows")
    for rank, (_, theirs) in enumerate(every):
        if theirs != names:
            raise UsageError(
                f"the ranks passed different columns to fit(): rank 0 {_listed(every[0][1])}, "
                f"rank {rank} {_listed(theirs)}"
            )
    return [n for n, _ in every]


def _coded(cfg: Config, job: Job, X) -> tuple[Any, dict[str, list], tuple[str, ...] | None]:
    """A DataFrame's columns of words, categories and booleans as their codes (frames.py), as
    a file's categorical columns are held (CodedFeatures): X so coded, each such column's
    levels (agreed by every rank), and X's own columns; X as it is where it has none."""
    if not _named(X):
        return X, {}, None
    levels = frames.agree(job, X, cfg.max_levels, check=frames.refuse_mixed)
    if not levels:
        return X, {}, None
    return frames.coded(X, levels), levels, tuple(str(c) for c in X.columns)


def _target_levels(job: Job, y) -> tuple[Any, list | None]:
    """A target of words, booleans or pandas categories as its levels' numbers, and its levels,
    agreed by every rank (sorted; a category's own order), which the family then checks (a
    binary one's yes and no); a target of numbers as it is, and None."""
    import pandas as pd

    cells = y if isinstance(y, pd.Series) else pd.Series(np.asarray(y))
    if not len(cells) or frames.kind(cells) is None:
        return y, None
    frame = cells.to_frame(str(cells.name) if cells.name is not None else "y")
    levels = frames.agree(job, frame, 0, check=frames.refuse_mixed, guards=False)
    if not levels:
        return y, None
    coded = frames.coded(frame, levels).iloc[:, 0]
    return (coded if cells.name is not None else coded.to_numpy()), next(iter(levels.values()))


def _carried(weights, offset, exposure, fold, groups, names: Carried | None) -> Carried:
    """The carried columns of the arrays given, named as names has them, else as WEIGHTS ...
    GROUPS."""
    if names is not None:
        return names
    given = [
        (WEIGHTS, weights),
        (OFFSET, offset),
        (EXPOSURE, exposure),
        (FOLD, fold),
        (GROUPS, groups),
    ]
    return Carried(*(name if values is not None else None for name, values in given))


def _own_rows(
    X, y, carried: Carried, values: list, where: Callable[[int], str] | None = None
) -> tuple[tuple[str, ...], str | None, np.ndarray]:
    """This rank's features' names, the target's, and its rows as float64 [X, carried..., y]
    (values: the carried columns' arrays, in carried's order); UsageError for anything that is
    not a number, of the wrong shape, or not finite, or that breaks its column's rule (a
    weight >= 0, an exposure > 0, a fold a whole number), naming the row by where (a file's
    line: --formula), else by its row among those passed."""
    names = tuple(str(c) for c in X.columns) if _named(X) else None
    target = str(y.name) if getattr(y, "name", None) is not None else None
    X_array = _numbers("X", X, 2)
    y_array = _numbers("y", y, 1)
    if names is None:
        names = tuple(f"w[{j}]" for j in range(X_array.shape[1]))
    arrays = [_numbers(what, v, 1) for what, v in zip(carried.names, values)]
    for what, array in [("y", y_array), *zip(carried.names, arrays)]:
        if len(array) != len(X_array):
            raise UsageError(f"X has {len(X_array)} rows but {what} has {len(array)}")
    rows = np.concatenate([X_array, *(a[:, None] for a in arrays), y_array[:, None]], axis=1)
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        labels = [*names, *carried.names, target or "y"]
        column = labels[int(np.argmax(~np.isfinite(rows[i])))]
        remedy = "clean or drop such rows" if where else PYTHON_REMEDY
        raise UsageError(f"{(where or _row)(i)}: NaN or inf in {column}; {remedy}")
    problem = carried.problem(rows[:, len(names) : -1]) if len(carried) else None
    if problem is not None:
        i, j, what = problem
        value = rows[i, len(names) + j]
        raise UsageError(f"{(where or _row)(i)}: {value:g} in {carried.names[j]}; {what}")
    return names, target, rows


def _row(i: int) -> str:
    """How a message names row i of the arrays or DataFrame a rank passed."""
    return f"row {i}"


def _numbers(what: str, values, ndim: int) -> np.ndarray:
    """values as a float64 array of ndim dimensions (a column vector counts as 1)."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{what} is not an array of numbers: {e}") from None
    if ndim == 1 and array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != ndim:
        shape = "rows x features" if ndim == 2 else "one value per row"
        raise UsageError(f"{what} must be {ndim}-dimensional ({shape}), got shape {array.shape}")
    if array.dtype.kind not in "biuf":
        mixed = frames.mixed_text_column(values) if _named(values) else None
        if mixed is not None:
            raise mixed
        raise UsageError(
            f"{what} holds {array.dtype} values, not numbers"
            + (f" (column {_first_non_number(values)!r})" if _named(values) else "")
        )
    return array.astype(np.float64)


def _first_non_number(frame) -> str:
    return next(str(c) for c in frame.columns if frame[c].dtype.kind not in "biuf")


def _named(X) -> bool:
    """A pandas DataFrame, whose columns name the features."""
    return hasattr(X, "columns") and hasattr(X, "dtypes")


def _own_dtype(X) -> str:
    """The precision of X's numbers where they all have one (float32 or float64), else
    float64, as the readers keep a file's own."""
    dtypes = {np.dtype(d) for d in X.dtypes} if _named(X) else {np.asarray(X).dtype}
    own = next(iter(dtypes)).name if len(dtypes) == 1 else None
    return own if own in ("float32", "float64") else "float64"


def features_of(X, num_features: int, levels: dict | None = None):
    """New rows' features for a fitted model of num_features, as float64; a sparse X as a
    design matrix, and with levels (a column's index among X's -> its levels: X's categorical
    columns as their codes) a design matrix of them (no dummies)."""
    if sparse.issparse(X):
        X = _finite_sparse(X)
        if X.shape[1] != num_features:
            raise UsageError(f"X has {X.shape[1]} features; the model has {num_features}")
        return SparseMatrix(X)
    if levels:
        codes = _numbers("X", X, 2)
        return CodedFeatures(codes, levels, np.dtype(np.float64)).design(slice(None))
    array = _numbers("X", X, 2)
    if array.shape[1] != num_features:
        raise UsageError(f"X has {array.shape[1]} features; the model has {num_features}")
    return array


def _labels(names, carried: Carried) -> list[str]:
    return [*names, *carried.names]


def _listed(names) -> str:
    return "(" + ", ".join(names) + ")" if names else "(none)"


def _split(table: np.ndarray, p: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """A block of [X, carried, y] rows as the features and the target, in dtype."""
    X = aligned_empty((len(table), p), dtype)
    X[...] = table[:, :p]
    y = aligned_empty((len(table),), dtype)
    y[...] = table[:, -1]
    return X, y
