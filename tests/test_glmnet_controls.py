"""glmnet's controls around the elastic net: penalty factors (a 0 among them), excluded
features and coefficient limits, against R's glmnet and scikit-learn's positive=True, and
cv.glmnet's type.measure, at 1 and 2 ranks; and the mistakes a user can make with them,
refused with exit 2."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from test_elastic_net import FEATURES, _args, _data, _glmnet_available

from conftest import launcher_env, refused, run_metrics

# Every control at once: x0 unpenalized, x2 and x3 penalized more and less, x5 out of the
# model, x1 non-negative (a limit at 0: glmnet then fits every strength), x3 and x4 bounded.
CONTROLS = [
    "--penalty_factor", "x0=0,x2=2,x3=0.5",
    "--exclude", "x5",
    "--lower_limits", "x1=0,x3=-0.1",
    "--upper_limits", "x4=0.5",
]  # fmt: skip
R_CONTROLS = {
    "pf": "0,1,2,0.5,1,1",
    "ex": "6",
    "lo": "-Inf,0,-Inf,-0.1,-Inf,-Inf",
    "hi": "Inf,Inf,Inf,Inf,0.5,Inf",
}

R_SCRIPT = r"""
library(glmnet)
args <- commandArgs(TRUE)
d <- read.csv(args[1]); X <- as.matrix(d[, strsplit(args[2], ",")[[1]]])
lam <- as.numeric(strsplit(args[4], ",")[[1]])
family <- args[5]; a <- as.numeric(args[6])
if (!family %in% c("gaussian", "binomial", "poisson")) {  # a family object: glmnet.path
  family <- eval(parse(text=family)); glmnet.control(epsnr=1e-14, mxitnr=1000)
}
v <- function(i) as.numeric(strsplit(args[i], ",")[[1]])
off <- if (identical(family, "poisson")) log(d$exposure) else NULL
run <- function(f, ...) f(X, d[[args[3]]], family=family, weights=d$w, offset=off, alpha=a,
                           thresh=1e-20, maxit=1e7, penalty.factor=v(7), exclude=v(8),
                           lower.limits=v(9), upper.limits=v(10), ...)
free <- run(glmnet)
fit <- run(glmnet, lambda=lam)
cv <- run(cv.glmnet, lambda=lam, foldid=d$fold)
g <- function(x) sprintf("%.17g", x)
cat(g(free$lambda), "\n", g(as.matrix(coef(fit))), "\n", g(cv$cvm), "\n", g(cv$lambda.min),
    g(cv$lambda.1se), "\n", g(cv$cvsd), "\n")
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The elastic net's rows, with a gaussian target of unit spread (glmnet scales its own)."""
    df = _data()
    w = df.w.values
    spread = np.sqrt(np.average((df.y - np.average(df.y, weights=w)) ** 2, weights=w))
    df = df.assign(y_unit=df.y / spread)
    path = tmp_path_factory.mktemp("controls") / "data.csv"
    df.to_csv(path, index=False)
    return df, path


SIZES = [1, pytest.param(2, marks=pytest.mark.multiprocess)]


