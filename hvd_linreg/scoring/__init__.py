"""How a fit is judged on rows: the mean loss over the whole dataset (what SGD and the exact solvers
report; its passes are the solvers', solvers/loss.py and solvers/multinomial.py), and the scores of
the held-out rows, the training rows and `evaluate`. Each takes a family as it is (its loss terms,
its link and unit deviance) and the family declares which scores suit it (Family.SCORES): "deviance"
(the mean deviance, D², RMSE: deviance.py), "regression" (MSE, RMSE, MAE, R²: regression.py),
"classification" (log-loss, accuracy, ROC AUC: classification.py) or "classes" (a model of K
classes: statistics/multinomial.py)."""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.passes import Blocks
from hvd_linreg.scoring import classification, deviance, regression
from hvd_linreg.solvers.loss import mean_loss
from hvd_linreg.solvers.multinomial import mean_log_loss

# Score kinds whose pass gathers every row to every rank (the exact ROC AUC), so that the
# training rows' scores are skipped on large data (pipeline.training_scores)
GATHER_ROWS = {"classification"}


def loss(job, shard, family, theta: np.ndarray) -> float:
    """The family's mean loss at theta over every rank's rows, each row's times its weight."""
    if family.SCORES == "classes":
        return mean_log_loss(job, shard, theta)
    return mean_loss(job, shard, family, theta)


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
