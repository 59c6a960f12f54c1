"""Robust standard errors on a synthetic panel of 30 clusters whose rows are spread over the
ranks: HC0, HC1 and cluster (--groups) equal statsmodels' for least squares, weighted Poisson
and logistic at 1, 2 and 3 ranks; settings that cannot give them end with exit 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from conftest import params_of, refused, run_metrics

GROUPS = 30
MODELS = {
    "linear": sm.families.Gaussian(),
    "poisson": sm.families.Poisson(),
    "logistic": sm.families.Binomial(),
}


def panel(model: str) -> pd.DataFrame:
    """500 rows of 30 clusters, each cluster with its own effect, in an order that puts every
    cluster's rows on several ranks; the Poisson rows weighted."""
    rng = np.random.default_rng(21)
    n = 500
    firm = rng.integers(0, GROUPS, n) * 7 + 100  # cluster IDs that are not 0 .. G - 1
    effect = rng.normal(size=GROUPS * 7 + 100)[firm]
    x1, x2 = rng.normal(size=n) + 0.5 * effect, rng.normal(size=n)
    eta = 0.3 + 0.5 * x1 - 0.25 * x2 + 0.4 * effect
    table = {"x1": x1, "x2": x2, "firm": firm.astype(float)}
    if model == "linear":
        table["y"] = 2 * eta + rng.normal(size=n)
    elif model == "poisson":
        table["w"] = rng.uniform(0.5, 2.0, n)
        table["y"] = rng.poisson(np.exp(eta)).astype(float)
    else:
        table["y"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float)
    return pd.DataFrame(table)


def reference(table: pd.DataFrame, model: str, cov_type: str):
    X = sm.add_constant(table[["x1", "x2"]], prepend=False)
    kwargs = {"groups": table.firm.to_numpy()} if cov_type == "cluster" else {}
    if model == "linear":
        fitted = sm.OLS(table.y, X)
    else:
        weights = {"var_weights": table.w} if "w" in table else {}
        fitted = sm.GLM(table.y, X, family=MODELS[model], **weights)
    with pytest.warns() if "w" in table and cov_type == "cluster" else _nothing():
        return fitted.fit(cov_type=cov_type, cov_kwds=kwargs, use_t=model == "linear")


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


@pytest.mark.parametrize(
    "size",
    [
        1,
        pytest.param(2, marks=pytest.mark.multiprocess),
        pytest.param(3, marks=pytest.mark.multiprocess),
    ],
)
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("cov_type", ["HC0", "HC1", "cluster"])
def test_robust_errors_are_statsmodels_at_any_rank_count(tmp_path, model, cov_type, size):
    table = panel(model)
    path = tmp_path / "panel.csv"
    table.to_csv(path, index=False)
    args = ["--data", str(path), "--model", model, "--solver", "exact", "--target", "y"]
    args += ["--features", "x1,x2", "--cov_type", cov_type]
    args += ["--weights", "w"] if "w" in table else []
    args += ["--groups", "firm"] if cov_type == "cluster" else []
    metrics = run_metrics(tmp_path, size, args)
    s = metrics["statistics"]
    ref = reference(table, model, cov_type)
    factor = 1.0
    if cov_type == "HC1" and model != "linear":  # statsmodels' GLM returns HC0 for HC1
        factor = np.sqrt(len(table) / (len(table) - 3))
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    errors = [c["std_error"] for c in s["coefficients"]]
    np.testing.assert_allclose(errors, ref.bse * factor, rtol=1e-8)
    assert s["cov_type"] == cov_type
    if cov_type == "cluster":
        assert s["clusters"] == GROUPS
        if model == "linear":  # t and F with G - 1 degrees of freedom, as use_t=True
            np.testing.assert_allclose([c["p"] for c in s["coefficients"]], ref.pvalues, rtol=1e-6)
            assert s["f_value"] == pytest.approx(ref.fvalue, rel=1e-8)
            assert s["f_p"] == pytest.approx(ref.f_pvalue, rel=1e-6)


def test_clustered_errors_from_python_equal_the_command_lines(tmp_path):
    import hvd_linreg

    table = panel("logistic")
    result = hvd_linreg.fit(
        table[["x1", "x2"]],
        table.y,
        groups=table.firm,
        model="logistic",
        solver="exact",
        cov_type="cluster",
    )
    ref = reference(table, "logistic", "cluster")
    np.testing.assert_allclose(result.bse, ref.bse, rtol=1e-8)
    assert "cluster-robust standard errors (30 clusters)" in result.summary()
    named = hvd_linreg.fit(  # clusters named by words: the same clusters
        table[["x1", "x2"]],
        table.y,
        groups=table.firm.map("firm {:g}".format),
        model="logistic",
        solver="exact",
        cov_type="cluster",
    )
    np.testing.assert_array_equal(named.bse, result.bse)
    with pytest.raises(ValueError, match="cov_type='cluster' needs groups="):
        hvd_linreg.fit(table[["x1", "x2"]], table.y, solver="exact", cov_type="cluster")
    with pytest.raises(ValueError, match="groups= is for cov_type='cluster'"):
        hvd_linreg.fit(table[["x1", "x2"]], table.y, solver="exact", groups=table.firm)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cov_type", "cluster"], "--cov_type cluster needs --groups COL"),
        (["--groups", "firm"], "--groups is for --cov_type cluster"),
        (["--cov_type", "cluster", "--groups", "nope"], "nope"),
    ],
)
def test_clusters_that_cannot_be_had_end_with_exit_2(capsys, tmp_path, flags, says):
    path = tmp_path / "panel.csv"
    panel("linear").to_csv(path, index=False)
    args = ["--data", str(path), "--solver", "exact", "--target", "y", "--features", "x1,x2"]
    assert says in refused(capsys, [*args, *flags])


