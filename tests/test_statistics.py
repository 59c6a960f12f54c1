"""The exact fit's statistics are statsmodels' OLS numbers on real data (scikit-learn's diabetes
set), at 1 and 2 ranks; what a design does not define is said to be undefined, not printed."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from conftest import REPO, launch, launcher_env, read_metrics
from hvd_linreg.cli import main
from hvd_linreg.statistics.table import two_sided_p


@pytest.fixture(scope="module")
def diabetes(tmp_path_factory) -> tuple[str, pd.DataFrame]:
    """docs/statistics.md's worked example's file, written by its script."""
    path = tmp_path_factory.mktemp("diabetes") / "diabetes.csv"
    script = [sys.executable, str(REPO / "docs" / "diabetes_csv.py"), str(path)]
    subprocess.run(script, check=True, env=launcher_env())
    return str(path), pd.read_csv(path)


def ols(table: pd.DataFrame):
    """statsmodels' OLS of the last column on the others, with an intercept (named b)."""
    X, y = table.iloc[:, :-1], table.iloc[:, -1]
    return sm.OLS(y, sm.add_constant(X).rename(columns={"const": "Intercept"})).fit()


def _exact(tmp_path, path: str, size: int, *flags: str) -> tuple[dict, str]:
    """Metrics and output of --solver exact at size ranks (1: in this process)."""
    args = ["--data", path, "--solver", "exact", *flags]
    if size > 1:
        run = launch("mpirun", size, args, tmp_path)
        assert run.returncode == 0, run.output
        return run.metrics, run.stdout
    out = tmp_path / "m.json"
    assert main([*args, "--metrics_json", str(out)]) == 0
    return read_metrics(out), ""


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_statistics_of_the_diabetes_fit_are_statsmodels_ols(tmp_path, diabetes, size):
    path, table = diabetes
    s = _exact(tmp_path, path, size)[0]["statistics"]
    reference = ols(table)
    names = [c["name"] for c in s["coefficients"]]
    assert names == [*table.columns[:-1], "Intercept"]  # the CSV header's names
    for key, attribute in [("estimate", "params"), ("std_error", "bse"), ("t", "tvalues")]:
        got = [c[key] for c in s["coefficients"]]
        np.testing.assert_allclose(got, getattr(reference, attribute)[names], rtol=1e-9)
    np.testing.assert_allclose(
        [c["p"] for c in s["coefficients"]], reference.pvalues[names], rtol=1e-9
    )
    assert s["r2"] == pytest.approx(reference.rsquared, rel=1e-9)
    assert s["adjusted_r2"] == pytest.approx(reference.rsquared_adj, rel=1e-9)
    assert s["dof"] == reference.df_resid == 431
    assert s["rmse"] == pytest.approx(np.sqrt(reference.ssr / 442), rel=1e-9)
    assert s["undefined"] == {}


@pytest.fixture(scope="module")
def fair(tmp_path_factory) -> tuple[str, pd.DataFrame]:
    """statsmodels' fair data (affairs by marriage, age, ...) with a weight per row (its
    children + 1): a CSV whose last column is the target."""
    table = sm.datasets.fair.load_pandas().data
    table = table.assign(weight=table.children + 1.0)
    features = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ"]
    table = table[[*features, "weight", "affairs"]]
    path = tmp_path_factory.mktemp("fair") / "fair.csv"
    table.to_csv(path, index=False)
    return str(path), table


@pytest.mark.parametrize(
    "size",
    [
        1,
        pytest.param(2, marks=pytest.mark.multiprocess),
        pytest.param(3, marks=pytest.mark.multiprocess),
    ],
)
@pytest.mark.parametrize("weighted", [False, True], ids=["OLS", "WLS"])
@pytest.mark.parametrize("cov_type", ["nonrobust", "HC1"])
def test_the_whole_regression_table_is_statsmodels(tmp_path, fair, size, weighted, cov_type):
    """The F test (a Wald F with robust errors), log-likelihood, AIC, BIC, the (weighted)
    residual sum of squares and the condition number are statsmodels' OLS and WLS figures on
    its fair data, at 1, 2 and 3 ranks."""
    path, table = fair
    flags = ["--cov_type", cov_type, *(["--weights", "weight"] if weighted else [])]
    features = ["--features", ",".join(table.columns[:-2]), "--target", "affairs"]
    s = _exact(tmp_path, path, size, *features, *flags)[0]["statistics"]
    X = sm.add_constant(table.iloc[:, :-2])
    y = table.affairs
    model = sm.WLS(y, X, weights=table.weight) if weighted else sm.OLS(y, X)
    reference = model.fit(cov_type=cov_type)
    for key, value in [
        ("f_value", reference.fvalue),
        ("f_p", reference.f_pvalue),
        ("log_likelihood", reference.llf),
        ("aic", reference.aic),
        ("bic", reference.bic),
        ("rss", reference.ssr),
        ("condition_number", reference.condition_number),
        ("r2", reference.rsquared),
    ]:
        assert s[key] == pytest.approx(value, rel=1e-9), key
    np.testing.assert_allclose(
        [c["std_error"] for c in s["coefficients"]][:-1], reference.bse[1:], rtol=1e-9
    )


