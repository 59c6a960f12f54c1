"""Logistic regression, the second model family: P(y = 1 | x) = σ(x·w + b) for a 0/1 target,
the binomial family with its canonical logit link, fitted by the mean log-loss (the negative
log-likelihood per row), plus a ridge penalty l2·‖w‖² with --l2 (the bias is not penalised).

SGD trains it like the linear family; the exact solver is IRLS (solvers/irls.py), which for
the logit link is Newton's method, and its statistics maximum likelihood's. The family adds the
checks for classes that a hyperplane separates, where the likelihood has no finite maximum.
"""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.synthetic import TRUE_BIAS, true_weights, uniforms
from hvd_linreg.errors import UsageError
from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import lgamma, namespace, xlogy

# |x·w + b| beyond this gives p(1 - p) below 1e-16: float64 rounds such a probability to 0 or 1.
SATURATED = 37.0
_EPS = float(np.finfo(np.float64).eps)


def log_loss_terms(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-log p(y | z) per row, p = sigmoid(z), without overflow:
    max(z, 0) - z·y + log(1 + e^-|z|) (TensorFlow's sigmoid_cross_entropy_with_logits)."""
    xp = namespace(z)
    return xp.maximum(z, 0.0) - z * y + xp.log1p(xp.exp(-xp.abs(z)))


class Logistic(Family):
    NAME = "logistic"
    LINKS = ("logit", "probit", "cloglog")
    # A 0/1 target, or two values read as 0 and 1; with --weights, a proportion of trials
    TARGET = Interval(0.0, 1.0, low_inclusive=True, high_inclusive=True)
    BINARY = True
    COUNTS = ("misclassified", "saturated")
    SCORES = "classification"

    @property
    def logit(self) -> bool:
        return self.link.name == "logit"

    def variance(self, mu):
        return mu * (1.0 - mu)

    def variance_derivative(self, mu):
        return 1.0 - 2.0 * mu

    def unit_deviance(self, y, mu):
        return 2.0 * (xlogy(y, y / mu) + xlogy(1.0 - y, (1.0 - y) / (1.0 - mu)))

    def deviance_in_mean(self, y, eta, mu):
        # 2 x the log-loss from the logits: finite where μ rounds to 0 or 1, and one
        # logarithm a row instead of two
        return 2.0 * log_loss_terms(eta, y) if self.logit else self.unit_deviance(y, mu)

    def deviance_in_target(self, y):
        return 2.0 * (xlogy(y, y) + xlogy(1.0 - y, 1.0 - y)) if self.logit else 0.0

    def loss_terms(self, y, eta):
        """The log-loss; from the logits never the log of a probability rounded to 0, and
        through another link at the probability clipped as the weights' is."""
        if self.logit:
            return log_loss_terms(eta, y)
        mu, xp = self.clean_mean(self.link.inverse(eta)), namespace(eta)
        return -(xp.xlogy(y, mu) + xp.xlogy(1.0 - y, 1.0 - mu))

    def deviance_terms(self, y, eta):
        """2 x (the log-loss less its value at μ = y): from the logits, so finite where a
        probability rounds to 0 or 1."""
        return 2.0 * (self.loss_terms(y, eta) + xlogy(y, y) + xlogy(1.0 - y, 1.0 - y))

    def log_likelihood(self, y, eta, scale, weight):
        """R's binomial log-likelihood, the weights the trials n and w·y the successes k:
        Σ log C(n, k) + k log μ + (n - k) log(1 - μ) (for 0/1 rows of weight 1, -log-loss)."""
        k = weight * y
        choose = lgamma(weight + 1.0) - lgamma(k + 1.0) - lgamma(weight - k + 1.0)
        return float(choose.sum() - weight @ self.loss_terms(y, eta))

    def clean_mean(self, mu):
        return namespace(mu).clip(mu, _EPS, 1.0 - _EPS)

    def synthetic_target(self, seed, rows, X, y):
        """y ~ Bernoulli(g⁻¹(x·w_true + b_true)), the seed's line read through the link, drawn
        from one uniform per row, a pure function of (seed, row)."""
        theta = np.append(true_weights(X.shape[1]), TRUE_BIAS)
        drawn = uniforms(seed, rows) < self.predict(theta, X.astype(np.float64))
        return drawn.astype(X.dtype)

    def classes(self, probabilities: np.ndarray, threshold: float) -> np.ndarray:
        """`predict --threshold`: 1 where the probability is above the threshold, else 0."""
        return (probabilities > threshold).astype(np.float64)

    # IRLS's checks: rows on the wrong side of x·w + b = 0 (or on it), and rows whose fitted
    # probability rounds to 0 or 1

    def iteration_counts(self, y, eta):
        wrong = np.count_nonzero(np.where(y > 0.5, eta <= 0.0, eta >= 0.0))
        if self.logit:
            return [wrong, np.count_nonzero(np.abs(eta) > SATURATED)]
        mu = self.link.inverse(eta)
        return [wrong, np.count_nonzero((mu < _EPS) | (mu > 1.0 - _EPS))]

    def check_iteration(self, counts, rows, penalized):
        """Without a penalty, a hyperplane that puts every row on its own class's side makes
        the log-loss go to 0 as the coefficients grow: there is no finite maximum to report."""
        if not penalized and counts["misclassified"] == 0 and rows:
            raise UsageError(
                "the classes are completely separated: a hyperplane x·w + b = 0 puts every "
                "row with y = 1 on one side and every row with y = 0 on the other, so the "
                "likelihood has no finite maximum and the coefficients would grow without "
                "bound. Drop the feature(s) that separate them, or fit with --l2 > 0"
            )

    def quasi_separated(self, counts):
        """Why a settled optimum with saturated rows is none (solvers/separation.py)."""
        return _saturated(counts)

    def not_converged(self, counts, penalized):
        return f": {_saturated(counts)}" if counts["saturated"] and not penalized else ""

    def singular(self, counts, penalized):
        if counts["saturated"] and not penalized:
            return f"the Hessian became singular: {_saturated(counts)}"
        return (
            "the Hessian of the log-loss is singular: features are collinear or constant; "
            "drop the redundant ones, or fit with --l2 > 0"
        )


def _saturated(counts: dict[str, float]) -> str:
    return (
        f"{int(counts['saturated'])} of {int(counts['rows'])} rows have fitted probabilities of "
        "0 or 1 while the coefficients keep growing: the classes are (quasi-)separated, and the "
        "likelihood has no finite maximum. Drop the feature(s) that separate them, or fit with "
        "--l2 > 0"
    )


class Binomial(Logistic):
    """The binomial family by its own name (R's and statsmodels'): --model logistic's."""

    NAME = "binomial"
