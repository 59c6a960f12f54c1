"""glmnet's relaxed lasso (relax = TRUE): at each strength of the path, the unpenalized fit of
the features the lasso keeps there (the others held at 0, the limits kept), and its blend with
the lasso, γ x the lasso's coefficients + (1 - γ) x the relaxed ones.

Each model (the full data's and every fold's) is refitted once for each distinct set of
non-zero coefficients on its path, by the path's own IRLS (path.py: the models step together,
one pass for all of them per iteration) or, for a gaussian identity fit, from its moments; a
strength with no feature keeps the lasso's intercept-only fit, as glmnet does. With folds, the
held-out deviance (or --type_measure) of every blend at every strength is one more pass, and
the pair (strength, γ) is chosen as cv.glmnet's relaxed fit chooses it: the best mean, ties to
the larger strength and then the larger γ; for 1se, the largest strength (then γ) whose mean is
within one standard error of it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.solvers.penalty import Penalty

GAMMAS = (0.0, 0.25, 0.5, 0.75, 1.0)  # cv.glmnet's default gamma


@dataclass(frozen=True)
class Relaxed:
    """The relaxed fits and, with folds, the choice among their blends."""

    gammas: np.ndarray  # (G,) the blends considered
    coefficients: np.ndarray  # (strengths, F + 1): the full data's relaxed fits (γ = 0)
    mean: np.ndarray | None  # (G, strengths): the blends' cross-validated means
    se: np.ndarray | None
    gamma_min: float
    index_min: int  # the strength chosen by the least mean (auc: the largest)
    gamma_1se: float
    index_1se: int

    def blend(self, lasso: np.ndarray, gamma: float, index: int) -> np.ndarray:
        """[w..., b] of the blend at a strength: γ lasso + (1 - γ) relaxed."""
        return gamma * lasso[index] + (1.0 - gamma) * self.coefficients[index]


def refits(path, thetas: list, alphas) -> np.ndarray:
    """(models, strengths, F + 1): every model's relaxed fit at every strength, given thetas,
    each strength's list of every model's lasso fit (at alphas); path: the path.py fit that
    made them. A refit that does not converge (rows that separate its features drive a
    coefficient to infinity) ends the run with a UsageError that says where."""
    F, models = path.F, path.models
    lower, upper = path.s.controls.penalty(1.0, 1.0, np.ones(F)).bounds
    out = np.array(thetas).transpose(1, 0, 2).copy()  # the lasso's, replaced where refitted
    seen: list[dict[bytes, np.ndarray]] = [{} for _ in models]
    zero = np.zeros(F)
    for i, at in enumerate(thetas):
        todo = []
        for j, model in enumerate(models):
            active = at[j][:-1] != 0
            key = active.tobytes()
            if not active.any():
                continue  # the intercept-only fit: the lasso's own
            if key in seen[j]:
                out[j, i] = seen[j][key]
                continue
            model.theta = at[j].copy()
            model.relaxed = Penalty(
                zero, zero, np.where(active, lower, 0.0), np.where(active, upper, 0.0)
            )
            todo.append((j, model, key))
        if todo:
            try:
                path.refit([model for _, model, _ in todo])
            except UsageError:
                kept = max(int(np.count_nonzero(at[j][:-1])) for j, _, _ in todo)
                raise UsageError(
                    f"--relax: the unpenalized refit of the {kept} features the lasso keeps at "
                    f"alpha {alphas[i]:.6g} did not converge in --max_iter iterations (with few "
                    "rows to a feature, rows that separate them drive coefficients to "
                    "infinity): raise --alpha_min_ratio to end the path before it, or fit "
                    "without --relax"
                ) from None
            for j, model, key in todo:
                out[j, i] = seen[j][key] = model.theta.copy()
    for model in models:
        model.relaxed = None
    return out


def choose(mean: np.ndarray, se: np.ndarray, alphas: np.ndarray, gammas, larger: bool):
    """cv.glmnet's relaxed choice: (γ_min, index_min, γ_1se, index_1se) from the (G, strengths)
    means and standard errors; larger: the largest mean is best (auc)."""
    sign = -1.0 if larger else 1.0
    m = sign * mean
    best = np.nanmin(m)

    def pick(ok):
        g, i = np.nonzero(ok)
        # the largest strength (the smallest index), then the largest γ
        order = np.lexsort((-np.asarray(gammas)[g], -alphas[i]))
        return int(g[order[0]]), int(i[order[0]])

    g0, i0 = pick(m <= best)
    g1, i1 = pick(m <= m[g0, i0] + se[g0, i0])
    return float(gammas[g0]), i0, float(gammas[g1]), i1
