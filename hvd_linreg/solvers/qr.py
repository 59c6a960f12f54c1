"""The R factor of a whole dataset's centred design, by a distributed Householder QR (TSQR), or
by the Gram matrix's Cholesky factor where that is as accurate: the factorisation that the
least-squares solve (least_squares.py), IRLS's weighted steps (irls.py) and the statistics start
from. least_squares.py's docstring says how the two are chosen and why a QR."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import solve_triangular

from hvd_linreg.data import Shard
from hvd_linreg.data.passes import FACTOR_BLOCK_BYTES, block_rows
from hvd_linreg.runtime.ranks import Job

# A block of rows for factorise_blocks: [X z] in float64, their weights (None: 1), extra sums
Block = tuple[np.ndarray, "np.ndarray | None", np.ndarray]

# Rows per Householder QR: short enough for LAPACK's unblocked QR to work in cache, and NumPy
# runs a block's QRs in one call; at least twice R's rows, so that each QR halves what it gets.
_LEAF_ROWS = 1024

# The centred Gram matrix's Cholesky factor serves as R (one pass, no QR) where its error bound
# is at most this, and the residual sum of squares' at most _GRAM_RSS_ABOVE (relative): well
# conditioned designs, such as synthetic ones; others take the Householder QR. Up to this many
# columns: the Gram's sums travel in the first allreduce, (F+1)² numbers.
_GRAM_ABOVE = 1e-14
_GRAM_RSS_ABOVE = 1e-11
_GRAM_MAX_COLUMNS = 513


@dataclass(frozen=True)
class Factor:
    """R of the centred design [Xc | yc] = Q R over the whole dataset (all ranks), with
    Xc = X - x_mean and yc = y - y_mean: everything a least-squares fit and its statistics
    start from."""

    METHOD = "the distributed QR"  # how it solves, in the summary's words

    r: np.ndarray  # (F+1, F+1) upper triangular; its last column is Qᵀ yc
    x_mean: np.ndarray  # (F,) column means of X
    y_mean: float
    count: int  # rows over all ranks
    weight: float = 0.0  # the weights' sum over all ranks (the rows, unweighted)
    log_weight: float = 0.0  # Σ log w over the rows (WLS's log-likelihood has it); 0 unweighted
    # False: the design has no intercept (--no_intercept): R of [X y] itself, the means held
    # as 0, so that b = ȳ - x̄·w is 0 and every sum of squares is uncentred
    centred: bool = True
    raw_means: np.ndarray | None = None  # uncentred: the columns' weighted means [x̄, ȳ]

    @property
    def implicit_constant(self) -> bool:
        """Whether a design without an intercept has the constant in its columns' span (a full
        coding of levels): statsmodels then reports the centred R² and F, as with one."""
        if self.centred or self.raw_means is None:
            return False
        F = len(self.x_mean)
        ones = self.weight * self.raw_means[:F]  # Xᵀ W 1
        projection = np.linalg.lstsq(self.r[:F, :F].T, ones, rcond=None)[0]
        return bool(self.weight - projection @ projection <= 1e-10 * self.weight)

    @property
    def centred_y_ss(self) -> float:
        """Σ w (y - ȳ)², the centred total sum of squares, from an uncentred factor's."""
        if self.centred or self.raw_means is None:
            return self.y_ss
        return self.y_ss - self.weight * float(self.raw_means[-1]) ** 2

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
        centred √W Xc, the means and the weights' sum; XᵀWX alone without an intercept."""
        F = len(self.x_mean)
        upper, wx = self.r[:F, :F], self.weight * self.x_mean
        if not self.centred:
            return upper.T @ upper
        xx = upper.T @ upper + np.outer(wx, self.x_mean)
        return np.block([[xx, wx[:, None]], [wx[None, :], np.array([[self.weight]])]])

    def condition_number(self) -> tuple[float | None, str]:
        """√(λmax / λmin) of AᵀWA, A = [X 1] (X alone without an intercept), as statsmodels
        reports it, or None and why. From a triangle T with TᵀT = AᵀWA, R of the centred
        design and [√W x̄, √W] below it: its singular values are the square roots of AᵀWA's
        eigenvalues, without squaring the condition number (statsmodels' eigenvalues of AᵀWA
        lose a design such as NIST's Filip)."""
        F = len(self.x_mean)
        upper = self.r[:F, :F]
        if self.centred:
            root = np.sqrt(self.weight)
            corner = np.array([[root]])
            upper = np.block([[upper, np.zeros((F, 1))], [root * self.x_mean[None, :], corner]])
        singular = np.linalg.svd(upper, compute_uv=False)
        if singular[-1] > 0:
            return float(singular[0] / singular[-1]), ""
        return None, "the design is singular"

    def inverse_diagonal(self) -> np.ndarray:
        """diag((AᵀWA)⁻¹) over [w..., b] for A = [X 1] (b's 1/Σw where uncentred, which has
        no b): what each coefficient's variance scales."""
        variance = self.variances()
        variance[-1] += 1.0 / self.weight  # Σ w: the rows, unweighted
        return variance

    def variances(self) -> np.ndarray:
        """diag((Xcᵀ Xc)⁻¹) = the squared row norms of R⁻¹, and then x̄ᵀ (Xcᵀ Xc)⁻¹ x̄: what
        the standard errors of w and b scale (Var(b) = σ² (1/N + x̄ᵀ (Xcᵀ Xc)⁻¹ x̄))."""
        F = len(self.x_mean)
        upper = self.r[:F, :F]
        inverse = solve_triangular(upper, np.eye(F), lower=False)
        u = solve_triangular(upper, self.x_mean, lower=False, trans="T")  # R⁻ᵀ x̄
        return np.append(np.sum(np.square(inverse), axis=1), np.sum(np.square(u)))


