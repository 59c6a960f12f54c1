"""The elastic-net path of a wide design (categorical or sparse columns, more than 512: data.md,
Wide and sparse designs): path.py's path, strengths, folds and IRLS, on working sets, as glmnet
fits a sparse x.

A model's coordinate descent runs on the moments of its working set alone: the coefficients
that are not zero, and the features the sequential strong rule keeps at the new strength. Each
pass sums, for every model, those moments (the working set's weighted Gram beside the working
response, by blocks: blocks.add_block_sums on the set's columns) and its gradient over every
column (two products, Xᵀ W r and Xᵀ W), and one allreduce adds the ranks'. A model has settled
at a strength when its IRLS step is small and that full gradient meets the KKT conditions;
the features where it fails join the working set and IRLS goes on. No pass forms the F x F
Gram. A least-squares (gaussian identity) fit is IRLS with its prior weights: one pass for
each change of its working set."""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.families.family import Family
from hvd_linreg.matrix import DenseMatrix
from hvd_linreg.matrix.split import as_split
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers import path_passes
from hvd_linreg.solvers.blocks import BLOCK_ROWS, Plan, add_block_sums, sums_size
from hvd_linreg.solvers.coordinate_descent import minimise
from hvd_linreg.solvers.moments import Moments
from hvd_linreg.solvers.path import _FIGURES, _Model, _Path, _Step
from hvd_linreg.solvers.path_fit import PathFit
from hvd_linreg.solvers.path_passes import HELD_DEVIANCE, HELD_WEIGHT, OUTSIDE, TRAIN_DEVIANCE
from hvd_linreg.solvers.path_settings import PathSettings


