"""Weighted means and centred scatter matrices of sets of rows, merged block by block and then
rank by rank (Chan, Golub and LeVeque's pairwise update): the Gram matrices of a penalized fit,
one per model of a cross-validation, centred without the cancellation of Σ v a aᵀ - s m mᵀ.

Each rank merges its blocks; one allgather brings every rank's moments of every model (and a
few sums beside them) to every rank, which merges them in rank order: every rank then holds the
same bytes, and they differ from one rank count to another only by the rounding of the merges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Σ v, the v-weighted mean of each column of A and Σ v (a - mean)(a - mean)ᵀ."""

    weight: float
    mean: np.ndarray  # (n,)
    scatter: np.ndarray  # (n, n)

    @classmethod
    def empty(cls, n: int) -> Moments:
        return cls(0.0, np.zeros(n), np.zeros((n, n)))

    @classmethod
    def of(cls, A: np.ndarray, v: np.ndarray) -> Moments:
        """The moments of the rows A (rows x n, float64, its own array: it is centred and
        scaled in place) with weights v (>= 0)."""
        s = float(v.sum())
        if not s > 0:
            return cls.empty(A.shape[1])
        mean = (v @ A) / s
        A -= mean
        A *= np.sqrt(v)[:, None]
        return cls(s, mean, A.T @ A)

    @classmethod
    def of_columns(cls, X: np.ndarray, Q: np.ndarray, v: np.ndarray, single=False) -> Moments:
        """The moments of the rows [X, Qᵀ] with weights v, without forming them: X (rows x F)
        near its own mean (so that Σ v x xᵀ - s m mᵀ keeps its digits; shifted() moves the
        mean back) and left as it is, Q (m x rows) centred here. The X columns' Gram is BLAS's
        syrk (single: in float32, half the time, for a Hessian that needs no more digits than
        a quasi-Newton step's), and their cross products with v and Q are one product."""
        s = float(v.sum())
        if not s > 0:
            return cls.empty(X.shape[1] + len(Q))
        q_mean = (Q @ v) / s
        F, m = X.shape[1], len(Q)
        centred = Q - q_mean[:, None]
        weighted = np.empty((1 + m, len(v)))  # [v, v q_c]: one product gives Σ v x, Σ v x q_c
        weighted[0] = v
        np.multiply(centred, v, out=weighted[1:])
        sums = X.T @ weighted.T  # (F, 1 + m)
        x_mean = sums[:, 0] / s
        vq = weighted[1:]
        scatter = np.empty((F + m, F + m))
        root = np.sqrt(v)[:, None]
        P = X.astype(np.float32) * root.astype(np.float32) if single else X * root
        scatter[:F, :F] = P.T @ P  # BLAS's syrk
        scatter[:F, :F] -= s * np.outer(x_mean, x_mean)
        scatter[:F, F:] = sums[:, 1:] - np.outer(x_mean, vq.sum(axis=1))
        scatter[F:, :F] = scatter[:F, F:].T
        scatter[F:, F:] = vq @ centred.T
        return cls(s, np.r_[x_mean, q_mean], scatter)

    def shifted(self, by: np.ndarray) -> Moments:
        """These moments with the first len(by) columns' mean moved by by."""
        mean = self.mean.copy()
        mean[: len(by)] += by
        return Moments(self.weight, mean, self.scatter)

    def diagonal(self) -> np.ndarray:
        """Σ v (a - mean)² of each column: the weighted variances times Σ v."""
        return np.diag(self.scatter)

    def merge(self, other: Moments) -> Moments:
        """The moments of both sets of rows."""
        if other.weight == 0:
            return self
        if self.weight == 0:
            return other
        s = self.weight + other.weight
        d = other.mean - self.mean
        mean = self.mean + d * (other.weight / s)
        scatter = self.scatter + other.scatter + np.outer(d, d) * (self.weight * other.weight / s)
        return Moments(s, mean, scatter)

    def pack(self) -> np.ndarray:
        return np.concatenate([[self.weight], self.mean, self.scatter.ravel()])

    @classmethod
    def unpack(cls, row: np.ndarray, n: int) -> Moments:
        scatter = row[n + 1 : packed_size(n)].reshape(n, n).copy()
        return cls(float(row[0]), row[1 : n + 1].copy(), scatter)


def packed_size(n: int) -> int:
    return 1 + n + n * n


def gather(job, moments: list[Moments], sums: np.ndarray, name: str):
    """Every rank's moments (one list, the same sizes on every rank; they may differ from one
    another) merged in rank order, and the sums (a 2-D array, not necessarily a row per moment)
    added in rank order: one allgather of one row a rank."""
    sizes = [packed_size(len(m.mean)) for m in moments]
    starts = np.cumsum([0, *sizes])
    row = np.concatenate([m.pack() for m in moments] + [sums.ravel()])
    every = job.allgather_rows(row[None, :], name)

    def unpack(rank, i):
        return Moments.unpack(rank[starts[i] :], len(moments[i].mean))

    merged = [unpack(every[0], i) for i in range(len(moments))]
    total = every[0, starts[-1] :].reshape(sums.shape).copy()
    for rank in every[1:]:
        merged = [whole.merge(unpack(rank, i)) for i, whole in enumerate(merged)]
        total += rank[starts[-1] :].reshape(sums.shape)
    return merged, total
