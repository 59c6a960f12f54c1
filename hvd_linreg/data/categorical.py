"""Categorical columns: a column of words (a region, a firm, a yes/no answer), or of numbers
named by --categorical, enters the model as treatment-coded dummies, as R and patsy code it.

A column's levels are the values it holds over the whole dataset: the union of every rank's
levels, agreed in one collective, then sorted as patsy sorts them (numbers by value, words as
Python sorts strings). So the dummies are the same, in the same order, at any rank count. The
first level is the reference; each other level is a 0/1 column named as patsy names it,
`firm[T.General Motors]`. An exported model stores its levels, and predict and evaluate encode
new rows with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

import numpy as np

from hvd_linreg.data.columns import column_list
from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import CategoricalMatrix, DenseMatrix, SplitMatrix
from hvd_linreg.runtime.buffers import aligned_empty
from hvd_linreg.runtime.resources import bytes_text, memory_per_rank

Level = str | float
# Levels: a categorical column's index among the data's columns -> its levels, sorted
Levels = dict[int, list[Level]]


@dataclass(frozen=True)
class Words:
    """A column's cells read as text, as a dictionary code stores them: each row's index into
    the distinct texts (stripped; None where the cell is missing). A column of millions of rows
    holds few distinct words, so its levels and codes cost a pass over the distinct texts and
    one take, not a look-up per row."""

    index: np.ndarray  # an integer a row
    texts: list[str | None]

    @classmethod
    def of(cls, cells: Sequence[str], texts: dict[str, str | None]) -> Words:
        """The cells as Words, texts mapping each distinct cell to its text."""
        at = {cell: i for i, cell in enumerate(texts)}
        index = np.fromiter(map(at.__getitem__, cells), np.intp, len(cells))
        return cls(index, list(texts.values()))

    @classmethod
    def of_arrow(cls, cells) -> Words:
        """A pyarrow column's cells as Words of its distinct values as they are (not
        stripped), the last text None: where a cell is null."""
        import pyarrow.compute as pc

        distinct = pc.unique(cells)
        index = pc.index_in(cells, value_set=distinct).fill_null(len(distinct))
        return cls(index.to_numpy().astype(np.intp), [*distinct.to_pylist(), None])

    @classmethod
    def concat(cls, parts: Sequence[Words]) -> Words:
        """The parts' rows, one part after another, over one list of texts."""
        if len(parts) == 1:
            return parts[0]
        texts: list[str | None] = []
        index = []
        for part in parts:
            index.append(np.arange(len(texts), len(texts) + len(part.texts))[part.index])
            texts += part.texts
        return cls(np.concatenate(index) if index else np.zeros(0, np.intp), texts)

    def rows(self, keep: np.ndarray) -> Words:
        """The rows `keep` (a mask or indices)."""
        return Words(self.index[keep], self.texts)

    def present(self) -> set[str]:
        """The texts some row holds: the column's levels among these rows."""
        held = np.zeros(len(self.texts), bool)
        held[self.index] = True  # no count: bincount would copy the index as intp first
        return {t for t, h in zip(self.texts, held) if h and t is not None}

    def first_word(self) -> int | None:
        """The first row whose text is a word: neither missing (None) nor a number."""
        word = np.array([t is not None and not reads_as_number(t) for t in self.texts] or [False])
        rows = np.flatnonzero(word[self.index])
        return int(rows[0]) if len(rows) else None

    def codes(self, levels: Sequence[Level], out: np.ndarray | None = None) -> np.ndarray:
        """Each row's index among the levels (float64); -1 where it is not one of them.
        Written into out (a table's column) where given."""
        lookup = codes(np.array(self.texts, object), levels)
        if out is None:
            return lookup[self.index]
        step = 1 << 20  # in parts: a part's codes stay in the cache, no column-sized copy
        for start in range(0, len(self.index), step):
            out[start : start + step] = lookup[self.index[start : start + step]]
        return out


def sorted_levels(values: Iterable[Level]) -> list[Level]:
    """Levels in patsy's order: numbers by value, words as Python sorts strings."""
    return sorted(set(values))


def level_name(level: Level) -> str:
    """A level as a coefficient's name shows it: a word as it is, a whole number without '.0'."""
    if isinstance(level, (str, bool)):
        return str(level)
    return str(int(level)) if float(level).is_integer() else repr(float(level))


def dummy_names(column: str, levels: Sequence[Level]) -> list[str]:
    """The names of a column's dummies: one per level but the first (the reference)."""
    return [f"{column}[T.{level_name(level)}]" for level in levels[1:]]


def expanded_names(names: Sequence[str], columns: Sequence[int], levels: Levels) -> list[str]:
    """The feature names of the data's columns `columns`, each categorical one as its dummies."""
    out: list[str] = []
    for j in columns:
        out += dummy_names(names[j], levels[j]) if j in levels else [names[j]]
    return out


