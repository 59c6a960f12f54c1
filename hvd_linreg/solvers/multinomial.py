"""The exact multinomial logit: Newton's method on the full log-likelihood of K classes, the
first the reference, as statsmodels' MNLogit and R's nnet::multinom parametrise it.

The coefficients are an (F + 1) x (K - 1) matrix B, a column per class but the first, its last
row the intercepts: class j's linear predictor is η_j = x·B[:F, j] + B[F, j] (η of the first is
0), and P(y = j | x) = exp(η_j) / (1 + Σ_l exp(η_l)). Each iteration is one pass over each
rank's rows and one allreduce of the log-likelihood, its gradient (F + 1)(K - 1) and the
information matrix's (K - 1)(F + 1) square, whose block (j, l) is Xᵀ diag(w p_j (δ_jl - p_l)) X;
then a Newton step, halved while the log-likelihood falls. The start is the intercept-only
model, whose log-likelihood is the null one.

An offset o (--offset) is added to the log-odds of every class against the reference:
η_j = x·B[:F, j] + B[F, j] + o for j >= 1, η of the first 0; with K = 2 it is the logistic
model's offset. The intercept-only model with an offset has no closed form: it is fitted first,
by the same Newton's method on the intercepts alone, and the full fit starts from it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.passes import block_rows, summed
from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import unvec, vec
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.solvers import class_blocks
from hvd_linreg.solvers.blocks import BLOCK_ROWS
from hvd_linreg.solvers.start import given_start

MAX_ITERATIONS = 100
TOLERANCE = 1e-10  # a step of at most this, relative to each coefficient (absolute below 1)
OBJECTIVE_TOLERANCE = 1e-12  # and a change of the log-likelihood of at most this, relative
HALVINGS = 40


@dataclass(frozen=True)
class MultinomialFit:
    """The maximum-likelihood fit: B, its information matrix (class-major: B[:, j]'s rows
    are j(F+1) .. (j+1)(F+1) - 1), and the likelihood's figures."""

    params: np.ndarray  # (F + 1) x (K - 1)
    # (K - 1)(F + 1) square; a wide design's by blocks (class_blocks.ClassGram)
    information: np.ndarray | class_blocks.ClassGram
    log_likelihood: float
    null_log_likelihood: float
    weight: float  # Σ w: the rows, each as many times as its weight
    rows: int
    class_weights: np.ndarray  # Σ w by class
    iterations: int
    gradient_norm: float
    converged: bool = True  # False: --max_iter ran out first (the last accepted iterate)


def log_probabilities(X, B: np.ndarray, offset=None) -> np.ndarray:
    """log P(y = k | x) for every row and class (rows x K), the first class the reference;
    offset (None: 0): each row's, added to every other class's log-odds against it. X: an
    array or a design matrix (matrix/)."""
    if isinstance(X, DesignMatrix):
        eta = X.matvec(B[:-1]) + B[-1]
    else:
        eta = np.asarray(X, np.float64) @ B[:-1] + B[-1]
    if offset is not None:
        eta = eta + offset[:, None]
    top = np.maximum(eta.max(axis=1), 0.0)
    log_den = top + np.log(np.exp(-top) + np.exp(eta - top[:, None]).sum(axis=1))
    return np.column_stack([-log_den, eta - log_den[:, None]])


