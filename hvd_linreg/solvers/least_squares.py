"""The exact least-squares fit by a distributed Householder QR (TSQR): the optimum SGD heads for.

One allreduce of column sums gives every rank the means, and the Gram matrix [X y]ᵀ[X y]: on a
well-conditioned design the centred Gram's Cholesky factor is R, and one pass is all
(_gram_factor says when). Otherwise each rank factorises its rows,
centred, as [Xc | yc] = Q R in float64 blocks (Householder QR, LAPACK's dgeqrf through NumPy),
folding each block's R into its own. The ranks' (F+1) x (F+1) factors are allgathered and
factorised once more, so every rank holds the same R of the whole centred design: only R
travels, ranks x (F+1)² numbers, never a row. The last column of R is Qᵀyc: w comes from the
triangular solve R[:F, :F] w = R[:F, F], the residual sum of squares from R, and the bias from
the means. A QR works on the design itself, not on XᵀX, whose condition number is the square of
the design's: the normal equations lose twice the digits on an ill-conditioned design.

The triangular solve still loses digits where R is ill-conditioned, and which ones depends on
the rounding of the BLAS kernel and of the rank count. One step of iterative refinement (the
corrected semi-normal equations, Björck) takes them back: one more pass over the rows computes
the gradient Xcᵀ(yc - Xc w) in extended precision, one allreduce sums it, and two triangular
solves with the same R give the correction. The fit is then the float64 rows' own least squares
to within what float64 holds, at any rank count and on any kernel. The same pass sums the
residual in extended precision, and b = ȳ - x̄·w takes its mean: where the means are large and
b small, float64's cancellation in b would otherwise cost it the digits w keeps, and the pass
is taken for that alone too (bias_bound).

Rank deficiency is decided on the small factor: the singular values of R[:F, :F] with its
columns scaled to unit norm (the centred design's columns scaled to unit norm have the same
ones) below F · eps · the largest (NumPy's matrix_rank and lstsq default, LAPACK gelsd's rcond
for an F x F matrix) make the design singular; a column whose centred norm is at most
_CONSTANT x √N |its mean| (its norm, were it constant) is constant but for the mean's rounding,
and counts as zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from hvd_linreg.data import Shard
from hvd_linreg.data.passes import FACTOR_BLOCK_BYTES, block_rows
from hvd_linreg.families.coefficients import matrix
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers import wide_least_squares as wide
from hvd_linreg.solvers.penalty import Penalty
from hvd_linreg.solvers.qr import Factor, factorise, triangle

# Every rank holds R, the ranks' factors stacked and a block of rows in float64
# (docs/statistics.md, Exact least squares).
MAX_FEATURES = 4096

# The mean's rounding leaves a constant column at up to about 1e-14 of its norm after centring
_CONSTANT = 1e-12

# Refine a solution whose error bound leaves it fewer than 13 digits: a backward-stable float64
# solve (a library's, or this one unrefined) loses as many, and only the refined fit is sure to
# hold the best of them (Longley's bound is 2.1e-13, Wampler1-2's 3.6e-13: unrefined, they tie
# the libraries' digits by the luck of the kernel's rounding). Well-conditioned designs keep
# their digits through the triangular solve and take no second pass.
_REFINE_ABOVE = 1e-13

# ... and a bias whose float64 cancellation (bias_bound) may cost it two digits of float64's:
# the refinement's pass sums the residual in extended precision, and b takes its mean
_REFINE_BIAS_ABOVE = 1e-14

# A column takes part in a dependence with at least this weight in a null vector (unit norm)
_INVOLVED = 1e-3


@dataclass(frozen=True)
class Solution:
    """A least-squares (or ridge) solution and the columns that made its design singular."""

    params: np.ndarray  # [w..., b]
    dependent: tuple[int, ...]  # empty when the design has full rank
    upper: np.ndarray  # (F, F): R of the system w solves, the ridge rows included
    # The relative error the triangular solve may leave in w, eps (κ + κ² tan θ): κ the scaled
    # R's condition number, θ the angle between the centred target and the columns' span.
    error_bound: float = 0.0


def solve(
    factor: Factor,
    warn: Callable[[str], None],
    ridge: float | np.ndarray = 0.0,
    names: Sequence[str] | None = None,
    centre: np.ndarray | None = None,
) -> Solution:
    """The [w..., b] minimising ‖Xc w - yc‖² + Σⱼ ridgeⱼ (wⱼ - centreⱼ)² (ridge: one value
    for every coefficient, or one each; the weighted rows' least squares at ridge = 0; centre
    0 by default); warn() is told, with the columns' names, when the design is singular."""
    F = len(factor.x_mean)
    r = np.where(np.append(constant_columns(factor), False), 0.0, factor.r)
    root = np.sqrt(np.broadcast_to(np.asarray(ridge, np.float64), (F,)))
    if root.any():
        # The least squares of [Xc; D] w = [yc; D centre] with D = diag(√ridge), whose R is
        # that of [R; D | D centre]. The bias, not penalised, still follows from the means.
        shift = np.zeros(F) if centre is None else centre
        penalty = np.c_[np.diag(root), root * shift]
        r = triangle(np.concatenate([r, penalty]))
    w, dependent, kappa = _triangular_least_squares(r[:F, :F], r[:F, F])
    if dependent:
        named = ", ".join(names[j] if names else f"w[{j}]" for j in dependent)
        warn(
            f"the design is singular: columns {named} are collinear or constant (a singular "
            "value below F x eps of the largest, columns scaled to unit norm); using the "
            "minimum-norm least-squares solution"
        )
    fitted = float(np.linalg.norm(r[:F, F]))
    tan_theta = abs(r[F, F]) / fitted if fitted > 0 else np.inf
    bound = np.finfo(np.float64).eps * (kappa + kappa**2 * tan_theta)
    return Solution(_with_bias(factor, w), dependent, r[:F, :F], float(bound))


