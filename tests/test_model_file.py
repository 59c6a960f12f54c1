"""The model as a file: --export writes a SavedModel that serves X·w + b; `predict` and
`evaluate` apply it to new data on one rank or many, and refuse what is not theirs to read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

from conftest import (
    LAUNCH_TIMEOUT_S,
    Run,
    launch,
    launch_each_rank_reporting,
    launcher_env,
    params_of,
    read_metrics,
)
from hvd_linreg import __version__
from hvd_linreg.data import Rows
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.scoring.regression import scores

NUM_ROWS, NUM_FEATURES = 203, 3  # an odd count: the ranks' blocks differ in size


def _regression(seed: int, num_rows: int = NUM_ROWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((num_rows, NUM_FEATURES))
    y = X @ np.array([1.5, -2.0, 0.25]) + 3.0 + 0.1 * rng.standard_normal(num_rows)
    return X, y


def _write_csv(path: Path, names: list[str], columns: np.ndarray) -> str:
    lines = [",".join(names)] + [",".join(repr(v) for v in row) for row in columns.tolist()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A model trained on 2 ranks from a float64 .npy and exported; new data to apply it to."""
    where = tmp_path_factory.mktemp("exported")
    X, y = _regression(seed=1)
    np.save(where / "train.npy", np.column_stack([X, y]))
    run = launch(
        "mpirun",
        2,
        ["--data", "train.npy", "--num_steps", "300", "--batch_size", "10", "--export", "model"],
        where,
    )
    assert run.returncode == 0, run.output
    X_new, y_new = _regression(seed=2)
    np.save(where / "features.npy", X_new)
    _write_csv(where / "new.csv", ["a", "b", "c", "t"], np.column_stack([X_new, y_new]))
    return {
        "dir": where,
        "model": str(where / "model"),
        "metrics": run.metrics,
        "X": X_new,
        "y": y_new,
        "features.npy": str(where / "features.npy"),
        "new.csv": str(where / "new.csv"),
    }


def _tool(args: list[str], where: Path) -> Run:
    """The tool on one rank, in a process of its own, as a user runs it."""
    run = launch("python", 1, args, where, metrics=False)
    assert "Traceback" not in run.output, run.output
    return run


# What a user of the SavedModel does, in a process of its own: TensorFlow started in the pytest
# process would keep the tool, run in it by other tests, from setting its threads.
_SERVE = """
import sys, numpy as np, tensorflow as tf
signature = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
(spec,) = signature.structured_input_signature[1].values()
print(spec.name, spec.shape.as_list(), spec.dtype.name, *signature.structured_outputs)
(out,) = signature(features=tf.constant(np.load(sys.argv[2]))).values()
np.save(sys.argv[3], out.numpy())
"""


