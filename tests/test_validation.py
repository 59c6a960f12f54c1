"""--validation_fraction: docs/data.md's hash picks the held-out rows, the same for any number of
ranks; training uses the others, and the scores on the held-out rows are scikit-learn's."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics

from conftest import REPO, launch, launcher_env, params_of, run_metrics
from hvd_linreg.config import Config
from hvd_linreg.data import load_shard, synthetic_rows
from hvd_linreg.errors import UsageError
from reference import averaged_sgd, lstsq

MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """docs/data.md's splitmix64, on Python integers (mod 2^64)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def held_out(num_rows: int, seed: int, fraction: float) -> np.ndarray:
    """The validation rows as docs/data.md defines them, computed here on our own."""
    key = splitmix64(seed ^ 0x76616C6964617465)
    u = [(splitmix64(i ^ key) >> 11) / 2.0**53 for i in range(num_rows)]
    return np.asarray(u) < fraction


def scored(y_true, y_pred) -> dict:
    return {
        "mse": metrics.mean_squared_error(y_true, y_pred),
        "rmse": np.sqrt(metrics.mean_squared_error(y_true, y_pred)),
        "mae": metrics.mean_absolute_error(y_true, y_pred),
        "r2": metrics.r2_score(y_true, y_pred),
    }


def assert_scores(got: dict, expected: dict, rtol: float) -> None:
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=rtol), key


@pytest.fixture(scope="module")
def diabetes(tmp_path_factory):
    path = tmp_path_factory.mktemp("diabetes") / "diabetes.csv"
    script = [sys.executable, str(REPO / "docs" / "diabetes_csv.py"), str(path)]
    subprocess.run(script, check=True, env=launcher_env())
    table = pd.read_csv(path).to_numpy()
    return str(path), table[:, :-1], table[:, -1]


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_exact_fit_on_the_training_rows_scored_on_the_held_out_ones(tmp_path, diabetes, size):
    path, X, y = diabetes
    flags = ["--validation_fraction", "0.25", "--seed", "3", "--batch_size", "10"]
    m = run_metrics(tmp_path, size, ["--data", path, "--solver", "exact", *flags])
    held = held_out(len(y), seed=3, fraction=0.25)
    np.testing.assert_allclose(params_of(m), lstsq(X[~held], y[~held]), rtol=1e-9)
    assert m["num_samples"] == (~held).sum() and m["validation"]["num_samples"] == held.sum()
    prediction = X[held] @ m["w"] + m["b"]
    assert_scores(m["validation"], scored(y[held], prediction), rtol=1e-9)


@pytest.mark.multiprocess
def test_sgd_trains_on_the_training_rows_and_scores_each_log_step(tmp_path):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((700, 3))
    y = X @ [1.0, -2.0, 0.5] + 1e6 + 0.1 * rng.standard_normal(700)  # a large mean: R² holds
    np.savez(tmp_path / "d.npz", X=X, y=y)
    flags = ["--num_steps", "60", "--log_every", "20", "--learning_rate", "0.05"]
    args = ["--data", str(tmp_path / "d.npz"), "--validation_fraction", "0.3", "--batch_size", "40"]
    run = launch("mpirun", 2, [*args, *flags], tmp_path)
    assert run.returncode == 0, run.output
    m, held = run.metrics, held_out(700, seed=0, fraction=0.3)
    # The layout contract on the training rows alone: the run of a file of just those rows.
    expected = averaged_sgd(
        X[~held],
        y[~held],
        ranks=2,
        batch_size=40,
        steps=60,
        lr=0.05,
        w0=m["initial_w"],
        b0=m["initial_b"],
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9)
    history = m["validation"]["history"]
    assert [h["step"] for h in history] == [20, 40, 60]
    assert_scores(history[-1], scored(y[held], X[held] @ m["w"] + m["b"]), rtol=1e-6)
    assert len(re.findall(r"^Step: \d+ Loss: \S+ Validation: MSE .* R² ", run.stdout, re.M)) == 3


def test_the_split_is_the_same_on_1_and_3_ranks(tmp_path):
    cfg = Config(validation_fraction=0.2, seed=4, batch_size=10, num_features=2)
    held = held_out(1000, seed=4, fraction=0.2)
    X_all, y_all = synthetic_rows(4, np.arange(1000), 2)
    for size in (1, 3):
        shards = [load_shard(cfg, rank, size) for rank in range(size)]
        X = np.concatenate([s.validation.X for s in shards])  # one consecutive piece each
        np.testing.assert_array_equal(X, X_all[held])
        assert all(s.num_validation == held.sum() for s in shards)
        train = np.concatenate([b.X for s in shards for b in s.blocks()])  # each row once
        assert len(train) == (~held).sum() and not np.isin(train[:, 0], X[:, 0]).any()
    rows = np.arange(1000)[~held]
    # rank 1's first rows: the layout's, numbered among the training rows
    np.testing.assert_array_equal(shards[1].y[:10], y_all[rows[shards[1].layout.rows()[:10]]])


def test_a_file_read_as_used_holds_out_the_same_rows(tmp_path, monkeypatch):
    table = np.random.default_rng(5).standard_normal((1003, 4))
    path = tmp_path / "d.npy"
    np.save(path, table)
    cfg = Config(data=str(path), batch_size=10, validation_fraction=0.1)
    in_memory = load_shard(cfg, 1, 4)
    monkeypatch.setenv("HVD_LINREG_RANK_MEMORY", "1000")
    streamed = load_shard(cfg, 1, 4)
    assert streamed.table is not None
    X = np.concatenate([b.X for b in streamed.blocks(max_rows=40)])
    np.testing.assert_array_equal(X, np.concatenate([b.X for b in in_memory.blocks()]))
    np.testing.assert_array_equal(streamed.validation.X, in_memory.validation.X)
    held = np.flatnonzero(held_out(1003, seed=0, fraction=0.1))
    piece = held[len(held) // 4 : 2 * len(held) // 4]
    np.testing.assert_array_equal(in_memory.validation.X, table[piece, :-1])


@pytest.mark.parametrize("fraction", [1.0, -0.1])
def test_a_fraction_outside_0_to_1_is_a_usage_error(fraction):
    with pytest.raises(UsageError, match=r"--validation_fraction must be a number in \[0, 1\)"):
        Config(validation_fraction=fraction)


def test_a_fraction_that_holds_out_nothing_is_a_usage_error():
    with pytest.raises(UsageError, match="holds out none of the 10 rows"):
        load_shard(Config(validation_fraction=1e-9, num_samples=10, batch_size=1), 0, 1)
