"""The multinomial fit's statistics, as statsmodels' MNLogit reports them: per class but the
first, each coefficient's estimate, standard error (from the inverse information matrix), z and
p; the log-likelihood, the intercept-only model's, McFadden's pseudo-R², AIC and BIC. And the
scores of a model of classes on any rows: log-loss, accuracy and the confusion matrix."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.data.frames import plain
from hvd_linreg.data.passes import summed
from hvd_linreg.families.coefficients import unvec
from hvd_linreg.solvers.multinomial import MultinomialFit, log_probabilities
from hvd_linreg.statistics.table import SHOWN_COEFFICIENTS, coefficient_lines, robust_errors


@dataclass(frozen=True)
class MultinomialStatistics:
    classes: list
    names: tuple[str, ...]  # the coefficients' names in each class: the features', then b
    estimates: np.ndarray  # (F + 1) x (K - 1)
    std_errors: np.ndarray
    log_likelihood: float
    null_log_likelihood: float
    aic: float
    bic: float
    iterations: int
    gradient_norm: float
    converged: bool = True
    undefined: dict = field(default_factory=dict)
    cov_type: str = "nonrobust"  # the standard errors' (--cov_type)
    clusters: int | None = None  # --cov_type cluster: how many

    @property
    def z(self) -> np.ndarray:
        return self.estimates / self.std_errors

    @property
    def p(self) -> np.ndarray:
        from scipy.special import ndtr

        return 2.0 * ndtr(-np.abs(self.z))

    @property
    def pseudo_r2(self) -> float:
        """McFadden's: 1 - ℓ / ℓ₀."""
        return 1.0 - self.log_likelihood / self.null_log_likelihood

    def coefficients(self) -> list[dict]:
        """A row per class but the first and coefficient, in that order, as the JSON has it."""
        z, p = self.z, self.p
        return [
            {
                "class": plain(self.classes[j + 1]),
                "name": name,
                "estimate": float(self.estimates[i, j]),
                "std_error": float(self.std_errors[i, j]),
                "z": float(z[i, j]),
                "p": float(p[i, j]),
            }
            for j in range(self.estimates.shape[1])
            for i, name in enumerate(self.names)
        ]

    def as_json(self) -> dict:
        return {
            "log_likelihood": self.log_likelihood,
            "null_log_likelihood": self.null_log_likelihood,
            "pseudo_r2": self.pseudo_r2,
            "aic": self.aic,
            "bic": self.bic,
            "iterations": self.iterations,
            "gradient_norm": self.gradient_norm,
            "converged": self.converged,
            "cov_type": self.cov_type,
            "clusters": self.clusters,
            "coefficients": self.coefficients(),
        }

    def lines(self, limit: int | None = SHOWN_COEFFICIENTS) -> list[str]:
        """The summary's statistics: the likelihood's figures, then a table per class."""
        robust = robust_errors(self.cov_type, self.clusters)
        lines = [
            f"Statistics of the exact optimum: log-likelihood {self.log_likelihood:.6g}, AIC "
            f"{self.aic:.6g}, BIC {self.bic:.6g}, null log-likelihood "
            f"{self.null_log_likelihood:.6g}, McFadden's pseudo-R² {self.pseudo_r2:.6g}; Newton: "
            f"{self.iterations} iterations, gradient norm {self.gradient_norm:.3g}"
            + ("" if self.converged else " (did not converge: --max_iter)")
            + ("" if self.cov_type == "nonrobust" else f"; {robust}")
        ]
        z, p = self.z, self.p
        for j in range(self.estimates.shape[1]):
            lines.append(f"  class {self.classes[j + 1]} (against {self.classes[0]}):")
            rows = [
                (name, self.estimates[i, j], self.std_errors[i, j], z[i, j], p[i, j])
                for i, name in enumerate(self.names)
            ]
            lines += coefficient_lines(rows, "z", self.undefined, limit)
        return lines


