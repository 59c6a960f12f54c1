"""Classification scores of a binary model on some rows: log-loss, accuracy and the exact ROC
AUC, each row counting by its weight."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.passes import Blocks, counted
from hvd_linreg.errors import UsageError
from hvd_linreg.families.maths import predictor
from hvd_linreg.scoring.base import Scores
from hvd_linreg.solvers.cv_measures import roc_auc


@dataclass(frozen=True)
class ClassificationScores(Scores):
    """Classification scores of a model on some rows: log-loss, accuracy and ROC AUC."""

    count: int
    log_loss: float
    accuracy: float  # at the threshold 0.5
    auc: float  # nan when the rows hold one class only

    SHOWN = (
        ("log_loss", "log-loss", "log-loss"),
        ("accuracy", "accuracy", "accuracy"),
        ("auc", "AUC", "ROC AUC"),
    )
    UNDEFINED = {"auc": "the rows hold one class only"}
    NOTES = {"accuracy": " (threshold 0.5)"}


def scores(job, family, theta: np.ndarray, blocks: Blocks) -> ClassificationScores:
    """The scores of theta (w..., b; float64) on every rank's blocks of rows, each row counting
    by its weight: a proportion y of n trials (the weight) is n·y rows of 1 and n·(1 - y) of 0,
    as R's binomial reads it. The AUC is exact: every rank's (linear predictor, label,
    weight) triples are gathered (24 bytes a row), since no sum of per-rank figures gives the
    ranking of all rows together."""
    z, y, w = [np.zeros(0)], [np.zeros(0)], [np.zeros(0)]
    for rows in counted(blocks()):
        z.append(predictor(theta, rows))
        y.append(rows.y.astype(np.float64))
        w.append(rows.weights())
    triples = np.column_stack([np.concatenate(z), np.concatenate(y), np.concatenate(w)])
    # Horovod: every rank's triples, so that every rank computes the same scores.
    triples = job.allgather_rows(triples, "score_pairs")
    z, y, w = triples[:, 0], triples[:, 1], triples[:, 2]
    bad = ~((y >= 0.0) & (y <= 1.0))
    if bad.any():  # the same triples on every rank: every rank raises
        raise UsageError(
            f"the target holds {y[bad][0]:g}: a logistic model is scored on a target of 0 or 1 "
            "(or a proportion in [0, 1]); recode it"
        )
    if not len(y) or not w.sum():
        return ClassificationScores(len(y), math.nan, math.nan, math.nan)
    threshold = float(family.link(np.array([0.5]))[0])  # η where P(y = 1) = 0.5; 0 for logit
    above = z > threshold
    accuracy = float(w @ np.where(above, y, 1.0 - y) / w.sum())
    log_loss = float(w @ family.loss_terms(y, z) / w.sum())
    return ClassificationScores(len(y), log_loss, accuracy, roc_auc(z, w * y, w * (1.0 - y)))
