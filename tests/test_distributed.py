"""Real multi-rank launches: every launcher converges, and the result is exactly averaged SGD."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import REPO, launch, params_of, read_metrics
from hvd_linreg.cli import main
from hvd_linreg.config import Config
from hvd_linreg.data import synthetic_rows
from reference import averaged_sgd, lstsq, mse, shards

pytestmark = pytest.mark.multiprocess

LAUNCHERS = ["horovodrun-gloo", "horovodrun-mpi", "mpirun"]


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


@pytest.mark.core
def test_the_seed_job_trains_on_all_its_rows_exactly(tmp_path):
    """`make run`'s job, 4 ranks x batch 100 on 1000 rows: runs of 1 row leave no row out (no
    warning), and w and b are averaged SGD over all 1000 rows, not over the first 800 (what
    runs of 100 rows gave: 1000 is no multiple of 400)."""
    run = launch("horovodrun-mpi", 4, [], tmp_path)
    assert run.returncode == 0, run.output
    assert "warning" not in run.stderr, run.stderr
    m = run.metrics
    X, y = synthetic_rows(Config().seed, np.arange(1000), 1)
    start = {"ranks": 4, "batch_size": 100, "steps": 1000, "lr": 0.01}
    start.update(w0=m["initial_w"], b0=m["initial_b"])
    np.testing.assert_allclose(params_of(m), averaged_sgd(X, y, **start), rtol=1e-4)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(params_of(m), averaged_sgd(X[:800], y[:800], **start), rtol=1e-4)


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


@pytest.mark.parametrize("size", [2, 3])
def test_batches_that_wrap_around_the_shard_end_equal_the_reference(exact_run, size):
    """1000 rows, batch 16: each rank's n rows (500 at 2 ranks, 333 at 3: 999 rows in
    batches) are no multiple of 16, so batches run past the shard's end and on from its start,
    over 6 to 9 epochs of 200 steps."""
    X, y, run = exact_run("mpirun", size)
    m = run.metrics
    n = 1000 // size
    assert n % BATCH and STEPS * BATCH > 6 * n
    expected = averaged_sgd(
        X, y, ranks=size, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-4)


# The core (run again on every other Python) takes the 4-rank case under horovodrun, with MPI
# and with Gloo: what 2 ranks would add on another Python, 4 show as well, and horovodrun's MPI
# launch is mpirun's with horovodrun's own Python code before it.
@pytest.mark.parametrize(
    "launcher, size",
    [
        pytest.param(
            launcher, size, marks=[pytest.mark.core] * (size == 4 and launcher != "mpirun")
        )
        for size in (2, 4)
        for launcher in LAUNCHERS
    ],
)
def test_distributed_run_equals_numpy_averaged_sgd(exact_run, launcher, size):
    X, y, run = exact_run(launcher, size)
    m = run.metrics
    assert m["size"] == size
    expected = averaged_sgd(
        X, y, ranks=size, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-4)


def test_a_csv_file_read_in_byte_ranges_trains_exactly_on_three_ranks(exact_run, tmp_path):
    """Each rank parses 1/3 of the file's bytes and the rows go where the layout puts them:
    float64 (CSV text) SGD equals the reference, and the loss covers all 1000 rows."""
    X, y, _ = exact_run("horovodrun-mpi", 1, 3 * BATCH)  # the data; 3 x 16 does not divide 1000
    path = tmp_path / "train.csv"
    rows = [",".join(repr(float(v)) for v in [*x, t]) for x, t in zip(X, y)]
    path.write_text("\n".join(["a,b,c,target", *rows]) + "\n")
    args = ["--data", str(path), "--num_steps", str(STEPS), "--learning_rate", str(LR)]
    run = launch("mpirun", 3, [*args, "--batch_size", str(BATCH)], tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    expected = averaged_sgd(
        X, y, ranks=3, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9)
    assert m["loss"] == pytest.approx(mse(params_of(m), X, y), rel=1e-9)


def test_a_shard_read_from_the_file_as_used_trains_as_in_memory(exact_run, tmp_path):
    """HVD_LINREG_RANK_MEMORY below the shard: each rank reads windows of its batches as
    training reaches them (several windows of 31 steps at most: no more than its 500 rows),
    windows that run past the shard's end and on from its start as batches do."""
    X, y, in_memory = exact_run("mpirun", 2)
    path = tmp_path / "train.npz"
    np.savez(path, X=X, y=y)
    args = ["--data", str(path), "--num_steps", str(STEPS), "--learning_rate", str(LR)]
    cap = ("-x", "HVD_LINREG_RANK_MEMORY=1000")
    run = launch("mpirun", 2, [*args, "--batch_size", str(BATCH)], tmp_path, launcher_args=cap)
    assert run.returncode == 0, run.output
    m = run.metrics
    assert m["initial_w"] == in_memory.metrics["initial_w"]
    np.testing.assert_array_equal(params_of(m), params_of(in_memory.metrics))
    assert m["loss"] == in_memory.metrics["loss"]


