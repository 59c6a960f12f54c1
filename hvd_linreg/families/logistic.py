"""Logistic regression, the second model family: P(y = 1 | x) = sigmoid(x·w + b) for a 0/1
target, fitted by the mean log-loss (the negative log-likelihood per row), plus a ridge
penalty l2·‖w‖² with --l2 (the bias is not penalised).

SGD trains it like the linear family; the exact solver is Newton's method with one allreduce
per iteration, and its statistics are maximum likelihood's (logistic_newton.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import tensorflow as tf

from hvd_linreg.config import UsageError
from hvd_linreg.data.synthetic import TRUE_BIAS, true_weights, uniforms
from hvd_linreg.families import linear, logistic_newton
from hvd_linreg.families.logistic_newton import log_loss_terms, sigmoid
from hvd_linreg.ranks import Job

NAME = "logistic"
LOSS = "mean log-loss"
SOLVER = "exact maximum likelihood (Newton's method)"
SOLVER_COST = "a pass and an allreduce per Newton iteration"
MAX_EXACT_FEATURES = logistic_newton.MAX_FEATURES
Optimum = logistic_newton.Optimum
Statistics = logistic_newton.Statistics
# N(0, 1) per rank as the linear family's: only rank 0's broadcast makes them agree, so a
# missing broadcast still shows in the exactness tests.
initial_params = linear.initial_params


class Model(linear.Model):
    """The linear family's model (one variable [w..., b]) read as logits."""

    def logits(self, X: tf.Tensor) -> tf.Tensor:
        return super().predict(X)

    def predict(self, X: tf.Tensor) -> tf.Tensor:
        """P(y = 1 | X)."""
        return tf.sigmoid(self.logits(X))

    def loss(self, X: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """mean log-loss + l2·‖w‖²: objective(), on a batch. TensorFlow's cross-entropy from
        the logits never takes the log of a probability rounded to 0."""
        terms = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=self.logits(X))
        loss = tf.reduce_mean(terms)
        if self.l2:  # the bias is not penalised
            loss += self.l2 * tf.reduce_sum(tf.square(self.params[:-1]))
        return loss