def _rscript(tmp_path, script: str, path, *args) -> list[str]:
    """The lines Rscript prints running script on the CSV at path, the features' names and
    args (a list as comma-separated numbers at full precision), or with path alone."""
    file = tmp_path / "reference.R"
    file.write_text(script)
    more = [",".join(map(repr, a)) if isinstance(a, list) else str(a) for a in args]
    command = ["Rscript", str(file), str(path), ",".join(FEATURES), *more]
    run = subprocess.run(command, capture_output=True, text=True, check=True, env=launcher_env())
    return run.stdout.split("\n")


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(
    ("model", "target", "family", "l1_ratio", "more"),
    [
        ("linear", "y_unit", "gaussian", 1.0, []),
        ("logistic", "yes", "binomial", 0.5, []),
        ("poisson", "count", "poisson", 0.5, ["--exposure", "exposure"]),
        ("gamma", "cost", 'Gamma(link="log")', 0.5, ["--link", "log"]),
    ],
    ids=["gaussian", "binomial", "poisson", "gamma"],
)
def test_factors_exclusions_and_limits_equal_glmnet(
    data, tmp_path, size, model, target, family, l1_ratio, more
):
    """With weights (and the Poisson's offset): glmnet's whole default sequence (its α_max is
    taken at the fit of the unpenalized x0, and the limit at 0 keeps its own families' paths
    from ending early; a family object's, gamma's, keeps its end), the coefficients at every
    strength, cv.glmnet's means, standard errors and choices. glmnet fits a family object by
    its own IRLS (glmnet.path): there, 1e-7 for the strengths and the CV."""
    _, path = data
    args = _args(path, target, model, "--weights", "w", "--fold_column", "fold", *more)
    m = run_metrics(tmp_path, size, [*args, "--l1_ratio", str(l1_ratio), *CONTROLS])
    alphas = m["path"]["alpha"]
    out = _rscript(tmp_path, R_SCRIPT, path, target, alphas, family, l1_ratio,
                   *R_CONTROLS.values())  # fmt: skip
    free = np.array(out[0].split(), float)
    B = np.array(out[1].split(), float).reshape(len(alphas), len(FEATURES) + 1)
    cvm, cvsd = np.array(out[2].split(), float), np.array(out[4].split(), float)
    lambda_min, lambda_1se = map(float, out[3].split())
    own = model != "gamma"
    assert len(alphas) == len(free) and (len(free) == 100) == own  # a limit at 0: no end
    close = 1e-8 if own else 1e-7
    np.testing.assert_allclose(alphas, free, rtol=close)
    w = np.array(m["path"]["w"])
    np.testing.assert_allclose(m["path"]["b"], B[:, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(w, B[:, 1:], rtol=0, atol=1e-8)
    assert (w[:, 5] == 0).all() and (w[:, 1] >= 0).all() and (w[:, 4] <= 0.5).all()
    assert (w[:, 3] >= -0.1).all() and (w[:, 0] != 0).all()  # x0 unpenalized: in from the start
    np.testing.assert_allclose(m["cv"]["mean"], cvm, rtol=close)
    np.testing.assert_allclose(m["cv"]["se"], cvsd, rtol=close)
    assert m["cv"]["alpha_min"] == pytest.approx(lambda_min, rel=1e-12)
    assert m["cv"]["alpha_1se"] == pytest.approx(lambda_1se, rel=1e-12)


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
def test_penalty_factors_alone_end_the_path_where_glmnet_does(data, tmp_path):
    """Without a limit at 0, glmnet's early end holds, on its rescaled factors' α_max."""
    _, path = data
    args = _args(path, "yes", "logistic", "--weights", "w", "--l1_ratio", "1")
    m = run_metrics(tmp_path, 1, [*args, "--penalty_factor", "x0=3,x4=0.25"])
    script = (
        "library(glmnet); d <- read.csv(commandArgs(TRUE)[1]);"
        "X <- as.matrix(d[, strsplit(commandArgs(TRUE)[2], ',')[[1]]]);"
        "f <- glmnet(X, d$yes, family='binomial', weights=d$w, thresh=1e-20,"
        "penalty.factor=c(3, 1, 1, 1, 0.25, 1)); cat(sprintf('%.17g', f$lambda))"
    )
    free = np.array(_rscript(tmp_path, script, path)[0].split(), float)
    assert len(m["path"]["alpha"]) == len(free) < 100
    np.testing.assert_allclose(m["path"]["alpha"], free, rtol=1e-8)


MEASURE_SCRIPT = r"""
library(glmnet)
args <- commandArgs(TRUE)
d <- read.csv(args[1]); X <- as.matrix(d[, strsplit(args[2], ",")[[1]]])
lam <- as.numeric(strsplit(args[4], ",")[[1]]); family <- args[5]
off <- if (family == "poisson") log(d$exposure) else NULL
cv <- cv.glmnet(X, d[[args[3]]], family=family, weights=d$w, offset=off, alpha=as.numeric(args[6]),
                lambda=lam, foldid=d$fold, thresh=1e-20, maxit=1e7, type.measure=args[7])
g <- function(x) sprintf("%.17g", x)
cat(g(cv$cvm), "\n", g(cv$cvsd), "\n", g(cv$lambda.min), g(cv$lambda.1se), "\n")
"""


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize(
    ("model", "target", "family", "l1_ratio", "measure", "size"),
    [
        ("logistic", "yes", "binomial", 0.5, "auc", 1),
        ("logistic", "yes", "binomial", 0.5, "class", 1),
        ("logistic", "yes", "binomial", 0.5, "mse", 1),
        ("logistic", "yes", "binomial", 0.5, "mae", 1),
        ("poisson", "count", "poisson", 0.5, "mse", 1),
        ("linear", "y_unit", "gaussian", 1.0, "mae", 1),
        pytest.param("logistic", "yes", "binomial", 0.5, "auc", 2, marks=pytest.mark.multiprocess),
        pytest.param("poisson", "count", "poisson", 0.5, "mae", 2, marks=pytest.mark.multiprocess),
    ],
    ids=lambda v: str(v),
)
def test_each_cv_measure_equals_cv_glmnets(
    data, tmp_path, model, target, family, l1_ratio, measure, size
):
    """cv.glmnet's cvm, cvsd, lambda.min and lambda.1se for type.measure, on the tool's
    strengths; the first strength's auc is left out (every held-out score ties there, which
    glmnet breaks at random and the tool counts one half)."""
    _, path = data
    more = ["--exposure", "exposure"] if family == "poisson" else []
    args = _args(path, target, model, "--weights", "w", "--fold_column", "fold", *more)
    argv = [*args, "--l1_ratio", str(l1_ratio), "--type_measure", measure]
    m = run_metrics(tmp_path, size, argv)
    alphas = m["path"]["alpha"]
    out = _rscript(tmp_path, MEASURE_SCRIPT, path, target, alphas, family, l1_ratio, measure)
    cvm, cvsd = np.array(out[0].split(), float), np.array(out[1].split(), float)
    lambda_min, lambda_1se = map(float, out[2].split())
    assert m["cv"]["measure"] == measure
    np.testing.assert_allclose(m["cv"]["mean"][1:], cvm[1:], rtol=1e-8)
    np.testing.assert_allclose(m["cv"]["se"][1:], cvsd[1:], rtol=1e-8)
    assert m["cv"]["alpha_min"] == pytest.approx(lambda_min, rel=1e-12)
    assert m["cv"]["alpha_1se"] == pytest.approx(lambda_1se, rel=1e-12)


def test_fit_takes_the_controls_by_name_by_position_and_as_lists(data):
    """fit(): a mapping, a list per feature, positions for exclude; the same fit each way."""
    import hvd_linreg

    df, _ = data
    X, y = df[FEATURES], df.y_unit.values
    base = {"model": "linear", "solver": "exact", "l1_ratio": 1.0, "alpha": 0.01}
    named = hvd_linreg.fit(
        X, y, penalty_factor={"x0": 0, "x2": 2}, exclude=["x5"], lower_limits=0, **base
    )
    listed = hvd_linreg.fit(
        X.values, y, penalty_factor=[0, 1, 2, 1, 1, 1], exclude=[5], lower_limits=[0] * 6, **base
    )
    np.testing.assert_allclose(named.params, listed.params, rtol=1e-12)
    coef = np.asarray(named.params).ravel()[:-1]
    assert coef[5] == 0 and (coef >= 0).all() and coef[0] > 0


@pytest.mark.parametrize("estimator", ["Lasso", "ElasticNet"])
def test_positive_equals_scikit_learns(estimator):
    from sklearn import linear_model

    from hvd_linreg import estimators

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 8))
    y = X @ [1, -1, 0.5, -0.5, 0, 2, -2, 0] + rng.normal(size=400)
    more = {"l1_ratio": 0.3} if estimator == "ElasticNet" else {}
    ours = getattr(estimators, estimator)(alpha=0.05, positive=True, **more).fit(X, y)
    theirs = getattr(linear_model, estimator)(
        alpha=0.05, positive=True, tol=1e-12, max_iter=100_000, **more
    ).fit(X, y)
    assert (ours.coef_ >= 0).all() and (ours.coef_ == 0).sum() >= 3
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-10)
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-10)


