"""The exact solvers, one per method, each handed a family: least squares by the distributed QR
(least_squares.py), and IRLS for every other family (irls.py), whose steps least squares
solves."""

from __future__ import annotations

from collections.abc import Sequence


def optimum(job, shard, family, l2: float, names: Sequence[str] | None = None):
    """The exact optimum of the family's objective over the whole dataset, the same on every
    rank, by the solver the family names."""
    if family.SOLVER == "least_squares":
        from hvd_linreg.solvers import least_squares

        return least_squares.optimum(job, shard, l2, names)
    from hvd_linreg.solvers import irls

    return irls.optimum(job, shard, family, l2)