def triangle(stacked: np.ndarray) -> np.ndarray:
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
    """Rows per float64 block of n columns: about FACTOR_BLOCK_BYTES, and at least a leaf's
    worth."""
    return max(_LEAF_ROWS, 2 * n, block_rows(n, budget=FACTOR_BLOCK_BYTES))


def factorise(job: Job, shard: Shard, centre: bool = True) -> Factor:
    """The R factor of the shard's whole centred design [X y] (centre False: of [X y] as it
    is, a model without an intercept), the same on every rank."""
    n = shard.num_features + 1
    rows = _block_rows(n)

    def blocks() -> Iterator[Block]:
        for X, y, weight in _blocks(shard, rows):
            yield np.c_[X, y], weight, [0.0 if weight is None else float(np.log(weight).sum())]

    factor, (log_weight,) = factorise_blocks(job, blocks, n, extra=1, centre=centre)
    return replace(factor, log_weight=float(log_weight))


def factorise_blocks(
    job: Job,
    blocks: Callable[[], Iterable[Block]],
    n: int,
    extra: int = 0,
    reference: np.ndarray | None = None,
    centre: bool = True,
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
    where z is a correction to it (IRLS's step); by default the solution itself. centre
    False: the design as it is, its means taken as 0 (a model without an intercept)."""
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
    raw = sums[:n] / weight
    means = raw if centre else np.zeros(n)
    r = _gram_factor(sums[tail:].reshape(n, n), means, weight, reference) if gram else None
    if r is None:
        r = _householder_factor(job, blocks, means, _block_rows(n))
    factor = Factor(
        r,
        means[:-1],
        float(means[-1]),
        count,
        weight,
        centred=centre,
        raw_means=None if centre else raw,
    )
    return factor, sums[n + 2 : tail]


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
            r = triangle(np.concatenate([r, *_leaf_factors(block, leaf)]))
    if job.size > 1:
        r = triangle(job.allgather_rows(r, "factors"))  # Horovod: every rank's R
    return r