def logits(theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """x·w + b in float64, term by term: a row's value must not depend on the rank count."""
    return linear.predict(theta, X)


def predict(theta: np.ndarray, X: np.ndarray) -> np.ndarray:
    """P(y = 1 | x) per row, in float64."""
    return sigmoid(logits(theta, X))


def synthetic_target(seed: int, rows: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The synthetic rows' target: y ~ Bernoulli(σ(x·w_true + b_true)), the seed's line read
    as logits, drawn from one uniform per row, a pure function of (seed, row)."""
    theta = np.append(true_weights(X.shape[1]), TRUE_BIAS)
    drawn = uniforms(seed, rows) < predict(theta, X.astype(np.float64))
    return drawn.astype(X.dtype)


def classes(probabilities: np.ndarray, threshold: float) -> np.ndarray:
    """`predict --threshold`: 1 where the probability is above the threshold, else 0."""
    return (probabilities > threshold).astype(np.float64)


def loss(job: Job, shard, theta: np.ndarray) -> float:
    """The mean log-loss of [w..., b] over the whole dataset: float64 sums, allreduced."""
    total, count = 0.0, 0
    for X, y in shard.blocks(max(1024, (16 << 20) // (8 * (shard.num_features + 1)))):
        z = X.astype(np.float64) @ theta[:-1] + theta[-1]
        total += float(log_loss_terms(z, y.astype(np.float64)).sum())
        count += len(y)
    # Horovod: the ranks' sums, so that every rank holds the whole dataset's loss.
    sums = job.allreduce_sum([total, count], "global_log_loss")
    return float(sums[0] / sums[1]) if sums[1] else math.nan


def objective(loss: float, params: np.ndarray, l2: float) -> float:
    """mean log-loss + l2·‖w‖² (the bias not penalised): what both solvers minimise."""
    return loss + l2 * float(params[:-1] @ params[:-1]) if l2 else loss


def check_target(job: Job, shard):
    """The shard with a 0/1 target: as it is, or with a target of two other values recoded,
    the smaller to 0 and the larger to 1 (rank 0 says so). Any other target is refused on
    every rank, naming the first row that holds a value beyond the two."""
    values = sorted(set().union(*job.allgather(_distinct(shard), name="target_values")))
    labels = (0.0, 1.0) if {0.0, 1.0} <= set(values) or set(values) <= {0.0, 1.0} else values[:2]
    error = None
    # The layout numbers the training rows; with held-out rows those are not the file's rows,
    # whose numbers the data module keeps to itself: the message then says which it counts.
    rows = "training row" if shard.num_validation else "data row"

    def row_name(local: int) -> str:
        return f"{rows} {shard.layout.global_row(local)} (0-based)"

    try:
        _check_rows(shard.source, _enumerate_blocks(shard.blocks()), row_name, labels)
        if shard.validation is not None:
            _check_rows(shard.source, [(0, *shard.validation)], lambda _: "a held-out row", labels)
    except UsageError as e:
        error = e
    job.agree(error)
    if labels == (0.0, 1.0):
        return shard
    job.log(f"the target's values {labels[0]:g} and {labels[1]:g} are read as 0 and 1")
    return _recoded(shard, labels[1])


def _distinct(shard) -> list[float]:
    """This rank's distinct target values, up to 3 of them: more are refused anyway."""
    seen: set[float] = set()
    blocks = [*shard.blocks(), *([shard.validation] if shard.validation is not None else [])]
    for _, y in blocks:
        seen.update(np.unique(y).tolist())
        if len(seen) > 2:
            break
    return sorted(seen)[:3]


def _recoded(shard, high: float):
    """The shard whose target is 1 where it was high and 0 elsewhere: its rows in memory, its
    held-out rows, and the rows it reads from its file as training uses them."""

    def recode(y: np.ndarray) -> np.ndarray:
        return (y == high).astype(y.dtype)

    changes = {"y": recode(shard.y)}
    if shard.validation is not None:
        changes["validation"] = (shard.validation[0], recode(shard.validation[1]))
    if shard.table is not None:
        read = shard.table.read

        def read_recoded(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
            X, y = read(start, stop)
            return X, recode(y)

        changes["table"] = replace(shard.table, read=read_recoded)
    return replace(shard, **changes)


def _enumerate_blocks(blocks: Iterable[tuple[np.ndarray, np.ndarray]]):
    """(the first row's number on this rank, X, y) per block."""
    at = 0
    for X, y in blocks:
        yield at, X, y
        at += len(y)


def _check_rows(source: str, blocks, row_name, labels) -> None:
    """blocks: (the first row's number on this rank, X, y); row_name(number): that row."""
    for first, _, y in blocks:
        bad = ~np.isin(y, labels)
        if bad.any():
            where, value = row_name(first + int(np.argmax(bad))), y[int(np.argmax(bad))]
            raise UsageError(
                f"{source}: {where} has the target {value:g}; --model logistic needs a "
                f"target of 0 or 1, or of two values read as 0 and 1 (here {labels[0]:g} "
                f"and {labels[1]:g})"
            )


@dataclass(frozen=True)
class Scores:
    """Classification scores of a model on some rows: log-loss, accuracy and ROC AUC."""

    count: int
    log_loss: float
    accuracy: float  # at the threshold 0.5
    auc: float  # nan when the rows hold one class only

    def values(self) -> dict[str, float]:
        """Each score by name, as TensorBoard and the metrics JSON name them."""
        return {"log_loss": self.log_loss, "accuracy": self.accuracy, "auc": self.auc}

    def as_json(self) -> dict[str, float | None]:
        """JSON has no NaN: an undefined score is null."""
        return {k: v if np.isfinite(v) else None for k, v in self.values().items()}

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


def scores(job: Job, theta: np.ndarray, blocks: Iterable[tuple[np.ndarray, np.ndarray]]) -> Scores:
    """The scores of theta (w..., b; float64) on every rank's blocks of (X, y). The AUC is
    exact: every rank's (logit, label) pairs are gathered (16 bytes a row), since no sum of
    per-rank figures gives the ranking of all rows together."""
    z, y = [np.zeros(0)], [np.zeros(0)]
    for X, yb in blocks:
        z.append(logits(theta, X.astype(np.float64)))
        y.append(yb.astype(np.float64))
    pairs = np.column_stack([np.concatenate(z), np.concatenate(y)])
    # Horovod: every rank's pairs, so that every rank computes the same scores.
    pairs = job.allgather_rows(pairs, "score_pairs")
    z, y = pairs[:, 0], pairs[:, 1]
    if not np.isin(y, (0.0, 1.0)).all():  # the same pairs on every rank: every rank raises
        raise UsageError(
            f"the target holds {y[~np.isin(y, (0.0, 1.0))][0]:g}: a logistic model is scored "
            "on a target of 0 or 1; recode it"
        )
    if not len(y):
        return Scores(0, math.nan, math.nan, math.nan)
    accuracy = float(np.mean((z > 0) == (y > 0.5)))
    return Scores(len(y), float(log_loss_terms(z, y).mean()), accuracy, roc_auc(z, y))


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve: the probability that a random positive row scores above
    a random negative one, ties counting one half (Mann-Whitney U from mid-ranks)."""
    positive = labels > 0.5
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    values, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mid_ranks = ends - (counts - 1) / 2.0  # 1-based, tied values sharing their mean rank
    rank_sum = float(mid_ranks[inverse][positive].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def optimum(job: Job, shard, l2: float, names: Sequence[str] | None) -> Optimum:
    """The exact optimum of the (penalised) log-loss over the whole dataset, the same on every
    rank: Newton's method."""
    return logistic_newton.optimum(job, shard, l2, names)


def statistics(optimum: Optimum, names: tuple[str, ...] | None) -> Statistics:
    """Maximum likelihood's statistics of the exact optimum."""
    return logistic_newton.describe(optimum, names)


def save_model(directory: Path, theta: np.ndarray, dtype: str) -> None:
    """A SavedModel whose serving signature maps features to P(y = 1)."""
    linear.save_serving(directory, Model(theta, dtype), "probability")


def curve(theta: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, str]:
    """The fitted sigmoid over one feature's values, and its label."""
    w, b = theta[0], theta[-1]
    return predict(theta[[0, -1]], xs[:, None]), f"fitted: P(y=1) = σ({w:.4g}x + {b:.4g})"
