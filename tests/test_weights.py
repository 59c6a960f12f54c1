"""--weights, --offset and --exposure: prior weights and known terms of the linear predictor,
read from CSV, Parquet and .npz columns, on every family and both solvers. The exact fits are
statsmodels' (WLS, and GLM with var_weights, exposure and a two-column binomial) on the data
sets statsmodels ships; a zero weight is the row removed and an integer weight the row
repeated; SGD is the float64 simulation of averaged SGD on the weighted loss; every bad
weight or exposure ends with exit 2, naming its file, row and column."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import launch, params_of, run_metrics
from hvd_linreg.cli import main
from reference import SGD, averaged, constant


def write_csv(path, columns: dict) -> str:
    names = list(columns)
    table = np.column_stack([np.asarray(columns[n], np.float64) for n in names])
    np.savetxt(path, table, delimiter=",", header=",".join(names), comments="", fmt="%.17g")
    return str(path)


def folder(tmp_path, name: str):
    """A fresh folder for one more run of a test."""
    (tmp_path / name).mkdir()
    return tmp_path / name


def glm(family, X, y, **kwargs):
    """statsmodels' GLM, b last as in the tool's theta."""
    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sm.GLM(y, sm.add_constant(X, prepend=False), family=family, **kwargs)
    return model.fit(tol=1e-13, maxiter=300)


def coefficients(metrics, key):
    return np.array([c[key] for c in metrics["statistics"]["coefficients"]])


def assert_is_glm(metrics, ref, params=1e-8, errors=1e-8, figures=1e-8):
    """The issue's tolerances: coefficients 1e-8, errors 1e-8, deviance and likelihood 1e-8."""
    stats = metrics["statistics"]
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=params)
    np.testing.assert_allclose(coefficients(metrics, "std_error"), ref.bse, rtol=errors)
    assert stats["deviance"] == pytest.approx(ref.deviance, rel=figures)
    assert stats["null_deviance"] == pytest.approx(ref.null_deviance, rel=figures)
    assert stats["pearson_chi2"] == pytest.approx(ref.pearson_chi2, rel=figures)
    assert stats["scale"] == pytest.approx(ref.scale, rel=figures)
    assert stats["log_likelihood"] == pytest.approx(ref.llf, rel=figures)
    assert stats["aic"] == pytest.approx(ref.aic, rel=figures)
    assert stats["bic"] == pytest.approx(ref.bic_llf, rel=figures)
    assert stats["dof"] == ref.df_resid


@pytest.fixture(scope="module")
def star98(tmp_path_factory):
    """statsmodels' star98: the share of students above the national median maths score,
    NABOVE / (NABOVE + NBELOW), of that many students, by 20 school district features."""
    import statsmodels.api as sm

    data = sm.datasets.star98.load_pandas()
    endog, exog = data.endog, data.exog
    trials = (endog["NABOVE"] + endog["NBELOW"]).to_numpy()
    share = endog["NABOVE"].to_numpy() / trials
    columns = {name: exog[name].to_numpy() for name in exog.columns}
    path = tmp_path_factory.mktemp("star98") / "star98.csv"
    write_csv(path, {**columns, "trials": trials, "share": share})
    return str(path), exog.to_numpy(np.float64), endog.to_numpy(np.float64)


def test_binomial_proportions_with_trials_as_weights_are_statsmodels_star98(star98, tmp_path):
    """R's glm(share ~ ., weights = trials, family = binomial): statsmodels' two-column
    binomial, its log-likelihood with the binomial coefficients."""
    import statsmodels.api as sm

    path, X, successes_failures = star98
    args = ["--model", "binomial", "--data", path, "--target", "share", "--weights", "trials"]
    metrics = run_metrics(tmp_path, 1, [*args, "--solver", "exact"])
    assert_is_glm(metrics, glm(sm.families.Binomial(), X, successes_failures))


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher, size", [("mpirun", 2), ("horovodrun-gloo", 3)])
def test_weighted_fits_are_the_same_on_2_and_3_ranks(star98, launcher, size, tmp_path):
    """The exact fit with weights agrees across rank counts to 1e-10, and with statsmodels."""
    import statsmodels.api as sm

    path, X, successes_failures = star98
    args = ["--model", "binomial", "--data", path, "--target", "share", "--weights", "trials"]
    args += ["--solver", "exact"]
    run = launch(launcher, size, args, tmp_path)
    assert run.returncode == 0, run.output
    one = run_metrics(folder(tmp_path, "one"), 1, args)
    np.testing.assert_allclose(params_of(run.metrics), params_of(one), rtol=1e-10, atol=1e-12)
    assert_is_glm(run.metrics, glm(sm.families.Binomial(), X, successes_failures))


