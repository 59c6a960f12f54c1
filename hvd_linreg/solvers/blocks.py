"""The weighted Gram matrix AᵀWA of a wide design, A = [X 1], by blocks, and its solve with the
largest categorical block eliminated: the exact fit of thousands of columns without a dense
factor of them all.

A categorical block's Gram is diagonal (each level's weighted count), so with the columns split
into E, that block's, and S, every other (the intercept last),

    AᵀWA = [[D, C], [Cᵀ, G]],   D diagonal (E), C (E x S), G (S x S),

and (AᵀWA + R) x = g is solved through the Schur complement Σ = G + R_S - Cᵀ (D + R_E)⁻¹ C, an
S x S Cholesky factorisation: x_S = Σ⁻¹ (g_S - Cᵀ (D + R_E)⁻¹ g_E), then x_E = (g_E - C x_S) /
(D + R_E). A design of 4,000 levels and 140 other columns is a 140 x 140 system. The inverse's
diagonal (the standard errors) follows from the same blocks.

Each rank sums its blocks' D, C, G and the pass's other sums; one allreduce adds the ranks'.
The solvers (irls.py, least_squares.py) iterate on the rows' own gradient, so the rounding of
the normal equations is corrected at each step, as a refinement step would."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse

from hvd_linreg.matrix import CategoricalMatrix, DesignMatrix, SplitMatrix
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers.conjugate import IterativeGram

# Rows a block of a wide design's pass: each block's products make arrays of its columns (the
# cross block C and G, whole), so blocks are long: their cost is in the rows, not per call.
BLOCK_ROWS = 1 << 17
# The cross block C is summed as a dense E x S array: at most this many numbers (256 MB)
MAX_CROSS = 1 << 25
# The Schur complement is factorised densely: at most this many columns beside the eliminated
MAX_KEPT = 8192
# The standard errors need the inverse's diagonal: up to this many coefficients
MAX_ERRORS = 20_000
# The cross block is taken as sparse where at most this share of it is not 0: a categorical
# block against others holds each pair of levels that some row has, few of them
SPARSE_CROSS = 0.25
# A sparse block is added to a dense sum densely where at least this share of it is not 0 (a
# sparse working set's Gram: every pair of its columns that some row holds, half of them)
DENSE_BLOCK = 0.05
# A column whose scaled pivot falls below this is collinear with the columns before it
_SINGULAR = 1e-11


@dataclass(frozen=True)
class Plan:
    """Which of a design's columns (and its intercept, column F) are eliminated (E: one
    categorical part's) and which are kept (S), the same for every block of its rows."""

    width: int  # F + 1 with the intercept
    eliminated: int | None  # the part eliminated (its index among the split's parts)
    E: np.ndarray  # columns of [w..., b]
    S: np.ndarray
    # False: past MAX_KEPT or MAX_CROSS, solved by conjugate gradients (conjugate.py)
    direct: bool = True

    @classmethod
    def of(cls, X: DesignMatrix) -> Plan:
        """The plan of a design like X: its categorical part of the most levels eliminated."""
        F = X.shape[1]
        parts = X.parts if isinstance(X, SplitMatrix) else [X]
        columns = X.columns if isinstance(X, SplitMatrix) else [np.arange(F)]
        levels = [p.shape[1] if isinstance(p, CategoricalMatrix) else -1 for p in parts]
        best = int(np.argmax(levels)) if levels and max(levels) > 0 else None
        E = columns[best] if best is not None else np.zeros(0, np.intp)
        S = np.setdiff1d(np.arange(F + 1), E)  # the intercept, F, last
        direct = len(S) <= MAX_KEPT and len(E) * len(S) <= MAX_CROSS
        return cls(F + 1, best, E, S, direct)


def _parts(X: DesignMatrix, plan: Plan) -> tuple[DesignMatrix | None, list, list]:
    """X's eliminated part, and its other parts with their places among S's columns."""
    parts = X.parts if isinstance(X, SplitMatrix) else [X]
    columns = X.columns if isinstance(X, SplitMatrix) else [np.arange(X.shape[1])]
    where = np.empty(plan.width, np.intp)
    where[plan.S] = np.arange(len(plan.S))
    kept = [(p, where[c]) for i, (p, c) in enumerate(zip(parts, columns)) if i != plan.eliminated]
    eliminated = parts[plan.eliminated] if plan.eliminated is not None else None
    return eliminated, [p for p, _ in kept], [c for _, c in kept]


