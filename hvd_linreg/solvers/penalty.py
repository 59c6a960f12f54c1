"""The penalty of a fit: per-coefficient L1 and L2 strengths, as glum's P1 and P2 have them.

The objective a penalized fit minimises, for every family, link, prior weight w and offset, is

    (1 / (2 Σw)) Σ wᵢ d(yᵢ, μᵢ) + Σⱼ P1ⱼ |βⱼ| + ½ Σⱼ P2ⱼ βⱼ²

with d the family's unit deviance and the intercept not penalized. The elastic net of strength α
and mixing l1_ratio ρ (scikit-learn's and glum's parameters; glmnet's lambda and alpha) is
P1 = α ρ s and P2 = α (1 - ρ) s², where s is each feature's scale: its weighted standard
deviation when the features are standardized (the penalty then applies to the standardized
coefficient sⱼ βⱼ, as glmnet's standardize = TRUE has it), else 1. glmnet's penalty factor fⱼ
(glum's P1 and P2 vectors) multiplies both: P1 = α ρ s f, P2 = α (1 - ρ) s² f.

glmnet's limits bound each coefficient to [lowerⱼ, upperⱼ] (lower <= 0 <= upper, so that 0 is
always feasible); a feature kept out of the model has both at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Penalty:
    """Σ l1ⱼ |βⱼ| + ½ Σ l2ⱼ βⱼ², the intercept not penalized."""

    l1: np.ndarray  # (F,) P1
    l2: np.ndarray  # (F,) P2
    lower: np.ndarray | None = None  # (F,) each coefficient's bound; None: unbounded
    upper: np.ndarray | None = None

    @classmethod
    def elastic_net(
        cls,
        alpha: float,
        l1_ratio: float,
        scales: np.ndarray,
        l1_factors: np.ndarray | None = None,
        l2_factors: np.ndarray | None = None,
    ) -> Penalty:
        """α (ρ Σ f1ⱼ |sⱼ βⱼ| + (1 - ρ)/2 Σ f2ⱼ (sⱼ βⱼ)²), the factors 1 where not given."""
        scales = np.asarray(scales, np.float64)
        f1 = 1.0 if l1_factors is None else np.asarray(l1_factors, np.float64)
        f2 = 1.0 if l2_factors is None else np.asarray(l2_factors, np.float64)
        return cls(alpha * l1_ratio * scales * f1, alpha * (1.0 - l1_ratio) * scales * scales * f2)

    def bounded(self, lower: np.ndarray | None, upper: np.ndarray | None) -> Penalty:
        """The same penalty with the coefficients held to [lower, upper] (None: unbounded)."""
        return replace(self, lower=lower, upper=upper)

    @property
    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The lower and upper bounds, ±inf where there are none."""
        n = len(self.l1)
        lower = np.full(n, -np.inf) if self.lower is None else self.lower
        upper = np.full(n, np.inf) if self.upper is None else self.upper
        return lower, upper

    def restricted(self, columns: np.ndarray) -> Penalty:
        """The penalty of the coefficients in columns alone."""
        lower = None if self.lower is None else self.lower[columns]
        upper = None if self.upper is None else self.upper[columns]
        return Penalty(self.l1[columns], self.l2[columns], lower, upper)

    @classmethod
    def ridge(cls, l2: float, num_features: int) -> Penalty:
        """--l2's ridge, l2 ‖w‖²: P2 = 2 l2 for every coefficient, no L1."""
        return cls(np.zeros(num_features), np.full(num_features, 2.0 * l2))

    @property
    def penalized(self) -> bool:
        """Whether any coefficient is penalized."""
        return bool(self.l1.any() or self.l2.any())

    def value(self, beta: np.ndarray) -> float:
        """The penalty at the coefficients β (no intercept): a vector, or F x K′ with each
        column penalized alike."""
        return float(np.sum(self.l1 @ np.abs(beta)) + 0.5 * np.sum(self.l2 @ (beta * beta)))

    def scaled(self, factor: float) -> Penalty:
        """The penalty times factor: the objective times Σw is the sums' own scale."""
        return replace(self, l1=self.l1 * factor, l2=self.l2 * factor)

    def violations(self, beta: np.ndarray, gradient: np.ndarray, tol: float) -> np.ndarray:
        """The coefficients where the objective's subgradient condition (KKT) fails by more
        than tol of its scale: gradient is the smooth loss's ∂/∂β at β. A zero coefficient
        needs |gradient| <= l1; a non-zero one gradient + l2 β + l1 sign(β) = 0. At a bound, only
        the direction into the bounds counts: the derivative that way must not be negative."""
        g = gradient + self.l2 * beta
        scale = np.abs(gradient) + self.l1 + tol
        zero = beta == 0
        bad = np.where(zero, np.abs(g) - self.l1, np.abs(g + self.l1 * np.sign(beta)))
        if self.lower is not None or self.upper is not None:
            lower, upper = self.bounds
            up = g + self.l1 * np.where(beta >= 0, 1.0, -1.0)  # the derivative moving up
            down = -(g + self.l1 * np.where(beta <= 0, -1.0, 1.0))  # and moving down
            at_lower, at_upper = beta <= lower, beta >= upper
            bad = np.where(at_lower, -up, bad)
            bad = np.where(at_upper, -down, bad)
            bad = np.where(at_lower & at_upper, 0.0, bad)
        return np.flatnonzero(bad > tol * scale)