def test_weighted_gamma_is_statsmodels_var_weights_scotland(tmp_path):
    """statsmodels' scotland (the Yes vote by council area, Gamma with its inverse link), each
    row with a prior weight: GLM(var_weights=)."""
    import statsmodels.api as sm

    data = sm.datasets.scotland.load_pandas()
    X, y = data.exog.to_numpy(np.float64), data.endog.to_numpy(np.float64)
    weight = np.random.default_rng(3).integers(1, 5, len(y)).astype(np.float64)
    columns = {name: data.exog[name].to_numpy() for name in data.exog.columns}
    path = write_csv(tmp_path / "scotland.csv", {**columns, "w": weight, "yes": y})
    args = ["--model", "gamma", "--data", path, "--weights", "w", "--solver", "exact"]
    metrics = run_metrics(tmp_path, 1, args)
    assert_is_glm(metrics, glm(sm.families.Gamma(), X, y, var_weights=weight))


@pytest.fixture(scope="module")
def cpunish(tmp_path_factory):
    """statsmodels' cpunish: executions by US state (Poisson), with an exposure of our own."""
    import statsmodels.api as sm

    data = sm.datasets.cpunish.load_pandas()
    exog = data.exog.copy()
    exog["LN_VC100k96"] = np.log(exog.pop("VC100k96"))
    X, y = exog.to_numpy(np.float64), data.endog.to_numpy(np.float64)
    exposure = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    columns = {name: exog[name].to_numpy() for name in exog.columns}
    path = tmp_path_factory.mktemp("cpunish") / "cpunish.csv"
    write_csv(path, {**columns, "years": exposure, "executions": y})
    return str(path), X, y, exposure


def test_poisson_with_an_exposure_is_statsmodels_cpunish(cpunish, tmp_path):
    """GLM(exposure=): log(exposure) in the linear predictor, and the null deviance of the
    intercept-only model with the same offset, as statsmodels and R compute it."""
    import statsmodels.api as sm

    path, X, y, exposure = cpunish
    args = ["--model", "poisson", "--data", path, "--exposure", "years", "--solver", "exact"]
    metrics = run_metrics(tmp_path, 1, args)
    assert_is_glm(metrics, glm(sm.families.Poisson(), X, y, exposure=exposure))
    # --offset log(years) is the same model
    offset_path = write_csv(
        tmp_path / "offset.csv",
        {**{f"x{j}": X[:, j] for j in range(X.shape[1])}, "o": np.log(exposure), "y": y},
    )
    args = ["--model", "poisson", "--data", offset_path, "--offset", "o", "--solver", "exact"]
    again = run_metrics(folder(tmp_path, "o"), 1, args)
    np.testing.assert_allclose(params_of(again), params_of(metrics), rtol=1e-10)


def test_weighted_least_squares_is_statsmodels_wls(tmp_path):
    """The linear family's TSQR of √w·[X y]: WLS's coefficients, errors and R²."""
    import statsmodels.api as sm

    rng = np.random.default_rng(8)
    X = rng.standard_normal((400, 3))
    sigma = np.exp(X[:, 0])
    y = X @ [1.0, -2.0, 0.5] + 3.0 + sigma * rng.standard_normal(400)
    weight = 1.0 / sigma**2
    path = write_csv(
        tmp_path / "wls.csv", {"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "w": weight, "y": y}
    )
    metrics = run_metrics(tmp_path, 1, ["--data", path, "--weights", "w", "--solver", "exact"])
    ref = sm.WLS(y, sm.add_constant(X, prepend=False), weights=weight).fit()
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-10)
    np.testing.assert_allclose(coefficients(metrics, "std_error"), ref.bse, rtol=1e-10)
    assert metrics["statistics"]["r2"] == pytest.approx(ref.rsquared, rel=1e-10)
    assert metrics["statistics"]["dof"] == ref.df_resid


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(9)
    X = rng.standard_normal((300, 2))
    y = rng.poisson(np.exp(X @ [0.4, -0.3] + 0.6)).astype(np.float64)
    return X, y


