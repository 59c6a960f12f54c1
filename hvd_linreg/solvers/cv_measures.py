"""cv.glmnet's type.measure: each fold's held-out figure at each strength of the path, by a
measure other than the deviance (which the path's own passes give), or by any measure at other
coefficients (the relaxed lasso's blends, solvers/relaxed.py).

One more pass over the rows after the path: each row is predicted by its own fold's model at
every strength. mse, mae and class are weighted means over a fold's held-out rows, summed in one
allreduce; auc is each fold's area under the ROC curve, which needs every held-out row's score
at once: a strength's scores are gathered from every rank (a chunk of strengths at a time), so
every rank computes the same areas from the same rows in the same order.

glmnet's definitions, on a two-level target p = P(y = 1): mse (y - p)² + ((1 - y) - (1 - p))²
= 2 (y - p)², mae 2 |y - p|, class the misclassified weight with p > 0.5 predicting 1; for
the other families (y - μ)² and |y - μ|. A tie in an auc counts one half (glmnet breaks ties
at random: the two agree wherever the scores differ)."""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.solvers import path_passes

MEASURES = ("deviance", "mse", "mae", "class", "auc")
CLASSES_ONLY = ("class", "auc")  # need a two-level target
LARGER_IS_BETTER = ("auc",)
GATHERED_VALUES = 1 << 24  # about the scores (doubles) one gather of auc holds on each rank


def held_out(job, shard, family, folds, fold_coefficients: np.ndarray, measure: str) -> np.ndarray:
    """(K, strengths): each fold's held-out measure at each strength; fold_coefficients
    (K, strengths, F + 1), each [w..., b]."""
    K, S = fold_coefficients.shape[:2]
    two = family.NAME in ("binomial", "logistic")
    if measure == "auc":
        return _areas(job, shard, family, folds, fold_coefficients)
    sums = np.zeros((K, S + 1))  # each fold's Σ w m at each strength, and its Σ w
    for X, y, offset, weight, fold in path_passes.blocks(shard, folds):
        for k in range(K):
            mine = fold == k
            if not mine.any():
                continue
            mu = _means(family, X, offset, mine, fold_coefficients[k])
            yk, wk = y[mine][:, None], weight[mine]
            if measure == "deviance":
                terms = family.unit_deviance(yk, mu)
            elif measure == "mse":
                terms = (yk - mu) ** 2 * (2.0 if two else 1.0)
            elif measure == "mae":
                terms = np.abs(yk - mu) * (2.0 if two else 1.0)
            else:  # class
                terms = np.where(mu > 0.5, 1.0 - yk, yk)
            sums[k, :S] += wk @ terms
            sums[k, S] += wk.sum()
    sums = job.allreduce_sum(sums, "cv_measure")
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[:, :S] / sums[:, S:]


def held_out_classes(job, shard, folds, fold_thetas: np.ndarray, measure: str) -> np.ndarray:
    """(K, strengths): each fold's held-out measure of a model of C classes, each row by its
    own fold's model at each strength; fold_thetas (K, strengths, C, F + 1), each class's
    [w..., b]. glmnet's multinomial measures: mse Σ_c (y_c - p_c)², mae Σ_c |y_c - p_c| (y_c
    the row's class indicator), class the misclassified weight (the most probable class
    predicted)."""
    K, S, C = fold_thetas.shape[:3]
    sums = np.zeros((K, S + 1))
    for X, y, _, weight, fold in path_passes.blocks(shard, folds):
        codes = y.astype(np.int64)
        for k in range(K):
            mine = fold == k
            if not mine.any():
                continue
            theta = fold_thetas[k]  # (S, C, F + 1)
            eta = np.einsum("rf,scf->rsc", X[mine], theta[:, :, :-1]) + theta[:, :, -1]
            eta -= eta.max(axis=2, keepdims=True)
            p = np.exp(eta)
            p /= p.sum(axis=2, keepdims=True)
            onehot = np.eye(C)[codes[mine]][:, None, :]  # (rows, 1, C)
            if measure == "deviance":
                terms = -2.0 * np.log(np.take_along_axis(p, codes[mine][:, None, None], 2)[..., 0])
            elif measure == "mse":
                terms = ((onehot - p) ** 2).sum(axis=2)
            elif measure == "mae":
                terms = np.abs(onehot - p).sum(axis=2)
            else:  # class
                terms = (p.argmax(axis=2) != codes[mine][:, None]).astype(np.float64)
            w = weight[mine]
            sums[k, :S] += w @ terms
            sums[k, S] += w.sum()
    sums = job.allreduce_sum(sums, "cv_measure_classes")
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums[:, :S] / sums[:, S:]


def _means(family, X, offset, rows, theta: np.ndarray) -> np.ndarray:
    """The fitted means of the rows at each strength's [w..., b] (theta: strengths x F + 1)."""
    W, b = theta[:, :-1], theta[:, -1]
    if isinstance(X, np.ndarray):
        eta = X[rows] @ W.T + b
    else:  # a design matrix (a wide design)
        part = X.rows(np.flatnonzero(rows))
        eta = np.column_stack([part.matvec(w) for w in W]) + b
    if offset is not None:
        eta = eta + offset[rows][:, None]
    return family.link.inverse(eta)


def _areas(job, shard, family, folds, fold_coefficients: np.ndarray) -> np.ndarray:
    """Each fold's AUC at each strength, from every rank's held-out scores gathered."""
    K, S = fold_coefficients.shape[:2]
    parts = []
    for X, y, offset, weight, fold in path_passes.blocks(shard, folds):
        eta = np.zeros((len(y), S))
        for k in range(K):
            mine = fold == k
            if mine.any():
                eta[mine] = _means(family, X, offset, mine, fold_coefficients[k])
        parts.append(np.column_stack([fold, y, weight, eta]))
    local = np.concatenate(parts) if parts else np.zeros((0, S + 3))
    head = job.allgather_rows(local[:, :3], "cv_auc_rows")
    rows = max(len(head), 1)
    chunk = max(1, GATHERED_VALUES // rows)
    out = np.full((K, S), np.nan)
    fold, y, w = head[:, 0], head[:, 1], head[:, 2]
    for start in range(0, S, chunk):
        scores = job.allgather_rows(
            np.ascontiguousarray(local[:, 3 + start : 3 + start + chunk]), "cv_auc_scores"
        )
        for k in range(K):
            mine = fold == k
            yk, wk = y[mine], w[mine]
            for j in range(scores.shape[1]):
                out[k, start + j] = roc_auc(scores[mine, j], wk * yk, wk * (1.0 - yk))
    return out


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
