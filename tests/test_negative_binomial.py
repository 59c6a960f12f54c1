"""--model negative_binomial --nb_alpha A (NB2, Var = μ + A μ²): its exact fit and statistics
equal statsmodels' NegativeBinomial(alpha) family for each link at 1 and 2 ranks; its SGD is
exactly averaged SGD; its dispersion reaches the export, so predict and evaluate use it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import statsmodels.api as sm

from conftest import assert_sgd_is_simulated, params_of, read_metrics, refused, run_metrics
from hvd_linreg.cli import main

ALPHA = 0.5
LINKS = {"log": sm.families.links.Log, "sqrt": sm.families.links.Sqrt}
LINKS["identity"] = sm.families.links.Identity
MEANS = {
    "log": lambda X: np.exp(0.8 + 0.3 * X[:, 0] - 0.2 * X[:, 1]),
    "sqrt": lambda X: (1.5 + 0.2 * X[:, 0] + 0.1 * X[:, 1]) ** 2,
    "identity": lambda X: 3 + 0.4 * X[:, 0] + 0.2 * X[:, 1],
}


def rows(link: str):
    rng = np.random.default_rng(17)
    X = rng.normal(size=(500, 2))
    mu = MEANS[link](X)
    y = rng.negative_binomial(1 / ALPHA, 1 / (1 + ALPHA * mu)).astype(float)
    return X, y, rng.uniform(0.5, 2.0, 500)


def write(tmp_path, X, y, w) -> str:
    path = tmp_path / "d.csv"
    np.savetxt(path, np.c_[X, w, y], delimiter=",", header="x1,x2,w,y", comments="")
    return str(path)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
@pytest.mark.parametrize("link", list(LINKS))
def test_negative_binomial_is_statsmodels_for_each_link(tmp_path, link, size):
    X, y, w = rows(link)
    args = ["--data", write(tmp_path, X, y, w), "--model", "negative_binomial", "--link", link]
    args += ["--nb_alpha", str(ALPHA), "--weights", "w", "--solver", "exact"]
    metrics = run_metrics(tmp_path, size, args)
    family = sm.families.NegativeBinomial(LINKS[link](), alpha=ALPHA)
    ref = sm.GLM(y, sm.add_constant(X, prepend=False), family=family, var_weights=w)
    ref = ref.fit(tol=1e-13, maxiter=1000)
    s = metrics["statistics"]
    np.testing.assert_allclose(params_of(metrics), ref.params, rtol=1e-8)
    np.testing.assert_allclose([c["std_error"] for c in s["coefficients"]], ref.bse, rtol=1e-6)
    for key, value in [
        ("log_likelihood", ref.llf),
        ("deviance", ref.deviance),
        ("null_deviance", ref.null_deviance),
        ("aic", ref.aic),
    ]:
        assert s[key] == pytest.approx(value, rel=1e-8), key
    assert s["scale"] == 1.0


def gradient(theta, X, y, l2=0.0):
    """d/dθ of mean((y + 1/α) log(1 + α μ) - y log μ), μ = exp(η): Aᵀ(μ (y + 1/α) α / (1 + α μ)
    - y) / n, A = [X 1]."""
    mu = np.exp(X @ theta[:-1] + theta[-1])
    slope = (y + 1 / ALPHA) * ALPHA * mu / (1 + ALPHA * mu) - y
    return np.append(X.T @ slope, slope.sum()) / len(y)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_sgd_is_exactly_averaged_sgd_on_the_half_deviance(tmp_path, size):
    X, y, _ = rows("log")
    args = ["--model", "negative_binomial", "--nb_alpha", str(ALPHA)]
    assert_sgd_is_simulated(tmp_path, size, args, X, y, gradient)


def test_the_dispersion_reaches_the_export_and_evaluate(tmp_path):
    X, y, w = rows("log")
    data = write(tmp_path, X, y, w)
    model = str(tmp_path / "model")
    args = ["--data", data, "--model", "negative_binomial", "--nb_alpha", str(ALPHA)]
    args += ["--features", "x1,x2", "--target", "y"]
    assert main([*args, "--solver", "exact", "--export", model, "--quiet"]) == 0
    meta = json.loads((tmp_path / "model" / "assets.extra" / "hvd_linreg.json").read_text())
    assert (meta["model"], meta["power"]) == ("negative_binomial", ALPHA)
    scores = tmp_path / "e.json"
    assert main(["evaluate", "--model", model, "--data", data, "--metrics_json", str(scores)]) == 0
    mu = np.exp(X @ np.array(meta["w"]) + meta["b"])
    deviance = sm.families.NegativeBinomial(alpha=ALPHA).deviance(y, mu)
    assert read_metrics(scores)["mean_deviance"] == pytest.approx(deviance / len(y), rel=1e-10)


def test_nb_alpha_is_for_the_negative_binomial_alone(capsys):
    says = refused(capsys, ["--model", "poisson", "--nb_alpha", "0.5"])
    assert says == "--nb_alpha is for --model negative_binomial"
