"""The elastic-net path and its cross-validation, for every family and link (penalty.py has the
objective): glmnet's algorithm on the tool's distributed passes.

The strengths run from α_max, the smallest at which every coefficient is zero, down to
α_max x the ratio, log-spaced; each fit starts from the one before (warm start): its first step
is solved on the pass that ended the strength before. Each IRLS iteration is one pass over each
rank's rows and one allgather of every model's weighted, centred Gram matrix of [X r]
(moments.py); coordinate descent runs on it on every rank alike (coordinate_descent.py),
sweeping first the features the sequential strong rule keeps and then any whose KKT condition
fails. A gaussian identity fit needs no IRLS: the one pass that sums its Gram gives the path.

Cross-validation fits every fold's model in the same passes, each by its exact gradient on its
training rows (every fold but its own), with the deviance of its held-out rows; their Hessians
come from one Gram a fold of rows by the models' mean W (path_passes.glm_pass), a quasi-Newton
step whose fixed point is the exact optimum (then each its own: SHARED_STEPS). The models step
through the strengths together; a pass skips the models already settled at the current one.

An IRLS step is taken whole while it lowers the penalized objective (else halved, as irls.py
does); the fit at a strength has settled when the step moves the linear predictor by at most
TOLERANCE of the working response's spread, Σ W Δη² <= TOLERANCE² x the deviance, and the
objective by at most irls.OBJECTIVE_TOLERANCE (--tol and --max_iter: path_settings.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import matrix
from hvd_linreg.families.family import Family
from hvd_linreg.families.gaussian import Gaussian
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers import cv_measures, path_passes, relaxed
from hvd_linreg.solvers.coordinate_descent import minimise
from hvd_linreg.solvers.loss import mean_loss
from hvd_linreg.solvers.moments import Moments
from hvd_linreg.solvers.path_fit import PathFit, Relaxed, cross_validation, merged
from hvd_linreg.solvers.path_passes import HELD_DEVIANCE, HELD_WEIGHT, OUTSIDE, TRAIN_DEVIANCE
from hvd_linreg.solvers.path_settings import PathSettings, glmnets_own
from hvd_linreg.solvers.penalty import Penalty

# A pass's sums that _record takes: training deviance, held-out deviance and weight
_FIGURES = [TRAIN_DEVIANCE, HELD_DEVIANCE, HELD_WEIGHT]
# Newton's method (a canonical link) squares its error at each step: a step that moves η by at
# most this (in the same measure) is taken, and leaves an error about its square, 1e-14.
FINISH_NEWTON = 1e-7
# The IRLS iterations at a strength after which the objective alone may end them (_iteration),
# with at most FLAT_GAIN of its tolerance left to gain
PATIENCE, FLAT_GAIN = 5, 1e-4
# A shared Gram (path_passes.glm_pass) serves a model's first SHARED_STEPS IRLS steps at a
# strength while its mismatch, Σ (W - V)² / V / Σ V, is at most MAX_MISMATCH; then its own.
SHARED_STEPS, MAX_MISMATCH = 4, 0.01


@dataclass
class _Model:
    """One model of the fit: the full data's (fold None) or one fold's, and its state."""

    fold: int | None
    prior: Moments  # of [X z] on its training rows, by the prior weights
    scales: np.ndarray  # the penalty's per-feature factors
    theta: np.ndarray
    gradient: np.ndarray | None = None  # of the smooth part at the last solution (Σ scale)
    deviance: float = math.nan  # its training rows' Σ w d at theta (the null fit's)
    # the pass (moments, sums, theta) where its last strength ended with a step taken without
    # one: the next strength's first step is solved on it, not on a pass of its own
    kept: tuple | None = None
    relaxed: Penalty | None = None  # while relaxing (relaxed.py): its unpenalized refit's
    exact: bool = False  # its own Gram at the next pass, not the shared one (path_passes.py)


def fit(job: Job, shard, family: Family, settings: PathSettings) -> PathFit:
    """The penalized fit the settings ask for, the same on every rank."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _Path(job, shard, family, settings).run()


