"""The target against the family's domain (families/domain.py): every rank checks its rows and
its held-out rows, all agree, and a refusal names the first row out and what the family needs.
A binary family's target of two values other than 0 and 1 is read as 0 and 1 here.

The family is handed in as data (its NAME, TARGET and BINARY): no data module imports one."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg.errors import UsageError

if TYPE_CHECKING:
    from hvd_linreg.runtime.ranks import Job


def checked(job: Job, shard, family):
    """The shard with its target as the family reads it; UsageError on every rank for a value
    outside the family's domain (with --weights, a binary target is a proportion of trials in
    [0, 1], as R's glm(weights = n))."""
    if shard.target_levels is not None:  # words, booleans or categories: two, for yes and no
        _two_levels(shard, family)
        return shard
    if family.BINARY and not shard.weighted:
        return _binary(job, shard, family.NAME)
    if not family.TARGET.everything:
        needs = " with --weights needs a proportion" if family.BINARY else " needs"
        needs = f"--model {family.NAME}{needs} {family.TARGET}"
        refuse_outside(job, shard, family.TARGET.contains, needs)
    return shard


def _two_levels(shard, family) -> None:
    """A target of levels (data/categorical.py: y each row's level's number) is a binary
    family's, of two: the second modelled against the first, the reference, as R's glm and
    scikit-learn take a two-level factor. Anything else is refused, on every rank alike (every
    rank holds the same levels)."""
    levels, name = shard.target_levels, shard.target_name or "y"
    shown = ", ".join(repr(v) for v in levels[:5]) + (", ..." if len(levels) > 5 else "")
    if not family.BINARY:
        raise UsageError(
            f"the target {name!r} holds words ({shown}): --model {family.NAME} needs numbers; "
            "a target of two words is --model logistic's, of more --model multinomial's"
        )
    if len(levels) != 2:
        raise UsageError(
            f"the target {name!r} has {len(levels)} values ({shown}): --model {family.NAME} "
            "needs two (the first, in sorted order, the reference); --model multinomial fits "
            "more classes"
        )
    if shard.weighted:
        raise UsageError(
            f"the target {name!r} holds words ({shown}): with --weights a binomial target is "
            "a proportion of trials, a number in [0, 1]"
        )


def refuse_outside(job: Job, shard, valid, needs: str) -> None:
    """Refuse, on every rank, a target with a value where valid(y) is False, naming the first
    such row of this rank's (or a held-out row) and what the family needs."""
    error = None
    try:
        at = 0
        for block in shard.blocks():
            y = block.y
            bad = ~valid(y)
            if bad.any():
                i = int(np.argmax(bad))
                where = shard.where(at + i) if shard.where else f"row {at + i}"
                raise UsageError(f"{where}: the target is {y[i]:g}; {needs}")
            at += len(y)
        if shard.validation is not None and not valid(shard.validation.y).all():
            y = shard.validation.y[~valid(shard.validation.y)][0]
            raise UsageError(f"{shard.source}: a held-out row's target is {y:g}; {needs}")
    except UsageError as e:
        error = e
    job.agree(error)


def _binary(job: Job, shard, name: str):
    """The shard with a 0/1 target: as it is, or with a target of two other values recoded,
    the smaller to 0 and the larger to 1 (rank 0 says so). Any other target is refused on
    every rank, naming the first row that holds a value beyond the two."""
    values = sorted(set().union(*job.allgather(_distinct(shard), name="target_values")))
    labels = (0.0, 1.0) if {0.0, 1.0} <= set(values) or set(values) <= {0.0, 1.0} else values[:2]
    needs = (
        f"--model {name} needs a target of 0 or 1, or of two values read as 0 and 1 (here "
        f"{labels[0]:g} and {labels[1]:g})"
    )
    refuse_outside(job, shard, lambda y: np.isin(y, labels), needs)
    if labels == (0.0, 1.0):
        return shard
    job.log(f"the target's values {labels[0]:g} and {labels[1]:g} are read as 0 and 1")
    return _recoded(shard, labels[1])


def _distinct(shard) -> list[float]:
    """This rank's distinct target values, up to 3 of them: more are refused anyway."""
    seen: set[float] = set()
    held = [shard.validation] if shard.validation is not None else []
    for rows in itertools.chain(shard.blocks(), held):  # read as used: it stops at 3
        seen.update(np.unique(rows.y).tolist())
        if len(seen) > 2:
            break
    return sorted(seen)[:3]


def _recoded(shard, high: float):
    """The shard whose target is 1 where it was high and 0 elsewhere: its rows in memory, its
    held-out rows, and the rows it reads from its file as training uses them."""

    def recode(y: np.ndarray) -> np.ndarray:
        return (y == high).astype(y.dtype)

    changes = {"y": recode(shard.y)}
    if shard.validation is not None:
        changes["validation"] = shard.validation._replace(y=recode(shard.validation.y))
    if shard.table is not None:
        read = shard.table.read

        def read_recoded(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            X, y = read(start, stop)
            return X, recode(y)

        changes["table"] = replace(shard.table, read=read_recoded)
    return replace(shard, **changes)
