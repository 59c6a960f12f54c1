"""Regression scores of a model on some rows (the linear family's): MSE, RMSE, MAE and R²,
each row counting by its weight, the ranks' means and squared deviations pooled."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from hvd_linreg.data.passes import Blocks, counted
from hvd_linreg.families.maths import predictor
from hvd_linreg.scoring.base import Scores


@dataclass(frozen=True)
class RegressionScores(Scores):
    """Regression scores of a model on some rows: MSE, RMSE, MAE and R²."""

    count: int
    mse: float
    rmse: float
    mae: float
    r2: float  # nan when the targets are constant

    SHOWN = (
        ("mse", "MSE", "MSE"),
        ("rmse", "RMSE", "RMSE"),
        ("mae", "MAE", "MAE"),
        ("r2", "R²", "R²"),
    )
    UNDEFINED = {"r2": "the targets are constant"}


def scores(job, theta: np.ndarray, blocks: Blocks) -> RegressionScores:
    """Regression scores of theta (w..., b; float64) on every rank's blocks of rows, each row
    counting by its weight (scikit-learn's sample_weight), summed with one allreduce."""
    count, sse, sae, weight, mean, m2 = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for rows in counted(blocks()):
        y, w = rows.y.astype(np.float64), rows.weights()
        residual = predictor(theta, rows) - y
        sse, sae = sse + float(w @ (residual * residual)), sae + float(w @ np.abs(residual))
        count += len(y)
        if len(y):
            block_mean = float(w @ y / w.sum())
            block = (float(w.sum()), block_mean, float(w @ (y - block_mean) ** 2))
            weight, mean, m2 = _pooled((weight, mean, m2), block)
    rows = np.zeros((job.size, 6))
    rows[job.rank] = [count, sse, sae, weight, mean, m2]
    # Horovod: each rank fills its own row, so the sum is every rank's row: the ranks' means and
    # squared deviations then pool without the cancellation of summing y and y².
    rows = job.allreduce_sum(rows, "scores")
    weight, mean, m2 = reduce(_pooled, [(r[3], r[4], r[5]) for r in rows], (0.0, 0.0, 0.0))
    count, sse, sae = int(rows[:, 0].sum()), float(rows[:, 1].sum()), float(rows[:, 2].sum())
    mse, mae = (sse / weight, sae / weight) if weight else (math.nan, math.nan)
    return RegressionScores(count, mse, math.sqrt(mse), mae, 1 - sse / m2 if m2 > 0 else math.nan)


def _pooled(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple:
    """(weight, mean, sum of squared deviations) of two groups together (Chan et al.)."""
    (n_a, mean_a, m2_a), (n_b, mean_b, m2_b) = a, b
    n = n_a + n_b
    if n == 0:
        return a
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n