def _serve(model: str, X: np.ndarray, where: Path) -> tuple[np.ndarray, str]:
    """The serving signature's predictions for X, and what it takes and gives."""
    np.save(where / "serve-in.npy", X)
    args = [model, str(where / "serve-in.npy"), str(where / "serve-out.npy")]
    proc = subprocess.run(
        [sys.executable, "-c", _SERVE, *args],
        capture_output=True,
        text=True,
        env=launcher_env({"TF_CPP_MIN_LOG_LEVEL": "3"}),
        timeout=LAUNCH_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr
    return np.load(where / "serve-out.npy"), proc.stdout.strip()


def _x_w_plus_b(exported) -> np.ndarray:
    theta = params_of(exported["metrics"])
    return exported["X"] @ theta[:-1] + theta[-1]


def test_serving_signature_predicts_x_w_plus_b(exported, tmp_path):
    predictions, signature = _serve(exported["model"], exported["X"], tmp_path)
    assert signature == f"features [None, {NUM_FEATURES}] float64 prediction"
    np.testing.assert_allclose(predictions, _x_w_plus_b(exported), rtol=0, atol=1e-12)


def test_metadata_records_the_model_and_its_training(exported):
    meta = json.loads((Path(exported["model"]) / "assets.extra" / "hvd_linreg.json").read_text())
    metrics = exported["metrics"]
    assert meta["hvd_linreg"] == __version__
    assert meta["metrics"] == metrics  # the values --metrics_json holds
    assert meta["config"] == metrics["config"]
    assert meta["w"] + [meta["b"]] == metrics["w"] + [metrics["b"]]
    assert (meta["dtype"], meta["num_features"]) == ("float64", NUM_FEATURES)
    assert meta["data"] == str(exported["dir"] / "train.npy")
    assert (meta["feature_names"], meta["target_name"]) == (None, None)  # an array names none


@pytest.mark.multiprocess
def test_an_exact_models_predictions_equal_its_saved_models(tmp_path):
    """An exact Poisson fit under mpirun (no TensorFlow but for the export's SavedModel):
    predict, which starts neither TensorFlow nor Horovod, gives what the serving signature
    gives, to 1e-12."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 3))
    y = rng.poisson(np.exp(X @ [0.3, -0.2, 0.1] + 0.5)).astype(np.float64)
    np.save(tmp_path / "train.npy", np.column_stack([X, y]))
    np.save(tmp_path / "features.npy", X[:50])
    args = ["--data", "train.npy", "--model", "poisson", "--solver", "exact", "--export", "model"]
    run = launch("mpirun", 2, args, tmp_path)
    assert run.returncode == 0, run.output
    assert run.metrics["controller"] == "mpi4py"
    model, out = str(tmp_path / "model"), tmp_path / "p.npy"
    predict = ["predict", "--model", model, "--data", str(tmp_path / "features.npy")]
    assert _tool([*predict, "--out", str(out)], tmp_path).returncode == 0
    served, _ = _serve(model, X[:50], tmp_path)
    np.testing.assert_allclose(np.load(out), served, rtol=1e-12)


@pytest.mark.multiprocess
@pytest.mark.parametrize("data, out", [("new.csv", "p.npy"), ("features.npy", "p.csv")])
def test_predict_on_1_and_2_ranks_is_x_w_plus_b_in_file_order(exported, data, out, tmp_path):
    """A CSV file with the target, and a .npy of the features alone, into either format."""
    args = ["predict", "--model", exported["model"], "--data", exported[data]]
    run = launch("mpirun", 2, [*args, "--out", str(tmp_path / f"2-{out}")], tmp_path, metrics=False)
    assert run.returncode == 0, run.output
    assert _tool([*args, "--out", str(tmp_path / f"1-{out}")], tmp_path).returncode == 0
    two, one = (tmp_path / f"2-{out}").read_bytes(), (tmp_path / f"1-{out}").read_bytes()
    assert two == one
    if out.endswith(".csv"):
        assert two.decode().splitlines()[0] == "prediction"
        predictions = np.loadtxt(tmp_path / f"2-{out}", skiprows=1)
    else:
        predictions = np.load(tmp_path / f"2-{out}")
    np.testing.assert_allclose(predictions, _x_w_plus_b(exported), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        predictions, _serve(exported["model"], exported["X"], tmp_path)[0], rtol=0, atol=1e-12
    )


@pytest.mark.multiprocess
def test_evaluate_on_1_and_2_ranks_equals_scikit_learn(exported, tmp_path):
    args = ["evaluate", "--model", exported["model"], "--data", exported["new.csv"]]
    run = launch(
        "mpirun", 2, [*args, "--metrics_json", str(tmp_path / "2.json")], tmp_path, metrics=False
    )
    assert run.returncode == 0, run.output
    assert _tool([*args, "--metrics_json", str(tmp_path / "1.json")], tmp_path).returncode == 0
    y, predicted = exported["y"], _x_w_plus_b(exported)
    mse = mean_squared_error(y, predicted)
    expected = {
        "count": NUM_ROWS,
        "mse": mse,
        "rmse": np.sqrt(mse),
        "mae": mean_absolute_error(y, predicted),
        "r2": r2_score(y, predicted),
    }
    for ranks in (1, 2):
        scores = read_metrics(tmp_path / f"{ranks}.json")
        assert (scores["model"], scores["data"]) == (exported["model"], exported["new.csv"])
        for name, value in expected.items():
            assert scores[name] == pytest.approx(value, rel=1e-12, abs=1e-14), (ranks, name)
    assert "\n  R²:   " in run.stdout and run.stdout.count("\n  MSE:") == 1  # rank 0 prints, once


def test_a_model_trained_on_csv_matches_columns_by_name(exported, tmp_path):
    """The features in another order, the target anywhere or absent: the same predictions."""
    X, y = exported["X"], exported["y"]
    train = _write_csv(tmp_path / "train.csv", ["a", "b", "c", "t"], np.column_stack([X, y]))
    model = str(tmp_path / "model")
    assert (
        _tool(["--data", train, "--solver", "exact", "--export", model], tmp_path).returncode == 0
    )
    meta = json.loads((tmp_path / "model" / "assets.extra" / "hvd_linreg.json").read_text())
    assert (meta["feature_names"], meta["target_name"]) == (["a", "b", "c"], "t")
    shuffled = _write_csv(
        tmp_path / "s.csv", ["t", "c", "a", "b"], np.column_stack([y, X[:, [2, 0, 1]]])
    )
    features = _write_csv(tmp_path / "f.csv", ["b", "c", "a"], X[:, [1, 2, 0]])
    for data in (train, shuffled, features):
        assert (
            _tool(
                ["predict", "--model", model, "--data", data, "--out", f"{data}.npy"], tmp_path
            ).returncode
            == 0
        )
    np.testing.assert_array_equal(np.load(f"{shuffled}.npy"), np.load(f"{train}.npy"))
    np.testing.assert_array_equal(np.load(f"{features}.npy"), np.load(f"{train}.npy"))
    np.testing.assert_allclose(
        np.load(f"{train}.npy"), _serve(model, X, tmp_path)[0], rtol=0, atol=1e-12
    )
    scores = tmp_path / "e.json"
    run = _tool(
        ["evaluate", "--model", model, "--data", shuffled, "--metrics_json", str(scores)], tmp_path
    )
    assert run.returncode == 0, run.output
    assert read_metrics(tmp_path / "e.json")["mse"] == pytest.approx(
        mean_squared_error(y, np.load(f"{train}.npy")), rel=1e-12
    )


@pytest.fixture(scope="module")
def scoring(exported, tmp_path_factory):
    """A model trained exactly on a CSV file of a, b, c, t, and a scoring file as users have
    them: an ID column of words (one with a comma, quoted), a note, the features in another
    order, and no target."""
    where = tmp_path_factory.mktemp("scoring")
    X, y = exported["X"], exported["y"]
    train = _write_csv(where / "train.csv", ["a", "b", "c", "t"], np.column_stack([X, y]))
    model = str(where / "model")
    assert _tool(["--data", train, "--solver", "exact", "--export", model], where).returncode == 0
    ids = [f"cust-{i:05d}" for i in range(len(X))]
    ids[3] = '"Smith, Jane"'
    lines = ["id,c,note,a,b"] + [
        f"{ids[i]},{X[i, 2].item()!r},n{i % 7},{X[i, 0].item()!r},{X[i, 1].item()!r}"
        for i in range(len(X))
    ]
    data = where / "score.csv"
    data.write_text("\n".join(lines) + "\n")
    return {"model": model, "data": str(data), "ids": [i.strip('"') for i in ids], "where": where}


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_predict_keeps_the_ids_beside_the_predictions_in_file_order(
    exported, scoring, size, tmp_path
):
    """Columns the model does not use are passed over, named in one line; --keep_columns
    copies them, as the file writes them, beside each row's prediction, at any rank count (and
    they are not said to be passed over)."""
    out = tmp_path / "p.csv"
    args = ["predict", "--model", scoring["model"], "--data", scoring["data"], "--out", str(out)]
    run = (
        launch("mpirun", size, args, tmp_path, metrics=False) if size > 1 else _tool(args, tmp_path)
    )
    assert run.returncode == 0, run.output
    assert run.stdout.count("passing over the columns id, note of") == 1
    args += ["--keep_columns", "id"]
    run = (
        launch("mpirun", size, args, tmp_path, metrics=False) if size > 1 else _tool(args, tmp_path)
    )
    assert run.returncode == 0, run.output
    assert run.stdout.count("passing over the column note of") == 1
    args[-1] = "id,note"
    run = (
        launch("mpirun", size, args, tmp_path, metrics=False) if size > 1 else _tool(args, tmp_path)
    )
    assert run.returncode == 0, run.output
    assert "passing over" not in run.stdout
    table = pd.read_csv(out, dtype={"id": str, "note": str})
    assert list(table.columns) == ["id", "note", "prediction"]
    assert table.id.tolist() == scoring["ids"]
    assert table.note.tolist() == [f"n{i % 7}" for i in range(len(table))]
    plain = tmp_path / "plain.npy"
    assert (
        _tool(
            [
                "predict",
                "--model",
                scoring["model"],
                "--data",
                exported["new.csv"],
                "--out",
                str(plain),
            ],
            tmp_path,
        ).returncode
        == 0
    )
    np.testing.assert_allclose(table.prediction.to_numpy(), np.load(plain), rtol=0, atol=1e-12)


def test_evaluate_passes_over_the_columns_the_model_does_not_use(scoring, exported, tmp_path):
    where = tmp_path / "with-id.csv"
    frame = pd.read_csv(exported["new.csv"]).assign(id=[f"r{i}" for i in range(NUM_ROWS)])
    frame.to_csv(where, index=False)
    run = _tool(["evaluate", "--model", scoring["model"], "--data", str(where)], tmp_path)
    assert run.returncode == 0, run.output
    assert "passing over the column id of" in run.stdout and "MSE:" in run.stdout


def _foreign_directory(path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("mine")


@pytest.mark.parametrize(
    "make",
    [_foreign_directory, lambda p: p.mkdir(), lambda p: p.write_text("mine")],
    ids=["directory with a file", "empty directory", "file"],
)
def test_export_refuses_a_path_it_did_not_write_and_leaves_it(make, tmp_path):
    target = tmp_path / "model"
    make(target)
    before = sorted(
        (str(p), p.read_bytes() if p.is_file() else b"") for p in [target, *target.rglob("*")]
    )
    run = _tool(["--num_steps", "10", "--export", str(target)], tmp_path)
    assert run.returncode == 2, run.output
    assert f"--export {target} exists and is not a model hvd-linreg exported" in run.stderr
    assert "Summary:" not in run.stdout  # refused before training
    after = sorted(
        (str(p), p.read_bytes() if p.is_file() else b"") for p in [target, *target.rglob("*")]
    )
    assert after == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary


def test_export_replaces_its_own_earlier_export(tmp_path):
    target = tmp_path / "model"
    metadata = target / "assets.extra" / "hvd_linreg.json"
    assert _tool(["--num_steps", "10", "--export", str(target)], tmp_path).returncode == 0
    first = json.loads(metadata.read_text())
    assert _tool(["--num_steps", "20", "--export", str(target)], tmp_path).returncode == 0
    second = json.loads(metadata.read_text())
    assert (first["config"]["num_steps"], second["config"]["num_steps"]) == (10, 20)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing beside


def _corrupt_model(exported, tmp_path: Path) -> str:
    copy = tmp_path / "corrupt"
    shutil.copytree(exported["model"], copy)
    (copy / "assets.extra" / "hvd_linreg.json").write_text("{not json")
    return str(copy)


def _other_saved_model(exported, tmp_path: Path) -> str:
    copy = tmp_path / "other"
    shutil.copytree(exported["model"], copy)
    shutil.rmtree(copy / "assets.extra")  # what any other SavedModel looks like
    return str(copy)


def _columns(count: int):
    def write(exported, tmp_path: Path) -> str:
        np.save(tmp_path / "d.npy", np.zeros((5, count)))
        return str(tmp_path / "d.npy")

    return write


def _case(command: str, model="model", data="new.csv", out="p.npy", extra: tuple = ()):
    """A command's arguments as a function of (exported, tmp_path): model and data name one
    of exported's paths, else one in tmp_path, or are functions that make one."""

    def args(exported, tmp_path: Path) -> list[str]:
        def path(v) -> str:
            return v(exported, tmp_path) if callable(v) else exported.get(v, str(tmp_path / v))

        argv = [command, "--model", path(model), "--data", path(data), *extra]
        return argv + (["--out", str(tmp_path / out)] if command == "predict" else [])

    return args


