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

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from hvd_linreg.data import Shard
from hvd_linreg.ranks import Job

# A block of rows for factorise_blocks: [X z] in float64, their weights (None: 1), extra sums
Block = tuple[np.ndarray, "np.ndarray | None", np.ndarray]
# Every rank holds R, the ranks' factors stacked and a block of rows in float64
# (docs/statistics.md, Exact least squares).
MAX_FEATURES = 4096
_BLOCK_BYTES = 16 << 20  # rows cast to float64 (or to longdouble, refining) at a time
# Rows per Householder QR: short enough for LAPACK's unblocked QR to work in cache, and NumPy
# runs a block's QRs in one call; at least twice R's rows, so that each QR halves what it gets.
_LEAF_ROWS = 1024
# The mean's rounding leaves a constant column at up to about 1e-14 of its norm after centring
_CONSTANT = 1e-12
# Refine a solution whose error bound leaves fewer digits than this: well-conditioned designs
# keep their digits through the triangular solve and need no second pass.
_REFINE_ABOVE = 1e-12
# ... and a bias whose float64 cancellation (bias_bound) may cost it two digits of float64's:
# the refinement's pass sums the residual in extended precision, and b takes its mean
_REFINE_BIAS_ABOVE = 1e-14
# The centred Gram matrix's Cholesky factor serves as R (one pass, no QR) where its error bound
# is at most this, and the residual sum of squares' at most _GRAM_RSS_ABOVE (relative): well
# conditioned designs, such as synthetic ones; others take the Householder QR. Up to this many
# columns: the Gram's sums travel in the first allreduce, (F+1)² numbers.
_GRAM_ABOVE = 1e-14
_GRAM_RSS_ABOVE = 1e-11
_GRAM_MAX_COLUMNS = 513
# A column takes part in a dependence with at least this weight in a null vector (unit norm)
_INVOLVED = 1e-3


@dataclass(frozen=True)
class Factor:
    """R of the centred design [Xc | yc] = Q R over the whole dataset (all ranks), with
    Xc = X - x_mean and yc = y - y_mean: everything a least-squares fit and its statistics
    start from."""

    r: np.ndarray  # (F+1, F+1) upper triangular; its last column is Qᵀ yc
    x_mean: np.ndarray  # (F,) column means of X
    y_mean: float
    count: int  # rows over all ranks
    weight: float = 0.0  # the weights' sum over all ranks (the rows, unweighted)

    @property
    def y_ss(self) -> float:
        """yc·yc, the total sum of squares: the norm of R's last column, as of yc's."""
        return float(self.r[:, -1] @ self.r[:, -1])

    def rss(self, w: np.ndarray) -> float:
        """‖Xc w - yc‖², the residual sum of squares at w: ‖R [w; -1]‖², Q being orthogonal."""
        residual = self.r @ np.append(w, -1.0)
        return float(residual @ residual)

    def information(self) -> np.ndarray:
        """AᵀWA for A = [X 1], the weighted design with its column of ones: from R of the
        centred √W Xc, the means and the weights' sum."""
        F = len(self.x_mean)
        upper, wx = self.r[:F, :F], self.weight * self.x_mean
        xx = upper.T @ upper + np.outer(wx, self.x_mean)
        return np.block([[xx, wx[:, None]], [wx[None, :], np.array([[self.weight]])]])

    def variances(self) -> np.ndarray:
        """diag((Xcᵀ Xc)⁻¹) = the squared row norms of R⁻¹, and then x̄ᵀ (Xcᵀ Xc)⁻¹ x̄: what
        the standard errors of w and b scale (Var(b) = σ² (1/N + x̄ᵀ (Xcᵀ Xc)⁻¹ x̄))."""
        F = len(self.x_mean)
        upper = tf.constant(self.r[:F, :F])
        inverse = tf.linalg.triangular_solve(upper, tf.eye(F, dtype=tf.float64), lower=False)
        mean = tf.constant(self.x_mean[:, None])
        u = tf.linalg.triangular_solve(upper, mean, lower=False, adjoint=True)  # R⁻ᵀ x̄
        return np.append(np.sum(np.square(inverse.numpy()), axis=1), np.sum(np.square(u)))


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
    ridge: float = 0.0,
    names: Sequence[str] | None = None,
    centre: np.ndarray | None = None,
) -> Solution:
    """The [w..., b] minimising ‖Xc w - yc‖² + ridge·‖w - centre‖² (the weighted rows' least
    squares at ridge = 0; centre 0 by default); warn() is told, with the columns' names, when
    the design is singular."""
    F = len(factor.x_mean)
    r = np.where(np.append(constant_columns(factor), False), 0.0, factor.r)
    if ridge > 0:
        # The least squares of [Xc; √ridge I] w = [yc; √ridge centre], whose R is that of
        # [R; √ridge I | √ridge centre]. The bias, not penalised, still follows from the means.
        shift = np.zeros(F) if centre is None else centre
        penalty = np.c_[np.sqrt(ridge) * np.eye(F), np.sqrt(ridge) * shift]
        r = _triangle(np.concatenate([r, penalty]))
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