def test_lasso_cv_positive_equals_scikit_learns_on_the_same_strengths():
    from sklearn import linear_model

    from hvd_linreg import estimators

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 6))
    y = X @ [1, -1, 0.5, 0, 2, -2] + rng.normal(size=300)
    alphas = list(np.geomspace(0.5, 0.001, 30))
    ours = estimators.LassoCV(alphas=alphas, positive=True, cv=5).fit(X, y)
    theirs = linear_model.LassoCV(
        alphas=alphas, positive=True, cv=5, tol=1e-12, max_iter=100_000
    ).fit(X, y)
    assert ours.alpha_ == theirs.alpha_
    np.testing.assert_allclose(ours.mse_path_, theirs.mse_path_, rtol=1e-8)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    ("more", "says"),
    [
        (["--penalty_factor", "x9=0"], "--penalty_factor names 'x9', which is no feature"),
        (["--penalty_factor", "x0=-1"], "--penalty_factor must be finite numbers >= 0"),
        (["--penalty_factor", "x0"], "--penalty_factor takes NAME=VALUE"),
        (["--exclude", "nope"], "--exclude names 'nope', which is no feature"),
        (["--exclude", ",".join(FEATURES)], "--exclude leaves no feature in the model"),
        (["--lower_limits", "0.5"], "--lower_limits must be <= 0 for every feature"),
        (["--upper_limits", "x1=-1"], "--upper_limits must be >= 0 for every feature"),
        (["--lower_limits", "x1=low"], "--lower_limits: x1='low' is not a number"),
        (["--model", "poisson", "--cv", "3", "--type_measure", "auc"], "--type_measure auc is for"),
        (["--type_measure", "mae"], "--type_measure mae is for cross-validated strengths"),
        (["--type_measure", "gini", "--cv", "3"], "argument --type_measure/--type-measure"),
        (["--relax_gamma", "0.5"], "--relax_gamma is the relaxed lasso's blend: it needs --relax"),
        (["--relax", "--relax_gamma", "2"], "--relax_gamma must be a number in [0, 1]"),
    ],
)
def test_mistakes_in_the_controls_end_with_exit_2(capsys, data, more, says):
    _, path = data
    args = _args(path, "y", "linear", "--l1_ratio", "1", *more)
    assert refused(capsys, args).startswith(says)