def fit(job: Job, shard, family: Family, settings: PathSettings) -> PathFit:
    """The penalized fit the settings ask for of a wide design, the same on every rank."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _WidePath(job, shard, family, settings).run()


class _Diagonal(Moments):
    """Moments whose scatter is its diagonal alone (a wide design's prior: the scales)."""

    def diagonal(self) -> np.ndarray:
        return self.scatter

    @classmethod
    def empty(cls, n: int) -> _Diagonal:
        return cls(0.0, np.zeros(n), np.zeros(n))

    def merge(self, other: _Diagonal) -> _Diagonal:
        if other.weight == 0:
            return self
        if self.weight == 0:
            return other
        s = self.weight + other.weight
        d = other.mean - self.mean
        mean = self.mean + d * (other.weight / s)
        scatter = self.scatter + other.scatter + d * d * (self.weight * other.weight / s)
        return _Diagonal(s, mean, scatter)


class _WidePath(_Path):
    def __init__(self, job: Job, shard, family: Family, settings: PathSettings):
        super().__init__(job, shard, family, settings)
        self.gaussian = False  # least squares too by IRLS's passes, on working sets
        self.working: dict[int, np.ndarray] = {}  # a model's working set, by id
        # a model's Σ W (x - x̄)(r - r̄) over every column, from the last pass at its theta
        self.full: dict[int, np.ndarray] = {}
        # (model, block) -> its working set and the block's columns of it
        self.selected: dict[tuple[int, int], tuple] = {}

    def _prior_pass(self) -> tuple[list[Moments], int]:
        """Each fold's (or the one set's) weights, means and variances of [X y]: the features'
        scales and the target's mean, from the diagonals alone."""
        self.passes += 1
        F, K = self.F, self.s.folds.count if self.s.folds else 1
        sums = np.zeros((K, 2 * F + 4))  # Σw, Σ w x, Σ w x², Σ w y, Σ w y², rows
        for X, y, _, weight, fold in path_passes.blocks(self.shard, self.s.folds, BLOCK_ROWS):
            for k in range(K):
                mine = slice(None) if fold is None else fold == k
                Xk, w, yk = X.rows(mine) if fold is not None else X, weight[mine], y[mine]
                columns = [Xk.transpose_matvec(w), Xk.diagonal(w)]
                sums[k] += np.concatenate([[w.sum()], *columns, [w @ yk, w @ (yk * yk), len(yk)]])
        sums = self.job.allreduce_sum(sums.ravel(), "wide_path_prior").reshape(K, -1)
        parts = []
        for row in sums:
            weight = row[0]
            first = np.append(row[1 : F + 1], row[-3])
            second = np.append(row[F + 1 : 2 * F + 1], row[-2])
            mean = first / weight if weight > 0 else np.zeros(F + 1)
            parts.append(_Diagonal(weight, mean, np.maximum(second - weight * mean * mean, 0.0)))
        return parts, int(sums[:, -1].sum())

    def _model(self, fold: int | None, prior: Moments) -> _Model:
        model = super()._model(fold, prior)
        # the unpenalized features (a factor of 0) are in from the null model on
        self.working[id(model)] = np.flatnonzero(self.s.controls.unpenalized(self.F))
        return model

    def _glm_pass(self, models: list[_Model]) -> tuple[list[Moments], np.ndarray]:
        """Each model's working-set moments of [X_W r] by W at its theta, its full gradient
        (kept on the model), and its sums: one pass, one allreduce."""
        self.passes += 1
        F, link, family = self.F, self.family.link, self.family
        plans = [_plan(len(self.working[id(m)])) for m in models]
        sizes = [sums_size(p) for p in plans]
        total = np.zeros(sum(sizes) + len(models) * (2 * F + 4))
        blocks = path_passes.blocks(self.shard, self.s.folds, BLOCK_ROWS)
        for block, (X, y, offset, weight, fold) in enumerate(blocks):
            at = 0
            for model, plan, size in zip(models, plans, sizes):
                eta = X.matvec(model.theta[:-1]) + model.theta[-1]
                if offset is not None:
                    eta += offset
                mu = link.inverse(eta)
                valid = family.valid_mean(mu)
                deviance = np.where(valid, family.unit_deviance(y, mu), 0.0)
                train = slice(None) if model.fold is None else fold != model.fold
                sums = total[at + size + 2 * F : at + size + 2 * F + 4]
                if model.fold is not None:
                    held = ~train
                    sums[HELD_DEVIANCE] += weight[held] @ deviance[held]
                    sums[HELD_WEIGHT] += weight[held].sum()
                variance, slope = family.variance_and_slope(mu)
                # a fold's held-out rows take part with a weight of 0: no copy of the rows
                valid = valid if model.fold is None else valid & train
                W = np.where(valid, weight / (variance * slope * slope), 0.0)
                r = np.where(valid, (y - mu) * slope, 0.0)
                rows = self._working(model, block, X).joined(DenseMatrix(r[:, None]))
                add_block_sums(rows, W, plan, total[at : at + size])
                both = X.transpose_matvec(np.column_stack([W * r, W]))  # one pass: Xᵀ[Wr W]
                total[at + size : at + size + 2 * F] += both.ravel(order="F")
                sums[TRAIN_DEVIANCE] += weight[train] @ deviance[train]
                trained = len(y) if model.fold is None else np.count_nonzero(train)
                sums[OUTSIDE] += trained - np.count_nonzero(valid)
                at += size + 2 * F + 4
        total = self.job.allreduce_sum(total, "wide_path_pass")
        moments, figures, at = [], [], 0
        for model, plan, size in zip(models, plans, sizes):
            moments.append(_moments(total[at : at + size], plan))
            Wr, Ws = total[at + size : at + size + F], total[at + size + F : at + size + 2 * F]
            # Σ W (x - x̄)(r - r̄) = Xᵀ W r - (Xᵀ W) r̄, every column's; r̄ the W-weighted mean
            self.full[id(model)] = Wr - Ws * moments[-1].mean[-1]
            figures.append(total[at + size + 2 * F : at + size + 2 * F + 4])
            at += size + 2 * F + 4
        return moments, np.array(figures)

    def _working(self, model: _Model, block: int, X):
        """A block's columns of the model's working set: kept from the pass before while the
        set is the same (selecting a sparse matrix's columns copies them)."""
        W, key = self.working[id(model)], (id(model), block)
        kept = self.selected.get(key)
        if kept is None or not np.array_equal(kept[0], W):
            kept = self.selected[key] = (W, as_split(X).select(W))
        return kept[1]

    def _iteration(self, model: _Model, M: Moments, row, st: _Step, alpha, previous, index):
        """path.py's step on the working set's moments; settled where the step is small and
        the full gradient meets the KKT conditions, else the violators join the set."""
        W = self.working[id(model)]
        w = len(W)
        penalty = None if alpha is None else self._penalty(model, alpha)
        value = row[TRAIN_DEVIANCE] / 2 + (penalty.value(model.theta[:-1]) if penalty else 0)
        worse = st.best is not None and not value <= st.best[1] + 1e-13 * abs(st.best[1])
        if row[OUTSIDE] or worse or not math.isfinite(value):
            return self._halve(model, st)
        previous_value = None if st.best is None else st.best[1]
        st.best, st.scale = (model.theta.copy(), value), 1.0
        H, c = M.scatter[:w, :w], M.scatter[:w, w]
        beta = model.theta[W]
        if penalty is None and st.free and w:  # the null model of the unpenalized features
            part = self._null_penalty.restricted(W)
            new, _, _ = minimise(
                H, c, beta, beta, part, None, M.scatter[w, w], self.s.descent_tolerance
            )
        elif penalty is None or not w:
            new = beta
        else:
            part = penalty.restricted(W)
            new, _, _ = minimise(
                H, c, beta, beta, part, None, M.scatter[w, w], self.s.descent_tolerance
            )
        delta = new - beta
        st.step = np.zeros(self.F + 1)
        st.step[W] = delta
        st.step[-1] = M.mean[w] - M.mean[:w] @ delta
        moved = float(delta @ H @ delta + M.weight * M.mean[w] ** 2)  # Σ W Δη²
        scale = max(row[TRAIN_DEVIANCE], 1e-300)
        settled = previous_value is None or abs(value - previous_value) <= (
            self.s.objective_tolerance * (abs(value) + 0.1)
        )
        tolerance = self.s.step_tolerance
        if moved <= tolerance * tolerance * scale and settled:  # converged on the working set
            gradient = -self.full[id(model)]  # the smooth part's, every column's, at theta
            if penalty is not None:
                outside = np.setdiff1d(np.arange(self.F), W)
                bad = np.intersect1d(penalty.violations(model.theta[:-1], gradient, 1e-12), outside)
                if len(bad):  # the KKT conditions fail outside the set: the worst join it
                    bad = _strongest(bad, gradient, penalty, _joining(W))
                    if len(W) + len(bad) > MAX_WORKING:
                        raise _Full(len(W) + len(bad))
                    self.working[id(model)] = np.union1d(W, bad)
                    st.best = None
                    return True
            model.gradient, model.deviance = gradient, float(row[TRAIN_DEVIANCE])
            if index is not None:
                self._record(model, index, *row[_FIGURES])
            return False
        model.theta = model.theta + st.step
        return True

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

    def _solve(self, alpha: float, previous: float | None, index: int) -> str | None:
        """Every model's fit at α: its working set the non-zero coefficients and the features
        the sequential strong rule keeps, then IRLS on working sets; or, where a working set
        would pass MAX_WORKING, why the path ends (glmnet's pmax)."""
        for model in self.models:
            penalty = self._penalty(model, alpha)
            strong = self._strong(model, alpha, previous, penalty)
            if strong is None:  # no previous solution: the features the gradient at α keeps
                strong = np.flatnonzero(np.abs(model.gradient) >= penalty.l1)
            W = np.union1d(self.working[id(model)], np.flatnonzero(model.theta[:-1]))
            room = min(_joining(W), MAX_WORKING - len(W))
            strong = _strongest(np.setdiff1d(strong, W), model.gradient, penalty, max(room, 0))
            self.working[id(model)] = np.union1d(W, strong)
        try:
            self._irls(alpha, previous, index)
        except _Full as full:
            return (
                f"at alpha {alpha:.6g} a model's working set would hold {full.size} features, "
                f"more than the {MAX_WORKING} whose Gram a pass sums; the strengths before it "
                "are the path (raise --alpha_min_ratio for a path of fewer features)"
            )
        return None


# The most features a model's working set holds: its Gram, (4,096 + 2)² numbers, is summed by
# every pass (one per model); a path whose sets would pass it ends at the strength before
MAX_WORKING = 4096


class _Full(Exception):
    """A working set would pass MAX_WORKING: the path ends before this strength."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


# Features that join a working set at once: at most this many, or as many as it holds (the
# strong rule at a large step between strengths keeps most features; the KKT check then adds
# any it left out, so the set stays near the active one and its Gram small)
JOINING = 512


def _joining(working: np.ndarray) -> int:
    return max(JOINING, len(working))


def _strongest(candidates: np.ndarray, gradient: np.ndarray, penalty, count: int) -> np.ndarray:
    """The count candidates whose |gradient| is furthest above their L1 threshold."""
    if len(candidates) <= count:
        return candidates
    ratio = np.abs(gradient[candidates]) / np.maximum(penalty.l1[candidates], 1e-300)
    return np.sort(candidates[np.argsort(-ratio, kind="stable")[:count]])


def _plan(width: int) -> Plan:
    """The plan of a working set of width columns beside r and the intercept: no block
    eliminated (the sums are its whole Gram)."""
    S = np.arange(width + 2)
    return Plan(width + 2, None, np.zeros(0, np.intp), S)


def _moments(values: np.ndarray, plan: Plan) -> Moments:
    """The centred moments of [X_W r] from the Gram of [X_W r 1] by its weights."""
    S = len(plan.S)
    G = values[-S * S :].reshape(S, S)
    weight = float(G[-1, -1])
    if not weight > 0:
        return Moments.empty(S - 1)
    mean = G[-1, :-1] / weight
    scatter = G[:-1, :-1] - weight * np.outer(mean, mean)
    return Moments(weight, mean, scatter)
