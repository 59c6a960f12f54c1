"""Checkpoints: crash-safe writes by rank 0, and the newest loadable one found again on start.

A checkpoint is `ckpt-<step>.npz` in the checkpoint directory: the parameters, the optimizer's
variables, and a JSON header with the step, the model's shape, the global batch and the rows
in batches, the run's initial parameters and configuration. This module alone writes and reads it.
It is written atomically (atomic.py), so a crash in the middle of a save leaves the previous
checkpoints untouched and never a half-written file under a checkpoint's name.
"""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hvd_linreg.data.frames import plain
from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import matrix
from hvd_linreg.runtime.atomic import atomic_write

_NAME = re.compile(r"^ckpt-(\d{10})\.npz$")
FORMAT = 1


@dataclass
class Checkpoint:
    step: int
    params: np.ndarray  # float32, (F + 1) x K′ (coefficients.py); older files [w..., b]
    optimizer: list[np.ndarray]  # the optimizer's variables, in its own order
    global_batch_size: int  # another one changes the trajectory: restore warns
    initial_params: list[float]  # the run's start: metrics of a resumed run report it
    config: dict  # the run's configuration, for whoever reads the file
    # N_sgd, the rows in batches (layout contract): another one changes the trajectory too.
    # None in checkpoints written before it was recorded.
    batched_rows: int | None = None
    # the features' names, a categorical column's dummies among them (None: unnamed columns,
    # or a checkpoint written before they were recorded)
    feature_names: Sequence[str] | None = None
    classes: list | None = None  # a model of classes' (None: one column, [w..., b])

    @property
    def num_features(self) -> int:
        return len(self.params) - 1


def prepare_dir(path: str) -> Path:
    """Create the directory and prove it is writable now, not after an hour of training."""
    d = Path(path)
    try:
        d.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".write-test-"):
            pass
    except OSError as e:
        raise UsageError(
            f"--checkpoint_dir {path} is not a writable directory ({e.strerror}); "
            "pick another path or fix its permissions"
        ) from None
    return d


def save(directory: Path, ckpt: Checkpoint, keep: int) -> Path:
    """Write atomically, then delete all but the `keep` newest checkpoints."""
    if not np.isfinite(ckpt.params).all():
        raise ValueError("refusing to write a checkpoint holding NaN or inf")  # a bug if reached
    target = directory / f"ckpt-{ckpt.step:010d}.npz"
    arrays = {f"optimizer_{i}": v for i, v in enumerate(ckpt.optimizer)}
    header = json.dumps(
        {
            "format": FORMAT,
            "step": ckpt.step,
            "num_features": ckpt.num_features,
            "global_batch_size": ckpt.global_batch_size,
            "batched_rows": ckpt.batched_rows,
            "feature_names": ckpt.feature_names,
            "classes": None if ckpt.classes is None else [plain(c) for c in ckpt.classes],
            "initial_params": ckpt.initial_params,
            "config": ckpt.config,
        }
    )
    atomic_write(target, lambda f: np.savez(f, params=ckpt.params, header=header, **arrays))
    for old in _checkpoints(directory)[:-keep]:
        old.unlink(missing_ok=True)
    return target