def test_the_controls_need_the_elastic_net(capsys, data):
    _, path = data
    message = refused(capsys, _args(path, "y", "linear", "--lower_limits", "0"))
    assert message.startswith("--lower_limits control the elastic net")
    message = refused(capsys, _args(path, "y", "linear", "--relax"))
    assert message.startswith("--relax control the elastic net")


def test_the_relaxed_fit_without_folds_is_the_unpenalized_fit_of_the_last_active_set(data):
    """No folds: γ 0 (or --relax_gamma) at the path's last strength; its coefficients are
    statsmodels' GLM on the features the lasso keeps there."""
    import statsmodels.api as sm

    import hvd_linreg

    df, _ = data
    X, y = df[FEATURES], df.yes.values
    base = {"model": "logistic", "solver": "exact", "l1_ratio": 1.0, "n_alphas": 12}
    lasso = hvd_linreg.fit(X, y, alpha_min_ratio=0.2, **base)
    relaxed = hvd_linreg.fit(X, y, alpha_min_ratio=0.2, relax=True, **base)
    half = hvd_linreg.fit(X, y, alpha_min_ratio=0.2, relax=True, relax_gamma=0.5, **base)
    kept = np.flatnonzero(np.asarray(lasso.params).ravel()[:-1])
    assert 0 < len(kept) < len(FEATURES)
    glm = sm.GLM(y, sm.add_constant(X.iloc[:, kept].values), family=sm.families.Binomial())
    reference = glm.fit(tol=1e-14).params
    ours = np.asarray(relaxed.params).ravel()
    np.testing.assert_allclose(ours[kept], reference[1:], rtol=1e-8)
    assert ours[-1] == pytest.approx(reference[0], rel=1e-8)
    blend = 0.5 * np.asarray(lasso.params).ravel() + 0.5 * ours
    np.testing.assert_allclose(np.asarray(half.params).ravel(), blend, rtol=1e-10, atol=1e-12)