def refine(
    factor: Factor, solution: Solution, gradient: np.ndarray, ridge: float | np.ndarray = 0.0
) -> Solution:
    """One step of iterative refinement by the corrected semi-normal equations (Björck's CSNE):
    gradient is Xcᵀ (yc - Xc w) over all rows at the solution's w, computed from the rows
    themselves; the correction δ solves Rᵀ R δ = gradient - ridge·w (the ridge rows' residual is
    -√ridge w; ridge as solve takes it), and w + δ has back the digits the triangular solve lost
    where R is ill-conditioned. A singular design keeps its minimum-norm solution: there R is not
    invertible."""
    if solution.dependent:
        return solution
    w, residual_sum = solution.params[:-1], gradient[-1]
    gradient = gradient[:-1]
    rhs = gradient - ridge * w
    half = solve_triangular(solution.upper, rhs, lower=False, trans="T")
    delta = solve_triangular(solution.upper, half, lower=False)
    w = w + delta
    # b = ȳ - x̄·w, less the mean residual the rows still have, in extended precision: in
    # float64 the cancellation of ȳ and x̄·w (large means, a small b: NIST's Wampler sets)
    # leaves b with fewer digits than w
    ld = np.longdouble
    mean_residual = ld(residual_sum) / ld(factor.weight or factor.count)
    b = ld(factor.y_mean) - np.dot(factor.x_mean.astype(ld), w.astype(ld)) + mean_residual
    return Solution(np.append(w, float(b) if factor.centred else 0.0), (), solution.upper)


def _with_bias(factor: Factor, w: np.ndarray) -> np.ndarray:
    """[w..., b], b from the means: the centred fit's line passes through them (b = 0 where
    the design has no intercept)."""
    return np.append(w, factor.y_mean - factor.x_mean @ w if factor.centred else 0.0)


