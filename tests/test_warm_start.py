"""A fit starts where it is told (a warm start): fit()'s start= for IRLS and for the multinomial
model's Newton's method, the command line's --start from an exported model (at 1 and 2 ranks,
under mpirun), and the estimators' warm_start=True, which starts from the previous fit's coef_
and intercept_ as scikit-learn's do. Each reaches the optimum a cold fit reaches, in fewer
iterations from a nearby start; a start of the wrong shape, link, features or classes is
refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hvd_linreg
from conftest import estimator_checks_ran, params_of, refused, run_metrics
from hvd_linreg import estimators
from hvd_linreg.cli import main
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
    assert "check_fit_idempotent" in estimator_checks_ran(estimator)


def _write(path, X, y, names=("x1", "x2", "x3")) -> str:
    frame = pd.DataFrame(X, columns=list(names[: X.shape[1]]))
    frame["y"] = y
    frame.to_csv(path, index=False, float_format="%.17g")
    return str(path)


def _in(tmp_path, name: str):
    """A directory of its own for one run's files."""
    (tmp_path / name).mkdir()
    return tmp_path / name


@pytest.fixture
def exported(tmp_path):
    """A Poisson model of the first 150 rows, and the CSV of all 400 (x1, x2, x3, y)."""
    X, y = _counts()
    part = _write(tmp_path / "part.csv", X[:150], y[:150])
    model = str(tmp_path / "model")
    flags = ["--model", "poisson", "--solver", "exact", "--quiet"]
    assert main(["--data", part, "--target", "y", *flags, "--export", model]) == 0
    return model, _write(tmp_path / "all.csv", X, y), flags


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [1, 2])
def test_start_from_an_exported_model(tmp_path, exported, size):
    """--start: the model of 150 of the rows starts the fit of all 400, which reaches the cold
    fit's optimum in fewer iterations; started at that optimum, in 1 or 2."""
    model, data, flags = exported
    run = ["--data", data, "--target", "y", *flags]
    cold = run_metrics(_in(tmp_path, "cold"), size, run)
    warm = run_metrics(_in(tmp_path, "warm"), size, [*run, "--start", model])
    np.testing.assert_allclose(params_of(warm), params_of(cold), rtol=1e-10)
    iterations = cold["statistics"]["iterations"]
    assert warm["statistics"]["iterations"] < iterations
    best = str(tmp_path / "best")
    run_metrics(_in(tmp_path, "export"), size, [*run, "--export", best])
    again = run_metrics(_in(tmp_path, "again"), size, [*run, "--start", best])
    assert again["statistics"]["iterations"] <= 2 < iterations
    np.testing.assert_allclose(params_of(again), params_of(cold), rtol=1e-12)


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [1, 2])
def test_start_a_model_of_classes_from_an_exported_one(tmp_path, size):
    X, y = _classes()
    data = _write(tmp_path / "c.csv", X, y)
    run = ["--data", data, "--target", "y", "--model", "multinomial", "--solver", "exact"]
    model = str(tmp_path / "model")
    cold = run_metrics(_in(tmp_path, "cold"), size, [*run, "--export", model])
    warm = run_metrics(_in(tmp_path, "warm"), size, [*run, "--start", model])
    np.testing.assert_allclose(warm["w"], cold["w"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(warm["b"], cold["b"], rtol=0, atol=1e-12)
    assert warm["statistics"]["iterations"] <= 2 < cold["statistics"]["iterations"]


def test_a_start_that_does_not_fit_the_run_is_refused(tmp_path, exported, capsys):
    model, data, flags = exported
    X, y = _counts()
    run = ["--data", data, "--target", "y", "--start", model]
    two = _write(tmp_path / "two.csv", X[:, :2], y)
    other = _write(tmp_path / "other.csv", X, y, names=("x1", "x3", "x2"))
    for argv, message in [
        (
            [*run, "--model", "poisson"],
            "--start is where --solver exact's IRLS or Newton's "
            "method begins: SGD starts from its seed's draw, or resumes from --checkpoint_dir",
        ),
        (
            [*run, *flags, "--alpha", "0.1"],
            "--start is where --solver exact's IRLS or Newton's "
            "method begins: the elastic net's path starts from its largest strength's null model",
        ),
        (
            [*run, "--solver", "exact"],
            "--start is where IRLS or Newton's method begins: "
            "--model linear's least squares is one factorisation, with nothing to start",
        ),
        (
            [*run, *flags, "--link", "identity"],
            f"--start {model} has the log link, this run "
            "the identity link: a start's coefficients are on its link's scale",
        ),
        (
            [*run, "--model", "multinomial", "--solver", "exact"],
            f"--start {model} is a model "
            "of one mean (--model poisson), this run's --model multinomial is not: start from a "
            "model of the same kind",
        ),
        (
            ["--data", two, "--target", "y", *flags, "--start", model],
            f"--start {model} has 3 "
            "features, this run's data 2: a start's coefficients are of the run's features",
        ),
        (
            ["--data", other, "--target", "y", *flags, "--start", model],
            f"--start {model}'s "
            "features are x1, x2, x3; this run's are x1, x3, x2: a start's coefficients are of the "
            "same features, in the same order",
        ),
        (
            [*run[:-1], str(tmp_path / "none"), *flags],
            f"--start {tmp_path / 'none'} does not exist",
        ),
    ]:
        assert refused(capsys, argv) == message


def test_a_start_of_other_classes_is_refused(tmp_path, capsys):
    X, y = _classes()
    run = ["--target", "y", "--model", "multinomial", "--solver", "exact", "--quiet"]
    model = str(tmp_path / "model")
    assert main(["--data", _write(tmp_path / "c.csv", X, y), *run, "--export", model]) == 0
    renamed = _write(tmp_path / "d.csv", X, np.where(y == "c", "d", y))
    assert refused(capsys, ["--data", renamed, *run, "--start", model]) == (
        f"--start {model}'s classes are a, b, c; this run's are a, b, d: a start's columns are "
        "of the same classes"
    )
