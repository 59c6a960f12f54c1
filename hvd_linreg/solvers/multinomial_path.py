"""The elastic-net path of the multinomial model, and its cross-validation: glmnet's
family = "multinomial" (type.multinomial = "ungrouped") on the tool's distributed passes.

The model is glmnet's and scikit-learn's symmetric one: a coefficient vector and an intercept
for each of the K classes, P(y = k | x) ∝ exp(x·β_k + b_k), and the objective

    -(1 / Σw) Σ wᵢ log P(yᵢ | xᵢ) + Σ_k Σ_j (P1ⱼ |β_kj| + ½ P2ⱼ β_kj²)

with penalty.py's P1 and P2 (α, l1_ratio and the features' scales), the intercepts not
penalized. Adding a constant to every class's intercept changes nothing: the intercepts are
centred (Σ_k b_k = 0), as glmnet's are, by a term ½ (Σ_k b_k)² that only that direction feels.

At each strength each model takes proximal Newton steps: a pass over each rank's rows and one
allreduce give the log-likelihood, its gradient and its whole K(F + 1)-square Hessian at the
model's coefficients (training rows), and its held-out rows' deviance; coordinate descent
(coordinate_descent.py) minimises the quadratic model plus the penalty on every rank alike; a
step that raises the objective is halved. A strength has settled when the step moves the
objective by at most OBJECTIVE_TOLERANCE relative, and the quadratic's decrease ΔᵀHΔ is at most
FINISH² of the deviance. The strengths, their log-spacing from α_max (the least at which every
feature's coefficients are 0), the warm starts, the folds and the choice of strength by
cross-validation are path.py's."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.solvers import cv_measures, path_passes, relaxed
from hvd_linreg.solvers.coordinate_descent import minimise
from hvd_linreg.solvers.path_fit import (
    CrossValidation,
    MultinomialPathFit,
    Relaxed,
    cross_validation,
    merged,
)
from hvd_linreg.solvers.path_settings import PathSettings
from hvd_linreg.solvers.penalty import Penalty

OBJECTIVE_TOLERANCE = 1e-13
FINISH = 1e-8  # Newton's step squares its error: one this small leaves one about 1e-16
HALVINGS = 40


@dataclass
class _Model:
    fold: int | None  # the fold it holds out, or None: the whole data's
    weight: float  # Σ w of its training rows
    scales: np.ndarray  # (F,) the penalty's per-feature factors
    theta: np.ndarray  # (K (F + 1),) class by class: [β_k..., b_k]
    sums: tuple | None = None  # the last pass's (objective's smooth part, g, H) at theta
    held: float = math.nan  # its held-out rows' mean deviance at theta
    relaxed: tuple | None = None  # while relaxing: its refit's penalty and centring


@dataclass
class _Step:
    """A model's proximal Newton step from start (its pass's sums and held-out deviance),
    halved until it lowers the objective."""

    start: np.ndarray
    step: np.ndarray
    sums: tuple
    held: float
    before: float  # the objective at start
    small: bool  # whether the step's ΔᵀHΔ is below FINISH² of the deviance
    settled: bool = False

    def accepts(self, after: float) -> bool:
        """Whether the objective after the step is no higher; the model has settled where the
        step was small and lowered the objective by no more than OBJECTIVE_TOLERANCE."""
        if after > self.before + OBJECTIVE_TOLERANCE * abs(self.before):
            return False
        self.settled = self.small and self.before - after <= OBJECTIVE_TOLERANCE * abs(self.before)
        return True


def fit(job, shard, classes: list, settings: PathSettings) -> MultinomialPathFit:
    """The penalized fit the settings ask for, the same on every rank; classes: the labels of
    the shard's class codes 0 .. K - 1, as the data writes them (for messages)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _Path(job, shard, classes, settings).run()


