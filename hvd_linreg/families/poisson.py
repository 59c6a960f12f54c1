"""Poisson regression: a count (or any y >= 0) with E[y] = μ = exp(x·w + b), Var(y) = μ.

The family with its canonical log link (or identity, sqrt); the loss is the mean half Poisson
deviance, y log(y/μ) - (y - μ), as scikit-learn's PoissonRegressor minimises. IRLS fits it.
"""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.synthetic import TRUE_BIAS, true_weights, uniforms
from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import lgamma, linear_predictor, namespace, xlogy

# The synthetic job's log-mean: the seed's line x·w_true + b_true, scaled by this
SYNTHETIC_SCALE = 0.2


class Poisson(Family):
    NAME = "poisson"
    LINKS = ("log", "identity", "sqrt")
    TARGET = Interval(0.0, low_inclusive=True)
    POSITIVE_MEAN = True

    def variance(self, mu):
        return mu

    def variance_derivative(self, mu):
        return np.ones_like(mu)

    def unit_deviance(self, y, mu):
        return 2.0 * (namespace(mu).xlogy(y, y / mu) - (y - mu))

    def deviance_in_mean(self, y, eta, mu):
        # twice the loss's parts (the half deviance): no logarithm under the log link
        if self.link.name == "log":
            return 2.0 * self.loss_terms_in_mean(y, eta, mu)
        return self.unit_deviance(y, mu)

    def deviance_in_target(self, y):
        return 2.0 * self.loss_terms_in_target(y)

    def loss_terms_in_mean(self, y, eta, mu):
        # the half deviance y log y - y η - y + μ under the log link, less its terms in y
        return mu - y * eta if self.link.name == "log" else self.loss_terms(y, eta)

    def loss_terms_in_target(self, y):
        return xlogy(y, y) - y if self.link.name == "log" else 0.0

    def log_likelihood(self, y, eta, scale, weight):
        mu = self.link.inverse(eta)
        return float(weight @ (xlogy(y, mu) - mu - lgamma(y + 1.0)))

    def synthetic_target(self, seed, rows, X, y):
        """y ~ Poisson(exp(SYNTHETIC_SCALE (x·w_true + b_true))), drawn by inverting the CDF
        at one uniform per row: a pure function of (seed, row)."""
        theta = SYNTHETIC_SCALE * np.append(true_weights(X.shape[1]), TRUE_BIAS)
        mu = np.exp(np.minimum(linear_predictor(theta, X.astype(np.float64)), 6.0))
        u, k = uniforms(seed, rows), np.zeros(len(mu))
        term = np.exp(-mu)  # P(Y = k), from k = 0
        cdf, left = term.copy(), np.arange(len(mu))
        while len(left := left[cdf[left] < u[left]]):  # the smallest k with P(Y <= k) >= u
            k[left] += 1
            term[left] *= mu[left] / k[left]
            cdf[left] += term[left]
        return k.astype(X.dtype)
