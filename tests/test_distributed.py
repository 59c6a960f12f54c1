"""Real multi-rank launches: every launcher converges, and the result is exactly averaged SGD."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO, launch, params_of
from reference import averaged_sgd, rank0_local_sgd

pytestmark = pytest.mark.multiprocess

LAUNCHERS = ["horovodrun-gloo", "horovodrun-mpi", "mpirun"]


@pytest.mark.core
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_four_ranks_recover_the_seed_model(launcher, tmp_path):
    run = launch(launcher, 4, [], tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    assert m["size"] == 4
    assert m["controller"] == ("Gloo" if launcher == "horovodrun-gloo" else "MPI")
    assert abs(m["w"][0] - 5.0) < 0.05 and abs(m["b"] - 2.0) < 0.05
    # Only rank 0 speaks: one log line per 100 steps, one summary.
    step_lines = [line for line in run.stdout.splitlines() if "Step: " in line]
    assert len(step_lines) == 10, run.stdout
    assert run.stdout.count("Summary:") == 1


STEPS, LR, BATCH = 200, 0.05, 16


@pytest.fixture(scope="module")
def exact_run(tmp_path_factory):
    """One data file; run(launcher, size, batch) launches on it once and returns (X, y, run)."""
    tmp = tmp_path_factory.mktemp("exact")
    rng = np.random.default_rng(11)
    X = rng.standard_normal((1000, 3)).astype(np.float32)
    y = X @ np.float32([1.0, -2.0, 0.5]) + 0.3 + 0.1 * rng.standard_normal(1000)
    y = y.astype(np.float32)
    path = tmp / "train.npz"
    np.savez(path, X=X, y=y)
    common = ["--data", str(path), "--num_steps", str(STEPS), "--learning_rate", str(LR)]
    runs = {}

    def run(launcher: str, size: int, batch: int = BATCH):
        if (launcher, size, batch) not in runs:
            done = launch(launcher, size, [*common, "--batch_size", str(batch)], tmp)
            assert done.returncode == 0, done.output
            runs[(launcher, size, batch)] = done
        return X, y, runs[(launcher, size, batch)]

    return run


@pytest.mark.core
@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_distributed_run_equals_numpy_averaged_sgd(exact_run, launcher, size):
    X, y, run = exact_run(launcher, size)
    m = run.metrics
    assert m["size"] == size
    expected = averaged_sgd(
        X, y, ranks=size, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-4)


@pytest.mark.parametrize("size", [2, 4])
def test_rank_local_sgd_would_not_match(exact_run, size):
    """The exactness check has teeth: without the allreduce, rank 0 would follow this."""
    X, y, run = exact_run("horovodrun-mpi", size)
    m = run.metrics
    local = rank0_local_sgd(
        X, y, ranks=size, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    assert not np.allclose(params_of(m), local, rtol=1e-4)


@pytest.mark.core
def test_four_ranks_batch_b_equal_one_rank_batch_4b(exact_run):
    four, one = (
        exact_run("horovodrun-mpi", 4)[2].metrics,
        exact_run("horovodrun-mpi", 1, 4 * BATCH)[2].metrics,
    )
    np.testing.assert_allclose(four["initial_w"], one["initial_w"])
    np.testing.assert_allclose(params_of(four), params_of(one), rtol=1e-4)


@pytest.mark.parametrize("launcher", ["horovodrun-mpi", "mpirun"])
def test_localhost_hostfile(launcher, tmp_path):
    hostfile = str(REPO / "hostfiles" / "localhost")
    flag = "-hostfile" if launcher.startswith("horovodrun") else "--hostfile"
    run = launch(launcher, 4, ["--num_steps", "200"], tmp_path, launcher_args=(flag, hostfile))
    assert run.returncode == 0, run.output
    assert run.metrics["size"] == 4
