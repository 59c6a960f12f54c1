"""The passes over the rows that the elastic-net path (path.py) takes: the prior-weighted
moments of every fold, and each model's working-weighted moments at its coefficients. Each is
one pass over this rank's rows and one allgather (moments.gather)."""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.folds import Folds
from hvd_linreg.data.passes import PATH_BLOCK_BYTES, block_rows
from hvd_linreg.families.family import Family
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers.moments import Moments, gather

# glm_pass's sums beside each model's moments, by column
TRAIN_DEVIANCE, OUTSIDE, HELD_DEVIANCE, HELD_WEIGHT, MISMATCH = range(5)


def blocks(shard, folds: Folds | None, rows: int | None = None, cache: dict | None = None):
    """This rank's rows of weight > 0 in float64 blocks of about rows (PATH_BLOCK_BYTES's by
    default): (X, y, offset or None, weight, fold or None); a wide design's X a design
    matrix. cache (a dict kept across passes) keeps each block's folds."""
    carried, F = shard.carried_columns, shard.num_features
    at = 0
    size = rows or block_rows(F + 2, budget=PATH_BLOCK_BYTES)
    for b, (X, y, C) in enumerate(shard.raw_blocks(size)):
        rows = carried.rows(X, y, C)
        weight = rows.weights()
        keep = weight > 0
        fold = None if cache is None else cache.get(b)
        if folds is not None and fold is None:
            ids = shard.layout.global_rows(np.arange(at, at + len(y)))
            fold = folds.of(ids, None if folds.column is None else C[:, carried.fold_index])
            fold = fold if keep.all() else fold[keep]
            if cache is not None:
                cache[b] = fold
        at += len(y)
        offset = rows.offset
        if not keep.all():
            rows = rows.counted()
            weight = weight[keep]
            offset = rows.offset
        X = rows.X if isinstance(rows.X, DesignMatrix) else np.asarray(rows.X, np.float64)
        yield X, rows.y.astype(np.float64), offset, weight, fold


def prior_pass(job: Job, shard, folds: Folds | None, gaussian: bool) -> tuple[list[Moments], int]:
    """Each fold's (or the one set's) moments of [X z] by the prior weights, z the target
    less any offset for a gaussian identity fit, else the target (the features' scales, and
    the whole of a gaussian identity fit), and the rows of weight > 0."""
    K = folds.count if folds is not None else 1
    parts = [Moments.empty(shard.num_features + 1) for _ in range(K)]
    count = np.zeros((K, 1))
    for X, y, offset, weight, fold in blocks(shard, folds):
        z = y - offset if gaussian and offset is not None else y
        A = np.c_[X, z]
        for k in range(K):
            mine = slice(None) if fold is None else fold == k
            parts[k] = parts[k].merge(Moments.of(A[mine], weight[mine]))
            count[k] += len(z) if fold is None else np.count_nonzero(mine)
    parts, count = gather(job, parts, count, "path_moments")
    return parts, int(count.sum())


def glm_pass(job: Job, shard, family: Family, folds: Folds | None, models: list, exact, cache):
    """Each model's moments of [X r] by the working weights W at its theta (model.theta,
    model.fold: the fold it holds out, or None) on its training rows, and its sums (a row
    each): training deviance, rows off the family's domain, held-out deviance and weight, and
    MISMATCH.

    The models not exact (a bool each), when there are two or more, take their Hessians from one
    Gram (_shared): each row weighed by V, the mean of their W there, and each one's [X r]
    column replaced by q = W r / V, so that its cross products Σ V (x - x̄)(q - q̄) are its exact
    gradient; MISMATCH is then Σ (W - V)² / V on its training rows. The others take each their
    own Gram, as exact as Newton's step, and MISMATCH 0. cache: a dict kept across the passes
    (each block's folds and its rows' order by fold)."""
    F, m = shard.num_features, len(models)
    shared = np.flatnonzero(~np.asarray(exact, bool))
    shared = shared if len(shared) > 1 else shared[:0]
    own = np.setdiff1d(np.arange(m), shared)
    K = folds.count if folds is not None and len(shared) else min(len(shared), 1)
    moments = [Moments.empty(F + 1) for _ in own] + [Moments.empty(F + len(shared))] * K
    sums = np.zeros((m, 5))
    theta = np.array([model.theta for model in models])  # (models, F + 1)
    held_out = np.array([-1 if model.fold is None else model.fold for model in models])
    for b, (X, y, offset, weight, fold) in enumerate(blocks(shard, folds, cache=cache)):
        W, r, train = _rows(family, X, y, offset, weight, fold, theta, held_out, sums)
        for k, i in enumerate(own):
            t = train[i]
            moments[k] = moments[k].merge(Moments.of(np.c_[X[t], r[i, t]], W[i, t]))
        if len(shared):
            if fold is not None and ("order", b) not in cache:  # the rows fold by fold
                order = np.argsort(fold, kind="stable")
                cache["order", b] = order, np.searchsorted(fold[order], np.arange(K + 1))
            W, scores, order = W[shared], W[shared] * r[shared], cache.get(("order", b))
            mismatch, moments[len(own) :] = _shared(X, order, W, scores, moments[len(own) :])
            sums[shared, MISMATCH] += mismatch
    moments, sums = gather(job, moments, sums, "path_pass")
    result = [None] * m
    for k, i in enumerate(own):
        result[i] = moments[k]
    for k, i in enumerate(shared):
        result[i] = _model_moments(moments[len(own) :], models[i].fold, F, k)
    return result, sums


