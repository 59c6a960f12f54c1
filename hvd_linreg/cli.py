"""Command line: parse the flags into a Config and hand it to the trainer. Exit codes:
0 done, 2 a usage error (message from rank 0, no traceback), anything else a bug or a crash."""

from __future__ import annotations

import argparse
import sys

from hvd_linreg import __version__
from hvd_linreg.config import Config, UsageError
from hvd_linreg.ranks import launch_rank, quiet_tensorflow, say


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
        "'horovodrun -np N hvd-linreg', 'mpirun -np N hvd-linreg' or srun.",
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
        "verbose",
        action="store_true",
        default=None,
        help="let every rank log, tagged with its rank",
    )
    p.add_argument("--version", action="version", version=f"hvd-linreg {__version__}")
    return p


def parse_config(argv: list[str] | None = None) -> Config:
    args = build_parser().parse_args(argv)
    given = {k: v for k, v in vars(args).items() if v is not None}
    return Config(**given)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = parse_config(argv)
        quiet_tensorflow()
        from hvd_linreg.train import run  # imports TensorFlow: after the flags are checked

        return run(cfg)
    except UsageError as e:
        if launch_rank() == 0:
            say(f"hvd-linreg: error: {e}", stream=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
