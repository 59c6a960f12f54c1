"""`hvd-linreg predict` and `hvd-linreg evaluate`: a model that --export wrote, applied to a
data file. Each rank reads a contiguous block of the file's rows; rank 0 writes the
predictions, gathered in the file's row order, or the scores of every rank's block together.

Everything that can be checked without reading rows (the model, the file's columns, the
output's name) is checked before Horovod and TensorFlow start."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hvd_linreg import families, scoring
from hvd_linreg.data import (
    CsvHeader,
    DataSpec,
    Rows,
    Table,
    csv_header,
    open_table,
    read_csv_split,
)
from hvd_linreg.data.categorical import CodedFeatures, Levels, UnseenAsReference, expand, width
from hvd_linreg.data.csv import csv_cells
from hvd_linreg.data.parquet import parquet_columns, parquet_rows
from hvd_linreg.data.row_names import row_name
from hvd_linreg.data.rows import NOTHING_CARRIED, Carried
from hvd_linreg.data.shard import DENSE_MAX_COLUMNS
from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.model_file.export import ExportedModel, load
from hvd_linreg.model_file.predictions import OUTPUT_FORMATS, write_predictions
from hvd_linreg.runtime import ranks
from hvd_linreg.runtime.ranks import Job


def predict(
    model_path: str,
    data_path: str,
    out: str,
    threshold: float | None = None,
    keep: str | None = None,
    unseen: str = "error",
) -> int:
    """Write the model's prediction for every row of the data file to out, in its order; with
    a threshold, a classifier's class instead of its probability; keep: the file's columns
    (comma-separated names) to copy beside each prediction, as they are written there."""
    if Path(out).suffix.lower() not in OUTPUT_FORMATS:
        raise UsageError(f"--out {out} must end in .npy or .csv (the format it is written in)")
    if threshold is not None and not 0 < threshold < 1:
        raise UsageError(f"--threshold {threshold:g} must be between 0 and 1 (a probability)")
    request = Request.check(model_path, data_path, need_target=False, unseen=unseen)
    kept = kept_columns(request.data, keep, out)
    job = ranks.init(horovod=False)  # numbers and a file: neither Horovod nor TensorFlow
    request.say_ignored(job, "predict", kept)
    family = families.get(request.model.family, request.model.link, request.model.power)
    if threshold is not None and family.classes is None:
        raise UsageError(
            f"--threshold applies to a classifier; the model {model_path} is a "
            f"{family.NAME} model, whose predictions are not probabilities"
        )
    levels = request.model.target_levels
    if threshold is not None and levels and Path(out).suffix.lower() != ".csv":
        raise UsageError(
            f"--threshold writes the target's levels ({', '.join(map(str, levels))}) as words: "
            f"--out {out} must end in .csv"
        )
    rows = request.read(job, "--out", out)
    # Rank order is file order: each rank's block follows the previous rank's.
    mine = family.predict(request.model.theta, rows.X, rows.offset)
    if threshold is not None:
        mine = family.classes(mine, threshold)
        if request.model.target_levels:  # the target's own words: yes and no
            mine = np.asarray(request.model.target_levels, object)[mine.astype(int)]
    predictions = np.concatenate(job.allgather(mine, name="predictions"))
    error = None
    if job.is_root:  # only rank 0 writes, so ranks never race on the same file
        try:
            columns = read_kept(request.data, kept, len(predictions)) if kept else None
            write_predictions(Path(out), predictions, kept, columns)
        except UsageError as e:
            error = e
    job.agree(error)
    if job.is_root:
        job.log(f"hvd-linreg predict: {len(predictions)} predictions written to {out}")
    return 0


def kept_columns(data: DataFile, keep: str | None, out: str) -> list[str]:
    """--keep_columns as names of the data file's columns, checked before any row is read."""
    if keep is None:
        return []
    names = [n.strip() for n in keep.split(",")]
    if not all(names) or len(set(names)) < len(names):
        raise UsageError(f"--keep_columns takes distinct column names, got {keep!r}")
    if data.names is None:
        raise UsageError(
            f"--keep_columns names columns of a CSV or Parquet file; {data.path} has no names"
        )
    missing = [n for n in names if n not in data.names]
    if missing:
        raise UsageError(f"{data.path} has no column {', '.join(missing)} (--keep_columns)")
    if Path(out).suffix.lower() != ".csv":
        raise UsageError(
            f"--keep_columns writes its columns beside the predictions in a CSV file: --out "
            f"{out} must end in .csv"
        )
    return names