def fit(
    job, shard, K: int, tol: float | None = None, max_iter: int | None = None, l2=0.0, start=None
):
    """Newton's method from the intercept-only model, or from start (a warm start: B,
    (F + 1) x (K - 1)) (tol: the step's bound, relative, and
    tol/100 the log-likelihood's; max_iter: the iterations); UsageError where the information
    matrix is singular (collinear features, a class that the features separate) or it does
    not converge. l2: minimise the mean log-loss + l2 Σ_k ‖w_k‖² over the K classes' w_k in
    scikit-learn's symmetric form (Σ_k w_k = 0), which in B's is l2 tr(W (I - 11ᵀ/K) Wᵀ),
    W = B[:F]; the intercepts are not penalised."""
    tolerances = (
        TOLERANCE if tol is None else tol,
        OBJECTIVE_TOLERANCE if tol is None else tol / 100,
    )
    F = shard.num_features
    counts = _class_sums(job, shard, K)
    weight, rows, class_weights = counts[0], int(counts[1]), counts[2:]
    B = np.zeros((F + 1, K - 1))
    B[F] = np.log(class_weights[1:] / class_weights[0])
    null = float(np.sum(class_weights * np.log(class_weights / weight)))
    if shard.carried_columns.offset_given:  # no closed form: the intercepts' own fit
        best, converged = _newton(job, shard, B[F:], K, (TOLERANCE, OBJECTIVE_TOLERANCE))
        if not converged:
            raise UsageError(_diverged(MAX_ITERATIONS))
        B[F], null = best[0][0], best[5]
    if start is not None:  # the null model is still the intercepts', for the statistics
        what = f"B, (F + 1) x (K - 1) = {F + 1} x {K - 1} for {F} features and {K} classes"
        B = given_start(start, (F + 1, K - 1), what)
    iterations = max_iter or MAX_ITERATIONS
    best, converged = _newton(job, shard, B, K, tolerances, iterations, 2 * l2 * weight)
    if not converged and max_iter is None:
        raise UsageError(_diverged(iterations))
    # not converged: the user's limit ran out, and the fit is the last iterate
    return _fit(best, null, weight, rows, class_weights, converged)


def _newton(job, shard, B, K: int, tolerances, iterations=MAX_ITERATIONS, ridge=0.0):
    """Newton's method from B, on every feature and the intercepts, or (B of one row) on the
    intercepts alone; the last accepted iterate (B, the objective, the information, the
    gradient, the iteration, the log-likelihood), and whether it converged."""
    step_tol, value_tol = tolerances
    best, step, scale, previous = None, None, 1.0, None
    progress = job.progress("Newton's method for classes")
    for iteration in range(1, iterations + 1):
        progress.update(iteration - 1, iteration - 1)
        loglik, gradient, information = _pass(job, shard, B, K)
        value, gradient, information = _penalized(loglik, gradient, information, B, ridge)
        if best is not None and not value >= best[1] - 1e-13 * abs(best[1]):
            if scale < 2.0**-HALVINGS:
                break
            scale /= 2  # worse (or NaN): halve the step
            B = best[0] + scale * step
            continue
        previous = None if best is None else best[1]
        best, scale = (B, value, information, gradient, iteration, loglik), 1.0
        step = _newton_step(information, gradient, K)
        small = np.all(np.abs(step) <= step_tol * np.maximum(1.0, np.abs(B)))
        settled = previous is not None and abs(value - previous) <= value_tol * (abs(value) + 0.1)
        if small and (settled or iteration == 1):
            progress.close()
            return best, True
        B = B + step
    progress.close()
    return best, False


def _diverged(iterations: int) -> str:
    return (
        f"Newton's method did not converge in {iterations} iterations: the fitted "
        "probabilities of some rows reach 0 or 1 while the coefficients keep growing, the mark "
        "of classes the features (quasi-)separate, where the likelihood has no finite maximum. "
        "Drop the feature(s) that separate them"
    )


def _penalized(loglik, gradient, information, B: np.ndarray, ridge: float):
    """The objective ℓ - ridge/2 tr(W M Wᵀ), its gradient and its information (M = I - 11ᵀ/K
    on the K - 1 columns, the intercepts' row left out)."""
    if not ridge:
        return loglik, gradient, information
    F, K1 = B.shape[0] - 1, B.shape[1]
    M = np.eye(K1) - 1.0 / (K1 + 1)
    W = B[:F]
    value = loglik - ridge / 2 * float(np.sum((W @ M) * W))
    gradient = gradient.copy()
    gradient[:F] -= ridge * (W @ M)
    if isinstance(information, class_blocks.ClassGram):
        return value, gradient, information.with_ridge(ridge)
    features = np.diag(np.append(np.ones(F), 0.0))
    return value, gradient, information + ridge * np.kron(M, features)


def _fit(best, null, weight, rows, class_weights, converged=True) -> MultinomialFit:
    B, _, information, gradient, iteration, value = best
    norm = float(np.linalg.norm(gradient))
    args = (B, information, value, null, weight, rows, class_weights, iteration, norm)
    return MultinomialFit(*args, converged)


