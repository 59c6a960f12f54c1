"""Least squares of a wide design (categorical columns of thousands of levels, sparse columns):
the normal equations by blocks (blocks.py), solved with the largest categorical block
eliminated, then refined on the rows' own residuals until the correction is below float64's
reach of the coefficients: the Gram's rounding is not the answer's. One pass sums the Gram,
each refinement a product pass (X b and Xᵀ r); two or three in all on a design of full rank."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import matrix
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers.blocks import BLOCK_ROWS, Plan, names_of, summed_gram
from hvd_linreg.solvers.penalty import Penalty

# Refinement passes at most; a pass ends it where the correction is below this, relative
REFINEMENTS = 5
SETTLED = 1e-14


def _target(block) -> tuple[np.ndarray, np.ndarray]:
    """A block's target less any offset, and its weights, in float64."""
    z = block.y.astype(np.float64)
    if block.offset is not None:
        z = z - block.offset
    return z, block.weights()


def optimum(job: Job, shard, penalty: Penalty, names, intercept: bool, result):
    """least_squares.optimum for a structured shard: result (least_squares.Optimum) at the
    minimiser of Σ w (z - A θ)² / n + ½ Σ P2ⱼ wⱼ²; UsageError naming the collinear columns
    where the design is singular."""
    plan = Plan.of(shard.design_template())
    F = shard.num_features

    def blocks():
        for block in shard.blocks(BLOCK_ROWS):
            block = block.counted()
            z, w = _target(block)
            wz = w * z
            yield block.X, w, np.r_[block.X.transpose_matvec(wz), wz.sum(), np.log(w).sum()]

    gram, extra = summed_gram(job, blocks, plan, F + 2, "least_squares_gram", intercept)
    target = extra[: F + 1]
    ridge = gram.count * penalty.l2 / 2.0
    factored = gram.factor(ridge)
    if factored.dependent:
        raise UsageError(
            f"the design is singular: columns {names_of(factored.dependent, names, F)} are "
            "collinear or constant; drop the redundant ones, or fit with --l2 > 0"
        )
    z_mean = target[-1] / gram.weight if intercept else 0.0
    theta = factored.solve(target)
    for passes in range(1, REFINEMENTS + 1):
        gradient, rss, y_ss = _residuals(job, shard, theta, z_mean)
        delta = factored.solve(gradient - np.append(ridge * theta[:-1], 0.0))
        settled = np.all(np.abs(delta) <= SETTLED * np.maximum(1.0, np.abs(theta)))
        if settled or passes == REFINEMENTS:
            break
        theta = theta + delta
    factor = replace(gram, y_ss=y_ss, log_weight=float(extra[-1]))
    return result(matrix(theta), rss / gram.count, factor, penalty)


def _residuals(job: Job, shard, theta: np.ndarray, z_mean: float):
    """Aᵀ W (z - A θ) over every rank's rows, Σ w (z - A θ)² and Σ w (z - z̄)²: one product
    pass and one allreduce."""
    F = len(theta) - 1
    total = np.zeros(F + 3)
    for block in shard.blocks(BLOCK_ROWS):
        block = block.counted()
        z, w = _target(block)
        r = z - block.X.matvec(theta[:-1]) - theta[-1]
        wr = w * r
        total[:F] += block.X.transpose_matvec(wr)
        total[F] += wr.sum()
        total[F + 1] += wr @ r
        total[F + 2] += w @ np.square(z - z_mean)
    total = job.allreduce_sum(total, "least_squares_residuals")
    return total[: F + 1], float(total[F + 1]), float(total[F + 2])