def read_kept(data: DataFile, names: list[str], count: int) -> list[list[str]]:
    """The kept columns' cells as the file writes them (a CSV's text, a Parquet file's values
    as text), one list per row in the file's order: read by rank 0 alone, these columns only."""
    try:
        if data.header is not None:
            rows = csv_cells(data.path, [data.names.index(n) for n in names])
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(data.path, columns=names)
            cells = [table.column(n).to_pylist() for n in names]
            rows = [["" if v is None else str(v) for v in row] for row in zip(*cells)]
    except UsageError:
        raise
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read --keep_columns from {data.path}: {e}") from None
    if len(rows) != count:
        raise UsageError(
            f"{data.path}: --keep_columns read {len(rows)} rows but the model predicted "
            f"{count}; the file's lines are not one row each"
        )
    return rows


def evaluate(
    model_path: str, data_path: str, metrics_json: str | None, unseen: str = "error"
) -> int:
    """Print the model's scores on the data file (it needs the target column)."""
    request = Request.check(model_path, data_path, need_target=True, unseen=unseen)
    job = ranks.init(horovod=False)
    request.say_ignored(job, "evaluate")
    rows = request.read(job, "--metrics_json", metrics_json)
    from hvd_linreg.report import write_json

    family = families.get(request.model.family, request.model.link, request.model.power)
    result = scoring.scores(job, family, request.model.theta, lambda: [rows])
    if job.is_root:
        job.log(f"Scores of the model {model_path} on {data_path} ({result.count} rows):")
        for line in result.table():
            job.log(line)
        if metrics_json:
            values = {"count": result.count, **result.as_json()}
            write_json(metrics_json, {"model": model_path, "data": data_path, **values})
    return 0


@dataclass(frozen=True)
class DataFile:
    """A data file's columns, known before any row is read: a .npy or .npz as its Table's
    features then its target; a CSV file by its header; a Parquet file by its footer."""

    path: Path
    num_columns: int
    names: list[str] | None  # a CSV header's, a Parquet file's
    target_is_last: bool  # a .npz's y is always the target
    table: Table | None = None
    header: CsvHeader | None = None
    num_rows: int = 0  # a Parquet file's


def open_data(path: str) -> DataFile:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"data file {path} does not exist")
    if p.suffix.lower() == ".csv":
        header = csv_header(p)
        return DataFile(p, len(header.names), header.names, False, header=header)
    if p.suffix.lower() == ".parquet":  # read by the columns' names, its words by the model's
        names, num_rows = parquet_columns(p)
        if num_rows == 0:
            raise UsageError(f"{path} holds no rows")
        return DataFile(p, len(names), names, False, num_rows=num_rows)
    table = open_table([p], DataSpec())
    if table.num_rows == 0:
        raise UsageError(f"{path} holds no rows")
    return DataFile(p, table.num_features + 1, None, p.suffix.lower() == ".npz", table=table)


@dataclass(frozen=True)
class Columns:
    """Where the model's features (in the model's order) and the target are in a file."""

    features: list[int]
    target: int | None
    # the model's carried columns (Carried.names) that the file has, in that order, and
    # their Carried: the model's, less a weight column the file does not have
    carried: list[int] = field(default_factory=list)
    carried_columns: Carried = NOTHING_CARRIED
    levels: Levels = field(default_factory=dict)  # the categorical columns' (the model's)
    ignored: tuple[str, ...] = ()  # the file's columns the model does not use: passed over

    @property
    def num_features(self) -> int:
        """The model's features: a categorical column gives one per level but the first."""
        return sum(width(j, self.levels) for j in self.features)

    def features_of(self, block: np.ndarray) -> np.ndarray | DesignMatrix:
        """A block of the file's rows (every column) as the model's features: its dummies, or
        past DENSE_MAX_COLUMNS of them a design matrix of the codes (as training held them)."""
        if self.num_features > DENSE_MAX_COLUMNS and self.levels:
            held = {i: self.levels[j] for i, j in enumerate(self.features) if j in self.levels}
            coded = CodedFeatures(block[:, self.features], held, np.dtype(np.float64))
            return coded.design(slice(None))
        X = np.empty((len(block), self.num_features))
        expand(block, self.features, self.levels, X)
        return X

    @property
    def used(self) -> list[int]:
        return self.features + self.carried + ([] if self.target is None else [self.target])


