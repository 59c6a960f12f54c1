"""The passes over the rows that the elastic-net path (path.py) takes: the prior-weighted
moments of every fold, and each model's working-weighted moments at its coefficients. Each is
one pass over this rank's rows and one allgather (moments.gather)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hvd_linreg.data.folds import Folds
from hvd_linreg.data.passes import PATH_BLOCK_BYTES, block_rows
from hvd_linreg.families.family import Family
from hvd_linreg.matrix import DesignMatrix
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.runtime.resources import memory_per_rank
from hvd_linreg.solvers.moments import Moments, gather

# glm_pass's sums beside each model's moments, by column; from HELD_SCORES on, the F + 1 sums
# Σ score (x, 1) on its held-out rows, the score w (y - μ) / (V g') (figures_after)
TRAIN_DEVIANCE, OUTSIDE, HELD_DEVIANCE, HELD_WEIGHT, MISMATCH, HELD_SCORES = range(6)


def blocks(shard, folds: Folds | None, rows: int | None = None):
    """This rank's rows of weight > 0 in float64 blocks of about rows (PATH_BLOCK_BYTES's by
    default): (X, y, offset or None, weight, fold or None); a wide design's X a design
    matrix."""
    carried, F = shard.carried_columns, shard.num_features
    at = 0
    size = rows or block_rows(F + 2, budget=PATH_BLOCK_BYTES)
    for X, y, C in shard.raw_blocks(size):
        rows = carried.rows(X, y, C)
        weight = rows.weights()
        keep = weight > 0
        fold = None
        if folds is not None:
            ids = shard.layout.global_rows(np.arange(at, at + len(y)))
            fold = folds.of(ids, None if folds.column is None else C[:, carried.fold_index])
            fold = fold if keep.all() else fold[keep]
        at += len(y)
        offset = rows.offset
        if not keep.all():
            rows = rows.counted()
            weight = weight[keep]
            offset = rows.offset
        X = rows.X if isinstance(rows.X, DesignMatrix) else np.asarray(rows.X, np.float64)
        yield X, rows.y.astype(np.float64), offset, weight, fold


class _Block(NamedTuple):
    """A block of rows as glm_pass takes them: sorted by fold (ends: where each fold's rows
    start, and the last's end), X less shift (its columns' means: the Gram's sums then keep
    their digits)."""

    X: np.ndarray
    shift: np.ndarray
    y: np.ndarray
    offset: np.ndarray | None
    weight: np.ndarray
    ends: np.ndarray


# The share of a rank's memory that glm_pass's copy of the rows (sorted, centred, float64) may
# take, kept across the passes; past it, each pass makes them again
KEPT_ROWS_SHARE = 0.25


def fold_blocks(shard, folds: Folds | None, cache: dict):
    """blocks()'s rows as _Blocks, kept in cache where they fit KEPT_ROWS_SHARE of the memory."""
    if "blocks" in cache:
        yield from cache["blocks"]
        return
    K = folds.count if folds is not None else 1
    keep = len(shard.y) * (shard.num_features + 4) * 8 <= KEPT_ROWS_SHARE * memory_per_rank()
    kept = []
    for X, y, offset, weight, fold in blocks(shard, folds):
        order = None if fold is None else np.argsort(fold, kind="stable")
        if order is not None:
            X, y, weight, fold = X.take(order, axis=0), y[order], weight[order], fold[order]
            offset = None if offset is None else offset[order]
        ends = np.array([0, len(y)]) if fold is None else np.searchsorted(fold, np.arange(K + 1))
        shift = X.mean(axis=0)
        block = _Block(X - shift, shift, y, offset, weight, ends)
        if keep:
            kept.append(block)
        yield block
    if keep:
        cache["blocks"] = kept


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
    each): training deviance, rows off the family's domain, held-out deviance and weight,
    MISMATCH and HELD_SCORES.

    The models not exact (a bool each), when there are two or more, take their Hessians from one
    Gram (_shared): each row weighed by V, the mean of their W there, and each one's [X r]
    column replaced by q = W r / V, so that its cross products Σ V (x - x̄)(q - q̄) are its exact
    gradient; MISMATCH is then Σ (W - V)² / V on its training rows. The others take each their
    own Gram, as exact as Newton's step, and MISMATCH 0. cache: a dict kept across the passes
    (the rows as fold_blocks sorts them)."""
    F, m = shard.num_features, len(models)
    shared = np.flatnonzero(~np.asarray(exact, bool))
    shared = shared if len(shared) > 1 else shared[:0]
    own = np.setdiff1d(np.arange(m), shared)
    K = folds.count if folds is not None and len(shared) else min(len(shared), 1)
    moments = [Moments.empty(F + 1) for _ in own] + [Moments.empty(F + len(shared))] * K
    sums = np.zeros((m, HELD_SCORES + F + 1))
    theta = np.array([model.theta for model in models])  # (models, F + 1)
    held_out = np.array([-1 if model.fold is None else model.fold for model in models])
    for block in fold_blocks(shard, folds, cache):
        W, r = _rows(family, block, theta, held_out, sums)
        for k, i in enumerate(own):
            t = _training(block, held_out[i])
            mine = Moments.of(np.c_[block.X[t], r[i, t]], W[i, t]).shifted(block.shift)
            moments[k] = moments[k].merge(mine)
        if len(shared):
            W, scores = W[shared], W[shared] * r[shared]
            mismatch, moments[len(own) :] = _shared(block, W, scores, moments[len(own) :])
            sums[shared, MISMATCH] += mismatch
    moments, sums = gather(job, moments, sums, "path_pass")
    result = [None] * m
    for k, i in enumerate(own):
        result[i] = moments[k]
    for k, i in enumerate(shared):
        result[i] = _model_moments(moments[len(own) :], models[i].fold, F, k)
    return result, sums


def _rows(family: Family, block: _Block, theta, held_out, sums: np.ndarray):
    """Every model's W and r on this block's rows (a row per model; 0 off its training rows
    and the family's domain), its sums added to sums. A model's held-out rows are its fold's
    slice of the block (held_out[i]; -1: none)."""
    y, weight = block.y, block.weight
    intercept = theta[:, -1:] + theta[:, :-1] @ block.shift[:, None]  # at the shifted X
    eta = theta[:, :-1] @ block.X.T + intercept  # (models, rows)
    if block.offset is not None:
        eta += block.offset
    mu = family.link.inverse(eta)
    valid = family.valid_mean(mu)
    everywhere = bool(valid.all())
    deviance = family.deviance_in_mean(y, eta, mu)
    deviance += family.deviance_in_target(y)  # in y alone: once for every model
    if not everywhere:
        deviance = np.where(valid, deviance, 0.0)
    deviance *= weight
    W, r = family.newton_weights(y, mu, weight)
    # their own arrays a row per model, zeroed off its training rows below
    W, r = np.broadcast_to(W, eta.shape).copy(), np.broadcast_to(r, eta.shape).copy()
    if not everywhere:
        W[~valid], r[~valid] = 0.0, 0.0
    for i, k in enumerate(held_out):
        held = slice(0, 0) if k < 0 else slice(block.ends[k], block.ends[k + 1])
        # the training rows' deviance summed on its own, not the total less the held-out
        # part: inf - inf where a held-out row's is inf
        sums[i, TRAIN_DEVIANCE] += deviance[i, : held.start].sum() + deviance[i, held.stop :].sum()
        sums[i, HELD_DEVIANCE] += deviance[i, held].sum()
        sums[i, HELD_WEIGHT] += weight[held].sum()
        if not everywhere:  # the training rows off the domain
            sums[i, OUTSIDE] += np.count_nonzero(~valid[i]) - np.count_nonzero(~valid[i, held])
        if k >= 0:
            score = W[i, held] * r[i, held]
            total = score.sum()
            sums[i, HELD_SCORES:-1] += block.X[held].T @ score + block.shift * total
            sums[i, -1] += total
        W[i, held], r[i, held] = 0.0, 0.0
    return W, r


def _training(block: _Block, fold: int) -> np.ndarray:
    """Whether each row of the block trains the model that holds out fold (-1: none)."""
    train = np.ones(len(block.y), bool)
    if fold >= 0:
        train[block.ends[fold] : block.ends[fold + 1]] = False
    return train


def _shared(block: _Block, W: np.ndarray, scores: np.ndarray, parts: list):
    """Each model's MISMATCH on one block's rows, and each fold of rows' moments (parts) with
    theirs of [X q_1 ... q_m] by V, the mean W of the models that train on each row (the
    block's rows are sorted by fold: each fold's are a slice)."""
    parts = list(parts)
    training = W > 0
    count = training.sum(axis=0)
    V = np.divide(W.sum(axis=0), count, out=np.zeros(len(block.y)), where=count > 0)
    on = V > 0
    Q = np.divide(scores, V, out=np.zeros_like(scores), where=on)
    mismatch = np.divide((W - V) ** 2, V, out=np.zeros_like(W), where=on & training).sum(axis=1)
    ends = block.ends
    for j, part in enumerate(parts):
        within = slice(ends[j], ends[j + 1])
        mine = Moments.of_columns(block.X[within], Q[:, within], V[within], single=True).shifted(
            block.shift
        )
        parts[j] = part.merge(mine)
    return mismatch, parts


def _model_moments(parts: list[Moments], fold: int | None, F: int, i: int) -> Moments:
    """The i-th model's moments of [X q] from the folds' parts: every part but its fold's."""
    whole = Moments.empty(len(parts[0].mean))
    for j, part in enumerate(parts):
        if j != fold:
            whole = whole.merge(part)
    keep = np.r_[np.arange(F), F + i]
    return Moments(whole.weight, whole.mean[keep], whole.scatter[np.ix_(keep, keep)])


def figures_after(row: np.ndarray, M: Moments, step: np.ndarray) -> tuple[float, float, float]:
    """A model's figures (training deviance, held-out deviance and weight) at theta + step, from
    the pass at theta (its row of sums and its moments M) when the step is small (path.py's
    FINISH_NEWTON, Σ W Δη² at most 1e-14 of the deviance): the deviances' expansions in Δη,
    whose gradient is -2 x the score. The training deviance's to second order (Σ W Δη², its
    error of the step's cube), the held-out deviance's to first (its error of the step's
    square, about 1e-14 of it)."""
    F = len(step) - 1
    beta, b = step[:-1], step[-1]
    level = M.mean[:F] @ beta + b  # Δη's weighted mean
    along = M.scatter[:F, F] @ beta + M.weight * M.mean[F] * level  # Σ score Δη
    curved = beta @ M.scatter[:F, :F] @ beta + M.weight * level * level  # Σ W Δη²
    train = row[TRAIN_DEVIANCE] - 2.0 * along + curved
    held = row[HELD_DEVIANCE] - 2.0 * (row[HELD_SCORES:] @ step)
    return float(train), float(held), float(row[HELD_WEIGHT])
