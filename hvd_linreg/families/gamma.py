"""Gamma regression: a positive amount (claim sizes, durations) with Var(y) = φ μ², the
dispersion φ estimated by Pearson's χ² / dof as statsmodels estimates it.

The family with its canonical inverse link (statsmodels' default; or log, identity); the loss
is the mean half Gamma deviance, (y - μ)/μ - log(y/μ), as scikit-learn's GammaRegressor
minimises. IRLS fits it.
"""

from __future__ import annotations

import numpy as np

from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import lgamma, namespace


class Gamma(Family):
    NAME = "gamma"
    LINKS = ("inverse", "log", "identity")
    TARGET = Interval(0.0)
    POSITIVE_MEAN = True
    FIXED_SCALE = False

    def variance(self, mu):
        return mu * mu

    def variance_derivative(self, mu):
        return 2.0 * mu

    def unit_deviance(self, y, mu):
        return 2.0 * ((y - mu) / mu - namespace(mu).log(y / mu))

    def log_likelihood(self, y, eta, scale, weight):
        """statsmodels' Gamma.loglike_obs: shape ν = w/φ, rate ν/μ."""
        nu, ratio = weight / scale, y / self.link.inverse(eta)
        terms = nu * np.log(nu * ratio) - nu * ratio - lgamma(nu) - np.log(y)
        return float(terms.sum())
