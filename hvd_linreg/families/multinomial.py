"""Multinomial logistic regression (--model multinomial): a target of K classes, the first the
reference, each other class's log-odds against it linear in x. Its exact fit is Newton's method
on the whole log-likelihood (solvers/multinomial.py), and its recipe is multinomial.py: the
coefficients are a matrix B, (F + 1) x (K - 1), a column per class but the first.

A family of classes is made for the classes a run's rows hold (with_classes): SGD's start,
loss and scores need their count."""

from __future__ import annotations

import copy

import numpy as np

from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import namespace


class Multinomial(Family):
    NAME = "multinomial"
    LINKS = ("logit",)
    CANONICAL_LINK = "logit"
    SOLVER = "multinomial"
    SCORES = "classes"
    CLASSES = True

    def with_classes(self, classes: list) -> Multinomial:
        """This family for a target of these classes."""
        family = copy.copy(self)
        family.labels = list(classes)
        return family

    def initial_params(self, seed: int, rank: int, num_features: int) -> np.ndarray:
        """N(0, 1) start values, (F + 1) x (K - 1), each rank its own (as Family's)."""
        shape = (num_features + 1, len(self.labels) - 1)
        return np.random.default_rng([seed, rank]).standard_normal(shape)

    def loss_terms(self, y, eta):
        """-log P(y | x) per row: the softmax of [0, η_1 .. η_{K-1}] (y: the class's number),
        on NumPy arrays or SGD's tensors (maths.namespace)."""
        xp = namespace(eta)
        logits = xp.concat([xp.zeros_like(eta[:, :1]), eta], axis=1)
        return xp.logsumexp(logits, axis=1) - xp.take_class(logits, y)

    def penalty_term(self, W):
        """scikit-learn's symmetric Σ_k ‖w_k‖² over all K classes (Σ_k w_k = 0), in B's terms:
        Σ_k ‖b_k‖² - ‖Σ_k b_k‖² / K (the exact solver's, solvers/multinomial.py)."""
        xp = namespace(W)
        return xp.sum(W * W) - xp.sum(xp.sum(W, axis=1) ** 2) / len(self.labels)
