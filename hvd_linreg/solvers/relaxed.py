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

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.solvers import cv_measures
from hvd_linreg.solvers.path_fit import Relaxed, cross_validation
from hvd_linreg.solvers.penalty import Penalty

GAMMAS = (0.0, 0.25, 0.5, 0.75, 1.0)  # cv.glmnet's default gamma


def refits(models, thetas: list, alphas, active, unpenalized, refit, settled) -> np.ndarray:
    """(models, strengths, n): every model's relaxed fit at every strength, given thetas, each
    strength's list of every model's lasso fit (at alphas). The path that made them says which
    features a theta keeps (active(theta)), holds the others at 0 (unpenalized(kept): a model's
    relaxed setting), refits models (refit(models)) and settles a refit's theta (settled). A
    refit that does not converge (rows that separate its features drive a coefficient to
    infinity) ends the run with a UsageError that says where."""
    out = np.array(thetas).transpose(1, 0, 2).copy()  # the lasso's, replaced where refitted
    seen: list[dict[bytes, np.ndarray]] = [{} for _ in models]
    for i, at in enumerate(thetas):
        todo = []
        for j, model in enumerate(models):
            kept = active(at[j])
            key = kept.tobytes()
            if not kept.any():
                continue  # the intercept-only fit: the lasso's own
            if key in seen[j]:
                out[j, i] = seen[j][key]
                continue
            model.theta = at[j].copy()
            model.relaxed = unpenalized(kept)
            todo.append((j, model, key))
        if todo:
            try:
                refit([model for _, model, _ in todo])
            except UsageError:
                most = max(int(np.count_nonzero(active(at[j]))) for j, _, _ in todo)
                raise UsageError(
                    f"--relax: the unpenalized refit of the {most} features the lasso keeps at "
                    f"alpha {alphas[i]:.6g} did not converge in --max_iter iterations (with few "
                    "rows to a feature, rows that separate them drive coefficients to "
                    "infinity): raise --alpha_min_ratio to end the path before it, or fit "
                    "without --relax"
                ) from None
            for j, model, key in todo:
                out[j, i] = seen[j][key] = settled(model.theta)
    for model in models:
        model.relaxed = None
    return out


def unpenalized(controls, active: np.ndarray) -> Penalty:
    """A relaxed refit's penalty: none, the features outside active held at 0, the limits
    kept."""
    zero = np.zeros(len(active))
    return controls.unpenalized_within(Penalty(zero, zero), active)


def fitted(settings, alphas, lasso, again, fold_weights, held_out) -> Relaxed:
    """The relaxed fits (again: every model's, lasso: every model's lasso fits, both (models,
    strengths, n)) and, with folds (fold_weights not None), each blend's cross-validation:
    held_out(blends) gives each fold's measure of every blend (K, blends), one pass; and
    cv.glmnet's choice among them."""
    s = settings
    gammas = np.array(GAMMAS if s.relax_gamma is None else (s.relax_gamma,))
    last = len(alphas) - 1
    if fold_weights is None:
        g = 0.0 if s.relax_gamma is None else s.relax_gamma
        return Relaxed(gammas, again[0], None, None, g, last, g, last)
    K, S = len(fold_weights), len(alphas)
    blends = np.concatenate([g * lasso[1:] + (1 - g) * again[1:] for g in gammas], axis=1)
    held = held_out(blends).reshape(K, len(gammas), S)
    each = [cross_validation(held[:, g], fold_weights, s.type_measure) for g in range(len(gammas))]
    mean, se = np.array([c.mean for c in each]), np.array([c.se for c in each])
    larger = s.type_measure in cv_measures.LARGER_IS_BETTER
    g0, i0, g1, i1 = choose(mean, se, alphas, gammas, larger)
    return Relaxed(gammas, again[0], mean, se, g0, i0, g1, i1)


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
