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
    y_ss: float  # yc·yc: the total sum of squares
    count: int  # rows over all ranks

    def _unit_diagonal(self, l2: float) -> tuple[np.ndarray, np.ndarray]:
        """The system's matrix, Xcᵀ Xc + count·l2·I, scaled to a unit diagonal (Jacobi
        scaling), and the scale: a feature's units do not count as ill conditioning; a
        constant feature's zero column stays zero."""
        gram = self.gram + self.count * l2 * np.eye(len(self.rhs))
        scale = np.sqrt(np.diag(gram))
        scale[scale == 0] = 1.0
        return gram / np.outer(scale, scale), scale

    def solve(self, warn: Callable[[str], None], l2: float = 0.0) -> np.ndarray:
        """The [w..., b] minimising mean((X w + b - y)²) + l2·‖w‖² (least squares at l2 = 0);
        warn() is told when the system is (nearly) singular."""
        # mean(...) + l2‖w‖² is (‖Xc w - yc‖² + count·l2‖w‖²) / count: ridge's normal equations
        # add count·l2 to the diagonal; the bias, not penalised, still follows from the means.
        gram, scale = self._unit_diagonal(l2)
        rhs = self.rhs / scale
        cond = np.linalg.cond(gram)
        if _well_conditioned(cond):
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

    def inverse(self) -> np.ndarray | None:
        """(Xcᵀ Xc)⁻¹, which the coefficients' standard errors scale; None when the design is
        singular or ill-conditioned (its inverse would be rounding noise)."""
        gram, scale = self._unit_diagonal(0.0)
        if not _well_conditioned(np.linalg.cond(gram)):
            return None
        return np.linalg.inv(gram) / np.outer(scale, scale)


def _well_conditioned(cond: float) -> bool:
    return bool(np.isfinite(cond) and cond < _ILL_CONDITIONED)


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
    packed = np.zeros(F * F + F + 1)  # Xcᵀ Xc, then Xcᵀ yc, then yc·yc
    for X, y in _blocks(shard):
        Xc, yc = X - x_mean, y - y_mean
        packed += np.concatenate([(Xc.T @ Xc).ravel(), Xc.T @ yc, [yc @ yc]])
    packed = _sum_over_ranks(packed, "normal_equations")
    gram, rhs = packed[: F * F].reshape(F, F), packed[F * F : -1]
    return NormalEquations(gram, rhs, x_mean, y_mean, float(packed[-1]), count)


@dataclass(frozen=True)
class Optimum:
    """The exact optimum over the whole dataset, and the equations it solved."""

    params: np.ndarray  # [w..., b]
    loss: float  # mean squared error over all rows at params
    equations: NormalEquations
    l2: float  # the ridge penalty it was solved with

    @property
    def objective(self) -> float:
        """What the fit minimised: the loss plus the ridge penalty."""
        return objective(self.loss, self.params, self.l2)


def objective(loss: float, params: np.ndarray, l2: float) -> float:
    """mean squared error + l2·‖w‖² (the bias not penalised): what both solvers minimise."""
    return loss + l2 * float(params[:-1] @ params[:-1]) if l2 else loss
