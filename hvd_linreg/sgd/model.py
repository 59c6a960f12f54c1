"""SGD's model, the same for every family: the linear predictor η = X w + b in one variable,
the family's mean g⁻¹(η) and loss (the solvers' definitions, written in families/maths'
namespace: TensorFlow's functions here); and the SavedModel that serves it. Without an
intercept (--no_intercept) η = X w: b, held at 0, takes no part, so its gradient is 0 and no
optimizer moves it. A model of classes has a column of [w..., b] per class but the first: η is
then a column per class, and the family's loss takes them all."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from hvd_linreg.sgd import tf_maths  # noqa: F401 (registers TensorFlow's functions with the families)


class Model(tf.Module):
    """w and b live in ONE variable, so each step allreduces one gradient tensor, not two:
    (F + 1) x 1, or (F + 1) x (K - 1) for K classes (params given as such a matrix)."""

    def __init__(
        self,
        params: np.ndarray,
        dtype: str = "float32",
        l2: float = 0.0,
        family=None,
        intercept: bool = True,
    ):
        super().__init__(name=family.NAME if family is not None else "linear")
        self.family = family
        self.num_features = len(params) - 1
        self.l2, self.intercept = l2, intercept
        self.columns = 1 if np.ndim(params) == 1 else np.shape(params)[1]
        # The data's precision: float64 data trained in float32 would lose what it holds.
        shape = (len(params), self.columns)
        self.params = tf.Variable(np.asarray(params, dtype).reshape(shape), name="params")

    def linear_predictor(self, X: tf.Tensor) -> tf.Tensor:
        """η: a value per row, or per row and class for a model of classes."""
        eta = tf.matmul(X, self.params[:-1])
        # Without an intercept b is not read: its gradient is exactly 0 for every optimizer.
        eta = eta + self.params[-1] if self.intercept else eta
        return tf.squeeze(eta, axis=1) if self.columns == 1 else eta

    def predict(self, X: tf.Tensor) -> tf.Tensor:
        """The mean, g⁻¹(X w + b) (g⁻¹(X w) without an intercept)."""
        return self.family.link.inverse(self.linear_predictor(X))

    def loss(self, X: tf.Tensor, y: tf.Tensor, weight=None, offset=None) -> tf.Tensor:
        """The family's mean loss + l2·‖w‖² on a batch: the mean over its rows of each row's
        weight x its loss at η = x·w + b + offset (weight and offset None: 1 and 0)."""
        eta = self.linear_predictor(X)
        if offset is not None:  # each class's log-odds alike, in a model of classes
            eta += offset if self.columns == 1 else offset[:, None]
        terms = self.family.loss_terms(y, eta)
        loss = tf.reduce_mean(terms if weight is None else weight * terms)
        if self.l2:  # the bias is not penalised
            loss += self.l2 * self.family.penalty_term(self.params[:-1])
        return loss

    def numpy_params(self) -> np.ndarray:
        """The coefficients (coefficients.py) in float64: (F + 1) x 1, or (F + 1) x (K - 1) for
        a model of classes."""
        return self.stored().astype(np.float64)

    def stored(self) -> np.ndarray:
        """The variable's values in its own dtype, (F + 1) x K′."""
        return self.params.numpy()


def save_serving(directory: Path, model: Model, output: str) -> None:
    """model as a SavedModel whose serving signature maps features to {output: predict}."""
    dtype = model.params.dtype

    @tf.function(input_signature=[tf.TensorSpec([None, model.num_features], dtype, "features")])
    def serve(features):
        return {output: model.predict(features)}

    model.serve = serve  # tracked by the module, so the SavedModel keeps it
    tf.saved_model.save(model, str(directory), signatures={"serving_default": serve})


def save_class_serving(directory: Path, B: np.ndarray, dtype: str) -> None:
    """A model of K classes ((F + 1) x (K - 1) coefficients, the first class the reference)
    as a SavedModel whose serving signature maps features to {"probabilities": rows x K}."""
    module = tf.Module(name="multinomial")
    module.w = tf.Variable(np.asarray(B[:-1], dtype), name="w")
    module.b = tf.Variable(np.asarray(B[-1], dtype), name="b")

    @tf.function(input_signature=[tf.TensorSpec([None, B.shape[0] - 1], dtype, "features")])
    def serve(features):
        eta = tf.matmul(features, module.w) + module.b
        logits = tf.concat([tf.zeros_like(eta[:, :1]), eta], axis=1)
        return {"probabilities": tf.nn.softmax(logits)}

    module.serve = serve
    tf.saved_model.save(module, str(directory), signatures={"serving_default": serve})
