"""A DataFrame's columns of words, pandas categories and booleans, passed to fit() as they are,
coded as the readers code a file's categorical columns (categorical.py): treatment dummies
named `column[T.level]` in the column's place.

- A column of words (object or string dtype) or of booleans ("False", "True", as a file
  writes them): its levels are the union of every rank's values, sorted as patsy sorts them,
  so a level that only one rank's rows hold is still a level.
- A pandas category column keeps its own categories in their own order, and its first is the
  reference, as pandas and patsy have it. Every rank must give the same categories.
- A column that mixes numbers and words is refused, as the readers refuse one
  (mixed_text_column); so is a missing cell, and a column with more levels than half its rows
  or than max_levels, as for a file.

The levels are agreed in one allgather before any row moves, so every rank builds the same
dummies; an exported model stores them, and predict codes new rows with them."""

from __future__ import annotations

from typing import Any

import numpy as np

from hvd_linreg.data.categorical import (
    UnseenAsReference,
    check_memory,
    dummy_names,
    mixed_column,
    not_a_category,
    reads_as_number,
    sorted_levels,
    too_many_levels,
)
from hvd_linreg.errors import UsageError

# fit()'s way to a column of words of more levels than max_levels (a pandas category takes any)
AS_CATEGORY = "give it pandas' category dtype (X[c].astype('category')), which takes any number"


def _text_dtype(cells) -> bool:
    """Whether a column holds objects or text: object, or pandas' string dtypes (pandas 3 reads
    text as its "str" dtype)."""
    dtype = cells.dtype
    if getattr(dtype, "name", "") == "category":  # its categories are its levels
        return False
    return getattr(dtype, "kind", "") == "O" or getattr(dtype, "name", "") in ("string", "str")


def kind(cells) -> str | None:
    """ "category", "words" (words or booleans) or None (numbers) for a DataFrame's column."""
    dtype = cells.dtype
    if getattr(dtype, "name", "") == "category":
        return "category"
    if getattr(dtype, "kind", "") == "b" or getattr(dtype, "name", "") == "boolean":
        return "words"
    if _text_dtype(cells):
        texts = (c for c in cells if isinstance(c, str))
        return "words" if any(not reads_as_number(t) for t in texts) else None
    return None


def local_levels(frame) -> dict[str, tuple[str, list]]:
    """This rank's categorical columns: name -> (kind, its levels here: a category column's
    categories, else the distinct values present, as text). UsageError for a missing cell."""
    out = {}
    for column in frame.columns:
        cells = frame[column]
        what = kind(cells)
        if what is None:
            continue
        missing = np.flatnonzero(cells.isna().to_numpy())
        if len(missing):
            raise UsageError(
                f"row {missing[0]}: no value in column {str(column)!r}; "
                "drop such rows (missing='drop'), or give the missing cells a level of their own"
            )
        if what == "category":
            levels = [plain(v) for v in cells.cat.categories]
        else:
            levels = sorted({text_of(v) for v in cells.unique()})
        out[str(column)] = (what, levels)
    return out


def agree(job, frame, max_levels: int, check=None, guards: bool = True) -> dict[str, list]:
    """Each categorical column's levels, the same on every rank: one allgather of each rank's
    levels and rows. A problem of a rank's own rows (a missing cell, or what check(frame)
    raises) stops every rank before the collective. guards False: any number of levels (a
    target's, which its family checks)."""
    error, local = None, {}
    try:
        if check is not None:
            check(frame)
        local = local_levels(frame)
    except UsageError as e:
        error = e
    job.agree(error)
    mine = (len(frame), local)
    every = job.allgather(mine, name="fit_levels") if job.size > 1 else [mine]
    rows = sum(count for count, _ in every)
    levels = {}
    for name in dict.fromkeys(n for _, theirs in every for n in theirs):  # in column order
        parts = [theirs.get(name) for count, theirs in every if count]  # a rank without rows:
        # its empty column has no dtype to agree on
        what = next(part[0] for part in parts if part is not None)
        if any(part is None or part[0] != what for part in parts):
            raise UsageError(
                f"column {name!r} is {_a(what)} on some ranks but not on every rank: give "
                "every rank's column the same dtype"
            )
        if what == "category":
            first = parts[0][1]
            for rank, part in enumerate(parts):
                if part[1] != first:
                    raise UsageError(
                        f"column {name!r} has the categories {first[:5]} on rank 0 but "
                        f"{part[1][:5]} on rank {rank}: give every rank the same "
                        "CategoricalDtype (its order sets the reference level)"
                    )
            chosen = first
        else:
            chosen = sorted_levels(set().union(*(part[1] for part in parts)))
        if guards and len(chosen) > rows / 2:
            raise not_a_category(name, len(chosen), rows)
        if guards and len(chosen) > max_levels and what != "category":  # the user's choice
            raise too_many_levels(name, len(chosen), max_levels, instead=AS_CATEGORY)
        levels[name] = chosen
    check_memory({name: len(v) for name, v in levels.items()})
    return levels


