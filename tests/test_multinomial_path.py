"""--model multinomial with the elastic net: glmnet's family = "multinomial" (ungrouped) path,
strength by strength, with prior weights, and cv.glmnet's cross-validation over a fold column,
at 1, 2 and 3 ranks; scikit-learn's multinomial LogisticRegression(l1_ratio=0.5) at its
C; fit()'s result."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest
from test_elastic_net import _glmnet_available

from conftest import launcher_env, run_metrics

SIZES = [
    1,
    pytest.param(2, marks=pytest.mark.multiprocess),
    pytest.param(3, marks=pytest.mark.multiprocess),
]
FEATURES = ["sl", "sw", "pl", "pw"]
SPECIES = ["setosa", "versicolor", "virginica"]


@pytest.fixture(scope="module")
def iris(tmp_path_factory) -> tuple:
    """Fisher's iris as a CSV: four measurements, a whole-number weight, a fold (row i's:
    i mod 5 + 1) and the species as words; (path, frame)."""
    from sklearn.datasets import load_iris

    data = load_iris()
    frame = pd.DataFrame(data.data, columns=FEATURES)
    frame["w"] = np.random.default_rng(2).integers(1, 4, len(frame)).astype(float)
    frame["fold"] = np.arange(len(frame)) % 5 + 1
    frame["species"] = np.array(SPECIES)[data.target]
    path = tmp_path_factory.mktemp("iris") / "iris.csv"
    frame.to_csv(path, index=False, float_format="%.17g")
    return path, frame


R_SCRIPT = r"""
library(glmnet)
a <- commandArgs(TRUE)
d <- read.csv(a[1])
X <- as.matrix(d[, c("sl", "sw", "pl", "pw")]); y <- factor(d$species)
lam <- as.numeric(strsplit(a[2], ",")[[1]])
free <- glmnet(X, y, weights = d$w, family = "multinomial", alpha = 0.5, nlambda = 30,
               thresh = 1e-14, maxit = 1e7)
fit <- glmnet(X, y, weights = d$w, family = "multinomial", alpha = 0.5, lambda = lam,
              thresh = 1e-14, maxit = 1e7)
cv <- cv.glmnet(X, y, weights = d$w, family = "multinomial", alpha = 0.5, lambda = lam,
                foldid = d$fold, thresh = 1e-14, maxit = 1e7)
g <- function(x) sprintf("%.17g", x)
B <- sapply(coef(fit), function(m) as.matrix(m))  # (strengths x 5) rows, a column per class
cat(g(free$lambda[1]), "\n", g(B), "\n", g(fit$dev.ratio), "\n", g(cv$cvm), "\n",
    g(cv$lambda.min), g(cv$lambda.1se), "\n")