def poisson_fit(tmp_path, name, X, y, weight=None, solver="exact"):
    columns = {"a": X[:, 0], "b": X[:, 1], "y": y}
    args = ["--model", "poisson", "--solver", solver]
    if weight is not None:
        columns = {"a": X[:, 0], "b": X[:, 1], "w": weight, "y": y}
        args += ["--weights", "w"]
    where = folder(tmp_path, name)
    return run_metrics(where, 1, [*args, "--data", write_csv(where / f"{name}.csv", columns)])


def test_a_zero_weight_is_the_row_removed_and_an_integer_weight_the_row_repeated(counts, tmp_path):
    X, y = counts
    weight = np.ones(len(y))
    weight[[3, 50, 200]] = 0.0
    weight[[7, 8]] = 3.0
    weighted = poisson_fit(tmp_path, "weighted", X, y, weight)
    keep = np.repeat(np.arange(len(y)), weight.astype(int))  # removed, and repeated
    plain = poisson_fit(tmp_path, "repeated", X[keep], y[keep])
    np.testing.assert_allclose(params_of(weighted), params_of(plain), rtol=1e-10)
    # A zero-weight row is not a row: the same degrees of freedom as without it
    removed = poisson_fit(tmp_path, "removed", X[weight > 0], y[weight > 0], weight[weight > 0])
    assert weighted["statistics"]["dof"] == removed["statistics"]["dof"] == len(y) - 3 - 3
    np.testing.assert_allclose(params_of(weighted), params_of(removed), rtol=1e-12)
    # A weight of 1 everywhere is no weight at all
    ones = poisson_fit(tmp_path, "ones", X, y, np.ones(len(y)))
    unweighted = poisson_fit(tmp_path, "unweighted", X, y)
    np.testing.assert_allclose(params_of(ones), params_of(unweighted), rtol=1e-12)


def test_npz_arrays_and_parquet_columns_carry_weights_as_csv_does(counts, tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    X, y = counts
    weight = np.random.default_rng(10).uniform(0.1, 3.0, len(y))
    from_csv = poisson_fit(tmp_path, "csv", X, y, weight)
    np.savez(tmp_path / "w.npz", X=X, y=y, w=weight)
    args = ["--model", "poisson", "--solver", "exact", "--weights", "w"]
    from_npz = run_metrics(tmp_path, 1, [*args, "--data", str(tmp_path / "w.npz")])
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "w": weight, "y": y})
    pq.write_table(table, tmp_path / "w.parquet")
    parquet_args = [*args, "--data", str(tmp_path / "w.parquet")]
    from_parquet = run_metrics(folder(tmp_path, "pq"), 1, parquet_args)
    for metrics in (from_npz, from_parquet):
        np.testing.assert_allclose(params_of(metrics), params_of(from_csv), rtol=1e-12)


def weighted_poisson_gradient(theta, Xb, y, l2=0.0):
    """The batch's mean of w x (exp(η + o) - y η): [X w o] packed as the reference's X."""
    X, w, o = Xb[:, :-2], Xb[:, -2], Xb[:, -1]
    error = w * (np.exp(X @ theta[:-1] + theta[-1] + o) - y)
    return np.append(X.T @ error, error.sum()) / len(y)


