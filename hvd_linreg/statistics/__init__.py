"""The statistics of an exact fit, as statsmodels reports them: least squares' (OLS) and
maximum likelihood's (GLM), a penalized path's, and the coefficient table they share."""

from __future__ import annotations


def describe(optimum, feature_names: tuple[str, ...] | None = None):
    """The statistics of an exact optimum, as its solver's method defines them: each result
    names its statistics' module (STATISTICS), imported when a fit has one to describe."""
    from hvd_linreg.statistics import least_squares, likelihood, path

    modules = {"least_squares": least_squares, "likelihood": likelihood, "path": path}
    return modules[optimum.STATISTICS].describe(optimum, feature_names)
