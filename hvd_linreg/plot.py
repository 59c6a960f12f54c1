"""--plot: the loss curve against the exact optimum and, for one feature, the fitted line."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from hvd_linreg.atomic import atomic_write
from hvd_linreg.report import Report

_POINTS = 400  # data points drawn from rank 0's shard


def save_plot(path: str, report: Report) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on cluster nodes
    import matplotlib.pyplot as plt

    shard, result = report.shard, report.result
    X, y = shard.X, shard.y
    one_feature = shard.num_features == 1
    fig, axes = plt.subplots(1, 2 if one_feature else 1, figsize=(11 if one_feature else 6, 4.2))
    ax = axes[0] if one_feature else axes
    if result.history:
        steps, losses = zip(*result.history)
        ax.plot(
            steps,
            losses,
            marker=".",
            label=f"mini-batch loss, {report.cfg.optimizer} (mean over ranks)",
        )
    if report.exact_loss is not None:
        ax.axhline(report.exact_loss, color="black", linestyle="--", label="exact optimum")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("mean squared error")
    size = report.job.size
    ax.set_title(f"Loss, {size} rank{'s' * (size > 1)}, global batch {report.global_batch_size}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()

    if one_feature:
        ax = axes[1]
        ax.scatter(
            X[:_POINTS, 0], y[:_POINTS], s=6, alpha=0.4, label="data (sample of rank 0's shard)"
        )
        xs = np.linspace(float(np.min(X[:_POINTS, 0])), float(np.max(X[:_POINTS, 0])), 2)
        if shard.w_true is not None:
            w, b = shard.w_true[0], shard.b_true
            ax.plot(
                xs, w * xs + b, color="black", linestyle="--", label=f"true: y = {w:.3g}x + {b:.3g}"
            )
        w, b = result.params[0], result.params[-1]
        ax.plot(xs, w * xs + b, color="tab:red", label=f"fitted: y = {w:.4g}x + {b:.4g}")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title("Data and fit")
        ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(Path(path), lambda f: f.write(buffer.getvalue()))