def _poisson_rows(n: int = 500, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = rng.poisson(np.exp(0.3 * X[:, 0] - 0.4 * X[:, 1] + 0.2 * X[:, 2])).astype(float)
    return X, y


@pytest.mark.parametrize("l1_ratio", [1.0, 0.5, 0.0])
def test_glums_penalty_vectors_and_bounds_equal_glums(l1_ratio):
    """P1 (one of 0), P2 and bounds in GeneralizedLinearRegressor: glum's coefficients."""
    glum = pytest.importorskip("glum")
    from hvd_linreg import estimators

    X, y = _poisson_rows()
    P = np.array([0, 1, 2, 1, 0.5, 1.0])
    vectors = {1.0: {"P1": P}, 0.0: {"P2": P}, 0.5: {"P1": P, "P2": P}}[l1_ratio]
    lower = np.r_[-np.inf, -np.inf, 0, -np.inf, -np.inf, -np.inf]
    upper = np.r_[0.2, np.full(5, np.inf)]
    settings = dict(alpha=0.01, l1_ratio=l1_ratio, family="poisson", lower_bounds=lower,
                    upper_bounds=upper, **vectors)  # fmt: skip
    ours = estimators.GeneralizedLinearRegressor(**settings).fit(X, y)
    theirs = glum.GeneralizedLinearRegressor(gradient_tol=1e-12, **settings).fit(X, y)
    assert ours.coef_[0] == 0.2 and ours.coef_[2] >= 0
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-9)
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-9)


def test_glums_cv_with_p1_equals_glums():
    """The path on glum's strengths (the tool's rescaled factors undone), its choice and fit."""
    glum = pytest.importorskip("glum")
    from hvd_linreg import estimators

    X, y = _poisson_rows()
    P1 = np.array([0.5, 1, 2, 1, 0.5, 1.0])
    settings = dict(l1_ratio=1.0, family="poisson", P1=P1, cv=5)
    ours = estimators.GeneralizedLinearRegressorCV(**settings).fit(X, y)
    theirs = glum.GeneralizedLinearRegressorCV(gradient_tol=1e-12, **settings).fit(X, y)
    np.testing.assert_allclose(ours.alphas_, theirs.alphas_, rtol=1e-9)
    assert ours.alpha_ == pytest.approx(theirs.alpha_, rel=1e-9)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0, atol=1e-9)


def test_glums_p1_and_p2_that_differ_are_refused_where_both_count():
    from hvd_linreg import estimators

    X, y = _poisson_rows(100)
    model = estimators.GeneralizedLinearRegressor(
        alpha=0.01, l1_ratio=0.5, family="poisson", P1=np.ones(6), P2=np.full(6, 2.0)
    )
    with pytest.raises(ValueError, match="P1 and P2 that differ are not supported"):
        model.fit(X, y)


