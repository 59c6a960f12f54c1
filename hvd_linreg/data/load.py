"""Loading this rank's shard: synthetic rows, or its rows of --data by the reader of the
files' format (files.READERS)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from hvd_linreg.config import SYNTHETIC_FEATURES, SYNTHETIC_SAMPLES, Config
from hvd_linreg.data.categorical import CodedFeatures, expanded_names
from hvd_linreg.data.columns import column_labels
from hvd_linreg.data.files import READERS, data_files, format_of, open_table
from hvd_linreg.data.holdout import Holdout
from hvd_linreg.data.layout import Layout, layout_for
from hvd_linreg.data.rows import Carried, Rows
from hvd_linreg.data.shard import RowNames, Shard, naming_rows, with_validation
from hvd_linreg.data.spec import DataSpec, ScatterReader, TableReader
from hvd_linreg.data.synthetic import TRUE_BIAS, synthetic_rows, true_weights
from hvd_linreg.data.table import Table, rows_of
from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.runtime.resources import memory_per_rank

# A shard larger than this share of the memory a rank may use is read as it is used: the rest
# is for TensorFlow, the float64 blocks of the passes over the data, and slack.
_SHARD_SHARE = 0.5

# A part read whole (a Parquet row group) smaller than this costs little to read on every rank:
# no warning (pyarrow's default groups of 1 Mi rows are 8 MB from one float64 column).
_WHOLE_READ_NOTED_BYTES = 8 << 20


# target(seed, ids, X, y): the synthetic rows' target for a model family, from the seed's
# line y (families' synthetic_target); the line itself for least squares.
SyntheticTarget = Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def load_shard(
    cfg: Config,
    rank: int,
    size: int,
    job: Job | None = None,
    target: SyntheticTarget | None = None,
) -> Shard:
    """Build or read only this rank's rows; raise UsageError for anything the user can fix.
    job: the ranks' collectives, which reading a CSV file on several ranks needs, and the
    cores this rank may use, which building synthetic rows uses. target: the synthetic rows'
    target, which the caller's model family gives (by default the seed's line)."""
    if not cfg.synthetic:
        return read_shard(cfg, rank, size, job)
    num_features = cfg.num_features or SYNTHETIC_FEATURES
    holdout = Holdout.of(cfg, cfg.num_samples or SYNTHETIC_SAMPLES)
    # Runs of 1 row: no file is read, so longer runs would only leave out more rows.
    layout = layout_for(holdout.num_train, rank, size, cfg.batch_size, batched=cfg.batched)

    def rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dtype, threads = cfg.dtype or "float32", job.threads if job else 1
        X, y = synthetic_rows(cfg.seed, ids, num_features, dtype, threads)
        return X, y if target is None else target(cfg.seed, ids, X, y)

    validation = Rows(*rows(holdout.piece(rank, size))) if holdout.held_out else None
    shard = Shard(*rows(holdout.global_ids(layout.rows())), layout, "synthetic")
    return replace(
        shard,
        w_true=true_weights(num_features).tolist(),
        b_true=TRUE_BIAS,
        validation=validation,
        num_validation=len(holdout.validation),
    )


def read_shard(cfg: Config, rank: int, size: int, job: Job | None = None) -> Shard:
    """This rank's rows of --data (see data_files), in --dtype (default: the files' own, see
    own_dtype); read now, or as used when they do not fit in memory."""
    files = data_files(cfg.data)
    suffix, spec = format_of(files[0]), DataSpec.of(cfg)
    reader = READERS.get(suffix)
    if isinstance(reader, ScatterReader):
        return reader.read_shard(files, cfg, rank, size, job)
    _check_reader_takes(reader, spec, suffix)
    ranked = isinstance(reader, TableReader) and reader.open_ranked
    table = reader.open_ranked(files, spec, job) if ranked else open_table(files, spec)
    if table.num_rows == 0 and table.dropped is not None:
        raise UsageError(
            f"every row of {cfg.data} has a missing value in a column the run uses: "
            "--missing drop leaves none"
        )
    if table.num_rows == 0:
        raise UsageError(f"{cfg.data} holds no rows")
    holdout = Holdout.of(cfg, table.num_rows)
    training = holdout.training_table(table)
    whole = reader.whole_batches
    layout = layout_for(
        training.num_rows, rank, size, cfg.batch_size, table.row_bytes, whole, cfg.batched
    )
    dtype = np.dtype(spec.dtype or table.dtype)
    carried = spec.carried
    if table.columns:
        labels = column_labels(table.columns)
    else:  # the features' and the target's labels, and the carried arrays' between them
        labels = reader.labels(table.num_features - len(carried))
        labels[-1:-1] = [f"array {name!r}" for name in carried.names]
    names = RowNames(files, table.file_rows, labels, carried, table.dropped)
    try:
        shard = _table_shard(cfg.data, table, training, layout, dtype, carried)
        names.check_shard(shard, holdout.file_row(layout))
        if holdout.held_out:  # held in memory: a fraction of the rows, used at log steps
            ids = holdout.piece(rank, size)
            X, y = rows_of(table, ids)
            p = X.shape[1] - len(carried)
            C = X[:, p:].astype(np.float64) if len(carried) else None
            X, y = X[:, :p].astype(dtype), y.astype(dtype)
            shard = with_validation(shard, holdout, ids, X, y, names, C)
            if table.coded:  # checked as codes; held as their dummies, as few rows
                dummies = CodedFeatures(X, table.coded, dtype)[:]
                shard = replace(shard, validation=shard.validation._replace(X=dummies))
    except OSError as e:
        raise UsageError(f"cannot read {cfg.data}: {e}") from None
    return naming_rows(shard, names, holdout)


def _check_reader_takes(reader, spec: DataSpec, suffix: str) -> None:
    """UsageError for a setting that a format's reader cannot apply: columns named in a file
    of unnamed numbers, rows dropped from a format that is not read by rows."""
    if spec.categorical and not (isinstance(reader, TableReader) and reader.named_columns):
        raise UsageError(
            f"--categorical codes the named columns of CSV and Parquet files as levels; a "
            f"{suffix} file's columns are unnamed numbers: pass the dummies as its columns"
        )
    if spec.missing == "drop" and not (isinstance(reader, TableReader) and reader.open_ranked):
        raise UsageError(
            f"--missing drop drops the rows of CSV and Parquet files; a {suffix} file's NaNs "
            "stop the run naming their row: drop those rows from it, or write it as Parquet"
        )
    if isinstance(reader, TableReader) and not reader.named_columns:
        for flag, value in (("--target", spec.target), ("--features", spec.features)):
            if value is not None:
                raise UsageError(
                    f"{flag} names columns of a CSV or Parquet file; it does not apply to {suffix}"
                )
        if spec.carried.names and not reader.named_arrays:
            raise UsageError(
                f"{spec.carried.roles[0]} names a column of a CSV or Parquet file, or an array "
                f"of a .npz file (beside X and y); a {suffix} file has neither: save the "
                "arrays in one .npz (np.savez(path, X=X, y=y, weight=w))"
            )


def _features(X: np.ndarray, table: Table):
    """A table's rows as the shard holds them: its categorical columns' codes as CodedFeatures,
    which writes their dummies as rows are read."""
    return CodedFeatures(X, table.coded, X.dtype) if table.coded else X


def _table_shard(
    source: str, table: Table, training: Table, layout: Layout, dtype, carried: Carried
) -> Shard:
    """The shard of the training rows: all in memory, or, when they do not fit, the first run
    (checked now, block by block; read again as training uses it). The table's last
    len(carried) feature columns are the carried ones."""
    shard_bytes = layout.num_held * (table.num_features + 1) * dtype.itemsize
    p, k = table.num_features - len(carried), len(carried)
    names = table.columns[:p] if table.columns else None
    if table.coded:  # the features' names: each categorical column's dummies
        names = tuple(expanded_names(table.columns, range(p), table.coded))
    target_name = table.columns[-1] if table.columns else None
    described = {
        "feature_names": names,
        "target_name": target_name,
        "carried_columns": carried,
        "levels": table.levels,
        "columns": table.sources,
        "dropped": table.dropped,
        "target_levels": table.target_levels,
    }
    if shard_bytes > memory_per_rank() * _SHARD_SHARE:
        first = range(min(layout.run_length, layout.num_train))  # none without batches
        X, y, C = layout.take(training, dtype, first, k)
        shard = Shard(_features(X, table), y, layout, source, table=training, carried=C,
                      **described)  # fmt: skip
    else:
        held = range(layout.num_train + layout.num_wrap)
        X, y, C = layout.take(training, dtype, held, k, tail=True)
        shard = Shard(_features(X, table), y, layout, source, carried=C, **described)
    whole_bytes = table.whole_rows * table.row_bytes
    if (  # a run without batches reads consecutive pieces: a group at each end at most
        layout.size > 1
        and layout.batched
        and table.whole_rows > layout.run_length
        and whole_bytes >= _WHOLE_READ_NOTED_BYTES
    ):
        shard = replace(shard, oversized_reads=table.whole_rows)
    return shard