# (case, the arguments, rank 0's message)
BAD_INPUTS = [
    ("missing model", _case("predict", model="nope"), "nope does not exist"),
    ("model is a file", _case("predict", model="features.npy"), "is not a directory"),
    ("another SavedModel", _case("evaluate", model=_other_saved_model), "is not a model hvd-"),
    ("unreadable metadata", _case("evaluate", model=_corrupt_model), "cannot read --model"),
    ("too few columns", _case("predict", data=_columns(2)), "has 2 columns, but the model"),
    ("too many columns", _case("evaluate", data=_columns(5)), "has 5 columns, but the model"),
    ("missing data", _case("predict", data="x.npy"), "x.npy does not exist"),
    ("evaluate without target", _case("evaluate", data="features.npy"), "only the model's 3"),
    ("out in a missing directory", _case("predict", out="no/p.npy"), "cannot write --out"),
    ("out of another format", _case("predict", out="p.txt"), "must end in .npy or .csv"),
    (
        "threshold on a linear model",
        _case("predict", extra=("--threshold", "0.5")),
        "--threshold applies to a classifier",
    ),
    ("unknown flag", _case("evaluate", extra=("--out", "p.npy")), "unrecognized arguments"),
    ("no model", lambda e, t: ["predict", "--data", e["new.csv"]], "are required: --model"),
]


