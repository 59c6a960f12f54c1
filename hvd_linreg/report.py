"""What rank 0 tells the user: the header before training; after it, the summary lines and
the metrics JSON (the plot draws from the same Report)."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hvd_linreg import __version__
from hvd_linreg.config import Config
from hvd_linreg.data import Shard, global_batch_size
from hvd_linreg.errors import UsageError
from hvd_linreg.families.coefficients import stored, vec
from hvd_linreg.runtime.atomic import atomic_write
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.solvers import solver_words
from hvd_linreg.statistics import describe
from hvd_linreg.statistics.table import SHOWN_COEFFICIENTS
from hvd_linreg.statistics.table import SHOWN_WEIGHTS as _SHOWN_WEIGHTS

# What the summary and the plot call a family's loss (UI text: a family is its distribution and
# link): a model of classes' (binary or K) is the mean log-loss; else the mean half unit
# deviance, named by the distribution, unless a loss is named here.
LOSS_NAMES = dict.fromkeys(["linear", "gaussian"], "mean squared error")
DISTRIBUTION_NAMES = {
    "poisson": "Poisson",
    "gamma": "Gamma",
    "tweedie": "Tweedie",
    "inverse_gaussian": "inverse Gaussian",
}


def loss_name(family) -> str:
    """ "mean squared error", "mean log-loss" or "mean half <distribution> deviance"."""
    if family.NAME in LOSS_NAMES:
        return LOSS_NAMES[family.NAME]
    if family.BINARY or family.SCORES == "classes":
        return "mean log-loss"
    distribution = DISTRIBUTION_NAMES.get(family.NAME, family.NAME.replace("_", " "))
    return f"mean half {distribution} deviance"


@dataclass
class TrainingResult:
    # the coefficients (coefficients.py), (F + 1) x 1 here: as broadcast from rank 0 (None: an
    # exact solver's), and after training
    initial_params: np.ndarray | None
    params: np.ndarray
    loss: float  # the family's loss over the whole dataset (all ranks) at the final params
    steps: int  # the step training ended at
    first_step: int  # the step it started from: 0, or the checkpoint's when resuming
    wall_s: float  # this run's training loop only, from after the broadcast to the last step
    history: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss) logged
    # --elastic: each reset as (step it went on from, ranks before, ranks after), in order
    resets: list[tuple[int, int, int]] = field(default_factory=list)
    # --validation_fraction: the family's scores on the held-out rows at the end, and at each
    # log step
    validation: Any = None
    validation_history: list[tuple[int, Any]] = field(default_factory=list)
    # the family's scores on the training rows at the end (None: not computed, see
    # pipeline.training_scores)
    training: Any = None

    @property
    def steps_per_s(self) -> float:
        trained = self.steps - self.first_step
        return trained / self.wall_s if self.wall_s > 0 else 0.0


def header_line(cfg: Config, family, job: Job, shard: Shard) -> str:
    """What rank 0 says before training: the job, the data and the run."""
    run = (
        _penalized_run(cfg)
        if cfg.penalized
        else solver_words(family)[0]
        if cfg.solver == "exact"
        else f"batch {cfg.batch_size} per rank ({shard.layout.global_batch} global), "
        f"{cfg.num_steps} steps, {cfg.optimizer}, learning rate {cfg.learning_rate}"
    )
    held_out = f" + {shard.num_validation} validation" if shard.num_validation else ""
    dropped = f" ({shard.num_dropped} with a missing value dropped)" if shard.num_dropped else ""
    if shard.index_column is not None:  # a row index among its columns, passed over
        dropped += f" (column {shard.index_column!r} left out: a row index; --features names it)"
    by = "" if job.controller == "none" else f" ({job.controller})"  # one process: no peers
    return (
        f"hvd-linreg: {job.size} rank{'s' * (job.size > 1)}{by}, "
        f"{shard.num_samples}{held_out} samples x {shard.num_features} feature"
        f"{'s' * (shard.num_features > 1)} ({shard.dtype}) from {shard.source}{dropped}, {run}"
    )


def modelled(shard: Shard) -> str:
    """What a target of two levels models: the second against the first, the reference."""
    reference, event = shard.target_levels
    return (
        f"P({shard.target_name or 'y'} = {event!r}), against {reference!r} (the first level, "
        "the reference)"
    )


def _penalized_run(cfg: Config) -> str:
    """The header's account of an elastic-net run."""
    if cfg.alpha is None:
        what = f"a path of {'' if cfg.whole_path else 'up to '}{cfg.n_alphas} strengths"
    elif isinstance(cfg.alpha, (list, tuple)):
        what = f"{len(cfg.alpha)} given strengths"
    else:
        what = f"alpha {cfg.alpha:g}"
    folds = (
        f", {cfg.cv}-fold cross-validation"
        if cfg.cv
        else f", cross-validation by {cfg.fold_column}"
        if cfg.fold_column
        else ""
    )
    relaxed = ", relaxed" if cfg.relax else ""
    measure = f", chosen by {cfg.type_measure}" if folds and cfg.type_measure != "deviance" else ""
    return f"elastic net (l1_ratio {cfg.penalty_l1_ratio:g}{relaxed}), {what}{folds}{measure}"