def _newton_step(information: np.ndarray, gradient: np.ndarray, K: int) -> np.ndarray:
    """I⁻¹ g as B's shape, by Cholesky on the information scaled to unit diagonal (a wide
    design's through its blocks)."""
    if isinstance(information, class_blocks.ClassGram):
        return information.solve(gradient)
    g = vec(gradient)  # class-major, as the information is
    d = np.sqrt(np.diag(information))
    if not (d > 0).all():
        raise UsageError(_singular())
    try:
        factor = np.linalg.cholesky(information / np.outer(d, d))
    except np.linalg.LinAlgError:
        raise UsageError(_singular()) from None
    step = np.linalg.solve(factor.T, np.linalg.solve(factor, g / d)) / d
    return unvec(step, K - 1)


def _singular() -> str:
    return (
        "the information matrix of the multinomial model is singular: features are collinear "
        "or constant, or a class is separated from the others; drop the redundant features"
    )


def _class_sums(job, shard, K: int) -> np.ndarray:
    """[Σ w, rows, Σ w by class] over every rank's rows."""

    def sums(rows):
        w = rows.weights()
        by_class = np.bincount(rows.y.astype(np.int64), weights=w, minlength=K)[:K]
        return np.r_[w.sum(), len(w), by_class]

    return summed(job, shard.blocks(), sums, K + 2, "multinomial_classes")


def _pass(job, shard, B: np.ndarray, K: int) -> tuple[float, np.ndarray, np.ndarray]:
    """The log-likelihood at B, its gradient (B's shape) and the information matrix, summed
    over every rank's rows: one allreduce. B of one row: the intercept-only model's."""
    p, k1 = B.shape
    if p > 1 and shard.structured:
        return _wide_pass(job, shard, B)
    pairs = [(j, m) for j in range(k1) for m in range(j, k1)]
    value, gradient, blocks = 0.0, np.zeros((k1, p)), np.zeros((len(pairs), p, p))
    # The intercept-only model (Newton's start) without offsets gives every row the same
    # probabilities π, and block (j, m) is π_j (δ_jm - π_m) Σ w x xᵀ: one Gram for them all.
    offsets = shard.carried_columns.offset_given
    same = None if B[:-1].any() or offsets else _softmax(B[-1][:, None])[1][:, 0]
    most = block_rows(p)  # a block's design and its scaled copy stay in the cache
    design, scaled = np.empty((most, p)), np.empty((most, p))
    for block in shard.blocks(most):
        rows = block.counted()
        X, Z = design[: len(rows.y)], scaled[: len(rows.y)]
        if p > 1:
            X[:, :-1] = rows.X[:, : p - 1]
        X[:, -1] = 1.0
        w = rows.weights()
        loglik, P, residual = _terms(X, rows.y, B, rows.offset)
        value += float(w @ loglik)
        gradient += (residual * w) @ X
        if same is not None:
            _add_gram(blocks[0], X, w, Z)
            continue
        for i, (j, m) in enumerate(pairs):
            # w p_j (δ_jm - p_m) is >= 0 on the diagonal and <= 0 off it
            if j == m:
                _add_gram(blocks[i], X, w * P[j] * (1.0 - P[j]), Z)
            else:
                _add_gram(blocks[i], X, w * P[j] * P[m], Z, subtract=True)
    if same is not None:
        gram = blocks[0].copy()
        for i, (j, m) in enumerate(pairs):
            blocks[i] = gram * (same[j] * ((j == m) - same[m]))
    return _summed(job, value, gradient.T, blocks, pairs)


