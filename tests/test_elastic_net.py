"""The elastic net, its path and its cross-validation (solvers/path.py), against independent
references: scikit-learn's ElasticNet, glum's GeneralizedLinearRegressor for every family, R's
glmnet (where R is installed), and the KKT conditions computed here from the rows."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest

from conftest import launch, launcher_env, refused, run_metrics

FEATURES = [f"x{j}" for j in range(6)]


def _data(n: int = 1500, seed: int = 3) -> pd.DataFrame:
    """Correlated features of unlike scales and means, weights, an exposure, folds, and a
    target of each family."""
    rng = np.random.default_rng(seed)
    F = len(FEATURES)
    cov = 0.6 ** np.abs(np.subtract.outer(np.arange(F), np.arange(F)))
    X = rng.multivariate_normal(np.zeros(F), cov, size=n) * [1, 2, 0.5, 3, 1, 10]
    X += [0, 5, 0, -3, 0, 100]
    df = pd.DataFrame(X, columns=FEATURES)
    df["w"] = rng.uniform(0.5, 2, n)
    df["exposure"] = rng.uniform(0.5, 3, n)
    df["fold"] = rng.integers(1, 6, n)
    df["y"] = X @ [1.5, -0.5, 0, 0, 2, 0.01] + rng.normal(size=n)
    df["count"] = rng.poisson(df.exposure * np.exp(0.3 * X[:, 0] - 0.2 * X[:, 4] + 0.1))
    df["yes"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-(X[:, 0] - X[:, 4])))).astype(int)
    df["cost"] = rng.gamma(2.0, np.exp(0.5 + 0.2 * X[:, 0]) / 2.0)
    return df


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    df = _data()
    path = tmp_path_factory.mktemp("enet") / "data.csv"
    df.to_csv(path, index=False)
    return df, path


def _args(path, target: str, model: str = "linear", *more: str) -> list[str]:
    return [
        "--solver",
        "exact",
        "--data",
        str(path),
        "--target",
        target,
        "--features",
        ",".join(FEATURES),
        "--model",
        model,
        "--quiet",
        *more,
    ]


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
def test_least_squares_equals_scikit_learn_elastic_net(data, tmp_path, l1_ratio):
    from sklearn.linear_model import ElasticNet

    df, path = data
    more = ["--weights", "w", "--no-standardize", "--alpha", "0.05", "--l1_ratio", str(l1_ratio)]
    m = run_metrics(tmp_path, 1, _args(path, "y", "linear", *more))
    ref = ElasticNet(alpha=0.05, l1_ratio=l1_ratio, tol=1e-14, max_iter=1_000_000)
    ref.fit(df[FEATURES].values, df.y.values, sample_weight=df.w.values)
    np.testing.assert_allclose(m["w"], ref.coef_, rtol=0, atol=1e-8)
    assert m["b"] == pytest.approx(ref.intercept_, abs=1e-8)
    assert m["passes"] == 1 and m["cv"] is None
    assert m["statistics"]["undefined"]["std_error"].startswith("no standard errors")


GLUM_FAMILIES = [
    ("poisson", "count", "poisson", ["--exposure", "exposure"]),
    ("logistic", "yes", "binomial", []),
    ("gamma", "cost", "gamma", []),
]


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
@pytest.mark.parametrize(("model", "target", "family", "more"), GLUM_FAMILIES)
def test_every_family_equals_glum(data, tmp_path, model, target, family, more, l1_ratio):
    """glum's objective is the tool's: (1 / 2Σw) Σ w d + α (ρ |β|₁ + (1 - ρ)/2 |β|²)."""
    from glum import GeneralizedLinearRegressor

    df, path = data
    link = ["--link", "log"] if model == "gamma" else []
    args = _args(path, target, model, "--weights", "w", *more, *link, "--no-standardize")
    m = run_metrics(tmp_path, 1, [*args, "--alpha", "0.01", "--l1_ratio", str(l1_ratio)])
    offset = np.log(df.exposure.values) if more else None
    ref = GeneralizedLinearRegressor(
        family=family, link="log" if model == "gamma" else "auto", alpha=0.01,
        l1_ratio=l1_ratio, gradient_tol=1e-13, max_iter=10_000,
    )  # fmt: skip
    ref.fit(df[FEATURES].values, df[target].values, sample_weight=df.w.values, offset=offset)
    np.testing.assert_allclose(m["w"], ref.coef_, rtol=0, atol=1e-6)
    assert m["b"] == pytest.approx(ref.intercept_, abs=1e-6)


def _kkt(df, target, mean_of, weight_of, theta, alpha, l1_ratio, scales):
    """Each coefficient's violation of the elastic net's KKT conditions at theta, in its
    feature's scale, and the intercept's, from the rows: the gradient of (1/2Σw) Σ w d is
    -(1/Σw) Xᵀ (w (y - μ) / (V g')), computed here per family (mean_of, weight_of)."""
    X, y, w = df[FEATURES].values, df[target].values, df.w.values
    eta = X @ theta[:-1] + theta[-1]
    mu = mean_of(eta)
    score = w * (y - mu) * weight_of(mu)  # w (y - μ) / (V g')
    gradient = -(X.T @ score) / w.sum()
    l1, l2 = alpha * l1_ratio * scales, alpha * (1 - l1_ratio) * scales**2
    beta = theta[:-1]
    g = gradient + l2 * beta
    worst = np.where(beta == 0, np.maximum(np.abs(g) - l1, 0), np.abs(g + l1 * np.sign(beta)))
    return worst / scales, abs(score.sum()) / w.sum()


KKT_FAMILIES = [
    ("linear", "y", lambda eta: eta, lambda mu: np.ones_like(mu)),
    ("poisson", "count", np.exp, lambda mu: np.ones_like(mu)),  # V g' = μ / μ
    ("logistic", "yes", lambda eta: 1 / (1 + np.exp(-eta)), lambda mu: np.ones_like(mu)),
    ("gamma", "cost", np.exp, lambda mu: 1 / mu),  # log link, not canonical: V g' = μ² / μ
]


@pytest.mark.parametrize(("model", "target", "mean_of", "weight_of"), KKT_FAMILIES)
def test_kkt_conditions_hold_along_the_path(data, tmp_path, model, target, mean_of, weight_of):
    df, path = data
    link = ["--link", "log"] if model == "gamma" else []
    args = _args(path, target, model, "--weights", "w", *link, "--l1_ratio", "0.7")
    m = run_metrics(tmp_path, 1, [*args, "--n_alphas", "15", "--whole_path"])
    w = df.w.values
    X = df[FEATURES].values
    scales = np.sqrt(np.average((X - np.average(X, axis=0, weights=w)) ** 2, axis=0, weights=w))
    alphas = m["path"]["alpha"]
    assert len(alphas) == 15 and alphas[0] > alphas[-1]
    assert m["path"]["nonzero"][0] == 0 and m["path"]["nonzero"][-1] == len(FEATURES)
    for alpha, coef, b in zip(alphas, m["path"]["w"], m["path"]["b"]):
        theta = np.append(coef, b)
        worst, intercept = _kkt(df, target, mean_of, weight_of, theta, alpha, 0.7, scales)
        # relative to the gradient's own size at the null model, α_max (its largest entry)
        assert np.max(worst) < 1e-9 * alphas[0], (alpha, worst)
        assert intercept < 1e-9, (alpha, intercept)


def test_a_gaussian_path_with_five_fold_cross_validation_reads_each_row_once(data, tmp_path):
    df, path = data
    m = run_metrics(tmp_path, 1, _args(path, "y", "linear", "--cv", "5", "--l1_ratio", "0.5"))
    assert m["passes"] == 1
    assert 5 <= len(m["path"]["alpha"]) == len(m["cv"]["mean"]) < 100  # glmnet's early end
    assert m["cv"]["alpha_min"] <= m["cv"]["alpha_1se"]
    chosen = m["path"]["chosen"]
    assert m["path"]["alpha"][chosen] == m["cv"]["alpha_min"]
    np.testing.assert_allclose(m["w"], m["path"]["w"][chosen], rtol=0, atol=0)


@pytest.mark.parametrize(("model", "target"), [("linear", "y"), ("poisson", "count")])
def test_each_folds_held_out_deviance_is_that_of_a_fit_on_its_training_rows(
    data, tmp_path, model, target
):
    """Every fold's model comes from the same passes as the full path: each equals glum (or
    scikit-learn) fitted on that fold's training rows alone, scored on its held-out rows."""
    from glum import GeneralizedLinearRegressor

    df, path = data
    args = _args(path, target, model, "--fold_column", "fold", "--no-standardize")
    m = run_metrics(tmp_path, 1, [*args, "--n_alphas", "6", "--l1_ratio", "0.5"])
    family = "normal" if model == "linear" else "poisson"
    assert m["passes"] == 1 if model == "linear" else m["passes"] > 6
    for i in (1, 4):
        alpha = m["path"]["alpha"][i]
        raw = []
        for k in range(1, 6):
            train, held = df[df.fold != k], df[df.fold == k]
            ref = GeneralizedLinearRegressor(
                family=family, alpha=alpha, l1_ratio=0.5, gradient_tol=1e-13, max_iter=10_000
            ).fit(train[FEATURES].values, train[target].values)
            mu = ref.predict(held[FEATURES].values)
            y = held[target].values
            if model == "linear":
                d = (y - mu) ** 2
            else:
                d = 2 * (np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0) - (y - mu))
            raw.append(d.mean())
        sizes = np.bincount(df.fold)[1:]
        mean = sizes @ raw / sizes.sum()
        assert m["cv"]["mean"][i] == pytest.approx(mean, rel=1e-6)


def test_one_standard_error_selects_the_larger_strength(data, tmp_path):
    df, path = data
    args = _args(path, "y", "linear", "--cv", "4", "--select", "1se", "--n_alphas", "30")
    m = run_metrics(tmp_path, 1, args)
    chosen = m["path"]["chosen"]
    assert m["path"]["alpha"][chosen] == m["cv"]["alpha_1se"] >= m["cv"]["alpha_min"]
    mean, se = np.array(m["cv"]["mean"]), np.array(m["cv"]["se"])
    best = int(np.argmin(mean))
    within = np.flatnonzero(mean <= mean[best] + se[best])
    assert chosen == within[0]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--l1_ratio", "1.5"], "--l1_ratio must be a number in [0, 1], got 1.5"),
        (["--alpha", "-1"], "--alpha must be a finite number >= 0, got -1.0"),
        (["--cv", "1"], "--cv must be a whole number of folds >= 2, got 1"),
        (["--solver", "sgd", "--l1_ratio", "0.5"], "only --solver exact fits"),
        (["--cv", "3", "--fold_column", "fold"], "give one of them"),
        (["--alpha", "0.1", "--l2", "0.1"], "two penalties"),
        (["--select", "1se"], "needs --cv or --fold_column"),
        (["--fold_alpha", "sum"], "needs --cv or --fold_column"),
    ],
)
def test_bad_penalty_settings_end_with_exit_2(capsys, data, argv, says):
    _, path = data
    args = [a for a in _args(path, "y") if a not in ("--solver", "exact")]
    solver = [] if "--solver" in argv else ["--solver", "exact"]
    assert says in refused(capsys, [*args, *solver, *argv])