def _add(target: np.ndarray, rows: np.ndarray, columns: np.ndarray, block) -> None:
    """target[rows x columns] += block, a dense array or a SciPy sparse one (its entries
    alone: a contingency table of levels is mostly 0)."""
    if sparse.issparse(block) and block.nnz < DENSE_BLOCK * math.prod(block.shape):
        coo = block.tocoo()
        np.add.at(target, (rows[coo.row], columns[coo.col]), coo.data)
        return
    block = block.toarray() if sparse.issparse(block) else block
    if _run(rows) and _run(columns):  # a working set's own Gram: a view, no index arrays
        target[rows[0] : rows[-1] + 1, columns[0] : columns[-1] + 1] += block
    else:
        target[np.ix_(rows, columns)] += block


def _run(index: np.ndarray) -> bool:
    """Whether index is consecutive and increasing."""
    return (
        len(index) > 0
        and index[-1] - index[0] == len(index) - 1
        and bool(np.all(np.diff(index) == 1))
    )


def add_block_sums(X: DesignMatrix, d: np.ndarray, plan: Plan, out: np.ndarray) -> None:
    """out (D, C and G of plan's sizes, flattened) += this block's AᵀWA (W = diag(d))."""
    eliminated, kept, at = _parts(X, plan)
    D, C, G = _views(out, plan)
    G[-1, -1] += d.sum()  # the intercept's
    for part, i in zip(kept, at):
        sums = part.transpose_matvec(d)
        G[-1, i] += sums
        G[i, -1] += sums
        for other, j in zip(kept, at):
            if j[0] >= i[0]:
                block = part.cross(other, d)
                _add(G, i, j, block)
                if j[0] > i[0]:
                    _add(G, j, i, block.T)
    if eliminated is not None:
        D += eliminated.diagonal(d)
        C[:, -1] += eliminated.transpose_matvec(d)
        levels = np.arange(len(plan.E))
        for part, i in zip(kept, at):
            _add(C, levels, i, eliminated.cross(part, d))


