"""Linear regression, the first model family: y = X·w + b, fitted by mean squared error as in
the seed program, plus a ridge penalty l2·‖w‖² with --l2 (the bias is not penalised).

The family owns its maths: the TensorFlow model and its loss, the prediction, the scores, the
exact solver (the distributed QR of exact.py), the statistics of the fit (statistics.py) and the
serving signature. The modules that train, report, export, predict and plot ask it; none of them
computes a residual.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import numpy as np
import tensorflow as tf

from hvd_linreg import exact
from hvd_linreg.data import Shard
from hvd_linreg.ranks import Job
from hvd_linreg.statistics import Statistics, describe

NAME = "linear"
LOSS = "mean squared error"
MAX_EXACT_FEATURES = exact.MAX_FEATURES
SOLVER = "exact least squares"
SOLVER_COST = "the distributed QR"
Optimum = exact.Optimum


class Model(tf.Module):
    """w and b live in ONE variable, so each step allreduces one gradient tensor, not two."""

    def __init__(self, params: np.ndarray, dtype: str = "float32", l2: float = 0.0):
        super().__init__(name="linear")
        self.num_features = len(params) - 1
        self.l2 = l2
        # The data's precision: float64 data trained in float32 would lose what it holds.
        self.params = tf.Variable(np.asarray(params, dtype).reshape(-1, 1), name="params")

    def predict(self, X: tf.Tensor) -> tf.Tensor:
        w, b = self.params[:-1], self.params[-1]
        return tf.squeeze(tf.matmul(X, w), axis=1) + b

    def loss(self, X: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """mean((X w + b - y)²) + l2·‖w‖²: objective(), on a batch."""
        loss = tf.reduce_mean(tf.square(self.predict(X) - y))
        if self.l2:  # the bias is not penalised
            loss += self.l2 * tf.reduce_sum(tf.square(self.params[:-1]))
        return loss

    def numpy_params(self) -> np.ndarray:
        return self.params.numpy().reshape(-1).astype(np.float64)


def check_target(job: Job, shard: Shard) -> Shard:
    """Any finite target fits: the data's own checks have passed."""
    return shard


def synthetic_target(seed: int, rows: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The synthetic rows' target: the seed's y = X w_true + 2 + 0.1 noise, as drawn."""
    return y


def initial_params(seed: int, rank: int, num_features: int) -> np.ndarray:
    """N(0, 1) start values like the seed's initializer; [w_0 .. w_{F-1}, b].

    Each rank draws its own on purpose: only the broadcast from rank 0 makes them agree,
    so a missing broadcast shows up in the exactness tests instead of going unnoticed.
    """
    return np.random.default_rng([seed, rank]).standard_normal(num_features + 1)


def predict(theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """X w + b in float64, summed term by term: a BLAS product's order of summation depends on
    how many rows it is given, and a row's prediction must not depend on the rank count."""
    out = np.full(len(X), theta[-1], np.float64)
    for j, w_j in enumerate(theta[:-1]):
        out += X[:, j] * w_j
    return out


def loss(job: Job, shard: Shard, theta: np.ndarray) -> float:
    """Mean squared error of [w..., b] over the whole dataset: float64 sums, allreduced."""
    # In blocks of about 16 MB, not a float64 copy of the shard: the allocator keeps such a
    # block for the next one, where larger ones would each be fresh memory from the kernel.
    sse, count = 0.0, 0
    for X, y in shard.blocks(max(1024, (16 << 20) // (8 * (shard.num_features + 1)))):
        residual = X.astype(np.float64) @ theta[:-1] + theta[-1] - y
        sse, count = sse + float(np.dot(residual, residual)), count + len(y)
    # Horovod: the ranks' sums, so that every rank holds the whole dataset's loss.
    sums = job.allreduce_sum([sse, count], "global_mse")
    return float(sums[0] / sums[1]) if sums[1] else math.nan


def objective(loss: float, params: np.ndarray, l2: float) -> float:
    """mean squared error + l2·‖w‖² (the bias not penalised): what both solvers minimise."""
    return exact.objective(loss, params, l2)


@dataclass(frozen=True)
class Scores:
    """Regression scores of a model on some rows: MSE, RMSE, MAE and R²."""

    count: int
    mse: float
    rmse: float
    mae: float
    r2: float  # nan when the targets are constant

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        return {"mse": self.mse, "rmse": self.rmse, "mae": self.mae, "r2": self.r2}

    def as_json(self) -> dict[str, float | None]:
        """JSON has no NaN: an undefined R² is null."""
        return {k: v if np.isfinite(v) else None for k, v in self.values().items()}

    def line(self) -> str:
        """The scores as the log lines and the summary show them."""
        return f"MSE {self.mse:.6g}, RMSE {self.rmse:.6g}, MAE {self.mae:.6g}, R² {self.r2:.6g}"

    def table(self) -> list[str]:
        """The scores one per line, as `evaluate` prints them."""
        r2 = "undefined (the targets are constant)" if math.isnan(self.r2) else f"{self.r2:.6g}"
        return [
            f"  MSE:  {self.mse:.6g}",
            f"  RMSE: {self.rmse:.6g}",
            f"  MAE:  {self.mae:.6g}",
            f"  R²:   {r2}",
        ]


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
    # Horovod: each rank fills its own row, so the sum is every rank's row: the ranks' means and
    # squared deviations then pool without the cancellation of summing y and y².
    rows = job.allreduce_sum(rows, "scores")
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


def optimum(job: Job, shard: Shard, l2: float, names: Sequence[str] | None) -> Optimum:
    """The exact optimum of the ridge objective over the whole dataset, the same on every rank:
    least squares by the distributed QR."""
    return exact.optimum(job, shard, l2, names)


def statistics(optimum: Optimum, names: tuple[str, ...] | None) -> Statistics:
    """Ordinary least squares' statistics of the exact optimum."""
    return describe(optimum, names)


def save_model(directory: Path, theta: np.ndarray, dtype: str) -> None:
    """A SavedModel whose serving signature maps features to predictions."""
    save_serving(directory, Model(theta, dtype), "prediction")


def save_serving(directory: Path, model: tf.Module, output: str) -> None:
    """model as a SavedModel whose serving signature maps features to {output: predict}."""
    dtype = model.params.dtype

    @tf.function(input_signature=[tf.TensorSpec([None, model.num_features], dtype, "features")])
    def serve(features):
        return {output: model.predict(features)}

    model.serve = serve  # tracked by the module, so the SavedModel keeps it
    tf.saved_model.save(model, str(directory), signatures={"serving_default": serve})


def curve(theta: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, str]:
    """The fitted line over one feature's values, and its label."""
    w, b = theta[0], theta[-1]
    return w * xs + b, f"fitted: y = {w:.4g}x + {b:.4g}"