def test_fold_columns_that_are_not_folds_end_with_exit_2(capsys, data, tmp_path):
    df, _ = data
    one = df.assign(fold=1)
    odd = df.assign(fold=df.fold + 0.5)
    for frame, says in ((one, "holds one fold (1); cross-validation needs at least two"),
                        (odd, "a fold is a whole number")):  # fmt: skip
        p = tmp_path / "folds.csv"
        frame.to_csv(p, index=False)
        assert says in refused(capsys, [*_args(p, "y"), "--fold_column", "fold"])


@pytest.mark.multiprocess
@pytest.mark.parametrize(("model", "target"), [("linear", "y"), ("logistic", "yes")])
def test_the_path_and_its_folds_are_the_same_on_any_number_of_ranks(data, tmp_path, model, target):
    _, path = data
    args = _args(path, target, model, "--weights", "w", "--cv", "3", "--n_alphas", "12")
    runs = [run_metrics(tmp_path, size, [*args, "--l1_ratio", "0.5"]) for size in (1, 2, 3)]
    first = runs[0]
    for other in runs[1:]:
        assert other["size"] > 1
        np.testing.assert_allclose(other["path"]["alpha"], first["path"]["alpha"], rtol=1e-12)
        np.testing.assert_allclose(other["path"]["w"], first["path"]["w"], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(other["cv"]["mean"], first["cv"]["mean"], rtol=1e-10)
        assert other["path"]["chosen"] == first["path"]["chosen"]
        assert other["cv"]["alpha_min"] == pytest.approx(first["cv"]["alpha_min"], rel=1e-12)
        assert other["passes"] == first["passes"]


OTHER_FAMILIES = [
    ("poisson", "count", ["--exposure", "exposure"]),
    ("gamma", "cost", ["--link", "log"]),
    ("tweedie", "count", ["--tweedie_power", "1.5"]),
    ("negative_binomial", "count", ["--nb_alpha", "0.5"]),
    ("inverse_gaussian", "cost", ["--link", "log"]),
]


@pytest.mark.multiprocess
@pytest.mark.parametrize(("model", "target", "more"), OTHER_FAMILIES, ids=lambda v: str(v))
def test_every_familys_path_and_folds_are_the_same_on_any_number_of_ranks(
    data, tmp_path, model, target, more
):
    """Each family's path, its folds from a column and the one-standard-error choice, at 1, 2
    and 3 ranks; and the strength chosen is the largest within one standard error of the
    least mean deviance."""
    _, path = data
    args = _args(path, target, model, "--weights", "w", *more, "--fold_column", "fold")
    args += ["--select", "1se", "--n_alphas", "12", "--l1_ratio", "0.5"]
    runs = [run_metrics(tmp_path, size, args) for size in (1, 2, 3)]
    first = runs[0]
    mean, se = np.array(first["cv"]["mean"]), np.array(first["cv"]["se"])
    best = int(np.argmin(mean))
    within = np.flatnonzero(mean <= mean[best] + se[best])
    assert first["path"]["chosen"] == within[0] <= best  # alphas fall: the first is largest
    for other in runs[1:]:
        assert other["size"] > 1
        np.testing.assert_allclose(other["path"]["alpha"], first["path"]["alpha"], rtol=1e-12)
        np.testing.assert_allclose(other["path"]["w"], first["path"]["w"], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(other["cv"]["mean"], first["cv"]["mean"], rtol=1e-9)
        np.testing.assert_allclose(other["cv"]["se"], first["cv"]["se"], rtol=1e-8)
        assert other["path"]["chosen"] == first["path"]["chosen"]


R_SCRIPT = r"""
library(glmnet)
glmnet.control(epsnr=1e-14, mxitnr=1000)  # a family object's IRLS (gamma) to convergence
args <- commandArgs(TRUE)
d <- read.csv(args[1]); X <- as.matrix(d[, strsplit(args[2], ",")[[1]]])
lam <- as.numeric(strsplit(args[4], ",")[[1]])
family <- args[5]
if (!family %in% c("gaussian", "binomial", "poisson")) family <- eval(parse(text=family))
a <- as.numeric(args[6])
free <- glmnet(X, d[[args[3]]], family=family, weights=d$w, alpha=a, thresh=1e-20, maxit=1e7)
fit <- glmnet(X, d[[args[3]]], family=family, weights=d$w, alpha=a, lambda=lam,
              thresh=1e-20, maxit=1e7)
cv <- cv.glmnet(X, d[[args[3]]], family=family, weights=d$w, alpha=a, lambda=lam,
                foldid=d$fold, thresh=1e-20, maxit=1e7)
B <- as.matrix(coef(fit))
g <- function(x) sprintf("%.17g", x)
cat(g(free$lambda), "\n", g(B), "\n", g(cv$cvm), "\n", g(cv$lambda.min), g(cv$lambda.1se), "\n",
    g(cv$cvsd), "\n")
"""


def _glmnet_available() -> bool:
    if shutil.which("Rscript") is None:
        return False
    probe = subprocess.run(["Rscript", "-e", "library(glmnet)"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize(
    ("model", "target", "family", "l1_ratio"),
    [
        ("linear", "y_unit", "gaussian", 0.5),
        ("linear", "y_unit", "gaussian", 1.0),
        ("poisson", "count", "poisson", 0.5),
        ("logistic", "yes", "binomial", 0.5),
        ("logistic", "yes", "binomial", 0.0),
        ("gamma", "cost", 'Gamma(link="log")', 0.5),
    ],
)
def test_path_and_cross_validation_equal_glmnet(data, tmp_path, model, target, family, l1_ratio):
    """glmnet at thresh 1e-20 (at 1e-14 its coefficients move by up to 1e-7), on the default
    path: its whole sequence of strengths (where it starts, how it falls and where it ends),
    its coefficients at every strength, cv.glmnet's mean deviance and its standard error over
    the same folds, and its two choices. glmnet scales a gaussian target to unit variance
    inside, so the gaussian target is given so scaled; and each of cv.glmnet's gaussian folds
    scales its own, which changes their elastic net's objective (not the lasso's, which
    scaling leaves the same): there the CV means agree to 1e-3 only."""
    df, _ = data
    w = df.w.values
    spread = np.sqrt(np.average((df.y - np.average(df.y, weights=w)) ** 2, weights=w))
    df = df.assign(y_unit=df.y / spread)
    path = tmp_path / "glmnet.csv"
    df.to_csv(path, index=False)
    link = ["--link", "log"] if model == "gamma" else []
    args = _args(path, target, model, "--weights", "w", "--fold_column", "fold", *link)
    m = run_metrics(tmp_path, 1, [*args, "--l1_ratio", str(l1_ratio)])
    alphas = m["path"]["alpha"]
    script = tmp_path / "glmnet.R"
    script.write_text(R_SCRIPT)
    lam = ",".join(repr(a) for a in alphas)
    out = subprocess.run(
        ["Rscript", str(script), str(path), ",".join(FEATURES), target, lam, family,
         str(l1_ratio)],
        capture_output=True, text=True, check=True, env=launcher_env(),
    ).stdout.split("\n")  # fmt: skip
    free = np.array(out[0].split(), float)
    B = np.array(out[1].split(), float).reshape(len(alphas), len(FEATURES) + 1)
    cvm, cvsd = np.array(out[2].split(), float), np.array(out[4].split(), float)
    lambda_min, lambda_1se = map(float, out[3].split())
    assert len(alphas) == len(free)  # both ended at the same strength
    np.testing.assert_allclose(alphas, free, rtol=1e-8)
    np.testing.assert_allclose(m["path"]["b"], B[:, 0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(m["path"]["w"], B[:, 1:], rtol=0, atol=1e-6)
    if model == "linear" and l1_ratio < 1:  # each fold's own scaling: another objective
        np.testing.assert_allclose(m["cv"]["mean"], cvm, rtol=1e-3)
        return
    close = 1e-7 if model == "gamma" else 1e-8  # glmnet's IRLS for a family object (gamma)
    np.testing.assert_allclose(m["cv"]["mean"], cvm, rtol=close)
    np.testing.assert_allclose(m["cv"]["se"], cvsd, rtol=close)
    assert m["cv"]["alpha_min"] == pytest.approx(lambda_min, rel=1e-12)
    assert m["cv"]["alpha_1se"] == pytest.approx(lambda_1se, rel=1e-12)


def test_fit_takes_the_penalty_and_returns_the_path(data):
    import hvd_linreg

    df, _ = data
    result = hvd_linreg.fit(
        df[FEATURES],
        df.y,
        weights=df.w,
        solver="exact",
        l1_ratio=0.5,
        cv=5,
        n_alphas=20,
        whole_path=True,
    )
    path = result.path
    assert len(path.alphas) == 20 and path.cv is not None
    np.testing.assert_array_equal(result.params, path.coefficients[path.index])
    assert result.bse is None
    assert "no standard errors" in result.summary()
    metrics = json.loads(json.dumps(result.to_dict()))
    assert metrics["cv"]["alpha_min"] == path.alphas[path.cv.index_min]


@pytest.mark.parametrize("model, target", [("poisson", "count"), ("logistic", "yes")])
def test_each_strengths_figures_are_those_of_its_coefficients(data, model, target):
    """A strength's last small step is taken without a pass, its figures expanded from the pass
    before it (path_passes.figures_after): the training deviance at every strength and the
    mean held-out deviance are those of the reported coefficients, evaluated here from the
    rows, to 1e-12 (the unexpanded figures are up to about 1e-9 off)."""
    import hvd_linreg

    df, _ = data
    X, y, w = df[FEATURES].to_numpy(), df[target].to_numpy(float), df.w.to_numpy()
    result = hvd_linreg.fit(
        X, y, weights=w, fold=df.fold, model=model, solver="exact", l1_ratio=0.5, n_alphas=30
    )
    path = result.path

    def deviance(theta, rows):
        eta = X[rows] @ theta[:-1] + theta[-1]
        if model == "poisson":
            mu, t = np.exp(eta), y[rows]
            d = 2 * (np.where(t > 0, t * np.log(np.where(t > 0, t, 1) / mu), 0) - (t - mu))
        else:
            d = 2 * (np.logaddexp(0, eta) - y[rows] * eta)
        return w[rows] @ d

    every = np.ones(len(y), bool)
    train = [deviance(theta, every) for theta in path.coefficients]
    np.testing.assert_allclose(path.deviance, train, rtol=1e-12)
    held = [
        [deviance(theta, df.fold.to_numpy() == k + 1) for theta in fold]
        for k, fold in enumerate(path.fold_coefficients)
    ]
    np.testing.assert_allclose(path.cv.mean, np.sum(held, axis=0) / w.sum(), rtol=1e-12)


def test_fit_takes_a_list_of_strengths_and_the_fold_settings_with_fold(data):
    """From Python, alpha may be a list (glmnet's lambda vector), and fold= takes the
    settings that need folds: select and fold_alpha. With fold_alpha="sum" each fold is fitted
    at alpha x ΣW / its training rows' ΣW: the fold's model equals a fit of its training rows
    alone at that strength."""
    import hvd_linreg

    df, _ = data
    fold = (np.arange(len(df)) % 3 + 1).astype(float)
    strengths = [0.2, 0.05, 0.01]
    settings = {"solver": "exact", "l1_ratio": 0.5, "standardize": False}
    result = hvd_linreg.fit(
        df[FEATURES],
        df.y,
        weights=df.w,
        fold=fold,
        alpha=strengths,
        select="1se",
        fold_alpha="sum",
        **settings,
    )
    path = result.path
    np.testing.assert_array_equal(path.alphas, strengths)
    assert path.index == path.cv.index_1se
    assert path.fold_coefficients.shape == (3, 3, len(FEATURES) + 1)
    train = fold != 2
    scale = df.w.sum() / df.w[train].sum()
    alone = hvd_linreg.fit(
        df[FEATURES][train], df.y[train], weights=df.w[train], alpha=0.05 * scale, **settings
    )
    np.testing.assert_allclose(path.fold_coefficients[1, 1], alone.params, rtol=0, atol=1e-10)


def _small(model: str, n: int = 400, seed: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    df = _data(n, seed)
    X = (df[FEATURES].values - df[FEATURES].values.mean(axis=0)) / df[FEATURES].values.std(axis=0)
    return X, df[{"linear": "y", "logistic": "yes", "poisson": "count"}[model]].values, df.w.values


def test_the_elastic_net_estimators_equal_scikit_learns():
    import sklearn.linear_model as sk

    from hvd_linreg import estimators

    X, y, w = _small("linear")
    tight = {"tol": 1e-12, "max_iter": 1_000_000}
    pairs = [
        (estimators.ElasticNet(alpha=0.05, l1_ratio=0.3), sk.ElasticNet(alpha=0.05, l1_ratio=0.3)),
        (estimators.Lasso(alpha=0.05), sk.Lasso(alpha=0.05)),
    ]
    for ours, theirs in pairs:
        ours.fit(X, y, sample_weight=w)
        theirs.set_params(**tight).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-8)
        assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-8)
    for ours, theirs in [
        (estimators.ElasticNetCV(l1_ratio=0.5, cv=4), sk.ElasticNetCV(l1_ratio=0.5, cv=4)),
        (estimators.LassoCV(cv=5), sk.LassoCV(cv=5)),
    ]:
        ours.fit(X, y)
        theirs.set_params(**tight).fit(X, y)
        np.testing.assert_allclose(ours.alphas_, theirs.alphas_, rtol=1e-12)
        assert ours.alpha_ == pytest.approx(theirs.alpha_, rel=1e-12)
        np.testing.assert_allclose(ours.mse_path_, theirs.mse_path_, rtol=1e-7)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-8)


@pytest.mark.parametrize("ratio", [1.0, 0.4], ids=["l1", "elasticnet"])
def test_penalized_logistic_regression_equals_scikit_learns_saga(ratio):
    import sklearn.linear_model as sk

    from hvd_linreg import estimators

    X, y, w = _small("logistic", 300)
    ours = estimators.LogisticRegression(l1_ratio=ratio, C=0.1).fit(X, y, w)
    theirs = sk.LogisticRegression(
        l1_ratio=ratio, C=0.1, solver="saga", tol=1e-12, max_iter=1_000_000
    ).fit(X, y, w)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-6)
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-6)


@pytest.mark.parametrize(
    "settings",
    [
        {"scoring": "accuracy"},
        {"scoring": "neg_log_loss", "refit": False},
        {"l1_ratios": [1.0], "Cs": [0.3, 0.01, 3.0, 0.05], "scoring": "accuracy"},
        {"l1_ratios": [0.2, 0.8], "Cs": 6, "scoring": "accuracy"},
        {"penalty": "l1", "Cs": [0.3, 0.01, 3.0, 0.05], "scoring": "accuracy"},
    ],
    ids=["l2-accuracy", "l2-log-loss-no-refit", "l1-given-Cs", "elasticnet", "deprecated-penalty"],
)
def test_logistic_regression_cv_equals_scikit_learns(settings):
    """Every fold's fit at every C comes from the path's shared passes, each fold at
    scikit-learn's strength for its own rows (fold_alpha="sum"), on StratifiedKFold's folds:
    the scores, the paths, the choice and the model equal scikit-learn's. Where saga leaves
    every coefficient at 0 its intercept has not converged (it differs between Cs that must
    give the same null model): there the fold's intercept is checked against the null fit."""
    import sklearn.linear_model as sk
    from sklearn.model_selection import StratifiedKFold

    from hvd_linreg import estimators

    X, y, w = _small("logistic", 300)
    ours = estimators.LogisticRegressionCV(cv=4, **settings).fit(X, y, w)
    ridge = settings.get("penalty", "l2") == "l2" and settings.get("l1_ratios") is None
    solver = "lbfgs" if ridge else "saga"
    with warnings.catch_warnings():
        # saga's ConvergenceWarning at the strongest C; the deprecated penalty=
        warnings.simplefilter("ignore")
        theirs = sk.LogisticRegressionCV(
            cv=4,
            solver=solver,
            tol=1e-12,
            max_iter=1_000_000,
            use_legacy_attributes=True,
            **{"l1_ratios": None, **settings},
        ).fit(X, y, w)
    label = theirs.classes_[1]
    paths, their_paths = ours.coefs_paths_[label], theirs.coefs_paths_[label]
    assert paths.shape == their_paths.shape and ours.n_iter_.shape == theirs.n_iter_.shape
    null = (paths[..., :-1] == 0).all(axis=-1)
    np.testing.assert_allclose(paths[~null], their_paths[~null], rtol=0, atol=1e-6)
    folds = list(StratifiedKFold(4).split(X, y))
    for index in zip(*np.nonzero(null)):
        train = folds[index[0]][0]
        mean = np.average(y[train], weights=w[train])
        assert paths[index][-1] == pytest.approx(np.log(mean / (1 - mean)), abs=1e-8)
    solved = ~null.any(axis=0)  # the Cs (and l1_ratios) at which saga has converged
    np.testing.assert_allclose(
        ours.scores_[label][:, solved], theirs.scores_[label][:, solved], rtol=0, atol=1e-6
    )
    np.testing.assert_allclose(ours.C_, theirs.C_, rtol=1e-12)
    np.testing.assert_array_equal(ours.l1_ratio_, theirs.l1_ratio_)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=0, atol=1e-6)
    assert np.ptp(ours.scores_[label].sum(axis=0)) > 0.1  # the choice is not among equals


def test_logistic_regression_cv_refuses_what_it_cannot_score_or_fit():
    from hvd_linreg import estimators

    X, y, _ = _small("logistic", 100)
    for settings, says in [
        ({"scoring": "roc_auc"}, "scoring='roc_auc' is not supported"),
        ({"penalty": "elasticnet"}, "l1_ratios must be a list"),
        ({"l1_ratios": [0.5, 1.5]}, "l1_ratio must be between 0 and 1; got (l1_ratio=1.5)"),
        ({"Cs": [1.0, -1.0]}, "each of Cs must be a number > 0"),
        ({"cv": 1}, "cv must be at least 2 folds"),
    ]:
        with pytest.raises(ValueError, match=re.escape(says)):
            estimators.LogisticRegressionCV(**settings).fit(X, y)


@pytest.mark.parametrize(("model", "family"), [("poisson", "poisson"), ("logistic", "binomial")])
def test_the_glum_estimators_equal_glums(model, family):
    import glum

    from hvd_linreg import estimators

    X, y, w = _small(model)
    ours = estimators.GeneralizedLinearRegressor(family=family, alpha=0.02, l1_ratio=0.5)
    theirs = glum.GeneralizedLinearRegressor(
        family=family, alpha=0.02, l1_ratio=0.5, gradient_tol=1e-13, max_iter=10_000
    )
    ours.fit(X, y, sample_weight=w)
    theirs.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-6)
    path = {"l1_ratio": 0.5, "n_alphas": 10, "min_alpha_ratio": 1e-3}
    ours = estimators.GeneralizedLinearRegressorCV(family=family, **path)
    theirs = glum.GeneralizedLinearRegressorCV(
        family=family, **path, gradient_tol=1e-13, max_iter=1000
    )
    ours.fit(X, y, sample_weight=w)
    theirs.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(ours.alphas_, theirs.alphas_, rtol=1e-10)
    np.testing.assert_allclose(ours.deviance_path_, theirs.deviance_path_[:, 0], rtol=1e-6)
    assert ours.alpha_ == pytest.approx(theirs.alpha_, rel=1e-12)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-6)


