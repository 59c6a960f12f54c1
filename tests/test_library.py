"""hvd_linreg.fit from a user's own script: in this process, and on every rank of a job with
each rank passing its own rows, equal to statsmodels on all the rows and to the command line
on the same rows; its errors as the command line's, raised on every rank. The same job fits
hvd_linreg.estimators on each rank's rows, equal to scikit-learn's on all the rows."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from library_job import NUM_ROWS, rows
from test_estimators import check_against_sklearn

import hvd_linreg
from conftest import LAUNCH_TIMEOUT_S, REPO, launch, launcher_env, run_metrics

SCRIPT = REPO / "tests" / "library_job.py"
MODELS = ("linear", "logistic", "poisson")


def statsmodels_fit(model: str):
    """statsmodels on all the rows, its coefficients in the tool's order [w..., b]."""
    data = rows(model)
    X = sm.add_constant(data["X"], prepend=False)
    if model == "linear":
        fitted = sm.OLS(data["y"], X).fit()
    elif model == "logistic":
        fitted = sm.Logit(data["y"], X).fit(disp=0, tol=1e-12)
    else:
        poisson = sm.families.Poisson()
        fitted = sm.GLM(
            data["y"], X, family=poisson, var_weights=data["weights"], offset=data["offset"]
        ).fit(tol=1e-12)
    return fitted


def check_against_statsmodels(model: str, got: dict) -> None:
    reference = statsmodels_fit(model)
    np.testing.assert_allclose(got["params"], reference.params, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got["bse"], reference.bse, rtol=1e-6)
    assert got["names"] == ["x1", "x2", "x3", "Intercept"]
    assert got["metrics"]["num_samples"] == NUM_ROWS
    assert "x2 " in got["summary"] and "std error" in got["summary"]


@pytest.mark.core  # the library on every other Python too
def test_import_starts_neither_tensorflow_nor_horovod():
    code = (
        "import sys, hvd_linreg; hvd_linreg.fit; hvd_linreg.UsageError; "
        "print(sorted(m for m in ('tensorflow', 'horovod') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=LAUNCH_TIMEOUT_S,
        env=launcher_env(),
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "model", [pytest.param(m, marks=[pytest.mark.core] * (m == "poisson")) for m in MODELS]
)
def test_fit_in_this_process_equals_statsmodels(model):
    from library_job import fit

    check_against_statsmodels(model, fit(model, rows(model)))


@pytest.mark.parametrize(
    "settings, flags",
    [
        ({"num_steps": 0}, ["--num_steps", "0"]),
        ({"model": "gamma", "link": "logit"}, ["--model", "gamma", "--link", "logit"]),
        ({"l2": -1.0}, ["--l2", "-1"]),
    ],
)
def test_a_bad_setting_raises_the_command_lines_message(settings, flags):
    X, y = np.zeros((4, 1)), np.zeros(4)
    with pytest.raises(hvd_linreg.UsageError) as raised:
        hvd_linreg.fit(X, y, **settings)
    assert isinstance(raised.value, ValueError)
    cli = subprocess.run(
        ["hvd-linreg", *flags],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
        env=launcher_env(),
    )
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"hvd-linreg: error: {raised.value}"


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"data": "rows.csv"}, "data= is the DataFrame of a formula"),
        ({"num_step": 10}, "fit() got unknown settings num_step;"),
        ({"elastic": True}, "fit() does not take elastic=:"),
        ({"missing": "sometimes"}, "--missing must be one of error, drop, got 'sometimes'"),
    ],
)
def test_settings_that_are_not_for_fit_are_refused(settings, says):
    with pytest.raises(
        hvd_linreg.UsageError, match=r"^" + says.replace("(", r"\(").replace(")", r"\)")
    ):
        hvd_linreg.fit(np.zeros((4, 1)), np.zeros(4), **settings)


@pytest.mark.parametrize(
    "change, says",
    [
        (
            lambda d: d["X"].__setitem__((3, 1), np.inf),
            "row 3: NaN or inf in w[1]",
        ),
        (
            lambda d: d["weights"].__setitem__(5, -1.0),
            "row 5: -1 in weights; a weight must be >= 0",
        ),
        (lambda d: d.__setitem__("y", d["y"][:-1]), "X has 1000 rows but y has 999"),
        (lambda d: d.__setitem__("X", d["X"].astype(str)), "X holds <U"),
    ],
)
def test_bad_rows_raise_a_usage_error(change, says):
    data = rows("poisson")
    change(data)
    X = data.pop("X")
    with pytest.raises(hvd_linreg.UsageError, match=re.escape(says)):
        hvd_linreg.fit(X, data.pop("y"), **data, model="poisson", solver="exact")


