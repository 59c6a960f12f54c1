"""A second model family, for the tests only: least absolute deviations, y = X·w + b fitted by
the mean absolute error (plus --l2's ridge term), by SGD; it has no exact solver.

It shows the seam: a family is this one module plus one registration line
(`FAMILIES["lad"] = "family_lad"`), and nothing in hvd_linreg changes. What is the same as
the linear family (the prediction, the scores, the serving signature, the plotted curve) it
takes from there. Run as a script, it registers itself and is the hvd-linreg command, so that a
launcher can start it on every rank.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import tensorflow as tf

from hvd_linreg.families import FAMILIES, linear

NAME = "lad"
LOSS = "mean absolute error"
MAX_EXACT_FEATURES = 0
optimum = None  # no exact solver
statistics = None
SOLVER = SOLVER_COST = None
check_target = linear.check_target
synthetic_target = linear.synthetic_target
initial_params = linear.initial_params
predict = linear.predict
scores = linear.scores
save_model = linear.save_model
curve = linear.curve


class Model(linear.Model):
    def loss(self, X: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """mean(|X w + b - y|) + l2·‖w‖², on a batch."""
        loss = tf.reduce_mean(tf.abs(self.predict(X) - y))
        if self.l2:
            loss += self.l2 * tf.reduce_sum(tf.square(self.params[:-1]))
        return loss


def loss(job, shard, theta: np.ndarray) -> float:
    """The mean absolute error over the whole dataset."""
    sae, count = 0.0, 0
    for X, y in shard.blocks():
        sae += float(np.abs(X.astype(np.float64) @ theta[:-1] + theta[-1] - y).sum())
        count += len(y)
    sums = job.allreduce_sum([sae, count], "lad_loss")
    return float(sums[0] / sums[1]) if sums[1] else math.nan


def objective(loss: float, params: np.ndarray, l2: float) -> float:
    return loss + l2 * float(params[:-1] @ params[:-1]) if l2 else loss


def register() -> None:
    FAMILIES[NAME] = "family_lad"


if __name__ == "__main__":
    register()
    from hvd_linreg.cli import main

    sys.exit(main())
