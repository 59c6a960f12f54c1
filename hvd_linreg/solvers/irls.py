"""One distributed IRLS (iteratively reweighted least squares, Fisher scoring) for every family.

At θ = [w..., b] each row has its mean μ = g⁻¹(x·w + b), its working weight W = 1 / (V(μ) g'(μ)²)
and its working residual r = (y - μ) g'(μ). The Fisher-scoring step δ is the weighted least
squares of r on [X 1] (with a penalty, ridge rows that penalise w + δ), solved as the linear
family's exact fit is: the TSQR of √W·[Xc rc], or the weighted Gram's Cholesky factor where its
error bound allows (qr.factorise_blocks). For a canonical link the Fisher information is the
Hessian, and the step Newton's.

The penalty is a Penalty (solvers/penalty.py): --l2's ridge is P2 = 2 l2 for every coefficient
and no L1. The step's solve is the inner solver handed in (InnerSolve): ridge_step, least
squares on the factor with a ridge row per coefficient, by default. An L1 penalty needs a solve
that is not least squares (coordinate descent on the factor's Gram: the elastic net's path,
path.py), and IRLS refuses one it is not handed such a solver for.

Each iteration is one pass over each rank's rows and one allreduce (a second pass and an
allgather only where the Gram would lose digits): the sums of the weighted design's factor and
the loss. Every rank then holds the same sums and takes the same step, so the ranks agree
without a broadcast. A step that raises the objective (or leaves the family's domain) is
halved. IRLS stops when the step is at most TOLERANCE of every coefficient (absolute below 1)
and the objective changed by at most OBJECTIVE_TOLERANCE, relative, as R's glm.fit measures it;
--tol replaces TOLERANCE, and OBJECTIVE_TOLERANCE by tol / 100 (Limits). After --max_iter
iterations (MAX_ITERATIONS) without converging, the fit is the last iterate's, flagged
converged False: a warning, not an error, unless the family says the optimum is not finite
(separated classes), which more iterations would not reach. IRLS starts from the
intercept-only model, or from fit()'s start=.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from hvd_linreg.data.passes import block_rows, summed
from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import matrix
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import predictor
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers import blocks as blocks_module
from hvd_linreg.solvers import separation
from hvd_linreg.solvers.blocks import WIDE_GRAMS, WideGram
from hvd_linreg.solvers.least_squares import Solution, solve
from hvd_linreg.solvers.penalty import Penalty
from hvd_linreg.solvers.qr import Factor, factorise_blocks
from hvd_linreg.solvers.start import given_start

MAX_ITERATIONS = 100
# The step's size, relative to each coefficient (absolute for coefficients below 1): Fisher
# scoring converges at least linearly, Newton's method quadratically, so the step before was
# already far below the square root of it.
TOLERANCE = 1e-10
# |f - f_previous| / (|f| + 0.1), R's criterion (glm.control's epsilon is 1e-8)
OBJECTIVE_TOLERANCE = 1e-12
# The sums each pass adds up beside the factor's, then the family's COUNTS
_SUMS = ("loss", "pearson", "outside", "y", "weight")


@dataclass(frozen=True)
class Fit:
    """The minimiser of the family's mean loss + the penalty over the whole dataset, the same
    on every rank, and what its statistics need."""

    STATISTICS = "likelihood"  # its statistics' module (statistics.describe)
    dependent = ()  # a singular design ends IRLS with an error instead

    params: np.ndarray  # (F + 1) x 1 (coefficients.py): a column [w..., b]
    loss: float  # the mean loss there
    objective: float  # loss + penalty
    penalty: Penalty
    iterations: int  # passes (allreduces) it took
    gradient_norm: float  # ‖∇ objective‖₂ at params
    count: int  # rows (of weight > 0)
    y_mean: float  # weighted
    pearson: float  # Σ w (y - μ)² / V(μ): Pearson's χ²
    counts: dict[str, float]  # the family's COUNTS at params
    scale: float  # the dispersion φ: 1, or Pearson's χ² / (rows - coefficients)
    log_likelihood: float
    deviance: float  # Σ w d(y, μ)
    # the intercept-only model's (μ = ȳ, or with an offset its own fit); None where g(ȳ) is
    # not finite (a constant target)
    null_log_likelihood: float | None
    null_deviance: float | None
    method: str  # "Newton" for a canonical link, else "Fisher scoring"
    # √W [Xc rc] = Q R at params: the Fisher information XcᵀWXc = R[:F, :F]ᵀ R[:F, :F]
    factor: Factor = field(repr=False)
    robust: np.ndarray | None = None  # --cov_type HC0/HC1/cluster: the sandwich covariance
    cov_type: str = "nonrobust"
    clusters: int | None = None  # --cov_type cluster: how many
    converged: bool = True  # False: --max_iter ended IRLS first; params are its last iterate


@dataclass(frozen=True)
class Limits:
    """When IRLS stops (--tol, --max_iter; None: the module's constants): a step of at most
    tol of each coefficient and an objective change of at most tol / 100 (1e-12 at the
    default 1e-10), relative; at most max_iter iterations, each one pass."""

    tol: float | None = None
    max_iter: int | None = None

    @property
    def step(self) -> float:
        return TOLERANCE if self.tol is None else self.tol

    @property
    def objective(self) -> float:
        return OBJECTIVE_TOLERANCE if self.tol is None else self.tol * 1e-2

    @property
    def iterations(self) -> int:
        return MAX_ITERATIONS if self.max_iter is None else self.max_iter


# The step's solve: (the weighted design's factor, each coefficient's ridge, the point the
# ridge pulls toward) -> the step [δw..., δb]
InnerSolve = Callable[[Factor, np.ndarray, np.ndarray], Solution]


def ridge_step(factor: Factor | WideGram, ridge: np.ndarray, centre: np.ndarray) -> Solution:
    """The least squares of the working residuals with a ridge row per coefficient: on the
    factor's R, or a wide design's Gram by blocks (or by its products)."""
    if isinstance(factor, WIDE_GRAMS):
        step, dependent = factor.step(ridge, centre)
        return Solution(step, dependent, np.zeros((0, 0)))
    return solve(factor, lambda _: None, ridge, None, centre)


def optimum(
    job: Job,
    shard,
    family: Family,
    penalty: Penalty,
    intercept: bool = True,
    limits: Limits = Limits(),
    start=None,
    inner: InnerSolve = ridge_step,
) -> Fit:
    """IRLS from start ((F + 1) x 1, or [w..., b]; by default the intercept-only model,
    without an intercept η = 0), each step solved by inner; a UsageError where the fit has no
    finite optimum (the family says why) or the design is singular. A fit that reaches
    limits.iterations unconverged is its last iterate's, converged False."""
    if penalty.l1.any() and inner is ridge_step:
        raise ValueError("an L1 penalty needs an inner solver other than least squares")
    # A step may leave the family's domain for some rows: the passes count those and the step
    # is halved, so NumPy's warnings about them would only be noise on every rank's stderr.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _optimum(job, shard, family, penalty, intercept, limits, start, inner)


def _optimum(job: Job, shard, family: Family, penalty: Penalty, intercept, limits, start, inner):
    theta, rows, in_target, y_mean = _start(job, shard, family, intercept, start)
    # The step's ridge: f = LOSS_SCALE/n Σ d/2 + ½ Σ P2ⱼ wⱼ², so that Fisher scoring's system
    # is AᵀWA δ + P (w + δ) = AᵀW r with P = n P2 / LOSS_SCALE.
    ridge = rows * penalty.l2 / family.LOSS_SCALE
    penalized = penalty.penalized
    best, step, scale, previous = None, None, 1.0, None
    progress = job.progress(_method(family))
    for iteration in range(1, limits.iterations + 1):
        progress.update(iteration - 1, iteration - 1)
        factor, sums, gradient = _pass(job, shard, family, theta, intercept)
        sums["loss"] += in_target
        value = sums["loss"] / max(rows, 1) + penalty.value(theta[:-1])
        # Worse, NaN, or a mean outside the family's domain: halve the step. Rounding lets a
        # step near the optimum raise the objective by a few ulps; that is not worse.
        worse = best is not None and not value <= best[1] + 1e-13 * abs(best[1])
        if sums["outside"] or worse:
            if best is None:
                at = "start=" if start is not None else f"the target's mean {y_mean:g}"
                raise UsageError(
                    f"IRLS cannot start: --model {family.NAME} with the {family.link.name} "
                    f"link has no valid mean at {at}"
                )
            scale /= 2
            theta = best[0] + scale * step
            continue
        previous = None if best is None else best[1]
        best, scale = (theta, value, sums, factor, gradient), 1.0
        family.check_iteration(sums, rows, penalized)
        solution = inner(factor, ridge, -theta[:-1])
        if solution.dependent:
            raise UsageError(family.singular(sums, penalized))
        step = solution.params
        small = np.all(np.abs(step) <= limits.step * np.maximum(1.0, np.abs(theta)))
        settled = previous is None or abs(value - previous) <= limits.objective * (abs(value) + 0.1)
        if small and settled:
            progress.close()
            separation.check(job, shard, family, sums, factor, penalized)
            fit = _fit(job, shard, family, theta, value, gradient, sums, factor, penalty, iteration)
            return fit
        theta = theta + step
    why = family.not_converged(best[2], penalized)
    if why:  # no finite optimum to converge to: more iterations would not help
        raise UsageError(
            f"{_method(family)} did not converge in {limits.iterations} iterations{why}"
        )
    theta, value, sums, factor, gradient = best
    fit = _fit(job, shard, family, theta, value, gradient, sums, factor, penalty, iteration)
    return replace(fit, converged=False)


def _method(family: Family) -> str:
    return "Newton's method" if family.canonical else "Fisher scoring (IRLS)"


def not_converged(fit: Fit) -> str:
    """The warning of a fit that reached --max_iter unconverged."""
    method = "Newton's method" if fit.method == "Newton" else "Fisher scoring (IRLS)"
    return (
        f"{method} did not converge in {fit.iterations} iteration"
        f"{'s' * (fit.iterations != 1)}: the coefficients and "
        "statistics are its last iterate's; raise --max_iter (or --tol)"
    )


def _start(job: Job, shard, family: Family, intercept: bool, start):
    """IRLS's first theta (start, or the intercept-only model's), the rows of weight > 0, the
    loss's terms in the target alone and the target's weighted mean: one allreduce."""
    F = shard.num_features
    y_sum, weight, rows, in_target = _target_sums(job, shard, family)
    y_mean = y_sum / weight if weight else 0.0
    if start is not None:
        what = f"[w..., b], {F + 1} numbers for {_features(F)}"  # or as a column
        theta = given_start(start, (F + 1, 1), what)[:, 0]
        if not intercept:
            theta[-1] = 0.0  # b is held at 0
        return theta, rows, in_target, y_mean
    theta = np.zeros(F + 1)
    first = float(family.link(np.array([family.starting_mean(y_mean)]))[0])
    if math.isfinite(first) and intercept:
        theta[-1] = first
    return theta, rows, in_target, y_mean


def _fit(
    job, shard, family: Family, theta, value, gradient, sums, factor, penalty, iterations
) -> Fit:
    """The fit at theta (converged, or IRLS's last iterate), with its likelihood's figures: one
    more pass and allreduce (and, with an offset, the intercept-only model's own IRLS first).
    The intercept-only model's log-likelihood is at the fit's scale, as statsmodels' llnull."""
    rows, k = factor.count, len(theta) - (not factor.centred)  # b counts where it is fitted
    y_mean = sums["y"] / sums["weight"] if sums["weight"] else 0.0
    grad = gradient * family.LOSS_SCALE / max(rows, 1) + np.append(penalty.l2 * theta[:-1], 0.0)
    grad[-1] *= factor.centred  # b is not a parameter of a model without an intercept
    if family.FIXED_SCALE:
        scale = 1.0
    else:
        scale = sums["pearson"] / (rows - k) if rows > k else math.nan
    null_eta = float(family.link(np.array([y_mean]))[0])
    null = math.isfinite(null_eta)
    if null and shard.carried_columns.offset_given:
        null_eta = _null_bias(job, shard, family, null_eta)
        null = math.isfinite(null_eta)
    # Σ w d(y, μ) from the unit deviance itself: the loss is κ d/2 only up to a term in y
    # alone (0 for a 0/1 target, not for a proportion).
    more = _likelihood_sums(job, shard, family, theta, scale, null_eta if null else None)
    # Every family is an exponential dispersion model, log f = w (yθ - b(θ)) / φ + c(y, φ/w):
    # two means' log-likelihoods at one scale differ by their deviances' difference / 2φ, and
    # the intercept-only model's needs no pass of its own (its c(y) terms, a log-gamma per
    # row for Poisson, cost more than the rest of the pass).
    more[2] = more[0] + (more[1] - more[3]) / (2.0 * scale)
    profiled = family.profiled_log_likelihood(more[1], rows, more[4])
    if profiled is not None:
        more[0] = profiled
    return Fit(
        params=matrix(theta),
        loss=sums["loss"] / rows if rows else math.nan,
        objective=value,
        penalty=penalty,
        iterations=iterations,
        gradient_norm=float(np.linalg.norm(grad)),
        count=rows,
        y_mean=y_mean,
        pearson=sums["pearson"],
        counts={name: sums[name] for name in family.COUNTS},
        scale=scale,
        log_likelihood=float(more[0]),
        deviance=float(more[1]),
        null_log_likelihood=float(more[2]) if null else None,
        null_deviance=float(more[3]) if null else None,
        method="Newton" if family.canonical else "Fisher scoring",
        factor=factor,
    )


def _likelihood_sums(job, shard, family: Family, theta, scale: float, null_eta) -> np.ndarray:
    """The log-likelihood and the deviance at theta, 0, the intercept-only model's deviance at
    null_eta (0 where None), and Σ log weight, over every rank's rows."""

    def sums(rows):
        y, weight = rows.y.astype(np.float64), rows.weights()
        eta = predictor(theta, rows)
        null_deviance = 0.0
        if null_eta is not None:
            eta_0 = np.full(len(y), null_eta)
            if rows.offset is not None:
                eta_0 += rows.offset
            null_deviance = weight @ family.deviance_terms(y, eta_0)
        return (
            family.log_likelihood(y, eta, scale, weight),
            weight @ family.deviance_terms(y, eta),
            0.0,
            null_deviance,
            np.log(weight).sum(),
        )

    return summed(job, shard.blocks(block_rows(len(theta))), sums, 5, "irls_likelihood")


def _target_sums(job: Job, shard, family: Family) -> np.ndarray:
    """Σ w y, Σ w, the rows of weight > 0 and Σ w (the loss's terms in y alone) over every
    rank's rows."""

    def sums(rows):
        w, y = rows.weights(), rows.y.astype(np.float64)
        return w @ y, w.sum(), len(y), np.sum(w * family.loss_terms_in_target(y))

    return summed(job, shard.blocks(), sums, 4, "irls_start")


def _null_bias(job: Job, shard, family: Family, start: float) -> float:
    """The intercept-only model's bias b with the rows' offsets, η = b + offset, as R and
    statsmodels fit it for the null deviance: Fisher scoring on b alone, a pass and an
    allreduce of two sums per iteration, from g(ȳ)."""

    def sums(rows):  # Σ W, Σ W r
        y = rows.y.astype(np.float64)
        mu = family.link.inverse(b + (rows.offset if rows.offset is not None else 0.0))
        variance, slope = family.variance_and_slope(mu)
        weight = rows.weights() / (variance * slope * slope)
        return weight.sum(), weight @ ((y - mu) * slope)

    b = start
    for _ in range(MAX_ITERATIONS):
        information, score = summed(job, shard.blocks(), sums, 2, "irls_null")
        if not information > 0:
            return math.nan
        step = score / information
        b += step
        if not math.isfinite(b) or abs(step) <= TOLERANCE * max(1.0, abs(b)):
            return b
    return b


def _working(family: Family, block, theta: np.ndarray):
    """A block's (rows of weight > 0) working weights W and residuals r at theta, and its
    sums: _SUMS, then the family's iteration counts."""
    y, prior = block.y.astype(np.float64), block.weights()
    eta = predictor(theta, block)
    mu = family.link.inverse(eta)
    valid = family.valid_mean(mu)
    variance, slope = family.variance_and_slope(mu)  # off the domain's edge
    weight = prior / (variance * slope * slope)
    deviation = y - mu
    residual = deviation * slope
    loss = family.loss_terms_in_mean(y, eta, mu)
    pearson = deviation * deviation / variance
    outside = len(y) - int(np.count_nonzero(valid))
    if outside:  # a step off the domain, which IRLS halves: those rows count for nothing
        weight, residual, loss, pearson = (
            np.where(valid, a, 0.0) for a in (weight, residual, loss, pearson)
        )
    sums = [prior @ loss, prior @ pearson, outside, prior @ y, prior.sum()]
    return weight, residual, sums, family.iteration_counts(y, eta)


def _pass(job: Job, shard, family: Family, theta: np.ndarray, centre: bool = True):
    """The weighted design's factor at theta (centre False: uncentred, no intercept), the
    named sums, and the loss's gradient -Σ W r [x 1] (unpenalised, unscaled): one pass over
    this rank's rows, one allreduce. A wide design's factor is its Gram by blocks (blocks.py)."""
    k = len(theta)
    names = (*_SUMS, *family.COUNTS)
    structured = shard.structured

    def blocks():
        rows = block_rows(k + 1) if not structured else blocks_module.BLOCK_ROWS
        for block in shard.blocks(rows):
            block = block.counted()
            weight, residual, sums, counts = _working(family, block, theta)
            scored = weight * residual  # w (y - μ) / (V g'): the score's terms
            if structured:
                gradient = -block.X.transpose_matvec(scored)
                yield block.X, weight, np.r_[sums, gradient, -scored.sum(), counts]
                continue
            # [X r] in float64, X copied once into it (the factor's rows)
            A = np.empty((len(residual), k))
            A[:, :-1] = block.X
            more = np.r_[sums, -(A[:, :-1].T @ scored), -scored.sum(), counts]
            A[:, -1] = residual
            yield A, weight, more

    if structured:  # its right-hand side AᵀW r, the score: minus the gradient
        plan = blocks_module.Plan.of(shard.design_template())
        gram, extra = blocks_module.summed_gram(
            job, blocks, plan, len(names) + k, "irls_gram", centre
        )
        factor = replace(gram, target=-extra[len(_SUMS) : len(_SUMS) + k])
    else:
        factor, extra = factorise_blocks(
            job, blocks, k, len(names) + k, reference=theta, centre=centre
        )
    sums = dict(zip(names, extra[: len(_SUMS)].tolist()))
    sums.update(zip(family.COUNTS, extra[len(_SUMS) + k :].tolist()))
    sums["rows"] = factor.count
    return factor, sums, extra[len(_SUMS) : len(_SUMS) + k]


def _features(count: int) -> str:
    return f"{count} feature{'s' * (count != 1)}"