def constant_columns(factor: Factor) -> np.ndarray:
    """Which features are constant (a bool per column): their centred columns hold only the
    mean's rounding, which would otherwise pass for a feature of its own; they count as zero."""
    F = len(factor.x_mean)
    norms = np.linalg.norm(factor.r[:, :F], axis=0)
    return norms <= _CONSTANT * np.sqrt(factor.weight or factor.count) * np.abs(factor.x_mean)


def _triangular_least_squares(
    upper: np.ndarray, rhs: np.ndarray
) -> tuple[np.ndarray, tuple[int, ...], float]:
    """w minimising ‖upper w - rhs‖ by the triangular solve, or the minimum-norm one (in the
    columns' unit-norm scaling) when the columns are dependent; which columns those are; and
    the scaled upper's condition number."""
    scaled, scale, s, tolerance = _unit_columns(upper)
    if len(s) == 0 or s[-1] > tolerance:
        solved = solve_triangular(upper, rhs, lower=False)
        return solved, (), float(s[0] / s[-1]) if len(s) else 1.0
    u, s, vt = np.linalg.svd(scaled)
    kept = s > tolerance
    w = vt[kept].T @ ((u[:, kept].T @ rhs) / s[kept])
    involved = np.any(np.abs(vt[~kept]) > _INVOLVED, axis=0)
    return w / scale, tuple(np.flatnonzero(involved).tolist()), np.inf


