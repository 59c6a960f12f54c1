"""Command line: parse the flags into a Config and hand it to the trainer, or a subcommand's
flags to it (doctor; predict and evaluate, which apply an exported model). Exit codes:
0 done; 2 a usage error (one line from rank 0, no traceback, on every rank); 1 the job lost a
rank (another rank died or stalled); 130 interrupted; anything else is a bug, with a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields

from hvd_linreg import __version__, families
from hvd_linreg.config import Config, field_names
from hvd_linreg.errors import UsageError
from hvd_linreg.runtime.hosts import check_elastic_launch, check_host_name
from hvd_linreg.runtime.launcher import launch_rank, speaks_for
from hvd_linreg.runtime.ranks import (
    is_collective_failure,
    say,
    settle,
)
from hvd_linreg.runtime.startup import quiet_tensorflow


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (so the caller decides who prints) and whose help
    only rank 0 prints."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see --help)")

    def print_help(self, file=None) -> None:
        if launch_rank() == 0:
            super().print_help(file)


class _Version(argparse.Action):
    """--version, printed by rank 0 only (argparse's own prints on every rank)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if launch_rank() == 0:
            say(f"hvd-linreg {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """One flag per Config field, from the help and default declared there."""
    p = _Parser(
        prog="hvd-linreg",
        description="Data-parallel linear regression on Horovod: every rank trains on its own "
        "shard and hvd.DistributedOptimizer averages the gradients. Launch with "
        "'horovodrun -np N hvd-linreg', 'mpirun -np N hvd-linreg' or srun. "
        "'hvd-linreg doctor' checks that this machine can; 'hvd-linreg predict' and "
        "'hvd-linreg evaluate' apply a model that --export wrote.",
        allow_abbrev=False,
    )
    for f in fields(Config):
        kind = f.type.split("|")[0].strip()  # "int | None" -> "int" (annotations are strings)
        help_text = f.metadata["help"]
        if f.default is not None and f.default is not False:
            help_text += f" (default {f.default})"
        if kind == "bool":
            # default=None: a flag not given leaves the config file's value, or the default;
            # a setting on by default takes its --no- form to turn it off.
            action = argparse.BooleanOptionalAction if f.default else "store_true"
            kwargs = {"action": action, "default": None}
        else:
            kwargs = {"type": _TYPES[kind], "metavar": f.metadata["metavar"]}
            choices = f.metadata["choices"] or (f.name in CHOICES and CHOICES[f.name]())
            if choices:
                kwargs = {"choices": choices}
        # The seed's spelling (--num_steps) and the dashed one (--num-steps) both work.
        flags = [f"--{f.name}", f"--{f.name.replace('_', '-')}"]
        p.add_argument(*dict.fromkeys(flags), dest=f.name, help=help_text, **kwargs)
    p.add_argument(
        "--config",
        metavar="FILE.toml",
        help="read flags from a TOML file (same names); flags on the command line win",
    )
    p.add_argument("--version", action=_Version)
    return p


_TYPES = {"int": int, "float": float, "str": str}
# The choices a setting takes that Config does not know: the families say which models exist
# (asked when the parser is built: a family may be registered after this module is imported).
CHOICES = {"model": lambda: tuple(families.FAMILIES)}

MODEL_COMMANDS = ("predict", "evaluate")
UNSEEN_LEVELS = ("error", "reference")  # predict's and evaluate's --unseen_levels


def build_model_parser(command: str) -> argparse.ArgumentParser:
    """The flags of `hvd-linreg predict` or `hvd-linreg evaluate`."""
    p = _Parser(
        prog=f"hvd-linreg {command}",
        description="Apply a model that 'hvd-linreg --export DIR' wrote to a data file: "
        + (
            "write its predictions, one per row, in the file's order."
            if command == "predict"
            else "print its scores against the file's target column (a linear model's MSE, "
            "RMSE, MAE and R²; a logistic one's log-loss, accuracy and ROC AUC)."
        )
        + " Launch with horovodrun or mpirun to share the rows among ranks.",
        allow_abbrev=False,
    )
    p.add_argument("--model", required=True, metavar="DIR", help="the --export directory")
    p.add_argument(
        "--data",
        required=True,
        metavar="PATH",
        help="a data file as training reads it, with the model's features "
        + ("(the target column may be there or not)" if command == "predict" else "and target"),
    )
    if command == "predict":
        p.add_argument(
            "--out",
            required=True,
            metavar="FILE",
            help="rank 0 writes the predictions here: .npy (float64) or .csv (header 'prediction')",
        )
        p.add_argument(
            "--threshold",
            type=float,
            metavar="T",
            help="a classifier (--model logistic): write the class, 1 where the probability "
            "is above T and 0 elsewhere, instead of the probability",
        )
        p.add_argument(
            "--keep_columns",
            "--keep-columns",
            metavar="A,B",
            help="copy these columns of --data (an ID, say) beside each prediction, as the file "
            "writes them, in its row order (--out .csv)",
        )
    else:
        p.add_argument(
            "--metrics_json",
            "--metrics-json",
            metavar="PATH",
            help="rank 0 writes the scores here as JSON",
        )
    p.add_argument(
        "--unseen_levels",
        "--unseen-levels",
        choices=UNSEEN_LEVELS,
        default="error",
        help="a categorical column's value that the model was not fitted with: error names its "
        "line; reference takes it as the reference level (its dummies all 0, glum's "
        'cat_missing_method="zero")',
    )
    return p


def run_model_command(command: str, argv: list[str]) -> int:
    args = build_model_parser(command).parse_args(argv)
    check_host_name()
    quiet_tensorflow()
    # Each checks the model and data first and starts no TensorFlow: a model of K classes
    # (--model multinomial) is applied by its own module
    from hvd_linreg.model_file import export

    if export.load(args.model).classes is not None:
        from hvd_linreg.model_file import multinomial_model as apply
    else:
        from hvd_linreg.model_file import predict as apply
    if command == "predict":
        return apply.predict(
            args.model, args.data, args.out, args.threshold, args.keep_columns, args.unseen_levels
        )
    return apply.evaluate(args.model, args.data, args.metrics_json, args.unseen_levels)


def parse_config(argv: list[str] | None = None) -> Config:
    args = vars(build_parser().parse_args(argv))
    path = args.pop("config")
    from_file = read_config_file(path) if path else {}
    given = {k: v for k, v in args.items() if v is not None}
    cfg = Config(**{**from_file, **given})
    families.for_config(cfg)  # the model, link and power, checked before anything starts
    return cfg


def read_config_file(path: str) -> dict:
    """A TOML file's keys, checked against the flags' names (dashes allowed)."""
    import tomllib

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
        if argv[:1] and argv[0] in MODEL_COMMANDS:
            return run_model_command(argv[0], argv[1:])
        cfg = parse_config(argv)
        check_host_name()  # a bad host name would crash Horovod: refuse it before it starts
        check_elastic_launch(cfg.elastic)
        if cfg.elastic:
            from hvd_linreg.elastic import run
        else:
            from hvd_linreg.pipeline import run
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
        if not is_collective_failure(e):
            raise  # a bug: keep the traceback
        # Another rank died or stalled and Horovod shut down: say so in one line, not a
        # TensorFlow traceback on every rank.
        return _fail(f"hvd-linreg: error: the job lost a rank ({_why(e)})", 1)


def _why(e: Exception) -> str:
    """The line of a failed collective's error that says why: TensorFlow's first line is often
    only "Graph execution error:", and the lines naming the op's graph node ("Detected at node",
    "[[{{node ...}}]]") say where; Horovod's own line says more."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    lines = [line for line in lines if "node " not in line] or lines
    detail = next((line for line in lines if "Horovod" in line), None)
    return (detail or (lines[0] if lines else type(e).__name__))[:300]


def _fail(message: str, code: int, error: BaseException | None = None) -> int:
    if speaks_for(error):
        say(message, stream=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
