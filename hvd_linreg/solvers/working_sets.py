"""A wide path's working sets (wide_path.py): how many features one holds, which join it, and
a least-squares path's covariance updates.

A gaussian identity model's moments do not depend on its coefficients, so, as glmnet's
covariance updates do, the path keeps Σ w x x_k over every feature x for each feature k that a
working set has held (Covariance): a working set's Gram, and the gradient over every feature
that the KKT conditions check, are then products of those columns, and a pass over the rows
only sums the columns of features that join a working set for the first time. Folds of rows
keep their own sums, which every model adds over its training folds. Where those columns
could pass MAX_CACHE_BYTES (every feature's row, MAX_WORKING columns, each fold of rows), the
path takes its passes instead."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from hvd_linreg.matrix.split import as_split
from hvd_linreg.solvers import path_passes
from hvd_linreg.solvers.blocks import BLOCK_ROWS

# The most features a model's working set holds: its Gram, (4,096 + 2)² numbers, is summed by
# every pass (one per model); a path whose sets would pass it ends at the strength before
MAX_WORKING = 4096
# Features that join a working set at once: at most this many, or as many as it holds (the
# strong rule at a large step between strengths keeps most features; the KKT check then adds
# any it left out, so the set stays near the active one and its Gram small)
JOINING = 512
# The covariance columns a rank may keep: folds of rows x features x MAX_WORKING x 8 bytes
MAX_CACHE_BYTES = 1 << 30


class Full(Exception):
    """A working set would pass MAX_WORKING: the path ends before this strength."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


def joining(working: np.ndarray) -> int:
    return max(JOINING, len(working))


def strongest(candidates: np.ndarray, gradient: np.ndarray, penalty, count: int) -> np.ndarray:
    """The count candidates whose |gradient| is furthest above their L1 threshold."""
    if len(candidates) <= count:
        return candidates
    ratio = np.abs(gradient[candidates]) / np.maximum(penalty.l1[candidates], 1e-300)
    return np.sort(candidates[np.argsort(-ratio, kind="stable")[:count]])


class Covariance:
    """Each fold of rows' sums over every rank's rows: Σ w, Σ w z, Σ w z², and for every
    feature Σ w x, Σ w x z and Σ w x x_k for the features k held (z: y less the offset)."""

    def __init__(self, job, shard, folds, F: int):
        self.job, self.shard, self.folds, self.F = job, shard, folds, F
        self.G = folds.count if folds is not None else 1
        self.slot = np.full(F, -1)
        self.cross = np.zeros((self.G, F, 0))
        sums = self._pass(np.zeros(0, np.intp), 3 + 2 * F)
        self.n, self.sz, self.szz = sums[:, 0], sums[:, 1], sums[:, 2]
        self.sx, self.sxz = sums[:, 3 : 3 + F], sums[:, 3 + F :]

    @classmethod
    def of(cls, job, shard, folds, F: int) -> Covariance | None:
        """The cache of a least-squares path, or None where a set joining at once would pass
        its bytes."""
        G = folds.count if folds is not None else 1
        if G * F * JOINING * 8 > MAX_CACHE_BYTES:
            return None
        return cls(job, shard, folds, F)

    def ensure(self, columns: np.ndarray) -> int | None:
        """Sum the columns that the cache lacks (one pass, one allreduce); the passes taken,
        or None where they would pass its bytes (every rank has the same columns: every rank
        decides the same)."""
        new = columns[self.slot[columns] < 0]
        if not len(new):
            return 0
        if self.G * self.F * (self.cross.shape[2] + len(new)) * 8 > MAX_CACHE_BYTES:
            return None
        sums = self._pass(new, 0).reshape(self.G, self.F, len(new))
        self.slot[new] = self.cross.shape[2] + np.arange(len(new))
        self.cross = np.concatenate([self.cross, sums], axis=2)
        return 1

    def _pass(self, new: np.ndarray, first: int) -> np.ndarray:
        """Each fold of rows' Σ w x x_k for k in new and, first > 0, its `first` figures."""
        F, G, k = self.F, self.G, len(new)
        sums = np.zeros((G, first + F * k))
        for X, y, offset, weight, fold in path_passes.blocks(self.shard, self.folds, BLOCK_ROWS):
            z = y if offset is None else y - offset
            chosen = as_split(X).select(new) if k else None
            for g in range(G):
                mine = slice(None) if fold is None else fold == g
                Xg = X if fold is None else X.rows(mine)
                w, zg = weight[mine], z[mine]
                out = sums[g]
                if first:
                    out[:3] += [w.sum(), w @ zg, w @ (zg * zg)]
                    both = Xg.transpose_matvec(np.column_stack([w, w * zg]))
                    out[3:first] += both.ravel(order="F")
                if k:
                    part = chosen if fold is None else chosen.rows(mine)
                    out[first:] += _cross(Xg, part, w).ravel()
        return self.job.allreduce_sum(sums.ravel(), "wide_path_covariance").reshape(G, -1)

    def moments(self, fold: int | None, W: np.ndarray):
        """A model's centred moments on its training folds (all but fold): Σ w (x - x̄)(x_k -
        x̄_k) for every feature x and k in W (F x |W|), Σ w (x - x̄)(z - z̄), Σ w (z - z̄)², x̄,
        z̄, and Σ w."""
        parts = [g for g in range(self.G) if g != fold]
        n, sz, szz = self.n[parts].sum(), self.sz[parts].sum(), self.szz[parts].sum()
        sx, sxz = self.sx[parts].sum(axis=0), self.sxz[parts].sum(axis=0)
        x_mean, z_mean, slots = sx / n, sz / n, self.slot[W]
        S = self.cross[parts[0]][:, slots]
        for g in parts[1:]:
            S += self.cross[g][:, slots]
        S -= np.multiply.outer(sx, x_mean[W])  # Σ w x x_k - (Σ w x) x̄_k
        return S, sxz - sx * z_mean, szz - sz * z_mean, x_mean, z_mean, n

    def held_out(self, fold: int, W: np.ndarray, beta: np.ndarray, b: float) -> tuple:
        """Σ w (z - x·β - b)² over the rows of fold, and their Σ w (β: W's coefficients)."""
        n, sz, szz = self.n[fold], self.sz[fold], self.szz[fold]
        sx, sxz = self.sx[fold][W], self.sxz[fold][W]
        raw = self.cross[fold][W][:, self.slot[W]]
        fitted = beta @ raw @ beta - 2 * beta @ sxz + szz  # Σ w (z - xβ)²
        return fitted - 2 * b * (sz - beta @ sx) + b * b * n, n


def _cross(X, chosen, w: np.ndarray) -> np.ndarray:
    """Xᵀ diag(w) X_k (every feature's row, the chosen columns'), part by part of both."""
    X = as_split(X)
    out = np.zeros((X.shape[1], chosen.shape[1]))
    for part, at in zip(X.parts, X.columns):
        for other, places in zip(chosen.parts, chosen.columns):
            block = part.cross(other, w)
            out[np.ix_(at, places)] = block.toarray() if sparse.issparse(block) else block
    return out