def _views(values: np.ndarray, plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """D, C and G as views of their flattened sums."""
    E, S = len(plan.E), len(plan.S)
    D = values[:E]
    C = values[E : E + E * S].reshape(E, S)
    G = values[E + E * S : E + E * S + S * S].reshape(S, S)
    return D, C, G


def sums_size(plan: Plan) -> int:
    """The numbers a pass sums: D, C and G; past the direct solver AᵀWA's diagonal and the
    columns' weighted sums."""
    E, S = len(plan.E), len(plan.S)
    return E + E * S + S * S if plan.direct else 2 * plan.width


@dataclass(frozen=True)
class BlockGram:
    """AᵀWA of the whole dataset (every rank's rows) by blocks, and what a fit's statistics
    read of it: the rows, the weights' sum, the columns' weighted means."""

    METHOD = "the normal equations by blocks"  # how it solves, in the summary's words

    plan: Plan
    D: np.ndarray  # (E,)
    C: np.ndarray  # (E, S)
    G: np.ndarray  # (S, S)
    count: int
    weight: float
    x_mean: np.ndarray  # (F,) the columns' weighted means
    centred: bool = True  # False: no intercept (b held at 0)
    # AᵀW z, the right-hand side of the pass's working target z (IRLS's working residual)
    target: np.ndarray | None = None
    # least squares' target: Σ w (z - z̄)² (Σ w z² without an intercept), and Σ log w
    y_ss: float = math.nan
    log_weight: float = 0.0
    implicit_constant = False  # a full coding of levels without an intercept is not sought

    @property
    def centred_y_ss(self) -> float:
        return self.y_ss

    def condition_number(self) -> tuple[float | None, str]:
        """Not computed: its eigenvalues would need the whole matrix."""
        return None, f"a design of {self.plan.width - 1} columns, solved by blocks: not computed"

    def why_no_errors(self) -> str:
        """Why inverse_diagonal is None."""
        return (
            f"{self.plan.width} coefficients, more than the {MAX_ERRORS} whose covariance is "
            "formed (the coefficients are exact; their errors are not computed)"
        )

    def step(self, ridge: np.ndarray, centre: np.ndarray | None = None):
        """x minimising ‖√W (A x - z)‖² + Σⱼ ridgeⱼ (wⱼ - centreⱼ)² (the intercept free),
        and the columns that make the system singular (x then 0)."""
        factored = self.factor(ridge)
        if factored.dependent:
            return np.zeros(self.plan.width), factored.dependent
        rhs = self.target.copy()
        if centre is not None:
            rhs[:-1] += ridge * centre
        return factored.solve(rhs), ()

    def inverse_diagonal(self) -> np.ndarray | None:
        """diag((AᵀWA)⁻¹) over [w..., b], or None past MAX_ERRORS coefficients (or singular)."""
        return self.factor(np.zeros(self.plan.width)).inverse_diagonal()

    def diagonal(self) -> np.ndarray:
        """AᵀWA's diagonal over [w..., b]."""
        out = np.empty(self.plan.width)
        out[self.plan.E] = self.D
        out[self.plan.S] = np.diag(self.G)
        return out

    def information(self) -> np.ndarray:
        """AᵀWA as one dense matrix, [w..., b] (XᵀWX without an intercept): for a design of a
        few thousand columns (the separation check, the robust covariance)."""
        plan = self.plan
        out = np.zeros((plan.width, plan.width))
        out[plan.E, plan.E] = self.D
        out[np.ix_(plan.E, plan.S)] = self.C
        out[np.ix_(plan.S, plan.E)] = self.C.T
        out[np.ix_(plan.S, plan.S)] = self.G
        return out if self.centred else out[:-1, :-1]

    def factor(self, ridge: np.ndarray) -> _Factored:
        """The Schur complement's Cholesky factor with a ridge per coefficient of [w..., b]
        (the intercept's 0); UsageError naming the collinear columns where it is singular."""
        plan = self.plan
        ridge = np.append(ridge, 0.0) if len(ridge) < plan.width else ridge
        if not self.centred:  # b held at 0: its row and column as the identity's
            ridge = ridge.copy()
            ridge[-1] = 1.0
        d = self.D + ridge[plan.E]
        empty = ~(d > 0)  # a level no row of weight > 0 holds: its coefficient is 0
        d = np.where(empty, 1.0, d)
        C = np.where(empty[:, None], 0.0, self.C) if empty.any() or not self.centred else self.C
        if not self.centred:
            C[:, -1] = 0.0
        G = self.G + np.diag(ridge[plan.S])
        if not self.centred:
            G[-1, :-1] = G[:-1, -1] = 0.0
        if np.count_nonzero(C) <= SPARSE_CROSS * C.size:  # levels against levels: mostly 0
            C = sparse.csr_matrix(C)
            M = sparse.diags(1.0 / d) @ C
            schur = G - (C.T @ M).toarray()
        else:
            M = C / d[:, None]
            schur = G - C.T @ M
        scale = np.sqrt(np.clip(np.diag(schur), 0.0, None))
        scale[scale == 0] = 1.0
        scaled = schur / np.outer(scale, scale)
        try:
            cholesky = linalg.cho_factor(scaled, lower=False, check_finite=False)
        except linalg.LinAlgError:
            cholesky = None
        if cholesky is None or np.min(np.abs(np.diag(cholesky[0]))) ** 2 < _SINGULAR:
            return _Factored(self, d, M, scale, None, empty, _collinear(scaled, plan))
        return _Factored(self, d, M, scale, cholesky, empty, ())


def _collinear(scaled: np.ndarray, plan: Plan) -> tuple[int, ...]:
    """The kept columns that take part in a dependence of the scaled Schur complement (a
    null vector's entries above 1e-3), as columns of [w..., b]."""
    values, vectors = np.linalg.eigh(scaled)
    null = vectors[:, values < _SINGULAR * max(values[-1], 1.0)]
    involved = np.any(np.abs(null) > 1e-3, axis=1)
    return tuple(int(j) for j in plan.S[involved])


@dataclass(frozen=True)
class _Factored:
    gram: BlockGram
    d: np.ndarray  # D + the ridge, 1 for empty levels
    M: np.ndarray  # C / d
    scale: np.ndarray  # the Schur complement's columns' scales
    cholesky: tuple | None  # of the scaled Schur complement; None: singular
    empty: np.ndarray  # levels with no weight: coefficient 0
    dependent: tuple[int, ...]  # columns of [w..., b] collinear with others

    def solve(self, g: np.ndarray) -> np.ndarray:
        """x of (AᵀWA + R) x = g, g and x over [w..., b]."""
        plan = self.gram.plan
        g_E = np.where(self.empty, 0.0, g[plan.E])
        rhs = g[plan.S] - self.M.T @ g_E
        x_S = linalg.cho_solve(self.cholesky, rhs / self.scale, check_finite=False) / self.scale
        x = np.zeros(plan.width)
        x[plan.S] = x_S
        x[plan.E] = np.where(self.empty, 0.0, g_E / self.d - self.M @ x_S)
        if not self.gram.centred:
            x[-1] = 0.0
        return x

    def inverse_diagonal(self) -> np.ndarray | None:
        """diag((AᵀWA + R)⁻¹) over [w..., b], or None past MAX_ERRORS coefficients."""
        plan = self.gram.plan
        if plan.width > MAX_ERRORS or self.cholesky is None:
            return None
        inverse = linalg.cho_solve(self.cholesky, np.eye(len(plan.S)), check_finite=False)
        inverse /= np.outer(self.scale, self.scale)
        out = np.empty(plan.width)
        out[plan.S] = np.diag(inverse)
        MS = self.M @ inverse
        spread = (  # diag(M Σ⁻¹ Mᵀ)
            np.asarray(self.M.multiply(MS).sum(axis=1)).ravel()
            if sparse.issparse(self.M)
            else np.einsum("ij,ij->i", MS, self.M)
        )
        out[plan.E] = np.where(self.empty, math.nan, 1.0 / self.d + spread)
        return out


# A wide design's AᵀWA: by blocks, or by its products past the direct solver
WideGram = BlockGram | IterativeGram
WIDE_GRAMS = (BlockGram, IterativeGram)


def summed_gram(
    job: Job,
    blocks: Callable[[], Iterable[tuple[DesignMatrix, np.ndarray, np.ndarray]]],
    plan: Plan,
    extra: int,
    name: str,
    centred: bool = True,
) -> tuple[BlockGram, np.ndarray]:
    """The whole dataset's AᵀWA by blocks and the ranks' sums of extra figures: blocks() yields
    this rank's (X, W, extra figures) once each; one allreduce. The columns' weighted means
    come from the intercept's row of G over Σ W."""
    size = sums_size(plan)
    total = np.zeros(size + 1 + extra)
    kept = []  # past the direct solver: this rank's rows and weights, for the products
    for X, d, more in blocks():
        if plan.direct:
            add_block_sums(X, d, plan, total)
        else:
            kept.append((X, d))
            total[: plan.width] += np.append(X.diagonal(d), d.sum())
            total[plan.width : size] += np.append(X.transpose_matvec(d), d.sum())
        total[size] += len(d)
        total[size + 1 :] += more
    total = job.allreduce_sum(total, name)  # Horovod (or MPI): every rank's sums
    if not plan.direct:
        weight, count = float(total[plan.width - 1]), int(total[size])
        sums = total[plan.width : size - 1]
        x_mean = sums / weight if weight > 0 else np.zeros(plan.width - 1)
        gram = IterativeGram(job, kept, total[: plan.width], count, weight, x_mean, centred)
        return gram, total[size + 1 :]
    D, C, G = _views(total, plan)
    weight = float(G[-1, -1])
    column_sums = np.zeros(plan.width)
    column_sums[plan.S] = G[-1]
    column_sums[plan.E] = C[:, -1]
    x_mean = column_sums[:-1] / weight if weight > 0 else np.zeros(plan.width - 1)
    gram = BlockGram(plan, D, C, G, int(total[size]), weight, x_mean, centred)
    return gram, total[size + 1 :]


def names_of(columns: Sequence[int], names: Sequence[str] | None, F: int, shown: int = 10) -> str:
    """Columns of [w..., b] by name (w[j] without names, b for the intercept): the first
    `shown` of them, and how many more."""
    named = ", ".join("b" if j == F else names[j] if names else f"w[{j}]" for j in columns[:shown])
    more = len(columns) - shown
    return f"{named} and {more} more" if more > 0 else named