def match_columns(data: DataFile, model: ExportedModel) -> Columns:
    """By name where both the file and the model name their columns; else by count: the
    model's F features, or those and then the target (F + 1 columns, as training reads).
    A model fitted with an offset or an exposure needs that column, by name."""
    if data.names is not None and model.feature_names is not None:
        return _match_names(data, model)
    if model.levels:
        raise UsageError(
            f"the model {model.path} codes the column {', '.join(model.levels)} as levels: "
            f"{data.path} must name its columns, as a CSV file with a header or a Parquet "
            "file does"
        )
    carried = model.carried
    if carried.offset_given:
        flag, name = next((f, n) for f, n in zip(carried.roles, carried.names) if f != "--weights")
        raise UsageError(
            f"the model {model.path} adds the column {name!r} ({flag}) to each row's linear "
            f"predictor: {data.path} must name it, as a CSV file with a header does"
        )
    F, C = model.num_features, data.num_columns
    if C == F + 1:
        return Columns(list(range(F)), F)
    if C == F and not data.target_is_last:
        return Columns(list(range(F)), None)
    if data.target_is_last:
        raise UsageError(
            f"{data.path}: X has {C - 1} columns, but the model {model.path} has {F} features"
        )
    raise UsageError(
        f"{data.path} has {C} columns, but the model {model.path} takes {F} (its features) or "
        f"{F + 1} (its features, then the target)"
    )


def formula_columns(data: DataFile, model: ExportedModel, need_target: bool) -> Columns:
    """A formula model's columns in a file: those its formula and carried columns read (the
    features are built from them, data/formula_files.py); the target where the file has the
    columns the formula's left side reads."""
    stored = model.formula
    if data.names is None:
        raise UsageError(
            f"the model {model.path} was fitted from the formula {stored['formula']!r}: "
            f"{data.path} must name its columns, as a CSV file with a header or a Parquet "
            "file does"
        )
    carried = model.carried
    needed = [
        *stored["variables"],
        *(n for f, n in zip(carried.roles, carried.names) if f != "--weights"),
    ]
    missing = [n for n in dict.fromkeys(needed) if n not in data.names]
    if missing:
        raise UsageError(
            f"{data.path} has no column {', '.join(missing)}, which the model {model.path} "
            f"reads (its formula {stored['formula']!r})"
        )
    absent = [n for n in stored["target"] if n not in data.names]
    if need_target and absent:  # the columns the user's file lacks, not the left side's text
        raise UsageError(
            f"{data.path} has no column{'s' * (len(absent) > 1)} {', '.join(map(repr, absent))}, "
            f"which the model's target {stored['lhs']} reads; evaluate needs the target too"
        )
    has_target = not absent
    known = {*stored["variables"], *stored["target"], *carried.names, carried.fold}
    others = tuple(n for n in data.names if n not in known)
    return Columns([], 0 if has_target else None, ignored=others)


def _match_names(data: DataFile, model: ExportedModel) -> Columns:
    names, features = data.names, model.columns or model.feature_names
    missing = [n for n in features if n not in names]
    if missing:
        raise UsageError(
            f"{data.path} has no column {', '.join(missing)}: the model {model.path}'s features "
            f"are {', '.join(features)}"
        )
    carried = model.carried
    for flag, name in zip(carried.roles, carried.names):
        if flag != "--weights" and name not in names:
            raise UsageError(
                f"{data.path} has no column {name!r}: the model {model.path} adds it "
                f"({flag}) to each row's linear predictor"
            )
    weight = carried.weight if carried.weight in names else None
    fold = carried.fold  # the folds it was cross-validated on: a column to pass over
    carried = Carried(weight, carried.offset, carried.exposure)
    known = {*features, model.target_name, *carried.names, fold}
    others = tuple(n for n in names if n not in known)
    target = names.index(model.target_name) if model.target_name in names else None
    chosen = [names.index(n) for n in carried.names]
    levels = {names.index(n): levels for n, levels in (model.levels or {}).items()}
    if target is not None and model.target_levels:  # evaluate codes a target of words so
        levels[target] = model.target_levels
    features = [names.index(n) for n in features]
    return Columns(features, target, chosen, carried, levels, others)


