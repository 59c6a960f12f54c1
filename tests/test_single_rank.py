"""The single-rank CPU test: the trainer in this very process, plain python, no launcher."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import time

import horovod
import numpy as np
import pytest
import tensorflow as tf

import hvd_linreg
from conftest import REPO, launcher_env, read_metrics
from hvd_linreg.cli import main
from hvd_linreg.config import field_names
from reference import averaged_sgd

pytestmark = pytest.mark.core


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    """The seed program's job with its defaults, run once for the tests below."""
    out = tmp_path_factory.mktemp("seed") / "metrics.json"
    began = time.perf_counter()
    assert main(["--metrics_json", str(out)]) == 0
    return {**read_metrics(out), "took_s": time.perf_counter() - began}


def test_single_rank_recovers_the_seed_model(seed_run):
    assert abs(seed_run["w"][0] - 5.0) < 0.05
    assert abs(seed_run["b"] - 2.0) < 0.05
    assert seed_run["size"] == 1 and seed_run["steps"] == 1000


def _documented_metrics_keys() -> set[str]:
    """The keys docs/output.md's "Metrics JSON" section names, in backquotes."""
    section = (REPO / "docs" / "output.md").read_text().split("## Metrics JSON")[1].split("\n#")[0]
    return set(re.findall(r"`([a-z_]+)`", section))


def test_metrics_json_holds_every_documented_key_and_no_other(seed_run):
    assert set(seed_run) - {"took_s"} == _documented_metrics_keys()


def test_metrics_json_values_describe_the_run(seed_run):
    m = seed_run  # read by read_metrics: NaN or Infinity anywhere would have failed already
    assert (m["size"], m["controller"], m["steps"], m["first_step"]) == (1, "MPI", 1000, 0)
    assert (m["batch_size"], m["global_batch_size"], m["learning_rate"]) == (100, 100, 0.01)
    assert (m["num_samples"], m["num_features"], m["seed"], m["data"]) == (1000, 1, 0, "synthetic")
    assert (m["w_true"], m["b_true"], m["features"]) == ([5.0], 2.0, None)
    for key in ("initial_w", "w"):
        assert isinstance(m[key], list) and len(m[key]) == 1 and isinstance(m[key][0], float)
    for key in ("initial_b", "b", "loss", "exact_loss", "optimality_gap", "wall_s"):
        assert isinstance(m[key], float), key
    # the data's noise has variance 0.01: the optimum's loss is about that, SGD's a bit above
    assert 0.009 < m["exact_loss"] <= m["loss"] < 0.012
    assert m["optimality_gap"] == pytest.approx(m["loss"] - m["exact_loss"])
    # the training loop's own time: within the call's (a clock read from the wrong start was
    # once the machine's uptime)
    assert 0 < m["wall_s"] < m["took_s"]
    assert m["steps_per_s"] == pytest.approx(1000 / m["wall_s"])
    assert m["samples_per_s"] == pytest.approx(100 * m["steps_per_s"])
    assert m["versions"] == {
        "hvd_linreg": hvd_linreg.__version__,
        "horovod": horovod.__version__,
        "tensorflow": tf.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    assert m["config"]["num_steps"] == 1000 and m["config"]["metrics_json"].endswith(".json")
    assert set(m["config"]) == set(field_names())


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
    m = read_metrics(out)
    expected = averaged_sgd(
        X, y, ranks=1, batch_size=32, steps=150, lr=0.05, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(np.append(m["w"], m["b"]), expected, rtol=1e-4)


def test_log_lines_every_log_every_steps(capsys, tmp_path):
    assert main(["--num_steps", "250", "--log_every", "100"]) == 0
    steps = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Step:")]
    assert [s.split()[1] for s in steps] == ["100", "200", "250"]


def test_a_run_does_not_import_pandas_even_where_it_is_installed():
    """Keras imports pandas when it can, for nothing the tool does; the venv has it (the tests'
    statsmodels needs it), and it would add about a second to every rank's start."""
    probe = (
        "import sys; from hvd_linreg.cli import main\n"
        "code = main(['--num_steps', '1', '--quiet'])\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'pandas']\n"
        "import pandas\n"  # and it still imports afterwards
        "print(code, len(loaded))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=launcher_env()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 0"