def test_plot_of_a_path_draws_the_coefficients_and_the_cv_curve(data, tmp_path):
    _, path = data
    figure = tmp_path / "path.png"
    args = _args(path, "y", "linear", "--cv", "3", "--n_alphas", "10", "--plot", str(figure))
    m = run_metrics(tmp_path, 1, args)
    assert m["cv"] is not None
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width = matplotlib.image.imread(figure).shape[:2]
    assert width > 1.5 * height  # two panels side by side: the path and the CV curve


def test_the_exported_model_is_the_chosen_one_and_evaluate_passes_over_the_folds(
    data, tmp_path, capsys
):
    from hvd_linreg.cli import main

    df, _ = data
    df = df[[*FEATURES, "fold", "y"]]
    path = tmp_path / "scored.csv"
    df.to_csv(path, index=False)
    model = tmp_path / "model"
    args = _args(path, "y", "linear", "--fold_column", "fold", "--n_alphas", "20")
    m = run_metrics(tmp_path, 1, [*args, "--export", str(model)])
    capsys.readouterr()
    assert main(["evaluate", "--model", str(model), "--data", str(path)]) == 0
    said = capsys.readouterr().out
    fitted = df[FEATURES].values @ m["w"] + m["b"]
    residual = df.y.values - fitted
    r2 = 1 - residual @ residual / np.sum((df.y.values - df.y.mean()) ** 2)
    reported = float(said.split("R²:")[1].split()[0])
    assert reported == pytest.approx(r2, rel=1e-5)
    chosen = m["path"]["chosen"]
    assert m["w"] == m["path"]["w"][chosen]


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher", ["horovodrun-gloo", "horovodrun-mpi"])
def test_the_path_is_the_same_under_horovodrun(data, tmp_path, launcher):
    """Under horovodrun --gloo the exact path's collectives are Horovod's; under horovodrun's
    MPI they are MPI's own through mpi4py, as under mpirun: the same path, folds and choice as
    one process either way."""
    _, path = data
    args = _args(path, "yes", "logistic", "--weights", "w", "--cv", "3", "--n_alphas", "8")
    one = run_metrics(tmp_path, 1, [*args, "--l1_ratio", "0.5"])
    run = launch(launcher, 2, [*args, "--l1_ratio", "0.5"], tmp_path)
    assert run.returncode == 0, run.output
    two = run.metrics
    assert two["size"] == 2
    assert two["controller"] == {"horovodrun-gloo": "Gloo", "horovodrun-mpi": "mpi4py"}[launcher]
    np.testing.assert_allclose(two["path"]["w"], one["path"]["w"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(two["cv"]["mean"], one["cv"]["mean"], rtol=1e-10)
    assert two["path"]["chosen"] == one["path"]["chosen"]


def test_the_path_is_the_same_where_its_sorted_rows_are_not_kept(monkeypatch):
    """The path keeps each rank's rows sorted by fold across its passes where the copy fits its
    share of memory; where it does not, each pass sorts them again: the same fit, bit for bit."""
    import hvd_linreg
    from hvd_linreg.solvers import path_passes

    rng = np.random.default_rng(7)
    X = rng.standard_normal((4000, 5)) + [0.0, 3.0, -2.0, 10.0, 0.0]
    y = rng.poisson(np.exp(0.3 * X[:, 0] - 0.1 * X[:, 1] + 0.02 * X[:, 3]))
    settings = {"model": "poisson", "solver": "exact", "l1_ratio": 0.5, "cv": 4, "n_alphas": 15}
    kept = hvd_linreg.fit(X, y, **settings).path
    monkeypatch.setattr(path_passes, "KEPT_ROWS_SHARE", 0.0)
    again = hvd_linreg.fit(X, y, **settings).path
    np.testing.assert_array_equal(again.coefficients, kept.coefficients)
    np.testing.assert_array_equal(again.fold_coefficients, kept.fold_coefficients)
    np.testing.assert_array_equal(again.cv.raw, kept.cv.raw)
    assert again.passes == kept.passes