def describe(
    fit: MultinomialFit, names: tuple[str, ...], classes: list, robust=None, cov_type="nonrobust"
) -> MultinomialStatistics:
    """The statistics of the fit, its coefficients named by names (the features', then b);
    robust: (the sandwich's covariance, the clusters or None) for --cov_type HC0, HC1 or
    cluster, else the inverse information's."""
    F1, K1 = fit.params.shape
    if robust is not None:
        std_errors = unvec(np.sqrt(np.diag(robust[0])), K1)
    elif isinstance(fit.information, np.ndarray):
        std_errors = unvec(np.sqrt(np.diag(np.linalg.inv(fit.information))), K1)
    else:  # a wide design's, by blocks: None past the coefficients whose errors are formed
        diagonal = fit.information.inverse_diagonal()
        std_errors = np.full((F1, K1), np.nan) if diagonal is None else np.sqrt(diagonal)
    k = F1 * K1
    aic = -2.0 * fit.log_likelihood + 2.0 * k
    bic = -2.0 * fit.log_likelihood + k * np.log(fit.weight)
    return MultinomialStatistics(
        classes,
        names,
        fit.params,
        std_errors,
        fit.log_likelihood,
        fit.null_log_likelihood,
        aic,
        bic,
        fit.iterations,
        fit.gradient_norm,
        fit.converged,
        cov_type=cov_type,
        clusters=None if robust is None else robust[1],
    )


def scores(job, blocks, B: np.ndarray, classes: list, name: str) -> dict:
    """Log-loss (the mean of -log P(y | x), weighted), accuracy and the confusion matrix (rows:
    the true class, columns: the predicted one; sums of weights) of the rows of every rank."""
    K = len(classes)

    def block_sums(rows):
        w, y = rows.weights(), rows.y.astype(np.int64)
        logp = log_probabilities(rows.X, B, rows.offset)
        confusion = np.bincount(y * K + logp.argmax(axis=1), weights=w, minlength=K * K)
        return np.r_[w.sum(), -(w @ logp[np.arange(len(y)), y]), confusion]

    sums = summed(job, blocks, block_sums, 2 + K * K, name)
    confusion = sums[2:].reshape(K, K)
    weight = sums[0]
    return {
        "log_loss": float(sums[1] / weight) if weight else None,
        "accuracy": float(np.trace(confusion) / weight) if weight else None,
        "confusion": confusion.tolist(),
        "rows": float(weight),
    }


@dataclass(frozen=True)
class ClassScores:
    """scores()' figures as SGD's log lines and TensorBoard take a family's Scores."""

    figures: dict

    @property
    def count(self) -> int:
        return int(self.figures["rows"])

    def values(self) -> dict[str, float]:
        return {"log_loss": self.figures["log_loss"], "accuracy": self.figures["accuracy"]}

    def as_json(self) -> dict:
        return self.figures

    def line(self) -> str:
        f = self.figures
        return f"log-loss {f['log_loss']:.6g}, accuracy {f['accuracy']:.6g}"


def class_frequencies(job, blocks, K: int, bins: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The rows of every rank by their one feature, in `bins` equal bins of its range: the
    edges (bins + 1) and each bin's weight of each class (bins x K). blocks() gives the rows;
    two passes, an allgather and an allreduce."""
    low, high = np.inf, -np.inf
    for rows in blocks():
        x = rows.counted().X[:, 0]
        if len(x):
            low, high = min(low, float(x.min())), max(high, float(x.max()))
    every = job.allgather((low, high), name="multinomial_range")
    edges = np.linspace(min(e[0] for e in every), max(e[1] for e in every), bins + 1)

    def counts(rows):
        at = np.clip(np.searchsorted(edges, rows.X[:, 0], side="right") - 1, 0, bins - 1)
        cells = at * K + rows.y.astype(np.int64)
        return np.bincount(cells, weights=rows.weights(), minlength=bins * K)

    return edges, summed(job, blocks(), counts, bins * K, "multinomial_bins").reshape(bins, K)


def score_lines(what: str, scores: dict, classes: list) -> list[str]:
    """The summary's lines of scores: log-loss and accuracy, then the confusion matrix."""
    if scores["log_loss"] is None:
        return []
    width = max(8, *(len(str(c)) + 2 for c in classes))
    lines = [
        f"  {what}: log-loss {scores['log_loss']:.6g}, accuracy {scores['accuracy']:.6g}; "
        "confusion (rows: true class, columns: predicted)",
        "    " + " " * width + "".join(f"{str(c):>{width}}" for c in classes),
    ]
    for c, row in zip(classes, scores["confusion"]):
        lines.append(f"    {str(c):<{width}}" + "".join(f"{v:>{width}.6g}" for v in row))
    return lines