def _wide_pass(job, shard, B: np.ndarray):
    """_pass's figures for a wide design (categorical or sparse parts, matrix/): the
    information by blocks (class_blocks.py), never the design's dense rows."""
    F, K1 = B.shape[0] - 1, B.shape[1]
    plan = class_blocks.plan_for(shard.design_template(), K1)
    size = len(class_blocks.pairs_of(K1)) * class_blocks.sums_size(plan)
    value, gradient, sums = 0.0, np.zeros((F + 1, K1)), np.zeros(size)
    for block in shard.blocks(BLOCK_ROWS):
        rows = block.counted()
        eta = (rows.X.matvec(B[:-1]) + B[-1]).T
        if rows.offset is not None:
            eta += rows.offset
        log_den, P = _softmax(eta)
        hit = rows.y.astype(np.int64) == np.arange(1, K1 + 1)[:, None]
        w = rows.weights()
        value += float(w @ ((eta * hit).sum(axis=0) - log_den))
        residual = (hit - P) * w
        gradient[:F] += rows.X.transpose_matvec(residual.T)
        gradient[F] += residual.sum(axis=1)
        C = -P[:, None] * P[None, :] * w  # c_jm = w p_j (δ_jm - p_m)
        C[np.arange(K1), np.arange(K1)] += P * w
        class_blocks.add_pair_sums(rows.X, C, plan, sums)
    total = job.allreduce_sum(np.concatenate([[value], gradient.ravel(), sums]), "multinomial_pass")
    value, gradient = float(total[0]), total[1 : 1 + gradient.size].reshape(F + 1, K1)
    return value, gradient, class_blocks.ClassGram(plan, K1, total[1 + gradient.size :])


def _add_gram(out: np.ndarray, X: np.ndarray, c: np.ndarray, Z: np.ndarray, subtract=False):
    """out ± Xᵀ diag(c) X for c >= 0, as ZᵀZ of Z = √c X (Z: X's shape, overwritten): BLAS's
    syrk, half the multiply-adds of XᵀcX's gemm."""
    np.einsum("ij,i->ij", X, np.sqrt(c), out=Z)  # each row by its √c
    if subtract:
        out -= Z.T @ Z
    else:
        out += Z.T @ Z


def _softmax(eta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For linear predictors η ((K - 1) x rows, the first class's 0): each row's
    log(1 + Σ_j exp η_j), and each class's probability but the first's (η's shape)."""
    top = np.maximum(eta.max(axis=0), 0.0)
    E = np.exp(eta - top)
    den = np.exp(-top) + E.sum(axis=0)
    return top + np.log(den), E / den


def _terms(X: np.ndarray, y: np.ndarray, B: np.ndarray, offset=None):
    """Each row's log-likelihood, and its probability and residual of each class but the
    first ((K - 1) x rows: a class's row contiguous); offset: each row's, or None."""
    eta = B.T @ X.T  # X's last column is 1: B's last row, the intercepts, adds in
    if offset is not None:
        eta += offset
    log_den, P = _softmax(eta)
    hit = y.astype(np.int64) == np.arange(1, len(eta) + 1)[:, None]
    return (eta * hit).sum(axis=0) - log_den, P, hit - P


def _summed(job, value: float, gradient: np.ndarray, blocks: np.ndarray, pairs: list):
    """The ranks' sums of the log-likelihood, its gradient and the information matrix, whose
    block (j, m) is blocks[i] for (j, m) = pairs[i], m >= j: one allreduce of its upper
    triangle."""
    p, k1 = gradient.shape
    information = np.zeros((k1 * p, k1 * p))
    for (j, m), block in zip(pairs, blocks):
        information[j * p : (j + 1) * p, m * p : (m + 1) * p] = block
    upper = np.triu_indices(k1 * p)
    sums = job.allreduce_sum(
        np.concatenate([[value], gradient.ravel(), information[upper]]), "multinomial_pass"
    )
    value, gradient = float(sums[0]), sums[1 : 1 + p * k1].reshape(p, k1)
    information = np.zeros((k1 * p, k1 * p))
    information[upper] = sums[1 + p * k1 :]
    information = information + np.triu(information, 1).T
    return value, gradient, information


def mean_log_loss(job, shard, B: np.ndarray) -> float:
    """The mean log-loss of B over every rank's rows, each row's times its weight."""

    def sums(rows):
        w, y = rows.weights(), rows.y.astype(np.int64)
        logp = log_probabilities(rows.X, B)
        return -(w @ logp[np.arange(len(y)), y]), w.sum()

    total, weight = summed(job, shard.blocks(), sums, 2, "multinomial_loss")
    return float(total / weight) if weight else math.nan
