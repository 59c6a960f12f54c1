"""A fit's given starting point (warm start: fit()'s start=, the estimators' warm_start), as the
solvers take it: finite numbers of the coefficients' shape (coefficients.py), (F + 1) x 1 or
its column [w..., b] for one linear predictor, (F + 1) x (K - 1) for a model of K classes."""

from __future__ import annotations

import numpy as np

from hvd_linreg.errors import UsageError

# The exact solvers that iterate, and so begin somewhere: least squares is one factorisation
ITERATIVE = ("irls", "multinomial")


def iterates(family) -> bool:
    """Whether the family's exact solver iterates: a start is where it begins."""
    return family.SOLVER in ITERATIVE


def given_start(start, shape: tuple[int, ...], what: str) -> np.ndarray:
    """start as float64 of this shape (what: how the shape is said, "[w..., b], 4 numbers for
    3 features"); UsageError for anything else."""
    try:
        theta = np.array(start, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"start= must be numbers, {what}") from None
    given = theta.shape
    if theta.ndim == 1 and shape[1:] == (1,):  # [w..., b]: a matrix's one column
        theta = theta[:, None]
    if theta.shape != shape:
        raise UsageError(f"start= must be {what}, got shape {given}")
    if not np.isfinite(theta).all():
        raise UsageError("start= must be finite numbers")
    return theta
