"""A fit's given starting point (warm start: fit()'s start=, the estimators' warm_start), as the
solvers take it: finite numbers of the coefficients' shape, [w..., b] for one linear predictor,
(F + 1) x (K - 1) for a model of K classes."""

from __future__ import annotations

import numpy as np

from hvd_linreg.errors import UsageError


def given_start(start, shape: tuple[int, ...], what: str) -> np.ndarray:
    """start as float64 of this shape (what: how the shape is said, "[w..., b], 4 numbers for
    3 features"); UsageError for anything else."""
    try:
        theta = np.array(start, dtype=np.float64)
    except (TypeError, ValueError):
        raise UsageError(f"start= must be numbers, {what}") from None
    if theta.shape != shape:
        raise UsageError(f"start= must be {what}, got shape {theta.shape}")
    if not np.isfinite(theta).all():
        raise UsageError("start= must be finite numbers")
    return theta
