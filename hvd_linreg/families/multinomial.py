"""Multinomial logistic regression (--model multinomial): a target of K classes, the first the
reference, each other class's log-odds against it linear in x. Its exact fit is Newton's method
on the whole log-likelihood (solvers/multinomial.py), and its recipe is multinomial.py: the
coefficients are a matrix B, (F + 1) x (K - 1), a column per class but the first.

A family of classes is made for the classes a run's rows hold (with_classes): SGD's start,
loss and scores need their count."""

from __future__ import annotations

import copy
import math

import numpy as np

from hvd_linreg.data.passes import summed
from hvd_linreg.families.family import Family


class Multinomial(Family):
    NAME = "multinomial"
    LINKS = ("logit",)
    CANONICAL_LINK = "logit"
    SOLVER = "multinomial"

    def with_classes(self, classes: list) -> Multinomial:
        """This family for a target of these classes."""
        family = copy.copy(self)
        family.labels = list(classes)
        return family

    def initial_params(self, seed: int, rank: int, num_features: int) -> np.ndarray:
        """N(0, 1) start values, (F + 1) x (K - 1), each rank its own (as Family's)."""
        shape = (num_features + 1, len(self.labels) - 1)
        return np.random.default_rng([seed, rank]).standard_normal(shape)

    def loss_terms_tf(self, y, eta):
        """-log P(y | x) per row: the softmax of [0, η_1 .. η_{K-1}] (y: the class's number)."""
        import tensorflow as tf

        logits = tf.concat([tf.zeros_like(eta[:, :1]), eta], axis=1)
        chosen = tf.gather(logits, tf.cast(y, tf.int32), axis=1, batch_dims=1)
        return tf.reduce_logsumexp(logits, axis=1) - chosen

    def penalty_tf(self, W):
        """scikit-learn's symmetric Σ_k ‖w_k‖² over all K classes (Σ_k w_k = 0), in B's terms:
        Σ_k ‖b_k‖² - ‖Σ_k b_k‖² / K (the exact solver's, solvers/multinomial.py)."""
        import tensorflow as tf

        K = len(self.labels)
        return tf.reduce_sum(tf.square(W)) - tf.reduce_sum(tf.square(tf.reduce_sum(W, 1))) / K

    def objective(self, loss: float, params: np.ndarray, l2: float) -> float:
        """The mean log-loss + l2 x penalty_tf's term: what both solvers minimise."""
        if not l2:
            return loss
        W = params[:-1]
        return loss + l2 * float(np.sum(W * W) - np.sum(W.sum(axis=1) ** 2) / len(self.labels))

    def loss(self, job, shard, theta: np.ndarray) -> float:
        """The mean log-loss of B over the whole dataset, each row's times its weight."""
        from hvd_linreg.solvers.multinomial import log_probabilities

        def sums(rows):
            w, y = rows.weights(), rows.y.astype(np.int64)
            logp = log_probabilities(rows.X.astype(np.float64, copy=False), theta)
            return -(w @ logp[np.arange(len(y)), y]), w.sum()

        total, weight = summed(job, shard.blocks(), sums, 2, "multinomial_loss")
        return float(total / weight) if weight else math.nan

    def scores(self, job, theta: np.ndarray, blocks):
        """Log-loss, accuracy and the confusion matrix of B on every rank's blocks."""
        from hvd_linreg.statistics.multinomial import ClassScores, scores

        return ClassScores(scores(job, blocks(), theta, self.labels, "multinomial_scores"))
