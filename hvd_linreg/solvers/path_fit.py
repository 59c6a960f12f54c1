"""What an elastic-net path gives (path.py, wide_path.py, multinomial_path.py): the fit, and
cv.glmnet's cross-validation over the folds."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.solvers import cv_measures
from hvd_linreg.solvers.moments import Moments
from hvd_linreg.solvers.path_settings import PathSettings


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

    def chosen(self, select: str) -> tuple[float, int]:
        """The γ and strength --select chooses: min or 1se."""
        return (
            (self.gamma_1se, self.index_1se)
            if select == "1se"
            else (self.gamma_min, self.index_min)
        )

    def blend(self, lasso: np.ndarray, gamma: float, index: int) -> np.ndarray:
        """[w..., b] of the blend at a strength: γ lasso + (1 - γ) relaxed."""
        return gamma * lasso[index] + (1.0 - gamma) * self.coefficients[index]


@dataclass(frozen=True)
class CrossValidation:
    """cv.glmnet's figures: each fold's held-out measure at each strength (its mean deviance,
    or mse, mae, class weighted by the rows' weights; or its auc), their mean over the folds
    weighted by each fold's weight, and its standard error."""

    raw: np.ndarray  # (K, strengths)
    weights: np.ndarray  # (K,) each fold's Σw
    mean: np.ndarray
    se: np.ndarray
    index_min: int  # the largest strength with the best mean (least; auc: largest)
    index_1se: int  # the largest strength within one standard error of it
    measure: str = "deviance"

    def chosen(self, select: str) -> int:
        """The strength --select chooses: min or 1se."""
        return self.index_1se if select == "1se" else self.index_min


@dataclass(frozen=True)
class PathFit:
    """A penalized fit: the whole path, the cross-validation, and the model chosen."""

    STATISTICS = "path"  # its statistics' module (statistics.describe)
    converged = True  # a strength that does not converge ends the run
    dependent = ()

    params: np.ndarray  # the chosen model's, (F + 1) x 1 (coefficients.py)
    loss: float  # the family's mean loss there, as an unpenalized fit reports it
    objective: float  # the penalized objective there
    index: int  # the chosen strength's place on the path
    alphas: np.ndarray
    coefficients: np.ndarray  # (strengths, F + 1): [w..., b] at each
    fold_coefficients: np.ndarray | None  # (folds, strengths, F + 1): each fold's model's
    deviance: np.ndarray  # Σ w d at each strength, on the training rows
    null_deviance: float  # the intercept-only model's (with the offsets)
    cv: CrossValidation | None
    passes: int  # over the data, in all
    count: int  # rows of weight > 0
    settings: PathSettings = field(repr=False)
    ended: str | None = None  # why the path ended before the strengths asked for
    relaxed: Relaxed | None = None  # --relax: the relaxed fits and the choice among blends
    gamma: float | None = None  # --relax: the chosen blend's γ (1: the lasso)

    @property
    def iterations(self) -> int:
        """Its passes over the data, as an unpenalized fit counts its iterations."""
        return self.passes

    @property
    def alpha(self) -> float:
        return float(self.alphas[self.index])

    @property
    def dev_ratio(self) -> np.ndarray:
        """The fraction of the null deviance explained at each strength."""
        if not self.null_deviance > 0:
            return np.zeros(len(self.alphas))
        return 1.0 - self.deviance / self.null_deviance

    @property
    def nonzero(self) -> np.ndarray:
        return np.count_nonzero(self.coefficients[:, :-1], axis=1)


def merged(parts: list[Moments]) -> Moments:
    out = parts[0]
    for part in parts[1:]:
        out = out.merge(part)
    return out


@dataclass(frozen=True)
class MultinomialPathFit:
    """A penalized multinomial fit: the path, the cross-validation and the model chosen; each
    strength's coefficients (F + 1) x K, a column per class, the last row the intercepts."""

    params: np.ndarray  # the chosen strength's (F + 1) x K
    index: int
    alphas: np.ndarray
    coefficients: np.ndarray  # (strengths, F + 1, K)
    deviance: np.ndarray  # -2 Σ w log P(y | x) at each strength, on the training rows
    null_deviance: float
    cv: CrossValidation | None
    passes: int
    weight: float  # Σ w
    settings: PathSettings
    relaxed: Relaxed | None = None  # --relax: coefficients (strengths, K (F + 1)), class by class
    gamma: float | None = None  # --relax: the chosen blend's γ
    ended = None  # a path of classes fits every strength asked for

    @property
    def alpha(self) -> float:
        return float(self.alphas[self.index])

    @property
    def dev_ratio(self) -> np.ndarray:
        return 1.0 - self.deviance / self.null_deviance

    @property
    def nonzero(self) -> np.ndarray:
        """At each strength, the features with a non-zero coefficient in some class."""
        return np.count_nonzero(np.any(self.coefficients[:, :-1, :] != 0, axis=2), axis=1)

    @property
    def reference_params(self) -> np.ndarray:
        """The chosen model as the unpenalized fit's (F + 1) x (K - 1) B: each class's
        coefficients less the first class's (the same probabilities)."""
        return self.params[:, 1:] - self.params[:, :1]


def cross_validation(held: np.ndarray, weights: np.ndarray, measure="deviance") -> CrossValidation:
    """cv.glmnet's mean and standard error over the folds (grouped, weighted by each fold's
    Σw), and its two choices of strength (for auc, the largest is best)."""
    K = len(weights)
    mean = weights @ held / weights.sum()
    se = np.sqrt((weights @ (held - mean) ** 2) / weights.sum() / (K - 1))
    sign = -1.0 if measure in cv_measures.LARGER_IS_BETTER else 1.0
    best = int(np.argmin(sign * mean))  # the first, the largest strength, of the best
    within = np.flatnonzero(sign * mean <= sign * mean[best] + se[best])
    return CrossValidation(held, weights, mean, se, best, int(within[0]), measure)
