"""--model inverse_gaussian, a family added as one module and one registration: its exact fit
and statistics equal statsmodels' InverseGaussian (with prior weights) for each link at 1 and
2 ranks, and its SGD, at 1 rank and at 2 ranks of half the batch, is exactly the NumPy
simulation of averaged SGD on its loss."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

from conftest import assert_sgd_is_simulated, params_of, refused, run_metrics

LINKS = {
    "inverse_squared": sm.families.links.InverseSquared,
    "inverse": sm.families.links.InversePower,
    "log": sm.families.links.Log,
    "identity": sm.families.links.Identity,
}
MEANS = {  # each link's mean, positive on every row
    "inverse_squared": lambda X: 1 / np.sqrt(0.5 + 0.05 * X[:, 0] + 0.03 * X[:, 1]),
    "inverse": lambda X: 1 / (0.7 + 0.05 * X[:, 0] + 0.05 * X[:, 1]),
    "log": lambda X: np.exp(0.5 + 0.2 * X[:, 0] - 0.1 * X[:, 1]),
    "identity": lambda X: 2 + 0.2 * X[:, 0] + 0.1 * X[:, 1],
}


def rows(link: str):
    rng = np.random.default_rng(13)
    X = rng.normal(size=(500, 2))
    return X, rng.wald(MEANS[link](X), 4.0), rng.uniform(0.5, 2.0, 500)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
@pytest.mark.parametrize("link", list(LINKS))
def test_inverse_gaussian_is_statsmodels_for_each_link(tmp_path, link, size):
    X, y, w = rows(link)
    np.savetxt(tmp_path / "d.csv", np.c_[X, w, y], delimiter=",", header="x1,x2,w,y", comments="")
    args = ["--data", str(tmp_path / "d.csv"), "--model", "inverse_gaussian", "--link", link]
    metrics = run_metrics(tmp_path, size, [*args, "--weights", "w", "--solver", "exact"])
    family = sm.families.InverseGaussian(LINKS[link]())
    ref = sm.GLM(y, sm.add_constant(X, prepend=False), family=family, var_weights=w)
    ref = ref.fit(tol=1e-13, maxiter=1000)
    s = metrics["statistics"]
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    np.testing.assert_allclose([c["std_error"] for c in s["coefficients"]], ref.bse, rtol=1e-6)
    for key, value in [
        ("log_likelihood", ref.llf),
        ("deviance", ref.deviance),
        ("scale", ref.scale),
        ("aic", ref.aic),
        ("bic", ref.bic_llf),
    ]:
        assert s[key] == pytest.approx(value, rel=1e-8), key


def gradient(theta, X, y, l2=0.0):
    """d/dθ of mean(y / (2μ²) - 1/μ), μ = exp(η): Aᵀ(1/μ - y/μ²) / n, A = [X 1]."""
    mu = np.exp(X @ theta[:-1] + theta[-1])
    slope = 1 / mu - y / mu**2
    return np.append(X.T @ slope, slope.sum()) / len(y)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_sgd_is_exactly_averaged_sgd_on_the_half_deviance(tmp_path, size):
    X, y, _ = rows("log")
    # --seed 0 draws a start near 0, where μ = e^η is near 1: from a far start the loss's
    # y/μ² term sends SGD to inf, which the run stops as diverged
    args = ["--model", "inverse_gaussian", "--link", "log"]
    assert_sgd_is_simulated(tmp_path, size, args, X, y, gradient)


def test_a_target_that_is_not_positive_is_refused(capsys, tmp_path):
    X, y, _ = rows("log")
    y[7] = 0.0
    np.savez(tmp_path / "d.npz", X=X, y=y)
    says = refused(capsys, ["--data", str(tmp_path / "d.npz"), "--model", "inverse_gaussian"])
    assert "d.npz row 7: the target is 0; --model inverse_gaussian needs y > 0" in says


@pytest.mark.parametrize("penalty", [{"alpha": None}, {"alpha": 0.01, "l1_ratio": 0.5}])
def test_glums_estimator_of_the_family_is_glums(penalty):
    """GeneralizedLinearRegressor(family="inverse.gaussian"), log link as glum's "auto", with
    and without the elastic net, equals glum's on the same weighted rows."""
    import glum

    from hvd_linreg import estimators

    X, y, w = rows("log")
    ours = estimators.GeneralizedLinearRegressor(family="inverse.gaussian", **penalty)
    ours.fit(X, y, w)
    theirs = glum.GeneralizedLinearRegressor(
        family="inverse.gaussian", gradient_tol=1e-12, **{**penalty, "alpha": penalty["alpha"] or 0}
    ).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-8)
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-8)