@pytest.mark.parametrize("solver", ["exact", "sgd"])
def test_the_command_line_and_fit_give_the_same_coefficients(tmp_path, solver):
    """The same rows as a CSV file for the command line and as arrays for fit(): one recipe."""
    data = rows("linear")
    frame = pd.DataFrame(data["X"], columns=["x1", "x2", "x3"]).assign(y=data["y"])
    path = tmp_path / "rows.csv"
    frame.to_csv(path, index=False, float_format="%.17g")
    settings = {"solver": solver, "num_steps": 300, "batch_size": 50}
    flags = [item for k, v in settings.items() for item in (f"--{k}", str(v))]
    metrics = run_metrics(tmp_path, 1, ["--data", str(path), *flags])
    result = hvd_linreg.fit(frame[["x1", "x2", "x3"]], frame["y"], **settings)
    np.testing.assert_allclose(result.params, [*metrics["w"], metrics["b"]], rtol=0, atol=1e-12)
    assert result.to_dict()["loss"] == pytest.approx(metrics["loss"], rel=1e-12)


def test_a_warning_is_a_python_warning_not_a_line(capfd):
    """A collinear design: the command line prints a warning line on stderr; a library call
    warns with a UserWarning, which the caller's filters (or scikit-learn's) can handle."""
    X = np.column_stack([np.arange(10.0), 2 * np.arange(10.0)])
    with pytest.warns(UserWarning, match="the design is singular: columns w\\[0\\], w\\[1\\]"):
        hvd_linreg.fit(X, np.arange(10.0), solver="exact")
    assert "warning:" not in capfd.readouterr().err


def test_a_saved_fit_is_a_model_predict_reads(tmp_path):
    data = rows("linear")
    X = pd.DataFrame(data["X"], columns=["x1", "x2", "x3"])
    result = hvd_linreg.fit(X, data["y"], solver="exact")
    result.save(tmp_path / "model")
    model = hvd_linreg.load(tmp_path / "model")
    assert model.theta.shape == (4, 1)  # the coefficients' matrix: one column, [w..., b]
    np.testing.assert_array_equal(model.theta[:, 0], result.params)
    assert model.feature_names == ("x1", "x2", "x3")
    X.to_csv(tmp_path / "new.csv", index=False, float_format="%.17g")
    from hvd_linreg.cli import main

    out = tmp_path / "p.npy"
    args = ["--model", str(tmp_path / "model"), "--data", str(tmp_path / "new.csv")]
    assert main(["predict", *args, "--out", str(out)]) == 0
    np.testing.assert_allclose(np.load(out), result.predict(X), rtol=1e-13)


def run_job(launcher: str, tmp_path, *options: str):
    out = tmp_path / "fits.json"
    program = (sys.executable, str(SCRIPT), ",".join([*MODELS, "estimators"]), str(out), *options)
    run = launch(launcher, 2, [], tmp_path, metrics=False, program=program)
    return run, (json.loads(out.read_text()) if out.exists() else None)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "launcher, options", [("mpirun", ("init-first",)), ("horovodrun-gloo", ())]
)
def test_each_ranks_own_rows_fit_equals_statsmodels_on_all_the_rows(launcher, options, tmp_path):
    """Rank 0 holds 300 rows and rank 1 700; mpirun's script starts Horovod itself first.
    The estimators, fitted on each rank's rows, equal scikit-learn's on all the rows."""
    run, fits = run_job(launcher, tmp_path, *options)
    assert run.returncode == 0, run.output
    for model in MODELS:
        check_against_statsmodels(model, fits[model])
        assert fits[model]["metrics"]["size"] == 2
    check_against_sklearn(fits["estimators"])


@pytest.mark.multiprocess
def test_a_bad_row_on_one_rank_raises_on_every_rank(tmp_path):
    run, fits = run_job("mpirun", tmp_path, "nan-on-rank-1")
    assert run.returncode == 2, run.output
    says = (
        "row 2: NaN or inf in x2; fill or drop such rows (missing='drop' "
        "drops those with NaN) (seen on rank 1)"
    )
    for rank in (0, 1):
        assert f"rank {rank}: UsageError: {says}" in run.stdout, run.output
    assert fits is None and "Traceback" not in run.output
