"""The run's configuration: every knob with its default, validated once, then frozen."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from hvd_linreg.families import FAMILIES


class UsageError(Exception):
    """A problem the user caused and can fix; ends every rank with exit code 2."""


SOLVERS = ("sgd", "exact")
OPTIMIZERS = ("sgd", "momentum", "adam")
DTYPES = ("float32", "float64")
OPTIMALITY_GAP = ("auto", "always", "never")
SYNTHETIC_SAMPLES = 1000  # the seed's dataset
SYNTHETIC_FEATURES = 1


def setting(default: Any, help: str, metavar: str | None = None, choices=None) -> Any:
    """A Config field that carries its command-line help: the one place a setting is declared
    (cli builds the parser from these; tests/test_cli.py checks the README's table against it)."""
    return field(default=default, metadata={"help": help, "metavar": metavar, "choices": choices})


# Defaults are the seed program's (../shared/seed): 1000 steps, lr 0.01, batch 100, logs every 100.
@dataclass(frozen=True)
class Config:
    num_steps: int = setting(1000, "training steps", "N")
    learning_rate: float = setting(0.01, "SGD learning rate", "LR")
    batch_size: int = setting(100, "samples per rank per step; the global batch is B x ranks", "B")
    num_samples: int | None = setting(
        None,
        f"synthetic samples in the whole dataset, over all ranks "
        f"(default {SYNTHETIC_SAMPLES}; with --data, every row of the file)",
        "N",
    )
    num_features: int | None = setting(
        None, f"synthetic features per sample (default {SYNTHETIC_FEATURES})", "F"
    )
    seed: int = setting(0, "seed for the synthetic data and the initial weights")
    log_every: int = setting(100, "log 'Step: N Loss: X' every N steps", "N")
    data: str | None = setting(
        None,
        "train on a file instead: .npy (last column = target), .npz (arrays X, y), "
        ".csv (header line; target = last column or --target), .parquet; or a directory or "
        "glob of .npy, .csv or .parquet files, read in the order of their paths",
        "PATH",
    )
    target: str | None = setting(
        None, "CSV or Parquet column to predict (default: the last one)", "NAME"
    )
    features: str | None = setting(
        None,
        "CSV or Parquet columns to use as features, comma-separated, in this order "
        "(default: every column but the target)",
        "A,B,...",
    )
    dtype: str | None = setting(
        None,
        "precision of the data and the model (default: a file's own, float64 for CSV text; "
        "float32 for synthetic data)",
        choices=DTYPES,
    )
    validation_fraction: float = setting(
        0.0,
        "hold out this fraction of the rows, picked by a hash of the row index and --seed (the "
        "same rows for any number of ranks), and score the model on them at each log step",
        "F",
    )
    metrics_json: str | None = setting(None, "rank 0 writes the run's results here as JSON", "PATH")
    checkpoint_dir: str | None = setting(
        None, "rank 0 saves checkpoints here; a run resumes from the newest one it finds", "DIR"
    )
    checkpoint_every: int = setting(100, "steps between checkpoints", "N")
    keep_checkpoints: int = setting(3, "keep the K newest checkpoints", "K")
    model: str = setting(
        "linear",
        "the model family: linear (least squares on a numeric target) or logistic (logistic "
        "regression on a 0/1 target; --solver exact is then Newton's method)",
        "NAME",
        choices=FAMILIES,
    )
    solver: str = setting(
        "sgd",
        "sgd: train with data-parallel SGD; exact: solve least squares directly by a "
        "distributed QR (no batches: --batch_size does not apply)",
        choices=SOLVERS,
    )
    optimality_gap: str = setting(
        "auto",
        "SGD runs: solve least squares exactly too and report the distance from its optimum; "
        "auto: when that costs less than the training (N x (F+1) <= 2 x steps x global batch)",
        choices=OPTIMALITY_GAP,
    )
    l2: float = setting(
        0.0,
        "ridge: minimise the mean squared error + LAMBDA x |w|^2 (the bias is not penalised)",
        "LAMBDA",
    )
    optimizer: str = setting("sgd", "the optimizer Horovod wraps", choices=OPTIMIZERS)
    momentum: float = setting(0.9, "momentum of --optimizer momentum")
    lr_warmup_steps: int = setting(
        0, "ramp the learning rate linearly from lr/W to lr over the first W updates", "W"
    )
    scale_lr: bool = setting(
        False, "multiply the learning rate by the number of ranks (Horovod's linear scaling)"
    )
    fp16_allreduce: bool = setting(
        False, "send gradients as float16 in the allreduce (Horovod's fp16 compression)"
    )
    backward_passes_per_step: int = setting(
        1, "accumulate K local gradients (K steps' batches) before each allreduce and update", "K"
    )
    logdir: str | None = setting(None, "rank 0 writes TensorBoard scalars here", "DIR")
    plot: str | None = setting(
        None, "rank 0 saves a figure of the loss and the fit here", "PATH.png"
    )
    export: str | None = setting(
        None,
        "rank 0 writes the trained model here: a TensorFlow SavedModel with its metadata, "
        "for hvd-linreg predict and evaluate (README, Use the model)",
        "DIR",
    )
    quiet: bool = setting(False, "print only the summary (no progress bar or Step lines)")
    verbose: bool = setting(False, "let every rank log, tagged with its rank")
    elastic: bool = setting(
        False,
        "train under Horovod's elastic mode: go on when ranks are lost or added "
        "(launch with horovodrun --host-discovery-script; README, Elastic)",
    )
    commit_every: int | None = setting(
        None,
        "with --elastic: steps between commits of the state a reset goes back to "
        "(default: --log_every)",
        "N",
    )

    def __post_init__(self) -> None:
        for name in (
            "num_steps",
            "batch_size",
            "num_samples",
            "num_features",
            "log_every",
            "checkpoint_every",
            "keep_checkpoints",
            "commit_every",
        ):
            value = getattr(self, name)
            if value is None and name in ("num_samples", "num_features", "commit_every"):
                continue
            if not _is_int(value) or value <= 0:
                raise UsageError(f"--{name} must be a positive whole number, got {value!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise UsageError(f"--seed must be a whole number >= 0, got {self.seed!r}")
        lr = self.learning_rate
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr):
            raise UsageError(f"--learning_rate must be a finite number, got {lr!r}")
        if lr <= 0:
            raise UsageError(f"--learning_rate must be > 0, got {lr!r}")
        l2 = self.l2
        if isinstance(l2, bool) or not isinstance(l2, (int, float)) or not 0 <= l2 < math.inf:
            raise UsageError(f"--l2 must be a finite number >= 0, got {l2!r}")
        f = self.validation_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 <= f < 1:
            raise UsageError(f"--validation_fraction must be a number in [0, 1), got {f!r}")
        if not _is_int(self.lr_warmup_steps) or self.lr_warmup_steps < 0:
            raise UsageError(
                f"--lr_warmup_steps must be a whole number >= 0, got {self.lr_warmup_steps!r}"
            )
        # --dtype may be left unset: the data's own precision.
        choices = (
            ("model", FAMILIES),
            ("solver", SOLVERS),
            ("optimizer", OPTIMIZERS),
            ("dtype", (None, *DTYPES)),
        )
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                named = ", ".join(a for a in allowed if a)
                raise UsageError(f"--{name} must be one of {named}, got {getattr(self, name)!r}")
        m = self.momentum
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < 1:
            raise UsageError(f"--momentum must be a number in [0, 1), got {m!r}")
        k = self.backward_passes_per_step
        if self.checkpoint_every % k or self.log_every % k:
            raise UsageError(
                f"--checkpoint_every and --log_every must be multiples of "
                f"--backward_passes_per_step {k}, so that no step is cut in two"
            )
        self._check_elastic()
        if self.data is not None:
            for name in ("num_samples", "num_features"):
                if getattr(self, name) is not None:
                    raise UsageError(
                        f"--{name} cannot be combined with --data: it comes from the file"
                    )
        else:
            for flag, value in (("--target", self.target), ("--features", self.features)):
                if value is not None:
                    raise UsageError(
                        f"{flag} names columns of a CSV or Parquet file, so it needs --data"
                    )
        if self.features is not None:
            names = self.feature_columns if isinstance(self.features, str) else ()
            if not names or not all(names) or len(set(names)) < len(names):
                raise UsageError(
                    "--features takes distinct column names separated by commas, "
                    f"got {self.features!r}"
                )

    def _check_elastic(self) -> None:
        """What a reset cannot carry over: a rate scaled by the rank count, gradients
        accumulated over several passes, and nothing to carry for the exact solver."""
        if not self.elastic:
            if self.commit_every is not None:
                raise UsageError("--commit_every is for --elastic runs")
            return
        for flag, conflicts in (
            ("--scale_lr", self.scale_lr),
            ("--backward_passes_per_step above 1", self.backward_passes_per_step > 1),
            ("--solver exact", self.solver == "exact"),
        ):
            if conflicts:
                raise UsageError(f"--elastic cannot be combined with {flag} (README, Elastic)")

    @property
    def commit_interval(self) -> int:
        """Steps between elastic commits."""
        return self.commit_every or self.log_every

    @property
    def feature_columns(self) -> tuple[str, ...] | None:
        """--features as column names, in its order."""
        if self.features is None:
            return None
        return tuple(name.strip() for name in self.features.split(","))

    @property
    def batched(self) -> bool:
        """Whether the run trains on batches: --solver exact passes over all rows instead."""
        return self.solver == "sgd"

    @property
    def synthetic(self) -> bool:
        return self.data is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_names() -> list[str]:
    return [f.name for f in fields(Config)]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
