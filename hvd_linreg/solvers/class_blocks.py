"""The multinomial's information matrix of a wide design by blocks, and Newton's step through it
with the largest categorical block eliminated: blocks.py's method for K - 1 linear predictors.

Class j's and class m's block of the information is Aᵀ diag(c_jm) A, c_jm = w p_j (δ_jm - p_m),
for A = [X 1]; with the columns split into E (the categorical part of the most levels) and S
(every other, the intercept last), blocks.py sums each pair's D (diagonal), C (E x S) and G
(S x S). Ordered by level, the E x E part is block diagonal: level l's (K - 1) x (K - 1) matrix
[D_jm[l]]. So the step solves the (K - 1) |S| Schur complement

    Σ = H_SS - H_SE H_EE⁻¹ H_ES,

one Cholesky factorisation, and each level's K - 1 coefficients from its small block: a
design of 4,000 levels, 140 other columns and 3 classes is a 282 x 282 system. The ridge
(scikit-learn's symmetric form, solvers/multinomial.py) adds ridge M, M = I - 11ᵀ/K, to each
level's block and to each feature's classes in S."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg, sparse

from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.resources import bytes_text, memory_per_rank
from hvd_linreg.solvers.blocks import (
    MAX_ERRORS,
    MAX_KEPT,
    SPARSE_CROSS,
    Plan,
    _views,
    add_block_sums,
    sums_size,
)

_SINGULAR = 1e-11  # blocks.py's: a scaled pivot below this is a dependence
# What a rank holds for each number of a pass's cross blocks, in bytes: the pass's sums, every
# class pair's blocks laid out by level for the factor, their sparse form and the step's
# products (InstEval as five classes: 34 M numbers, a peak of 1.5 GB at 1 rank)
CROSS_BYTES = 40
# The most numbers a pass's allreduce carries (an MPI count is a C int; 2 GiB of float64)
MAX_SUMS = 1 << 28


def pairs_of(K1: int) -> list[tuple[int, int]]:
    """The class pairs (j, m), m >= j, whose blocks a pass sums."""
    return [(j, m) for j in range(K1) for m in range(j, K1)]


def plan_for(X, K1: int) -> Plan:
    """blocks.py's plan of a design like X, by blocks; UsageError where its system would be
    too large to factor or its pass's sums too large to allreduce (the multinomial has no
    conjugate-gradient route yet). The same on every rank: every rank has the same columns."""
    plan = Plan.of(X)
    what, S = _described(plan, K1), len(plan.S)
    if K1 * S > MAX_KEPT:
        raise UsageError(
            f"{what} is a system of {K1 * S} unknowns per step, more than the {MAX_KEPT} this "
            "solver factors: fit fewer columns or classes"
        )
    if _cross_numbers(plan, K1) > MAX_SUMS:
        raise UsageError(
            f"{what} {_crosses(plan, K1)}, more than the {MAX_SUMS:,} numbers a pass's "
            "allreduce carries: fit fewer columns or classes"
        )
    return replace(plan, direct=True)  # by blocks, whatever one family's pass would hold


def check_memory(X, K1: int) -> None:
    """UsageError where a pass's cross blocks, with the factor's arrays, need more memory
    than this rank may use (resources.memory_per_rank): asked once, before the fit, and
    agreed by the ranks (a host's memory is its own)."""
    plan = plan_for(X, K1)
    need, have = CROSS_BYTES * _cross_numbers(plan, K1), memory_per_rank()
    if need > have:
        raise UsageError(
            f"{_described(plan, K1)} {_crosses(plan, K1)}: with the factor's arrays about "
            f"{bytes_text(need)} a rank, more than the {bytes_text(have)} a rank may use "
            "here; fit fewer columns or classes, or run fewer ranks on each host"
        )


def _described(plan: Plan, K1: int) -> str:
    return (
        f"a multinomial model of {K1 + 1} classes on {plan.width - 1} columns, "
        f"{len(plan.S) - 1} of them beside the largest categorical column,"
    )


def _cross_numbers(plan: Plan, K1: int) -> int:
    return len(pairs_of(K1)) * len(plan.E) * len(plan.S)


def _crosses(plan: Plan, K1: int) -> str:
    blocks = f"{len(plan.E)} x {len(plan.S)}"
    return f"sums {len(pairs_of(K1))} cross blocks of {blocks} numbers per pass"


def add_pair_sums(X, C: np.ndarray, plan: Plan, out: np.ndarray) -> None:
    """out (a pair's D, C and G after another) += this block's sums for the weights C
    (K - 1 x K - 1 x rows: c_jm for each row)."""
    size = sums_size(plan)
    for i, (j, m) in enumerate(pairs_of(C.shape[0])):
        add_block_sums(X, C[j, m], plan, out[i * size : (i + 1) * size])


@dataclass(frozen=True)
class ClassGram:
    """The information matrix of every rank's rows by blocks: each class pair's D, C and G."""

    plan: Plan
    K1: int  # K - 1: the classes but the reference
    sums: np.ndarray  # the pairs' D, C and G, one after another (add_pair_sums)
    ridge: float = 0.0

    def with_ridge(self, ridge: float) -> ClassGram:
        return replace(self, ridge=ridge)

    def _blocks(self):
        """H_EE as a block per level (E, K1, K1), H_ES (E K1 x K1 S: row l K1 + j, column
        m S + s) and H_SS (K1 S square), ridge included; and the levels without weight."""
        plan, K1 = self.plan, self.K1
        E, S, size = len(plan.E), len(plan.S), sums_size(plan)
        levels = np.zeros((E, K1, K1))
        cross = np.zeros((E, K1, K1, S))
        kept = np.zeros((K1, S, K1, S))
        for i, (j, m) in enumerate(pairs_of(K1)):
            D, C, G = _views(self.sums[i * size : (i + 1) * size], plan)
            levels[:, j, m] = levels[:, m, j] = D
            cross[:, j, m] = cross[:, m, j] = C
            kept[j, :, m] = G
            kept[m, :, j] = G.T
        empty = ~(np.einsum("ljj->l", levels) > 0)  # a level no row of weight holds
        M = self.ridge * (np.eye(K1) - 1.0 / (K1 + 1))
        levels += M
        features = np.arange(S - 1)  # the intercept, S's last, has no ridge
        kept[:, features, :, features] += M
        levels[empty] = np.eye(K1)
        cross[empty] = 0.0
        return levels, cross.reshape(E * K1, K1 * S), kept.reshape(K1 * S, K1 * S), empty

    def factor(self) -> _ClassFactor:
        """The Schur complement's Cholesky factor; UsageError where it is singular."""
        levels, cross, kept, empty = self._blocks()
        E, K1 = levels.shape[:2]
        try:
            inverse = np.linalg.inv(levels)
        except np.linalg.LinAlgError:
            raise UsageError(_SINGULAR_MESSAGE) from None
        if np.count_nonzero(cross) <= SPARSE_CROSS * cross.size:  # levels against levels
            cross = sparse.csr_matrix(cross)
            blocks = sparse.bsr_matrix((inverse, np.arange(E), np.arange(E + 1)), (E * K1, E * K1))
            M = sparse.csr_matrix(blocks @ cross)
            schur = kept - (cross.T @ M).toarray()
        else:
            M = (inverse @ cross.reshape(E, K1, -1)).reshape(E * K1, -1)
            schur = kept - cross.T @ M
        scale = np.sqrt(np.clip(np.diag(schur), 0.0, None))
        scale[scale == 0] = 1.0
        try:
            cholesky = linalg.cho_factor(schur / np.outer(scale, scale), check_finite=False)
        except linalg.LinAlgError:
            raise UsageError(_SINGULAR_MESSAGE) from None
        if np.min(np.abs(np.diag(cholesky[0]))) ** 2 < _SINGULAR:
            raise UsageError(_SINGULAR_MESSAGE)
        return _ClassFactor(self.plan, K1, inverse, M, scale, cholesky, empty)

    def solve(self, g: np.ndarray) -> np.ndarray:
        """x of H x = g, both B's shape ((F + 1) x (K - 1))."""
        return self.factor().solve(g)

    def inverse_diagonal(self) -> np.ndarray | None:
        """diag(H⁻¹) as B's shape, or None past MAX_ERRORS coefficients."""
        if self.plan.width * self.K1 > MAX_ERRORS:
            return None
        return self.factor().inverse_diagonal()

    def why_no_errors(self) -> str:
        return (
            f"{self.plan.width * self.K1} coefficients, more than the {MAX_ERRORS} whose "
            "covariance is formed (the coefficients are exact; their errors are not computed)"
        )


_SINGULAR_MESSAGE = (
    "the information matrix of the multinomial model is singular: features are collinear "
    "or constant, or a class is separated from the others; drop the redundant features"
)


@dataclass(frozen=True)
class _ClassFactor:
    plan: Plan
    K1: int
    inverse: np.ndarray  # each level's block's inverse (E, K1, K1)
    M: np.ndarray | sparse.csr_matrix  # H_EE⁻¹ H_ES
    scale: np.ndarray  # the Schur complement's columns' scales
    cholesky: tuple  # of the scaled Schur complement
    empty: np.ndarray  # levels with no weight: their coefficients stay

    def solve(self, g: np.ndarray) -> np.ndarray:
        plan, K1 = self.plan, self.K1
        g_E = np.where(self.empty[:, None], 0.0, g[plan.E])  # (E, K1): row l K1 + j
        g_S = g[plan.S].T.ravel()  # class-major: m S + s
        rhs = g_S - self.M.T @ g_E.ravel()
        x_S = linalg.cho_solve(self.cholesky, rhs / self.scale, check_finite=False) / self.scale
        x_E = np.einsum("ljm,lm->lj", self.inverse, g_E).ravel() - self.M @ x_S
        x = np.zeros_like(g, dtype=np.float64)
        x[plan.S] = x_S.reshape(K1, -1).T
        x[plan.E] = np.where(self.empty[:, None], 0.0, x_E.reshape(-1, K1))
        return x

    def inverse_diagonal(self) -> np.ndarray:
        plan, K1 = self.plan, self.K1
        n = len(self.scale)
        inverse = linalg.cho_solve(self.cholesky, np.eye(n), check_finite=False)
        inverse /= np.outer(self.scale, self.scale)
        out = np.empty((plan.width, K1))
        out[plan.S] = np.diag(inverse).reshape(K1, -1).T
        MS = self.M @ inverse
        spread = (
            np.asarray(self.M.multiply(MS).sum(axis=1)).ravel()
            if sparse.issparse(self.M)
            else np.einsum("ij,ij->i", MS, self.M)
        )
        own = np.einsum("ljj->lj", self.inverse).ravel()
        out[plan.E] = np.where(self.empty[:, None], math.nan, (own + spread).reshape(-1, K1))
        return out