@pytest.mark.multiprocess
def test_sgd_with_weights_and_an_offset_is_exactly_averaged_sgd(counts, tmp_path):
    X, y = counts
    rng = np.random.default_rng(11)
    weight, offset = rng.uniform(0.0, 2.0, len(y)), rng.uniform(-0.5, 0.5, len(y))
    path = write_csv(
        tmp_path / "wo.csv", {"a": X[:, 0], "b": X[:, 1], "w": weight, "o": offset, "y": y}
    )
    steps, lr, batch = 30, 0.05, 10
    args = ["--model", "poisson", "--data", path, "--weights", "w", "--offset", "o"]
    args += ["--num_steps", str(steps), "--learning_rate", str(lr), "--batch_size", str(batch)]
    run = launch("mpirun", 2, [*args, "--log_every", "10"], tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    expected = averaged(
        np.c_[X, weight, offset],
        y,
        ranks=2,
        batch_size=batch,
        steps=steps,
        optimizer=SGD(constant(lr)),
        w0=m["initial_w"],
        b0=m["initial_b"],
        grad=weighted_poisson_gradient,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--weights", -1.0, "line 14: -1 in column 'c' (--weights); a weight must be >= 0"),
        ("--weights", np.nan, "line 14: a missing value ('nan') in column 'c'; fill it, or"),
        ("--weights", np.inf, "line 14: NaN or inf in column 'c'"),
        ("--exposure", 0.0, "line 14: 0 in column 'c' (--exposure); an exposure must be > 0"),
        ("--exposure", -2.0, "line 14: -2 in column 'c' (--exposure); an exposure must be > 0"),
        ("--offset", np.nan, "line 14: a missing value ('nan') in column 'c'; fill it, or"),
    ],
)
def test_a_bad_weight_exposure_or_offset_is_refused_naming_its_row(
    counts, flag, value, message, tmp_path, capsys
):
    X, y = counts
    column = np.ones(len(y))
    column[12] = value
    path = write_csv(tmp_path / "bad.csv", {"a": X[:, 0], "b": X[:, 1], "c": column, "y": y})
    code = main(["--model", "poisson", "--data", path, flag, "c", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{path} {message}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--weights", "w"],
            "--weights names columns of a CSV or Parquet file, so it needs --data",
        ),
        (
            ["--model", "gamma", "--exposure", "e", "--data", "x.csv"],
            "--exposure multiplies the mean only under the log link, and --model gamma has the "
            "inverse link here",
        ),
        (["--weights", "w", "--offset", "w", "--data", "x.csv"], "name the same column 'w'"),
    ],
)
def test_settings_that_cannot_go_together_are_refused(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_a_column_that_is_not_there_and_a_npy_file_are_refused(counts, tmp_path, capsys):
    X, y = counts
    path = write_csv(tmp_path / "d.csv", {"a": X[:, 0], "b": X[:, 1], "y": y})
    assert main(["--data", path, "--weights", "size", "--quiet"]) == 2
    assert (
        f"--weights 'size' is not a column of {path}; columns: a, b, y" in capsys.readouterr().err
    )
    assert main(["--data", path, "--weights", "y", "--quiet"]) == 2
    assert f"--weights names 'y', the target column of {path}" in capsys.readouterr().err
    np.save(tmp_path / "d.npy", np.c_[X, y])
    assert main(["--data", str(tmp_path / "d.npy"), "--weights", "w", "--quiet"]) == 2
    assert "a .npy file has neither: save the arrays in one .npz" in capsys.readouterr().err
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert main(["--data", str(tmp_path / "d.npz"), "--offset", "o", "--quiet"]) == 2
    assert "has no array 'o' beside X and y" in capsys.readouterr().err


def test_a_binomial_proportion_needs_weights_and_stays_in_0_1(star98, tmp_path, capsys):
    path, _, _ = star98
    args = ["--model", "binomial", "--data", path, "--target", "share", "--quiet"]
    assert main(args) == 2  # a proportion without its trials
    assert "--model binomial needs a target of 0 or 1" in capsys.readouterr().err


def test_training_scores_are_scikit_learns_weighted_ones(counts, tmp_path):
    """The summary's training scores count each row by its weight, as sample_weight does."""
    from sklearn.metrics import d2_tweedie_score, mean_poisson_deviance

    X, y = counts
    weight = np.random.default_rng(12).uniform(0.0, 3.0, len(y))
    metrics = poisson_fit(tmp_path, "w", X, y, weight)
    theta = params_of(metrics)
    mu = np.exp(X @ theta[:-1] + theta[-1])
    scores = metrics["training_scores"]
    assert scores["num_samples"] == len(y)
    expected = mean_poisson_deviance(y, mu, sample_weight=weight)
    assert scores["mean_deviance"] == pytest.approx(expected, rel=1e-10)
    expected = d2_tweedie_score(y, mu, sample_weight=weight, power=1)
    assert scores["d2"] == pytest.approx(expected, rel=1e-10)


def test_weighted_classification_scores_are_scikit_learns(tmp_path):
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    rng = np.random.default_rng(13)
    X = rng.standard_normal((400, 2))
    y = (rng.random(400) < 1 / (1 + np.exp(-(X @ [1.0, -1.0])))).astype(np.float64)
    weight = rng.uniform(0.0, 2.0, 400)
    path = write_csv(tmp_path / "c.csv", {"a": X[:, 0], "b": X[:, 1], "w": weight, "y": y})
    args = ["--model", "logistic", "--data", path, "--weights", "w", "--solver", "exact"]
    metrics = run_metrics(tmp_path, 1, args)
    theta = params_of(metrics)
    p = 1 / (1 + np.exp(-(X @ theta[:-1] + theta[-1])))
    scores = metrics["training_scores"]
    assert scores["log_loss"] == pytest.approx(log_loss(y, p, sample_weight=weight), rel=1e-10)
    accuracy = accuracy_score(y, p > 0.5, sample_weight=weight)
    assert scores["accuracy"] == pytest.approx(accuracy, rel=1e-12)
    assert scores["auc"] == pytest.approx(roc_auc_score(y, p, sample_weight=weight), rel=1e-10)


def test_predict_adds_the_exposure_of_the_new_rows_and_needs_its_column(cpunish, tmp_path, capsys):
    """The exported model keeps its exposure column: predict's μ is statsmodels' predict with
    the new rows' exposure, and new rows without that column are refused."""
    import statsmodels.api as sm

    path, X, y, exposure = cpunish
    model = str(tmp_path / "model")
    args = ["--model", "poisson", "--data", path, "--exposure", "years", "--solver", "exact"]
    assert main([*args, "--quiet", "--export", model]) == 0
    out = tmp_path / "mu.npy"
    assert main(["predict", "--model", model, "--data", path, "--out", str(out)]) == 0
    ref = glm(sm.families.Poisson(), X, y, exposure=exposure)
    expected = ref.predict(sm.add_constant(X, prepend=False), exposure=exposure)
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-8)
    header = open(path).readline().strip().split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    keep = [j for j, name in enumerate(header) if name != "years"]
    without = tmp_path / "without.csv"
    names = ",".join(header[j] for j in keep)
    np.savetxt(without, table[:, keep], delimiter=",", header=names, comments="")
    capsys.readouterr()
    assert main(["predict", "--model", model, "--data", str(without), "--out", str(out)]) == 2
    assert (
        f"{without} has no column 'years': the model {model} adds it (--exposure) to each row's "
        "linear predictor" in capsys.readouterr().err
    )


