"""The passes over the rows that the elastic-net path (path.py) takes: the prior-weighted
moments of every fold, and each model's working-weighted moments at its coefficients. Each is
one pass over this rank's rows and one allgather (moments.gather)."""

from __future__ import annotations

import numpy as np

from hvd_linreg.data.folds import Folds
from hvd_linreg.data.passes import PATH_BLOCK_BYTES, block_rows
from hvd_linreg.families.family import Family
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.ranks import Job
from hvd_linreg.solvers.moments import Moments, gather

# glm_pass's sums beside each model's moments, by column
TRAIN_DEVIANCE, OUTSIDE, HELD_DEVIANCE, HELD_WEIGHT = range(4)


def blocks(shard, folds: Folds | None, rows: int | None = None):
    """This rank's rows of weight > 0 in float64 blocks of about rows (PATH_BLOCK_BYTES's by
    default): (X, y, offset or None, weight, fold or None); a wide design's X a design
    matrix."""
    carried, F = shard.carried_columns, shard.num_features
    at = 0
    for X, y, C in shard.raw_blocks(rows or block_rows(F + 2, budget=PATH_BLOCK_BYTES)):
        rows = carried.rows(X, y, C)
        fold = None
        if folds is not None:
            ids = shard.layout.global_rows(np.arange(at, at + len(y)))
            fold = folds.of(ids, None if folds.column is None else C[:, carried.fold_index])
        at += len(y)
        weight = rows.weights()
        keep = weight > 0
        offset = rows.offset
        if not keep.all():
            rows = rows.counted()
            weight = weight[keep]
            fold = None if fold is None else fold[keep]
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


def glm_pass(job: Job, shard, family: Family, folds: Folds | None, models: list):
    """Each model's moments of [X r] by the working weights W at its theta (model.theta,
    model.fold: the fold it holds out, or None) on its training rows, and its sums (a row
    each): training deviance, rows off the family's domain, held-out deviance and weight."""
    link, F = family.link, shard.num_features
    moments = [Moments.empty(F + 1) for _ in models]
    sums = np.zeros((len(models), 4))
    for X, y, offset, weight, fold in blocks(shard, folds):
        for i, model in enumerate(models):
            eta = X @ model.theta[:-1] + model.theta[-1]
            if offset is not None:
                eta += offset
            mu = link.inverse(eta)
            valid = family.valid_mean(mu)
            deviance = np.where(valid, family.unit_deviance(y, mu), 0.0)
            train = slice(None) if model.fold is None else fold != model.fold
            if model.fold is not None:
                held = ~train
                sums[i, HELD_DEVIANCE] += weight[held] @ deviance[held]
                sums[i, HELD_WEIGHT] += weight[held].sum()
            mu, valid, w, yt = mu[train], valid[train], weight[train], y[train]
            W, r = family.newton_weights(yt, mu, w)
            W, r = np.where(valid, W, 0.0), np.where(valid, r, 0.0)
            moments[i] = moments[i].merge(Moments.of(np.c_[X[train], r], W))
            sums[i, TRAIN_DEVIANCE] += w @ deviance[train]
            sums[i, OUTSIDE] += len(yt) - np.count_nonzero(valid)
    return gather(job, moments, sums, "path_pass")
