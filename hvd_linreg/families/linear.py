"""Linear regression, the first model family: y = X·w + b, fitted by mean squared error as in
the seed program, plus a ridge penalty l2·‖w‖² with --l2 (the bias is not penalised).

The Gaussian family (gaussian.py) with the identity link. Its exact solver is least squares by
the distributed QR (solvers/least_squares.py), and its statistics ordinary least squares'
(statistics/least_squares.py); the family itself is its loss, its prediction and its scores.
With `--link log` the run is the Gaussian GLM's, which IRLS fits (families.get).
"""

from __future__ import annotations

from hvd_linreg.families.gaussian import Gaussian
from hvd_linreg.families.maths import linear_predictor


class Linear(Gaussian):
    NAME = "linear"
    SOLVER = "least_squares"
    SCORES = "regression"
    MAX_EXACT_FEATURES = 4096  # solvers/least_squares.py: MAX_FEATURES

    def as_fitted(self) -> Gaussian:
        # Least squares fits the identity link only: the Gaussian GLM, by IRLS, fits the others
        return self if self.link.name == "identity" else Gaussian(self.link.name)

    def predict(self, theta, X, offset=None):
        """X w + b (+ offset) in float64, term by term (linear_predictor)."""
        eta = linear_predictor(theta, X)
        return eta if offset is None else eta + offset
