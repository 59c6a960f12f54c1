"""Regression scores of a model on rows spread over the ranks (held-out validation rows, or
new data for `evaluate`): MSE, RMSE, MAE and R², in float64, with one allreduce."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce

import numpy as np

from hvd_linreg.ranks import Job


@dataclass(frozen=True)
class Scores:
    count: int
    mse: float
    rmse: float
    mae: float
    r2: float  # nan when the targets are constant


def scores(job: Job, theta: np.ndarray, blocks: Iterable[tuple[np.ndarray, np.ndarray]]) -> Scores:
    """Regression scores of theta (w..., b; float64) on every rank's blocks of (X, y), summed
    with one allreduce."""
    count, sse, sae, mean, m2 = 0, 0.0, 0.0, 0.0, 0.0
    for X, y in blocks:
        y = y.astype(np.float64)
        residual = X.astype(np.float64) @ theta[:-1] + theta[-1] - y
        sse, sae = sse + float(residual @ residual), sae + float(np.abs(residual).sum())
        if len(y):
            block = (len(y), float(y.mean()), float(((y - y.mean()) ** 2).sum()))
            count, mean, m2 = _pooled((count, mean, m2), block)
    rows = np.zeros((job.size, 5))
    rows[job.rank] = [count, sse, sae, mean, m2]
    if job.size > 1:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        # Each rank fills its own row, so the sum is every rank's row: the ranks' means and
        # squared deviations then pool without the cancellation of summing y and y².
        rows = hvd.allreduce(tf.constant(rows), op=hvd.Sum, name="scores").numpy()
    count, mean, m2 = reduce(_pooled, [(int(r[0]), r[3], r[4]) for r in rows], (0, 0.0, 0.0))
    sse, sae = float(rows[:, 1].sum()), float(rows[:, 2].sum())
    mse, mae = (sse / count, sae / count) if count else (math.nan, math.nan)
    return Scores(count, mse, math.sqrt(mse), mae, 1 - sse / m2 if m2 > 0 else math.nan)


def _pooled(a: tuple[int, float, float], b: tuple[int, float, float]) -> tuple[int, float, float]:
    """(count, mean, sum of squared deviations) of two groups together (Chan et al.)."""
    (n_a, mean_a, m2_a), (n_b, mean_b, m2_b) = a, b
    n = n_a + n_b
    if n == 0:
        return a
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n
