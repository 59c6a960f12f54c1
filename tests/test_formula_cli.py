"""--formula on the command line: each rank reads its rows of a CSV or Parquet file as they are
(words as words) and builds statsmodels' design columns from them, with the levels and any
stateful transform's state (center, bs) learned from every rank's rows. The fits equal
statsmodels' formula fits at 1, 2 and 3 ranks; predict and evaluate apply the stored formula to
a file's rows, the IDs kept beside the predictions; mistakes end with one line and exit 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
import statsmodels.formula.api as smf

from conftest import REPO, refused, run_command, run_metrics

GUERRY = REPO / "tests" / "data" / "guerry.csv"
SIZES = [
    1,
    pytest.param(2, marks=pytest.mark.multiprocess),
    pytest.param(3, marks=pytest.mark.multiprocess),
]


def guerry(tmp_path, suffix: str = ".csv"):
    """Guerry's 86 departments of 1830s France (statsmodels' example data), sorted by region so
    that each rank's rows lack some regions; Corsica's region is missing."""
    table = pd.read_csv(GUERRY).sort_values(["Region", "dept"], kind="stable", na_position="last")
    path = tmp_path / f"guerry{suffix}"
    if suffix == ".csv":
        table.to_csv(path, index=False)
    else:
        table.to_parquet(path, index=False)
    return path, table


def panel(tmp_path):
    """A Poisson panel with an exposure, a word column whose level "Z" only the last rows hold,
    and an ID column the model does not use."""
    rng = np.random.default_rng(11)
    n = 500
    region = rng.choice(["N", "S", "E"], n)
    region[-40:] = "Z"
    table = pd.DataFrame(
        {
            "id": [f"c{i:04d}" for i in range(n)],
            "x": rng.normal(size=n),
            "wealth": rng.uniform(1, 9, n),
            "region": region,
            "expo": rng.uniform(0.5, 2, n),
        }
    )
    eta = 0.3 + 0.4 * table.x + 0.1 * np.sqrt(table.wealth) - 0.3 * (region == "Z")
    table["claims"] = rng.poisson(table.expo * np.exp(eta)).astype(float)
    path = tmp_path / "panel.csv"
    table.to_csv(path, index=False)
    return path, table


def coefficients(metrics: dict) -> dict:
    return {c["name"]: c for c in metrics["statistics"]["coefficients"]}


@pytest.mark.parametrize("size", SIZES)
def test_an_ols_formula_on_guerry_equals_statsmodels(size, tmp_path):
    """OLS with a word column (Region: a rank lacks some regions), np.log() and --missing drop
    (Corsica has no region), its errors clustered by region (words, 5 clusters):
    statsmodels' smf.ols on the same rows, to 1e-8."""
    path, table = guerry(tmp_path)
    formula = "Lottery ~ Literacy + np.log(Pop1831) + Region"
    args = ["--data", str(path), "--formula", formula, "--solver", "exact", "--missing", "drop"]
    m = run_metrics(tmp_path, size, [*args, "--cov_type", "cluster", "--groups", "Region"])
    kept = table.dropna()
    groups = {"groups": pd.factorize(kept.Region)[0]}
    reference = smf.ols(formula, kept).fit(cov_type="cluster", cov_kwds=groups, use_t=True)
    with pytest.warns(UserWarning, match="covariance of constraints does not have full rank"):
        # 5 clusters, 6 coefficients: the Wald F on the covariance's rank, 2
        f_value, f_p = reference.fvalue, reference.f_pvalue
    got = coefficients(m)
    bse, p = reference.bse, reference.pvalues  # the intercept named as statsmodels names it
    for name, value in reference.params.items():
        assert got[name]["estimate"] == pytest.approx(value, rel=1e-8, abs=1e-10), name
        assert got[name]["std_error"] == pytest.approx(bse[name], rel=1e-8), name
        assert got[name]["p"] == pytest.approx(p[name], rel=1e-6), name
    statistics = m["statistics"]
    assert statistics["clusters"] == 5
    assert statistics["f_value"] == pytest.approx(f_value, rel=1e-8)
    assert statistics["f_p"] == pytest.approx(f_p, rel=1e-6)
    assert statistics["r2"] == pytest.approx(reference.rsquared, rel=1e-10)
    assert statistics["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)
    assert m["num_samples"] == 85 and m["rows_dropped_missing"] == 1


@pytest.mark.parametrize("size", SIZES)
def test_stateful_transforms_learn_their_state_from_every_rank(size, tmp_path):
    """center() and bs() learn a mean and knots: from every rank's rows (a Poisson fit with an
    exposure and a word level held by the last rank alone), equal to statsmodels' (patsy's
    center and bs are formulaic's) on all the rows."""
    path, table = panel(tmp_path)
    formula = "claims ~ center(x) + bs(wealth, df=4) + C(region)"
    args = ["--data", str(path), "--formula", formula, "--model", "poisson"]
    m = run_metrics(tmp_path, size, [*args, "--solver", "exact", "--exposure", "expo"])
    family = sm.families.Poisson()
    reference = smf.glm(formula, table, family=family, exposure=table.expo).fit(tol=1e-13)
    # patsy numbers a spline's columns from 0, formulaic from 1
    theirs = {re_spline(name): value for name, value in reference.params.items()}
    got = coefficients(m)
    assert set(got) == set(theirs)
    for name, value in theirs.items():
        assert got[name]["estimate"] == pytest.approx(value, rel=1e-8, abs=1e-10), name


def re_spline(name: str) -> str:
    """patsy's bs(wealth, df=4)[k] as formulaic's [k + 1]."""
    if name.startswith("bs("):
        head, k = name.rsplit("[", 1)
        return f"{head}[{int(k[:-1]) + 1}]"
    return name


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_predict_and_evaluate_apply_the_stored_formula(size, tmp_path):
    """The export stores the formula, its levels and its state; predict builds the columns
    from a Parquet file's rows (statsmodels' predictions, the IDs beside them, at 1 and 2
    ranks), and evaluate scores them."""
    path, table = panel(tmp_path)
    formula = "claims ~ center(x) + bs(wealth, df=4) + C(region)"
    model = tmp_path / "model"
    args = ["--data", str(path), "--formula", formula, "--model", "poisson", "--solver", "exact"]
    run_metrics(tmp_path, 1, [*args, "--exposure", "expo", "--export", str(model)])
    new = table.sample(frac=1.0, random_state=3).reset_index(drop=True).iloc[:200]
    new.to_parquet(tmp_path / "new.parquet", index=False)
    family = sm.families.Poisson()
    reference = smf.glm(formula, table, family=family, exposure=table.expo).fit(tol=1e-13)
    expected = reference.predict(new, exposure=new.expo)
    command = ["predict", "--model", str(model), "--data", str(tmp_path / "new.parquet")]
    command += ["--out", str(tmp_path / "p.csv"), "--keep_columns", "id"]
    run_command(tmp_path, size, command)
    got = pd.read_csv(tmp_path / "p.csv")
    assert list(got.id) == list(new.id)
    np.testing.assert_allclose(got.prediction, expected, rtol=1e-8)


def test_evaluate_scores_a_formula_model_on_its_own_rows(tmp_path, capsys):
    from hvd_linreg.cli import main

    path, table = guerry(tmp_path)
    complete = tmp_path / "complete.csv"
    table.dropna().to_csv(complete, index=False)
    model = tmp_path / "model"
    formula = "Lottery ~ Literacy + np.log(Pop1831) + Region"
    args = ["--data", str(complete), "--formula", formula, "--solver", "exact"]
    m = run_metrics(tmp_path, 1, [*args, "--export", str(model)])
    capsys.readouterr()
    out = tmp_path / "scores.json"
    command = ["evaluate", "--model", str(model), "--data", str(complete)]
    assert main([*command, "--metrics_json", str(out)]) == 0
    import json

    scores = json.loads(out.read_text())
    reference = smf.ols(formula, table).fit()
    assert scores["r2"] == pytest.approx(reference.rsquared, rel=1e-10)
    assert m["statistics"]["r2"] == pytest.approx(scores["r2"], rel=1e-12)


def test_formula_mistakes_end_with_one_line(tmp_path, capsys):
    path, table = guerry(tmp_path)
    data = ["--data", str(path), "--solver", "exact"]
    says = refused(capsys, [*data, "--formula", "Lottery ~ Literacy + Region"])
    assert "guerry.csv line 87: no value in column 'Region'" in says and "--missing drop" in says
    says = refused(capsys, [*data, "--formula", "Lottery ~ Literacy", "--features", "Wealth"])
    assert "--formula names the target and the features" in says
    says = refused(capsys, [*data, "--formula", "Lottery ~ Literacy + nope", "--missing", "drop"])
    assert "the formula cannot be applied to the rows" in says and "nope" in says
    says = refused(capsys, ["--formula", "y ~ x"])
    assert "--formula names columns of a CSV or Parquet file, so it needs --data" in says
    typo = table.dropna().copy()
    typo["Literacy"] = typo["Literacy"].astype(object)
    typo.loc[typo.index[7], "Literacy"] = "4O"  # a letter O for a zero: a typo, not a level
    typo.to_csv(tmp_path / "typo.csv", index=False)
    says = refused(
        capsys, ["--data", str(tmp_path / "typo.csv"), "--formula", "Lottery ~ Literacy"]
    )
    assert "'4O' in column 'Literacy' is not a number" in says
    np.savez(tmp_path / "d.npz", X=np.ones((4, 1)), y=np.ones(4))
    says = refused(capsys, ["--data", str(tmp_path / "d.npz"), "--formula", "y ~ x"])
    assert "--formula reads the named columns of CSV or Parquet files" in says
    says = refused(
        capsys, [*data, "--formula", "Lottery ~ Literacy", "--no_intercept", "--missing", "drop"]
    )
    assert "has an intercept, and no_intercept asks for none" in says


def test_a_formula_without_an_intercept_and_from_parquet(tmp_path):
    """`- 1`: statsmodels' fit without a constant (a full coding of Region), from Parquet."""
    path, table = guerry(tmp_path, ".parquet")
    formula = "Lottery ~ Literacy + Region - 1"
    args = ["--data", str(path), "--formula", formula, "--solver", "exact", "--missing", "drop"]
    m = run_metrics(tmp_path, 1, args)
    reference = smf.ols(formula, table).fit()
    got = coefficients(m)
    assert m["b"] == 0
    assert m["statistics"]["r2"] == pytest.approx(reference.rsquared, rel=1e-10)
    for name, value in reference.params.items():
        assert got[name]["estimate"] == pytest.approx(value, rel=1e-8), name
        assert got[name]["std_error"] == pytest.approx(reference.bse[name], rel=1e-8), name
