"""Seeing the run: progress bar on a terminal, plain lines otherwise, --quiet, TensorBoard, plot."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import launcher_env
from hvd_linreg.cli import main


def test_quiet_prints_only_the_summary(capsys):
    assert main(["--num_steps", "200", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Summary:") and "Step:" not in out


def test_progress_bar_when_stderr_is_a_terminal():
    leader, follower = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "hvd_linreg", "--num_steps", "300"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=launcher_env(),
        timeout=120,
    )
    os.close(follower)
    bar = os.read(leader, 1 << 16).decode(errors="replace")
    os.close(leader)
    assert proc.returncode == 0
    assert "300/300" in bar and "loss=" in bar and "step/s" in bar
    assert b"Step:" not in proc.stdout and b"Summary:" in proc.stdout


def test_tensorboard_scalars(tmp_path):
    out = tmp_path / "m.json"
    logdir = tmp_path / "tb"
    assert (
        main(
            [
                "--num_steps",
                "300",
                "--log_every",
                "50",
                "--logdir",
                str(logdir),
                "--metrics_json",
                str(out),
            ]
        )
        == 0
    )
    events = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    events.Reload()
    tags = events.Tags()["tensors"]
    for tag in ("loss", "learning_rate", "steps_per_s", "weights/w_0", "weights/b"):
        assert tag in tags
    losses = events.Tensors("loss")
    assert [e.step for e in losses] == [50, 100, 150, 200, 250, 300]
    last_w = tf.make_ndarray(events.Tensors("weights/w_0")[-1].tensor_proto)
    assert last_w == np.float32(json.loads(out.read_text())["w"][0])


def test_plot_is_a_png_figure(tmp_path):
    import matplotlib.image

    path = tmp_path / "run.png"
    assert main(["--num_steps", "300", "--plot", str(path)]) == 0
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 800  # two panels side by side
    assert image.std() > 0.05  # something is drawn
