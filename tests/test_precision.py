"""Data keeps its precision: float64 files train in float64, and the exact solver centres the
features, so an ill-scaled float64 file gets the least-squares answer of its own data."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import launch, params_of, read_metrics
from hvd_linreg.cli import main
from hvd_linreg.config import Config
from hvd_linreg.data import load_shard
from reference import averaged_sgd, lstsq


def ill_scaled(num_rows: int = 3001) -> tuple[np.ndarray, np.ndarray]:
    """docs/statistics.md's centring case: 5 features, one offset by 1000, one scaled by 100,
    in float64."""
    rng = np.random.default_rng(12)
    X = rng.standard_normal((num_rows, 5))
    X[:, 1] += 1000.0
    X[:, 3] *= 100.0
    y = X @ [1.5, -2.0, 0.25, 0.01, 3.0] + 7.0 + 0.1 * rng.standard_normal(num_rows)
    return X, y


@pytest.fixture(scope="module")
def ill_scaled_file(tmp_path_factory):
    X, y = ill_scaled()
    path = tmp_path_factory.mktemp("precision") / "ill.npy"
    np.save(path, np.c_[X, y])
    return str(path), X, y


@pytest.mark.parametrize(
    "dtype, stored, trained",
    [
        (None, np.float64, "float64"),
        (None, np.float32, "float32"),
        ("float32", np.float64, "float32"),
    ],
)
def test_a_file_trains_in_its_own_dtype_unless_told(tmp_path, dtype, stored, trained):
    path = tmp_path / "d.npy"
    np.save(path, np.arange(40, dtype=stored).reshape(20, 2))
    shard = load_shard(Config(data=str(path), dtype=dtype, batch_size=5), 0, 2)
    assert shard.X.dtype == trained and shard.y.dtype == trained


def test_csv_text_trains_in_float64_and_synthetic_data_in_float32(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n0.1,0.2\n0.3,0.4\n")
    assert load_shard(Config(data=str(path), batch_size=1), 0, 1).dtype == "float64"
    assert load_shard(Config(batch_size=10), 0, 1).dtype == "float32"
    assert load_shard(Config(batch_size=10, dtype="float64"), 0, 1).dtype == "float64"


def test_exact_solver_matches_float64_lstsq_on_one_rank(ill_scaled_file, tmp_path):
    path, X, y = ill_scaled_file
    out = tmp_path / "m.json"
    assert main(["--data", path, "--solver", "exact", "--metrics_json", str(out)]) == 0
    m = read_metrics(out)
    assert m["dtype"] == "float64"
    np.testing.assert_allclose(params_of(m), lstsq(X, y), rtol=1e-9)


@pytest.mark.multiprocess
def test_exact_solver_matches_float64_lstsq_on_three_ranks(ill_scaled_file, tmp_path):
    path, X, y = ill_scaled_file
    run = launch("mpirun", 3, ["--data", path, "--solver", "exact"], tmp_path)
    assert run.returncode == 0, run.output
    assert "ill-conditioned" not in run.output  # centred, the system is well-conditioned
    np.testing.assert_allclose(params_of(run.metrics), lstsq(X, y), rtol=1e-9)  # all 3001 rows


def test_the_exact_solver_takes_no_batch(tmp_path):
    """A --batch_size above the rows is SGD's problem: the exact solver uses none."""
    X, y = ill_scaled(20)
    np.save(tmp_path / "small.npy", np.c_[X, y])
    out = tmp_path / "m.json"
    args = ["--data", str(tmp_path / "small.npy"), "--batch_size", "100"]
    assert main([*args, "--solver", "exact", "--metrics_json", str(out)]) == 0
    np.testing.assert_allclose(params_of(read_metrics(out)), lstsq(X, y), rtol=1e-9)
    assert main(args) == 2  # SGD still refuses it


STEPS, LR, BATCH = 100, 0.02, 50


def _sgd_reference(X, y, m) -> np.ndarray:
    return averaged_sgd(
        X,
        y,
        ranks=m["size"],
        batch_size=BATCH,
        steps=STEPS,
        lr=LR,
        w0=m["initial_w"],
        b0=m["initial_b"],
    )


@pytest.fixture(scope="module")
def float64_file(tmp_path_factory):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1000, 3))
    y = X @ [0.5, -1.0, 2.0] + 1.0 + 0.1 * rng.standard_normal(1000)
    path = tmp_path_factory.mktemp("float64") / "d.npz"
    np.savez(path, X=X, y=y)
    return str(path), X, y


SGD_FLAGS = ["--num_steps", str(STEPS), "--learning_rate", str(LR), "--batch_size", str(BATCH)]


@pytest.mark.multiprocess
def test_float64_sgd_matches_the_float64_reference(float64_file, tmp_path):
    path, X, y = float64_file
    run = launch("mpirun", 2, ["--data", path, *SGD_FLAGS], tmp_path)
    assert run.returncode == 0, run.output
    np.testing.assert_allclose(params_of(run.metrics), _sgd_reference(X, y, run.metrics), rtol=1e-9)


def test_float32_training_is_outside_the_float64_tolerance(float64_file, tmp_path):
    """The check above has teeth: the same file trained in float32 misses it."""
    path, X, y = float64_file
    out = tmp_path / "m.json"
    args = ["--data", path, *SGD_FLAGS, "--dtype", "float32", "--metrics_json", str(out)]
    assert main(args) == 0
    m = read_metrics(out)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(params_of(m), _sgd_reference(X, y, m), rtol=1e-9)
