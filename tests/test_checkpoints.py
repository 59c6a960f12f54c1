"""Checkpoints survive crashes, resume to the same answer, and never hold NaN; runs repeat."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import (
    LAUNCH_TIMEOUT_S,
    launch,
    launch_each_rank_reporting,
    launcher_env,
    params_of,
    read_metrics,
)
from hvd_linreg.cli import main
from reference import batch, gradient, shards


def _checkpoints(directory):
    return sorted(directory.glob("ckpt-*.npz"))


def _assert_all_loadable_and_finite(directory):
    for path in _checkpoints(directory):
        with np.load(path, allow_pickle=False) as z:
            assert np.isfinite(z["params"]).all(), path
            json.loads(str(z["header"]))


@pytest.mark.multiprocess
def test_divergence_stops_every_rank_at_the_step_with_a_clear_message(tmp_path, regression_file):
    """Checkpoints every step: the newest one is the step before, finite, and one more step
    of plain SGD from it (float32, as the tool trains) overflows."""
    path, X, y = regression_file(num_rows=1000, num_features=3)
    ckpt = tmp_path / "ckpt"
    args = ["--data", str(path), "--batch_size", "10", "--learning_rate", "10"]
    args += ["--checkpoint_dir", str(ckpt), "--checkpoint_every", "1"]
    run = launch_each_rank_reporting("mpirun", 2, args, tmp_path)
    assert sorted(run.codes.values()) == [2, 2], run.output
    errors = [line for line in run.stderr.splitlines() if "hvd-linreg: error:" in line]
    assert len(errors) == 1, run.output
    step = int(
        re.fullmatch(r".*hvd-linreg: error: training diverged at step (\d+): .*", errors[0])[1]
    )
    assert errors[0].endswith(
        f"training diverged at step {step}: w and b became NaN or inf. "
        "--learning_rate 10.0 is too large for this data; try 1 or less"
    )
    _assert_all_loadable_and_finite(ckpt)
    newest = _checkpoints(ckpt)[-1]
    assert newest.name == f"ckpt-{step - 1:010d}.npz"
    with np.load(newest) as z:
        assert z["params"].shape == (4, 1)  # the coefficients' matrix: one column
        theta = z["params"][:, 0].astype(np.float32)
    shard0, shard1 = shards(X, y, 2, 10)
    with np.errstate(all="ignore"):
        grads = [gradient(theta, *batch(*s, step - 1, 10)) for s in (shard0, shard1)]
        after = theta - np.float32(10) * np.mean(grads, axis=0, dtype=np.float32)
    assert not np.isfinite(after).all()


def test_checkpoint_of_another_model_shape_is_refused(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_features", "2", "--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    assert main(["--num_features", "3", "--num_steps", "20", "--checkpoint_dir", ckpt]) == 2
    assert "is for 2 features, this data has 3" in capsys.readouterr().err


def test_checkpoint_of_another_optimizer_is_refused(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    assert main(["--num_steps", "30", "--checkpoint_dir", ckpt, "--optimizer", "adam"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"hvd-linreg: error: the checkpoint in {ckpt} holds another optimizer's state (sgd, "
        "this run uses adam); use another --checkpoint_dir"
    )


def test_plain_sgd_checkpoint_is_refused_by_momentum(tmp_path, capsys):
    """Plain SGD and momentum are one Keras class with the same slots: only the name tells."""
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    assert main(["--num_steps", "30", "--checkpoint_dir", ckpt, "--optimizer", "momentum"]) == 2
    assert "holds another optimizer's state" in capsys.readouterr().err


def test_corrupt_newest_checkpoint_is_skipped_with_a_warning(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    args = ["--checkpoint_dir", str(ckpt), "--checkpoint_every", "10"]
    assert main([*args, "--num_steps", "20"]) == 0
    (ckpt / "ckpt-0000000020.npz").write_bytes(b"half a zip file")
    capsys.readouterr()
    assert main([*args, "--num_steps", "30"]) == 0
    out, err = capsys.readouterr()
    assert "warning: skipping unreadable checkpoint ckpt-0000000020.npz: " in err
    assert f"Resuming from {ckpt / 'ckpt-0000000010.npz'} at step 10" in out


def test_resuming_with_another_global_batch_warns(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    capsys.readouterr()
    assert main(["--num_steps", "30", "--checkpoint_dir", ckpt, "--batch_size", "50"]) == 0
    assert (
        "warning: the checkpoint was trained with a global batch of 100, this run uses 50: "
        "the result will differ from an uninterrupted run"
    ) in capsys.readouterr().err


def test_resuming_with_other_rows_in_batches_warns(tmp_path, capsys):
    """The same global batch over other rows (here 999 samples, not 1000: N_sgd differs) is
    another trajectory; the checkpoint records its N_sgd, so the resume says so."""
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    capsys.readouterr()
    assert main(["--num_steps", "30", "--checkpoint_dir", ckpt, "--num_samples", "999"]) == 0
    assert (
        "warning: the checkpoint was trained on batches of the first 1000 rows, this run's use "
        "the first 999: the result will differ from an uninterrupted run"
    ) in capsys.readouterr().err


@pytest.mark.parametrize(
    "first, then, warning",
    [
        (
            ["--validation_fraction", "0.2"],
            ["--validation_fraction", "0.3"],
            "warning: the checkpoint was trained with --validation_fraction 0.2, this run uses "
            "0.3: other rows train, and the result will differ from an uninterrupted run",
        ),
        (
            ["--seed", "1"],
            ["--seed", "2"],
            "warning: the checkpoint was trained with --seed 1, this run uses 2: the seed draws "
            "the synthetic rows, so other rows train, and the result will differ",
        ),
    ],
)
def test_resuming_on_other_rows_of_as_many_warns(tmp_path, capsys, first, then, warning):
    """Another split, or another seed's synthetic rows: as many rows in batches, other rows."""
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_steps", "20", "--checkpoint_dir", ckpt, *first]) == 0
    capsys.readouterr()
    assert main(["--num_steps", "30", "--checkpoint_dir", ckpt, *then]) == 0
    assert warning in capsys.readouterr().err