def versions() -> dict[str, str]:
    """The versions of what the run stands on, read from the installed packages' metadata: an
    exact fit imports neither Horovod nor TensorFlow to say which it would use."""
    return {
        "hvd_linreg": __version__,
        "horovod": _installed("horovod"),
        "tensorflow": _installed("tensorflow", "tensorflow-cpu", "tensorflow-intel"),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def _installed(*names: str) -> str:
    """The version of the first of these distributions installed, or "none"."""
    from importlib.metadata import PackageNotFoundError, version

    for name in names:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "none"


@dataclass
class Report:
    """What rank 0 reports at the end of a run: the summary, the metrics JSON and the plot."""

    cfg: Config
    job: Job
    shard: Shard
    result: TrainingResult
    optimum: Any  # the family's exact optimum; None where it was not solved
    family: Any  # the model family (families/): it computes every figure of the fit
    versions: dict[str, str] = field(default_factory=versions)
    # the exact optimum's: the family's statistics, whose table() the summary ends with
    statistics: Any = field(init=False)

    def __post_init__(self) -> None:
        self.statistics = (
            None if self.optimum is None else describe(self.optimum, self.shard.feature_names)
        )

    @property
    def penalized(self) -> bool:
        """Whether the fit is the elastic net's (its statistics are the path's)."""
        return self.cfg.penalized and self.optimum is not None

    @property
    def exact_loss(self) -> float | None:
        return None if self.optimum is None else self.optimum.loss

    @property
    def global_batch_size(self) -> int:
        return global_batch_size(self.cfg.batch_size, self.job.size)

    @property
    def exact_skipped(self) -> str:
        """Why an SGD run has no exact optimum (pipeline.optimum)."""
        if not self.family.exact:
            return f"the model family {self.family.NAME} has no exact solver"
        limit = self.family.MAX_EXACT_FEATURES
        if self.shard.num_features > limit:
            return f"more than {limit} features"
        if self.cfg.optimality_gap == "never":
            return "--optimality_gap never"
        return "it costs more than the training; --optimality_gap always computes it"

    @property
    def optimality_gap(self) -> float | None:
        """How far the result's objective (with --l2, the ridge one) is above the optimum's."""
        if self.optimum is None or self.penalized:
            return None  # an exact penalized fit is its own optimum
        achieved = self.family.objective(self.result.loss, self.result.params, self.cfg.l2)
        return achieved - self.optimum.objective

    @property
    def samples_per_s(self) -> float:
        return self.result.steps_per_s * self.global_batch_size

    def metrics(self) -> dict[str, Any]:
        """The metrics JSON: every value a plain number, string, list or null."""
        cfg, shard, result = self.cfg, self.shard, self.result
        initial = (None, None) if result.initial_params is None else stored(result.initial_params)
        w, b = stored(result.params)
        return {
            "size": self.job.size,
            "controller": self.job.controller,
            "hosts": list(self.job.hosts),
            "steps": result.steps,
            "first_step": result.first_step,
            "resets": [list(event) for event in result.resets],
            "batch_size": cfg.batch_size,
            "global_batch_size": self.global_batch_size,
            "learning_rate": cfg.learning_rate,
            "num_samples": shard.num_samples,
            "rows_dropped_missing": shard.num_dropped,
            "num_features": shard.num_features,
            "features": None if shard.feature_names is None else list(shard.feature_names),
            "target_levels": shard.target_levels,
            "dtype": shard.dtype,
            "seed": cfg.seed,
            "data": shard.source,
            "initial_w": initial[0],
            "initial_b": initial[1],
            "w": w,
            "b": b,
            "w_true": shard.w_true,
            "b_true": shard.b_true,
            "loss": result.loss,
            "exact_loss": self.exact_loss,
            "optimality_gap": self.optimality_gap,
            "statistics": None if self.statistics is None else self.statistics.as_json(),
            **(
                self.statistics.sections()
                if self.penalized
                else {"path": None, "cv": None, "relaxed": None, "passes": None, "ended": None}
            ),
            "training_scores": None
            if result.training is None
            else {
                "num_samples": result.training.count,
                **result.training.as_json(),
            },
            "validation": self._validation_json(),
            "wall_s": result.wall_s,
            "steps_per_s": result.steps_per_s,
            "samples_per_s": self.samples_per_s,
            "versions": self.versions,
            "config": cfg.as_dict(),
        }

    def _validation_json(self) -> dict[str, Any] | None:
        """The held-out rows' scores at the end and at each log step; R² null when undefined."""
        validation = self.result.validation
        if validation is None:
            return None
        history = self.result.validation_history
        return {
            "num_samples": validation.count,
            "fraction": self.cfg.validation_fraction,
            **validation.as_json(),
            "history": [{"step": step, **s.as_json()} for step, s in history],
        }

    def summary_lines(self, limit: int | None = SHOWN_COEFFICIENTS) -> list[str]:
        """The run's summary; its table lists every coefficient up to limit (None: all)."""

        def listed(values) -> str:
            shown = ", ".join(f"{v:.6g}" for v in values[:_SHOWN_WEIGHTS])
            more = f", ... ({len(values)} in all)" if len(values) > _SHOWN_WEIGHTS else ""
            return f"[{shown}{more}]"

        shard, result, v = self.shard, self.result, self.versions
        gap = "optimality gap" + (
            f" (of the objective with --l2 {self.cfg.l2:g})" * (self.cfg.l2 > 0)
        )
        true_w = f"  (true {listed(shard.w_true)})" if shard.w_true is not None else ""
        true_b = f"  (true {shard.b_true:.6g})" if shard.b_true is not None else ""
        return [
            "Summary:",
            *([f"  target: {modelled(shard)}"] if shard.target_levels is not None else []),
            f"  w: {listed(vec(result.params[:-1]))}{true_w}",
            f"  b: {result.params[-1, 0]:.6g}{true_b}",
            f"  final loss: {result.loss:.6g} ({'weighted ' * shard.weighted}"
            f"{loss_name(self.family)}{', Σ w x loss / rows,' * shard.weighted} over all "
            f"{shard.num_samples}{' training' * bool(shard.num_validation)} samples)",
            *([f"  training: {result.training.line()}"] if result.training is not None else []),
            *(
                [f"  validation: {result.validation.line()} ({shard.num_validation} samples)"]
                if result.validation is not None
                else []
            ),
            (
                f"  penalized objective: {self.optimum.objective:.10g} (mean deviance / 2 + "
                "penalty)"
                if self.penalized
                else f"  exact optimum's loss: {self.exact_loss:.6g}, {gap}: "
                f"{self.optimality_gap:.3g}"
                if self.exact_loss is not None
                else f"  exact optimum: skipped ({self.exact_skipped})"
            ),
            (
                f"  wall time: {result.wall_s:.3f} s ({self.optimum.passes} pass"
                f"{'es' * (self.optimum.passes > 1)} over the data, coordinate descent on "
                "their Gram matrices)"
                if self.penalized
                else f"  wall time: {result.wall_s:.3f} s "
                f"({solver_words(self.family, self.optimum.factor.METHOD)[1]})"
                if self.cfg.solver == "exact"
                else f"  wall time: {result.wall_s:.3f} s, {result.steps_per_s:.1f} steps/s, "
                f"{self.samples_per_s:.4g} samples/s"
            ),
            f"  ranks: {self.job.size}, controller: {self.job.controller}"
            + (f", global batch: {self.global_batch_size}" if self.cfg.solver == "sgd" else ""),
            f"  versions: hvd_linreg {v['hvd_linreg']}, Horovod {v['horovod']}, "
            f"TensorFlow {v['tensorflow']}, NumPy {v['numpy']}, Python {v['python']}",
            *([] if self.statistics is None else self.statistics.table(limit)),
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
