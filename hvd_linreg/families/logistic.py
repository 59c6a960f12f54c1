"""Logistic regression, the second model family: P(y = 1 | x) = σ(x·w + b) for a 0/1 target,
the binomial family with its canonical logit link, fitted by the mean log-loss (the negative
log-likelihood per row), plus a ridge penalty l2·‖w‖² with --l2 (the bias is not penalised).

SGD trains it like the linear family; the exact solver is IRLS (solvers/irls.py), which for
the logit link is Newton's method, and its statistics maximum likelihood's. The family adds the
checks for classes that a hyperplane separates, where the likelihood has no finite maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hvd_linreg.data.passes import Blocks, counted, summed
from hvd_linreg.data.synthetic import TRUE_BIAS, true_weights, uniforms
from hvd_linreg.errors import UsageError
from hvd_linreg.families.domain import Interval
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import lgamma, predictor, xlogy
from hvd_linreg.families.scores import Scores
from hvd_linreg.ranks import Job

# |x·w + b| beyond this gives p(1 - p) below 1e-16: float64 rounds such a probability to 0 or 1.
SATURATED = 37.0
# A direction whose information is below this fraction of the data's spread along it has
# lost it to rows whose probabilities saturated: the mark of quasi-separation.
INFORMATION = 1e-10
_EPS = float(np.finfo(np.float64).eps)


def log_loss_terms(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-log p(y | z) per row, p = sigmoid(z), without overflow:
    max(z, 0) - z·y + log(1 + e^-|z|)."""
    return np.maximum(z, 0.0) - z * y + np.log1p(np.exp(-np.abs(z)))


class Logistic(Family):
    NAME = "logistic"
    LINKS = ("logit", "probit", "cloglog")
    # A 0/1 target, or two values read as 0 and 1; with --weights, a proportion of trials
    TARGET = Interval(0.0, 1.0, low_inclusive=True, high_inclusive=True)
    BINARY = True
    COUNTS = ("misclassified", "saturated")
    SCORES_GATHER_ROWS = True

    @property
    def logit(self) -> bool:
        return self.link.name == "logit"

    def variance(self, mu):
        return mu * (1.0 - mu)

    def unit_deviance(self, y, mu):
        return 2.0 * (xlogy(y, y / mu) + xlogy(1.0 - y, (1.0 - y) / (1.0 - mu)))

    def loss_terms(self, y, eta):
        """The log-loss; from the logits never the log of a probability rounded to 0, and
        through another link at the probability clipped as the weights' is."""
        if self.logit:
            return log_loss_terms(eta, y)
        mu = self.clean_mean(self.link.inverse(eta))
        return -(xlogy(y, mu) + xlogy(1.0 - y, 1.0 - mu))

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
        return np.clip(mu, _EPS, 1.0 - _EPS)

    def loss_terms_tf(self, y, eta):
        """TensorFlow's cross-entropy from the logits, or of the clipped probability."""
        import tensorflow as tf

        if self.logit:
            return tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=eta)
        mu = tf.clip_by_value(self.link.inverse_tf(eta), _EPS, 1.0 - _EPS)
        return -(y * tf.math.log(mu) + (1.0 - y) * tf.math.log(1.0 - mu))

    def synthetic_target(self, seed, rows, X, y):
        """y ~ Bernoulli(g⁻¹(x·w_true + b_true)), the seed's line read through the link, drawn
        from one uniform per row, a pure function of (seed, row)."""
        theta = np.append(true_weights(X.shape[1]), TRUE_BIAS)
        drawn = uniforms(seed, rows) < self.predict(theta, X.astype(np.float64))
        return drawn.astype(X.dtype)

    def classes(self, probabilities: np.ndarray, threshold: float) -> np.ndarray:
        """`predict --threshold`: 1 where the probability is above the threshold, else 0."""
        return (probabilities > threshold).astype(np.float64)

    def scores(self, job, theta, blocks):
        return scores(job, self, theta, blocks)

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

    def check_optimum(self, job, shard, counts, factor, penalized):
        """Quasi-separation: no hyperplane splits the classes, but one leaves every row on its
        class's side or on the plane. Along its normal the log-likelihood still rises without
        a maximum; IRLS's steps then stop changing the loss, while the rows off the plane
        saturate and no longer inform that direction. So compare the information AᵀWA with the
        data's own spread AᵀA/4 (the information if every p were 1/2) in every direction: where
        the ratio is below INFORMATION, the estimate there is the point where rounding stopped
        it, not an optimum. Only for fits with saturated rows: it costs a pass and an allreduce."""
        if penalized or not counts["saturated"]:
            return
        k = shard.num_features + 1

        def spread(rows):
            A = np.c_[rows.X.astype(np.float64), np.ones(len(rows.X))]
            return ((A.T * rows.weights()) @ A).ravel()

        # Every rank's sums, so that every rank decides the same.
        gram = summed(job, shard.blocks(), spread, k * k, "newton_gram").reshape(k, k) / 4.0
        try:
            factor_l = np.linalg.cholesky(gram)
        except np.linalg.LinAlgError:
            return  # collinear features: the step's solve refuses those
        inverse = np.linalg.inv(factor_l)
        if np.linalg.eigvalsh(inverse @ factor.information() @ inverse.T).min() < INFORMATION:
            raise UsageError(_saturated(counts))

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


@dataclass(frozen=True)
class ClassificationScores(Scores):
    """Classification scores of a model on some rows: log-loss, accuracy and ROC AUC."""

    count: int
    log_loss: float
    accuracy: float  # at the threshold 0.5
    auc: float  # nan when the rows hold one class only

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        return {"log_loss": self.log_loss, "accuracy": self.accuracy, "auc": self.auc}

    def line(self) -> str:
        """The scores as the log lines and the summary show them."""
        return f"log-loss {self.log_loss:.6g}, accuracy {self.accuracy:.6g}, AUC {self.auc:.6g}"

    def table(self) -> list[str]:
        """The scores one per line, as `evaluate` prints them."""
        auc = "undefined (the rows hold one class only)" if math.isnan(self.auc) else self.auc
        return [
            f"  log-loss: {self.log_loss:.6g}",
            f"  accuracy: {self.accuracy:.6g} (threshold 0.5)",
            f"  ROC AUC:  {auc if isinstance(auc, str) else format(auc, '.6g')}",
        ]


def scores(job: Job, family: Logistic, theta: np.ndarray, blocks: Blocks) -> ClassificationScores:
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


def roc_auc(scores: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    """The area under the ROC curve: the probability that a random positive scores above a
    random negative, ties counting one half; each row holds `positive` weight of positives and
    `negative` of negatives (a 0/1 label: y and 1 - y)."""
    n_pos, n_neg = float(positive.sum()), float(negative.sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    values, inverse = np.unique(scores, return_inverse=True)
    pos = np.bincount(inverse, positive, len(values))  # by distinct score, ascending
    neg = np.bincount(inverse, negative, len(values))
    below = np.cumsum(neg) - neg  # negatives scoring strictly lower
    return float(pos @ (below + neg / 2.0)) / (n_pos * n_neg)


class Binomial(Logistic):
    """The binomial family by its own name (R's and statsmodels'): --model logistic's."""

    NAME = "binomial"
