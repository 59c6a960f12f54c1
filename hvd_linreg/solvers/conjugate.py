"""The weighted normal equations of a design too wide to factorise (blocks.py's limits: more
than 8,192 columns beside its largest categorical block), solved without forming them:
conjugate gradients on the products AᵀW(A v), A = [X 1], each one pass over this rank's rows
in memory and one allreduce of a value per coefficient, preconditioned by the diagonal of
AᵀWA (a categorical block's is its exact inverse).

The solve is iterated until the residual is 1e-11 of the right-hand side's size: IRLS and the
least-squares refinement then test the step, as they do a factorised one's. The covariance is
not formed: such a fit reports its coefficients without standard errors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.runtime.ranks import Job

TOLERANCE = 1e-11  # ‖residual‖ / ‖right-hand side‖ that ends the iterations
MAX_ITERATIONS = 5000


@dataclass(frozen=True)
class IterativeGram:
    """AᵀWA of the whole dataset as its products: this rank's blocks of rows and their
    working weights, kept from the pass that summed its diagonal, and the ranks' sums."""

    METHOD = "conjugate gradients on the normal equations"  # in the summary's words

    job: Job
    blocks: list[tuple[DesignMatrix, np.ndarray]] = field(repr=False)  # (X, W) of this rank
    diagonal_: np.ndarray  # diag(AᵀWA) over [w..., b]
    count: int
    weight: float
    x_mean: np.ndarray  # (F,) the columns' weighted means
    centred: bool = True
    target: np.ndarray | None = None  # AᵀW z
    y_ss: float = math.nan
    log_weight: float = 0.0
    implicit_constant = False

    @property
    def centred_y_ss(self) -> float:
        return self.y_ss

    def diagonal(self) -> np.ndarray:
        return self.diagonal_

    def condition_number(self) -> tuple[float | None, str]:
        return None, self.why_no_errors()

    def why_no_errors(self) -> str:
        return (
            f"a design of {len(self.diagonal_) - 1} columns, solved by conjugate gradients: "
            "its covariance is not formed (the coefficients are exact)"
        )

    def inverse_diagonal(self) -> None:
        return None

    def information(self) -> np.ndarray:
        raise UsageError(self.why_no_errors())

    def factor(self, ridge: np.ndarray) -> _Conjugate:
        """The system with a ridge per coefficient of [w..., b] (the intercept's 0), solved
        by conjugate gradients."""
        ridge = np.append(ridge, 0.0) if len(ridge) < len(self.diagonal_) else ridge.copy()
        if not self.centred:
            ridge[-1] = 1.0  # b held at 0: its row the identity's
        return _Conjugate(self, ridge)

    def step(self, ridge: np.ndarray, centre: np.ndarray | None = None):
        """As BlockGram.step: x minimising ‖√W (A x - z)‖² + Σⱼ ridgeⱼ (wⱼ - centreⱼ)²."""
        rhs = self.target.copy()
        if centre is not None:
            rhs[:-1] += ridge * centre
        return self.factor(ridge).solve(rhs), ()

    def product(self, v: np.ndarray) -> np.ndarray:
        """AᵀWA v over every rank's rows: one pass over this rank's blocks, one allreduce."""
        out = np.zeros(len(v))
        for X, w in self.blocks:
            u = w * (X.matvec(v[:-1]) + v[-1])
            out[:-1] += X.transpose_matvec(u)
            out[-1] += u.sum()
        return self.job.allreduce_sum(out, "conjugate_product")


@dataclass(frozen=True)
class _Conjugate:
    gram: IterativeGram
    ridge: np.ndarray
    dependent: tuple[int, ...] = ()

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """x of (AᵀWA + R) x = rhs by preconditioned conjugate gradients."""
        gram = self.gram
        diagonal = gram.diagonal_ + self.ridge
        inverse = np.where(diagonal > 0, 1.0 / np.where(diagonal > 0, diagonal, 1.0), 0.0)
        if not gram.centred:
            rhs = np.append(rhs[:-1], 0.0)
        x = np.zeros(len(rhs))
        r = rhs.copy()
        size = float(np.linalg.norm(rhs))
        if size == 0:
            return x
        z = inverse * r
        p, rz = z.copy(), float(r @ z)
        for _ in range(MAX_ITERATIONS):
            q = self._times(p)
            step = rz / float(p @ q)
            x += step * p
            r -= step * q
            if np.linalg.norm(r) <= TOLERANCE * size:
                return x
            z = inverse * r
            rz, previous = float(r @ z), rz
            p = z + (rz / previous) * p
        raise UsageError(
            f"conjugate gradients did not reach {TOLERANCE:g} of the normal equations' size in "
            f"{MAX_ITERATIONS} products: the design is nearly singular; fit with --l2 > 0"
        )

    def _times(self, v: np.ndarray) -> np.ndarray:
        out = self.gram.product(v) + self.ridge * v
        if not self.gram.centred:
            out[-1] = v[-1]
        return out
