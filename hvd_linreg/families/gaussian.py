"""The Gaussian GLM: a number with E[y] = g⁻¹(x·w + b) and Var(y) = φ, the dispersion φ
estimated by Pearson's χ² / dof, as statsmodels' GLM(family=Gaussian(link)) and R's
glm(family = gaussian(link)) fit it.

`--model gaussian` is this family, identity link by default (the same optimum as `--model
linear`, with GLM statistics: z, deviance, AIC), or log; `--model linear --link log` is it too
(families.get): least squares fits the identity link only. The loss is the mean squared error
of the mean, as the linear family's. IRLS fits it.
"""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.families.family import Family


class Gaussian(Family):
    NAME = "gaussian"
    LINKS = ("identity", "log")
    LOSS_SCALE = 2.0  # the mean squared error is the mean unit deviance
    FIXED_SCALE = False

    def variance(self, mu):
        return np.ones_like(mu)

    def variance_derivative(self, mu):
        return np.zeros_like(mu)

    def unit_deviance(self, y, mu):
        return (y - mu) ** 2

    def log_likelihood(self, y, eta, scale, weight):
        """statsmodels' Gaussian.loglike_obs: row i's variance is scale / weight[i]."""
        residual = y - self.link.inverse(eta)
        squares = weight @ (residual * residual) / scale
        return float(-0.5 * (squares + np.log(2 * math.pi * scale / weight).sum()))

    def profiled_log_likelihood(self, deviance, rows, log_weights):
        """With the identity link, statsmodels' llf (and R's logLik) is at the maximum
        likelihood scale, the weighted deviance / rows: -(rows (1 + log(2π deviance / rows))
        - Σ log weight) / 2. Its llnull stays at the fit's scale."""
        if self.link.name != "identity" or rows == 0:
            return None
        return -0.5 * (rows * (1.0 + math.log(2 * math.pi * deviance / rows)) - log_weights)