class _Path:
    def __init__(self, job, shard, classes: list, settings: PathSettings):
        self.job, self.shard, self.classes, self.s = job, shard, classes, settings
        self.K = len(classes)
        self.F = shard.num_features
        self.folds = settings.folds.count if settings.folds else 0
        self.passes = 0
        self.free = False  # fitting the null model's unpenalized features (_penalty)
        # The softmax is the same with a constant added to every class's coefficient of a
        # feature: the intercepts and the unpenalized features are held to sum 0 over the
        # classes by a term ½ (Σ_k θ_kj)² each (their columns of ones, K (F + 1) x count)
        self.centring = self._centring(settings.controls.unpenalized(self.F))

    def run(self) -> MultinomialPathFit:
        parts, rows = path_passes.prior_pass(self.job, self.shard, self.s.folds, False)
        self.passes += 1
        whole = merged(parts)
        if whole.weight == 0:
            raise UsageError("no row has a weight above 0: there is nothing to fit")
        self.models = [self._model(None, whole)]
        for k in range(self.folds):
            self.models.append(self._model(k, merged(parts[:k] + parts[k + 1 :])))
        self._null()
        full = self.models[0]
        null_deviance = 2.0 * full.weight * full.sums[0]
        if self.s.controls.unpenalized(self.F).any():  # glmnet's α_max: at their fit
            self.free = True
            self._solve(0.0)
            self.free = False
        alphas = self._alphas(full.sums[1], rows)
        thetas, deviance = [], []
        held = np.full((self.folds, len(alphas)), math.nan)
        progress = self.job.progress("multinomial elastic-net path", len(alphas), "strength")
        for i, alpha in enumerate(alphas):
            self._solve(alpha)
            thetas.append([self._centred(m.theta) for m in self.models])
            deviance.append(2.0 * full.weight * full.sums[0])
            for m in self.models[1:]:
                held[m.fold, i] = m.held
            progress.update(i + 1)
        progress.close()
        F1 = self.F + 1
        coefficients = np.array([t[0].reshape(self.K, F1).T for t in thetas])
        cv = self._cross_validation(held, thetas, parts) if self.folds else None
        index = len(alphas) - 1 if cv is None else cv.chosen(self.s.select)
        params, relax, gamma = coefficients[index], None, None
        if self.s.relax:
            relax = self._relax(thetas, np.asarray(alphas), np.array([p.weight for p in parts]))
            gamma, index = relax.chosen(self.s.select)
            blend = gamma * thetas[index][0] + (1 - gamma) * relax.coefficients[index]
            params = blend.reshape(self.K, F1).T
        return MultinomialPathFit(
            params,
            index,
            np.asarray(alphas),
            coefficients,
            np.asarray(deviance),
            float(null_deviance),
            cv,
            self.passes,
            full.weight,
            self.s,
            relax,
            gamma,
        )

    def _cross_validation(self, held, thetas, parts) -> CrossValidation:
        """cv.glmnet's figures from each fold's held-out deviance, or by --type_measure from
        one more pass: every fold's model at every strength."""
        measure, F1 = self.s.type_measure, self.F + 1
        if measure != "deviance":
            self.passes += 1
            fold_thetas = np.array(
                [[t[j].reshape(self.K, F1) for t in thetas] for j in range(1, self.folds + 1)]
            )
            held = cv_measures.held_out_classes(
                self.job, self.shard, self.s.folds, fold_thetas, measure
            )
        return cross_validation(held, np.array([p.weight for p in parts]), measure)

    def _relax(self, thetas, alphas, fold_weights) -> Relaxed:
        """--relax (relaxed.py): every model's unpenalized refit of each distinct set of
        features its lasso keeps (in any class), for every class, centred over the classes;
        with folds, each blend's cross-validation in one more pass and cv.glmnet's choice."""
        s, F1 = self.s, self.F + 1

        def held_out(blends):
            self.passes += 1
            fold_thetas = blends.reshape(self.folds, -1, self.K, F1)
            return cv_measures.held_out_classes(
                self.job, self.shard, s.folds, fold_thetas, s.type_measure
            )

        def active(theta):  # the features some class's coefficient keeps
            return np.any(theta.reshape(self.K, F1)[:, :-1] != 0, axis=0)

        def unpenalized(kept):  # in every class, and its features centred over the classes
            return self._classwise(relaxed.unpenalized(s.controls, kept)), self._centring(kept)

        again = relaxed.refits(
            self.models, thetas, alphas, active, unpenalized, self.refit, self._centred
        )  # (models, strengths, K (F + 1))
        lasso = np.array(thetas).transpose(1, 0, 2)
        weights = fold_weights if self.folds else None
        return relaxed.fitted(s, alphas, lasso, again, weights, held_out)

    def refit(self, models: list[_Model]) -> None:
        """Relaxed refits: Newton's method with each model's own penalty and centring, from
        a pass at its theta (the lasso's at that strength)."""
        saved, self.models = self.models, models
        try:
            self._pass(models)
            self._solve(0.0)
        finally:
            self.models = saved

    def _model(self, fold, prior) -> _Model:
        F = self.F
        scales = np.ones(F)
        if self.s.standardize:
            scales = np.sqrt(np.maximum(np.diag(prior.scatter)[:F], 0.0) / prior.weight)
        return _Model(fold, prior.weight, scales, np.zeros(self.K * (F + 1)))

    def _null(self) -> None:
        """Every model's intercept-only fit, log of each class's share centred: the path's
        start (its smooth part and gradient there give the null deviance and α_max)."""
        counts = self._class_weights()
        for model, n in zip(self.models, counts):
            if (n <= 0).any():
                missing = self.classes[int(np.flatnonzero(n <= 0)[0])]
                where = (
                    "the data"
                    if model.fold is None
                    else f"the training rows of fold {model.fold + 1}"
                )
                raise UsageError(
                    f"class {missing!r} has no row of weight above 0 in {where}: a multinomial "
                    "path needs every class in every fold's training rows"
                )
            b = np.log(n) - np.log(n).mean()
            model.theta.reshape(self.K, self.F + 1)[:, -1] = b
        self._pass(self.models)

    def _class_weights(self) -> np.ndarray:
        """Each model's Σ w of each class on its training rows (one allreduce)."""
        sums = np.zeros((len(self.models), self.K))
        for _, y, _, weight, fold in path_passes.blocks(self.shard, self.s.folds):
            codes = y.astype(np.int64)
            for i, model in enumerate(self.models):
                train = slice(None) if model.fold is None else fold != model.fold
                sums[i] += np.bincount(codes[train], weights=weight[train], minlength=self.K)
        return self.job.allreduce_sum(sums, "multinomial_path_classes")

    def _alphas(self, gradient: np.ndarray, rows: int) -> list[float]:
        s, F = self.s, self.F
        if s.alphas is not None:
            return list(s.alphas)
        scales = self.models[0].scales
        penalized = s.controls.in_alpha_max(scales)
        if not penalized.any():
            raise UsageError(
                "every feature is constant or excluded: there is no path to fit"
                if s.controls.given
                else "every feature is constant: there is no path to fit"
            )
        scales = scales * s.controls.l1_factors(F)
        G = np.abs(gradient.reshape(self.K, F + 1)[:, :F]).max(axis=0)
        return s.strengths(G[penalized], scales[penalized], rows, F)

    def _penalty(self, model: _Model, alpha: float) -> Penalty:
        """The penalty on θ, class by class (glmnet's factors alike for every class; an
        excluded feature held at 0); the intercepts' entries 0 and unbounded."""
        if model.relaxed is not None:  # a relaxed refit (relaxed.py): its own
            return model.relaxed[0]
        one = self.s.controls.penalty(alpha, self.s.l1_ratio, model.scales)
        if self.free:  # the null model: the unpenalized features alone
            one = self.s.controls.null_penalty(self.F)
        return self._classwise(one)

    def _classwise(self, one: Penalty) -> Penalty:
        """A penalty of the F features as the same for every class of θ, class by class; the
        intercepts' entries 0 and unbounded."""
        lower, upper = one.bounds

        def tiled(a, pad):
            return np.tile(np.concatenate([a, [pad]]), self.K)

        bounded = one.lower is not None or one.upper is not None
        return Penalty(
            tiled(one.l1, 0.0),
            tiled(one.l2, 0.0),
            tiled(lower, -np.inf) if bounded else None,
            tiled(upper, np.inf) if bounded else None,
        )

    def _solve(self, alpha: float) -> None:
        """Every model's fit at α, from its fit at the previous strength (proximal Newton), the
        models stepping together: each pass serves every model not yet settled."""
        active = list(self.models)
        for _ in range(self.s.iterations):
            steps = [self._step(model, alpha) for model in active]
            tries = list(zip(active, steps))
            for _ in range(HALVINGS):
                for model, step in tries:
                    model.theta = step.start + step.step
                self._pass([model for model, _ in tries])
                tries = [(m, st) for m, st in tries if not st.accepts(self._objective(m, alpha))]
                for _, step in tries:
                    step.step /= 2.0
                if not tries:
                    break
            for model, step in tries:  # no step lowers the objective: the optimum, to rounding
                model.theta, model.sums, model.held = step.start, step.sums, step.held
                step.settled = True
            active = [m for m, st in zip(active, steps) if not st.settled]
            if not active:
                return
        raise UsageError(
            f"the multinomial elastic net did not converge at alpha {alpha:.6g} in "
            f"--max_iter {self.s.iterations} Newton steps: raise --max_iter or --alpha_min_ratio"
        )

    def _centring(self, free: np.ndarray) -> np.ndarray:
        """The columns of ones that centre the intercepts and these features (a boolean mask)
        over the classes, K (F + 1) x count: those without limits (a box holds the others)."""
        lower, upper = self.s.controls.limits(self.F)
        free = free & ~np.isfinite(lower) & ~np.isfinite(upper)
        columns = [*np.flatnonzero(free), self.F]
        out = np.zeros((self.K * (self.F + 1), len(columns)))
        for i, j in enumerate(columns):
            out[j :: self.F + 1, i] = 1.0
        return out

    def _centring_of(self, model: _Model) -> np.ndarray:
        return self.centring if model.relaxed is None else model.relaxed[1]

    def _objective(self, model: _Model, alpha: float) -> float:
        """The penalized objective at the model's theta (from its last pass), with the
        centring terms (the intercepts' and the unpenalized features')."""
        centre = self._centring_of(model).T @ model.theta
        penalty = self._penalty(model, alpha).value(model.theta)
        return model.sums[0] + penalty + 0.5 * float(centre @ centre)

    def _step(self, model: _Model, alpha: float) -> _Step:
        """The proximal Newton step: coordinate descent on the quadratic model + penalty."""
        penalty = self._penalty(model, alpha)
        smooth, g, H = model.sums
        C = self._centring_of(model)
        new, _, _ = minimise(
            H + C @ C.T,
            -(g + C @ (C.T @ model.theta)),
            model.theta,
            model.theta,
            penalty,
            scale=2.0 * max(smooth, 1e-300),
            tolerance=self.s.descent_tolerance,
        )
        step = new - model.theta
        scale = 2.0 * max(smooth, 1e-300)
        return _Step(
            model.theta, step, model.sums, model.held, self._objective(model, alpha),
            small=float(step @ H @ step) <= FINISH * FINISH * scale,
        )  # fmt: skip

    def _centred(self, theta: np.ndarray) -> np.ndarray:
        out = theta.reshape(self.K, self.F + 1).copy()
        out[:, -1] -= out[:, -1].mean()
        return out.reshape(-1)

    def _pass(self, models: list[_Model]) -> None:
        """Each model's smooth objective, gradient and Hessian at its theta on its training
        rows, and its held-out rows' mean deviance: one pass and one allreduce."""
        self.passes += 1
        F1, K = self.F + 1, self.K
        n = K * F1
        sums = np.zeros((len(models), 4 + n + n * n))
        for X, y, _, weight, fold in path_passes.blocks(self.shard, self.s.folds):
            A = np.column_stack([X, np.ones(len(y))])
            codes = y.astype(np.int64)
            for i, model in enumerate(models):
                sums[i] += _block_sums(A, codes, weight, fold, model, K)
        sums = self.job.allreduce_sum(sums, "multinomial_path_pass")
        for model, row in zip(models, sums):
            w = model.weight
            H = row[4 + n :].reshape(K, K, F1, F1).transpose(0, 2, 1, 3).reshape(n, n)
            model.sums = (-row[0] / w, row[4 : 4 + n] / w, H / w)
            model.held = -2.0 * row[2] / row[3] if row[3] else math.nan