RELAX_SCRIPT = r"""
suppressMessages(library(glmnet))
args <- commandArgs(TRUE)
d <- read.csv(args[1]); X <- as.matrix(d[, strsplit(args[2], ",")[[1]]])
lamv <- as.numeric(strsplit(args[4], ",")[[1]]); fam <- args[5]; av <- as.numeric(args[6])
offv <- if (fam == "poisson") log(d$exposure) else NULL
yv <- d[[args[3]]]; wv <- d$w; foldv <- d$fold
fit <- glmnet(X, yv, family=fam, weights=wv, offset=offv, alpha=av, lambda=lamv, thresh=1e-20,
              maxit=1e7, relax=TRUE)
cv <- cv.glmnet(X, yv, family=fam, weights=wv, offset=offv, alpha=av, lambda=lamv,
                foldid=foldv, thresh=1e-20, maxit=1e7, relax=TRUE, type.measure=args[7])
g <- function(x) sprintf("%.17g", x)
cat(g(as.matrix(coef(fit$relaxed))), "\n")
for (s in cv$relaxed$statlist) cat(g(s$cvm), " ")
cat("\n")
for (s in cv$relaxed$statlist) cat(g(s$cvsd), " ")
cat("\n", g(cv$relaxed$lambda.min), g(cv$relaxed$gamma.min), g(cv$relaxed$lambda.1se),
    g(cv$relaxed$gamma.1se), "\n")
# The relaxed fits' held-out deviance, each refitted by glm on its fold's lasso active set
link <- switch(fam, gaussian=gaussian(), binomial=quasibinomial(), poisson=quasipoisson())
o <- if (is.null(offv)) rep(0, nrow(d)) else offv
exact <- sapply(seq_along(lamv), function(j) {
  raw <- sapply(1:5, function(k) {
    tr <- foldv != k
    fo <- if (is.null(offv)) NULL else o[tr]
    f <- glmnet(X[tr, ], yv[tr], family=fam, weights=wv[tr], offset=fo, alpha=av, lambda=lamv,
                thresh=1e-20, maxit=1e7)
    A <- which(f$beta[, j] != 0)
    Z <- cbind(1, X[, A, drop=FALSE])
    m <- glm.fit(Z[tr, , drop=FALSE], yv[tr], weights=wv[tr], offset=o[tr], family=link,
                 control=glm.control(epsilon=1e-14, maxit=100))
    eta <- Z[!tr, , drop=FALSE] %*% m$coefficients + o[!tr]
    mu <- link$linkinv(eta); y <- yv[!tr]; w <- wv[!tr]
    sum(w * link$dev.resids(y, mu, rep(1, length(y)))) / sum(w)
  })
  fw <- tapply(wv, foldv, sum)
  sum(fw * raw) / sum(fw)
})
cat(g(exact), "\n")
"""


