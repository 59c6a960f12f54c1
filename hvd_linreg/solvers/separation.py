"""Quasi-separation, checked once IRLS has settled, for a family that counts its saturated rows
(the binomial's): no hyperplane splits the classes, but one leaves every row on its class's side
or on the plane. Along its normal the log-likelihood still rises without a maximum; IRLS's steps
then stop changing the loss, while the rows off the plane saturate and no longer inform that
direction. So compare the information AᵀWA with the data's own spread AᵀA/4 (the information if
every p were 1/2) in every direction: where the ratio is below INFORMATION, the estimate there
is the point where rounding stopped it, not an optimum."""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.passes import summed
from hvd_linreg.errors import UsageError
from hvd_linreg.solvers.blocks import BLOCK_ROWS, WIDE_GRAMS, WideGram

# A direction whose information is below this fraction of the data's spread along it has
# lost it to rows whose probabilities saturated: the mark of quasi-separation.
INFORMATION = 1e-10


def check(job, shard, family, counts: dict[str, float], factor, penalized: bool) -> None:
    """UsageError (family.quasi_separated's words) on every rank where the settled optimum is
    quasi-separation's. Only for unpenalized fits with saturated rows: it costs a pass and an
    allreduce."""
    if penalized or not counts.get("saturated"):
        return
    k = shard.num_features + 1
    if isinstance(factor, WIDE_GRAMS):  # a wide design: coefficient by coefficient
        _check_diagonal(job, shard, family, counts, factor)
        return

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
        raise UsageError(family.quasi_separated(counts))


def _check_diagonal(job, shard, family, counts: dict[str, float], gram: WideGram) -> None:
    """The same test on each coefficient's own direction, for a design by blocks (its whole
    information is not formed): a categorical level whose rows all saturated is the case."""

    def spread(rows):
        weight = rows.weights()
        return np.append(rows.X.diagonal(weight), weight.sum())

    k = shard.num_features + 1
    total = summed(job, shard.blocks(BLOCK_ROWS), spread, k, "newton_spread") / 4.0
    held = total > 0
    if np.any(gram.diagonal()[held] < INFORMATION * total[held]):
        raise UsageError(family.quasi_separated(counts))
