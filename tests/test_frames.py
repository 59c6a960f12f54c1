"""hvd_linreg.fit takes DataFrames as they come: columns of words, pandas categories and
booleans are coded as treatment dummies with statsmodels' formula names, their levels agreed
over the ranks; the fits equal statsmodels' formula fits on all the rows at 1, 2 and 3 ranks,
each rank with its own rows and some level absent from a rank."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from frames_job import FITS, grunfeld, panel
from frames_job import FORMULAS as FORMULA_FITS

from conftest import REPO, launch, launcher_env

SCRIPT = REPO / "tests" / "frames_job.py"
FORMULAS = {"grunfeld": "invest ~ value + capital + firm", "panel": "y ~ x + region + grade + flag"}


def statsmodels_fit(name: str):
    table = FITS[name][0]()
    if name == "grunfeld":
        return smf.ols(FORMULAS[name], table).fit(), table
    import statsmodels.api as sm

    return smf.glm(FORMULAS[name], table, family=sm.families.Poisson()).fit(tol=1e-13), table


def run(size: int, tmp_path) -> dict:
    out = tmp_path / "fits.json"
    if size == 1:
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), str(out)],
            env=launcher_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    else:
        program = (sys.executable, str(SCRIPT), str(out))
        result = launch("mpirun", size, [], tmp_path, metrics=False, program=program)
        assert result.returncode == 0, result.output
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    "size",
    [
        1,
        pytest.param(2, marks=pytest.mark.multiprocess),
        pytest.param(3, marks=pytest.mark.multiprocess),
    ],
)
def test_word_category_and_boolean_columns_fit_as_statsmodels_formulas(size, tmp_path):
    fits = run(size, tmp_path)
    for name in FITS:
        reference, table = statsmodels_fit(name)
        got = fits[name]
        expected = reference.params
        assert sorted(got["names"]) == sorted(expected.index), name  # statsmodels' names
        params = dict(zip(got["names"], got["params"]))
        bse = dict(zip(got["names"], got["bse"]))
        for key in expected.index:
            assert params[key] == pytest.approx(expected[key], rel=1e-8, abs=1e-10), (name, key)
            assert bse[key] == pytest.approx(reference.bse[key], rel=1e-6)
        np.testing.assert_allclose(got["predicted"], reference.fittedvalues, rtol=1e-8)
    assert (
        "grade[T.lo]" in fits["panel"]["names"]
    )  # the category's own first level, mid, is the reference
    assert "region[T.Z]" in fits["panel"]["names"]  # held by the last rank's rows alone


@pytest.mark.parametrize(
    "size",
    [
        1,
        pytest.param(2, marks=pytest.mark.multiprocess),
        pytest.param(3, marks=pytest.mark.multiprocess),
    ],
)
def test_formulas_are_statsmodels_formula_fits_at_any_rank_count(size, tmp_path):
    """C(), np.log, interactions and - 1 (a full coding of firm: the constant implicit, R² and F
    centred as statsmodels has them); a level of C(k) and one of region held by one rank's
    rows alone."""
    import statsmodels.api as sm

    fits = run(size, tmp_path)
    for name, (make, formula, settings) in FORMULA_FITS.items():
        table = make()
        if settings.get("model") == "poisson":
            reference = smf.glm(formula, table, family=sm.families.Poisson()).fit(tol=1e-13)
        else:
            reference = smf.ols(formula, table).fit()
        got = fits[name]
        expected = reference.params
        params = dict(zip(got["names"], got["params"]))
        assert set(expected.index) <= set(params), name  # statsmodels' names
        for key in expected.index:
            assert params[key] == pytest.approx(expected[key], rel=1e-8, abs=1e-10), (name, key)
        bse = dict(zip(got["names"], got["bse"]))
        their_bse = reference.bse
        for key in expected.index:
            assert bse[key] == pytest.approx(their_bse[key], rel=1e-6), (name, key)
        np.testing.assert_allclose(got["predicted"], reference.fittedvalues, rtol=1e-8)
        if name == "grunfeld-formula":
            assert got["r2"] == pytest.approx(reference.rsquared, rel=1e-10)
            assert got["f_value"] == pytest.approx(reference.fvalue, rel=1e-8)
    assert "C(k)[T.3]" in fits["panel-formula"]["names"]
    assert fits["guerry-missing"]["dropped"] == 3  # missing="drop": Corsica and two others


def test_a_model_saved_from_a_formula_is_applied_by_predict(tmp_path, capsys):
    """save() keeps the formula, its levels and its state: predict builds the columns from a
    file's rows as the fit's predict() does from a DataFrame's."""
    import hvd_linreg
    from hvd_linreg.cli import main

    table = panel()
    formula = "y ~ center(x) + C(region) + grade"
    result = hvd_linreg.fit(formula, data=table, solver="exact", model="poisson")
    result.save(str(tmp_path / "model"))
    table.to_csv(tmp_path / "new.csv", index=False)
    args = ["predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "new.csv")]
    assert main([*args, "--out", str(tmp_path / "p.csv")]) == 0
    got = pd.read_csv(tmp_path / "p.csv").prediction
    np.testing.assert_allclose(got, result.predict(table), rtol=1e-12)
    assert "passing over the columns flag, k" in capsys.readouterr().out


def test_a_formula_that_cannot_be_fitted_says_why():
    import hvd_linreg

    table = panel()
    for formula, says in [
        ("y ~ x + nope", "the formula cannot be applied to the rows"),
        ("x + flag", "has no left side"),
        ("y ~ x + (", "does not parse"),
    ]:
        with pytest.raises(ValueError, match=re.escape(says)):
            hvd_linreg.fit(formula, data=table, solver="exact")
    with pytest.raises(ValueError, match="takes y from the formula's left side"):
        hvd_linreg.fit("y ~ x", table.y, data=table)


def test_new_rows_are_coded_with_the_fits_levels_and_an_unseen_one_is_named():
    import hvd_linreg

    table = panel()
    features = ["x", "region", "grade", "flag"]
    result = hvd_linreg.fit(table[features], table.y, solver="exact", model="poisson")
    shuffled = table.sample(frac=1.0, random_state=0)
    np.testing.assert_allclose(
        result.predict(shuffled[[*reversed(features), "y"]]),
        result.predict(table[features])[shuffled.index],
        rtol=1e-14,
    )
    with pytest.raises(
        ValueError,
        match=r"row 0: 'Q' in column 'region' is not one of the model's levels \(E, N, S, W, Z\)",
    ):
        result.predict(table[features].assign(region="Q"))
    with pytest.raises(
        ValueError, match="pass a DataFrame with its columns x, region, grade, flag"
    ):
        result.predict(np.zeros((3, 4)))


def test_the_export_stores_the_levels_and_predict_codes_a_file_with_them(tmp_path):
    import hvd_linreg
    from hvd_linreg.cli import main

    table = grunfeld()
    features = ["value", "capital", "firm"]
    result = hvd_linreg.fit(table[features], table.invest, solver="exact")
    result.save(str(tmp_path / "model"))
    table.to_csv(tmp_path / "new.csv", index=False)
    out = tmp_path / "p.csv"
    assert (
        main(
            [
                "predict",
                "--model",
                str(tmp_path / "model"),
                "--data",
                str(tmp_path / "new.csv"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    np.testing.assert_allclose(pd.read_csv(out).prediction, result.predict(table), rtol=1e-12)


@pytest.mark.parametrize(
    ("frame", "says"),
    [
        (
            pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "g": ["a", "b", None, "a"]}),
            "row 2: no value in column 'g'",
        ),
        (
            pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "g": ["1", "2", "b", "1"]}),
            "'b' in column 'g' is not a number",
        ),
        (
            pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "g": ["a", "b", "c", "d"]}),
            "column 'g' has 4 distinct values in 4 rows",
        ),
    ],
    ids=["missing", "mixed", "an-id"],
)
def test_columns_that_are_not_levels_are_refused(frame, says):
    import hvd_linreg

    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        hvd_linreg.fit(frame, np.arange(4.0), solver="exact")


