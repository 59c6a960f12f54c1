"""Held-out validation rows (--validation_fraction): chosen before the layout, which numbers the
training rows alone, so the training run is the one a file of just those rows would give."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg.config import Config
from hvd_linreg.data.layout import Layout
from hvd_linreg.data.table import Table, rows_of
from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.buffers import aligned_empty

if TYPE_CHECKING:
    from hvd_linreg.runtime.ranks import Job

_VALIDATION_KEY = 0x76616C6964617465  # "validate"


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function: a bijective 64-bit hash, easy to recompute anywhere."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def is_validation(seed: int, ids: np.ndarray, fraction: float) -> np.ndarray:
    """Whether each global row id is held out: u = (h >> 11) / 2^53 < fraction, where
    h = splitmix64(id XOR splitmix64(seed XOR _VALIDATION_KEY)) (docs/data.md, Validation)."""
    key = _splitmix64(np.array([seed ^ _VALIDATION_KEY], dtype=np.uint64))[0]
    with np.errstate(over="ignore"):
        h = _splitmix64(ids.astype(np.uint64) ^ key)
    return (h >> np.uint64(11)).astype(np.float64) < fraction * 2.0**53


@dataclass(frozen=True)
class Holdout:
    """Which of the N rows --validation_fraction holds out, whatever the number of ranks. The
    training rows, in order, are renumbered 0 .. num_train - 1 for the layout; the validation
    rows are cut into one consecutive piece per rank."""

    num_rows: int
    validation: np.ndarray  # global ids of the held-out rows, increasing (empty: no split)
    train: np.ndarray | None  # global ids of the training rows, increasing; None: every row

    @classmethod
    def of(cls, cfg: Config, num_rows: int) -> Holdout:
        """The split --validation_fraction and --seed make of num_rows rows."""
        fraction = cfg.validation_fraction
        if not fraction:
            return cls(num_rows, np.zeros(0, np.int64), None)
        held = is_validation(cfg.seed, np.arange(num_rows, dtype=np.int64), fraction)
        if not held.any():
            raise UsageError(
                f"--validation_fraction {fraction} holds out none of the {num_rows} rows: "
                "use a larger fraction"
            )
        return cls(num_rows, np.flatnonzero(held), np.flatnonzero(~held))

    @property
    def held_out(self) -> bool:
        return self.train is not None

    @property
    def num_train(self) -> int:
        return self.num_rows - len(self.validation)

    def global_ids(self, train_ids: np.ndarray) -> np.ndarray:
        """The global row ids of training rows by their training number."""
        return train_ids if self.train is None else self.train[train_ids]

    def file_row(self, layout: Layout) -> Callable[[int], int]:
        """The global row id of this rank's training row number local (for messages)."""
        return lambda local: int(self.global_ids(layout.global_row(local)))

    def _piece_start(self, rank: int, size: int) -> int:
        return rank * len(self.validation) // size

    def piece(self, rank: int, size: int) -> np.ndarray:
        """The global ids of the validation rows this rank holds."""
        return self.validation[self._piece_start(rank, size) : self._piece_start(rank + 1, size)]

    def owners(self, ids: np.ndarray, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
        """For global row ids: the rank that holds each, and whether it is a validation row."""
        if self.train is None:
            return layout.owners(ids), np.zeros(len(ids), bool)
        held = np.isin(ids, self.validation)
        starts = [self._piece_start(r, layout.size) for r in range(layout.size)]
        position = np.searchsorted(self.validation, ids)
        piece_owner = np.searchsorted(starts, position, side="right") - 1
        train_owner = layout.owners(np.searchsorted(self.train, ids))
        return np.where(held, piece_owner, train_owner), held

    def training_table(self, table: Table) -> Table:
        """The table's training rows, numbered 0 .. num_train - 1."""
        if self.train is None:
            return table
        train = self.train
        return replace(table, read=lambda a, b: rows_of(table, train[a:b]), num_rows=len(train))


def to_owners(
    rows: np.ndarray, first: int, holdout: Holdout, layout: Layout, job: Job | None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows first, first + 1, ... of the dataset (in a rank's hands: a CSV's lines it parsed,
    the rows given to fit) sent to the ranks that hold them: this rank's
    training rows in the order of held_positions, and its validation rows (None: no split)."""
    if not holdout.held_out and (layout.size == 1 or layout.pieces is not None):
        return _held(rows, layout), None  # every row stays with the rank that has it, in order
    owners, held = holdout.owners(np.arange(first, first + len(rows)), layout)
    if holdout.held_out:  # a last column tells the receiver which rows are validation rows
        rows = np.c_[rows, held]
    table = rows
    if layout.size > 1:
        order = np.argsort(owners, kind="stable")  # by rank, and in file order within each
        sent = aligned_empty(rows.shape, rows.dtype)  # sent from where it is (ranks.as_tensor)
        np.take(rows, order, axis=0, out=sent)
        table = job.alltoall(sent, np.bincount(owners, minlength=layout.size))
    validation = None
    if holdout.held_out:
        held = table[:, -1] == 1
        table, validation = table[~held, :-1], table[held, :-1]
    return _held(table, layout), validation


def _held(table: np.ndarray, layout: Layout) -> np.ndarray:
    """A rank's rows as received (in row order: runs, then tail) as a shard in memory holds
    them: the table itself where it holds no copy of its first rows (no batches)."""
    if layout.num_wrap == 0 and len(table) == layout.num_local:
        return table
    return table[layout.held_positions()]
