"""Coordinate descent on a quadratic: the inner solve of a penalized IRLS step, and the whole
fit of a penalized least squares (glmnet's covariance updates: the Gram matrix is all it reads).

Every rank holds the same H and c after the pass's one collective and runs the same sweeps in
the same order, so the ranks agree to the bit without a broadcast. Coordinate descent is exact
minimisation along each coefficient in turn, so the scale of a feature changes nothing of its
iterates: standardization is a matter of the penalty's factors alone (penalty.py).
"""

from __future__ import annotations

import math

import numpy as np

from hvd_linreg.errors import UsageError
from hvd_linreg.solvers import kernels
from hvd_linreg.solvers.penalty import Penalty

# A sweep's largest H_jj Δ_j², relative to the quadratic's scale, that ends the descent: the
# coefficients then move by about 1e-13 of the working response's spread, three digits below
# what the IRLS step's own test asks (path.py).
TOLERANCE = 1e-13
MAX_SWEEPS = 10_000
# Sweeps over the active coefficients between attempts at their exact solve (_solve_on), for
# active sets of at most NEWTON_MOST: its cost grows as their cube, twenty sweeps' as a square
NEWTON_EVERY = 20
NEWTON_MOST = 1024
_AT_THRESHOLD = 1e-12


def minimise(
    H: np.ndarray,
    c: np.ndarray,
    centre: np.ndarray,
    start: np.ndarray,
    penalty: Penalty,
    candidates: np.ndarray | None = None,
    scale: float = 1.0,
    tolerance: float = TOLERANCE,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The β minimising ½ (β - centre)ᵀ H (β - centre) - cᵀ (β - centre) + penalty(β), from
    start; candidates: the coefficients swept first (strong rules), the others joining when
    their KKT condition fails. scale: the quadratic's own size (the working response's sum of
    squares), which tolerance (--tol; TOLERANCE by default) is relative to. Returns β, the
    smooth part's gradient there, and the sweeps it took. A column with H_jj = 0 (constant)
    keeps β_j = 0; the penalty's bounds hold every coefficient (glmnet's limits)."""
    H = np.ascontiguousarray(H, np.float64)  # its rows read whole by each coordinate's step
    lower, upper = penalty.bounds
    beta = np.clip(np.where(np.diag(H) > 0, start, 0.0), lower, upper).astype(np.float64)
    free = np.flatnonzero((np.diag(H) > 0) & (lower < upper))
    if candidates is None:
        candidates = free
    chosen = np.intersect1d(np.union1d(candidates, np.flatnonzero(beta)), free)
    threshold = tolerance * tolerance * max(scale, np.finfo(np.float64).tiny)
    sweeps = 0
    while True:
        gradient = H @ (beta - centre) - c
        sweeps += _descend(H, gradient, beta, penalty, (lower, upper), chosen, threshold)
        gradient = H @ (beta - centre) - c  # fresh: the updates' rounding gone
        outside = np.setdiff1d(free, chosen)
        bad = np.intersect1d(penalty.violations(beta, gradient, 1e-12), outside)
        if not len(bad):
            # one last sweep on the fresh gradient: nothing should move
            if _descend(H, gradient, beta, penalty, (lower, upper), chosen, threshold, True) == 0:
                return beta, H @ (beta - centre) - c, sweeps
            continue
        chosen = np.union1d(chosen, bad)


def _descend(H, gradient, beta, penalty, limits, chosen, threshold, once=False) -> int:
    """Sweeps over chosen, then over its non-zero coefficients until they settle, then over
    chosen again, until a whole sweep moves nothing by more than threshold (H_jj Δ²):
    glmnet's active-set iteration. gradient and beta are updated in place; returns the sweeps,
    0 where the first one moved nothing."""
    diag, l1, l2 = np.diag(H).copy(), penalty.l1, penalty.l2
    sweeps = 0
    for _ in range(MAX_SWEEPS):
        sweeps += 1
        if _sweep(H, gradient, beta, diag, l1, l2, limits, chosen) <= threshold:
            return sweeps if sweeps > 1 or not once else 0
        if once:
            return sweeps
        active = chosen[beta[chosen] != 0]
        for inner in range(MAX_SWEEPS):
            sweeps += 1
            if _sweep(H, gradient, beta, diag, l1, l2, limits, active) <= threshold:
                break
            if inner % NEWTON_EVERY == NEWTON_EVERY - 1 and len(active) <= NEWTON_MOST:
                _solve_on(H, gradient, beta, penalty, limits, active)
    raise UsageError(
        f"coordinate descent did not settle in {MAX_SWEEPS} sweeps: the features are nearly "
        "collinear at a strength this small; raise --alpha_min_ratio or --l1_ratio's L2 share"
    )


def _solve_on(H, gradient, beta, penalty, limits, active) -> None:
    """Where the sweeps crawl (strongly correlated features, a weak penalty): the exact
    minimiser on the active coefficients with their signs held, (H_AA + diag l2_A) β_A =
    H_AA β_A - g_A - l1_A sign(β_A), taken where it keeps every sign; the sweeps then confirm
    it (or go on from where they were). A coefficient at a bound stays there."""
    lower, upper = limits
    b = beta[active]
    A = active[(b != 0) & (b > lower[active]) & (b < upper[active])]
    if not len(A):
        return
    signs = np.sign(beta[A])
    block = H[np.ix_(A, A)]
    rhs = block @ beta[A] - gradient[A] - penalty.l1[A] * signs
    try:
        new = np.linalg.solve(block + np.diag(penalty.l2[A]), rhs)
    except np.linalg.LinAlgError:
        return
    if not np.isfinite(new).all() or not (np.sign(new) == signs).all():
        return
    if not ((new >= lower[A]) & (new <= upper[A])).all():
        return
    gradient += H[:, A] @ (new - beta[A])
    beta[A] = new


def _sweep(H, gradient, beta, diag, l1, l2, limits, coordinates) -> float:
    """One pass of exact minimisation along each coordinate: the soft-thresholded Newton step
    of the coordinate's quadratic, held to its limits (lower, upper); the largest H_jj Δ² it
    made. Compiled where it can be (kernels.py: the same arithmetic), else this loop."""
    compiled = kernels.sweep()
    lower, upper = limits
    if compiled is not None and H.flags.c_contiguous and H.dtype == np.float64:
        coords = np.ascontiguousarray(coordinates, np.int64)
        arrays = (np.ascontiguousarray(a, np.float64) for a in (diag, l1, l2, lower, upper))
        return compiled(H, H.shape[0], gradient, beta, *arrays, coords, len(coords), _AT_THRESHOLD)
    diag, l1, l2, lower, upper = (
        a.tolist() if isinstance(a, np.ndarray) else a for a in (diag, l1, l2, lower, upper)
    )
    biggest = 0.0
    for j in coordinates.tolist():
        h, old = diag[j], float(beta[j])
        u = h * old - float(gradient[j])
        shrunk = abs(u) - l1[j]
        # A coefficient at its threshold to the last bits of rounding stays 0: at α_max the
        # strongest feature's |u| is l1 itself, and must not enter by a rounding error.
        new = math.copysign(shrunk, u) / (h + l2[j]) if shrunk > _AT_THRESHOLD * l1[j] else 0.0
        if new < lower[j]:
            new = lower[j]
        if new > upper[j]:
            new = upper[j]
        if new != old:
            step = new - old
            gradient += H[j] * step  # H is symmetric: its row j is its column j
            beta[j] = new
            biggest = max(biggest, h * step * step)
    return biggest