class _Path:
    def __init__(self, job: Job, shard, family: Family, settings: PathSettings):
        self.job, self.shard, self.family, self.s = job, shard, family, settings
        self.F = shard.num_features
        self.gaussian = isinstance(family, Gaussian) and family.link.name == "identity"
        self.K = settings.folds.count if settings.folds else 0
        self.passes = 0
        self.cache = {}  # the rows sorted by fold, across the passes (path_passes.fold_blocks)

    def run(self) -> PathFit:
        F, s = self.F, self.s
        parts, count = self._prior_pass()
        whole = merged(parts)
        if whole.weight == 0:
            raise UsageError("no row has a weight above 0: there is nothing to fit")
        self.models = [self._model(None, whole)]
        for k in range(self.K):
            self.models.append(self._model(k, merged(parts[:k] + parts[k + 1 :])))
        self.parts = parts
        if self.gaussian:
            null_deviance, gradient = whole.scatter[F, F], self._free_gradient(whole)
        else:
            null_deviance, gradient = self._null()
        alphas = self._alphas(gradient, whole.weight, count)
        alphas, thetas, ended = self._walk(alphas, float(null_deviance))
        every = np.array(thetas).transpose(1, 0, 2)  # (models, strengths, F + 1)
        coefficients, deviance = every[0], self.deviance
        if self.K and s.type_measure not in ("deviance", "mse" if self.gaussian else ""):
            self.passes += 1
            self.held = cv_measures.held_out(
                self.job, self.shard, self.family, s.folds, every[1:], s.type_measure
            )
        fold_weights = np.array([p.weight for p in parts])
        cv = cross_validation(self.held, fold_weights, s.type_measure) if self.K else None
        # without folds, the smallest strength: the path's end
        index = len(alphas) - 1 if cv is None else cv.chosen(s.select)
        theta, gamma = coefficients[index], None
        relax = self._relax(thetas, every, np.asarray(alphas), fold_weights) if s.relax else None
        if relax is not None:
            gamma, index = relax.chosen(s.select)
            theta = relax.blend(coefficients, gamma, index)
        penalty = s.controls.penalty(alphas[index], s.l1_ratio, self.models[0].scales)
        dev = float(deviance[index])
        if self.gaussian and not s.relax:  # the mean loss from the moments: no pass
            loss = 0.5 * self.family.LOSS_SCALE * dev / count
        else:
            loss = mean_loss(self.job, self.shard, self.family, theta)
            if s.relax:
                dev = 2.0 * loss * count / self.family.LOSS_SCALE
        return PathFit(
            params=matrix(theta),
            loss=loss,
            objective=dev / (2 * whole.weight) + penalty.value(theta[:-1]),
            index=index,
            alphas=np.asarray(alphas),
            coefficients=coefficients,
            fold_coefficients=every[1:] if self.K else None,
            deviance=np.array(deviance),
            null_deviance=float(null_deviance),
            cv=cv,
            passes=self.passes,
            count=count,
            settings=s,
            ended=ended,
            relaxed=relax,
            gamma=gamma,
        )

    def _relax(self, thetas, every, alphas, fold_weights) -> Relaxed:
        """--relax (relaxed.py): every model's relaxed fits and, with folds, the blends'
        cross-validation (one more pass) and cv.glmnet's choice among them."""
        s = self.s

        def held_out(blends):
            self.passes += 1
            job, shard = self.job, self.shard
            return cv_measures.held_out(job, shard, self.family, s.folds, blends, s.type_measure)

        unpenalized = partial(relaxed.unpenalized, s.controls)
        again = relaxed.refits(
            self.models, thetas, alphas, _features_kept, unpenalized, self.refit, np.copy
        )
        return relaxed.fitted(s, alphas, every, again, fold_weights if self.K else None, held_out)

    def refit(self, models: list[_Model]) -> None:
        """The relaxed fits (relaxed.py) of these models, each by its model.relaxed penalty:
        the path's IRLS (or a gaussian's moments) with no penalty, from their theta."""
        saved, self.models = self.models, models
        try:
            if self.gaussian:
                for model in models:
                    self._least_squares(model, 0.0, None, None)
            else:
                self._irls(0.0, None, None)
        finally:
            self.models = saved

    def _walk(self, alphas, null_deviance: float) -> tuple[np.ndarray, list, str | None]:
        """Solve at each strength in turn, warm from the last; the strengths reached, each
        one's coefficients of every model, and why the path stopped early (None if not). It
        ends where glmnet's does (PathSettings.path_end), unless every strength is asked for."""
        thetas = []  # each strength's, each model's [w..., b]
        self.deviance = np.full(len(alphas), math.nan)
        self.held = np.full((self.K, len(alphas)), math.nan)
        previous, ended, kept = None, None, len(alphas)
        what = "elastic-net path" + (f" with {self.K}-fold cross-validation" if self.K else "")
        progress = self.job.progress(what, len(alphas), "strength")
        rule = "gaussian" if self.gaussian else self.family.NAME
        for i, alpha in enumerate(alphas):
            ended = self._solve(alpha, previous, i)
            if ended is not None:  # the path stops before this strength
                kept = i
                break
            previous = alpha
            thetas.append([m.theta.copy() for m in self.models])
            progress.update(i + 1, self.passes)
            explained = 1.0 - self.deviance[: i + 1] / null_deviance if null_deviance > 0 else None
            last = self.s.path_end(explained, rule, glmnets_own(self.family, self.gaussian))
            if last is not None:  # the deviance explained stopped moving at strength last
                kept = last + 1
                break
        progress.close()
        for model in self.models:
            model.kept = None
        self.deviance, self.held = self.deviance[:kept], self.held[:, :kept]
        return alphas[:kept], thetas[:kept], ended

    # Passes over the rows (path_passes.py)

    def _prior_pass(self) -> tuple[list[Moments], int]:
        self.passes += 1
        return path_passes.prior_pass(self.job, self.shard, self.s.folds, self.gaussian)

    def _glm_pass(self, models: list[_Model]) -> tuple[list[Moments], np.ndarray]:
        self.passes += 1
        exact, job, folds = [m.exact for m in models], self.job, self.s.folds
        return path_passes.glm_pass(job, self.shard, self.family, folds, models, exact, self.cache)

    # The fit at one strength

    def _model(self, fold: int | None, prior: Moments) -> _Model:
        F = self.F
        scales = np.ones(F)
        if self.s.standardize:
            scales = np.sqrt(np.maximum(prior.diagonal()[:F], 0.0) / prior.weight)
        theta = np.zeros(F + 1)
        if not self.gaussian:
            y_mean = prior.mean[F]
            start = float(self.family.link(np.array([self.family.starting_mean(y_mean)]))[0])
            theta[-1] = start if math.isfinite(start) else 0.0
        return _Model(fold, prior, scales, theta)

    def _null(self) -> tuple[float, np.ndarray]:
        """Every model's intercept-only fit (with the offsets, by IRLS on b alone): the path's
        start. The full data's null deviance, and its gradient at the null model, which gives
        α_max: with unpenalized features (a penalty factor of 0), at their fit, as glmnet's."""
        self._irls(None, None)
        full = self.models[0]
        null_deviance = full.deviance
        if self._null_penalty is not None:
            self._irls(None, None, free=True)
        return null_deviance, full.gradient

    @property
    def _null_penalty(self) -> Penalty | None:
        return self.s.controls.null_penalty(self.F)

    def _free_gradient(self, prior: Moments) -> np.ndarray:
        """A gaussian identity model's gradient at the fit of its unpenalized features alone
        (at 0 where there are none)."""
        F, free = self.F, self._null_penalty
        H, c = prior.scatter[:F, :F], prior.scatter[:F, F]
        if free is None:
            return c
        zero = np.zeros(F)
        tolerance = self.s.descent_tolerance
        return minimise(H, c, zero, zero, free, None, prior.scatter[F, F], tolerance)[1]

    def _alphas(self, gradient: np.ndarray, weight: float, rows: int) -> list[float]:
        s = self.s
        if s.alphas is not None:
            return list(s.alphas)
        scales = self.models[0].scales
        penalized = s.controls.in_alpha_max(scales)
        if not penalized.any():
            raise UsageError(
                "every feature is constant, excluded or unpenalized: there is no path to fit"
                if s.controls.given
                else "every feature is constant: there is no path to fit"
            )
        scales = scales * s.controls.l1_factors(self.F)
        return s.strengths(gradient[penalized], scales[penalized], rows, self.F, weight)

    def _solve(self, alpha: float, previous: float | None, index: int) -> str | None:
        """Every model's fit at α, the index-th strength, from its fit at the previous one; or
        why the path ends before it (None: it does not)."""
        if self.gaussian:
            for model in self.models:
                self._least_squares(model, alpha, previous, index)
        else:
            self._irls(alpha, previous, index)
        return None

    def _record(self, model: _Model, index: int, deviance: float, held: float, weight: float):
        """The figures of a model's fit at the index-th strength: the training deviance of
        the full data's, the mean held-out deviance of a fold's."""
        if model.fold is None:
            self.deviance[index] = deviance
        else:
            self.held[model.fold, index] = held / weight if weight else math.nan

    def _penalty(self, model: _Model, alpha: float) -> Penalty:
        if model.relaxed is not None:  # an unpenalized refit (relaxed.py)
            return model.relaxed
        if self.s.fold_alpha == "sum":  # the same α x Σw against every model's summed deviance
            alpha = alpha * self.models[0].prior.weight / model.prior.weight
        penalty = self.s.controls.penalty(alpha, self.s.l1_ratio, model.scales)
        return penalty.scaled(model.prior.weight)

    def _strong(self, model: _Model, alpha: float, previous: float | None, penalty: Penalty):
        """The sequential strong rule's candidates: |gradient_j| >= l1_j (2α - α_previous)/α;
        every feature where there is no previous solution or no L1 part."""
        if previous is None or model.gradient is None or self.s.l1_ratio == 0:
            return None
        bound = penalty.l1 * (2 * alpha - previous) / alpha
        return np.flatnonzero(np.abs(model.gradient) >= bound)

    def _least_squares(self, model: _Model, alpha: float, previous: float | None, index: int):
        """A gaussian identity model at α, from its moments alone."""
        F, prior = self.F, model.prior
        penalty = self._penalty(model, alpha)
        H, c = prior.scatter[:F, :F], prior.scatter[:F, F]
        candidates = self._strong(model, alpha, previous, penalty)
        beta, gradient, _ = minimise(
            H,
            c,
            np.zeros(F),
            model.theta[:-1],
            penalty,
            candidates,
            prior.scatter[F, F],
            self.s.descent_tolerance,
        )
        b = prior.mean[F] - prior.mean[:F] @ beta
        model.theta, model.gradient = np.append(beta, b), gradient
        v = np.append(beta, -1.0)
        deviance, held, weight = float(v @ prior.scatter @ v), math.nan, 0.0
        if model.fold is not None:
            part = self.parts[model.fold]
            error = part.mean[F] - part.mean[:F] @ beta - b
            held, weight = float(v @ part.scatter @ v + part.weight * error * error), part.weight
        if index is not None:  # not a relaxed refit
            self._record(model, index, deviance, held, weight)

    def _irls(self, alpha: float | None, previous: float | None, index=None, free=False):
        """Every model's IRLS at α (None: the intercept alone, or with free, the null model
        of the unpenalized features too), from its current theta: the
        models step together, one pass for all of them per iteration. A model whose last step
        was small enough takes it and is done without a pass of its own, its figures from the
        pass before it (FINISH_NEWTON); the next strength's first step is then solved on that
        pass (model.kept), as Newton's step from the theta it was at."""
        state = {id(m): _Step(free=free) for m in self.models}
        for model in self.models:  # Newton's own Gram: the null fits (α_max to its last digit)
            model.exact = alpha is None or model.relaxed is not None  # and relaxed refits
        pending = []
        for model in self.models:
            kept, model.kept = model.kept, None
            if kept is None or index is None:  # not a strength of the path: a pass of its own
                pending.append(model)
                continue
            M, row, model.theta = kept
            if self._iteration(model, M, row, state[id(model)], alpha, previous, index):
                pending.append(model)
        for _ in range(self.s.iterations):
            if pending:
                moments, sums = self._glm_pass(pending)
                pending = [
                    model
                    for model, M, row in zip(pending, moments, sums)
                    if self._iteration(model, M, row, state[id(model)], alpha, previous, index)
                ]
        if not pending:
            return
        at = "the intercept-only model" if alpha is None else f"alpha {alpha:.6g}"
        raise UsageError(
            f"the penalized IRLS did not converge in {self.s.iterations} iterations at {at}; "
            "raise --max_iter"
        )

    def _halve(self, model: _Model, st: _Step) -> bool:
        """A step that made things worse (or left the domain), halved from the best theta."""
        if st.best is None:
            raise UsageError(
                f"IRLS cannot start: --model {self.family.NAME} with the "
                f"{self.family.link.name} link has no valid mean at the target's mean"
            )
        st.scale /= 2
        model.theta = st.best[0] + st.scale * st.step
        return True

    def _iteration(self, model: _Model, M: Moments, row, st: _Step, alpha, previous, index):
        """One model's IRLS step from the pass at its theta: halve a step that made things
        worse, else solve the step's penalized least squares by coordinate descent on M. Whether
        the model needs another pass at this strength."""
        F = self.F
        penalty = None if alpha is None else self._penalty(model, alpha)
        value = row[TRAIN_DEVIANCE] / 2 + (penalty.value(model.theta[:-1]) if penalty else 0)
        worse = st.best is not None and not value <= st.best[1] + 1e-13 * abs(st.best[1])
        if row[OUTSIDE] or worse or not math.isfinite(value):
            return self._halve(model, st)
        previous_value = None if st.best is None else st.best[1]
        st.best, st.scale = (model.theta.copy(), value), 1.0
        H, c = M.scatter[:F, :F], M.scatter[:F, F]
        beta = model.theta[:-1]
        if penalty is None and st.free:  # the unpenalized features' fit: the null model
            new, gradient, _ = minimise(
                H, c, beta, beta, self._null_penalty, None, M.scatter[F, F],
                self.s.descent_tolerance,
            )  # fmt: skip
        elif penalty is None:
            new, gradient = beta, -c
        else:
            candidates = self._strong(model, alpha, previous, penalty)
            new, gradient, _ = minimise(
                H, c, beta, beta, penalty, candidates, M.scatter[F, F], self.s.descent_tolerance
            )
        delta = new - beta
        st.step = np.append(delta, M.mean[F] - M.mean[:F] @ delta)
        moved = float(delta @ H @ delta + M.weight * M.mean[F] ** 2)  # Σ W Δη²
        scale = max(row[TRAIN_DEVIANCE], 1e-300)
        settled = previous_value is None or abs(value - previous_value) <= (
            self.s.objective_tolerance * (abs(value) + 0.1)
        )
        tolerance = self.s.step_tolerance
        st.iterations += 1
        mismatch = row[path_passes.MISMATCH] / M.weight  # a shared Gram's (path_passes.py)
        model.exact |= st.iterations >= SHARED_STEPS or mismatch > MAX_MISMATCH
        # Past PATIENCE iterations Newton is in no quadratic phase (rows far from their fitted
        # mean): the objective ends them, settled, with at most FLAT_GAIN of its tolerance left
        # to gain (½ Σ W Δη²; coefficients within about 1e-8), not hundreds of passes later.
        gain = FLAT_GAIN * self.s.objective_tolerance * (abs(value) + 0.1)
        flat = st.iterations > PATIENCE and moved <= gain
        if (moved <= tolerance * tolerance * scale or flat) and settled:  # converged at theta
            model.gradient, model.deviance = gradient, float(row[TRAIN_DEVIANCE])
            if index is not None:  # not the null fit
                self._record(model, index, *row[_FIGURES])
            return False
        theta, model.theta = model.theta, model.theta + st.step  # a shared Gram's step errs by
        finish = FINISH_NEWTON if self.family.canonical else tolerance  # mismatch x itself:
        if alpha is not None and moved * max(finish**-2, mismatch / tolerance**2) <= scale:
            model.gradient = gradient
            if index is not None:  # not a relaxed refit: the figures at theta + step, and the
                self._record(model, index, *path_passes.figures_after(row, M, st.step))
                model.kept = (M, row, theta)  # pass that the next strength starts on
            return False
        return True


@dataclass
class _Step:
    best: tuple[np.ndarray, float] | None = None  # the best theta so far and its objective
    step: np.ndarray | None = None
    scale: float = 1.0
    iterations: int = 0  # the steps solved at this strength
    free: bool = False  # the null model's unpenalized features are fitted


def _features_kept(theta: np.ndarray) -> np.ndarray:
    return theta[:-1] != 0
