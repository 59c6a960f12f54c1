"""--no_intercept (fit_intercept=False, fit(no_intercept=True)): regression through the origin,
for least squares and the GLMs, equal to statsmodels without a constant (its uncentred R², F,
AIC and errors) at 1 and 2 ranks, and to scikit-learn's estimators with fit_intercept=False.
SGD without an intercept, and the path's refusal of it: test_sgd_no_intercept.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from conftest import params_of, run_metrics


def rows(model: str) -> pd.DataFrame:
    rng = np.random.default_rng(8)
    n = 400
    X = rng.normal(size=(n, 3)) + [1.0, 0.0, 2.0]  # means far from 0: the intercept matters
    table = {"x1": X[:, 0], "x2": X[:, 1], "x3": X[:, 2], "w": rng.uniform(0.5, 2.0, n)}
    eta = X @ [0.3, -0.2, 0.15]
    if model == "linear":
        table["y"] = 3 * eta + rng.normal(size=n)
    elif model == "poisson":
        table["y"] = rng.poisson(np.exp(eta)).astype(float)
    else:
        table["y"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float)
    return pd.DataFrame(table)


FAMILIES = {"poisson": sm.families.Poisson(), "logistic": sm.families.Binomial()}


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
@pytest.mark.parametrize("model", ["linear", "poisson", "logistic"])
def test_no_intercept_is_statsmodels_without_a_constant(tmp_path, model, size):
    table = rows(model)
    args = [*no_intercept_args(tmp_path, table, model), "--solver", "exact"]
    metrics = run_metrics(tmp_path, size, args)
    ref = assert_statsmodels_without_a_constant(metrics["statistics"], table, model)
    np.testing.assert_allclose(params_of(metrics), [*ref.params, 0.0], rtol=1e-8, atol=1e-12)


def no_intercept_args(tmp_path, table: pd.DataFrame, model: str) -> list[str]:
    """The flags of a weighted fit of table (written to tmp_path) without an intercept."""
    path = tmp_path / "d.csv"
    table.to_csv(path, index=False)
    args = ["--data", str(path), "--model", model, "--no_intercept"]
    return [*args, "--features", "x1,x2,x3", "--target", "y", "--weights", "w"]


def assert_statsmodels_without_a_constant(s: dict, table: pd.DataFrame, model: str):
    """The statistics s (a run's metrics') are statsmodels' fit of table without a constant:
    the estimates, errors, likelihood and the uncentred R²; b's row 0 with no error. Returns
    statsmodels' fit."""
    X = table[["x1", "x2", "x3"]]
    if model == "linear":
        ref = sm.WLS(table.y, X, weights=table.w).fit()
        for key, value in [
            ("r2", ref.rsquared),
            ("adjusted_r2", ref.rsquared_adj),
            ("f_value", ref.fvalue),
            ("aic", ref.aic),
            ("bic", ref.bic),
            ("log_likelihood", ref.llf),
        ]:
            assert s[key] == pytest.approx(value, rel=1e-8), key
        centred = 1 - ref.ssr / ref.centered_tss  # what the R² would be, were it centred
        assert abs(s["r2"] - centred) > 0.05
    else:
        ref = sm.GLM(table.y, X, family=FAMILIES[model], var_weights=table.w).fit(tol=1e-13)
        for key, value in [
            ("log_likelihood", ref.llf),
            ("aic", ref.aic),
            ("bic", ref.bic_llf),
            ("deviance", ref.deviance),
            ("null_deviance", ref.null_deviance),
        ]:
            assert s[key] == pytest.approx(value, rel=1e-8), key
    estimates = [c["estimate"] for c in s["coefficients"]]
    np.testing.assert_allclose(estimates, [*ref.params, 0.0], rtol=1e-8, atol=1e-12)
    errors = [c["std_error"] for c in s["coefficients"]]
    np.testing.assert_allclose(errors[:-1], ref.bse, rtol=1e-6)
    assert errors[-1] is None and "no intercept" in s["undefined"]["Intercept"]
    assert s["dof"] == ref.df_resid
    return ref


def test_the_estimators_fit_intercept_false_is_scikit_learns():
    import sklearn.linear_model as sk

    from hvd_linreg import estimators

    for model, name, params in [
        ("linear", "LinearRegression", {}),
        ("linear", "Ridge", {"alpha": 3.0}),
        ("logistic", "LogisticRegression", {"C": 0.5}),
        ("poisson", "PoissonRegressor", {"alpha": 0.01}),
    ]:
        table = rows(model)
        X, y, w = table[["x1", "x2", "x3"]].to_numpy(), table.y.to_numpy(), table.w.to_numpy()
        ours = getattr(estimators, name)(fit_intercept=False, **params).fit(X, y, w)
        tight = {} if name in ("LinearRegression", "Ridge") else {"tol": 1e-12, "max_iter": 10_000}
        theirs = getattr(sk, name)(fit_intercept=False, **params, **tight).fit(X, y, w)
        np.testing.assert_allclose(np.ravel(ours.coef_), np.ravel(theirs.coef_), rtol=1e-7)
        assert np.ravel(ours.intercept_)[0] == 0.0 == np.ravel(theirs.intercept_)[0]
        np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-7, atol=1e-9)
