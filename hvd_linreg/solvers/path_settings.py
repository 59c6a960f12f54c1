"""What a penalized fit is asked for (config.py's --alpha ... --select, or fit()'s), and
the tolerances its solvers take from --tol and --max_iter.

--tol is coordinate descent's tolerance (coordinate_descent.TOLERANCE, 1e-13, by default), and
IRLS's two tests keep their ratios to it: the step's 1000 tol, the objective's 10 tol.
--max_iter bounds IRLS's iterations at each strength (irls.MAX_ITERATIONS by default); a
gaussian identity fit has none. A strength that reaches it unconverged is refused."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data import folds
from hvd_linreg.data.folds import Folds
from hvd_linreg.solvers import coordinate_descent
from hvd_linreg.solvers.irls import MAX_ITERATIONS, OBJECTIVE_TOLERANCE
from hvd_linreg.solvers.path_controls import Controls, controls_for

TOLERANCE = 1e-10  # IRLS's test of the step (path.py)
# With l1_ratio 0 (ridge) every strength keeps every coefficient: α_max is taken at this
# l1_ratio instead, as glmnet does.
RIDGE_L1_RATIO = 1e-3
# glmnet's end of the path (glmnet.control's mnlam, fdev and devmax; path_end)
MIN_STRENGTHS, DEV_CHANGE, DEV_MAX = 5, 1e-5, 0.999


@dataclass(frozen=True)
class PathSettings:
    """What a penalized fit is asked for (config.py's --alpha ... --select)."""

    l1_ratio: float = 1.0
    standardize: bool = True
    alphas: tuple[float, ...] | None = None  # --alpha: these strengths alone; None: the path
    n_alphas: int = 100
    whole_path: bool = False  # every strength, not glmnet's end where the fit stops moving
    alpha_min_ratio: float | None = None  # None: 1e-4 with more rows than features, else 1e-2
    folds: Folds | None = None
    select: str = "min"  # the model reported with cross-validation: "min" or "1se"
    # A fold's strength: "same", α on its mean deviance (glmnet, glum, ElasticNetCV); "sum", the
    # same penalty against its summed deviance, α x Σw / its Σw (LogisticRegressionCV's C)
    fold_alpha: str = "same"
    type_measure: str = "deviance"  # cv.glmnet's: the held-out figure that chooses
    relax: bool = False  # glmnet's relaxed lasso (relaxed.py)
    relax_gamma: float | None = None  # its blend; None: chosen by CV (0 without folds)
    tol: float | None = None  # --tol: coordinate descent's; None: its TOLERANCE
    max_iter: int | None = None  # --max_iter: IRLS's iterations at a strength
    # glmnet's penalty factors, excluded features and limits (path_controls.py)
    controls: Controls = Controls()

    @property
    def descent_tolerance(self) -> float:
        return coordinate_descent.TOLERANCE if self.tol is None else self.tol

    @property
    def step_tolerance(self) -> float:
        """IRLS's test of the step, 1000 times coordinate descent's."""
        return TOLERANCE if self.tol is None else 1e3 * self.tol

    @property
    def objective_tolerance(self) -> float:
        return OBJECTIVE_TOLERANCE if self.tol is None else 10.0 * self.tol

    @property
    def iterations(self) -> int:
        return MAX_ITERATIONS if self.max_iter is None else self.max_iter

    def strengths(self, gradient, scales, rows: int, F: int, weight: float = 1.0) -> list:
        """The default sequence: from α_max, the penalized features' largest |gradient| over
        weight x their L1 factors (scales, at RIDGE_L1_RATIO for a ridge), log-spaced down to
        α_max x --alpha_min_ratio (1e-4 with more rows than the F features, else 1e-2)."""
        ratio = max(self.l1_ratio, RIDGE_L1_RATIO)
        top = float(np.max(np.abs(gradient) / (weight * ratio * scales)))
        top = top if top > 0 else 1.0  # no feature moves the fit: every strength its null model
        low = self.alpha_min_ratio or (1e-4 if rows > F else 1e-2)
        steps = np.exp(np.linspace(math.log(top), math.log(top * low), self.n_alphas))
        return [float(a) for a in steps]

    def path_end(self, explained: np.ndarray | None, family: str, own: bool = True) -> int | None:
        """glmnet's end of a path, given the fraction of the null deviance explained at each
        strength so far (NaN where not yet known; None where the null deviance is 0): the
        first strength, from the MIN_STRENGTHS-th on, where it passed DEV_MAX or stopped
        moving, by glmnet's rule for the family: for "gaussian" (identity), by less than
        DEV_CHANGE of itself from the strength before; for "poisson", by less than 10
        DEV_CHANGE of itself from MIN_STRENGTHS - 1 strengths before; for the others, by less
        than DEV_CHANGE; with a limit at 0, by DEV_MAX alone where glmnet fits the family by
        its own code (own; not a family object's glmnet.path, which keeps its rule). None where
        none has
        yet, or the strengths were given or all asked for (glmnet fits a given lambda
        whole)."""
        if explained is None or self.alphas is not None or self.whole_path:
            return None
        for j in range(MIN_STRENGTHS - 1, len(explained)):
            if math.isnan(explained[j]):
                return None  # not yet known
            if self.controls.zero_limit and own:  # glmnet's fdev = 0: DEV_MAX alone
                still = False
            elif family == "gaussian":
                still = explained[j] - explained[j - 1] < DEV_CHANGE * explained[j]
            elif family == "poisson":
                back = explained[j - MIN_STRENGTHS + 1]
                still = explained[j] - back < 10 * DEV_CHANGE * explained[j]
            else:
                still = explained[j] - explained[j - 1] < DEV_CHANGE
            if explained[j] > DEV_MAX or still:
                return j
        return None


def glmnets_own(family, gaussian: bool) -> bool:
    """Whether glmnet fits this family by its own Fortran (gaussian, binomial and Poisson with
    their canonical links), not as a family object (glmnet.path): the two end a path with a
    limit at 0 differently (PathSettings.path_end)."""
    own = family.NAME in ("logistic", "binomial", "poisson") and family.canonical
    return gaussian or own


def settings_for(cfg, job, shard) -> PathSettings:
    """The elastic net the settings ask for, its folds agreed by every rank."""
    chosen = None
    if cfg.cv is not None:
        chosen = folds.hashed(cfg.cv, cfg.seed)
    elif shard.carried_columns.fold is not None:  # --fold_column, or fit(fold=)
        chosen = folds.agree(job, shard, shard.carried_columns.fold)
    return PathSettings(
        l1_ratio=cfg.penalty_l1_ratio,
        standardize=cfg.standardize,
        alphas=_strengths(cfg.alpha),
        n_alphas=cfg.n_alphas,
        whole_path=cfg.whole_path,
        alpha_min_ratio=cfg.alpha_min_ratio,
        folds=chosen,
        select=cfg.select,
        fold_alpha=cfg.fold_alpha,
        type_measure=cfg.type_measure,
        relax=cfg.relax,
        relax_gamma=cfg.relax_gamma,
        tol=cfg.tol,
        max_iter=cfg.max_iter,
        controls=controls_for(cfg, _names(shard)),
    )


def _names(shard) -> tuple[str, ...]:
    F = shard.num_features
    return tuple(shard.feature_names or (f"w[{j}]" for j in range(F)))


def _strengths(alpha) -> tuple[float, ...] | None:
    """--alpha as the path's strengths: None (the path), one, or fit()'s list of them."""
    if alpha is None:
        return None
    return tuple(float(a) for a in (alpha if isinstance(alpha, (list, tuple)) else [alpha]))
