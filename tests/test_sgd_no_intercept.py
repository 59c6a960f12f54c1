"""--no_intercept with SGD: b starts at 0 and stays exactly 0 for every family and optimizer
(it is left out of the linear predictor, so its gradient is 0); the run equals the float64
simulation of averaged SGD with b held at 0 at 1 and 2 ranks; the exact statistics an SGD run
reports are statsmodels' without a constant; a resumed run keeps b at 0 and goes on as an
uninterrupted one, and a checkpoint of the other model is refused; the elastic net's path
still refuses --no_intercept (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_glm import poisson_gradient
from test_logistic import logistic_gradient
from test_no_intercept import assert_statsmodels_without_a_constant, no_intercept_args, rows

from conftest import assert_sgd_is_simulated, params_of, refused, run_metrics
from hvd_linreg import families
from hvd_linreg.cli import main
from hvd_linreg.model_file.export import METADATA
from reference import gradient

GRADIENTS = {"linear": gradient, "poisson": poisson_gradient, "logistic": logistic_gradient}


def held(grad):
    """grad with b's component 0: from b0 = 0 the simulation holds b at 0, and w's gradient
    is the model's without an intercept."""

    def without_b(theta, X, y, l2=0.0):
        g = grad(theta, X, y, l2)
        g[-1] = 0.0
        return g

    return without_b


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
@pytest.mark.parametrize("model", list(GRADIENTS))
def test_sgd_is_averaged_sgd_with_b_held_at_0(tmp_path, model, size):
    table = rows(model)
    X, y = table[["x1", "x2", "x3"]].to_numpy(), table.y.to_numpy()
    args = ["--model", model, "--no_intercept"]
    m = assert_sgd_is_simulated(tmp_path, size, args, X, y, held(GRADIENTS[model]))
    assert m["initial_b"] == 0.0 and m["b"] == 0.0
    assert not np.allclose(m["w"], m["initial_w"])


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
@pytest.mark.parametrize("model", ["linear", "poisson"])
def test_the_exact_statistics_of_an_sgd_run_are_statsmodels_without_a_constant(
    tmp_path, model, size
):
    table = rows(model)
    args = [*no_intercept_args(tmp_path, table, model), "--optimality_gap", "always"]
    m = run_metrics(tmp_path, size, [*args, "--num_steps", "200", "--learning_rate", "0.01"])
    assert m["b"] == 0.0
    assert_statsmodels_without_a_constant(m["statistics"], table, model)
    assert m["optimality_gap"] >= 0  # measured against the optimum without an intercept


def family_rows(model: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows each family fits through the origin: features about 1 (about 0, the exact fits
    of the log links without an intercept, statsmodels' too, fail on a mean of 3), and a 0/1
    target for logistic and binomial, else counts from 1."""
    rng = np.random.default_rng(5)
    X = rng.uniform(0.5, 1.5, size=(256, 2))
    if model in ("logistic", "binomial"):
        return X, (rng.uniform(size=256) < 0.4).astype(float)
    return X, 1.0 + rng.poisson(2.0, 256)


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
@pytest.mark.parametrize("model", families.GLMS)
def test_every_family_and_optimizer_keeps_b_at_exactly_0(tmp_path, model, optimizer):
    """Momentum's velocity and Adam's moments of b stay 0, so b does; and the export's b."""
    X, y = family_rows(model)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    link = ["--link", "log"] if model in ("gamma", "inverse_gaussian") else []
    args = ["--data", str(tmp_path / "d.npz"), "--model", model, *link, "--no_intercept"]
    args += ["--optimizer", optimizer, "--num_steps", "40", "--learning_rate", "0.01"]
    args += ["--seed", "0", "--export", str(tmp_path / "model")]
    m = run_metrics(tmp_path, 1, args)
    assert m["initial_b"] == 0.0 and m["b"] == 0.0
    assert not np.allclose(m["w"], m["initial_w"])
    assert json.loads((tmp_path / "model" / METADATA).read_text())["b"] == 0.0


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_a_resumed_run_keeps_b_at_0_and_equals_an_uninterrupted_one(tmp_path, size):
    """Stopped at step 30 and resumed (Adam, whose state of b must stay 0 too), b is 0 in every
    checkpoint and at the end, and w is that of 60 steps in one go."""
    X, y = family_rows("linear")
    np.savez(tmp_path / "d.npz", X=X, y=y)
    common = ["--data", str(tmp_path / "d.npz"), "--no_intercept", "--optimizer", "adam"]
    common += ["--learning_rate", "0.05", "--log_every", "30", "--dtype", "float64"]
    ckpt = ["--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "30"]
    straight = run_metrics(tmp_path, size, [*common, "--num_steps", "60"])
    run_metrics(tmp_path, size, [*common, *ckpt, "--num_steps", "30"])
    resumed = run_metrics(tmp_path, size, [*common, *ckpt, "--num_steps", "60"])
    assert resumed["first_step"] == 30
    assert resumed["b"] == 0.0 and resumed["initial_b"] == 0.0
    np.testing.assert_allclose(params_of(resumed), params_of(straight), rtol=1e-12)
    for path in sorted((tmp_path / "ckpt").glob("ckpt-*.npz")):
        with np.load(path) as z:
            assert z["params"][-1] == 0.0, path.name


@pytest.mark.parametrize(
    "first, then, says",
    [
        ([], ["--no_intercept"], "is of a model with an intercept (b = "),
        (["--no_intercept"], [], "is of a model without an intercept (--no_intercept)"),
    ],
    ids=["with-then-without", "without-then-with"],
)
def test_a_checkpoint_of_the_other_model_is_refused(tmp_path, capsys, first, then, says):
    ckpt = ["--checkpoint_dir", str(tmp_path / "ckpt"), "--num_features", "2"]
    assert main([*ckpt, *first, "--num_steps", "20"]) == 0
    capsys.readouterr()
    assert says in refused(capsys, [*ckpt, *then, "--num_steps", "40"])


@pytest.mark.parametrize(
    "flags",
    [["--alpha", "0.1"], ["--cv", "3"], ["--solver", "sgd", "--alpha", "0.1"]],
    ids=["alpha", "cv", "sgd-alpha"],
)
def test_the_elastic_nets_path_still_refuses_no_intercept(capsys, tmp_path, flags):
    path = tmp_path / "d.csv"
    rows("linear").to_csv(path, index=False)
    says = refused(capsys, ["--data", str(path), "--no_intercept", *flags])
    assert says.startswith("--no_intercept is not fitted with the elastic net of --")
    assert "its path always fits b" in says