def test_one_cluster_is_not_enough(capsys, tmp_path):
    table = panel("linear").assign(firm=1.0)
    path = tmp_path / "one.csv"
    table.to_csv(path, index=False)
    args = ["--data", str(path), "--solver", "exact", "--target", "y", "--features", "x1,x2"]
    says = refused(capsys, [*args, "--cov_type", "cluster", "--groups", "firm"])
    assert "needs at least 2 clusters in --groups, got 1" in says


def _links():
    links = sm.families.links
    return {
        "gamma log": (sm.families.Gamma(links.Log()), np.exp),
        "gamma inverse": (sm.families.Gamma(links.InversePower()), lambda e: 1 / (1 + 0.2 * e)),
        "gamma identity": (sm.families.Gamma(links.Identity()), lambda e: 3 + e),
        "binomial probit": (sm.families.Binomial(links.Probit()), None),
        "binomial cloglog": (sm.families.Binomial(links.CLogLog()), None),
        "gaussian log": (sm.families.Gaussian(links.Log()), lambda e: np.exp(e + 1)),
        "poisson exposure": (sm.families.Poisson(), np.exp),
    }


def link_rows(case: str) -> pd.DataFrame:
    """500 rows drawn from the case's own model: Gamma amounts (shape 2), 0/1 outcomes, a mean
    with normal noise, or counts over an exposure of 0.5 to 2 (column e)."""
    rng = np.random.default_rng(31)
    x1, x2 = rng.normal(size=500), rng.normal(size=500)
    eta = 0.1 + 0.3 * x1 - 0.2 * x2
    mean = _links()[case][1]
    table = {"x1": x1, "x2": x2}
    if case.startswith("gamma"):
        table["y"] = rng.gamma(2.0, mean(eta) / 2.0)
    elif case.startswith("binomial"):
        table["y"] = (rng.uniform(size=500) < 1 / (1 + np.exp(-3 * eta))).astype(float)
    elif case.startswith("gaussian"):
        table["y"] = mean(eta) + 0.3 * rng.normal(size=500)
    else:
        table["e"] = rng.uniform(0.5, 2.0, 500)
        table["y"] = rng.poisson(table["e"] * mean(eta)).astype(float)
    return pd.DataFrame(table)


def robust_glm(table: pd.DataFrame, family):
    """statsmodels' GLM with HC0 errors whose bread is the expected information, as the tool's
    (docs/statistics.md; statsmodels' IRLS fit takes the observed Hessian, which differs for
    a non-canonical link): the IRLS optimum, then its Newton fit with optim_hessian="eim"."""
    exposure = {"exposure": table.e} if "e" in table else {}
    X = sm.add_constant(table[["x1", "x2"]], prepend=False)
    start = sm.GLM(table.y, X, family=family, **exposure).fit(tol=1e-13, maxiter=300).params
    model = sm.GLM(table.y, X, family=family, **exposure)
    return model.fit(
        method="newton", start_params=start, optim_hessian="eim", cov_type="HC0", tol=1e-13
    )


@pytest.mark.parametrize(
    "size, cov_type",
    [
        (1, "HC0"),
        (1, "HC1"),
        pytest.param(2, "HC0", marks=pytest.mark.multiprocess),
        pytest.param(3, "HC1", marks=pytest.mark.multiprocess),
    ],
)
@pytest.mark.parametrize("case", list(_links()))
@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.DomainWarning")
def test_robust_errors_of_each_link_and_the_exposure_are_statsmodels(
    tmp_path, case, size, cov_type
):
    """Gamma's three links, binomial's probit and cloglog, the Gaussian log link and Poisson
    with --exposure: the coefficients, deviance and HC0 or HC1 errors are statsmodels' GLM's
    (its sandwich on the expected information; HC1 its HC0 times n / (n - k)), at 1 rank and,
    the rows spread over them, at 2 and 3."""
    table = link_rows(case)
    path = tmp_path / "rows.csv"
    table.to_csv(path, index=False)
    model, link = case.split()
    args = ["--data", str(path), "--model", model, "--solver", "exact", "--target", "y"]
    args += ["--features", "x1,x2", "--cov_type", cov_type]
    args += ["--exposure", "e"] if link == "exposure" else ["--link", link]
    metrics = run_metrics(tmp_path, size, args)
    ref = robust_glm(table, _links()[case][0])
    factor = np.sqrt(len(table) / (len(table) - 3)) if cov_type == "HC1" else 1.0
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    errors = [c["std_error"] for c in metrics["statistics"]["coefficients"]]
    np.testing.assert_allclose(errors, ref.bse * factor, rtol=1e-8)
    assert metrics["statistics"]["deviance"] == pytest.approx(ref.deviance, rel=1e-10)
    assert metrics["statistics"]["cov_type"] == cov_type
