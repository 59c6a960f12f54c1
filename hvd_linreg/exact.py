"""The exact least-squares fit in two small allreduces: the optimum SGD is heading for.

The features are centred first: one allreduce of column sums gives every rank the means. Each
rank then forms the centred normal equations of its rows, Xcᵀ Xc and Xcᵀ yc, in float64; a
second allreduce sums them, every rank solves the same F x F system for w, and the bias follows
from the means: b = mean(y) - mean(x)·w. Uncentred, a feature offset by 1000 makes the normal
equations ill-conditioned and costs digits of the answer; centred, only real collinearity does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvd_linreg.data import Shard
from hvd_linreg.ranks import Job

MAX_FEATURES = 4096  # the F x F system is allreduced and solved on every rank
_ILL_CONDITIONED = 1e12
_BLOCK_ROWS = 1 << 15


@dataclass(frozen=True)
class NormalEquations:
    """Xcᵀ Xc w = Xcᵀ yc over the whole dataset (all ranks), with Xc = X - x_mean and
    yc = y - y_mean: everything a least-squares fit and its statistics start from."""

    gram: np.ndarray  # (F, F) Xcᵀ Xc
    rhs: np.ndarray  # (F,) Xcᵀ yc
    x_mean: np.ndarray  # (F,) column means of X
    y_mean: float
    count: int  # rows over all ranks

    def solve(self, warn: Callable[[str], None]) -> np.ndarray:
        """The least-squares [w..., b]; warn() is told when the system is (nearly) singular."""
        # Unit diagonal first (Jacobi scaling): a feature's units do not count as ill
        # conditioning; a constant feature's zero column stays zero.
        scale = np.sqrt(np.diag(self.gram))
        scale[scale == 0] = 1.0
        gram = self.gram / np.outer(scale, scale)
        rhs = self.rhs / scale
        cond = np.linalg.cond(gram)
        if np.isfinite(cond) and cond < _ILL_CONDITIONED:
            chol = np.linalg.cholesky(gram)
            w = np.linalg.solve(chol.T, np.linalg.solve(chol, rhs))
        else:
            warn(
                "the normal equations are singular or ill-conditioned (condition number "
                f"{cond:.3g}): features are collinear or constant; using the minimum-norm "
                "least-squares solution"
            )
            w = np.linalg.lstsq(gram, rhs, rcond=None)[0]
        w = w / scale
        return np.append(w, self.y_mean - self.x_mean @ w)


def _blocks(shard: Shard) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """This rank's rows as float64 blocks: no float64 copy of the whole shard."""
    for X, y in shard.blocks(_BLOCK_ROWS):
        yield X.astype(np.float64), y.astype(np.float64)


def _sum_over_ranks(values: np.ndarray, name: str) -> np.ndarray:
    return hvd.allreduce(tf.constant(values, tf.float64), op=hvd.Sum, name=name).numpy()


def normal_equations(shard: Shard) -> NormalEquations:
    """The centred normal equations of the whole dataset: two allreduces, every rank."""
    F = shard.num_features
    sums = np.zeros(F + 2)  # column sums of X, sum of y, row count
    for X, y in _blocks(shard):
        sums += np.concatenate([X.sum(axis=0), [y.sum(), len(y)]])
    sums = _sum_over_ranks(sums, "column_sums")
    count = int(sums[-1])
    x_mean, y_mean = sums[:F] / count, sums[F] / count
    packed = np.zeros(F * F + F)  # Xcᵀ Xc, then Xcᵀ yc
    for X, y in _blocks(shard):
        Xc, yc = X - x_mean, y - y_mean
        packed += np.concatenate([(Xc.T @ Xc).ravel(), Xc.T @ yc])
    packed = _sum_over_ranks(packed, "normal_equations")
    return NormalEquations(packed[: F * F].reshape(F, F), packed[F * F :], x_mean, y_mean, count)


def solve(job: Job, shard: Shard) -> np.ndarray:
    """The least-squares [w..., b] over the whole dataset, the same on every rank."""
    return normal_equations(shard).solve(job.warn)