def refine(factor: Factor, solution: Solution, gradient: np.ndarray, l2: float = 0.0) -> Solution:
    """One step of iterative refinement by the corrected semi-normal equations (Björck's CSNE):
    gradient is Xcᵀ (yc - Xc w) over all rows at the solution's w, computed from the rows
    themselves; the correction δ solves Rᵀ R δ = gradient - count·l2·w (the ridge rows'
    residual is -√(count·l2) w), and w + δ has back the digits the triangular solve lost
    where R is ill-conditioned. A singular design keeps its minimum-norm solution: there R
    is not invertible."""
    if solution.dependent:
        return solution
    w, residual_sum = solution.params[:-1], gradient[-1]
    gradient = gradient[:-1]
    rhs = gradient - factor.count * l2 * w if l2 > 0 else gradient
    upper = tf.constant(solution.upper)
    half = tf.linalg.triangular_solve(upper, tf.constant(rhs[:, None]), lower=False, adjoint=True)
    delta = tf.linalg.triangular_solve(upper, half, lower=False).numpy()[:, 0]
    w = w + delta
    # b = ȳ - x̄·w, less the mean residual the rows still have, in extended precision: in
    # float64 the cancellation of ȳ and x̄·w (large means, a small b: NIST's Wampler sets)
    # leaves b with fewer digits than w
    ld = np.longdouble
    mean_residual = ld(residual_sum) / ld(factor.weight or factor.count)
    b = ld(factor.y_mean) - np.dot(factor.x_mean.astype(ld), w.astype(ld)) + mean_residual
    return Solution(np.append(w, float(b)), (), solution.upper)


def _with_bias(factor: Factor, w: np.ndarray) -> np.ndarray:
    """[w..., b], b from the means: the centred fit's line passes through them."""
    return np.append(w, factor.y_mean - factor.x_mean @ w)


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
    scale = np.linalg.norm(upper, axis=0)
    scale[scale == 0] = 1.0
    scaled = upper / scale
    s = np.linalg.svd(scaled, compute_uv=False)
    tolerance = len(s) * np.finfo(np.float64).eps * (s[0] if len(s) else 0.0)
    if len(s) == 0 or s[-1] > tolerance:
        solved = tf.linalg.triangular_solve(upper, rhs[:, None], lower=False)
        return solved.numpy()[:, 0], (), float(s[0] / s[-1]) if len(s) else 1.0
    u, s, vt = np.linalg.svd(scaled)
    kept = s > tolerance
    w = vt[kept].T @ ((u[:, kept].T @ rhs) / s[kept])
    involved = np.any(np.abs(vt[~kept]) > _INVOLVED, axis=0)
    return w / scale, tuple(np.flatnonzero(involved).tolist()), np.inf


def _triangle(stacked: np.ndarray) -> np.ndarray:
    """The n x n R of the QR of stacked (rows x n), with zero rows below when rows < n."""
    n = stacked.shape[1]
    r = np.linalg.qr(stacked, mode="r")
    return np.concatenate([r, np.zeros((n - len(r), n))]) if len(r) < n else r


def _leaf_factors(A: np.ndarray, leaf: int) -> list[np.ndarray]:
    """A's rows reduced to fewer with the same R: the R of each leaf of its rows, in one call."""
    whole = len(A) // leaf * leaf
    n = A.shape[1]
    if whole == 0:
        return [A]
    leaves = np.linalg.qr(A[:whole].reshape(-1, leaf, n), mode="r")
    return [leaves.reshape(-1, n), A[whole:]]