@pytest.fixture(scope="module")
def wide_rows(tmp_path_factory):
    """3372 rows of 64 float64 features and the target: 520 bytes a row, so at batch 1024 on 2
    ranks the runs are 512 rows (the smallest divisor of 1024 whose rows reach 256 KB)."""
    rng = np.random.default_rng(12)
    X = rng.standard_normal((3372, 64))
    y = X @ rng.standard_normal(64) + 0.5 + 0.1 * rng.standard_normal(3372)
    path = tmp_path_factory.mktemp("wide") / "wide.npy"
    np.save(path, np.c_[X, y])
    return path, X, y


@pytest.mark.parametrize("memory", ["in memory", "read as used"])
def test_runs_shorter_than_the_batch_train_exactly(wide_rows, tmp_path, memory):
    """Runs of 512 rows: 3072 rows in batches (300 left out, said once), 1536 a rank, so
    batches of 1024 wrap around each shard's end; float64 SGD equals the reference."""
    path, X, y = wide_rows
    flags = ["--data", str(path), "--batch_size", "1024", "--num_steps", "30"]
    cap = ("-x", "HVD_LINREG_RANK_MEMORY=1000") if memory == "read as used" else ()
    run = launch("mpirun", 2, [*flags, "--learning_rate", "0.1"], tmp_path, launcher_args=cap)
    assert run.returncode == 0, run.output
    assert [line for line in run.stderr.splitlines() if "warning:" in line] == [
        "warning: 3372 samples are not a multiple of 1024 (2 ranks x runs of 512 rows): SGD "
        "uses the first 3072 and leaves out the last 300, which count only in the final loss "
        "and the exact solution"
    ]
    m = run.metrics
    expected = averaged_sgd(
        X, y, ranks=2, batch_size=1024, steps=30, lr=0.1, w0=m["initial_w"], b0=m["initial_b"],
        row_bytes=65 * 8,
    )  # fmt: skip
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("size", [2, 4])
def test_final_and_exact_loss_are_over_every_rank_s_rows(exact_run, size):
    """Not rank 0's shard alone: the sums of all ranks, allreduced."""
    X, y, run = exact_run("horovodrun-mpi", size)
    m = run.metrics
    loss, exact_loss = mse(params_of(m), X, y), mse(lstsq(X, y), X, y)
    assert m["loss"] == pytest.approx(loss, rel=1e-9)
    assert m["exact_loss"] == pytest.approx(exact_loss, rel=1e-9)
    assert m["optimality_gap"] == pytest.approx(loss - exact_loss, rel=1e-6)
    rank0_only = mse(params_of(m), *shards(X, y, size, BATCH)[0])
    assert abs(rank0_only - loss) > 1000 * 1e-9 * loss  # far outside the tolerance above


def test_a_run_without_the_allreduce_fails_the_exactness_check(exact_run, tmp_path):
    """The check has teeth: what rank 0 computes when gradients are never averaged (the
    tool on rank 0's shard alone, 1 rank, same start) is rejected by the comparison above."""
    X, y, run = exact_run("horovodrun-mpi", 2)
    m = run.metrics
    X0, y0 = shards(X, y, 2, BATCH)[0]
    np.savez(tmp_path / "rank0.npz", X=X0, y=y0)
    out = tmp_path / "alone.json"
    args = ["--data", str(tmp_path / "rank0.npz"), "--num_steps", str(STEPS)]
    args += ["--learning_rate", str(LR), "--batch_size", str(BATCH), "--metrics_json", str(out)]
    assert main(args) == 0
    alone = read_metrics(out)
    assert alone["initial_w"] == m["initial_w"]  # rank 0 draws the same start either way
    expected = averaged_sgd(
        X, y, ranks=2, batch_size=BATCH, steps=STEPS, lr=LR, w0=m["initial_w"], b0=m["initial_b"]
    )
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(params_of(alone), expected, rtol=1e-4)


def test_four_ranks_batch_b_equal_one_rank_batch_4b(exact_run):
    four = exact_run("horovodrun-mpi", 4)[2].metrics
    one = exact_run("horovodrun-mpi", 1, 4 * BATCH)[2].metrics
    np.testing.assert_array_equal(four["initial_w"], one["initial_w"])
    np.testing.assert_allclose(params_of(four), params_of(one), rtol=1e-4)


@pytest.mark.parametrize("launcher", ["horovodrun-mpi", "mpirun"])
def test_localhost_hostfile(launcher, tmp_path):
    hostfile = str(REPO / "hostfiles" / "localhost")
    flag = "-hostfile" if launcher.startswith("horovodrun") else "--hostfile"
    run = launch(launcher, 4, ["--num_steps", "200"], tmp_path, launcher_args=(flag, hostfile))
    assert run.returncode == 0, run.output
    assert run.metrics["size"] == 4
