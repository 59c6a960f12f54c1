"""Cross-validation folds (--cv K, --fold_column COL): which fold each row is held out in, the
same rows at any number of ranks.

--cv K draws a row's fold from the hash that picks the validation rows (holdout.py), keyed
apart from it: fold = ⌊u K⌋ with u = (h >> 11) / 2^53, h = splitmix64(id XOR
splitmix64(seed XOR _FOLD_KEY)), id the row's number among the training rows. The folds are
then about, not exactly, N / K rows each. --fold_column takes the user's own: whole numbers,
any K >= 2 distinct values, fold i the i-th smallest (glmnet's foldid, H2O's fold_column).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.holdout import _splitmix64
from hvd_linreg.errors import UsageError

_FOLD_KEY = 0x666F6C6473  # "folds"


@dataclass(frozen=True)
class Folds:
    """How a run's rows fall into folds."""

    count: int  # K
    seed: int = 0
    column: str | None = None  # --fold_column; None: by the hash
    values: tuple[float, ...] = ()  # the fold column's distinct values, sorted

    def of(self, ids: np.ndarray, column: np.ndarray | None) -> np.ndarray:
        """The fold (0 .. K - 1) of each row, by its training-row id or its fold column."""
        if self.column is None:
            key = _splitmix64(np.array([self.seed ^ _FOLD_KEY], dtype=np.uint64))[0]
            with np.errstate(over="ignore"):
                h = _splitmix64(ids.astype(np.uint64) ^ key)
            u = (h >> np.uint64(11)).astype(np.float64) / 2.0**53
            return np.minimum((u * self.count).astype(np.int64), self.count - 1)
        return np.searchsorted(np.asarray(self.values), column).astype(np.int64)


def hashed(k: int, seed: int) -> Folds:
    """--cv K's folds."""
    return Folds(k, seed)


def from_column(name: str, values_by_rank: list[set]) -> Folds:
    """--fold_column's folds from every rank's distinct values in it: whole numbers, at
    least two."""
    values = sorted(set().union(*values_by_rank))
    odd = [v for v in values if not float(v).is_integer()]
    if odd:
        raise UsageError(
            f"--fold_column {name!r} holds {odd[0]:g}; a fold is a whole number (1 .. K, as "
            "glmnet's foldid)"
        )
    if len(values) < 2:
        held = f"one fold ({values[0]:g})" if values else "no fold"
        raise UsageError(
            f"--fold_column {name!r} holds {held}; cross-validation needs at least two folds"
        )
    return Folds(len(values), column=name, values=tuple(float(v) for v in values))


def agree(job, shard, name: str) -> Folds:
    """--fold_column's folds, from the distinct values every rank's rows hold in it (one
    allgather); a refusal is the same on every rank."""
    index = shard.carried_columns.fold_index
    mine: set = set()
    for _, _, C in shard.raw_blocks():
        mine.update(np.unique(C[:, index]).tolist())
    return from_column(name, job.allgather(mine, name="fold_values"))
