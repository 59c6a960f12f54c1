"""The statistics of an exact fit, as statsmodels reports them: least squares' (OLS) and
maximum likelihood's (GLM), and the coefficient table they share."""

from __future__ import annotations


def describe(optimum, feature_names: tuple[str, ...] | None = None):
    """The statistics of an exact optimum, as its solver's method defines them: each result
    names its statistics' module (STATISTICS)."""
    import importlib

    module = importlib.import_module(f"hvd_linreg.statistics.{optimum.STATISTICS}")
    return module.describe(optimum, feature_names)