@pytest.mark.glmnet
@pytest.mark.skipif(not _glmnet_available(), reason="R's glmnet is not installed")
@pytest.mark.parametrize(
    ("model", "target", "family", "l1_ratio", "measure", "size"),
    [
        ("logistic", "yes", "binomial", 1.0, "deviance", 1),
        ("poisson", "count", "poisson", 0.5, "deviance", 1),
        ("linear", "y_unit", "gaussian", 1.0, "deviance", 1),
        ("logistic", "yes", "binomial", 0.5, "auc", 1),
        pytest.param(
            "logistic", "yes", "binomial", 1.0, "class", 2, marks=pytest.mark.multiprocess
        ),
        pytest.param(
            "poisson", "count", "poisson", 0.5, "deviance", 2, marks=pytest.mark.multiprocess
        ),
    ],
    ids=lambda v: str(v),
)
def test_the_relaxed_lasso_equals_glmnets(
    data, tmp_path, model, target, family, l1_ratio, measure, size
):
    """relax = TRUE: the relaxed fits at every strength (1e-8; measured 1e-10), cv.glmnet's
    mean and standard error of every blend (γ 0.25 to 1: 1e-8) and its choice of strength and
    γ. cv.glmnet's figures for the relaxed fits themselves (γ = 0) by a deviance stray from the
    held-out deviance of those very fits by up to 3e-7: these are held instead to glm()'s
    relaxed fit of each fold's lasso active set, to 1e-8, and the choice is compared where a
    measure of ranks (auc, class) leaves them equal."""
    _, path = data
    more = ["--exposure", "exposure"] if family == "poisson" else []
    args = _args(path, target, model, "--weights", "w", "--fold_column", "fold", *more)
    argv = [*args, "--l1_ratio", str(l1_ratio), "--relax", "--type_measure", measure]
    m = run_metrics(tmp_path, size, argv)
    alphas, r = m["path"]["alpha"], m["relaxed"]
    S = len(alphas)
    out = _rscript(tmp_path, RELAX_SCRIPT, path, target, alphas, family, l1_ratio, measure)
    R = np.array(out[0].split(), float).reshape(S, len(FEATURES) + 1)
    np.testing.assert_allclose(r["b"], R[:, 0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(r["w"], R[:, 1:], rtol=0, atol=1e-8)
    cvm = np.array(out[1].split(), float).reshape(5, S)
    cvsd = np.array(out[2].split(), float).reshape(5, S)
    mean, se = np.array(r["mean"], float), np.array(r["se"], float)
    assert r["gamma"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    first = 1 if measure == "auc" else 0  # every score ties at the first strength
    np.testing.assert_allclose(mean[1:, first:], cvm[1:, first:], rtol=1e-8)
    np.testing.assert_allclose(se[1:, first:], cvsd[1:, first:], rtol=1e-8)
    np.testing.assert_allclose(mean[4], m["cv"]["mean"], rtol=1e-12)  # γ = 1: the lasso
    if measure == "deviance":
        exact = np.array(out[4].split(), float)
        np.testing.assert_allclose(mean[0], exact, rtol=1e-8)
        np.testing.assert_allclose(mean[0], cvm[0], rtol=1e-6)
        return
    np.testing.assert_allclose(mean[0, first:], cvm[0, first:], rtol=1e-8)
    lambda_min, gamma_min, lambda_1se, gamma_1se = map(float, out[3].split())
    assert (r["alpha_min"], r["gamma_min"]) == (pytest.approx(lambda_min, rel=1e-12), gamma_min)
    assert (r["alpha_1se"], r["gamma_1se"]) == (pytest.approx(lambda_1se, rel=1e-12), gamma_1se)
    chosen = m["statistics"]
    assert (
        chosen["alpha"] == pytest.approx(lambda_min, rel=1e-12) and r["chosen_gamma"] == gamma_min
    )


def test_a_wide_designs_path_takes_the_controls_as_the_dense_path_does():
    """A 600-level categorical column (a wide design's path, on working sets) with an
    unpenalized feature, an upper limit and an excluded feature: the same path as its dense
    dummies give on the path of narrow designs (checked against glmnet above)."""
    import pandas as pd

    import hvd_linreg

    rng = np.random.default_rng(3)
    n, levels = 2000, 600
    g, z, u = rng.integers(0, levels, n), rng.normal(size=n), rng.normal(size=n)
    effect = rng.normal(scale=0.3, size=levels)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.8 * z + 0.3 * u + effect[g])))).astype(float)
    X = pd.DataFrame({"z": z, "u": u, "g": pd.Categorical(g.astype(str))})
    dummies = pd.get_dummies(X.g, prefix="g", dtype=float, drop_first=True)
    dense = pd.concat([X[["z", "u"]], dummies], axis=1)
    settings = dict(
        model="logistic", solver="exact", l1_ratio=1.0, n_alphas=20, whole_path=True,
        penalty_factor={"z": 0}, upper_limits={"z": 0.5}, exclude=["u"],
    )  # fmt: skip
    wide = hvd_linreg.fit(X, y, **settings).path
    narrow = hvd_linreg.fit(dense, y, **settings).path
    np.testing.assert_allclose(wide.alphas, narrow.alphas, rtol=1e-10)
    np.testing.assert_allclose(wide.coefficients, narrow.coefficients, rtol=0, atol=1e-9)
    assert (wide.coefficients[:, 0] == 0.5).all() and (wide.coefficients[:, 1] == 0).all()
    assert wide.nonzero[0] == 1  # z, unpenalized, from the first strength on


def _wide_rows(n: int = 2000, levels: int = 600, seed: int = 3):
    import pandas as pd

    rng = np.random.default_rng(seed)
    g, z, u = rng.integers(0, levels, n), rng.normal(size=n), rng.normal(size=n)
    effect = rng.normal(scale=0.3, size=levels)
    X = pd.DataFrame({"z": z, "u": u, "g": pd.Categorical(g.astype(str))})
    dummies = pd.get_dummies(X.g, prefix="g", dtype=float, drop_first=True)
    return X, pd.concat([X[["z", "u"]], dummies], axis=1), 0.8 * z + 0.3 * u + effect[g], rng