def coded(frame, levels: dict[str, list]):
    """frame with each column of levels replaced by its codes, each cell's index among the
    levels (float64), as a file's categorical columns are held; UsageError naming a cell whose
    value is not one of its column's levels."""
    import pandas as pd

    parts = {}
    for column in frame.columns:
        name = str(column)
        parts[name] = frame[column] if name not in levels else _codes(frame[column], levels[name])
    return pd.DataFrame(parts, index=frame.index)


def dummies(frame, levels: dict[str, list]):
    """frame with each column of levels replaced by its treatment dummies (float64) in its
    place; UsageError naming a cell whose value is not one of its column's levels."""
    import pandas as pd

    parts = {}
    for column in frame.columns:
        name = str(column)
        if name not in levels:
            parts[name] = frame[column]
            continue
        codes = _codes(frame[column], levels[name])
        for i, dummy in enumerate(dummy_names(name, levels[name]), start=1):
            parts[dummy] = (codes == i).astype(np.float64)
    return pd.DataFrame(parts, index=frame.index)


def _codes(cells, levels: list) -> np.ndarray:
    """A column's cells as their indices among its levels (float64)."""
    name = str(cells.name)
    numbers = kind(cells) is None and not all(isinstance(v, str) for v in levels)
    texts = cells.map(plain if kind(cells) == "category" or numbers else text_of)
    at = {level: i for i, level in enumerate(levels)}
    codes = texts.map(at).to_numpy(dtype=np.float64, na_value=-1.0)
    if isinstance(levels, UnseenAsReference):  # a value none of them: the reference's
        return np.maximum(codes, 0.0)
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        shown = ", ".join(map(str, levels[:10]))
        raise UsageError(
            f"row {bad[0]}: {texts.iloc[bad[0]]!r} in column {name!r} is "
            f"not one of the model's levels ({shown}{', ...' * (len(levels) > 10)})"
        )
    return codes


def new_rows(frame, columns: tuple[str, ...], levels: dict[str, list]):
    """New rows for a model fitted with levels: a DataFrame with the fit's columns (any more
    are passed over), coded as the fit's rows were."""
    return dummies(columns_of(frame, columns, levels), levels)


def columns_of(frame, columns: tuple[str, ...], levels: dict[str, list]):
    """New rows' columns that a model fitted with levels reads, in its order (any more are
    passed over); UsageError where X is not a DataFrame or lacks one."""
    if not hasattr(frame, "columns"):
        raise UsageError(
            f"the model codes the column {', '.join(levels)} as levels: pass a DataFrame with "
            f"its columns {', '.join(columns)}"
        )
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise UsageError(
            f"X has no column {', '.join(missing)}; the model's are {', '.join(columns)}"
        )
    return frame[list(columns)]


def mixed_text_column(frame) -> UsageError | None:
    """The error of a DataFrame's first column of objects that holds numbers (or numbers
    written as text) and words, as the file readers refuse one: a typo is not a category.
    None where there is no such column."""
    for column in frame.columns:
        cells = frame[column]
        if not _text_dtype(cells):
            continue
        texts = [str(c).strip() if isinstance(c, str) else c for c in cells]
        numbers = (
            i
            for i, t in enumerate(texts)
            if isinstance(t, str)
            and reads_as_number(t)
            or isinstance(t, (int, float))
            and not isinstance(t, bool)
            and t == t
        )
        words = (i for i, t in enumerate(texts) if isinstance(t, str) and not reads_as_number(t))
        number, word = next(numbers, None), next(words, None)
        if number is not None and word is not None:
            return mixed_column(
                f"row {word}",
                texts[word],
                str(column),
                str(texts[number]),
                "pass a column of levels as its dummies (pandas.get_dummies(drop_first=True))",
            )
    return None


def refuse_mixed(frame) -> None:
    """A column that mixes numbers and words: a typo is not a category, as the readers have it."""
    mixed = mixed_text_column(frame)
    if mixed is not None:
        raise mixed


def cluster_numbers(job, groups):
    """groups as numbers: words (a firm's name) as their index among every rank's, so that a
    cluster whose rows sit on several ranks is one cluster."""
    values = np.asarray(groups)
    if values.dtype.kind in "biuf":
        return values
    texts = values.astype(str)
    mine = sorted(set(texts.tolist()))
    every = job.allgather(mine, name="fit_clusters") if job.size > 1 else [mine]
    names = sorted(set().union(*every))
    return np.searchsorted(np.array(names), texts).astype(np.float64)


def number_of(value: Any) -> int | float:
    """A level that is a number, as JSON keeps it: an integer where it is whole."""
    value = plain(value)
    return int(value) if float(value).is_integer() else float(value)


def text_of(value: Any) -> str:
    """A word column's cell as its level: text as it is, a boolean as a file writes it."""
    return str(plain(value))


def plain(value: Any):
    """A level or a class as JSON keeps it: a Python number or string."""
    return value.item() if hasattr(value, "item") else value


def _a(what: str) -> str:
    return "a category column" if what == "category" else "a column of words"
