"""A fit starts where it is told (a warm start): fit()'s start= for IRLS and for the multinomial
model's Newton's method, and the estimators' warm_start=True, which starts from the previous
fit's coef_ and intercept_ as scikit-learn's do. Each reaches the optimum a cold fit reaches, in
fewer iterations from a nearby start; a start of the wrong shape is refused."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

import hvd_linreg
from hvd_linreg import estimators
from hvd_linreg.errors import UsageError


def _counts(seed=2, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, rng.poisson(np.exp(0.2 + X @ [0.3, -0.2, 0.1])).astype(np.float64)


def _classes(seed=4, n=450):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    logits = np.c_[np.zeros(n), X @ [[0.8, -0.5], [0.3, 0.9]] + [0.2, -0.1]]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return X, np.array(["a", "b", "c"])[(rng.uniform(size=(n, 1)) > p.cumsum(axis=1)).sum(1)]


def test_a_multinomial_fit_starts_where_it_is_told():
    X, y = _classes()
    cold = hvd_linreg.fit(X, y, model="multinomial", solver="exact", quiet=True)
    B = cold.params
    again = hvd_linreg.fit(X, y, model="multinomial", solver="exact", quiet=True, start=B)
    assert again.statistics.iterations <= 2 < cold.statistics.iterations
    np.testing.assert_allclose(again.params, B, rtol=0, atol=1e-12)
    far = np.full_like(B, 0.3)
    elsewhere = hvd_linreg.fit(X, y, model="multinomial", solver="exact", quiet=True, start=far)
    np.testing.assert_allclose(elsewhere.params, B, rtol=0, atol=1e-10)
    with pytest.raises(UsageError, match=r"start= must be B, \(F \+ 1\) x \(K - 1\) = 3 x 2"):
        hvd_linreg.fit(X, y, model="multinomial", solver="exact", start=B[:, :1])


@pytest.mark.parametrize("alpha", [1.0, 0.01])
def test_a_warm_glm_regressor_reaches_the_cold_ones_optimum(alpha):
    X, y = _counts()
    warm = estimators.PoissonRegressor(alpha=1.0, warm_start=True, tol=1e-12).fit(X, y)
    first = warm.n_iter_
    warm.set_params(alpha=alpha).fit(X, y)
    cold = estimators.PoissonRegressor(alpha=alpha, tol=1e-12).fit(X, y)
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=1e-10)
    assert warm.intercept_ == pytest.approx(cold.intercept_, rel=1e-10)
    if alpha == 1.0:  # from its own optimum: one step, against the cold fit's several
        assert warm.n_iter_ <= 2 < first


def test_a_warm_logistic_regression_of_two_and_of_three_classes():
    X, y = _classes()
    for labels in (y, np.where(y == "a", "a", "z")):
        model = estimators.LogisticRegression(C=0.5, warm_start=True).fit(X, labels)
        coef, first = model.coef_.copy(), model.n_iter_
        model.fit(X, labels)
        assert model.n_iter_ <= 2 < first
        np.testing.assert_allclose(model.coef_, coef, rtol=1e-9, atol=1e-12)
    # other classes than the previous fit's: a cold start, the same answer as a fresh model
    model.fit(X, y)
    fresh = estimators.LogisticRegression(C=0.5).fit(X, y)
    np.testing.assert_allclose(model.coef_, fresh.coef_, rtol=1e-9, atol=1e-12)


def test_a_warm_start_of_another_width_is_refused():
    X, y = _counts()
    model = estimators.GammaRegressor(warm_start=True).fit(X, y + 1.0)
    with pytest.raises(ValueError, match="the previous fit, of 3 features, but X has 2"):
        model.fit(X[:, :2], y + 1.0)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    "estimator",
    [estimators.PoissonRegressor(warm_start=True), estimators.LogisticRegression(warm_start=True)],
    ids=repr,
)
def test_warm_estimators_pass_scikit_learns_checks(estimator):
    results = check_estimator(estimator, on_fail=None)
    failed = [f"{r['check_name']}: {r['exception']}" for r in results if r["status"] != "passed"]
    assert not failed, "\n".join(failed)
    assert "check_fit_idempotent" in {r["check_name"] for r in results}