def load_latest(directory: Path) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint that loads, and a warning for each newer one that did not."""
    warnings = []
    for path in reversed(_checkpoints(directory)):
        try:
            return _load(path), warnings
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, json.JSONDecodeError) as e:
            warnings.append(f"skipping unreadable checkpoint {path.name}: {e}")
    return None, warnings


def _load(path: Path) -> Checkpoint:
    with np.load(path, allow_pickle=False) as z:
        header = json.loads(str(z["header"]))
        if header.get("format") != FORMAT:
            raise ValueError(f"unknown checkpoint format {header.get('format')!r}")
        count = sum(1 for k in z.files if k.startswith("optimizer_"))
        optimizer = [z[f"optimizer_{i}"] for i in range(count)]
        params = z["params"]
    if not np.isfinite(params).all():
        raise ValueError("holds NaN or inf")
    return Checkpoint(
        step=int(header["step"]),
        params=params,
        optimizer=optimizer,
        global_batch_size=header["global_batch_size"],
        initial_params=header["initial_params"],
        config=header["config"],
        batched_rows=header.get("batched_rows"),
        feature_names=header.get("feature_names"),
        classes=header.get("classes"),
    )


def _checkpoints(directory: Path) -> list[Path]:
    """Complete checkpoints, oldest first; temporary files of interrupted saves are ignored."""
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def check_resumable(
    ckpt: Checkpoint,
    where: str,
    num_features: int,
    optimizer: str,
    slots,
    feature_names: Sequence[str] | None = None,
    no_intercept: bool = False,
    classes: list | None = None,
) -> None:
    """Refuse a checkpoint this run cannot continue: another model shape, other features (a
    categorical column with other levels too), other classes, another optimizer, or a model
    with an intercept where this run has none, or the reverse.

    slots: the shapes of this run's optimizer variables; classes: a model of classes'."""
    _check_classes(ckpt, where, classes)
    _check_intercept(ckpt, where, no_intercept)
    if ckpt.num_features != num_features:
        raise UsageError(
            f"the checkpoint in {where} is for {ckpt.num_features} features, "
            f"this data has {num_features}; use another --checkpoint_dir"
        )
    saved_names = ckpt.feature_names
    if None not in (saved_names, feature_names) and list(saved_names) != list(feature_names):
        theirs, ours = next((a, b) for a, b in zip(saved_names, feature_names) if a != b)
        raise UsageError(
            f"the checkpoint in {where} is for other features: its {theirs!r} is this data's "
            f"{ours!r} (a categorical column's levels differ?); use another --checkpoint_dir"
        )
    # By the flag, not the state's shapes: plain SGD and momentum are one Keras class
    # with the same slots, and momentum would take SGD's last update for its velocity.
    saved = ckpt.config.get("optimizer")
    if saved != optimizer or [a.shape for a in ckpt.optimizer] != list(slots):
        raise UsageError(
            f"the checkpoint in {where} holds another optimizer's state ({saved}, this run "
            f"uses {optimizer}); use another --checkpoint_dir"
        )


def _check_classes(ckpt: Checkpoint, where: str, classes: list | None) -> None:
    """A model of classes continues only on the same classes; one mean only as one mean."""
    ours = None if classes is None else [plain(c) for c in classes]
    if ckpt.classes == ours:
        return
    theirs = "one mean" if ckpt.classes is None else f"the classes {ckpt.classes}"
    mine = "one mean" if ours is None else f"the classes {ours}"
    raise UsageError(
        f"the checkpoint in {where} is of a model of {theirs}, this run fits {mine}; use "
        "another --checkpoint_dir"
    )


def _check_intercept(ckpt: Checkpoint, where: str, no_intercept: bool) -> None:
    """A model with an intercept trained its b (and the optimizer's state of it); one without
    held b at 0. Neither continues as the other. (Checkpoints written before --no_intercept
    reached SGD have an intercept.)"""
    intercepts = matrix(ckpt.params)[-1]  # one per column; [w..., b] in an older file
    b = float(intercepts[0]) if len(intercepts) == 1 else float(np.abs(intercepts).max())
    if no_intercept and (not ckpt.config.get("no_intercept", False) or b != 0.0):
        raise UsageError(
            f"the checkpoint in {where} is of a model with an intercept (b = {b:.6g}), this "
            "run has --no_intercept; use another --checkpoint_dir"
        )
    if not no_intercept and ckpt.config.get("no_intercept", False):
        raise UsageError(
            f"the checkpoint in {where} is of a model without an intercept (--no_intercept), "
            "this run fits one; add --no_intercept or use another --checkpoint_dir"
        )


_DIFFER = "the result will differ from an uninterrupted run"


def trajectory_warnings(
    ckpt: Checkpoint, config: dict, global_batch: int, batched: int
) -> list[str]:
    """Why continuing from this checkpoint will not retrace an uninterrupted run, if it will not.

    The same global batch over the same first N_sgd rows is the same trajectory, whatever the
    rank count (the layout contract); config is this run's Config.as_dict()."""
    warnings = []
    if ckpt.global_batch_size != global_batch:
        warnings.append(
            f"the checkpoint was trained with a global batch of {ckpt.global_batch_size}, "
            f"this run uses {global_batch}: {_DIFFER}"
        )
    elif ckpt.batched_rows is None:
        warnings.append(
            "the checkpoint does not record which rows its batches used (an older version "
            f"wrote it); this run's use the first {batched}: {_DIFFER.replace('will', 'may')}"
        )
    elif ckpt.batched_rows != batched:
        warnings.append(
            f"the checkpoint was trained on batches of the first {ckpt.batched_rows} rows, "
            f"this run's use the first {batched}: {_DIFFER}"
        )
    return warnings + _other_rows_warnings(ckpt.config, config)


def _other_rows_warnings(saved: dict, config: dict) -> list[str]:
    """As many rows can still be other rows: the hold-out split picks them, and the seed draws
    the synthetic rows and the split. (Checkpoints from before the split had none.)"""
    fraction, now = saved.get("validation_fraction", 0.0), config["validation_fraction"]
    if fraction != now:
        return [
            f"the checkpoint was trained with --validation_fraction {fraction:g}, this run "
            f"uses {now:g}: other rows train, and {_DIFFER}"
        ]
    synthetic = config["data"] is None
    if saved.get("seed", config["seed"]) != config["seed"] and (synthetic or fraction):
        drawn = "synthetic rows" if synthetic else "held-out rows"
        return [
            f"the checkpoint was trained with --seed {saved['seed']}, this run uses "
            f"{config['seed']}: the seed draws the {drawn}, so other rows train, and {_DIFFER}"
        ]
    return []
