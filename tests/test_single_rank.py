"""The single-rank CPU test: the trainer in this very process, plain python, no launcher."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hvd_linreg.cli import main
from reference import averaged_sgd

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    """The seed program's job with its defaults, run once for the tests below."""
    out = tmp_path_factory.mktemp("seed") / "metrics.json"
    assert main(["--metrics_json", str(out)]) == 0
    return json.loads(out.read_text())


def test_single_rank_recovers_the_seed_model(seed_run):
    assert abs(seed_run["w"][0] - 5.0) < 0.05
    assert abs(seed_run["b"] - 2.0) < 0.05
    assert seed_run["size"] == 1 and seed_run["steps"] == 1000


def test_metrics_json_has_plain_numbers(seed_run):
    for key in (
        "size",
        "steps",
        "batch_size",
        "learning_rate",
        "initial_b",
        "b",
        "loss",
        "wall_s",
        "steps_per_s",
    ):
        assert isinstance(seed_run[key], (int, float)), key
    assert isinstance(seed_run["initial_w"], list) and isinstance(seed_run["w"], list)
    assert seed_run["controller"] in ("MPI", "Gloo")


def test_single_rank_matches_numpy_sgd(tmp_path, regression_file):
    path, X, y = regression_file(num_rows=200, num_features=3)
    out = tmp_path / "m.json"
    args = [
        "--data",
        str(path),
        "--batch_size",
        "32",
        "--num_steps",
        "150",
        "--learning_rate",
        "0.05",
        "--metrics_json",
        str(out),
    ]
    assert main(args) == 0
    m = json.loads(out.read_text())
    expected = averaged_sgd(
        X, y, ranks=1, batch_size=32, steps=150, lr=0.05, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(np.append(m["w"], m["b"]), expected, rtol=1e-4)


def test_log_lines_every_log_every_steps(capsys, tmp_path):
    assert main(["--num_steps", "250", "--log_every", "100"]) == 0
    steps = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Step:")]
    assert [s.split()[1] for s in steps] == ["100", "200", "250"]