def test_the_estimators_take_word_columns_as_fit_does():
    """An estimator fitted on a DataFrame with word columns has fit()'s coefficients (one per
    dummy), predicts new rows coded with its levels_, and names an unseen level."""
    from hvd_linreg import estimators

    table = grunfeld()
    X = table[["value", "capital", "firm"]]
    fitted = estimators.LinearRegression().fit(X, table.invest)
    reference = smf.ols(FORMULAS["grunfeld"], table).fit()
    assert list(fitted.levels_) == ["firm"] and fitted.n_features_in_ == 3
    np.testing.assert_allclose(fitted.predict(X), reference.fittedvalues, rtol=1e-9)
    assert fitted.intercept_ == pytest.approx(reference.params["Intercept"], rel=1e-9)
    with pytest.raises(ValueError, match="'Acme' in column 'firm'"):
        fitted.predict(X.assign(firm="Acme"))


def test_missing_drop_drops_the_rows_with_a_missing_value_in_any_argument():
    """missing="drop": a NaN in X's numbers, a None in its words, a NaN in the weights or the
    target drops the row, as statsmodels' missing="drop" does; the default refuses it."""
    import statsmodels.api as sm

    import hvd_linreg

    table = panel()
    weights = np.linspace(0.5, 2.0, len(table))
    table.loc[3, "x"] = np.nan
    table.loc[8, "region"] = None
    table.loc[15, "y"] = np.nan
    weights[20] = np.nan
    X = table[["x", "region", "flag"]]
    result = hvd_linreg.fit(
        X, table.y, weights=weights, model="poisson", solver="exact", missing="drop"
    )
    kept = np.ones(len(table), bool)
    kept[[3, 8, 15, 20]] = False
    design = pd.get_dummies(X[kept], columns=["region", "flag"], drop_first=True, dtype=float)
    reference = sm.GLM(
        table.y[kept],
        sm.add_constant(design, prepend=False),
        family=sm.families.Poisson(),
        var_weights=weights[kept],
    ).fit(tol=1e-13)
    np.testing.assert_allclose(result.params, reference.params.to_numpy(), rtol=1e-8)
    assert result.to_dict()["rows_dropped_missing"] == 4
    with pytest.raises(hvd_linreg.UsageError, match="row 8: no value in column 'region'"):
        hvd_linreg.fit(X, table.y, weights=weights, model="poisson", solver="exact")
