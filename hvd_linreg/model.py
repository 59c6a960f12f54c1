"""The model: y = X·w + b, fitted by mean squared error, as in the seed program (plus a ridge
penalty on w with --l2)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def initial_params(seed: int, rank: int, num_features: int) -> np.ndarray:
    """N(0, 1) start values like the seed's initializer; [w_0 .. w_{F-1}, b].

    Each rank draws its own on purpose: only the broadcast from rank 0 makes them agree,
    so a missing broadcast shows up in the exactness tests instead of going unnoticed.
    """
    return np.random.default_rng([seed, rank]).standard_normal(num_features + 1)


class LinearModel(tf.Module):
    """w and b live in ONE variable, so each step allreduces one gradient tensor, not two."""

    def __init__(self, params: np.ndarray, dtype: str = "float32", l2: float = 0.0):
        super().__init__(name="linear")
        self.num_features = len(params) - 1
        self.l2 = l2
        # The data's precision: float64 data trained in float32 would lose what it holds.
        self.params = tf.Variable(np.asarray(params, dtype).reshape(-1, 1), name="params")

    def predict(self, X: tf.Tensor) -> tf.Tensor:
        w, b = self.params[:-1], self.params[-1]
        return tf.squeeze(tf.matmul(X, w), axis=1) + b

    def loss(self, X: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """mean((X w + b - y)²) + l2·‖w‖²: exact.objective, on a batch."""
        loss = tf.reduce_mean(tf.square(self.predict(X) - y))
        if self.l2:  # the bias is not penalised
            loss += self.l2 * tf.reduce_sum(tf.square(self.params[:-1]))
        return loss

    def numpy_params(self) -> np.ndarray:
        return self.params.numpy().reshape(-1).astype(np.float64)
