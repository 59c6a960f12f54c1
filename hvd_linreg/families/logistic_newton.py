"""The logistic family's exact solver and its statistics: Newton's method (IRLS) on the whole
dataset, one allreduce per iteration, and the maximum-likelihood statistics of its optimum.

Each iteration every rank sums, over its own rows, the log-loss, the gradient and the Hessian
(A = [X 1], W = diag(p(1-p))): Aᵀ(p - y) and AᵀWA, (F+1)² + (F+1) numbers and a few counts,
in ONE allreduce. Every rank then holds the same sums and takes the same step, so the ranks
agree without a broadcast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.config import UsageError
from hvd_linreg.ranks import Job

MAX_FEATURES = 1024  # the (F+1)² Hessian is allreduced and factored on every rank
MAX_ITERATIONS = 100
# Converged when no coefficient's Newton step is more than this, relative to the coefficient
# (or absolute, for coefficients below 1): Newton's convergence is quadratic, so the step
# before that one was already below the square root of it.
TOLERANCE = 1e-10
# |x·w + b| beyond this gives p(1 - p) below 1e-16: float64 rounds such a probability to 0 or 1.
SATURATED = 37.0
# A direction whose information is below this fraction of the data's spread along it has
# lost it to rows whose probabilities saturated: the mark of quasi-separation.
INFORMATION = 1e-10


def log_loss_terms(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-log p(y | z) per row, p = sigmoid(z), without overflow:
    max(z, 0) - z·y + log(1 + e^-|z|)."""
    return np.maximum(z, 0.0) - z * y + np.log1p(np.exp(-np.abs(z)))


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-z) without overflow for any z."""
    return np.exp(-np.logaddexp(0.0, -z))


@dataclass(frozen=True)
class Sums:
    """One iteration's sums over every rank's rows, at theta."""

    loss: float  # sum of the log-loss terms
    gradient: np.ndarray  # Aᵀ(p - y), of the unpenalised sum
    hessian: np.ndarray  # AᵀWA, of the unpenalised sum
    count: int
    positives: float  # sum of y
    misclassified: int  # rows on the wrong side of x·w + b = 0, or on it
    saturated: int  # rows whose fitted probability rounds to 0 or 1


def _sums(job: Job, shard, theta: np.ndarray, block_rows: int) -> Sums:
    """The sums of Sums over this rank's rows, then over all ranks (one allreduce)."""
    k = len(theta)
    acc = np.zeros(k * k + k + 5)
    for X, y in shard.blocks(block_rows):
        A = np.c_[X.astype(np.float64), np.ones(len(y))]
        y = y.astype(np.float64)
        z = A @ theta
        p = sigmoid(z)
        acc[: k * k] += ((A * (p * (1.0 - p))[:, None]).T @ A).ravel()
        acc[k * k : k * k + k] += A.T @ (p - y)
        wrong = np.count_nonzero(np.where(y > 0.5, z <= 0.0, z >= 0.0))
        saturated = np.count_nonzero(np.abs(z) > SATURATED)
        acc[k * k + k :] += [log_loss_terms(z, y).sum(), len(y), y.sum(), wrong, saturated]
    # Horovod: the ranks' sums, so that every rank takes the same Newton step.
    acc = job.allreduce_sum(acc, "newton")
    tail = acc[k * k + k :]
    return Sums(
        float(tail[0]),
        acc[k * k : k * k + k],
        acc[: k * k].reshape(k, k),
        int(tail[1]),
        float(tail[2]),
        int(tail[3]),
        int(tail[4]),
    )


@dataclass(frozen=True)
class Optimum:
    """The minimiser of mean log-loss + l2·‖w‖² over the whole dataset, the same on every rank."""

    params: np.ndarray  # [w..., b]
    loss: float  # the mean log-loss there
    objective: float  # loss + l2·‖w‖²
    l2: float
    iterations: int  # Newton iterations (allreduces) it took
    gradient_norm: float  # ‖∇ objective‖₂ at params
    count: int  # rows
    positives: float  # rows with y = 1
    fisher: np.ndarray = field(repr=False)  # AᵀWA at params: the unpenalised Fisher information


def _penalty(theta: np.ndarray, l2: float) -> tuple[float, np.ndarray, np.ndarray]:
    """l2·‖w‖², its gradient and its Hessian (the bias is not penalised)."""
    mask = np.append(np.ones(len(theta) - 1), 0.0)
    return l2 * float(theta[:-1] @ theta[:-1]), 2.0 * l2 * mask * theta, np.diag(2.0 * l2 * mask)


