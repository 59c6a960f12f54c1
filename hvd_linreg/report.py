"""What rank 0 tells the user at the end: the summary lines and the metrics JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hvd_linreg import __version__
from hvd_linreg.atomic import atomic_write
from hvd_linreg.config import Config, UsageError
from hvd_linreg.data import Shard
from hvd_linreg.exact import MAX_FEATURES
from hvd_linreg.ranks import Ranks

_SHOWN_WEIGHTS = 8  # the summary lists at most this many w's; the JSON has all of them


@dataclass
class Result:
    initial_params: np.ndarray | None  # [w..., b] as broadcast from rank 0; None: exact solver
    params: np.ndarray  # [w..., b] after training
    loss: float  # mean squared error over the whole dataset (all ranks) at the final params
    steps: int  # the step training ended at
    first_step: int  # the step it started from: 0, or the checkpoint's when resuming
    wall_s: float  # this run's training loop only, from after the broadcast to the last step
    history: list = field(default_factory=list)  # (step, loss averaged over ranks) as logged

    @property
    def steps_per_s(self) -> float:
        trained = self.steps - self.first_step
        return trained / self.wall_s if self.wall_s > 0 else 0.0


def versions() -> dict[str, str]:
    import horovod
    import tensorflow as tf

    return {
        "hvd_linreg": __version__,
        "horovod": horovod.__version__,
        "tensorflow": tf.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def metrics(
    cfg: Config, ranks: Ranks, shard: Shard, result: Result, exact_loss: float | None
) -> dict[str, Any]:
    """Every value a plain number, string, list or null, so any JSON reader can use it."""
    initial = result.initial_params
    return {
        "size": ranks.size,
        "controller": ranks.controller,
        "hosts": list(ranks.hosts),
        "steps": result.steps,
        "first_step": result.first_step,
        "batch_size": cfg.batch_size,
        "global_batch_size": cfg.batch_size * ranks.size,
        "learning_rate": cfg.learning_rate,
        "num_samples": shard.num_samples,
        "num_features": shard.num_features,
        "seed": cfg.seed,
        "data": shard.source,
        "initial_w": None if initial is None else [float(v) for v in initial[:-1]],
        "initial_b": None if initial is None else float(initial[-1]),
        "w": [float(v) for v in result.params[:-1]],
        "b": float(result.params[-1]),
        "w_true": shard.w_true,
        "b_true": shard.b_true,
        "loss": result.loss,
        "exact_loss": exact_loss,
        "optimality_gap": None if exact_loss is None else result.loss - exact_loss,
        "wall_s": result.wall_s,
        "steps_per_s": result.steps_per_s,
        "samples_per_s": result.steps_per_s * cfg.batch_size * ranks.size,
        "versions": versions(),
        "config": cfg.as_dict(),
    }


def summary_lines(m: dict[str, Any]) -> list[str]:
    def vec(values: list) -> str:
        shown = ", ".join(f"{v:.6g}" for v in values[:_SHOWN_WEIGHTS])
        more = f", ... ({len(values)} in all)" if len(values) > _SHOWN_WEIGHTS else ""
        return f"[{shown}{more}]"

    true_w = f"  (true {vec(m['w_true'])})" if m["w_true"] is not None else ""
    true_b = f"  (true {m['b_true']:.6g})" if m["b_true"] is not None else ""
    v = m["versions"]
    return [
        "Summary:",
        f"  w: {vec(m['w'])}{true_w}",
        f"  b: {m['b']:.6g}{true_b}",
        f"  final loss: {m['loss']:.6g} (mean squared error over all {m['num_samples']} samples)",
        (
            f"  exact optimum's loss: {m['exact_loss']:.6g}, optimality gap: "
            f"{m['optimality_gap']:.3g}"
            if m["exact_loss"] is not None
            else f"  exact optimum: skipped (more than {MAX_FEATURES} features)"
        ),
        (
            f"  wall time: {m['wall_s']:.3f} s (one pass and one allreduce)"
            if m["config"]["solver"] == "exact"
            else f"  wall time: {m['wall_s']:.3f} s, {m['steps_per_s']:.1f} steps/s, "
            f"{m['samples_per_s']:.4g} samples/s"
        ),
        f"  ranks: {m['size']}, controller: {m['controller']}, "
        f"global batch: {m['global_batch_size']}",
        f"  versions: hvd_linreg {v['hvd_linreg']}, Horovod {v['horovod']}, "
        f"TensorFlow {v['tensorflow']}, NumPy {v['numpy']}, Python {v['python']}",
    ]


def check_writable(flag: str, path: str | None) -> None:
    """Refuse an output path that cannot be written before training, not after."""
    if path is None:
        return
    parent = Path(path).parent
    if not parent.is_dir() or not os.access(parent, os.W_OK) or Path(path).is_dir():
        raise UsageError(f"cannot write {flag} {path}: {parent} is not a writable directory")


def write_json(path: str, obj: dict[str, Any]) -> None:
    """Write atomically: a crash mid-write leaves the old file, never half of a new one."""
    text = json.dumps(obj, indent=2) + "\n"
    atomic_write(Path(path), lambda f: f.write(text.encode()))
