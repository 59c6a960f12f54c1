"""The exact least-squares fit in one allreduce: the optimum SGD is heading for.

Each rank forms the normal equations of its shard, A^T A and A^T y with A = [X, 1], in float64;
one allreduce sums them over all ranks, and every rank solves the same small system.
"""

from __future__ import annotations

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from hvd_linreg.data import Shard
from hvd_linreg.ranks import Job

MAX_FEATURES = 4096  # the (F+1)^2 system is allreduced and solved on every rank
_ILL_CONDITIONED = 1e12
_BLOCK_ROWS = 1 << 15


def normal_equations(shard: Shard) -> tuple[np.ndarray, np.ndarray]:
    """A^T A and A^T y of this rank's rows, accumulated in float64 block by block."""
    k = shard.num_features + 1
    gram, rhs = np.zeros((k, k)), np.zeros(k)
    for start in range(0, len(shard.y), _BLOCK_ROWS):
        X = shard.X[start : start + _BLOCK_ROWS].astype(np.float64)
        A = np.hstack([X, np.ones((len(X), 1))])
        gram += A.T @ A
        rhs += A.T @ shard.y[start : start + _BLOCK_ROWS].astype(np.float64)
    return gram, rhs


def solve(job: Job, shard: Shard) -> np.ndarray:
    """The least-squares [w..., b] over the whole dataset, the same on every rank."""
    gram, rhs = normal_equations(shard)
    k = len(rhs)
    packed = np.concatenate([gram.ravel(), rhs])
    total = hvd.allreduce(tf.constant(packed), op=hvd.Sum, name="normal_equations").numpy()
    gram, rhs = total[: k * k].reshape(k, k), total[k * k :]
    cond = np.linalg.cond(gram)
    if np.isfinite(cond) and cond < _ILL_CONDITIONED:
        chol = np.linalg.cholesky(gram)
        return np.linalg.solve(chol.T, np.linalg.solve(chol, rhs))
    job.warn(
        f"the normal equations are singular or ill-conditioned (condition number {cond:.3g}): "
        "features are collinear or constant; using the minimum-norm least-squares solution"
    )
    return np.linalg.lstsq(gram, rhs, rcond=None)[0]