"""


def objective(frame: pd.DataFrame, alpha: float, W: np.ndarray, b: np.ndarray, f=1.0) -> float:
    """glmnet's (and the tool's) at l1_ratio 0.5: the weighted mean log-loss + α Σ f (½ s|β| +
    ¼ s² β²), s each feature's weighted standard deviation, f its penalty factor."""
    X, w = frame[FEATURES].to_numpy(), frame.w.to_numpy()
    y = np.searchsorted(SPECIES, frame.species)
    s = np.sqrt(np.average((X - np.average(X, axis=0, weights=w)) ** 2, axis=0, weights=w))
    eta = X @ W.T + b
    log_p = eta - np.log(np.exp(eta).sum(axis=1, keepdims=True))
    loss = -(w @ log_p[np.arange(len(y)), y]) / w.sum()
    return loss + alpha * (0.5 * np.sum(f * s * np.abs(W)) + 0.25 * np.sum(f * (s * W) ** 2))


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize("size", SIZES)
def test_path_and_cross_validation_equal_glmnets(iris, tmp_path, size):
    """At thresh 1e-14: α_max, each class's coefficients at each of 30 strengths to 1e-6, the
    deviance explained, cv.glmnet's mean deviance over the same folds and its two choices."""
    path, _ = iris
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    args += ["--features", ",".join(FEATURES), "--target", "species", "--weights", "w"]
    args += ["--l1_ratio", "0.5", "--n_alphas", "30", "--fold_column", "fold"]
    m = run_metrics(tmp_path, size, args)
    alphas = m["path"]["alpha"]
    script = tmp_path / "glmnet.R"
    script.write_text(R_SCRIPT)
    out = subprocess.run(
        ["Rscript", str(script), str(path), ",".join(repr(a) for a in alphas)],
        capture_output=True, text=True, check=True, env=launcher_env(),
    ).stdout.split("\n")  # fmt: skip
    assert alphas[0] == pytest.approx(float(out[0]), rel=1e-8)
    # R's column-major (intercept + 4 features) x strengths, then class by class
    B = np.array(out[1].split(), float).reshape(3, len(alphas), 5)
    assert m["classes"] == SPECIES
    ours_b = np.array(m["path"]["b"])  # strengths x classes
    ours_w = np.array(m["path"]["w"])  # strengths x classes x features
    theirs_b, theirs_w = B[:, :, 0].T, B[:, :, 1:].transpose(1, 0, 2)
    # glmnet's thresh is on its own measure: its large coefficients (up to 25) differ from
    # ours in the sixth digit, and at every strength ours have the lower objective
    np.testing.assert_allclose(ours_b, theirs_b, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(ours_w, theirs_w, rtol=2e-5, atol=1e-6)
    frame = iris[1]
    for i, alpha in enumerate(alphas):
        ours = objective(frame, alpha, ours_w[i], ours_b[i])
        assert ours <= objective(frame, alpha, theirs_w[i], theirs_b[i]) + 1e-14 * ours
    np.testing.assert_allclose(m["path"]["dev_ratio"], np.array(out[2].split(), float), atol=1e-8)
    # the folds' fits at the smallest strengths carry glmnet's sixth-digit error too
    np.testing.assert_allclose(m["cv"]["mean"], np.array(out[3].split(), float), rtol=5e-5)
    lambda_min, lambda_1se = map(float, out[4].split())
    assert m["cv"]["alpha_min"] == pytest.approx(lambda_min, rel=1e-12)
    assert m["cv"]["alpha_1se"] == pytest.approx(lambda_1se, rel=1e-12)
    chosen = [c for c in m["statistics"]["coefficients"] if c["class"] == "virginica"]
    index = m["path"]["chosen"]
    assert [c["estimate"] for c in chosen] == [*ours_w[index, 2], ours_b[index, 2]]


CONTROLS_SCRIPT = r"""
library(glmnet)
a <- commandArgs(TRUE)
d <- read.csv(a[1])
X <- as.matrix(d[, c("sl", "sw", "pl", "pw")]); y <- factor(d$species)
lam <- as.numeric(strsplit(a[2], ",")[[1]])
v <- function(i) as.numeric(strsplit(a[i], ",")[[1]])
run <- function(...) glmnet(X, y, weights = d$w, family = "multinomial", alpha = 0.5,
                            thresh = 1e-14, maxit = 1e7, penalty.factor = v(3),
                            exclude = if (a[4] == "") NULL else v(4), lower.limits = v(5),
                            upper.limits = v(6), ...)
free <- run(nlambda = 30)
fit <- run(lambda = lam)
g <- function(x) sprintf("%.17g", x)
cat(g(free$lambda[1]), "\n", g(sapply(coef(fit), function(m) as.matrix(m))), "\n")
"""
# The tool's flags, glmnet's penalty.factor, exclude, lower and upper limits, and the factors
# as the tool rescales them (an excluded feature counting 1, the four summing to 4)
MULTINOMIAL_CONTROLS = {
    "factors, exclusion and limits": (
        ["--penalty_factor", "sw=2,pl=0.5", "--exclude", "sw", "--lower_limits", "pw=-0.5",
         "--upper_limits", "pl=1"],
        ["1,2,0.5,1", "2", "-Inf,-Inf,-Inf,-0.5", "Inf,Inf,1,Inf"],
        np.array([1.0, 1.0, 0.5, 1.0]) * 4 / 3.5,
    ),
    "an unpenalized feature": (
        ["--penalty_factor", "sl=0"],
        ["0,1,1,1", "", "-Inf", "Inf"],
        np.array([0.0, 1.0, 1.0, 1.0]) * 4 / 3,
    ),
}  # fmt: skip


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize("case", MULTINOMIAL_CONTROLS)
@pytest.mark.parametrize("size", SIZES[:2])
def test_penalty_factors_exclude_and_limits_equal_glmnets(iris, tmp_path, size, case):
    """glmnet's penalty.factor (one of 0: α_max at the unpenalized feature's fit), exclude
    and limits (each class's coefficient held to them) on the multinomial: its α_max, every
    class's coefficients at each strength to glmnet's own fifth digit, and at every strength
    ours have the lower objective."""
    flags, controls, factors = MULTINOMIAL_CONTROLS[case]
    path, _ = iris
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    args += ["--features", ",".join(FEATURES), "--target", "species", "--weights", "w"]
    args += ["--l1_ratio", "0.5", "--n_alphas", "30"]
    m = run_metrics(tmp_path, size, [*args, *flags])
    alphas = m["path"]["alpha"]
    script = tmp_path / "glmnet.R"
    script.write_text(CONTROLS_SCRIPT)
    out = subprocess.run(
        ["Rscript", str(script), str(path), ",".join(repr(a) for a in alphas), *controls],
        capture_output=True, text=True, check=True, env=launcher_env(),
    ).stdout.split("\n")  # fmt: skip
    assert alphas[0] == pytest.approx(float(out[0]), rel=1e-8)
    B = np.array(out[1].split(), float).reshape(3, len(alphas), 5)
    ours_w = np.array(m["path"]["w"])  # strengths x classes x features
    if case == "an unpenalized feature":
        assert (ours_w[:, :, 0] != 0).all()  # in from the first strength
    else:
        assert (ours_w[:, :, 1] == 0).all() and (ours_w[:, :, 2] <= 1).all()
        assert (ours_w[:, :, 3] >= -0.5).all() and (ours_w[:, :, 3] == -0.5).any()
    ours_b, theirs_b = np.array(m["path"]["b"]), B[:, :, 0].T
    theirs_w = B[:, :, 1:].transpose(1, 0, 2)
    np.testing.assert_allclose(ours_b, theirs_b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours_w, theirs_w, rtol=1e-4, atol=1e-5)
    frame = iris[1]
    for i, alpha in enumerate(alphas):
        ours = objective(frame, alpha, ours_w[i], ours_b[i], factors)
        assert ours <= objective(frame, alpha, theirs_w[i], theirs_b[i], factors) + 1e-14 * ours


MEASURE_SCRIPT = r"""
library(glmnet)
a <- commandArgs(TRUE)
d <- read.csv(a[1])
X <- as.matrix(d[, c("sl", "sw", "pl", "pw")]); y <- factor(d$species)
lam <- as.numeric(strsplit(a[2], ",")[[1]])
cv <- cv.glmnet(X, y, weights = d$w, family = "multinomial", alpha = 0.5, lambda = lam,
                foldid = d$fold, thresh = 1e-14, maxit = 1e7, type.measure = a[3])
g <- function(x) sprintf("%.17g", x)
cat(g(cv$cvm), "\n", g(cv$cvsd), "\n", g(cv$lambda.min), g(cv$lambda.1se), "\n")
"""


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize(
    ("measure", "size"),
    [
        ("class", 1),
        ("mse", 1),
        ("mae", 1),
        pytest.param("class", 2, marks=pytest.mark.multiprocess),
    ],
)
def test_each_cv_measure_equals_cv_glmnets(iris, tmp_path, measure, size):
    """cv.glmnet's type.measure for the multinomial: its means and standard errors over the
    folds (to glmnet's own fifth digit, its fits' precision; class counts agree exactly) and
    its two choices."""
    path, _ = iris
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    args += ["--features", ",".join(FEATURES), "--target", "species", "--weights", "w"]
    args += ["--l1_ratio", "0.5", "--n_alphas", "30", "--fold_column", "fold"]
    m = run_metrics(tmp_path, size, [*args, "--type_measure", measure])
    alphas = m["path"]["alpha"]
    script = tmp_path / "measure.R"
    script.write_text(MEASURE_SCRIPT)
    out = subprocess.run(
        ["Rscript", str(script), str(path), ",".join(repr(a) for a in alphas), measure],
        capture_output=True, text=True, check=True, env=launcher_env(),
    ).stdout.split("\n")  # fmt: skip
    close = 1e-12 if measure == "class" else 5e-5
    assert m["cv"]["measure"] == measure
    np.testing.assert_allclose(m["cv"]["mean"], np.array(out[0].split(), float), rtol=close)
    np.testing.assert_allclose(m["cv"]["se"], np.array(out[1].split(), float), rtol=10 * close)
    lambda_min, lambda_1se = map(float, out[2].split())
    assert m["cv"]["alpha_min"] == pytest.approx(lambda_min, rel=1e-12)
    assert m["cv"]["alpha_1se"] == pytest.approx(lambda_1se, rel=1e-12)


@pytest.mark.parametrize("size", SIZES[:2])
def test_one_strength_is_scikit_learns_elastic_net(tmp_path, size):
    """LogisticRegression(l1_ratio=0.5, C) minimises C Σ loss + its
    penalty: --alpha 1/(C n) with the features as they are; saga at tol 1e-12, to 1e-6."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    path = tmp_path / "iris.csv"
    np.savetxt(path, np.c_[X, y], delimiter=",", header="a,b,c,d,y", comments="", fmt="%.17g")
    C = 0.5
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    args += ["--l1_ratio", "0.5", "--alpha", repr(1 / (C * len(y))), "--no-standardize"]
    m = run_metrics(tmp_path, size, args)
    reference = LogisticRegression(solver="saga", l1_ratio=0.5, C=C, tol=1e-12, max_iter=10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference.fit(X, y)
    np.testing.assert_allclose(np.array(m["path"]["w"][0]), reference.coef_, atol=1e-6)
    np.testing.assert_allclose(m["path"]["b"][0], reference.intercept_, atol=1e-6)
    assert (np.array(m["path"]["w"][0]) == 0).sum() == (reference.coef_ == 0).sum() > 0


def test_fit_gives_the_path_and_predicts_with_the_chosen_model(iris):
    import hvd_linreg

    _, frame = iris
    result = hvd_linreg.fit(
        frame[FEATURES], frame.species, model="multinomial", solver="exact",
        l1_ratio=0.5, cv=5, n_alphas=20,
    )  # fmt: skip
    assert result.path is not None and result.bse is None
    B = result.symmetric_params  # (F + 1) x K, glmnet's
    eta = frame[FEATURES].to_numpy() @ B[:-1] + B[-1]
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(result.predict_proba(frame[FEATURES]), p, rtol=1e-10)
    assert "multinomial elastic net, l1_ratio 0.5" in result.summary()


def test_an_offset_with_the_elastic_net_is_refused(iris, capsys):
    from conftest import refused

    args = ["--data", str(iris[0]), "--model", "multinomial", "--solver", "exact"]
    says = refused(capsys, [*args, "--target", "species", "--offset", "w", "--l1_ratio", "1"])
    assert "an offset is not taken by the multinomial elastic net yet" in says


RELAX_SCRIPT = r"""
suppressMessages(library(glmnet))
a <- commandArgs(TRUE)
d <- read.csv(a[1])
X <- as.matrix(d[, c("sl", "sw", "pl", "pw")]); yv <- factor(d$species); wv <- d$w
foldv <- d$fold; lamv <- as.numeric(strsplit(a[2], ",")[[1]])
cv <- cv.glmnet(X, yv, weights = wv, family = "multinomial", alpha = 0.5, lambda = lamv,
                foldid = foldv, thresh = 1e-14, maxit = 1e7, relax = TRUE, type.measure = a[3])
g <- function(x) sprintf("%.17g", x)
for (s in cv$relaxed$statlist) cat(g(s$cvm), " ")
cat("\n", g(cv$relaxed$lambda.min), g(cv$relaxed$gamma.min), g(cv$relaxed$lambda.1se),
    g(cv$relaxed$gamma.1se), "\n")
"""


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory) -> tuple:
    """Three classes drawn from a softmax of four features, none separable (iris's setosa is:
    its unpenalized fit has no optimum), with weights and five folds; (path, frame)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4))
    eta = X @ np.array([[1, -0.5, 0, 0.3], [0, 0.8, -0.6, 0], [0, 0, 0, 0]]).T
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    frame = pd.DataFrame(X, columns=FEATURES)
    frame["w"] = rng.integers(1, 4, len(frame)).astype(float)
    frame["fold"] = np.arange(len(frame)) % 5 + 1
    frame["species"] = np.array(["a", "b", "c"])[[rng.choice(3, p=row) for row in p]]
    path = tmp_path_factory.mktemp("overlapping") / "classes.csv"
    frame.to_csv(path, index=False, float_format="%.17g")
    return path, frame


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize(
    ("measure", "size"),
    [("deviance", 1), ("class", 1), pytest.param("deviance", 2, marks=pytest.mark.multiprocess)],
)
def test_the_relaxed_lasso_equals_glmnets(overlapping, tmp_path, measure, size):
    """cv.glmnet(relax = TRUE) for the multinomial: each blend's mean (γ 0.25 to 1 to 1e-7;
    γ = 0 by a deviance 1e-6, glmnet's own predictions at γ = 0 stray as the binary model's
    do) and its choice of strength and γ; the relaxed fit at the last strength is scikit-learn's
    unpenalized multinomial fit of the same features."""
    path, frame = overlapping
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    args += ["--features", ",".join(FEATURES), "--target", "species", "--weights", "w"]
    args += ["--l1_ratio", "0.5", "--n_alphas", "30", "--fold_column", "fold", "--relax"]
    m = run_metrics(tmp_path, size, [*args, "--type_measure", measure])
    alphas, r = m["path"]["alpha"], m["relaxed"]
    script = tmp_path / "relax.R"
    script.write_text(RELAX_SCRIPT)
    out = subprocess.run(
        ["Rscript", str(script), str(path), ",".join(repr(a) for a in alphas), measure],
        capture_output=True, text=True, check=True, env=launcher_env(),
    ).stdout.split("\n")  # fmt: skip
    cvm = np.array(out[0].split(), float).reshape(5, len(alphas))
    mean = np.array(r["mean"], float)
    np.testing.assert_allclose(mean[1:], cvm[1:], rtol=1e-7)
    np.testing.assert_allclose(mean[0], cvm[0], rtol=1e-6 if measure == "deviance" else 1e-12)
    lambda_min, gamma_min, lambda_1se, gamma_1se = map(float, out[1].split())
    assert (r["alpha_min"], r["gamma_min"]) == (pytest.approx(lambda_min, rel=1e-12), gamma_min)
    assert (r["alpha_1se"], r["gamma_1se"]) == (pytest.approx(lambda_1se, rel=1e-12), gamma_1se)
    from sklearn.linear_model import LogisticRegression

    X, w = frame[FEATURES].to_numpy(), frame.w.to_numpy()
    y = np.searchsorted(["a", "b", "c"], frame.species)
    W, b = np.array(r["w"][-1]), np.array(r["b"][-1])  # classes x features, classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000)
        reference.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(
        reference.predict_proba(X), _softmax(X @ W.T + b), rtol=1e-6, atol=1e-9
    )


def _softmax(eta: np.ndarray) -> np.ndarray:
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)
