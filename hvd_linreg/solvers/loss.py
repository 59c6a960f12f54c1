"""The mean loss of coefficients over the whole dataset, each row's times its weight: the
family's loss_terms in float64, one pass and one allreduce (what SGD's summary, the optimality
gap and the elastic net's chosen fit report)."""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.data.passes import summed
from hvd_linreg.families.maths import predictor


def mean_loss(job, shard, family, theta: np.ndarray) -> float:
    """The mean of the family's loss_terms at [w..., b] over every rank's rows of weight > 0,
    each times its weight."""

    def sums(rows):
        terms = family.loss_terms(rows.y.astype(np.float64), predictor(theta, rows))
        return rows.weights() @ terms, len(rows.y)

    total, count = summed(job, shard.blocks(), sums, 2, f"{family.NAME}_loss")
    return float(total / count) if count else math.nan
