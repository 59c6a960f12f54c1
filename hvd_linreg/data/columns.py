"""Choosing a file's columns by name (--target, --features, --weights, --offset, --exposure),
for the formats with named columns (CSV, Parquet)."""

from __future__ import annotations

from pathlib import Path

from hvd_linreg.data.rows import NOTHING_CARRIED, Carried
from hvd_linreg.errors import UsageError


def choose_columns(
    names: list[str],
    target: str | None,
    features: tuple[str, ...] | None,
    p: Path,
    carried: Carried = NOTHING_CARRIED,
) -> tuple[list[int], int]:
    """The columns to read, and the target column (--target, else the last) of a file with
    these column names: the features (--features, in its order; else every column but the
    target and the carried ones), then the carried columns (--weights, --offset, --exposure)."""
    wanted = [("--target", [target] if target else []), ("--features", features or [])]
    wanted += [(flag, [name]) for flag, name in zip(carried.roles, carried.names)]
    for flag, chosen in wanted:
        for name in chosen:
            if name not in names:
                raise UsageError(
                    f"{flag} {name!r} is not a column of {p}; columns: {column_list(names)}"
                )
    if len(names) < 2:
        raise UsageError(f"{p} has one column; it needs at least one feature and a target")
    t = names.index(target) if target else len(names) - 1
    for flag, name in zip(carried.roles, carried.names):
        if name == names[t]:
            raise UsageError(f"{flag} names {name!r}, the target column of {p}")
        if features is not None and name in features:
            raise UsageError(f"{flag} names {name!r}, which --features names too")
    extra = [names.index(name) for name in carried.names]
    if features is None:
        chosen = [j for j in range(len(names)) if j != t and j not in extra]
        if not chosen:
            raise UsageError(f"{p} has no column left for a feature; columns: {column_list(names)}")
        return chosen + extra, t
    if names[t] in features:
        raise UsageError(
            f"--features names {names[t]!r}, the target column of {p}; name another target "
            "with --target"
        )
    return [names.index(name) for name in features] + extra, t


def check_same_columns(first: Path, names: list[str], p: Path, theirs: list[str]) -> None:
    """The files of one dataset have the same column names, in the same order."""
    same = f"the files of one dataset need the same columns ({first}: {column_list(names)})"
    for name in theirs:
        if name not in names:
            raise UsageError(f"{p} has a column {name!r} that {first} has not; {same}")
    for name in names:
        if name not in theirs:
            raise UsageError(f"{p} has no column {name!r}; {same}")
    if theirs != names:
        raise UsageError(f"{p} has its columns in another order; {same}")


def column_list(names: list[str]) -> str:
    """Column names for a message: the first 20 of them."""
    return ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")


def column_labels(names) -> list[str]:
    """How messages name columns that have names."""
    return [f"column {name!r}" for name in names]