def _objective(s: Sums, theta: np.ndarray, l2: float):
    """(objective, its gradient, its Hessian) of the mean log-loss + l2·‖w‖², from the sums."""
    value, grad, hess = _penalty(theta, l2)
    n = max(s.count, 1)
    return s.loss / n + value, s.gradient / n + grad, s.hessian / n + hess


def optimum(job: Job, shard, l2: float, names: Sequence[str] | None = None) -> Optimum:
    """Newton's method from zero, halving a step that does not lower the objective; a
    UsageError where the likelihood has no finite maximum (separation) or the design is
    singular."""
    block = max(1024, (16 << 20) // (8 * (shard.num_features + 1) ** 2))
    theta = np.zeros(shard.num_features + 1)
    best, step, scale = None, None, 1.0
    for iteration in range(1, MAX_ITERATIONS + 1):
        s = _sums(job, shard, theta, block)
        value, grad, hess = _objective(s, theta, l2)
        # Worse (or NaN): halve the step. Rounding lets a step near the optimum raise the
        # objective by a few ulps; that is not worse.
        if best is not None and not value <= best[1] + 1e-13 * abs(best[1]):
            scale /= 2
            theta = best[0] + scale * step
            continue
        best, scale = (theta, value, s), 1.0
        _check_separation(s, l2)
        step = _newton_step(hess, grad, s, l2)
        if np.all(np.abs(step) <= TOLERANCE * np.maximum(1.0, np.abs(theta))):
            if l2 == 0 and s.saturated:
                _check_information(job, shard, s, block)
            return _result(theta, value, grad, s, l2, iteration)
        theta = theta + step
    raise UsageError(
        f"Newton's method did not converge in {MAX_ITERATIONS} iterations"
        + (f": {_saturated(best[2])}" if best[2].saturated and l2 == 0 else "")
    )


def _result(theta, value, grad, s: Sums, l2: float, iterations: int) -> Optimum:
    loss = s.loss / s.count if s.count else math.nan
    norm = float(np.linalg.norm(grad))
    return Optimum(theta, loss, value, l2, iterations, norm, s.count, s.positives, s.hessian)


def _check_separation(s: Sums, l2: float) -> None:
    """Without a penalty, a hyperplane that puts every row on its own class's side makes the
    log-loss go to 0 as the coefficients grow: there is no finite maximum to report."""
    if l2 == 0 and s.misclassified == 0 and s.count:
        raise UsageError(
            "the classes are completely separated: a hyperplane x·w + b = 0 puts every row "
            "with y = 1 on one side and every row with y = 0 on the other, so the likelihood "
            "has no finite maximum and the coefficients would grow without bound. Drop the "
            "feature(s) that separate them, or fit with --l2 > 0"
        )


def _check_information(job: Job, shard, s: Sums, block_rows: int) -> None:
    """Quasi-separation: no hyperplane splits the classes, but one leaves every row on its
    class's side or on the plane. Along its normal the log-likelihood still rises without a
    maximum; Newton's steps then stop changing the loss, while the rows off the plane saturate
    and no longer inform that direction. So compare the information AᵀWA with the data's own
    spread AᵀA/4 (the information if every p were 1/2) in every direction: where the ratio is
    below INFORMATION, the estimate there is the point where rounding stopped it, not an optimum.
    Only for fits with saturated rows, and at the end: it costs one pass and one allreduce."""
    k = len(s.gradient)
    gram = np.zeros((k, k))
    for X, _ in shard.blocks(block_rows):
        A = np.c_[X.astype(np.float64), np.ones(len(X))]
        gram += A.T @ A
    # Horovod: every rank's sums, so that every rank decides the same.
    gram = job.allreduce_sum(gram, "newton_gram") / 4.0
    try:
        factor = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return  # collinear features: _newton_step refuses those
    inverse = np.linalg.inv(factor)
    if np.linalg.eigvalsh(inverse @ s.hessian @ inverse.T).min() < INFORMATION:
        raise UsageError(_saturated(s))


def _saturated(s: Sums) -> str:
    return (
        f"{s.saturated} of {s.count} rows have fitted probabilities of 0 or 1 while the "
        "coefficients keep growing: the classes are (quasi-)separated, and the likelihood "
        "has no finite maximum. Drop the feature(s) that separate them, or fit with --l2 > 0"
    )


def _newton_step(hess: np.ndarray, grad: np.ndarray, s: Sums, l2: float) -> np.ndarray:
    """-H⁻¹g by Cholesky; a Hessian that is not positive definite is a UsageError saying why."""
    try:
        factor = np.linalg.cholesky(hess)
    except np.linalg.LinAlgError:
        if s.saturated and l2 == 0:
            raise UsageError(f"the Hessian became singular: {_saturated(s)}") from None
        raise UsageError(
            "the Hessian of the log-loss is singular: features are collinear or constant; "
            "drop the redundant ones, or fit with --l2 > 0"
        ) from None
    return -np.linalg.solve(factor.T, np.linalg.solve(factor, grad))


@dataclass(frozen=True)
class Coefficient:
    name: str  # the feature's column name, w[j], or b
    estimate: float
    std_error: float | None
    z: float | None
    p: float | None  # two-sided: P(|Z| > |z|) for a standard normal Z


@dataclass(frozen=True)
class Statistics:
    """Maximum-likelihood statistics of the exact optimum, as a logistic regression package
    reports them: Wald standard errors from the inverse Fisher information, z and p values,
    the log-likelihood, the intercept-only model's, and McFadden's pseudo-R²."""

    coefficients: list[Coefficient]  # w[0] ... w[F-1], then b
    log_likelihood: float
    null_log_likelihood: float | None  # of the model with the bias alone
    pseudo_r2: float | None  # McFadden's: 1 - log_likelihood / null_log_likelihood
    iterations: int
    gradient_norm: float
    undefined: dict[str, str] = field(default_factory=dict)  # statistic -> why it is None

    def as_json(self) -> dict:
        return {
            "log_likelihood": self.log_likelihood,
            "null_log_likelihood": self.null_log_likelihood,
            "pseudo_r2": self.pseudo_r2,
            "newton_iterations": self.iterations,
            "gradient_norm": self.gradient_norm,
            "coefficients": [vars(c) for c in self.coefficients],
            "undefined": self.undefined,
        }

    def table(self) -> list[str]:
        """The fit statistics and coefficient table that the run's summary ends with."""
        from hvd_linreg.statistics import cell, coefficient_lines

        first = (
            f"Statistics of the exact optimum: log-likelihood {self.log_likelihood:.6g}, "
            f"null log-likelihood {cell(self.null_log_likelihood, '.6g')}, McFadden's "
            f"pseudo-R² {cell(self.pseudo_r2, '.6g')}; Newton: {self.iterations} iterations, "
            f"gradient norm {self.gradient_norm:.3g}"
        )
        rows = [(c.name, c.estimate, c.std_error, c.z, c.p) for c in self.coefficients]
        return [first, *coefficient_lines(rows, "z", self.undefined)]


def describe(optimum: Optimum, feature_names: tuple[str, ...] | None = None) -> Statistics:
    """The statistics of the exact optimum; each w is named by its column where the data
    names them, else w[j]."""
    n, k, params = optimum.count, len(optimum.params), optimum.params
    names = [*(feature_names or (f"w[{j}]" for j in range(k - 1))), "b"]
    log_likelihood = -optimum.loss * n
    undefined: dict[str, str] = {}
    null = _null_log_likelihood(n, optimum.positives)
    if null is None or null == 0:
        undefined["null_log_likelihood"] = undefined["pseudo_r2"] = "the target is constant"
        null = None
    pseudo_r2 = None if null is None else 1.0 - log_likelihood / null
    newton = (optimum.iterations, optimum.gradient_norm)
    why = None
    if optimum.l2 > 0:
        why = "a penalised fit (--l2 > 0): maximum likelihood's errors do not apply"
    elif n <= k:
        why = f"{n} rows for {k} coefficients"
    if why is not None:
        for name in ("std_error", "z", "p"):
            undefined[name] = why
        estimates = [Coefficient(nm, v, None, None, None) for nm, v in zip(names, params.tolist())]
        return Statistics(estimates, log_likelihood, null, pseudo_r2, *newton, undefined)
    # Var(theta) = (AᵀWA)⁻¹: the inverse Fisher information of the log-likelihood's sum.
    std_error = np.sqrt(np.diag(np.linalg.inv(optimum.fisher)))
    z = params / std_error
    p = [math.erfc(abs(v) / math.sqrt(2.0)) for v in z.tolist()]
    columns = zip(names, params.tolist(), std_error.tolist(), z.tolist(), p)
    coefficients = [Coefficient(*c) for c in columns]
    return Statistics(coefficients, log_likelihood, null, pseudo_r2, *newton, undefined)


def _null_log_likelihood(n: int, positives: float) -> float | None:
    """The log-likelihood of p = ȳ for every row: the best model without features."""
    if n == 0 or positives <= 0 or positives >= n:
        return None
    mean = positives / n
    return positives * math.log(mean) + (n - positives) * math.log1p(-mean)
