"""A rank's shard in memory (Shard), and the checks its rows pass: numbers, all finite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg.data.categorical import CodedFeatures
from hvd_linreg.data.layout import Layout
from hvd_linreg.data.missing import file_row
from hvd_linreg.data.passes import block_rows
from hvd_linreg.data.row_names import row_name
from hvd_linreg.data.rows import NOTHING_CARRIED, Carried, Rows
from hvd_linreg.data.table import Table
from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import DesignMatrix

if TYPE_CHECKING:
    from hvd_linreg.data.holdout import Holdout

# A design wider than this many features, with categorical columns, reaches the passes as
# design matrices (matrix/), a categorical block as its codes: a block of its dense rows would
# be as wide as its levels. Narrower ones, the same dummies as dense rows (the exact solvers'
# QR, SGD's tensors).
DENSE_MAX_COLUMNS = 512


@dataclass
class Shard:
    """This rank's rows of the dataset, by its Layout, and what is known of their source."""

    # (rows, num_features) float32 or float64: the rows of Layout.rows(); or, with categorical
    # columns, CodedFeatures, their dummies written as slices of rows are read; or a sparse
    # design matrix (fit()'s sparse X, a libsvm file's rows)
    X: np.ndarray | CodedFeatures | DesignMatrix
    y: np.ndarray  # (rows,), the dtype of X
    layout: Layout
    source: str  # "synthetic" or the data file's path
    w_true: list | None = None  # known for synthetic data only
    b_true: float | None = None
    # Set when the shard is larger than the memory the rank may use: X and y then hold only
    # its first run, and the rest is read from the file as it is used (blocks, trainer.py).
    table: Table | None = None
    feature_names: tuple[str, ...] | None = None  # from a CSV or Parquet file's columns
    target_name: str | None = None  # the same
    # --validation_fraction: this rank's piece of the held-out rows (X, y), and their number
    # over all ranks; the layout above then numbers the training rows alone.
    validation: Rows | None = None
    num_validation: int = 0
    # Rows of the file read whole (Parquet's largest row group) when that is more than a run:
    # then a rank reads rows of other ranks too (train.prepare warns).
    oversized_reads: int = 0
    # --weights, --offset, --exposure: the columns read beside X and y (rows, k) in float64,
    # in the rows of X, and what each is (Carried.rows makes them the Rows' fields)
    carried: np.ndarray | None = None
    carried_columns: Carried = NOTHING_CARRIED
    # --missing drop: the data's rows dropped for a missing value (0-based over the files,
    # sorted); the dataset's rows are the others, in order
    dropped: np.ndarray | None = None
    # categorical columns (data/categorical.py): each one's name -> its levels, sorted; the
    # features hold their dummies. columns: the data's columns the features come from.
    levels: dict[str, list] | None = None
    columns: tuple[str, ...] | None = None
    # --formula, fit(formula): what builds the features from a file's columns (formulas.py's
    # Design.stored()), kept by --export
    formula: dict | None = None
    # a CSV file's first column left out of the features as a row index (data/csv.py)
    index_column: str | None = None
    # a target of words, booleans or categories: its levels, sorted (a category's own order),
    # y each row's level's number; a binary family models the second against the first
    target_levels: list | None = None
    # how a message names this rank's training row number i: "data.csv line 8" (RowNames)
    where: Callable[[int], str] | None = None

    @property
    def num_features(self) -> int:
        """Features per row."""
        return self.X.shape[1]

    @property
    def structured(self) -> bool:
        """Whether the passes take this shard's rows as design matrices (matrix/): categorical
        or sparse columns, more than DENSE_MAX_COLUMNS in all. A narrower one's blocks are its
        dense rows, as an array's."""
        kinds = (CodedFeatures, DesignMatrix)
        return isinstance(self.X, kinds) and self.num_features > DENSE_MAX_COLUMNS

    def design_template(self) -> DesignMatrix:
        """A design matrix of no rows with the parts of this (structured) shard's blocks."""
        if isinstance(self.X, CodedFeatures):
            return self.X.design(slice(0, 0))
        return self.X.rows(slice(0, 0))

    @property
    def num_dropped(self) -> int:
        """Rows of the data dropped for a missing value (--missing drop)."""
        return 0 if self.dropped is None else len(self.dropped)

    @property
    def num_samples(self) -> int:
        """Rows in the whole dataset, over all ranks."""
        return self.layout.num_rows

    @property
    def num_train(self) -> int:
        """This rank's rows that SGD's batches use, n: the first n of X and y (in memory),
        followed by a copy of the first layout.num_wrap of them."""
        return self.layout.num_train

    @property
    def dtype(self) -> str:
        """The precision the rows are held in: float32 or float64."""
        return self.X.dtype.name

    @property
    def weighted(self) -> bool:
        """Whether the rows carry prior weights (--weights)."""
        return self.carried_columns.weight is not None

    def validation_blocks(self, max_rows: int | None = None) -> Iterator[Rows]:
        """This rank's validation rows in blocks of max_rows (data/passes.py's by default;
        none without a held-out set)."""
        rows = self.validation or Rows(self.X[:0], self.y[:0])
        max_rows = max_rows or block_rows(self.num_features + 1)
        for start in range(0, len(rows.y), max_rows):
            yield rows.slice(start, start + max_rows)

    def blocks(self, max_rows: int | None = None) -> Iterator[Rows]:
        """All of this rank's rows, each once, runs then tail, in blocks of about max_rows
        (data/passes.py's by default)."""
        for X, y, C in self.raw_blocks(max_rows):
            yield self.carried_columns.rows(X, y, C)

    def raw_blocks(self, max_rows: int | None = None, coded: bool = False) -> Iterator[tuple]:
        """blocks() as read: (X, y, the carried columns or None). coded: X as its columns are
        held, a categorical one's codes for its dummies (CodedFeatures)."""
        max_rows = max_rows or block_rows(self.num_features + 1)
        layout, n = self.layout, self.layout.num_train
        if self.table is None:
            tail = n + layout.num_wrap  # after the copy of the first rows
            C = self.carried
            X = self.X.codes if coded and isinstance(self.X, CodedFeatures) else self.X
            design = self.structured and not coded and isinstance(X, CodedFeatures)
            dense = not self.structured and isinstance(X, DesignMatrix)  # a narrow sparse X
            if self.structured and isinstance(X, DesignMatrix) and layout.num_wrap == 0:
                # a sparse shard whole: slicing rows of a CSR matrix copies them, every pass
                yield X, self.y, C
                return
            for rows in (range(0, n), range(tail, len(self.y))):
                for start in range(rows.start, rows.stop, max_rows):
                    stop = min(start + max_rows, rows.stop)
                    carried = None if C is None else C[start:stop]
                    part = X.design(slice(start, stop)) if design else X[start:stop]
                    yield part.toarray() if dense else part, self.y[start:stop], carried
            return
        step = max(1, max_rows // layout.run_length) * layout.run_length
        for start in range(0, n, step):
            yield self.take(range(start, min(start + step, n)), coded=coded)
        yield self.take(range(0), tail=True, coded=coded)

    def take(self, rows: range, tail: bool = False, coded: bool = False) -> tuple:
        """Rows of the table a shard larger than memory reads as it is used (Layout.take):
        (X, y, the carried columns or None), X as the shard's features are (a categorical
        column's dummies, or a wide design's matrix; coded: its codes)."""
        k = len(self.carried_columns)
        X, y, C = self.layout.take(self.table, self.dtype, rows, k, tail=tail)
        if isinstance(self.X, CodedFeatures) and not coded:
            features = CodedFeatures(X, self.X.levels, self.X.dtype)
            X = features.design(slice(None)) if self.structured else features[:]
        return X, y, C

    def warnings(self, cfg) -> list[str]:
        """What the user should know about how the data meets the layout."""
        layout, warnings = self.layout, []
        run = layout.run_length
        if self.oversized_reads:
            warnings.append(
                f"{cfg.data} has row groups of up to {self.oversized_reads} rows, more than a "
                f"batch of {run}: each rank reads and decodes every row group that holds "
                "any of its rows, so the ranks read much of the file each, not 1/ranks of it. "
                f"Write it with row groups of at most {run} rows (pyarrow: "
                f"pq.write_table(table, path, row_group_size={run}))"
            )
        unbatched = self.num_samples - layout.num_batched
        if unbatched and cfg.solver == "sgd":
            runs = f"{layout.size} ranks x runs of {run} row{'s' * (run > 1)}"
            warnings.append(
                f"{self.num_samples} samples are not a multiple of {layout.stride} ({runs}): "
                f"SGD uses the first {layout.num_batched} and leaves out the last {unbatched}, "
                "which count only in the final loss and the exact solution"
            )
        return warnings


@dataclass(frozen=True)
class RowNames:
    """How messages name a dataset's rows (the file that holds each, its row there) and its
    columns (the features' labels, then the target's)."""

    files: list[Path]
    file_rows: tuple[int, ...] | None  # rows of each file, when several
    # the features' (a categorical column's once, for CodedFeatures), the carried columns',
    # then the target's
    labels: list[str]
    carried: Carried = NOTHING_CARRIED
    # --missing drop: the rows dropped (0-based over the files, sorted); the global rows of
    # the dataset are the others, in order
    dropped: np.ndarray | None = None

    def where(self, row: int) -> str:
        """How a message names the global row: its file's line or row (row_name)."""
        return row_name(*self.locate(row))

    def locate(self, row: int) -> tuple[Path, int]:
        """global row -> (the file that holds it, its row there)."""
        if self.dropped is not None:
            row = file_row(row, self.dropped)
        if not self.file_rows:
            return self.files[0], row
        starts = np.cumsum([0, *self.file_rows])
        i = int(np.searchsorted(starts, row, "right")) - 1
        return self.files[i], row - int(starts[i])

    def check_finite(
        self,
        X: np.ndarray,
        y: np.ndarray,
        row_of: Callable[[int], int],
        first: int = 0,
        C: np.ndarray | None = None,
    ) -> None:
        """X, y and the carried columns C are rows first, first + 1, ... of a set whose global
        row ids row_of gives: all finite, and C by its columns' rules (Carried.problem)."""
        C = np.zeros((len(y), 0)) if C is None else C
        if not all(np.isfinite(a).all() for a in (X, y, C)):  # twice as fast as by rows
            bad = ~(np.isfinite(X).all(axis=1) & np.isfinite(C).all(axis=1) & np.isfinite(y))
            local = int(np.argmax(bad))
            values = np.concatenate([X[local], C[local], [y[local]]])
            column = self.labels[int(np.argmax(~np.isfinite(values)))]
            raise UsageError(
                f"{self.where(row_of(first + local))}: NaN or inf in {column}; clean or drop "
                "such rows"
            )
        problem = self.carried.problem(C)
        if problem is not None:
            local, j, what = problem
            raise UsageError(
                f"{self.where(row_of(first + local))}: {C[local, j]:g} in "
                f"{self.labels[X.shape[1] + j]} ({self.carried.roles[j]}); {what}"
            )

    def check_shard(self, shard: Shard, row_of: Callable[[int], int]) -> None:
        """Every row of the shard, each once (row_of: a local row's global id); coded features
        as they are held, labels then naming their columns (a level code is always finite)."""
        at = 0
        for X, y, C in shard.raw_blocks(coded=True):
            self.check_finite(X, y, row_of, at, C)
            at += len(y)


def with_validation(
    shard: Shard,
    holdout: Holdout,
    ids: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    names: RowNames,
    C: np.ndarray | None = None,
) -> Shard:
    """The shard with its validation rows X, y and carried columns C (global row ids ids),
    checked as the training rows are."""
    names.check_finite(X, y, lambda i: int(ids[i]), 0, C)
    rows = shard.carried_columns.rows(X, y, C)
    return replace(shard, validation=rows, num_validation=len(holdout.validation))


def naming_rows(shard: Shard, names: RowNames, holdout: Holdout) -> Shard:
    """The shard whose messages name its training rows as the data's (RowNames.where)."""
    of = holdout.file_row(shard.layout)
    return replace(shard, where=lambda local: names.where(of(local)))