def named_columns(
    named: Sequence[str], names: Sequence[str], features: Sequence[int], p
) -> frozenset[int]:
    """The columns --categorical names (numbers used as codes), each one of the features."""
    for name in named:
        if name not in names:
            raise UsageError(
                f"--categorical {name!r} is not a column of {p}; columns: {column_list(names)}"
            )
        if names.index(name) not in features:
            raise UsageError(
                f"--categorical {name!r} is not one of the run's features; only features are "
                "coded as levels"
            )
    return frozenset(names.index(name) for name in named)


def width(column: int, levels: Levels) -> int:
    """The features a data column gives: a categorical one's dummies, else itself."""
    return len(levels[column]) - 1 if column in levels else 1


def sources(names: Sequence[str], columns: Sequence[int], levels: Levels) -> list[str]:
    """The data column each expanded feature comes from: a categorical one's for each dummy."""
    return [names[j] for j in columns for _ in range(width(j, levels))]


def reads_as_number(text: str) -> bool:
    """Whether a cell's text (stripped, not missing) reads as a number, as the parsers read one:
    Python's float()."""
    try:
        float(text)
    except ValueError:
        return False
    return True


class Mixed(NamedTuple):
    """What one rank's cells of a column inferred from its words hold: a text that reads as a
    number (None where none does), and whether a text does not."""

    number: str | None
    word: bool

    @classmethod
    def of(cls, texts: Iterable[str]) -> Mixed:
        numbers, word = [], False
        for text in texts:
            if reads_as_number(text):
                numbers.append(text)
            else:
                word = True
        return cls(min(numbers, default=None), word)  # the least: the same at every run


# refuse(column, a text of it that reads as a number, whether another does not): the error of
# a column inferred from its words that holds numbers, naming its first word where there is
# one. Every rank calls it together, so it may be a collective.
Refuse = Callable[[int, str, bool], UsageError]


def agree_levels(
    local: dict[int, set[Level]],
    names: Sequence[str],
    max_levels: int,
    job,
    rows: int,
    inferred: frozenset[int] = frozenset(),
    refuse: Refuse | None = None,
    labels: frozenset[int] = frozenset(),
) -> Levels:
    """Every rank's levels of each categorical column, joined in one collective and sorted.
    The run ends, on every rank, for a column `inferred` (categorical by its words, not by the
    user's choice) that holds a number: a typo is not a category (refuse names it); for a
    column with more levels than half of its `rows`: an ID or free text, not a category; and
    for an inferred column with more than max_levels. A column the user named categorical takes
    any number of levels (its block is never dense: matrix/categorical.py); `labels` (a
    cluster column's, a target's) any number, and no count is too many for them."""
    mine = {
        j: (
            sorted(v) if j not in inferred or j in labels or len(v) <= max_levels else len(v),
            Mixed.of(v) if j in inferred else None,
        )
        for j, v in local.items()
    }
    every = job.allgather(mine) if job is not None and job.size > 1 else [mine]
    for j in sorted(inferred & local.keys()):
        kinds = [theirs[j][1] for theirs in every]
        number = min((k.number for k in kinds if k.number is not None), default=None)
        if number is not None and refuse is not None:
            raise refuse(j, number, any(k.word for k in kinds))
    levels: Levels = {}
    for j in sorted(local):
        parts = [theirs[j][0] for theirs in every]
        counts = [part for part in parts if isinstance(part, int)]
        union = set().union(*(part for part in parts if not isinstance(part, int)))
        count = max([len(union), *counts])
        at_least = bool(counts) and len(parts) > 1
        if count > rows / 2 and j not in labels:
            raise not_a_category(names[j], count, rows, at_least)
        if count > max_levels and j in inferred and j not in labels:
            raise too_many_levels(names[j], count, max_levels, at_least)
        levels[j] = sorted_levels(union)
    check_memory({names[j]: len(v) for j, v in levels.items() if j not in labels})
    return levels


# What each level costs a rank, about: its value in the agreed lists (and the sets they were
# joined from), and the solvers' arrays of a value per coefficient (its weighted count, its
# sums, its coefficient, gradient and step: a score of float64)
BYTES_PER_LEVEL = 400


def check_memory(counts: dict[str, int]) -> None:
    """UsageError before any fit where the levels of the categorical columns (name -> count)
    need more memory than this rank may use (resources.memory_per_rank): every rank holds them
    all, whichever rows it holds."""
    total = sum(counts.values())
    need, have = total * BYTES_PER_LEVEL, memory_per_rank()
    if need > have:
        largest = max(counts, key=counts.get)
        raise UsageError(
            f"the categorical columns have {total} levels in all ({largest!r} {counts[largest]}):"
            f" every rank holds them and a few sums of each, about {bytes_text(need)}, more than"
            f" the {bytes_text(have)} a rank may use here; code fewer levels, or run fewer ranks "
            "on each host"
        )


def not_a_category(name: str, count: int, rows: int, at_least: bool = False) -> UsageError:
    """The error of a categorical column whose levels are more than half of its rows."""
    return UsageError(
        f"column {name!r} has {'at least ' * at_least}{count} distinct values in {rows} rows: a "
        "column with more levels than half its rows is an ID or free text, not a category "
        "(whatever --max_levels says); leave it out of --features"
    )


