"""Seeing the run: progress bar on a terminal, plain lines otherwise, --quiet, TensorBoard, plot."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from conftest import LAUNCH_TIMEOUT_S, launch, launch_command, launcher_env, read_metrics
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
        timeout=LAUNCH_TIMEOUT_S,
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
    scalars = _scalars(logdir)
    for tag in ("loss", "learning_rate", "steps_per_s", "weights/w_0", "weights/b"):
        assert tag in scalars
    assert [step for step, _ in scalars["loss"]] == [50, 100, 150, 200, 250, 300]
    last_w = scalars["weights/w_0"][-1][1]
    assert last_w == np.float32(json.loads(out.read_text())["w"][0])


def _scalars(logdir: Path) -> dict[str, list[tuple[int, np.ndarray]]]:
    """Each tag's (step, value) in the event files, read as TensorBoard reads them: only values
    marked for its scalar dashboard count."""
    scalars = defaultdict(list)
    for path in sorted(logdir.glob("**/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "scalars":
                    scalars[value.tag].append((event.step, tf.make_ndarray(value.tensor)))
    return scalars


# matplotlib's colours the figure uses: the loss curve (C0), the optimum and the true line
# (black), the fitted line (tab:red).
C0, BLACK, RED = (0.122, 0.467, 0.706), (0.0, 0.0, 0.0), (0.839, 0.153, 0.157)


def _where(image: np.ndarray, colour) -> np.ndarray:
    """Rows and columns of the pixels of this colour (RGB within 0.03)."""
    return np.nonzero(np.all(np.abs(image[..., :3] - colour) < 0.03, axis=-1))


def _robust_slope(rows: np.ndarray, cols: np.ndarray, keep: float = 5) -> float:
    """The slope (rows per column) of a line fitted to pixels, refitted without those farther
    than keep rows from it (the legend's handle, its markers)."""
    slope, offset = np.polyfit(cols, rows, 1)
    for _ in range(5):
        near = np.abs(rows - (slope * cols + offset)) < keep
        slope, offset = np.polyfit(cols[near], rows[near], 1)
    return slope


def _curve_row(rows: np.ndarray, cols: np.ndarray, col: int) -> float:
    """The curve's row at a column: the lowest run of its colour there (the legend, whose
    handle has the same colour, sits above the curve)."""
    here = np.sort(rows[np.abs(cols - col) <= 1])
    run = here[np.searchsorted(np.diff(here) > 3, True, side="left") :] if len(here) else here
    return float(np.mean(here[here >= run[-1] - 12])) if len(here) else np.nan


def test_plot_draws_the_logged_loss_on_a_log_scale_the_optimum_and_the_fit(tmp_path, capsys):
    import matplotlib.image

    path, out = tmp_path / "run.png", tmp_path / "m.json"
    args = ["--num_steps", "300", "--log_every", "20", "--metrics_json", str(out)]
    assert main([*args, "--plot", str(path)]) == 0
    history = [
        (int(line.split()[1]), float(line.split()[3]))
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("Step: ")
    ]
    m = read_metrics(out)
    image = matplotlib.image.imread(path)
    half = image.shape[1] // 2

    # Left panel: the curve passes through every logged (step, loss), y on a log scale.
    rows, cols = _where(image[:, :half], C0)
    assert len(cols), "no loss curve"
    first, last = cols.min(), cols.max()  # the markers of the first and last logged step
    steps = np.array([s for s, _ in history])
    at = first + (last - first) * (steps - steps[0]) / (steps[-1] - steps[0])
    curve = np.array([_curve_row(rows, cols, round(c)) for c in at])
    log_loss = np.log10([loss for _, loss in history])
    slope, offset = np.polyfit(log_loss, curve, 1)
    assert slope < 0 and np.max(np.abs(curve - (slope * log_loss + offset))) < 4, curve
    # ... and the exact optimum is a dashed black line at its loss on that scale.
    optimum = round(slope * np.log10(m["exact_loss"]) + offset)
    black_cols = _where(image[optimum - 2 : optimum + 3, first:last], BLACK)[1]
    assert 0.4 < len(np.unique(black_cols)) / (last - first) < 0.95  # dashes, not a solid line

    # Right panel: the fitted line across the data...
    red_rows, red_cols = _where(image[:, half:], RED)
    assert len(red_cols) and np.ptp(red_cols) > 0.6 * half, "no fitted line"
    # ... with the data's slope: a line through its pixels and one through the scatter's
    # (blue, drawn translucent) agree in the image's own coordinates.
    right = image[:, half:, :3]
    scatter = np.nonzero((right[..., 2] - right[..., 0] > 0.15) & (right[..., 2] > 0.5))
    assert _robust_slope(red_rows, red_cols) == pytest.approx(
        _robust_slope(*scatter, keep=15), rel=0.05
    )


@pytest.fixture(scope="module")
def verbose_two_ranks(tmp_path_factory):
    """2 ranks with --verbose on 1001 samples: one does not split evenly."""
    args = ["--num_steps", "200", "--num_samples", "1001", "--verbose"]
    run = launch("mpirun", 2, args, tmp_path_factory.mktemp("verbose"), metrics=False)
    assert run.returncode == 0, run.output
    return run


@pytest.mark.multiprocess
def test_verbose_lets_every_rank_log_tagged_with_its_rank(verbose_two_ranks):
    lines = verbose_two_ranks.stdout.splitlines()
    rank1 = [line for line in lines if line.startswith("[rank 1] ")]
    assert rank1[0].startswith("[rank 1] hvd-linreg: 2 ranks (MPI), 1001 samples"), lines
    assert [line.split(" Loss: ")[0] for line in rank1[1:]] == [
        "[rank 1] Step: 100",
        "[rank 1] Step: 200",
    ]
    assert sum(line.startswith("Step: ") for line in lines) == 2  # rank 0, untagged
    assert not any(line.startswith("[rank 0]") for line in lines)


@pytest.mark.multiprocess
def test_rows_after_the_last_whole_stride_of_runs_are_left_out_of_sgd_with_a_warning(
    verbose_two_ranks,
):
    warnings = [line for line in verbose_two_ranks.stderr.splitlines() if "warning:" in line]
    assert warnings == [
        "warning: 1001 samples are not a multiple of 2 (2 ranks x runs of 1 row): SGD uses the "
        "first 1000 and leaves out the last 1, which count only in the final loss and the "
        "exact solution"
    ]


def test_unwritable_plot_is_refused_before_training(capsys):
    assert main(["--plot", "/nonexistent/dir/p.png", "--num_steps", "10"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == (
        "hvd-linreg: error: cannot write --plot /nonexistent/dir/p.png: "
        "/nonexistent/dir is not a writable directory"
    )
    assert "Step:" not in out


@pytest.mark.multiprocess
@pytest.mark.parametrize("launcher", ["horovodrun-mpi", "horovodrun-gloo", "mpirun"])
def test_the_first_line_a_launch_prints_is_the_tools_header(launcher, tmp_path):
    """No TensorFlow start-up lines (oneDNN, CPU features) from the launcher or the ranks, with
    nothing set in the user's environment to quiet them."""
    env = {k: v for k, v in launcher_env().items() if not k.startswith("TF_")}
    cmd = [*launch_command(launcher, 2), "--num_steps", "10"]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=LAUNCH_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = re.sub(r"^\S*<stdout>: ?", "", proc.stdout.splitlines()[0])  # a launcher's rank tag
    assert first.startswith("hvd-linreg: 2 ranks"), proc.stdout
    assert "oneDNN" not in proc.stderr and "absl" not in proc.stderr, proc.stderr
