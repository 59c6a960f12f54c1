"""Checkpoints survive crashes, resume to the same answer, and never hold NaN; runs repeat."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import launch, launcher_env, params_of
from hvd_linreg.cli import main


def _checkpoints(directory):
    return sorted(directory.glob("ckpt-*.npz"))


def _assert_all_loadable_and_finite(directory):
    for path in _checkpoints(directory):
        with np.load(path, allow_pickle=False) as z:
            assert np.isfinite(z["params"]).all(), path
            json.loads(str(z["header"]))


def test_divergence_stops_at_the_step_with_a_clear_message(tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    code = main(["--learning_rate", "10", "--checkpoint_dir", str(ckpt), "--checkpoint_every", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "training diverged at step" in err and "try 1 or less" in err
    _assert_all_loadable_and_finite(ckpt)


def test_checkpoint_of_another_model_shape_is_refused(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    assert main(["--num_features", "2", "--num_steps", "20", "--checkpoint_dir", ckpt]) == 0
    assert main(["--num_features", "3", "--num_steps", "20", "--checkpoint_dir", ckpt]) == 2
    assert "is for 2 features, this data has 3" in capsys.readouterr().err


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["--num_steps", "70", "--checkpoint_every", "10", "--keep_checkpoints", "2"]
    assert main([*args, "--checkpoint_dir", str(ckpt)]) == 0
    assert [p.name for p in _checkpoints(ckpt)] == ["ckpt-0000000060.npz", "ckpt-0000000070.npz"]


def test_kill_during_saves_leaves_a_loadable_checkpoint(tmp_path):
    """Saves every step of a 100 001-parameter model, killed at random moments, 3 times."""
    ckpt = tmp_path / "ckpt"
    cmd = [
        sys.executable,
        "-m",
        "hvd_linreg",
        "--num_features",
        "100000",
        "--num_samples",
        "20",
        "--batch_size",
        "10",
        "--num_steps",
        "100000",
        "--checkpoint_every",
        "1",
        "--checkpoint_dir",
        str(ckpt),
    ]
    rng = random.Random(0)
    for _ in range(3):
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=launcher_env()
        )
        try:
            before = {p.name for p in _checkpoints(ckpt)} if ckpt.exists() else set()
            deadline = time.monotonic() + 120
            while not (ckpt.exists() and {p.name for p in _checkpoints(ckpt)} - before):
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.5))  # in the middle of some save, or between two
        finally:
            proc.kill()
            proc.wait()
        assert _checkpoints(ckpt)
        _assert_all_loadable_and_finite(ckpt)
    # and the run resumes from what the kills left
    resumed = subprocess.run(
        [*cmd[:-6], "--num_steps", "1", "--checkpoint_dir", str(ckpt)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0 and "Resuming from" in resumed.stdout, resumed.stderr


BATCH, STEPS, EVERY = 50, 4000, 100
COMMON = ["--num_steps", str(STEPS), "--checkpoint_every", str(EVERY), "--learning_rate", "0.002"]


@pytest.mark.multiprocess
def test_resume_after_kill_equals_an_uninterrupted_run(tmp_path, start_job):
    """Killed at a random checkpoint, then resumed on 2 ranks (batch B) and on 1 rank (2B)."""
    straight = launch("mpirun", 2, [*COMMON, "--batch_size", str(BATCH)], tmp_path)
    assert straight.returncode == 0, straight.output

    ckpt = tmp_path / "ckpt"
    job = start_job(
        "mpirun", 2, [*COMMON, "--batch_size", str(BATCH), "--checkpoint_dir", str(ckpt)]
    )
    kill_after = random.Random().randrange(3, STEPS // EVERY - 3) * EVERY
    deadline = time.monotonic() + 180
    while not (ckpt.exists() and any(int(p.stem[5:]) >= kill_after for p in _checkpoints(ckpt))):
        assert time.monotonic() < deadline and job.proc.poll() is None, job.output
        time.sleep(0.01)
    job.kill()
    copy = tmp_path / "ckpt-copy"
    shutil.copytree(ckpt, copy)

    resumed = launch(
        "mpirun", 2, [*COMMON, "--batch_size", str(BATCH), "--checkpoint_dir", str(ckpt)], tmp_path
    )
    assert resumed.returncode == 0, resumed.output
    assert "Resuming from" in resumed.stdout
    assert 0 < resumed.metrics["first_step"] < STEPS
    np.testing.assert_allclose(
        params_of(resumed.metrics), params_of(straight.metrics), rtol=1e-5, atol=1e-6
    )

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
    one = json.loads(out.read_text())
    np.testing.assert_allclose(params_of(one), params_of(straight.metrics), rtol=1e-5, atol=1e-6)


@pytest.mark.multiprocess
def test_same_flags_and_seed_give_bit_identical_results(tmp_path):
    args = ["--num_steps", "300", "--num_features", "4", "--batch_size", "40", "--seed", "5"]
    first, second = (launch("mpirun", 2, args, tmp_path) for _ in range(2))
    assert first.returncode == 0 and second.returncode == 0
    assert params_of(first.metrics).tolist() == params_of(second.metrics).tolist()
