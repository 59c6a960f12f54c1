"""The penalty of a fit: per-coefficient L1 and L2 strengths, as glum's P1 and P2 have them.

The objective a penalized fit minimises, for every family, link, prior weight w and offset, is

    (1 / (2 Σw)) Σ wᵢ d(yᵢ, μᵢ) + Σⱼ P1ⱼ |βⱼ| + ½ Σⱼ P2ⱼ βⱼ²

with d the family's unit deviance and the intercept not penalized. The elastic net of strength α
and mixing l1_ratio ρ (scikit-learn's and glum's parameters; glmnet's lambda and alpha) is
P1 = α ρ s and P2 = α (1 - ρ) s², where s is each feature's scale: its weighted standard
deviation when the features are standardized (the penalty then applies to the standardized
coefficient sⱼ βⱼ, as glmnet's standardize = TRUE has it), else 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Penalty:
    """Σ l1ⱼ |βⱼ| + ½ Σ l2ⱼ βⱼ², the intercept not penalized."""

    l1: np.ndarray  # (F,) P1
    l2: np.ndarray  # (F,) P2

    @classmethod
    def elastic_net(cls, alpha: float, l1_ratio: float, scales: np.ndarray) -> Penalty:
        """α (ρ ‖s β‖₁ + (1 - ρ)/2 ‖s β‖₂²)."""
        scales = np.asarray(scales, np.float64)
        return cls(alpha * l1_ratio * scales, alpha * (1.0 - l1_ratio) * scales * scales)

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
        return Penalty(self.l1 * factor, self.l2 * factor)

    def violations(self, beta: np.ndarray, gradient: np.ndarray, tol: float) -> np.ndarray:
        """The coefficients where the objective's subgradient condition (KKT) fails by more
        than tol of its scale: gradient is the smooth loss's ∂/∂β at β. A zero coefficient
        needs |gradient| <= l1; a non-zero one gradient + l2 β + l1 sign(β) = 0."""
        g = gradient + self.l2 * beta
        scale = np.abs(gradient) + self.l1 + tol
        zero = beta == 0
        bad = np.where(zero, np.abs(g) - self.l1, np.abs(g + self.l1 * np.sign(beta)))
        return np.flatnonzero(bad > tol * scale)
