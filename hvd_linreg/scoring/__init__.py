"""How a fit is judged on rows: the mean loss over the whole dataset (what SGD and the exact
solvers report), and the scores of the held-out rows, the training rows and `evaluate`. Each
takes a family as it is (its loss terms, its link and unit deviance) and the family declares
which scores suit it (Family.SCORES): "deviance" (the mean deviance, D², RMSE: deviance.py),
"regression" (MSE, RMSE, MAE, R²: regression.py), "classification" (log-loss, accuracy, ROC AUC:
classification.py) or "classes" (a model of K classes: statistics/multinomial.py)."""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.data.passes import Blocks, summed
from hvd_linreg.scoring import classification, deviance, regression

# Score kinds whose pass gathers every row to every rank (the exact ROC AUC), so that the
# training rows' scores are skipped on large data (pipeline.training_scores)
GATHER_ROWS = {"classification"}


def loss(job, shard, family, theta: np.ndarray) -> float:
    """The family's mean loss at theta over every rank's rows, each row's times its weight."""
    if family.SCORES == "classes":
        return _class_log_loss(job, shard, theta)
    return deviance.mean_loss(job, shard, family, theta)


def scores(job, family, theta: np.ndarray, blocks: Blocks):
    """The scores of theta on every rank's rows (blocks(): their blocks, afresh at each call)."""
    if family.SCORES == "regression":
        return regression.scores(job, theta, blocks)
    if family.SCORES == "classification":
        return classification.scores(job, family, theta, blocks)
    if family.SCORES == "classes":
        from hvd_linreg.statistics.multinomial import ClassScores
        from hvd_linreg.statistics.multinomial import scores as class_scores

        return ClassScores(class_scores(job, blocks(), theta, family.labels, "multinomial_scores"))
    return deviance.deviance_scores(job, family, theta, blocks)


def gathers_rows(family) -> bool:
    """Whether the family's scores gather every row to every rank."""
    return family.SCORES in GATHER_ROWS


def _class_log_loss(job, shard, B: np.ndarray) -> float:
    """The mean log-loss of a model of classes' B, each row's times its weight."""
    from hvd_linreg.solvers.multinomial import log_probabilities

    def sums(rows):
        w, y = rows.weights(), rows.y.astype(np.int64)
        logp = log_probabilities(rows.X.astype(np.float64, copy=False), B)
        return -(w @ logp[np.arange(len(y)), y]), w.sum()

    total, weight = summed(job, shard.blocks(), sums, 2, "multinomial_loss")
    return float(total / weight) if weight else math.nan
