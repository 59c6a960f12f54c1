"""The model-family seam: a family that lives in tests/ (family_lad.py, least absolute
deviations) is one module plus one registration, and trains, reports, exports and predicts
through the same recipe as the linear family, exactly averaged SGD on its own loss."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from conftest import REPO, launch, params_of
from hvd_linreg import families, report
from hvd_linreg.config import Config
from hvd_linreg.errors import UsageError
from reference import SGD, averaged, constant

PROBE = (sys.executable, str(REPO / "tests" / "family_lad.py"))
STEPS, LR, BATCH = 60, 0.05, 8


def lad_gradient(theta, X, y, l2=0.0):
    """d/dtheta of mean(|X w + b - y|) + l2 |w|²: the sign of each residual."""
    sign = np.sign(X @ theta[:-1] + theta[-1] - y)
    return np.append(X.T @ sign, sign.sum()) / len(y) + np.append(2.0 * l2 * theta[:-1], 0.0)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lad")
    rng = np.random.default_rng(5)
    X = rng.standard_normal((400, 2))
    y = X @ [1.5, -0.5] + 0.25 + rng.laplace(0, 0.2, 400)
    np.savez(tmp / "train.npz", X=X, y=y)
    return tmp, X, y


def test_an_unregistered_family_is_a_usage_error():
    """Config knows no family: the families refuse one they do not register."""
    from hvd_linreg import families

    with pytest.raises(UsageError, match="--model must be one of linear"):
        families.for_config(Config(model="lad"))


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher", ["mpirun", "horovodrun-gloo"])
def test_a_family_from_tests_trains_exactly_averaged_sgd_on_its_own_loss(data, launcher):
    tmp, X, y = data
    args = ["--model", "lad", "--data", str(tmp / "train.npz"), "--num_steps", str(STEPS)]
    args += ["--learning_rate", str(LR), "--batch_size", str(BATCH), "--log_every", "20"]
    run = launch(launcher, 2, args, tmp, program=PROBE)
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
        grad=lad_gradient,
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    residual = X @ expected[:-1] + expected[-1] - y
    assert m["loss"] == pytest.approx(np.abs(residual).mean(), rel=1e-12)
    assert "(mean absolute error over all 400 samples)" in run.stdout
    assert "exact optimum: skipped (the model family lad has no exact solver)" in run.stdout


@pytest.mark.multiprocess
def test_a_family_from_tests_exports_and_predicts_through_its_module(data):
    tmp, X, y = data
    args = ["--model", "lad", "--data", str(tmp / "train.npz"), "--num_steps", "20"]
    run = launch("mpirun", 2, [*args, "--export", str(tmp / "model")], tmp, program=PROBE)
    assert run.returncode == 0, run.output
    meta = json.loads((tmp / "model" / "assets.extra" / "hvd_linreg.json").read_text())
    assert meta["model"] == "lad"
    predict = ["predict", "--model", str(tmp / "model"), "--data", str(tmp / "train.npz")]
    done = launch(
        "mpirun", 2, [*predict, "--out", str(tmp / "p.npy")], tmp, program=PROBE, metrics=False
    )
    assert done.returncode == 0, done.output
    theta = np.array([*meta["w"], meta["b"]])
    np.testing.assert_allclose(np.load(tmp / "p.npy"), X @ theta[:-1] + theta[-1], rtol=1e-12)


def test_the_exact_solver_is_refused_for_a_family_without_one(data, tmp_path):
    tmp, _, _ = data
    args = ["--model", "lad", "--data", str(tmp / "train.npz"), "--solver", "exact"]
    run = launch("mpirun", 2, args, tmp_path, program=PROBE, metrics=False)
    assert run.returncode == 2, run.output
    assert "--model lad has no exact solver: use --solver sgd" in run.stderr
    assert "Traceback" not in run.output


@pytest.mark.parametrize(
    "name, link", [(n, link) for n in families.GLMS for link in families.get(n).LINKS]
)
def test_the_loss_and_deviance_summed_in_two_parts_are_the_loss_and_deviance(name, link):
    """IRLS sums loss_terms_in_target once and loss_terms_in_mean on every pass, and a path's
    pass deviance_in_target once a block and deviance_in_mean for every model: together they
    must be loss_terms and unit_deviance, or the objective, step halving and CV would follow
    another loss."""
    family = families.get(name, link)
    rng = np.random.default_rng(2)
    y = rng.uniform(0.1, 0.9, 50) if name in ("logistic", "binomial") else rng.poisson(3.0, 50)
    y = y + 0.5 * (name in ("gamma", "linear", "gaussian"))
    mu = np.clip(y + rng.uniform(-0.05, 0.05, 50), 0.05, 0.95 if y.max() < 1 else None)
    eta = family.link(mu)
    mu = family.link.inverse(eta)
    split = family.loss_terms_in_mean(y, eta, mu) + family.loss_terms_in_target(y)
    np.testing.assert_allclose(split, family.loss_terms(y, eta), rtol=1e-12, atol=1e-12)
    split = family.deviance_in_mean(y, eta, mu) + family.deviance_in_target(y)
    np.testing.assert_allclose(split, family.unit_deviance(y, mu), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "model, link, loss, solver, cost",
    [
        ("linear", None, "mean squared error", "exact least squares", "the distributed QR"),
        ("logistic", "probit", "mean log-loss", "(IRLS, Fisher scoring)", "per IRLS iteration"),
        ("poisson", None, "mean half Poisson deviance", "(Newton's method)", "per Newton"),
        ("gamma", "log", "mean half Gamma deviance", "(IRLS, Fisher scoring)", "per IRLS"),
        ("inverse_gaussian", None, "mean half inverse Gaussian deviance", "(Newton's", "Newton"),
        (
            "negative_binomial",
            None,
            "mean half negative binomial deviance",
            "Fisher scoring)",
            "IRLS",
        ),
        ("multinomial", None, "mean log-loss", "(Newton's method)", "per Newton iteration"),
    ],
)
def test_what_the_summary_calls_a_family(model, link, loss, solver, cost):
    """The loss and solver words are the report's, from what the family is: IRLS under the
    canonical link is Newton's method (negative binomial's log link is not its canonical)."""
    family = families.get(model, link)
    assert report.loss_name(family) == loss
    name, spent = report.solver_words(family)
    assert solver in name and cost in spent