def test_a_wide_designs_relaxed_lasso_is_the_dense_paths():
    """--relax on a 600-level categorical column with folds: the relaxed fits, each blend's
    cross-validated mean and the choice of strength and γ of the dense dummies' path."""
    import hvd_linreg

    X, dense, signal, rng = _wide_rows()
    y = signal + rng.normal(size=len(signal))
    fold = np.arange(len(y)) % 4
    settings = dict(
        model="linear", solver="exact", l1_ratio=1.0, n_alphas=12, alpha_min_ratio=0.05,
        relax=True, penalty_factor={"z": 0},
    )  # fmt: skip
    wide = hvd_linreg.fit(X, y, fold=fold, **settings)
    narrow = hvd_linreg.fit(dense, y, fold=fold, **settings)
    a, b = wide.path, narrow.path
    np.testing.assert_allclose(a.relaxed.coefficients, b.relaxed.coefficients, atol=1e-10)
    np.testing.assert_allclose(a.relaxed.mean, b.relaxed.mean, rtol=1e-10)
    assert (a.gamma, a.index) == (b.gamma, b.index) and a.nonzero[-1] > 100
    np.testing.assert_allclose(np.asarray(wide.params), np.asarray(narrow.params), atol=1e-10)


def test_a_wide_least_squares_path_with_folds_is_the_dense_paths(monkeypatch):
    """The covariance updates of a wide least-squares path (solvers/working_sets.py), with
    folds, an unpenalized feature, an upper limit and an excluded one: the dense dummies' path
    (coefficients of every model, the CV means) to 1e-9; so too where the cache outgrows its
    bytes mid-path and the passes take over."""
    import hvd_linreg
    from hvd_linreg.solvers import working_sets

    X, dense, signal, rng = _wide_rows()
    y = signal + rng.normal(size=len(signal))
    settings = dict(
        model="linear", solver="exact", l1_ratio=0.5, n_alphas=15, alpha_min_ratio=0.02,
        penalty_factor={"z": 0}, upper_limits={"z": 0.5}, exclude=["u"],
        fold=np.arange(len(y)) % 4,
    )  # fmt: skip
    narrow = hvd_linreg.fit(dense, y, **settings).path
    whole = hvd_linreg.fit(X, y, **settings).path
    # room for the first working sets' columns of every fold of rows, not for the last's
    monkeypatch.setattr(working_sets, "MAX_CACHE_BYTES", 4 * 601 * 560 * 8)
    outgrown = hvd_linreg.fit(X, y, **settings).path
    assert outgrown.passes > whole.passes  # the passes took over
    for wide in (whole, outgrown):
        np.testing.assert_allclose(wide.coefficients, narrow.coefficients, rtol=0, atol=1e-9)
        np.testing.assert_allclose(wide.fold_coefficients, narrow.fold_coefficients, atol=1e-9)
        np.testing.assert_allclose(wide.cv.mean, narrow.cv.mean, rtol=1e-9)
        assert (wide.coefficients[:, 1] == 0).all() and wide.nonzero[-1] > 300


def test_a_relaxed_fit_that_does_not_converge_says_where_and_the_remedy_works():
    """Many levels of a few rows each, a two-level target: the unpenalized refit of the
    lasso's hundreds of levels runs away at the path's small strengths; the message names the
    strength, and --alpha_min_ratio, as it says, ends the path before it."""
    import hvd_linreg

    X, _, signal, rng = _wide_rows()
    y = (rng.uniform(size=len(signal)) < 1 / (1 + np.exp(-signal))).astype(float)
    fold = np.arange(len(y)) % 4
    settings = dict(
        model="logistic", solver="exact", l1_ratio=1.0, n_alphas=12, relax=True, fold=fold,
        penalty_factor={"z": 0},
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"--relax: the unpenalized refit of the \d+ features"):
        hvd_linreg.fit(X, y, alpha_min_ratio=0.05, **settings)
    assert hvd_linreg.fit(X, y, alpha_min_ratio=0.3, **settings).path.gamma is not None