def test_the_summary_prints_every_coefficient_and_the_whole_table(tmp_path, diabetes, capsys):
    _exact(tmp_path, diabetes[0], 1)
    out = capsys.readouterr().out
    assert "R² 0.517748, adjusted R² 0.506559, RMSE 53.4761, 431 residual degrees" in out
    assert "  F 46.2724 (p 3.83e-62), log-likelihood -2385.99, AIC 4793.99, BIC 4838.99" in out
    assert "  bmi                519.846       66.5334      7.813    4.3e-14" in out
    assert "  s6 " in out and "w's in all" not in out  # every one of the 10


def test_past_200_coefficients_the_summary_says_where_the_rest_are(tmp_path, capsys):
    import hvd_linreg

    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 210))
    y = X[:, 0] + rng.normal(size=400)
    path = tmp_path / "wide.csv"
    pd.DataFrame(np.c_[X, y]).to_csv(
        path, index=False, header=[f"x{j}" for j in range(210)] + ["y"]
    )
    _exact(tmp_path, str(path), 1)
    out = capsys.readouterr().out
    assert "  x199 " in out and "  x200 " not in out
    assert (
        "... (210 w's in all: every one in --metrics_json, and in hvd_linreg.fit's summary())"
        in out
    )
    summary = hvd_linreg.fit(X, y, solver="exact").summary()
    assert "  w[209] " in summary and "w's in all" not in summary


@pytest.mark.parametrize("dof", [1, 3, 30, 431, 100_000])
def test_p_values_are_scipys_student_t(dof):
    t = np.array([0.0, 0.1, -0.5, 1.0, 2.0, -3.0, 5.0, 10.0, 40.0])
    np.testing.assert_allclose(two_sided_p(t, dof), 2 * stats.t.sf(np.abs(t), dof), rtol=1e-6)


def test_a_singular_design_says_which_statistics_are_undefined(tmp_path, diabetes, capsys):
    path, table = diabetes
    doubled = table.copy()
    doubled.insert(3, "bmi again", table["bmi"])  # collinear: bmi's w is not identified
    doubled.to_csv(tmp_path / "doubled.csv", index=False)
    s = _exact(tmp_path, str(tmp_path / "doubled.csv"), 1)[0]["statistics"]
    assert all(c["std_error"] is c["t"] is c["p"] is None for c in s["coefficients"])
    assert s["adjusted_r2"] is None and s["dof"] is None
    why = "the design is singular (features collinear or constant)"
    undefined = ("std_error", "t", "p", "adjusted_r2", "dof", "f_value", "f_p")
    assert s["undefined"] == {k: why for k in undefined}
    # The fitted values are still unique: R², RMSE, the log-likelihood and (counting the
    # design's rank) AIC and BIC are the full-rank fit's.
    full = ols(table)
    for key, value in [("r2", full.rsquared), ("aic", full.aic), ("bic", full.bic)]:
        assert s[key] == pytest.approx(value, rel=1e-6), key
    out, err = capsys.readouterr()
    assert "the design is singular: columns bmi, bmi again are collinear or constant" in err
    assert f"undefined: {', '.join(undefined)}: {why}" in out
    assert re.search(r"  bmi +259.923 +undefined +undefined +undefined\n", out)
    assert "nan" not in out


def test_as_many_coefficients_as_rows_leaves_no_degrees_of_freedom(tmp_path):
    path = tmp_path / "three.csv"
    path.write_text("x1,x2,y\n0,1,1\n1,0,2\n1,1,4\n")
    m, _ = _exact(tmp_path, str(path), 1, "--batch_size", "1")
    s = m["statistics"]
    assert s["r2"] == pytest.approx(1.0)
    assert s["dof"] is None and s["coefficients"][0]["std_error"] is None
    assert (
        s["undefined"]["std_error"] == "3 rows for 3 coefficients: no residual degrees of freedom"
    )


def test_a_constant_feature_is_named_as_what_makes_the_design_singular(tmp_path, diabetes, capsys):
    """Centred, a constant column holds only the mean's rounding (0.1 x 442 rows does not sum
    to 44.2 exactly): that must not pass for a feature of its own."""
    path, table = diabetes
    with_constant = table.copy()
    with_constant.insert(0, "tenth", 0.1)
    with_constant.to_csv(tmp_path / "constant.csv", index=False)
    s = _exact(tmp_path, str(tmp_path / "constant.csv"), 1)[0]["statistics"]
    assert "columns tenth are collinear or constant" in capsys.readouterr().err
    assert s["coefficients"][0]["estimate"] == 0.0 and s["dof"] is None
    np.testing.assert_allclose(
        [c["estimate"] for c in s["coefficients"][1:]],
        ols(table).params[table.columns[:-1].tolist() + ["Intercept"]],
        rtol=1e-9,
    )
