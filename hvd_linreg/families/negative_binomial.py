"""Negative binomial regression (NB2) with a fixed dispersion α (--nb_alpha): counts more
spread than Poisson's, Var(y) = μ + α μ², as statsmodels' NegativeBinomial(alpha) family.

The log link (statsmodels' default; or identity, sqrt), which is not the family's canonical
one: IRLS is Fisher scoring. The scale is 1, and the loss is the mean half unit deviance."""

from __future__ import annotations

import numpy as np

from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import lgamma, namespace, xlogy


class NegativeBinomial(Family):
    NAME = "negative_binomial"
    LINKS = ("log", "identity", "sqrt")
    TARGET = Interval(0.0, low_inclusive=True)
    CANONICAL_LINK = None  # log(μ / (μ + 1/α)), which no one fits
    POSITIVE_MEAN = True
    DEFAULT_ALPHA = 1.0

    def __init__(self, link: str | None = None, alpha: float | None = None):
        super().__init__(link)
        self.alpha = self.DEFAULT_ALPHA if alpha is None else alpha

    def parameter(self) -> float:
        return self.alpha

    def variance(self, mu):
        return mu + self.alpha * mu * mu

    def variance_derivative(self, mu):
        return 1.0 + 2.0 * self.alpha * mu

    def unit_deviance(self, y, mu):
        k = 1.0 / self.alpha
        xp = namespace(mu)
        return 2.0 * (xp.xlogy(y, y / mu) - (y + k) * xp.log((y + k) / (mu + k)))

    def log_likelihood(self, y, eta, scale, weight):
        """statsmodels' NegativeBinomial.loglike_obs, row i weighted by weight[i] / scale."""
        a, mu = self.alpha, self.link.inverse(eta)
        terms = xlogy(y, a * mu) - (y + 1 / a) * np.log1p(a * mu)
        terms += lgamma(y + 1 / a) - lgamma(np.full_like(y, 1 / a)) - lgamma(y + 1.0)
        return float(weight @ terms / scale)