# The way on from an inferred column of too many levels that is a category all the same
NAME_IT = "name it in --categorical (which takes any number of levels)"


def too_many_levels(
    name: str, count: int, max_levels: int, at_least: bool = False, instead: str = NAME_IT
):
    """The error of a column inferred categorical with more than --max_levels levels."""
    return UsageError(
        f"column {name!r} has {'at least ' * at_least}{count} levels, more than --max_levels "
        f"{max_levels}: is it an ID or free text? Leave it out of --features, or {instead}"
    )


# The way on from a column of numbers with a word in it, besides fixing the cell.
AS_LEVELS = "name the column in --categorical to read each of its values as a level"


def mixed_column(
    where: str, word: str, name: str, number: str, instead: str = AS_LEVELS
) -> UsageError:
    """The error of a column of numbers with a word in it; where: its file and line or row."""
    return UsageError(
        f"{where}: {word!r} in column {name!r} is not a number, but the column holds numbers "
        f"({number!r} among them); fix the cell, or {instead}"
    )


class UnseenAsReference(list):
    """A model's levels, where a value that is none of them is coded as the first, the
    reference: its dummies all 0 (predict --unseen_levels reference, glum's
    cat_missing_method="zero")."""


def codes(values: np.ndarray, levels: Sequence[Level]) -> np.ndarray:
    """Each value's index among the levels, in float64 to travel with the numeric columns; -1
    where it is not one of them (0, the reference's, for UnseenAsReference levels)."""
    unseen = 0.0 if isinstance(levels, UnseenAsReference) else -1.0
    if len(levels) and not isinstance(levels[0], (str, bool)):
        if values.dtype == object:  # text where numbers are the levels: none of them
            return np.full(len(values), unseen)
        at = np.asarray(levels, np.float64)
        found = np.minimum(np.searchsorted(at, values), len(levels) - 1)
        return np.where(at[found] == values, found, unseen).astype(np.float64)
    index = {level: i for i, level in enumerate(levels)}
    return np.fromiter(map(index.get, values, repeat(unseen)), np.float64, len(values))


# Rows expanded at a time: their block of the output (at most a few MB) stays in the cache
# while each column's pass writes into it.
EXPAND_ROWS = 4096


def expand(table: np.ndarray, columns: Sequence[int], levels: Levels, out: np.ndarray) -> None:
    """out[:] = the table's columns `columns`, each categorical one (its level codes) as its
    treatment dummies."""
    if not any(j in levels for j in columns):
        out[...] = table[:, list(columns)]
        return
    for start in range(0, len(out), EXPAND_ROWS):
        block, rows = out[start : start + EXPAND_ROWS], table[start : start + EXPAND_ROWS]
        block[...] = 0
        at = 0
        for j in columns:
            k = width(j, levels)
            if j in levels:  # a 1 where the code is the dummy's level: one write per row
                code = rows[:, j]
                hit = np.flatnonzero((code >= 1) & (code <= k))
                block[hit, at + code[hit].astype(np.intp) - 1] = 1
            else:
                block[:, at] = rows[:, j]
            at += k


@dataclass(frozen=True)
class CodedFeatures:
    """A rank's features as the data's columns, a categorical one held as its level codes (one
    number a row), its dummies written only as rows are read: a slice of it is those rows' dense
    features, as an array of them would give. The rank holds a number a row for a column of 30
    levels, not 29 (docs/data.md, memory per rank), and reading the data writes no dummies."""

    codes: np.ndarray  # (rows, columns) float64: a numeric column's values, or the level codes
    levels: Levels  # a categorical column's index among codes' columns -> its levels
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, features), the dummies counted."""
        return len(self.codes), sum(width(j, self.levels) for j in range(self.codes.shape[1]))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, key) -> np.ndarray:
        """X[a:b] (the rows' features) or X[a:b, j], with a slice of rows."""
        rows, features = key if isinstance(key, tuple) else (key, slice(None))
        if not isinstance(rows, slice):
            raise TypeError("coded features are read by a slice of rows")
        part = self.codes[rows]
        out = aligned_empty((len(part), self.shape[1]), self.dtype)
        expand(part, range(part.shape[1]), self.levels, out)
        return out if features == slice(None) else out[:, features]

    def design(self, rows: slice) -> SplitMatrix:
        """The rows' features as a design matrix (matrix/): the numeric columns one dense part,
        each categorical column a categorical part of its codes, at their dummies' places."""
        part = self.codes[rows]
        numeric, parts, columns, at = [], [], [], 0
        for j in range(part.shape[1]):
            k = width(j, self.levels)
            if j in self.levels:
                parts.append(CategoricalMatrix(part[:, j].astype(np.intp), k + 1))
                columns.append(np.arange(at, at + k))
            else:
                numeric.append((j, at))
            at += k
        if numeric:
            values = part[:, [j for j, _ in numeric]].astype(self.dtype)
            parts.insert(0, DenseMatrix(values))
            columns.insert(0, np.array([a for _, a in numeric]))
        return SplitMatrix(parts, columns)