def test_resuming_with_the_same_rows_does_not_warn(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    flags = ["--checkpoint_dir", ckpt, "--validation_fraction", "0.2", "--seed", "3"]
    assert main(["--num_steps", "20", *flags]) == 0
    capsys.readouterr()
    assert main(["--num_steps", "30", *flags]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_checkpoint_that_does_not_record_its_rows_in_batches_loads_with_a_warning(
    tmp_path, capsys
):
    """Checkpoints written before the rows in batches were recorded still load."""
    ckpt = tmp_path / "ckpt"
    assert main(["--num_steps", "20", "--checkpoint_dir", str(ckpt)]) == 0
    path = _checkpoints(ckpt)[-1]
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(str(arrays["header"]))
    del header["batched_rows"]
    np.savez(path, **{**arrays, "header": json.dumps(header)})
    capsys.readouterr()
    assert main(["--num_steps", "30", "--checkpoint_dir", str(ckpt)]) == 0
    out, err = capsys.readouterr()
    assert f"Resuming from {path} at step 20" in out
    assert (
        "warning: the checkpoint does not record which rows its batches used (an older version "
        "wrote it); this run's use the first 1000: the result may differ from an uninterrupted "
        "run"
    ) in err


def test_a_checkpoint_of_w_and_b_as_a_vector_resumes_as_an_uninterrupted_run(tmp_path):
    """Checkpoints hold the coefficients' (F + 1) x 1 matrix; one an earlier version wrote holds
    [w..., b] as a vector, and resumes to the same bytes."""
    ckpt, out = tmp_path / "ckpt", [tmp_path / f"{name}.json" for name in ("straight", "resumed")]
    assert main(["--num_steps", "30", "--metrics_json", str(out[0])]) == 0
    assert main(["--num_steps", "20", "--checkpoint_dir", str(ckpt)]) == 0
    path = _checkpoints(ckpt)[-1]
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    assert arrays["params"].shape == (2, 1)  # the seed's one feature: [w, b] as a column
    header = json.loads(str(arrays["header"]))
    header["initial_params"] = np.ravel(header["initial_params"]).tolist()
    vector = arrays["params"][:, 0]
    np.savez(path, **{**arrays, "params": vector, "header": json.dumps(header)})
    resume = ["--num_steps", "30", "--checkpoint_dir", str(ckpt), "--metrics_json", str(out[1])]
    assert main(resume) == 0
    straight, resumed = (read_metrics(p) for p in out)
    assert resumed["first_step"] == 20
    np.testing.assert_array_equal(params_of(resumed), params_of(straight))
    assert resumed["initial_w"] == straight["initial_w"]


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_optimizer_state_is_saved_and_restored(tmp_path, optimizer):
    """Stopped at step 50 and resumed, momentum's velocity and Adam's moments and step count
    carry on: the result equals 100 steps in one go (a fresh state would not)."""
    common = ["--optimizer", optimizer, "--learning_rate", "0.05", "--log_every", "50"]
    out = [tmp_path / f"{name}.json" for name in ("straight", "first", "resumed")]
    ckpt = ["--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "50"]
    assert main([*common, "--num_steps", "100", "--metrics_json", str(out[0])]) == 0
    assert main([*common, *ckpt, "--num_steps", "50", "--metrics_json", str(out[1])]) == 0
    assert main([*common, *ckpt, "--num_steps", "100", "--metrics_json", str(out[2])]) == 0
    straight, _, resumed = (read_metrics(p) for p in out)
    assert resumed["first_step"] == 50
    np.testing.assert_array_equal(params_of(resumed), params_of(straight))


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["--num_steps", "70", "--checkpoint_every", "10", "--keep_checkpoints", "2"]
    assert main([*args, "--checkpoint_dir", str(ckpt)]) == 0
    assert [p.name for p in _checkpoints(ckpt)] == ["ckpt-0000000060.npz", "ckpt-0000000070.npz"]


def _stop_inside_a_save(proc: subprocess.Popen, ckpt) -> str:
    """SIGSTOP the writer while a save's temporary file exists (it is between creating and
    renaming it); return that file's name. A stop that lands just after the rename is undone
    with SIGCONT and tried again."""
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        names = os.listdir(ckpt) if ckpt.exists() else []
        # a save after the first: one complete checkpoint exists, the next one is on its way
        if _checkpoints(ckpt) and any(n.startswith(".tmp-ckpt-") for n in names):
            proc.send_signal(signal.SIGSTOP)
            inside = [n for n in os.listdir(ckpt) if n.startswith(".tmp-ckpt-")]
            if inside:
                return inside[0]
            proc.send_signal(signal.SIGCONT)
    raise AssertionError(f"no save caught in the act (exit code {proc.poll()})")


def test_kill_inside_a_save_leaves_every_checkpoint_loadable(tmp_path):
    """Saves every step of a 100 001-parameter model; killed twice while inside a save."""
    ckpt = tmp_path / "ckpt"
    cmd = [sys.executable, "-m", "hvd_linreg", "--num_features", "100000", "--num_samples", "20"]
    cmd += ["--batch_size", "10", "--checkpoint_every", "1", "--checkpoint_dir", str(ckpt)]
    for _ in range(2):
        proc = subprocess.Popen(
            [*cmd, "--num_steps", "100000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=launcher_env(),
        )
        try:
            tmp = _stop_inside_a_save(proc, ckpt)
        finally:
            proc.kill()
            proc.wait()
        saving = int(tmp.split("ckpt-")[1][:10])
        assert _checkpoints(ckpt)[-1].name == f"ckpt-{saving - 1:010d}.npz"
        _assert_all_loadable_and_finite(ckpt)
    # The run resumes from the newest checkpoint: none was skipped as unreadable.
    resumed = subprocess.run(
        [*cmd, "--num_steps", "1"],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
        env=launcher_env(),
    )
    assert resumed.returncode == 0, resumed.stderr
    newest = _checkpoints(ckpt)[-1]
    assert f"Resuming from {newest} at step {int(newest.stem[5:])}" in resumed.stdout
    assert "skipping" not in resumed.stderr, resumed.stderr


# The killed run stops by itself one checkpoint short of STEPS: however late the kill lands
# (the job runs about 6000 steps a second), the resumed run has steps left to train.
BATCH, STEPS, EVERY = 50, 8000, 100
COMMON = ["--num_steps", str(STEPS), "--checkpoint_every", str(EVERY), "--learning_rate", "0.002"]


@pytest.mark.multiprocess
def test_resume_after_kill_equals_an_uninterrupted_run(tmp_path, start_job, fault_seed):
    """Killed at a random checkpoint, then resumed on 2 ranks (batch B) and on 1 rank (2B)."""
    straight = launch("mpirun", 2, [*COMMON, "--batch_size", str(BATCH)], tmp_path)
    assert straight.returncode == 0, straight.output

    kill_after = random.Random(fault_seed).randrange(3, 31) * EVERY
    ckpt = tmp_path / "ckpt"
    short = [*COMMON, "--num_steps", str(STEPS - EVERY), "--batch_size", str(BATCH)]
    job = start_job("mpirun", 2, [*short, "--checkpoint_dir", str(ckpt)])
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S

    def reached() -> bool:
        return ckpt.exists() and any(int(p.stem[5:]) >= kill_after for p in _checkpoints(ckpt))

    while not reached():
        ended = job.proc.poll() is not None
        assert not ended or reached(), f"ended before step {kill_after}:\n{job.output}"
        assert time.monotonic() < deadline, f"no checkpoint {kill_after} in time:\n{job.output}"
        if len(job.seen) < 2:
            job.ranks()  # found while the job starts, so that the kill takes milliseconds
        time.sleep(0.01)
    finished = job.proc.poll() is not None
    job.kill()
    killed_at = int(_checkpoints(ckpt)[-1].stem[5:])
    # The kill lands within milliseconds, thousands of steps before the end; should the machine
    # stall the test that long, the resume is still tested, from the run's last checkpoint.
    print(f"killed at step {killed_at}" if not finished else "the job ended before the kill")
    copy = tmp_path / "ckpt-copy"
    shutil.copytree(ckpt, copy)

    resumed = launch(
        "mpirun", 2, [*COMMON, "--batch_size", str(BATCH), "--checkpoint_dir", str(ckpt)], tmp_path
    )
    assert resumed.returncode == 0, resumed.output
    assert "Resuming from" in resumed.stdout
    assert kill_after <= resumed.metrics["first_step"] < STEPS
    np.testing.assert_array_equal(params_of(resumed.metrics), params_of(straight.metrics))

    out = tmp_path / "one-rank.json"
    assert (
        main(
            [
                *COMMON,
                "--batch_size",
                str(2 * BATCH),
                "--checkpoint_dir",
                str(copy),
                "--metrics_json",
                str(out),
            ]
        )
        == 0
    )
    one = read_metrics(out)
    np.testing.assert_allclose(params_of(one), params_of(straight.metrics), rtol=1e-5, atol=1e-6)


@pytest.mark.multiprocess
def test_same_flags_and_seed_give_bit_identical_results(tmp_path):
    args = ["--num_steps", "300", "--num_features", "4", "--batch_size", "40", "--seed", "5"]
    first, second = (launch("mpirun", 2, args, tmp_path) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0
    assert params_of(first.metrics).tolist() == params_of(second.metrics).tolist()
