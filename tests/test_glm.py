"""--model poisson, on the one IRLS every family but least squares shares: its optimum and
statistics as statsmodels' GLM computes them at any rank count and with each link, the
penalised fit as scikit-learn's PoissonRegressor, averaged SGD exactly as a NumPy simulation
computes it, its scores and predictions as scikit-learn's, and a negative target refused."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from conftest import launch, params_of, run_metrics
from hvd_linreg.cli import main
from reference import SGD, averaged, constant

STEPS, LR, BATCH = 40, 0.05, 8


@pytest.fixture(scope="module")
def counts(tmp_path_factory):
    """600 rows, 3 features, y ~ Poisson(exp(x·w + b)), in a .npz file."""
    tmp = tmp_path_factory.mktemp("poisson")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((600, 3))
    y = rng.poisson(np.exp(X @ [0.3, -0.2, 0.1] + 0.5)).astype(np.float64)
    np.savez(tmp / "counts.npz", X=X, y=y)
    return tmp / "counts.npz", X, y


def statsmodels_glm(X, y, link="log"):
    import statsmodels.api as sm

    links = {"log": sm.families.links.Log, "identity": sm.families.links.Identity}
    links["sqrt"] = sm.families.links.Sqrt
    family = sm.families.Poisson(links[link]())
    return statsmodels_fit(family, X, y)


def coefficients(metrics, key):
    return np.array([c[key] for c in metrics["statistics"]["coefficients"]])


def assert_is_statsmodels(metrics, ref):
    stats = metrics["statistics"]
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    np.testing.assert_allclose(coefficients(metrics, "std_error"), ref.bse, rtol=1e-8)
    np.testing.assert_allclose(coefficients(metrics, "p"), ref.pvalues, rtol=1e-6, atol=1e-300)
    assert stats["log_likelihood"] == pytest.approx(ref.llf, rel=1e-10)
    assert stats["deviance"] == pytest.approx(ref.deviance, rel=1e-10)
    assert stats["null_deviance"] == pytest.approx(ref.null_deviance, rel=1e-10)
    assert stats["scale"] == 1.0


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher, size", [("mpirun", 2), ("horovodrun-gloo", 3)])
def test_irls_is_statsmodels_poisson_glm_on_any_rank_count(counts, launcher, size, tmp_path):
    path, X, y = counts
    args = ["--model", "poisson", "--data", str(path), "--solver", "exact"]
    run = launch(launcher, size, args, tmp_path)
    assert run.returncode == 0, run.output
    assert_is_statsmodels(run.metrics, statsmodels_glm(X, y))
    assert "exact maximum likelihood (Newton's method)" in run.stdout
    assert "Newton: " in run.stdout  # the log link is canonical: Fisher scoring is Newton's


@pytest.mark.parametrize(
    "link, mean",
    [
        ("log", lambda eta: np.exp(eta)),
        ("identity", lambda eta: 4.0 + 3.0 * eta),  # well above 0: the link's own model
        ("sqrt", lambda eta: (2.0 + eta) ** 2),
    ],
)
def test_each_link_is_statsmodels_on_one_rank(link, mean, tmp_path):
    """Counts drawn from each link's own model, fitted by the tool and by statsmodels."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((500, 2))
    y = rng.poisson(np.maximum(mean(X @ [0.3, -0.2] + 0.1), 0.1)).astype(np.float64)
    np.savez(tmp_path / "counts.npz", X=X, y=y)
    args = ["--model", "poisson", "--link", link, "--data", str(tmp_path / "counts.npz")]
    metrics = run_metrics(tmp_path, 1, [*args, "--solver", "exact"])
    assert_is_statsmodels(metrics, statsmodels_glm(X, y, link))


