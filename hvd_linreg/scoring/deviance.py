"""The scores of a GLM on some rows, for the validation rows and `evaluate`: the mean deviance,
D² (the share of the intercept-only model's deviance explained, scikit-learn's
d2_tweedie_score and the GLM regressors' score) and the RMSE of the mean."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.passes import Blocks, summed
from hvd_linreg.families.maths import predictor
from hvd_linreg.scoring.base import Scores


@dataclass(frozen=True)
class DevianceScores(Scores):
    count: int
    mean_deviance: float
    d2: float  # nan when the targets are constant
    rmse: float

    SHOWN = (
        ("mean_deviance", "mean deviance", "mean deviance"),
        ("d2", "D²", "D²"),
        ("rmse", "RMSE", "RMSE"),
    )
    UNDEFINED = {"d2": "the targets are constant"}


def deviance_scores(job, family, theta: np.ndarray, blocks: Blocks) -> DevianceScores:
    """The scores of theta on every rank's blocks of rows, each row counting by its weight
    (scikit-learn's sample_weight): two allreduces, the second for the deviance of the
    weighted mean of every rank's targets."""

    def sums(rows):  # rows, Σw, Σwy, Σw d(y, μ), Σw (y - μ)²
        y, w = rows.y.astype(np.float64), rows.weights()
        mu = family.link.inverse(predictor(theta, rows))
        return len(y), w.sum(), w @ y, w @ family.unit_deviance(y, mu), w @ (y - mu) ** 2

    count, weight, y_sum, deviance, squares = summed(job, blocks(), sums, 5, "scores")
    if not weight:
        return DevianceScores(int(count), math.nan, math.nan, math.nan)
    mean = np.array([y_sum / weight])

    def null_sums(rows):  # a second pass: the null model is every rank's weighted mean
        y = rows.y.astype(np.float64)
        return [rows.weights() @ family.unit_deviance(y, np.broadcast_to(mean, y.shape))]

    null = float(summed(job, blocks(), null_sums, 1, "null_scores")[0])
    d2 = 1.0 - deviance / null if null > 0 else math.nan
    return DevianceScores(int(count), deviance / weight, d2, math.sqrt(squares / weight))
