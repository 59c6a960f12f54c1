"""Rows: a block of rows as the tool carries them from data/ to the trainer, the solvers, the
scores and predict. A column a run adds (a prior weight, an offset) is one field here.

Carried: the columns a run reads beside its features and target (--weights, --offset,
--exposure). Readers read them as trailing columns of the features; the layout's take() and
the CSV reader set them apart, and Carried.rows() makes them the Rows' fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from hvd_linreg.matrix import DesignMatrix


class Rows(NamedTuple):
    # (rows, features), float32 or float64; a wide or sparse design's a DesignMatrix (matrix/)
    X: np.ndarray | DesignMatrix
    y: np.ndarray  # (rows,), the dtype of X
    weight: np.ndarray | None = None  # each row's prior weight; None: 1
    offset: np.ndarray | None = None  # added to each row's linear predictor; None: 0

    def weights(self) -> np.ndarray:
        """Each row's prior weight in float64 (1 without --weights)."""
        if self.weight is None:
            return np.ones(len(self.y))
        return self.weight.astype(np.float64, copy=False)

    def times(self, B: np.ndarray) -> np.ndarray:
        """X B in float64, whatever kind of matrix X is (a dense array, or a design matrix's
        product)."""
        if isinstance(self.X, DesignMatrix):
            return self.X.matvec(B)
        return np.asarray(self.X, np.float64) @ B

    def counted(self) -> Rows:
        """The rows whose weight is above 0: a row of weight 0 counts for nothing, in the fit,
        its degrees of freedom and its row counts, as R's glm has it."""
        if self.weight is None or (self.weight > 0).all():
            return self
        keep = self.weight > 0
        offset = None if self.offset is None else self.offset[keep]
        return Rows(self.X[keep], self.y[keep], self.weight[keep], offset)

    def slice(self, start: int, stop: int) -> Rows:
        """Rows start .. stop - 1."""
        return Rows(*(None if a is None else a[start:stop] for a in self))


@dataclass(frozen=True)
class Carried:
    """The columns a run reads beside the features and the target, by their role: the name of
    each in the data (None: not read)."""

    weight: str | None = None  # --weights: prior weights, >= 0
    offset: str | None = None  # --offset: added to the linear predictor
    exposure: str | None = None  # --exposure: log(exposure) added to it, exposure > 0
    # --fold_column: each row's cross-validation fold, a whole number (data/folds.py); read
    # with the rows, not a field of Rows: only the penalized path's passes take it
    fold: str | None = None
    # --groups: each row's cluster for --cov_type cluster (solvers/sandwich.py), read likewise
    group: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The columns read, in this order: weight, offset, exposure, fold, group (those
        given)."""
        given = (self.weight, self.offset, self.exposure, self.fold, self.group)
        return tuple(name for name in given if name)

    @property
    def roles(self) -> tuple[str, ...]:
        """The flag of each column of names."""
        flags = ("--weights", "--offset", "--exposure", "--fold_column", "--groups")
        given = (self.weight, self.offset, self.exposure, self.fold, self.group)
        return tuple(flag for flag, name in zip(flags, given) if name)

    @property
    def fold_index(self) -> int:
        """The fold column's place among the carried columns."""
        return self.names.index(self.fold)

    @property
    def group_index(self) -> int:
        """The group column's place among the carried columns (the last)."""
        return self.names.index(self.group)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def offset_given(self) -> bool:
        """Whether the rows have an offset (--offset, --exposure)."""
        return bool(self.offset or self.exposure)

    def rows(self, X: np.ndarray, y: np.ndarray, C: np.ndarray | None) -> Rows:
        """The Rows of features X, target y and the carried columns C (rows, len(self))."""
        if not len(self):
            return Rows(X, y)
        at = iter(range(len(self)))
        weight = C[:, next(at)] if self.weight else None
        offset = C[:, next(at)].astype(np.float64) if self.offset else None
        if self.exposure:
            with np.errstate(divide="ignore", invalid="ignore"):
                log_exposure = np.log(C[:, next(at)].astype(np.float64))
            offset = log_exposure if offset is None else offset + log_exposure
        return Rows(X, y, weight, offset)

    def problem(self, C: np.ndarray) -> tuple[int, int, str] | None:
        """The first row of C that breaks its column's rule, as (row, column, what its rule
        is), or None: a weight is >= 0, an exposure > 0 (finite: checked with the rows)."""
        rules = {"--weights": (lambda c: c >= 0, "a weight must be >= 0")}
        rules["--exposure"] = (lambda c: c > 0, "an exposure must be > 0")
        rules["--fold_column"] = (lambda c: c == np.floor(c), "a fold is a whole number")
        for j, role in enumerate(self.roles):
            if role in rules:
                ok, what = rules[role]
                bad = ~ok(C[:, j])
                if bad.any():
                    return int(np.argmax(bad)), j, what
        return None


NOTHING_CARRIED = Carried()
