"""--plot: the loss curve against the exact optimum and, for one feature, the fitted curve; for
an elastic-net path, the coefficients against log α and the cross-validation curve, as
glmnet's plot() draws them; for a multinomial model of one feature, each class's fitted
probability over it and the rows' share of each class in bins of it."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from hvd_linreg.families.coefficients import matrix
from hvd_linreg.report import Report, loss_name
from hvd_linreg.runtime.atomic import atomic_write

# What the fitted curve's label calls the mean: P(y=1) for a binary family, E[y] unless named here
MEAN_LABELS = {"linear": "y"}

_POINTS = 400  # data points drawn from rank 0's shard


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on cluster nodes
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: str) -> None:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(Path(path), lambda f: f.write(buffer.getvalue()))


def save_plot(path: str, report: Report) -> None:
    plt = _pyplot()
    if report.penalized:
        fig = _path_figure(plt, report)
    else:
        one_feature = report.shard.num_features == 1
        width = 11 if one_feature else 6
        fig, axes = plt.subplots(1, 2 if one_feature else 1, figsize=(width, 4.2))
        _loss_panel(axes[0] if one_feature else axes, report)
        if one_feature:
            _fit_panel(axes[1], report)
    _save(plt, fig, path)


def save_class_plot(path: str, result, edges: np.ndarray, counts: np.ndarray) -> None:
    """A multinomial model of one feature (result: multinomial.py's MultinomialResult): each
    class's fitted probability over the feature's range (at offset 0), and each class's share
    of every rank's training rows in the bins of edges (counts: bins x K, sums of weights), a
    dot each, its size the bin's rows."""
    from hvd_linreg.solvers.multinomial import log_probabilities

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    xs = np.linspace(edges[0], edges[-1], 200)
    fitted = np.exp(log_probabilities(xs[:, None], result.params))
    weight = counts.sum(axis=1)
    held = weight > 0
    centres = ((edges[:-1] + edges[1:]) / 2)[held]
    shares, sizes = counts[held] / weight[held, None], 8 + 60 * weight[held] / weight.max()
    for k, name in enumerate(result.classes):
        colour = f"C{k % 10}"
        ax.scatter(centres, shares[:, k], s=sizes, color=colour, alpha=0.4)
        ax.plot(xs, fitted[:, k], color=colour, label=f"fitted P(y = {name})")
    ax.scatter([], [], s=30, color="0.5", alpha=0.4, label="share of the rows, in bins of x")
    ax.set_xlabel(result.names[0])
    ax.set_ylabel("probability")
    ax.set_ylim(-0.02, 1.02)
    offset = result.shard.carried_columns.offset_given
    ax.set_title("Data and fit" + (" (the curves at offset 0)" if offset else ""))
    ax.legend(fontsize="small")
    _save(plt, fig, path)


def _loss_panel(ax, report: Report) -> None:
    """The logged loss by step, and the exact optimum's as a line."""
    result = report.result
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
    ax.set_ylabel(loss_name(report.family))
    size = report.job.size
    ax.set_title(f"Loss, {size} rank{'s' * (size > 1)}, global batch {report.global_batch_size}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def curve(family, theta: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, str]:
    """The family's fitted mean over one feature's values, and its label: "fitted: E[y] =
    log⁻¹(wx + b)" (σ for the logit link; the line alone for the identity link). theta: the
    coefficients (coefficients.py), or [w, b]."""
    B = matrix(theta)
    w, b = B[0, 0], B[-1, 0]
    eta, link = f"{w:.4g}x + {b:.4g}", family.link.name
    if link != "identity":
        eta = f"{'σ' if link == 'logit' else f'{link}⁻¹'}({eta})"
    mean = "P(y=1)" if family.BINARY else MEAN_LABELS.get(family.NAME, "E[y]")
    return family.predict(B[[0, -1]], xs[:, None]), f"fitted: {mean} = {eta}"


def _fit_panel(ax, report: Report) -> None:
    """One feature: a sample of rank 0's rows, the true curve where known, the fitted one."""
    shard = report.shard
    X, y = shard.X[:_POINTS, 0], shard.y[:_POINTS]
    ax.scatter(X, y, s=6, alpha=0.4, label="data (sample of rank 0's shard)")
    xs = np.linspace(float(np.min(X)), float(np.max(X)), 100)
    if shard.w_true is not None:
        true, label = curve(report.family, np.array([shard.w_true[0], shard.b_true]), xs)
        ax.plot(xs, true, color="black", linestyle="--", label=label.replace("fitted", "true", 1))
    fitted, label = curve(report.family, report.result.params, xs)
    ax.plot(xs, fitted, color="tab:red", label=label)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title("Data and fit")
    ax.legend()


def _path_figure(plt, report: Report):
    """The path's coefficients by log α, and (with cross-validation) the mean held-out
    deviance with its standard error and the two chosen strengths."""
    fit = report.optimum
    cv = fit.cv
    fig, axes = plt.subplots(1, 2 if cv is not None else 1, figsize=(11 if cv else 6, 4.2))
    ax = axes[0] if cv is not None else axes
    log_alpha = np.log(fit.alphas)
    names = report.statistics.names[:-1]
    for j in range(fit.coefficients.shape[1] - 1):
        ax.plot(log_alpha, fit.coefficients[:, j], label=names[j] if j < 10 else None)
    ax.axvline(np.log(fit.alpha), color="black", linestyle="--", linewidth=0.8)
    ax.set_xlabel("log(alpha)")
    ax.set_ylabel("coefficient")
    ax.set_title(f"Path, l1_ratio {fit.settings.l1_ratio:g} ({len(fit.alphas)} strengths)")
    ax.grid(True, alpha=0.3)
    if len(names) <= 10:
        ax.legend(fontsize="small")
    if cv is not None:
        ax = axes[1]
        ax.errorbar(log_alpha, cv.mean, yerr=cv.se, fmt=".", color="tab:red", ecolor="0.6")
        for index, label in ((cv.index_min, "min"), (cv.index_1se, "1se")):
            ax.axvline(log_alpha[index], color="black", linestyle=":", label=f"alpha {label}")
        ax.set_xlabel("log(alpha)")
        ax.set_ylabel("mean held-out deviance")
        ax.set_title(f"{len(cv.weights)}-fold cross-validation")
        ax.grid(True, alpha=0.3)
        ax.legend()
    return fig