@pytest.mark.parametrize("cov_type", ["HC0", "HC1"])
def test_robust_errors_of_least_squares_are_statsmodels_ols(cov_type, tmp_path):
    import statsmodels.api as sm

    rng = np.random.default_rng(14)
    X = rng.standard_normal((300, 2))
    y = X @ [2.0, -1.0] + 1.0 + np.exp(X[:, 0]) * rng.standard_normal(300)
    path = write_csv(tmp_path / "h.csv", {"a": X[:, 0], "b": X[:, 1], "y": y})
    args = ["--data", path, "--solver", "exact", "--cov_type", cov_type]
    metrics = run_metrics(tmp_path, 1, args)
    ref = sm.OLS(y, sm.add_constant(X, prepend=False)).fit(cov_type=cov_type)
    np.testing.assert_allclose(coefficients(metrics, "std_error"), ref.bse, rtol=1e-10)
    assert metrics["statistics"]["cov_type"] == cov_type


@pytest.mark.parametrize("weighted", [False, True])
def test_robust_errors_of_a_glm_are_statsmodels_sandwich(counts, weighted, tmp_path):
    """HC0 is statsmodels' GLM(cov_type="HC0"), with var_weights too; HC1 is HC0 times
    n / (n - k), as statsmodels' OLS has it (its GLM returns HC0 for HC1)."""
    import statsmodels.api as sm

    X, y = counts
    weight = np.random.default_rng(15).uniform(0.2, 2.0, len(y)) if weighted else None
    kwargs = {"var_weights": weight} if weighted else {}
    ref = sm.GLM(y, sm.add_constant(X, prepend=False), family=sm.families.Poisson(), **kwargs)
    ref = ref.fit(tol=1e-13, cov_type="HC0")
    for cov_type, factor in (("HC0", 1.0), ("HC1", len(y) / (len(y) - 3))):
        columns = {"a": X[:, 0], "b": X[:, 1], **({"w": weight} if weighted else {}), "y": y}
        where = folder(tmp_path, cov_type)
        args = ["--model", "poisson", "--data", write_csv(where / "d.csv", columns)]
        args += ["--solver", "exact", "--cov_type", cov_type]
        metrics = run_metrics(where, 1, [*args, *(["--weights", "w"] if weighted else [])])
        expected = ref.bse * np.sqrt(factor)
        np.testing.assert_allclose(coefficients(metrics, "std_error"), expected, rtol=1e-8)
