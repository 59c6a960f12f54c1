"""hvd_linreg.estimators: each passes scikit-learn's own estimator checks, equals scikit-learn's
estimator of the same name with the same parameters, and works in a Pipeline with
GridSearchCV. (Under a launcher, each rank passing its own rows: tests/test_library.py.)"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import sklearn.linear_model
from library_job import ESTIMATORS, figures, fit_estimators, rows
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from conftest import estimator_checks_ran
from hvd_linreg import estimators

pytestmark = pytest.mark.filterwarnings("ignore")  # the checks' own warnings, by design

EVERY = [
    estimators.LinearRegression(),
    estimators.Ridge(),
    estimators.LogisticRegression(),
    estimators.PoissonRegressor(),
    estimators.GammaRegressor(),
    estimators.TweedieRegressor(),  # power 0: the normal family, identity link
    estimators.TweedieRegressor(power=1.5),
    estimators.LogisticRegression(l1_ratio=0.5),
    estimators.ElasticNet(),
    estimators.Lasso(),
    estimators.ElasticNetCV(),
    estimators.LassoCV(),
    estimators.GeneralizedLinearRegressor(alpha=0.1, l1_ratio=0.5),
    estimators.GeneralizedLinearRegressorCV(l1_ratio=0.5),
    estimators.LogisticRegressionCV(Cs=4),
    estimators.LogisticRegressionCV(l1_ratios=[0.5], Cs=3, refit=False),
    estimators.ElasticNetCV(alphas=[0.5, 0.05, 0.005]),
]


@pytest.mark.parametrize("estimator", EVERY, ids=repr)
def test_passes_scikit_learns_estimator_checks(estimator):
    ran = estimator_checks_ran(estimator)
    assert {"check_sample_weight_equivalence_on_dense_data", "check_fit_idempotent"} <= ran


def sklearn_fit(name: str, data: dict) -> np.ndarray:
    """scikit-learn's estimator of the same name and parameters, solved to its tightest (the
    GLMs and logistic fits by Newton's method: lbfgs at tol 1e-12 still misses by 5e-9): its
    [coef..., intercept]."""
    _, params = ESTIMATORS[name]
    tight = {"Ridge": {"solver": "cholesky"}, "LinearRegression": {}}.get(
        name, {"tol": 1e-12, "max_iter": 100_000}
    )
    if "solver" in inspect.signature(getattr(sklearn.linear_model, name)).parameters:
        tight = {"solver": "newton-cholesky", **tight}
    fitted = getattr(sklearn.linear_model, name)(**params, **tight)
    fitted.fit(data["X"], data["y"], sample_weight=data.get("weights"))
    return np.array(figures(fitted))


def check_against_sklearn(got: dict) -> None:
    """Each estimator's [coef..., intercept] (fit_estimators') against scikit-learn's on all
    the rows, to 1e-8."""
    assert set(got) == set(ESTIMATORS)
    for name, (model, _) in ESTIMATORS.items():
        reference = sklearn_fit(name, rows(model))
        np.testing.assert_allclose(got[name], reference, rtol=0, atol=1e-8, err_msg=name)
        assert np.abs(reference[:-1]).min() > 1e-3, f"{name}: a weak test, coefficients near 0"


@pytest.mark.core
def test_each_estimator_equals_scikit_learns_of_the_same_name():
    check_against_sklearn(fit_estimators(0, 1))


def test_the_penalty_is_scikit_learns_objective_not_the_tools():
    """Ridge's alpha is a sum-of-squares penalty (the tool's --l2 is alpha / n): on the same
    rows, alpha = 30 and l2 = 30 are different fits, and l2 = 30 / n is the same one."""
    import hvd_linreg

    data = rows("linear")
    n = len(data["y"])
    ridge = estimators.Ridge(alpha=30.0).fit(data["X"], data["y"])
    same = hvd_linreg.fit(data["X"], data["y"], solver="exact", l2=30.0 / n).params
    other = hvd_linreg.fit(data["X"], data["y"], solver="exact", l2=30.0).params
    np.testing.assert_allclose([*ridge.coef_, ridge.intercept_], same, rtol=0, atol=1e-12)
    assert np.abs(other[:-1] - ridge.coef_).max() > 0.1


def test_in_a_pipeline_with_grid_search_as_scikit_learns():
    data = rows("poisson")
    grid = {"poissonregressor__alpha": [1e-3, 0.1, 1.0, 10.0]}

    def search(regressor):
        pipeline = make_pipeline(StandardScaler(), regressor)
        return GridSearchCV(pipeline, grid, cv=3).fit(data["X"], data["y"])

    ours = search(estimators.PoissonRegressor())
    theirs = search(sklearn.linear_model.PoissonRegressor(tol=1e-12, max_iter=100_000))
    assert ours.best_params_ == theirs.best_params_
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"], atol=1e-8
    )
    assert ours.best_estimator_[-1].n_features_in_ == 3


def test_what_the_tool_does_not_fit_is_a_clear_error():
    X, y = rows("linear")["X"], rows("logistic")["y"]
    cases = [
        (estimators.ElasticNet(fit_intercept=False), y, "fit_intercept=False) is not supported"),
        (estimators.TweedieRegressor(power=3), y, "power=3) is not supported"),
        (estimators.LogisticRegression(penalty="l3"), y, "penalty='l3' is not supported"),
        (estimators.LogisticRegression(l1_ratio=1.5), y, "l1_ratio must be between"),
        (
            estimators.LogisticRegression(l1_ratio=1),
            np.arange(len(y)) % 3,
            "Only binary classification is supported with these parameters",
        ),
        (estimators.Ridge(alpha=-1), y, "alpha must be a number >= 0"),
    ]
    for estimator, target, says in cases:
        with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
            estimator.fit(X, target)


def test_summary_is_the_command_lines_table():
    data = rows("logistic")
    fitted = estimators.LogisticRegression(C=np.inf).fit(data["X"], data["y"])
    summary = fitted.summary()
    assert "std error" in summary and "w[2]" in summary
    assert fitted.n_iter_ >= 3
