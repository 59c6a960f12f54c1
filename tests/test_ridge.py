"""--l2: ridge in both solvers. The exact one is scikit-learn's Ridge with alpha = N x l2; SGD
follows the float64 reference with the penalty's gradient, to the ridge optimum."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from conftest import params_of, run_metrics
from hvd_linreg.config import Config
from hvd_linreg.errors import UsageError
from reference import averaged_sgd, mse, ridge

L2 = 0.3


@pytest.fixture(scope="module")
def float64_file(tmp_path_factory):
    """Features with an offset and a scale, so that an intercept penalised by mistake, or a
    wrong alpha, moves the answer far beyond the tolerance."""
    rng = np.random.default_rng(15)
    X = rng.standard_normal((1000, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, -0.5]
    y = X @ [0.5, -1.0, 2.0] + 4.0 + 0.1 * rng.standard_normal(1000)
    path = tmp_path_factory.mktemp("ridge") / "d.npz"
    np.savez(path, X=X, y=y)
    return str(path), X, y


def objective(theta, X, y) -> float:
    return mse(theta, X, y) + L2 * float(theta[:-1] @ theta[:-1])


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_exact_ridge_is_scikit_learns_ridge_with_alpha_n_times_l2(tmp_path, float64_file, size):
    path, X, y = float64_file
    m = run_metrics(tmp_path, size, ["--data", path, "--solver", "exact", "--l2", str(L2)])
    sk = Ridge(alpha=len(y) * L2).fit(X, y)
    np.testing.assert_allclose(params_of(m), np.append(sk.coef_, sk.intercept_), rtol=1e-9)
    s = m["statistics"]
    assert s["r2"] == pytest.approx(sk.score(X, y), rel=1e-9)
    assert s["coefficients"][0]["std_error"] is None and s["dof"] is None
    assert s["undefined"]["p"].startswith("a ridge fit (--l2 > 0)")


@pytest.mark.multiprocess
def test_sgd_with_l2_follows_the_reference_to_the_ridge_optimum(tmp_path, float64_file):
    path, X, y = float64_file
    # Full batches (2 ranks x 500 rows): gradient descent, which reaches the optimum itself.
    flags = ["--num_steps", "300", "--learning_rate", "0.1", "--batch_size", "500"]
    m = run_metrics(tmp_path, 2, ["--data", path, "--l2", str(L2), *flags])
    expected = averaged_sgd(
        X,
        y,
        ranks=2,
        batch_size=500,
        steps=300,
        lr=0.1,
        w0=m["initial_w"],
        b0=m["initial_b"],
        l2=L2,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9)
    optimum = ridge(X, y, L2)
    assert m["exact_loss"] == pytest.approx(mse(optimum, X, y), rel=1e-9)
    gap = objective(params_of(m), X, y) - objective(optimum, X, y)
    assert m["optimality_gap"] == pytest.approx(gap, rel=1e-6, abs=1e-12)
    assert 0 <= gap < 1e-12
    np.testing.assert_allclose(params_of(m), optimum, rtol=1e-6)


@pytest.mark.parametrize("l2", [-0.1, float("nan"), float("inf")])
def test_a_negative_or_non_finite_l2_is_a_usage_error(l2):
    with pytest.raises(UsageError, match="--l2 must be a finite number >= 0"):
        Config(l2=l2)
