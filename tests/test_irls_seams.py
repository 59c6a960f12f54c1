"""IRLS's seams: it takes a Penalty (a per-coefficient ridge; --l2's is the same P2 for every
coefficient and no L1) and solves each step by the inner solver it is handed. A ridge that
differs by coefficient reaches the optimum whose gradient, computed here from the rows in
float64 NumPy, is 0; --l2's ridge as a Penalty is fit()'s --l2 fit; a step solver handed in
solves every step; an L1 penalty without a solver for it is refused."""

from __future__ import annotations

import numpy as np
import pytest

import hvd_linreg
from hvd_linreg.config import Config
from hvd_linreg.data.memory import memory_shard
from hvd_linreg.families import get
from hvd_linreg.runtime import ranks
from hvd_linreg.solvers import irls
from hvd_linreg.solvers.penalty import Penalty


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(600, 3))
    w = rng.uniform(0.5, 2.0, 600)
    y = rng.poisson(np.exp(0.3 + X @ [0.4, -0.3, 0.2])).astype(np.float64)
    return X, y, w


def _fit(counts, penalty, **kw):
    X, y, w = counts
    job = ranks.init(horovod=False)
    shard = memory_shard(Config(model="poisson", solver="exact"), job, X, y, weights=w)
    return irls.optimum(job, shard, get("poisson"), penalty, **kw)


def test_a_ridge_by_coefficient_is_the_optimum_of_its_objective(counts):
    """(1 / n) Σ wᵢ (μᵢ - yᵢ log μᵢ) + ½ Σ P2ⱼ βⱼ²: its gradient at the fit is 0."""
    X, y, w = counts
    penalty = Penalty(np.zeros(3), np.array([0.0, 0.05, 0.4]))
    fit = _fit(counts, penalty, limits=irls.Limits(tol=1e-13))
    assert fit.params.shape == (4, 1)  # the coefficients' matrix, one column
    beta, b = fit.params[:-1, 0], fit.params[-1, 0]
    residual = w * (np.exp(X @ beta + b) - y) / len(y)
    gradient = np.r_[X.T @ residual + penalty.l2 * beta, residual.sum()]
    assert np.abs(gradient).max() < 1e-12
    assert fit.converged and fit.penalty is penalty
    free = _fit(counts, Penalty.ridge(0.0, 3)).params
    # P2 shrinks by its own
    assert abs(fit.params[0, 0] - free[0, 0]) < abs(fit.params[2, 0] - free[2, 0])


def test_l2_as_a_penalty_is_fits_l2(counts):
    X, y, w = counts
    ours = _fit(counts, Penalty.ridge(0.01, 3)).params[:, 0]
    result = hvd_linreg.fit(X, y, model="poisson", solver="exact", l2=0.01, weights=w)
    np.testing.assert_allclose(ours, result.params, rtol=1e-12, atol=1e-14)


def test_every_step_is_the_inner_solvers(counts):
    steps = []

    def inner(factor, ridge, centre):
        steps.append(ridge.copy())
        return irls.ridge_step(factor, ridge, centre)

    fit = _fit(counts, Penalty.ridge(0.01, 3), inner=inner)
    assert len(steps) == fit.iterations
    assert all(np.array_equal(r, steps[0]) and r.shape == (3,) for r in steps)


def test_an_l1_penalty_needs_a_solver_for_it(counts):
    with pytest.raises(ValueError, match="an L1 penalty needs an inner solver"):
        _fit(counts, Penalty(np.full(3, 0.1), np.zeros(3)))


def test_least_squares_takes_a_ridge_by_coefficient():
    """The linear family's solver takes the same Penalty: it minimises the mean squared error
    (1 / n) Σ wᵢ rᵢ² + ½ Σ P2ⱼ βⱼ² (--l2's P2 = 2 l2 gives l2 ‖β‖²), whose normal equations,
    solved here in float64 NumPy, give the same coefficients; L1 is refused."""
    from hvd_linreg.solvers import least_squares

    rng = np.random.default_rng(5)
    X, w = rng.normal(size=(300, 3)) * [1.0, 10.0, 0.1], rng.uniform(0.5, 2.0, 300)
    y = 1.0 + X @ [0.5, -0.2, 3.0] + rng.normal(size=300)
    penalty = Penalty(np.zeros(3), np.array([0.0, 0.3, 2.0]))
    job = ranks.init(horovod=False)
    shard = memory_shard(Config(solver="exact"), job, X, y, weights=w)
    fit = least_squares.optimum(job, shard, penalty)
    # d/dβ of (1/n) Σ w r² + ½ Σ P2 β² = 0, with r = y - Xβ - b: the bias unpenalized
    A, n = np.c_[X, np.ones(300)], len(y)
    lhs = 2.0 / n * (A.T * w) @ A + np.diag(np.append(penalty.l2, 0.0))
    expected = np.linalg.solve(lhs, 2.0 / n * (A.T * w) @ y)
    assert fit.params.shape == (4, 1)
    np.testing.assert_allclose(fit.params[:, 0], expected, rtol=1e-10)
    assert fit.objective == pytest.approx(fit.loss + penalty.value(fit.params[:-1]), rel=1e-15)
    with pytest.raises(ValueError, match="no L1 penalty"):
        least_squares.optimum(job, shard, Penalty(np.full(3, 0.1), np.zeros(3)))
