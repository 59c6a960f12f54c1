"""Robust standard errors at an exact optimum (--cov_type HC0, HC1): the sandwich B⁻¹ M B⁻¹ of
White and Huber, as statsmodels computes it. The bread B = AᵀWA is the Fisher information the
solver's factor holds (A = [X 1]); the meat M = Σ uᵢ uᵢᵀ sums each row's score,
uᵢ = wᵢ (yᵢ - μᵢ) / (V(μᵢ) g'(μᵢ)) [xᵢ 1], over one more pass and one allreduce. The scale
cancels: the errors hold whether or not the family's variance is right. HC1 multiplies HC0 by
n / (n - k), the small-sample factor of statsmodels' OLS (its GLM returns HC0 for both)."""

from __future__ import annotations

import numpy as np

from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import block_rows, predictor
from hvd_linreg.ranks import Job


def covariance(
    job: Job, shard, family: Family, theta: np.ndarray, information: np.ndarray, cov_type: str
) -> np.ndarray:
    """The robust covariance of theta = [w..., b], the same on every rank."""
    k = len(theta)
    sums = np.zeros(k * k + 1)  # M, then the rows
    for rows in shard.blocks(block_rows(k)):
        rows = rows.counted()
        y = rows.y.astype(np.float64)
        mu = family.link.inverse(predictor(theta, rows))
        variance, slope = family.variance_and_slope(mu)
        u = rows.weights() * (y - mu) / (variance * slope)
        scores = np.c_[rows.X.astype(np.float64), np.ones(len(y))] * u[:, None]
        sums[:-1] += (scores.T @ scores).ravel()
        sums[-1] += len(y)
    sums = job.allreduce_sum(sums, "sandwich")  # Horovod: every rank's sums
    meat, n = sums[:-1].reshape(k, k), sums[-1]
    half = np.linalg.solve(information, meat)
    cov = np.linalg.solve(information, half.T).T  # B⁻¹ M B⁻¹, B symmetric
    if cov_type == "HC1":
        cov *= n / (n - k)
    return (cov + cov.T) / 2.0