def _block_sums(A, codes, weight, fold, model: _Model, K: int) -> np.ndarray:
    """One block's sums for one model: Σ w log P(y) and Σ w on its training rows, the same on
    its held-out rows, then the gradient of -Σ w log P(y) (class by class) and its Hessian's
    K x K blocks of (F + 1) x (F + 1), class pair by class pair."""
    F1 = A.shape[1]
    B = model.theta.reshape(K, F1).T
    eta = A @ B
    top = eta.max(axis=1, keepdims=True)
    log_p = eta - top - np.log(np.exp(eta - top).sum(axis=1, keepdims=True))
    chosen = log_p[np.arange(len(codes)), codes]
    out = np.zeros(4 + K * F1 + K * K * F1 * F1)
    if model.fold is not None:
        held = fold == model.fold
        out[2], out[3] = weight[held] @ chosen[held], weight[held].sum()
        train = ~held
        A, codes, weight, log_p, chosen = (
            A[train],
            codes[train],
            weight[train],
            log_p[train],
            chosen[train],
        )
    out[0], out[1] = weight @ chosen, weight.sum()
    P = np.exp(log_p)
    residual = P.copy()
    residual[np.arange(len(codes)), codes] -= 1.0
    out[4 : 4 + K * F1] = (A.T @ (residual * weight[:, None])).T.reshape(-1)
    H = out[4 + K * F1 :].reshape(K, K, F1, F1)
    for k in range(K):
        for j in range(k, K):
            d = weight * P[:, k] * ((k == j) - P[:, j])
            H[k, j] = (A * d[:, None]).T @ A
            if j != k:
                H[j, k] = H[k, j]
    return out