def _rows(family: Family, X, y, offset, weight, fold, theta, held_out, sums: np.ndarray):
    """Every model's W and r on this block's rows (a row per model; 0 off its training rows
    and the family's domain) and its training rows, its sums added to sums."""
    eta = theta[:, :-1] @ X.T + theta[:, -1:]  # (models, rows)
    if offset is not None:
        eta += offset
    mu = family.link.inverse(eta)
    valid = family.valid_mean(mu)
    deviance = weight * np.where(valid, family.unit_deviance(y, mu), 0.0)
    train = held_out[:, None] != (-2 if fold is None else fold)
    train = np.broadcast_to(train, eta.shape)
    sums[:, HELD_DEVIANCE] += np.where(train, 0.0, deviance).sum(axis=1)
    sums[:, HELD_WEIGHT] += np.where(train, 0.0, weight).sum(axis=1)
    # its own sum, not the total less the held-out one: inf - inf where a held-out row is inf
    sums[:, TRAIN_DEVIANCE] += np.where(train, deviance, 0.0).sum(axis=1)
    sums[:, OUTSIDE] += np.count_nonzero(train & ~valid, axis=1)
    W, r = family.newton_weights(y, mu, weight)
    keep = train & valid
    return np.where(keep, W, 0.0), np.where(keep, r, 0.0), train


def _shared(X, order, W: np.ndarray, scores: np.ndarray, parts: list):
    """Each model's MISMATCH on one block's rows, and each fold of rows' moments (parts) with
    theirs of [X q_1 ... q_m] by V, the mean W of the models that train on each row; order:
    the rows fold by fold and where each fold starts (None: no folds)."""
    parts = list(parts)
    training = W > 0
    count = training.sum(axis=0)
    V = np.divide(W.sum(axis=0), count, out=np.zeros(X.shape[0]), where=count > 0)
    on = V > 0
    Q = np.divide(scores, V, out=np.zeros_like(scores), where=on)
    mismatch = np.divide((W - V) ** 2, V, out=np.zeros_like(W), where=on & training).sum(axis=1)
    if order is None:
        parts[0] = parts[0].merge(Moments.of(np.c_[X, Q.T], V))
        return mismatch, parts
    rows, ends = order
    A, V = np.c_[X, Q.T].take(rows, axis=0), V.take(rows)
    for j, part in enumerate(parts):
        within = slice(ends[j], ends[j + 1])
        parts[j] = part.merge(Moments.of(A[within], V[within]))
    return mismatch, parts


def _model_moments(parts: list[Moments], fold: int | None, F: int, i: int) -> Moments:
    """The i-th model's moments of [X q] from the folds' parts: every part but its fold's."""
    whole = Moments.empty(len(parts[0].mean))
    for j, part in enumerate(parts):
        if j != fold:
            whole = whole.merge(part)
    keep = np.r_[np.arange(F), F + i]
    return Moments(whole.weight, whole.mean[keep], whole.scatter[np.ix_(keep, keep)])
