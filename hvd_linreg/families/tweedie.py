"""Tweedie regression with 1 < p < 2 (--tweedie_power): the compound Poisson-Gamma, for
amounts that are often exactly 0 (insurance claims, rainfall). Var(y) = φ μ^p, φ estimated by
Pearson's χ² / dof.

The log link, as statsmodels' and scikit-learn's default; the loss is the mean half Tweedie
deviance, as scikit-learn's TweedieRegressor minimises. IRLS fits it. The density has no closed
form, so neither has the log-likelihood: the statistics report the deviance, and say so.
"""

from __future__ import annotations

import numpy as np

from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import namespace


class Tweedie(Family):
    NAME = "tweedie"
    LINKS = ("log", "identity")
    TARGET = Interval(0.0, low_inclusive=True)
    POSITIVE_MEAN = True
    FIXED_SCALE = False
    DEFAULT_POWER = 1.5

    def __init__(self, link: str | None = None, power: float | None = None):
        super().__init__(link)
        self.power = self.DEFAULT_POWER if power is None else power

    def parameter(self) -> float:
        return self.power

    def variance(self, mu):
        return np.power(mu, self.power)

    def variance_derivative(self, mu):
        return self.power * np.power(mu, self.power - 1.0)

    def unit_deviance(self, y, mu):
        p, xp = self.power, namespace(mu)
        return 2.0 * (
            xp.power(y, 2 - p) / ((1 - p) * (2 - p))
            - y * xp.power(mu, 1 - p) / (1 - p)
            + xp.power(mu, 2 - p) / (2 - p)
        )

    def log_likelihood(self, y, eta, scale, weight):
        return float("nan")  # no closed form (a series would be needed)
