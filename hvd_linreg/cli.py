"""Command line: parse the flags into a Config and hand it to the trainer. Exit codes:
0 done; 2 a usage error (one line from rank 0, no traceback, on every rank); 1 the job lost a
rank (another rank died or stalled); 130 interrupted; anything else is a bug, with a traceback."""

from __future__ import annotations

import argparse
import os
import sys

from hvd_linreg import __version__
from hvd_linreg.config import OPTIMIZERS, SOLVERS, Config, UsageError, field_names
from hvd_linreg.ranks import (
    check_host_name,
    launch_rank,
    quiet_tensorflow,
    say,
    settle,
    speaks_for,
)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (so the caller decides who prints) and whose help
    only rank 0 prints."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")

    def _print_message(self, message: str, file=None) -> None:
        if launch_rank() == 0:
            super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="hvd-linreg",
        description="Data-parallel linear regression on Horovod: every rank trains on its own "
        "shard and hvd.DistributedOptimizer averages the gradients. Launch with "
        "'horovodrun -np N hvd-linreg', 'mpirun -np N hvd-linreg' or srun. "
        "'hvd-linreg doctor' checks that this machine can.",
        allow_abbrev=False,
    )

    def flag(name: str, **kwargs) -> None:
        # The seed's spelling (--num_steps) and the dashed one (--num-steps) both work.
        p.add_argument(f"--{name}", f"--{name.replace('_', '-')}", dest=name, **kwargs)

    d = Config()
    flag("num_steps", type=int, metavar="N", help=f"training steps (default {d.num_steps})")
    flag(
        "learning_rate",
        type=float,
        metavar="LR",
        help=f"SGD learning rate (default {d.learning_rate})",
    )
    flag(
        "batch_size",
        type=int,
        metavar="B",
        help=f"samples per rank per step; the global batch is B x ranks (default {d.batch_size})",
    )
    flag(
        "num_samples",
        type=int,
        metavar="N",
        help="synthetic samples in the whole dataset, over all ranks (default 1000)",
    )
    flag("num_features", type=int, metavar="F", help="synthetic features per sample (default 1)")
    flag(
        "seed",
        type=int,
        help=f"seed for the synthetic data and the initial weights (default {d.seed})",
    )
    flag(
        "log_every",
        type=int,
        metavar="N",
        help=f"log 'Step: N Loss: X' every N steps (default {d.log_every})",
    )
    flag(
        "data",
        metavar="PATH",
        help="train on a file instead: .npy (last column = target), .npz (arrays X, y), "
        ".csv (header line; target = last column or --target)",
    )
    flag("target", metavar="NAME", help="CSV column to predict (default: the last one)")
    flag("metrics_json", metavar="PATH", help="rank 0 writes the run's results here as JSON")
    flag(
        "checkpoint_dir",
        metavar="DIR",
        help="rank 0 saves checkpoints here; a run resumes from the newest one it finds",
    )
    flag(
        "checkpoint_every",
        type=int,
        metavar="N",
        help=f"steps between checkpoints (default {d.checkpoint_every})",
    )
    flag(
        "keep_checkpoints",
        type=int,
        metavar="K",
        help=f"keep the K newest checkpoints (default {d.keep_checkpoints})",
    )
    flag(
        "solver",
        choices=SOLVERS,
        help="sgd: train with data-parallel SGD (default); exact: solve least squares "
        "directly with one allreduce of the normal equations",
    )
    flag(
        "optimizer",
        choices=OPTIMIZERS,
        help=f"the optimizer Horovod wraps (default {d.optimizer})",
    )
    flag("momentum", type=float, help=f"momentum of --optimizer momentum (default {d.momentum})")
    flag(
        "lr_warmup_steps",
        type=int,
        metavar="W",
        help="ramp the learning rate linearly from lr/W to lr over the first W updates",
    )
    flag(
        "scale_lr",
        action="store_true",
        default=None,
        help="multiply the learning rate by the number of ranks (Horovod's linear scaling; "
        "off by default)",
    )
    flag(
        "fp16_allreduce",
        action="store_true",
        default=None,
        help="send gradients as float16 in the allreduce (Horovod's fp16 compression)",
    )
    flag(
        "backward_passes_per_step",
        type=int,
        metavar="K",
        help="accumulate K local gradients (K steps' batches) before each allreduce and update",
    )
    flag(
        "config",
        metavar="FILE.toml",
        help="read flags from a TOML file (same names); flags on the command line win",
    )
    flag("logdir", metavar="DIR", help="rank 0 writes TensorBoard scalars here")
    flag("plot", metavar="PATH.png", help="rank 0 saves a figure of the loss and the fit here")
    flag(
        "quiet",
        action="store_true",
        default=None,
        help="print only the summary (no progress bar or Step lines)",
    )
    flag(
        "verbose",
        action="store_true",
        default=None,
        help="let every rank log, tagged with its rank",
    )
    p.add_argument("--version", action="version", version=f"hvd-linreg {__version__}")
    return p


def parse_config(argv: list[str] | None = None) -> Config:
    args = vars(build_parser().parse_args(argv))
    path = args.pop("config")
    from_file = read_config_file(path) if path else {}
    given = {k: v for k, v in args.items() if v is not None}
    return Config(**{**from_file, **given})


def read_config_file(path: str) -> dict:
    """A TOML file's keys, checked against the flags' names (dashes allowed)."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        raise UsageError("--config needs Python 3.11 or newer (tomllib)") from None
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise UsageError(f"cannot read --config {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--config {path} is not valid TOML: {e}") from None
    known = set(field_names())
    values = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in known:
            raise UsageError(f"--config {path}: unknown key {key!r}; keys are the flags' names")
        values[name] = value
    return values


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["doctor"]:
        from hvd_linreg import doctor

        return doctor.main(argv[1:])
    try:
        cfg = parse_config(argv)
        check_host_name()  # a bad host name would crash Horovod: refuse it before it starts
        quiet_tensorflow()
        from hvd_linreg.train import run  # imports TensorFlow: after the flags are checked

        return run(cfg)
    except UsageError as e:
        code = _fail(f"hvd-linreg: error: {e}", 2, e)
        settle(e)
        return code
    except KeyboardInterrupt:
        return _fail("hvd-linreg: interrupted", 130)
    except BrokenPipeError:
        # Whoever read our output has gone (`hvd-linreg | head`): stop as a command killed by
        # SIGPIPE would, 128 + 13, without a traceback. Later writes (Python's own flush at
        # exit) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:
        if not _is_collective_failure(e):
            raise  # a bug: keep the traceback
        # Another rank died or stalled and Horovod shut down: say so in one line, not a
        # TensorFlow traceback on every rank.
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return _fail(f"hvd-linreg: error: the job lost a rank ({first_line})", 1)


def _fail(message: str, code: int, error: BaseException | None = None) -> int:
    if speaks_for(error):
        say(message, stream=sys.stderr)
    return code


def _is_collective_failure(e: Exception) -> bool:
    from horovod.common.exceptions import HorovodInternalError
    from tensorflow.errors import OpError

    return isinstance(e, (HorovodInternalError, OpError))


if __name__ == "__main__":
    sys.exit(main())
