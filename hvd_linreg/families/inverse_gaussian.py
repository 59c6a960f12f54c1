"""Inverse Gaussian regression: a positive, right-skewed amount (times to an event, claim
sizes) with Var(y) = φ μ³, φ estimated by Pearson's χ² / dof, as statsmodels' InverseGaussian.

Its canonical link is the inverse square, η = 1/μ² (statsmodels' default; or inverse, log,
identity). The loss is the mean half unit deviance, (y - μ)² / (2 y μ²). IRLS fits it."""

from __future__ import annotations

import numpy as np

from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family


class InverseGaussian(Family):
    NAME = "inverse_gaussian"
    LINKS = ("inverse_squared", "inverse", "log", "identity")
    TARGET = Interval(0.0)
    POSITIVE_MEAN = True
    FIXED_SCALE = False

    def variance(self, mu):
        return mu * mu * mu

    def variance_derivative(self, mu):
        return 3.0 * mu * mu

    def unit_deviance(self, y, mu):
        return (y - mu) ** 2 / (y * mu * mu)

    def log_likelihood(self, y, eta, scale, weight):
        """statsmodels' InverseGaussian.loglike_obs: row i's dispersion scale / weight[i]."""
        mu = self.link.inverse(eta)
        terms = weight * (y - mu) ** 2 / (scale * y * mu * mu)
        terms += np.log(scale * y**3 / weight) + np.log(2 * np.pi)
        return float(-0.5 * terms.sum())
