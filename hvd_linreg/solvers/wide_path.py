"""The elastic-net path of a wide design (categorical or sparse columns, more than 512: data.md,
Wide and sparse designs): path.py's path, strengths, folds and IRLS, on working sets, as glmnet
fits a sparse x.

A model's coordinate descent runs on the moments of its working set alone: the coefficients
that are not zero, and the features the sequential strong rule keeps at the new strength. Each
pass sums, for every model, those moments (the working set's weighted Gram beside the working
response, by blocks: blocks.add_block_sums on the set's columns; its linear predictor from the
set's columns too), and one allreduce adds the ranks'. After a small Newton step the next pass
is a check (AHEAD): the working response's products and the gradient over every column (Xᵀ W r
and Xᵀ W), on the Gram before. A model has settled at a strength when its IRLS step is small and
that full gradient meets the KKT conditions; the features where it fails join the working set
and IRLS goes on. No pass forms the F x F Gram. A least-squares (gaussian identity) path takes
glmnet's covariance updates (working_sets.Covariance): the cross products of every feature with
each feature a working set has held, summed once, give its working sets' Gram and its KKT
checks without a pass; past their memory it is IRLS with its prior weights, whose Gram is summed
once for each change of its working set, every pass a check."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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
from hvd_linreg.solvers.working_sets import MAX_WORKING, Covariance, Full, joining, strongest


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
        # least squares too by IRLS's passes, on working sets; its W the prior weights
        self.fixed, self.gaussian = self.gaussian, False
        self.working: dict[int, np.ndarray] = {}  # a model's working set, by id
        # a model's Σ W (x - x̄)(r - r̄) over every column, from the last pass at its theta
        self.full: dict[int, np.ndarray] = {}
        # (model, block) -> its working set and the block's columns of it
        self.selected: dict[tuple[int, int], tuple] = {}
        # a model's working set, the centred Gram of it that its steps use (_Local), its theta
        self.hessian: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.refresh: dict[int, bool] = {}  # its next pass sums its set's own Gram
        self.ahead: dict[int, bool] = {}  # its next pass checks: the full gradient, no Gram
        self.plain: set[int] = set()  # a check failed at this fit: a Gram at every pass
        # least squares' covariance updates (working_sets.py); False: its passes instead
        self.covariance: Covariance | bool | None = None

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

    def _glm_pass(self, models: list[_Model]) -> tuple[list[_Local], np.ndarray]:
        """Each model's working-set moments of [X_W r] by W at its theta (the Gram of X_W
        itself only where _Order asks for it), its full gradient where asked (kept on the
        model), and its sums: one pass, one allreduce."""
        self.passes += 1
        orders = [self._order(m) for m in models]
        total = np.zeros(sum(o.size for o in orders))
        blocks = path_passes.blocks(self.shard, self.s.folds, BLOCK_ROWS)
        for block, (X, y, offset, weight, fold) in enumerate(blocks):
            at = 0
            for model, order in zip(models, orders):
                rows = (X, y, offset, weight, fold)
                self._block_sums(model, order, block, rows, total[at : at + order.size])
                at += order.size
        total = self.job.allreduce_sum(total, "wide_path_pass")
        moments, figures, at = [], [], 0
        for model, order in zip(models, orders):
            values = total[at : at + order.size]
            figures.append(values[:4])
            moments.append(self._local(model, order, values))
            at += order.size
        return moments, np.array(figures)

    def _order(self, model: _Model) -> _Order:
        """What the next pass sums for model: a check (AHEAD: the full gradient, and the
        working set's Gram kept from the pass before) where its last Newton step was small or
        it settled without the full gradient, else the set's own Gram."""
        W, key = self.working[id(model)], id(model)
        kept, ahead = self.hessian.get(key), self.ahead.pop(key, False)
        same = kept is not None and np.array_equal(kept[0], W)
        ahead = ahead or self.fixed  # least squares: its Gram is the same at every theta
        fresh = self.refresh.pop(key, False) or key in self.plain or not (ahead and same)
        return _Order(len(W), _plan(len(W)) if fresh else None, ahead, self.F)

    def _block_sums(self, model: _Model, order: _Order, block: int, rows, out: np.ndarray):
        """out += one block's sums of the model in order's layout."""
        X, y, offset, weight, fold = rows
        link, family = self.family.link, self.family
        working = self._working(model, block, X)
        eta = self._predictor(model, working, X)
        if offset is not None:
            eta += offset
        mu = link.inverse(eta)
        valid = family.valid_mean(mu)
        deviance = np.where(valid, family.unit_deviance(y, mu), 0.0)
        train = slice(None) if model.fold is None else fold != model.fold
        if model.fold is not None:
            held = ~train
            out[HELD_DEVIANCE] += weight[held] @ deviance[held]
            out[HELD_WEIGHT] += weight[held].sum()
        variance, slope = family.variance_and_slope(mu)
        # a fold's held-out rows take part with a weight of 0: no copy of the rows
        valid = valid if model.fold is None else valid & train
        W = np.where(valid, weight / (variance * slope * slope), 0.0)
        r = np.where(valid, (y - mu) * slope, 0.0)
        out[TRAIN_DEVIANCE] += weight[train] @ deviance[train]
        trained = len(y) if model.fold is None else np.count_nonzero(train)
        out[OUTSIDE] += trained - np.count_nonzero(valid)
        sums = out[4 : 4 + order.moments]
        if order.plan is not None:  # the working set's Gram beside r's products
            add_block_sums(working.joined(DenseMatrix(r[:, None])), W, order.plan, sums)
        else:  # r's products alone: Xᵀ_W [Wr W], Σ W r², Σ W r, Σ W
            w = order.width
            if w:
                both = working.transpose_matvec(np.column_stack([W * r, W]))
                sums[: 2 * w] += both.ravel(order="F")
            sums[2 * w :] += [W @ (r * r), W @ r, W.sum()]
        if order.full:  # every column's Xᵀ [Wr W] in one product
            both = X.transpose_matvec(np.column_stack([W * r, W]))
            out[-2 * self.F :] += both.ravel(order="F")

    def _local(self, model: _Model, order: _Order, values: np.ndarray) -> _Local:
        """A model's moments of [X_W r] from its pass's sums (and its kept Gram where the pass
        summed none); its full gradient from the pass, or None."""
        w, key = order.width, id(model)
        sums = values[4 : 4 + order.moments]
        if order.plan is not None:
            local = _centred(sums, w)
            self.hessian[key] = (self.working[key], local.H, model.theta.copy())
        else:
            xr, x1, (rr, r1, weight) = sums[:w], sums[w : 2 * w], sums[2 * w :]
            _, H, at = self.hessian[key]
            if not weight > 0:
                local = _Local(0.0, np.zeros(w + 1), H, np.zeros(w), 0.0)
            else:
                mean = np.append(x1, r1) / weight
                c = xr - weight * mean[:w] * mean[w]  # Σ W (x - x̄)(r - r̄)
                local = _Local(weight, mean, H, c, rr - weight * mean[w] ** 2)
            local.reused = not (self.fixed or np.array_equal(at, model.theta))
        if order.full:
            Wr, Ws = values[-2 * self.F : -self.F], values[-self.F :]
            # Σ W (x - x̄)(r - r̄) = Xᵀ W r - (Xᵀ W) r̄, every column's; r̄ the W-weighted mean
            self.full[key] = Wr - Ws * local.mean[-1]
        else:
            self.full[key] = None
        return local

    def _predictor(self, model: _Model, working, X) -> np.ndarray:
        """The linear predictor Xβ + b from the working set's columns: every coefficient
        outside it is 0 (a set only grows at a strength), and its products are a few of X's."""
        W, beta = self.working[id(model)], model.theta[:-1]
        if not len(W):
            return np.full(len(X), model.theta[-1])
        if np.count_nonzero(beta) != np.count_nonzero(beta[W]):  # never: the whole product
            return X.matvec(beta) + model.theta[-1]
        return working.matvec(beta[W]) + model.theta[-1]

    def _working(self, model: _Model, block: int, X):
        """A block's columns of the model's working set: kept from the pass before while the
        set is the same (selecting a sparse matrix's columns copies them)."""
        W, key = self.working[id(model)], (id(model), block)
        kept = self.selected.get(key)
        if kept is None or not np.array_equal(kept[0], W):
            kept = self.selected[key] = (W, as_split(X).select(W))
        return kept[1]

    def _iteration(self, model: _Model, M: _Local, row, st: _Step, alpha, previous, index):
        """path.py's Newton step on the working set's own Gram; after a small one the next
        pass checks the new theta on the Gram before it (AHEAD). The fit has settled where the
        step is within the tolerance and the full gradient meets the KKT conditions outside the
        set (_settle)."""
        key = id(model)
        penalty = None if alpha is None else self._penalty(model, alpha)
        value = row[TRAIN_DEVIANCE] / 2 + (penalty.value(model.theta[:-1]) if penalty else 0)
        worse = st.best is not None and not value <= st.best[1] + 1e-13 * abs(st.best[1])
        if row[OUTSIDE] or worse or not math.isfinite(value):
            return self._halve(model, st)
        previous_value = None if st.best is None else st.best[1]
        st.best, st.scale = (model.theta.copy(), value), 1.0
        moved = self._step(model, M, st, penalty)
        settled = previous_value is None or abs(value - previous_value) <= (
            self.s.objective_tolerance * (abs(value) + 0.1)
        )
        bound = self.s.step_tolerance**2 * max(row[TRAIN_DEVIANCE], 1e-300)
        if moved <= bound and settled:
            if self.full[key] is not None:
                return self._settle(model, st, row, penalty, index)
            self.ahead[key] = True  # the full gradient at the same theta (its Gram kept)
            return True
        if M.reused:  # the check after a small step failed (Newton's convergence is slow
            self.plain.add(key)  # here): path.py's passes from here on, each with its Gram
            self.ahead[key] = True  # and the full gradient
            return True
        self.ahead[key] = moved <= AHEAD * bound or key in self.plain
        model.theta = model.theta + st.step
        return True

    def _step(self, model: _Model, M: _Local, st: _Step, penalty) -> float:
        """The penalized least squares' step on the working set (st.step); its Σ W Δη²."""
        W = self.working[id(model)]
        w, beta = len(W), model.theta[W]
        if penalty is None and st.free and w:  # the null model of the unpenalized features
            part = self._null_penalty.restricted(W)
        else:
            part = None if penalty is None or not w else penalty.restricted(W)
        new = beta
        if part is not None:
            tolerance = self.s.descent_tolerance
            new = minimise(M.H, M.c, beta, beta, part, None, M.rr, tolerance)[0]
        delta = new - beta
        st.step = np.zeros(self.F + 1)
        st.step[W] = delta
        st.step[-1] = M.mean[w] - M.mean[:w] @ delta
        return float(delta @ M.H @ delta + M.weight * M.mean[w] ** 2)

    def _settle(self, model: _Model, st: _Step, row, penalty, index) -> bool:
        """Settled on the working set: the features outside it whose KKT conditions fail join
        it (another pass), else the model is done at theta."""
        W, key = self.working[id(model)], id(model)
        gradient = -self.full[key]  # the smooth part's, every column's, at theta
        if penalty is not None:
            outside = np.setdiff1d(np.arange(self.F), W)
            bad = np.intersect1d(penalty.violations(model.theta[:-1], gradient, 1e-12), outside)
            if len(bad):  # the KKT conditions fail outside the set: the worst join it
                bad = strongest(bad, gradient, penalty, joining(W))
                if len(W) + len(bad) > MAX_WORKING:
                    raise Full(len(W) + len(bad))
                self.working[key] = np.union1d(W, bad)
                st.best = None
                return True
        model.gradient, model.deviance = gradient, float(row[TRAIN_DEVIANCE])
        if index is not None:
            self._record(model, index, *row[_FIGURES])
        self.plain.discard(key)
        return False

    def _least_squares_path(self, alpha: float, index: int) -> bool:
        """Every least-squares model at α by coordinate descent on its working set's moments
        from the covariance cache, the KKT conditions checked on every feature's gradient from
        it; a pass only for the features that join a working set for the first time. False
        where the cache would pass its bytes."""
        cache, pending = self.covariance, list(self.models)
        while pending:
            sets = [self.working[id(m)] for m in pending]
            if max(len(W) for W in sets) > MAX_WORKING:
                raise Full(max(len(W) for W in sets))
            passes = cache.ensure(np.unique(np.concatenate(sets)))
            if passes is None:
                return False
            self.passes += passes
            still = []
            for model, W in zip(pending, sets):
                penalty = self._penalty(model, alpha)
                S, c, zz, x_mean, z_mean, weight = cache.moments(model.fold, W)
                part, tolerance = penalty.restricted(W), self.s.descent_tolerance
                beta = minimise(S[W], c[W], np.zeros(len(W)), model.theta[W], part, None, zz,
                                tolerance)[0]  # fmt: skip
                gradient = S @ beta - c
                theta = np.zeros(self.F + 1)
                theta[W], theta[-1] = beta, z_mean - x_mean[W] @ beta
                model.theta, model.gradient = theta, gradient
                outside = np.setdiff1d(np.arange(self.F), W)
                bad = np.intersect1d(penalty.violations(theta[:-1], gradient, 1e-12), outside)
                if len(bad):  # the KKT conditions fail outside the set: the worst join it
                    self.working[id(model)] = np.union1d(W, strongest(bad, gradient, penalty,
                                                                      joining(W)))  # fmt: skip
                    still.append(model)
                    continue
                deviance = float(beta @ S[W] @ beta - 2 * c[W] @ beta + zz)
                held, held_weight = math.nan, 0.0
                if model.fold is not None:
                    held, held_weight = cache.held_out(model.fold, W, beta, theta[-1])
                self._record(model, index, deviance, held, held_weight)
            pending = still
        return True

    def _halve(self, model: _Model, st: _Step) -> bool:
        """path.py's halving, and the step's own Gram from here on."""
        self.refresh[id(model)] = True
        return super()._halve(model, st)

    def _solve(self, alpha: float, previous: float | None, index: int) -> str | None:
        """Every model's fit at α: its working set the non-zero coefficients and the features
        the sequential strong rule keeps, then IRLS on working sets; or, where a working set
        would pass MAX_WORKING, why the path ends (glmnet's pmax)."""
        for model in self.models:
            self.plain.discard(id(model))
            penalty = self._penalty(model, alpha)
            strong = self._strong(model, alpha, previous, penalty)
            if strong is None:  # no previous solution: the features the gradient at α keeps
                strong = np.flatnonzero(np.abs(model.gradient) >= penalty.l1)
            W = np.union1d(self.working[id(model)], np.flatnonzero(model.theta[:-1]))
            room = min(joining(W), MAX_WORKING - len(W))
            strong = strongest(np.setdiff1d(strong, W), model.gradient, penalty, max(room, 0))
            self.working[id(model)] = np.union1d(W, strong)
        if self.fixed and self.covariance is None:
            self.covariance = Covariance.of(self.job, self.shard, self.s.folds, self.F) or False
            self.passes += bool(self.covariance)
        try:
            if not (self.covariance and self._least_squares_path(alpha, index)):
                self.covariance = False  # past the cache's bytes: the passes from here on
                self._irls(alpha, previous, index)
        except Full as full:
            return (
                f"at alpha {alpha:.6g} a model's working set would hold {full.size} features, "
                f"more than the {MAX_WORKING} whose Gram a pass sums; the strengths before it "
                "are the path (raise --alpha_min_ratio for a path of fewer features)"
            )
        return None


# After a Newton step within this factor of the tolerance (Σ W Δη² <= AHEAD x TOLERANCE² x
# the deviance; its error is then about its square) the next pass checks: the full gradient and
# r's products at the new theta, with the Gram of the theta before (a pass of 2 x the set's
# non-zeros, against the Gram's pairs of them). Where that step too is within the tolerance the
# model has settled, as path.py's does on a Gram of its own; else its own Gram at that theta.
AHEAD = 1e6


@dataclass
class _Order:
    """What a pass sums for one model: 4 figures, then the working set's moments (its Gram by
    plan, or without a plan r's products alone), then Xᵀ[Wr W] over every column if full."""

    width: int  # the working set's features
    plan: Plan | None
    full: bool
    F: int

    @property
    def moments(self) -> int:
        return sums_size(self.plan) if self.plan is not None else 2 * self.width + 3

    @property
    def size(self) -> int:
        return 4 + self.moments + (2 * self.F if self.full else 0)


@dataclass
class _Local:
    """A model's moments of [X_W r] at its theta: Σ W, the means of X_W and r, the centred Gram
    H of X_W (reused: summed at the theta before), c = Σ W (x - x̄)(r - r̄), Σ W (r - r̄)²."""

    weight: float
    mean: np.ndarray
    H: np.ndarray
    c: np.ndarray
    rr: float
    reused: bool = True


def _plan(width: int) -> Plan:
    """The plan of a working set of width columns beside r and the intercept: no block
    eliminated (the sums are its whole Gram)."""
    S = np.arange(width + 2)
    return Plan(width + 2, None, np.zeros(0, np.intp), S)


def _centred(values: np.ndarray, w: int) -> _Local:
    """The centred moments of [X_W r] from the Gram of [X_W r 1] by its weights (the last
    (w + 2)² values): H in an array of its own, whose rows coordinate descent reads, made by
    rows (no temporary as large as itself)."""
    G = values[-((w + 2) ** 2) :].reshape(w + 2, w + 2)
    weight = float(G[-1, -1])
    if not weight > 0:
        return _Local(0.0, np.zeros(w + 1), np.zeros((w, w)), np.zeros(w), 0.0, reused=False)
    mean = G[-1, :-1] / weight
    H = np.empty((w, w))
    for start in range(0, w, _CENTRED_ROWS):
        rows = slice(start, min(start + _CENTRED_ROWS, w))
        product = np.outer(mean[rows], mean[:w])
        product *= weight
        np.subtract(G[rows, :w], product, out=H[rows])
    c = G[:w, w] - weight * (mean[:w] * mean[w])
    return _Local(weight, mean, H, c, float(G[w, w] - weight * mean[w] ** 2), reused=False)


_CENTRED_ROWS = 256