@dataclass(frozen=True)
class Request:
    """A model and a data file, checked against each other."""

    model: ExportedModel
    data: DataFile
    columns: Columns
    need_target: bool = False

    @classmethod
    def check(
        cls, model_path: str, data_path: str, need_target: bool, unseen: str = "error"
    ) -> Request:
        """The model and the data file, matched; unseen "reference": a value of a categorical
        column that the model was not fitted with is its reference level."""
        model = load(model_path)
        data = open_data(data_path)
        columns = (
            match_columns(data, model)
            if model.formula is None
            else formula_columns(data, model, need_target)
        )
        if unseen == "reference":
            levels = {j: UnseenAsReference(v) for j, v in columns.levels.items()}
            columns = replace(columns, levels=levels)
        if need_target and columns.target is None:
            what = (
                f"no column {model.target_name} (the model's target)"
                if data.names is not None and model.target_name
                else f"only the model's {model.num_features} features"
            )
            raise UsageError(f"{data_path} has {what}; evaluate needs the target too")
        return cls(model, data, columns, need_target)

    def say_ignored(self, job: Job, command: str, kept: list[str] = ()) -> None:
        """Rank 0 names, in one line, the file's columns that the model does not use (and
        --keep_columns does not copy)."""
        ignored = [c for c in self.columns.ignored if c not in kept]
        if ignored and job.is_root:
            job.log(
                f"hvd-linreg {command}: passing over the column{'s' * (len(ignored) > 1)} "
                f"{', '.join(ignored)} of {self.data.path}: the model does not use "
                f"{'them' if len(ignored) > 1 else 'it'}"
            )

    def read(self, job: Job, flag: str, output: str | None) -> Rows:
        """This rank's block of rows (the target empty without one; the weights and offsets
        the model has), float64; rank 0 first checks that it can write output. A problem any
        rank sees stops all of them."""
        from hvd_linreg.report import check_writable

        error, rows = None, None
        if job.is_root:
            try:
                check_writable(flag, output)
            except UsageError as e:
                error = e
        # Agreed on before reading: reading a CSV file makes collective calls of its own.
        job.agree(error)
        if self.model.formula is not None:
            from hvd_linreg.data.formula_files import formula_rows

            return formula_rows(self.model, self.data.path, job, self.need_target)
        try:
            block, first = self._block(job)
            bad = ~np.isfinite(block[:, self.columns.used]).all(axis=1)
            if bad.any():
                row = first + int(np.argmax(bad))
                raise UsageError(
                    f"{row_name(self.data.path, row)}: NaN or inf in a column the model uses; "
                    "clean or drop such rows"
                )
            columns = self.columns
            problem = columns.carried_columns.problem(block[:, columns.carried])
            if problem is not None:
                local, j, what = problem
                raise UsageError(
                    f"{row_name(self.data.path, first + local)}: "
                    f"{block[local, columns.carried[j]]:g} in column "
                    f"{columns.carried_columns.names[j]!r}; {what}"
                )
            X = columns.features_of(block)
            y = block[:, columns.target] if columns.target is not None else block[:, :0]
            rows = columns.carried_columns.rows(X, y, block[:, columns.carried])
        except UsageError as e:
            error = e
        job.agree(error)
        return rows

    def _block(self, job: Job) -> tuple[np.ndarray, int]:
        """This rank's contiguous block of the file's rows (float64, every column), and its
        first row's number in the file."""
        data = self.data
        if data.header is not None:  # a CSV file: the lines that start in this rank's bytes
            columns = self.columns
            rows, counts = read_csv_split(
                data.header, job.rank, job.size, job, columns.used, columns.levels
            )
            return rows, sum(counts[: job.rank])
        n = data.table.num_rows if data.table is not None else data.num_rows
        start, stop = job.rank * n // job.size, (job.rank + 1) * n // job.size
        if data.table is None:  # Parquet
            columns = self.columns
            return parquet_rows(data.path, columns.used, start, stop, columns.levels), start
        block = np.empty((stop - start, data.num_columns))
        at = start
        try:
            for X, y in data.table.parts(start, stop):
                block[at - start : at - start + len(y)] = np.column_stack([X, y])
                at += len(y)
        except OSError as e:
            raise UsageError(f"cannot read {data.path}: {e}") from None
        return block, start
