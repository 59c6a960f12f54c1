"""The scores of a GLM on some rows, for the validation rows and `evaluate`: the mean deviance,
D² (the share of the intercept-only model's deviance explained, scikit-learn's
d2_tweedie_score and the GLM regressors' score) and the RMSE of the mean."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from hvd_linreg.families.family import linear_predictor


class Scores:
    """What every family's scores have: count, values(), as_json(), line() and table()."""

    count: int

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        raise NotImplementedError

    def as_json(self) -> dict[str, float | None]:
        """JSON has no NaN: an undefined score is null."""
        return {k: v if np.isfinite(v) else None for k, v in self.values().items()}


@dataclass(frozen=True)
class DevianceScores(Scores):
    count: int
    mean_deviance: float
    d2: float  # nan when the targets are constant
    rmse: float

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        return {"mean_deviance": self.mean_deviance, "d2": self.d2, "rmse": self.rmse}

    def line(self) -> str:
        """The scores as the log lines and the summary show them."""
        return f"mean deviance {self.mean_deviance:.6g}, D² {self.d2:.6g}, RMSE {self.rmse:.6g}"

    def table(self) -> list[str]:
        """The scores one per line, as `evaluate` prints them."""
        d2 = "undefined (the targets are constant)" if math.isnan(self.d2) else f"{self.d2:.6g}"
        return [
            f"  mean deviance: {self.mean_deviance:.6g}",
            f"  D²:            {d2}",
            f"  RMSE:          {self.rmse:.6g}",
        ]


def deviance_scores(job, family, theta: np.ndarray, blocks: Iterable) -> DevianceScores:
    """The scores of theta on every rank's blocks of (X, y): two allreduces, the second for
    the deviance of the mean of every rank's targets."""
    blocks = [(rows.X.astype(np.float64), rows.y.astype(np.float64)) for rows in blocks]
    sums = np.zeros(4)  # rows, Σy, Σd(y, μ), Σ(y - μ)²
    for X, y in blocks:
        mu = family.link.inverse(linear_predictor(theta, X))
        sums += len(y), y.sum(), family.unit_deviance(y, mu).sum(), ((y - mu) ** 2).sum()
    count, y_sum, deviance, squares = job.allreduce_sum(sums, "scores")  # Horovod: every rank's
    if not count:
        return DevianceScores(0, math.nan, math.nan, math.nan)
    mean = np.array([y_sum / count])
    null = sum(
        float(family.unit_deviance(y, np.broadcast_to(mean, y.shape)).sum()) for _, y in blocks
    )
    null = float(job.allreduce_sum([null], "null_scores")[0])
    d2 = 1.0 - deviance / null if null > 0 else math.nan
    return DevianceScores(int(count), deviance / count, d2, math.sqrt(squares / count))