@pytest.mark.parametrize("case, args, message", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_a_usage_error(case, args, message, exported, tmp_path):
    run = _tool(args(exported, tmp_path), tmp_path)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith("hvd-linreg: error:") and run.stderr.count("\n") == 1, run.stderr
    assert message in run.stderr
    assert not list(tmp_path.glob("p.*"))


@pytest.mark.multiprocess
@pytest.mark.parametrize("case", ["too many columns", "out in a missing directory"])
def test_bad_input_ends_every_rank_with_exit_code_2(case, exported, tmp_path):
    """One refused before Horovod starts, one by rank 0 alone after it started."""
    _, args, message = next(c for c in BAD_INPUTS if c[0] == case)
    run = launch_each_rank_reporting("mpirun", 2, args(exported, tmp_path), tmp_path)
    assert run.codes == {0: 2, 1: 2}, run.output
    errors = [line for line in run.stderr.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1 and message in errors[0], run.output
    assert "Traceback" not in run.output


def _one_rank() -> Job:
    return Job(rank=0, size=1, controller="MPI", stall_limit_s=0)


def test_r2_keeps_its_precision_on_targets_far_from_zero():
    """Targets around 1e8 with a spread of 1: sums of y and y² would cancel to nothing."""
    X, y = _regression(seed=3)
    y = y + 1e8
    theta = np.linalg.lstsq(np.column_stack([X, np.ones(len(y))]), y, rcond=None)[0]
    blocks = [Rows(X[i : i + 50], y[i : i + 50]) for i in range(0, len(y), 50)]
    predicted = X @ theta[:-1] + theta[-1]
    r2 = scores(_one_rank(), theta, lambda: blocks).r2
    assert r2 == pytest.approx(r2_score(y, predicted), rel=1e-9)


def test_r2_is_nan_when_the_targets_are_constant():
    X = np.arange(6.0).reshape(3, 2)
    result = scores(_one_rank(), np.array([0.5, 0.0, 1.0]), lambda: [Rows(X, np.full(3, 4.0))])
    assert np.isnan(result.r2) and result.count == 3