def _unit_columns(upper: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """upper with its columns scaled to unit norm, the scales, its singular values, and the
    tolerance below which one counts as 0: F · eps · the largest (NumPy's matrix_rank)."""
    scale = np.linalg.norm(upper, axis=0)
    scale[scale == 0] = 1.0
    scaled = upper / scale
    s = np.linalg.svd(scaled, compute_uv=False)
    return scaled, scale, s, len(s) * np.finfo(np.float64).eps * (s[0] if len(s) else 0.0)


def design_rank(factor: Factor) -> int:
    """The rank of the design with its intercept, as the solve counts it: 1 + the centred
    features' singular values above the tolerance (without an intercept, those alone)."""
    F = len(factor.x_mean)
    _, _, s, tolerance = _unit_columns(factor.r[:F, :F])
    return int(factor.centred) + int(np.count_nonzero(s > tolerance))


def residual_gradient(job: Job, shard: Shard, factor: Factor, w: np.ndarray) -> np.ndarray:
    """Xcᵀ W (yc - Xc w) over all rows, then Σ W (yc - Xc w) (what the bias still misses), the
    same on every rank: one more pass over this rank's rows and one allreduce. In extended
    precision (np.longdouble: 64 significant bits on x86 Linux), the centring too: at the
    least-squares solution the gradient is the cancellation of large terms, and float64
    rounding of Xc or of the residual is as large as what the correction is to recover.
    Constant columns count as zero, as in the system solve() solved."""
    F = len(factor.x_mean)
    kept = ~constant_columns(factor)
    x_mean, y_mean = factor.x_mean.astype(np.longdouble), np.longdouble(factor.y_mean)
    w = np.where(kept, w, 0.0).astype(np.longdouble)
    gradient = np.zeros(F + 1, np.longdouble)
    for block in shard.blocks(block_rows(F + 1, itemsize=16, budget=FACTOR_BLOCK_BYTES)):
        block = block.counted()
        X, y = block.X, block.y
        if block.offset is not None:
            y = np.subtract(y, block.offset.astype(np.longdouble))
        # Cast and centred in one pass; np.dot and einsum run NumPy's longdouble loops in
        # row order, where `@` walks Xcᵀ across rows.
        Xc = np.subtract(X, x_mean)
        residual = np.subtract(y, y_mean) - np.dot(Xc, w)
        if block.weight is not None:
            residual *= block.weight.astype(np.longdouble)
        gradient[:F] += np.einsum("ij,i->j", Xc, residual)
        gradient[F] += np.sum(residual)
    gradient[:F][~kept] = 0
    # Each rank's gradient as two float64 (high and low parts) in its own row: the allreduce
    # then only adds zeros, and the ranks' large terms cancel in extended precision here.
    high = gradient.astype(np.float64)
    rows = np.zeros((job.size, 2, F + 1))
    rows[job.rank] = high, (gradient - high).astype(np.float64)
    rows = job.allreduce_sum(rows, "residual_gradient")  # Horovod: every rank's row
    return np.sum(rows.astype(np.longdouble), axis=(0, 1)).astype(np.float64)


@dataclass(frozen=True)
class Optimum:
    """The exact optimum over the whole dataset, and the factor it was solved from."""

    STATISTICS = "least_squares"  # its statistics' module (statistics.describe)
    converged = True  # one factorisation: nothing to stop early
    iterations = 1  # one pass (the QR's)

    params: np.ndarray  # (F + 1) x 1 (coefficients.py): a column [w..., b]
    loss: float  # mean squared error over all rows at params (weighted: Σ w r² / rows)
    factor: Factor
    penalty: Penalty  # what it was solved with: a ridge (no L1) or none
    dependent: tuple[int, ...] = ()  # the columns that make the design singular, if any
    robust: np.ndarray | None = None  # --cov_type HC0/HC1/cluster: the sandwich covariance
    cov_type: str = "nonrobust"
    clusters: int | None = None  # --cov_type cluster: how many

    @property
    def objective(self) -> float:
        """What the fit minimised: the loss plus the ridge penalty, ½ Σ P2ⱼ wⱼ²."""
        return self.loss + self.penalty.value(self.params[:-1])


def bias_bound(factor: Factor, params: np.ndarray) -> float:
    """The relative error float64 leaves in b = ȳ - x̄·w: eps x (|ȳ| + |x̄|·|w|) / |b|, large
    where the means are large and b small (NIST's Wampler and Pontius sets)."""
    scale = abs(factor.y_mean) + float(np.abs(factor.x_mean) @ np.abs(params[:-1]))
    return float(np.finfo(np.float64).eps * scale / max(abs(params[-1]), np.finfo(np.float64).tiny))


def optimum(
    job: Job,
    shard: Shard,
    penalty: Penalty | None = None,
    names: Sequence[str] | None = None,
    intercept: bool = True,
) -> Optimum:
    """The exact optimum over the whole dataset of the mean squared error + ½ Σ P2ⱼ wⱼ²
    (penalty: a ridge per coefficient, Penalty.ridge(l2) for --l2; None: none), the same on
    every rank; rank 0 warns when the design is singular."""
    penalty = penalty or Penalty.ridge(0.0, shard.num_features)
    if penalty.l1.any():
        raise ValueError("least squares takes no L1 penalty: the elastic net's path fits it")
    if shard.structured:
        return wide.optimum(job, shard, penalty, names, intercept, Optimum)
    factor = factorise(job, shard, centre=intercept)
    # The mean squared error is twice the half deviance the penalty is stated against: the
    # rows' sum of squares takes count x P2 / 2 per coefficient.
    ridge = factor.count * penalty.l2 / 2.0
    solution = solve(factor, job.warn, ridge, names)
    # Only where the solve may have lost digits, in w or in b: the refinement's pass over the
    # rows costs as much as the factorisation. Every rank holds the same R and means, so every
    # rank decides the same and takes the same collectives.
    lost = solution.error_bound > _REFINE_ABOVE
    lost = lost or bias_bound(factor, solution.params) > _REFINE_BIAS_ABOVE
    if lost and not solution.dependent:
        gradient = residual_gradient(job, shard, factor, solution.params[:-1])
        solution = refine(factor, solution, gradient, ridge)
    loss = factor.rss(solution.params[:-1]) / factor.count
    return Optimum(matrix(solution.params), loss, factor, penalty, solution.dependent)