def test_l2_is_scikit_learns_poisson_regressor(counts, tmp_path):
    """The objective mean half deviance + l2·‖w‖² is scikit-learn's with alpha = 2 l2."""
    from sklearn.linear_model import PoissonRegressor

    path, X, y = counts
    l2 = 0.01
    args = ["--model", "poisson", "--data", str(path), "--solver", "exact", "--l2", str(l2)]
    metrics = run_metrics(tmp_path, 1, args)
    ref = PoissonRegressor(alpha=2 * l2, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    ref.fit(X, y)
    np.testing.assert_allclose(params_of(metrics), [*ref.coef_, ref.intercept_], rtol=1e-8)
    assert "penalised fit" in metrics["statistics"]["undefined"]["std_error"]


def poisson_gradient(theta, X, y, l2=0.0):
    """d/dtheta of mean(exp(η) - y η) + l2 |w|²: Aᵀ(μ - y) / n, A = [X 1]."""
    error = np.exp(X @ theta[:-1] + theta[-1]) - y
    return np.append(X.T @ error, error.sum()) / len(y) + np.append(2.0 * l2 * theta[:-1], 0.0)


@pytest.mark.multiprocess
def test_sgd_is_exactly_averaged_sgd_on_the_poisson_deviance(counts, tmp_path):
    path, X, y = counts
    args = ["--model", "poisson", "--data", str(path), "--num_steps", str(STEPS)]
    args += ["--learning_rate", str(LR), "--batch_size", str(BATCH), "--log_every", "20"]
    run = launch("mpirun", 2, args, tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    expected = averaged(
        X,
        y,
        ranks=2,
        batch_size=BATCH,
        steps=STEPS,
        optimizer=SGD(constant(LR)),
        w0=m["initial_w"],
        b0=m["initial_b"],
        grad=poisson_gradient,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    mu = np.exp(X @ expected[:-1] + expected[-1])
    half_deviance = np.mean(np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0) - y + mu)
    assert m["loss"] == pytest.approx(half_deviance, rel=1e-9)
    assert "(mean half Poisson deviance over all 600 samples)" in run.stdout


def test_evaluate_and_predict_are_scikit_learns(counts, tmp_path, capsys):
    from sklearn.metrics import d2_tweedie_score, mean_poisson_deviance

    path, X, y = counts
    model = tmp_path / "model"
    args = ["--model", "poisson", "--data", str(path), "--solver", "exact", "--quiet"]
    assert main([*args, "--export", str(model)]) == 0
    capsys.readouterr()
    out = tmp_path / "p.npy"
    assert main(["predict", "--model", str(model), "--data", str(path), "--out", str(out)]) == 0
    mu = np.load(out)
    np.testing.assert_allclose(
        mu, statsmodels_glm(X, y).predict(np.c_[X, np.ones(len(X))]), rtol=1e-8
    )
    assert main(["evaluate", "--model", str(model), "--data", str(path)]) == 0
    printed = capsys.readouterr().out
    mean_deviance = float(printed.split("mean deviance:")[1].split()[0])
    d2 = float(printed.split("D²:")[1].split()[0])
    assert mean_deviance == pytest.approx(mean_poisson_deviance(y, mu), rel=1e-5)
    assert d2 == pytest.approx(d2_tweedie_score(y, mu, power=1), rel=1e-5)


def test_a_negative_target_is_refused_naming_its_row(counts, tmp_path, capsys):
    path, X, y = counts
    y = y.copy()
    y[7] = -1.0
    np.savez(tmp_path / "bad.npz", X=X, y=y)
    code = main(["--model", "poisson", "--data", str(tmp_path / "bad.npz"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "bad.npz row 7: the target is -1; --model poisson needs y >= 0" in err
    assert "Traceback" not in err


def test_a_link_the_family_does_not_take_is_refused(capsys):
    code = main(["--model", "poisson", "--link", "logit"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--link logit is not one of --model poisson's: log, identity, sqrt" in err


def test_the_synthetic_counts_recover_the_true_model(tmp_path):
    """The synthetic Poisson job: y ~ Poisson(exp(0.2 (5x + 2))), drawn per row."""
    args = ["--model", "poisson", "--solver", "exact", "--num_samples", "3000"]
    one = run_metrics(tmp_path, 1, args)
    for c, truth in zip(one["statistics"]["coefficients"], [1.0, 0.4]):
        assert abs(c["estimate"] - truth) < 4 * c["std_error"], c


def statsmodels_fit(family, X, y):
    """statsmodels' GLM, b last as in the tool's theta; quiet about links outside a domain."""
    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sm.GLM(y, sm.add_constant(X, prepend=False), family=family)
    return model.fit(tol=1e-13, maxiter=300)


def gamma_family(link):
    import statsmodels.api as sm

    links = {"inverse": sm.families.links.InversePower, "log": sm.families.links.Log}
    links["identity"] = sm.families.links.Identity
    return sm.families.Gamma(links[link]())


def assert_is_statsmodels_with_scale(metrics, ref, log_likelihood=True):
    """Estimates, standard errors (at the Pearson scale), the scale and the deviances."""
    stats = metrics["statistics"]
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    np.testing.assert_allclose(coefficients(metrics, "std_error"), ref.bse, rtol=1e-8)
    assert stats["scale"] == pytest.approx(ref.scale, rel=1e-9)
    assert stats["deviance"] == pytest.approx(ref.deviance, rel=1e-10)
    assert stats["null_deviance"] == pytest.approx(ref.null_deviance, rel=1e-10)
    if log_likelihood:
        assert stats["log_likelihood"] == pytest.approx(ref.llf, rel=1e-10)
        assert stats["null_log_likelihood"] == pytest.approx(ref.llnull, rel=1e-10)


@pytest.mark.parametrize(
    "link, mean",
    [
        ("inverse", lambda eta: 1.0 / (1.0 + 0.2 * eta)),
        ("log", np.exp),
        ("identity", lambda eta: 3.0 + eta),
    ],
)
def test_gamma_is_statsmodels_with_each_link(link, mean, tmp_path):
    """Amounts drawn from each link's own Gamma model (shape 2)."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((800, 2))
    y = rng.gamma(2.0, mean(X @ [0.3, -0.2] + 0.1) / 2.0)
    np.savez(tmp_path / "amounts.npz", X=X, y=y)
    args = ["--model", "gamma", "--link", link, "--data", str(tmp_path / "amounts.npz")]
    metrics = run_metrics(tmp_path, 1, [*args, "--solver", "exact"])
    assert_is_statsmodels_with_scale(metrics, statsmodels_fit(gamma_family(link), X, y))


@pytest.fixture(scope="module")
def positive_amounts(tmp_path_factory):
    """600 rows, 2 features, y = exp(x·w + b) + normal noise: the Gaussian log-link model."""
    rng = np.random.default_rng(12)
    X = rng.standard_normal((600, 2))
    y = np.exp(X @ [0.3, -0.2] + 1.0) + 0.3 * rng.standard_normal(600)
    path = tmp_path_factory.mktemp("gaussian") / "amounts.npz"
    np.savez(path, X=X, y=y)
    return path, X, y


@pytest.mark.parametrize(
    "model, link", [("gaussian", "identity"), ("gaussian", "log"), ("linear", "log")]
)
def test_gaussian_is_statsmodels_with_each_link(model, link, positive_amounts, tmp_path):
    """statsmodels' GLM(Gaussian(link)), by IRLS; --model linear --link log is that GLM too."""
    import statsmodels.api as sm

    path, X, y = positive_amounts
    args = ["--model", model, "--link", link, "--data", str(path), "--solver", "exact"]
    metrics = run_metrics(tmp_path, 1, args)
    links = {"identity": sm.families.links.Identity, "log": sm.families.links.Log}
    ref = statsmodels_fit(sm.families.Gaussian(links[link]()), X, y)
    assert_is_statsmodels_with_scale(metrics, ref)
    assert metrics["statistics"]["aic"] == pytest.approx(ref.aic, rel=1e-10)


def gaussian_log_gradient(theta, X, y, l2=0.0):
    """d/dtheta of mean((exp(η) - y)²): 2 Aᵀ((μ - y) μ) / n, A = [X 1]."""
    mu = np.exp(X @ theta[:-1] + theta[-1])
    error = 2.0 * (mu - y) * mu
    return np.append(X.T @ error, error.sum()) / len(y) + np.append(2.0 * l2 * theta[:-1], 0.0)


def test_sgd_on_the_gaussian_log_link_is_exactly_sgd_on_the_squared_error_of_the_mean(
    positive_amounts, tmp_path
):
    path, X, y = positive_amounts
    args = ["--model", "gaussian", "--link", "log", "--data", str(path)]
    args += ["--num_steps", str(STEPS), "--learning_rate", "0.01", "--batch_size", str(BATCH)]
    m = run_metrics(tmp_path, 1, [*args, "--log_every", "20", "--seed", "0"])
    expected = averaged(
        X,
        y,
        ranks=1,
        batch_size=BATCH,
        steps=STEPS,
        optimizer=SGD(constant(0.01)),
        w0=m["initial_w"],
        b0=m["initial_b"],
        grad=gaussian_log_gradient,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    mu = np.exp(X @ expected[:-1] + expected[-1])
    assert m["loss"] == pytest.approx(np.mean((y - mu) ** 2), rel=1e-9)


@pytest.fixture(scope="module")
def claims(tmp_path_factory):
    """Compound Poisson-Gamma amounts, many of them exactly 0."""
    rng = np.random.default_rng(9)
    X = rng.standard_normal((1000, 2))
    events = rng.poisson(np.exp(X @ [0.4, -0.3] + 0.2))
    y = np.array([rng.gamma(2.0, 1.0, k).sum() for k in events])
    assert (y == 0).mean() > 0.2
    path = tmp_path_factory.mktemp("tweedie") / "claims.npz"
    np.savez(path, X=X, y=y)
    return path, X, y


@pytest.mark.multiprocess
def test_tweedie_is_statsmodels_at_2_ranks(claims, tmp_path):
    """The log-likelihood has no closed form: undefined, saying why; the rest is statsmodels'."""
    import statsmodels.api as sm

    path, X, y = claims
    args = ["--model", "tweedie", "--tweedie_power", "1.4", "--data", str(path)]
    run = launch("horovodrun-gloo", 2, [*args, "--solver", "exact"], tmp_path)
    assert run.returncode == 0, run.output
    ref = statsmodels_fit(sm.families.Tweedie(var_power=1.4), X, y)
    assert_is_statsmodels_with_scale(run.metrics, ref, log_likelihood=False)
    stats = run.metrics["statistics"]
    assert stats["log_likelihood"] is None
    why = "the family's density has no closed form; see the deviance"
    assert stats["undefined"]["log_likelihood"] == stats["undefined"]["aic"] == why
    assert stats["aic"] is None


@pytest.mark.parametrize("model", ["gamma", "tweedie"])
def test_l2_is_scikit_learns_regressor(model, claims, tmp_path):
    """scikit-learn's GammaRegressor and TweedieRegressor, alpha = 2 l2, on positive amounts."""
    from sklearn.linear_model import GammaRegressor, TweedieRegressor

    _, X, y = claims
    keep = y > 0 if model == "gamma" else slice(None)
    X, y = X[keep], y[keep]
    np.savez(tmp_path / "d.npz", X=X, y=y)
    args = ["--model", model, "--data", str(tmp_path / "d.npz"), "--solver", "exact"]
    args += ["--l2", "0.01"] + (["--link", "log"] if model == "gamma" else [])
    metrics = run_metrics(tmp_path, 1, args)
    settings = {"alpha": 0.02, "tol": 1e-12, "max_iter": 1000, "solver": "newton-cholesky"}
    if model == "gamma":
        ref = GammaRegressor(**settings)
    else:
        ref = TweedieRegressor(power=1.5, link="log", **settings)
    ref.fit(X, y)
    np.testing.assert_allclose(params_of(metrics), [*ref.coef_, ref.intercept_], rtol=1e-8)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "tweedie", "--tweedie_power", "2.5"], "--tweedie_power must be a number "),
        (["--model", "poisson", "--tweedie_power", "1.5"], "--tweedie_power is for --model "),
        (["--model", "gamma", "--link", "sqrt"], "--link sqrt is not one of --model gamma's: "),
        (["--model", "linear", "--link", "logit"], "--model linear's: identity, log"),
    ],
)
def test_a_setting_the_family_does_not_take_is_refused(args, message, capsys):
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_a_gamma_target_of_0_is_refused(claims, tmp_path, capsys):
    path, _, y = claims
    code = main(["--model", "gamma", "--data", str(path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    row = int(np.argmax(y == 0))
    assert f"claims.npz row {row}: the target is 0; --model gamma needs y > 0" in err


@pytest.mark.parametrize("link", ["logit", "probit", "cloglog"])
def test_binomial_is_statsmodels_with_each_link(link, tmp_path):
    """--model binomial, a 0/1 target with each link, against statsmodels' GLM Binomial."""
    import statsmodels.api as sm

    rng = np.random.default_rng(12)
    X = rng.standard_normal((700, 2))
    y = (rng.random(700) < 1.0 / (1.0 + np.exp(-(X @ [1.0, -0.5] + 0.2)))).astype(np.float64)
    np.savez(tmp_path / "classes.npz", X=X, y=y)
    args = ["--model", "binomial", "--link", link, "--data", str(tmp_path / "classes.npz")]
    metrics = run_metrics(tmp_path, 1, [*args, "--solver", "exact"])
    links = {"logit": sm.families.links.Logit, "probit": sm.families.links.Probit}
    links["cloglog"] = sm.families.links.CLogLog
    ref = statsmodels_fit(sm.families.Binomial(links[link]()), X, y)
    assert_is_statsmodels(metrics, ref)
    assert metrics["statistics"]["null_log_likelihood"] == pytest.approx(ref.llnull, rel=1e-10)


def test_a_start_outside_the_domain_and_a_singular_design_are_refused(counts, tmp_path, capsys):
    """An all-zero target with the sqrt link starts at μ = 0, where Poisson has no mean; a
    repeated feature makes the Fisher information singular."""
    path, X, y = counts
    np.savez(tmp_path / "zeros.npz", X=X, y=np.zeros_like(y))
    args = ["--model", "poisson", "--solver", "exact", "--quiet"]
    assert main([*args, "--link", "sqrt", "--data", str(tmp_path / "zeros.npz")]) == 2
    assert (
        "IRLS cannot start: --model poisson with the sqrt link has no valid mean at the "
        "target's mean 0" in capsys.readouterr().err
    )
    np.savez(tmp_path / "twice.npz", X=np.c_[X[:, 0], X[:, 0]], y=y)
    assert main([*args, "--data", str(tmp_path / "twice.npz")]) == 2
    assert (
        "the Fisher information of the poisson model is singular: features are collinear or "
        "constant; drop the redundant ones, or fit with --l2 > 0" in capsys.readouterr().err
    )


def _step_design(rng, dependent: bool):
    """[X r] with r almost orthogonal to X's span, as IRLS's working residual near the
    optimum: the step r's least squares asks for is of order 1e-9."""
    X = rng.standard_normal((20_000, 4)) + [0.0, 3.0, 0.0, -1.0]
    if dependent:  # two columns equal to 1e-6: κ² of about 1e13
        X[:, 2] = X[:, 0] + 1e-6 * rng.standard_normal(len(X))
    r = rng.standard_normal(len(X)) + X @ [1e-9, -2e-9, 0.0, 3e-9]
    return X, r


@pytest.mark.parametrize("dependent", [False, True], ids=["well conditioned", "ill conditioned"])
def test_irls_step_takes_the_gram_where_its_error_is_below_the_coefficients(dependent):
    """Near the optimum the step tends to 0 and the residual's share outside X's span to all
    of it: a bound relative to the step refuses every Gram (and IRLS paid a Householder pass
    per iteration), one relative to the coefficients takes it where its error is below their
    digits, and still refuses it where κ² would cost them."""
    from hvd_linreg.solvers.qr import _gram_factor

    X, r = _step_design(np.random.default_rng(3), dependent)
    A = np.c_[X, r]
    means, weight = A.mean(axis=0), float(len(A))
    gram = A.T @ A
    theta = np.array([0.3, -0.2, 0.1, 0.05, 0.5])
    assert _gram_factor(gram, means, weight) is None  # relative to the step: refused
    upper = _gram_factor(gram, means, weight, reference=theta)
    if dependent:
        assert upper is None
        return
    assert upper is not None
    step = np.linalg.solve(upper[:4, :4], upper[:4, 4])
    exact = np.linalg.lstsq(X - means[:4], r - means[4], rcond=None)[0]
    np.testing.assert_allclose(step, exact, rtol=0, atol=1e-14)  # _GRAM_ABOVE
