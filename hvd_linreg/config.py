"""The run's configuration: every knob with its default, validated once, then frozen."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any


class UsageError(Exception):
    """A problem the user caused and can fix; ends every rank with exit code 2."""


SOLVERS = ("sgd", "exact")
OPTIMIZERS = ("sgd", "momentum", "adam")


# Defaults are the seed program's (../shared/seed): 1000 steps, lr 0.01, batch 100, logs every 100.
@dataclass(frozen=True)
class Config:
    num_steps: int = 1000
    learning_rate: float = 0.01
    batch_size: int = 100  # per rank; the global batch is batch_size * ranks
    num_samples: int | None = None  # global; None: 1000 synthetic, or every row of --data
    num_features: int | None = None  # None: 1 synthetic, or the file's feature columns
    seed: int = 0
    log_every: int = 100
    data: str | None = None
    target: str | None = None
    metrics_json: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 100  # steps; only with checkpoint_dir
    keep_checkpoints: int = 3
    solver: str = "sgd"  # or "exact": least squares in one allreduce
    optimizer: str = "sgd"  # sgd | momentum | adam
    momentum: float = 0.9  # with optimizer "momentum"
    lr_warmup_steps: int = 0
    scale_lr: bool = False  # multiply the learning rate by the number of ranks
    fp16_allreduce: bool = False
    backward_passes_per_step: int = 1
    logdir: str | None = None  # TensorBoard scalars
    plot: str | None = None  # a PNG figure of the run
    quiet: bool = False  # only the summary
    verbose: bool = False

    def __post_init__(self) -> None:
        for name in (
            "num_steps",
            "batch_size",
            "num_samples",
            "num_features",
            "log_every",
            "checkpoint_every",
            "keep_checkpoints",
        ):
            value = getattr(self, name)
            if value is None and name in ("num_samples", "num_features"):
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
        if not _is_int(self.lr_warmup_steps) or self.lr_warmup_steps < 0:
            raise UsageError(
                f"--lr_warmup_steps must be a whole number >= 0, got {self.lr_warmup_steps!r}"
            )
        for name, allowed in (("solver", SOLVERS), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in allowed:
                raise UsageError(
                    f"--{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        m = self.momentum
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < 1:
            raise UsageError(f"--momentum must be a number in [0, 1), got {m!r}")
        k = self.backward_passes_per_step
        if self.checkpoint_every % k or self.log_every % k:
            raise UsageError(
                f"--checkpoint_every and --log_every must be multiples of "
                f"--backward_passes_per_step {k}, so that no step is cut in two"
            )
        if self.data is not None:
            for name in ("num_samples", "num_features"):
                if getattr(self, name) is not None:
                    raise UsageError(
                        f"--{name} cannot be combined with --data: it comes from the file"
                    )
        elif self.target is not None:
            raise UsageError("--target names a CSV column, so it needs --data FILE.csv")

    @property
    def synthetic(self) -> bool:
        return self.data is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_names() -> list[str]:
    return [f.name for f in fields(Config)]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
