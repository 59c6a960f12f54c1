"""Robust standard errors at an exact optimum (--cov_type HC0, HC1, cluster): the sandwich
B⁻¹ M B⁻¹ of White and Huber, as statsmodels computes it. The bread B = AᵀWA is the Fisher
information the solver's factor holds (A = [X 1]); the meat M = Σ uᵢ uᵢᵀ sums each row's
score, uᵢ = wᵢ (yᵢ - μᵢ) / (V(μᵢ) g'(μᵢ)) [xᵢ 1], over one more pass and one allreduce. The
scale cancels: the errors hold whether or not the family's variance is right. HC1 multiplies
HC0 by n / (n - k), the small-sample factor of statsmodels' OLS (its GLM returns HC0 for both).

cluster (--groups) sums the scores within each cluster first, M = Σ_g s_g s_gᵀ with
s_g = Σ_{i in g} uᵢ, times G/(G - 1) (n - 1)/(n - k), statsmodels' default correction (CRV1)
for OLS, WLS and GLM alike. A cluster's rows may sit on several ranks: each rank sums its own
rows' scores by cluster, one allgather gives every rank every rank's sums, and each adds up
the parts of each cluster. Every rank then holds, briefly, one row of k + 1 float64 per
(rank, cluster) pair: 10⁶ clusters with 10 features, each on one rank, are 96 MB."""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.passes import block_rows
from hvd_linreg.errors import UsageError
from hvd_linreg.families.family import Family
from hvd_linreg.families.maths import predictor
from hvd_linreg.runtime.ranks import Job


def covariance(
    job: Job, shard, family: Family, theta: np.ndarray, information: np.ndarray, cov_type: str
) -> np.ndarray:
    """The robust covariance of theta = [w..., b], the same on every rank; with cluster, also
    the number of clusters (else None). An information matrix of the features alone (a model
    without an intercept) leaves b out: its row and column are 0."""
    k = len(information)  # F + 1, or F without an intercept
    sums = np.zeros(k * k + 1)  # M, then the rows
    clusters = []  # cluster: this rank's (keys, score sums) of each block
    carried = shard.carried_columns
    for X, y, C in shard.raw_blocks(block_rows(k)):
        rows = carried.rows(X, y, C)
        keep = rows.weights() > 0
        rows = rows.counted()
        y = rows.y.astype(np.float64)
        mu = family.link.inverse(predictor(theta, rows))
        variance, slope = family.variance_and_slope(mu)
        u = rows.weights() * (y - mu) / (variance * slope)
        scores = np.c_[rows.X.astype(np.float64), np.ones(len(y))][:, :k] * u[:, None]
        if cov_type == "cluster":
            clusters.append(by_cluster(C[keep, carried.group_index].astype(np.float64), scores))
        else:
            sums[:-1] += (scores.T @ scores).ravel()
        sums[-1] += len(y)
    sums = job.allreduce_sum(sums, "sandwich")  # Horovod: every rank's sums
    n = sums[-1]
    if cov_type == "cluster":  # every rank's sums by cluster, each cluster's parts added
        keys, parts = merged(job.allgather(merged(clusters, k), "sandwich_clusters"), k)
        meat, count = parts.T @ parts, len(keys)
    else:
        meat, count = sums[:-1].reshape(k, k), None
    full = np.zeros((len(theta), len(theta)))
    full[:k, :k] = _corrected(information, meat, cov_type, n, count)
    return full, count


def class_covariance(job: Job, shard, B: np.ndarray, information: np.ndarray, cov_type: str):
    """The robust covariance of a multinomial fit's B ((F + 1) x (K - 1); information
    class-major, solvers/multinomial.py), as statsmodels' MNLogit(cov_type=) gives it, and the
    number of clusters (None but for cluster). Row i's score is (y_i - p_i)[1:] ⊗ [x_i 1],
    class by class; a weight counts the row as many times (the meat Σ w_i u_i u_iᵀ, a
    cluster's sum Σ w_i u_i, n = Σ w), as the model's weights do everywhere."""
    from hvd_linreg.solvers.multinomial import log_probabilities

    F1, K1 = B.shape
    k = F1 * K1
    sums, clusters = np.zeros(k * k + 1), []
    carried = shard.carried_columns
    for X, y, C in shard.raw_blocks(block_rows(k)):
        rows = carried.rows(X, y, C)
        keep = rows.weights() > 0
        rows = rows.counted()
        w, codes = rows.weights(), rows.y.astype(np.int64)
        A = np.c_[rows.X.astype(np.float64), np.ones(len(w))]
        residual = (codes[:, None] == np.arange(1, K1 + 1)) - np.exp(
            log_probabilities(A[:, :-1], B, rows.offset)[:, 1:]
        )
        scores = (residual[:, :, None] * A[:, None, :]).reshape(len(w), k)  # class-major
        if cov_type == "cluster":
            keys = C[keep, carried.group_index].astype(np.float64)
            clusters.append(by_cluster(keys, scores * w[:, None]))
        else:
            sums[:-1] += (scores.T @ (scores * w[:, None])).ravel()
        sums[-1] += w.sum()
    sums = job.allreduce_sum(sums, "class_sandwich")
    n, count = sums[-1], None
    if cov_type == "cluster":
        keys, parts = merged(job.allgather(merged(clusters, k), "class_sandwich_clusters"), k)
        meat, count = parts.T @ parts, len(keys)
    else:
        meat = sums[:-1].reshape(k, k)
    return _corrected(information, meat, cov_type, n, count), count


def _corrected(information, meat, cov_type: str, n: float, count: int | None) -> np.ndarray:
    """B⁻¹ M B⁻¹, times HC1's n / (n - k) or cluster's G/(G - 1) (n - 1)/(n - k)."""
    k = len(information)
    half = np.linalg.solve(information, meat)
    cov = np.linalg.solve(information, half.T).T  # B symmetric
    if cov_type == "HC1":
        cov *= n / (n - k)
    elif count is not None:
        if count < 2:
            raise UsageError(
                f"--cov_type cluster needs at least 2 clusters in --groups, got {count}"
            )
        cov *= count / (count - 1) * (n - 1) / (n - k)
    return (cov + cov.T) / 2.0


def by_cluster(keys: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows' scores summed by cluster: (the sorted distinct keys, their sums)."""
    distinct, inverse = np.unique(keys, return_inverse=True)
    sums = np.zeros((len(distinct), scores.shape[1]))
    np.add.at(sums, inverse, scores)
    return distinct, sums


def merged(parts: list, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Several (keys, sums) as one, each cluster's parts added in the order given."""
    if not parts:
        return np.zeros(0), np.zeros((0, k))
    return by_cluster(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