def _blocks(shard: Shard, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """This rank's rows of weight > 0 as float64 blocks (no float64 copy of the whole shard):
    X, the target less any offset, and the weights (None: 1)."""
    for block in shard.blocks(rows):
        block = block.counted()
        y = block.y.astype(np.float64)
        if block.offset is not None:
            y = y - block.offset
        weight = None if block.weight is None else block.weights()
        yield block.X.astype(np.float64), y, weight


def _block_rows(n: int) -> int:
    """Rows per float64 block of n columns: about _BLOCK_BYTES, and at least a leaf's worth."""
    return max(_LEAF_ROWS, 2 * n, _BLOCK_BYTES // (8 * n))


def factorise(job: Job, shard: Shard) -> Factor:
    """The R factor of the shard's whole centred design [X y], the same on every rank."""
    n = shard.num_features + 1
    rows = _block_rows(n)

    def blocks() -> Iterator[Block]:
        for X, y, weight in _blocks(shard, rows):
            yield np.c_[X, y], weight, _NOTHING

    return factorise_blocks(job, blocks, n)[0]


_NOTHING = np.zeros(0)


def factorise_blocks(
    job: Job,
    blocks: Callable[[], Iterable[Block]],
    n: int,
    extra: int = 0,
    reference: np.ndarray | None = None,
) -> tuple[Factor, np.ndarray]:
    """The R factor of the whole weighted, centred design √w [Ac | zc], the same on every rank,
    and the ranks' sums of the blocks' extra figures (extra of them). blocks() yields this
    rank's rows, each once, as (A = [X z] in float64, their weights or None for 1, the block's
    extra figures), each A its own array, which the pass may scale in place; it is called again
    where a second pass is needed. One pass sums the columns
    and, up to _GRAM_MAX_COLUMNS, the Gram matrix Aᵀ W A, and one allreduce adds the ranks'
    sums; where the centred Gram's Cholesky factor is accurate (_gram_factor), that is R.
    Otherwise a second pass of Householder QRs on each rank, and one allgather of the ranks' R.
    reference (n, the solution's [w..., b]): what the solution's error is measured against,
    where z is a correction to it (IRLS's step); by default the solution itself."""
    gram = n <= _GRAM_MAX_COLUMNS
    # the weighted column sums, the weights' sum, the rows, the extra figures, Aᵀ W A
    sums = np.zeros(n + 2 + extra + (n * n if gram else 0))
    tail = n + 2 + extra
    for A, w, more in blocks():
        if w is None:
            sums[: n + 1] += np.append(A.sum(axis=0), len(A))
            if gram:
                sums[tail:] += (A.T @ A).ravel()
        else:
            sums[: n + 1] += np.append(w @ A, w.sum())
            if gram:  # BᵀB of B = √w A: BLAS's syrk, half the multiply-adds of AᵀWA's gemm
                A *= np.sqrt(w)[:, None]  # in place: no block-sized array to map and fault in
                sums[tail:] += (A.T @ A).ravel()
        sums[n + 1] += len(A)
        sums[n + 2 : tail] += more
    sums = job.allreduce_sum(sums, "column_sums")  # Horovod: every rank's sums
    weight, count = float(sums[n]), int(sums[n + 1])
    means = sums[:n] / weight
    r = _gram_factor(sums[tail:].reshape(n, n), means, weight, reference) if gram else None
    if r is None:
        r = _householder_factor(job, blocks, means, _block_rows(n))
    return Factor(r, means[:-1], float(means[-1]), count, weight), sums[n + 2 : tail]


def _gram_factor(
    gram: np.ndarray, means: np.ndarray, weight: float, reference: np.ndarray | None = None
) -> np.ndarray | None:
    """R from the Cholesky factor of the centred Gram matrix, or None where that would lose
    digits: the normal equations square the design's condition number κ (of its columns
    scaled to unit norm), and centring by subtraction multiplies the Gram's rounding by up to
    1 + mean²/variance of a column. Accepted when eps x that x κ² (1 + tan θ) is at most
    _GRAM_ABOVE, θ the angle between the centred target and the columns' span, and the
    residual sum of squares keeps 11 digits; the design's own QR is taken otherwise.

    With a reference (the point z corrects, IRLS's θ), the solution's error is measured
    against that instead: near the optimum the step and the span's share of z tend to zero,
    tan θ to infinity, and a bound relative to the step would refuse every Gram while its
    error, eps x that x κ² (‖u‖ + ‖residual‖ / σ_min) in the scaled columns' units, stays far
    below the coefficients' own digits. The residual sum of squares is then not asked for."""
    centred = gram - weight * np.outer(means, means)
    variance = np.diag(centred).copy()
    if not (variance > 0).all():
        return None  # a constant column (or the target): the QR's path counts it as zero
    scale = np.sqrt(variance)
    try:
        upper = np.linalg.cholesky(centred / np.outer(scale, scale)).T
    except np.linalg.LinAlgError:
        return None
    F = len(means) - 1
    s = np.linalg.svd(upper[:F, :F], compute_uv=False)
    fitted, residual = float(np.linalg.norm(upper[:F, F])), abs(float(upper[F, F]))
    eps, offset = np.finfo(np.float64).eps, float(np.max(np.diag(gram) / variance))
    if reference is not None:
        if residual == 0 or not s[-1] > 0:
            return None
        u = np.linalg.solve(upper[:F, :F], upper[:F, F])  # the scaled solution
        error = eps * offset * (s[0] / s[-1]) ** 2 * (np.linalg.norm(u) + residual / s[-1])
        w_error = error * scale[F] / scale[:F]  # each coefficient's, in its own units
        b_error = float(np.abs(means[:F]) @ w_error)  # b = z̄ - x̄·w carries w's
        errors = np.append(w_error, b_error)
        if np.any(errors > _GRAM_ABOVE * np.maximum(1.0, np.abs(reference))):
            return None
        return upper * scale
    if residual == 0 or fitted == 0:
        return None
    solve_bound = eps * offset * (s[0] / s[-1]) ** 2 * (1 + residual / fitted)
    rss_bound = eps * offset * (1 + (fitted / residual) ** 2)
    if solve_bound > _GRAM_ABOVE or rss_bound > _GRAM_RSS_ABOVE:
        return None
    return upper * scale  # the columns' scale back: R of [Xc yc]


def _householder_factor(job: Job, blocks, means: np.ndarray, rows: int) -> np.ndarray:
    """R of the weighted, centred design by Householder QRs of each rank's rows, then of the
    ranks' R."""
    n = len(means)
    leaf = max(_LEAF_ROWS, 2 * n)
    r = np.zeros((n, n))  # zero rows change no R
    for A, w, _ in blocks():
        A = A - means
        if w is not None:
            A *= np.sqrt(w)[:, None]
        for start in range(0, len(A), rows):
            block = A[start : start + rows]
            r = _triangle(np.concatenate([r, *_leaf_factors(block, leaf)]))
    if job.size > 1:
        r = _triangle(job.allgather_rows(r, "factors"))  # Horovod: every rank's R
    return r


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
    for block in shard.blocks(max(1, _BLOCK_BYTES // (16 * (F + 1)))):
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

    params: np.ndarray  # [w..., b]
    loss: float  # mean squared error over all rows at params (weighted: Σ w r² / rows)
    factor: Factor
    l2: float  # the ridge penalty it was solved with
    dependent: tuple[int, ...] = ()  # the columns that make the design singular, if any
    robust: np.ndarray | None = None  # --cov_type HC0/HC1: the sandwich covariance
    cov_type: str = "nonrobust"

    @property
    def objective(self) -> float:
        """What the fit minimised: the loss plus the ridge penalty."""
        return objective(self.loss, self.params, self.l2)


def bias_bound(factor: Factor, params: np.ndarray) -> float:
    """The relative error float64 leaves in b = ȳ - x̄·w: eps x (|ȳ| + |x̄|·|w|) / |b|, large
    where the means are large and b small (NIST's Wampler and Pontius sets)."""
    scale = abs(factor.y_mean) + float(np.abs(factor.x_mean) @ np.abs(params[:-1]))
    return float(np.finfo(np.float64).eps * scale / max(abs(params[-1]), np.finfo(np.float64).tiny))


def optimum(job: Job, shard: Shard, l2: float, names: Sequence[str] | None = None) -> Optimum:
    """The exact optimum over the whole dataset, the same on every rank; rank 0 warns when
    the design is singular."""
    factor = factorise(job, shard)
    solution = solve(factor, job.warn, factor.count * l2, names)
    # Only where the solve may have lost digits, in w or in b: the refinement's pass over the
    # rows costs as much as the factorisation. Every rank holds the same R and means, so every
    # rank decides the same and takes the same collectives.
    lost = solution.error_bound > _REFINE_ABOVE
    lost = lost or bias_bound(factor, solution.params) > _REFINE_BIAS_ABOVE
    if lost and not solution.dependent:
        gradient = residual_gradient(job, shard, factor, solution.params[:-1])
        solution = refine(factor, solution, gradient, l2)
    loss = factor.rss(solution.params[:-1]) / factor.count
    return Optimum(solution.params, loss, factor, l2, solution.dependent)


def objective(loss: float, params: np.ndarray, l2: float) -> float:
    """mean squared error + l2·‖w‖² (the bias not penalised): what both solvers minimise."""
    return loss + l2 * float(params[:-1] @ params[:-1]) if l2 else loss
