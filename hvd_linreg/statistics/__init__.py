"""The statistics of an exact fit, as statsmodels reports them: least squares' (OLS) and
maximum likelihood's (GLM), and the coefficient table they share."""

from __future__ import annotations


def describe(optimum, feature_names: tuple[str, ...] | None = None):
    """The statistics of an exact optimum, as its solver's method defines them."""
    from hvd_linreg.solvers.least_squares import Optimum
    from hvd_linreg.solvers.path import PathFit

    if isinstance(optimum, PathFit):
        from hvd_linreg.statistics import path

        return path.describe(optimum, feature_names)
    if isinstance(optimum, Optimum):
        from hvd_linreg.statistics import least_squares

        return least_squares.describe(optimum, feature_names)
    from hvd_linreg.statistics import likelihood

    return likelihood.describe(optimum, feature_names)
