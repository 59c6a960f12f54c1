"""Regression scores of a model on rows spread over the ranks (the validation rows): MSE, RMSE,
MAE and R², in float64, with one allreduce."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvd_linreg.ranks import Job


@dataclass(frozen=True)
class Scores:
    count: int
    mse: float
    rmse: float
    mae: float
    r2: float  # nan when the targets are constant


def scores(job: Job, theta: np.ndarray, blocks: Iterable[tuple[np.ndarray, np.ndarray]]) -> Scores:
    """Regression scores of theta (w..., b; float64) on every rank's blocks of (X, y), summed with
    one allreduce."""
    theta = np.asarray(theta, np.float64)
    sse = sae = 0.0
    moments = (0, 0.0, 0.0)  # this rank's targets: count, mean, centred sum of squares
    for X, y in blocks:
        y = np.asarray(y, np.float64)
        residual = np.asarray(X, np.float64) @ theta[:-1] + theta[-1] - y
        sse, sae = sse + float(residual @ residual), sae + float(np.abs(residual).sum())
        if len(y):
            mean = float(y.mean())
            moments = _merged(moments, (len(y), mean, float(np.square(y - mean).sum())))
    # The targets' total sum of squares from per-rank moments, each rank in its own slot: the
    # sums of y and y² would cancel catastrophically for targets with a large mean.
    packed = np.zeros(2 + 3 * job.size)
    packed[:2] = sse, sae
    packed[2 + 3 * job.rank : 5 + 3 * job.rank] = moments
    packed = hvd.allreduce(tf.constant(packed, tf.float64), op=hvd.Sum, name="scores").numpy()
    total = (0, 0.0, 0.0)
    for count, mean, m2 in packed[2:].reshape(job.size, 3):
        total = _merged(total, (int(count), mean, m2))
    count, sse, sae = total[0], float(packed[0]), float(packed[1])
    if count == 0:
        return Scores(0, math.nan, math.nan, math.nan, math.nan)
    r2 = 1.0 - sse / total[2] if total[2] > 0 else math.nan
    return Scores(count, sse / count, math.sqrt(sse / count), sae / count, r2)


def _merged(a: tuple[int, float, float], b: tuple[int, float, float]) -> tuple[int, float, float]:
    """Count, mean and centred sum of squares of two groups together (Chan et al.'s update)."""
    (n_a, mean_a, m2_a), (n_b, mean_b, m2_b) = a, b
    n = n_a + n_b
    if n == 0:
        return a
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n
