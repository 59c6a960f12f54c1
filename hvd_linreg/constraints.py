"""Each setting's own constraint, and setting(), which declares a Config field with its help
and its constraint: the parts of config.py that know no setting in particular; and the
elastic net's checks across its settings (check_penalty)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import field
from typing import Any

import numpy as np

from hvd_linreg.errors import UsageError

# A setting's own constraint: called with the setting's name and value, raises UsageError.
Constraint = Callable[[str, Any], None]


def setting(
    default: Any,
    help: str,
    metavar: str | None = None,
    choices=None,
    check: Constraint | None = None,
) -> Any:
    """A Config field that carries its command-line help and its constraint: the one place a
    setting is declared (cli builds the parser from these; tests/test_cli.py checks the
    README's table against it; Config.__post_init__ applies each check)."""
    metadata = {"help": help, "metavar": metavar, "choices": choices, "check": check}
    return field(default=default, metadata=metadata)


def control(help: str, metavar: str) -> Any:
    """A Config field of glmnet's per-feature controls (per_feature's form), None by default."""
    return setting(None, help, metavar, check=per_feature)


def positive_int(name: str, value: Any) -> None:
    if not _is_int(value) or value <= 0:
        raise UsageError(f"--{name} must be a positive whole number, got {value!r}")


def int_from_0(name: str, value: Any) -> None:
    if not _is_int(value) or value < 0:
        raise UsageError(f"--{name} must be a whole number >= 0, got {value!r}")


def positive_finite(name: str, value: Any) -> None:
    if not _is_number(value) or not math.isfinite(value):
        raise UsageError(f"--{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise UsageError(f"--{name} must be > 0, got {value!r}")


def finite_from_0(name: str, value: Any) -> None:
    if not _is_number(value) or not 0 <= value < math.inf:
        raise UsageError(f"--{name} must be a finite number >= 0, got {value!r}")


def fraction(name: str, value: Any) -> None:
    """A share of something that must keep some of it: in [0, 1)."""
    if not _is_number(value) or not 0 <= value < 1:
        raise UsageError(f"--{name} must be a number in [0, 1), got {value!r}")


def unit_interval(name: str, value: Any) -> None:
    """A mixing share: in [0, 1]."""
    if not _is_number(value) or not 0 <= value <= 1:
        raise UsageError(f"--{name} must be a number in [0, 1], got {value!r}")


def open_unit_interval(name: str, value: Any) -> None:
    """A ratio below 1 of something that stays positive: in (0, 1)."""
    if not _is_number(value) or not 0 < value < 1:
        raise UsageError(f"--{name} must be a number in (0, 1), got {value!r}")


def folds(name: str, value: Any) -> None:
    if not _is_int(value) or value < 2:
        raise UsageError(f"--{name} must be a whole number of folds >= 2, got {value!r}")


def strengths(name: str, value: Any) -> None:
    """The elastic net's strength: a finite number >= 0, or (from Python) a non-empty list of
    them, each fitted in turn."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values or not all(_is_number(v) and 0 <= v < math.inf for v in values):
        raise UsageError(
            f"--{name} must be a finite number >= 0, got {value!r} (from Python, also a list "
            "of them)"
        )


def between_1_and_2(name: str, value: Any) -> None:
    """The compound Poisson-Gamma's power: strictly between 1 and 2."""
    if not _is_number(value) or not 1 < value < 2:
        raise UsageError(f"--{name} must be a number between 1 and 2 (exclusive), got {value!r}")


def optional(check: Constraint) -> Constraint:
    """The check, for a setting that None leaves to a default worked out later."""

    def unless_none(name: str, value: Any) -> None:
        if value is not None:
            check(name, value)

    return unless_none


def one_of(choices: Collection[str]) -> Constraint:
    """A choice among these, for settings that a config file gives past argparse's choices."""

    def among(name: str, value: Any) -> None:
        if value not in choices:
            raise UsageError(f"--{name} must be one of {', '.join(choices)}, got {value!r}")

    return among


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def per_feature(name: str, value: Any) -> None:
    """The form of --penalty_factor, --exclude, --lower_limits and --upper_limits, before any
    row is read: NAME=V,... or a number (limits), names (exclude); from Python also a mapping
    or a list (solvers/path_controls.py resolves them against the features)."""
    if value is None:
        return
    if name == "exclude":
        feature_names(value, name)
        return
    if isinstance(value, str):
        assignments(value, name)
    elif isinstance(value, Mapping):
        for key, v in value.items():
            number(v, name, key)
    elif isinstance(value, Sequence) or isinstance(value, np.ndarray):
        for v in value:
            number(v, name, None)
    else:
        number(value, name, None)


def feature_names(value, flag: str) -> list:
    if isinstance(value, str):
        out = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, (Sequence, np.ndarray)):
        out = list(value)
    else:
        raise UsageError(f"--{flag} takes feature names, NAME,NAME,..., got {value!r}")
    if not out:
        raise UsageError(f"--{flag} takes feature names, NAME,NAME,..., got {value!r}")
    return out


def assignments(text: str, flag: str) -> dict[str, float] | float:
    """NAME=V,NAME=V,... or (limits) one number for every feature."""
    try:
        return float(text)
    except ValueError:
        pass
    out = {}
    for part in text.split(","):
        key, sep, v = part.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--{flag} takes NAME=VALUE,NAME=VALUE,... (a feature's or categorical "
                f"column's name and a number), got {part!r}"
            )
        try:
            out[key.strip()] = float(v)
        except ValueError:
            raise UsageError(f"--{flag}: {key.strip()}={v!r} is not a number") from None
    return out


def number(v, flag: str, key) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        where = f" for {key}" if key is not None else ""
        raise UsageError(f"--{flag} must be numbers, got {v!r}{where}")
    return float(v)


def check_penalty(cfg: Any) -> None:
    """The elastic net is the exact solver's, on its own: no second penalty, no standard
    errors, and cross-validation by one of --cv and --fold_column."""
    if cfg.cv is not None and cfg.fold_column is not None:
        raise UsageError("--cv and --fold_column both choose the folds: give one of them")
    folded = cfg.cv is not None or cfg.fold_column is not None
    for flag, value, default in (
        ("--select", cfg.select, "min"),
        ("--fold_alpha", cfg.fold_alpha, "same"),
        ("--type_measure", cfg.type_measure, "deviance"),
    ):
        if value != default and not folded:
            raise UsageError(
                f"{flag} {value} is for cross-validated strengths: it needs --cv or --fold_column"
            )
    _check_controls(cfg)
    if not cfg.penalized:
        return
    given = [
        flag
        for flag, value in (
            ("--alpha", cfg.alpha),
            ("--l1_ratio", cfg.l1_ratio),
            ("--cv", cfg.cv),
            ("--fold_column", cfg.fold_column),
        )
        if value is not None
    ]
    if cfg.no_intercept:
        raise UsageError(
            f"--no_intercept is not fitted with the elastic net of {', '.join(given)}: its "
            "path always fits b (a ridge penalty, --l2, fits without it)"
        )
    if cfg.solver != "exact":
        l1 = ", with L1 (--l1_ratio above 0)," if cfg.penalty_l1_ratio > 0 else ""
        raise UsageError(
            f"{', '.join(given)} ask for the elastic net{l1} which only --solver exact "
            "fits; SGD takes a ridge penalty by --l2"
        )
    if cfg.l2 > 0:
        raise UsageError(
            f"--l2 and {given[0]} are two penalties: give one (--l2 LAMBDA is --alpha "
            "2 LAMBDA / (the family's loss scale) with --l1_ratio 0 --no-standardize; "
            "docs/models.md, Elastic net)"
        )
    if cfg.cov_type != "nonrobust":
        raise UsageError(
            f"--cov_type {cfg.cov_type} is for an unpenalized fit: a penalized fit has no "
            "standard errors"
        )


def _check_controls(cfg: Any) -> None:
    """glmnet's controls are the elastic net's, and each measure is for its kind of target."""
    controls = [
        f"--{name}"
        for name in ("penalty_factor", "exclude", "lower_limits", "upper_limits", "relax_gamma")
        if getattr(cfg, name) is not None
    ] + (["--relax"] if cfg.relax else [])
    if cfg.relax_gamma is not None and not cfg.relax:
        raise UsageError("--relax_gamma is the relaxed lasso's blend: it needs --relax")
    measure, classes = cfg.type_measure, ("logistic", "binomial", "multinomial")
    if (measure == "class" and cfg.model not in classes) or (
        measure == "auc" and cfg.model not in classes[:2]
    ):
        which, models = (
            ("a target of classes", "logistic, binomial or multinomial")
            if measure == "class"
            else ("a two-level target", "logistic or binomial")
        )
        raise UsageError(
            f"--type_measure {measure} is for {which} (--model {models}), not --model "
            f"{cfg.model}: choose deviance, mse or mae"
        )
    if controls and not cfg.penalized:
        raise UsageError(
            f"{', '.join(controls)} control the elastic net: give --alpha, --l1_ratio, --cv "
            "or --fold_column with it (--solver exact)"
        )


def check_steps(cfg: Any) -> None:
    """Checkpoints and log lines fall between updates, never inside an accumulation."""
    k = cfg.backward_passes_per_step
    if cfg.checkpoint_every % k or cfg.log_every % k:
        raise UsageError(
            f"--checkpoint_every and --log_every must be multiples of "
            f"--backward_passes_per_step {k}, so that no step is cut in two"
        )


def check_elastic(cfg: Any) -> None:
    """What a reset cannot carry over: a rate scaled by the rank count, gradients
    accumulated over several passes, and nothing to carry for the exact solver."""
    if not cfg.elastic:
        if cfg.commit_every is not None:
            raise UsageError("--commit_every is for --elastic runs")
        return
    for flag, conflicts in (
        ("--scale_lr", cfg.scale_lr),
        ("--backward_passes_per_step above 1", cfg.backward_passes_per_step > 1),
        ("--solver exact", cfg.solver == "exact"),
    ):
        if conflicts:
            raise UsageError(f"--elastic cannot be combined with {flag} (README, Elastic)")


def check_iterations(cfg: Any) -> None:
    """--tol and --max_iter stop the exact solver's iterations, --start is where they begin:
    SGD runs --num_steps from its seed's draw, the elastic net's path from its null model."""
    if cfg.start is not None and (cfg.solver != "exact" or cfg.penalized):
        raise UsageError(
            "--start is where --solver exact's IRLS or Newton's method begins: "
            + (
                "the elastic net's path starts from its largest strength's null model"
                if cfg.penalized
                else "SGD starts from its seed's draw, or resumes from --checkpoint_dir"
            )
        )
    if cfg.solver != "exact":
        for flag, value in (("--tol", cfg.tol), ("--max_iter", cfg.max_iter)):
            if value is not None:
                raise UsageError(
                    f"{flag} is for --solver exact's iterations: SGD runs --num_steps steps"
                )


def check_columns(cfg: Any) -> None:
    """A file brings its own sizes, and only a file has columns to name."""
    _check_formula(cfg)
    if cfg.data is not None:
        for name in ("num_samples", "num_features"):
            if getattr(cfg, name) is not None:
                raise UsageError(f"--{name} cannot be combined with --data: it comes from the file")
    else:
        if cfg.missing != "error":
            raise UsageError(
                f"--missing {cfg.missing} is for the rows of --data; synthetic rows have "
                "no missing values"
            )
        for flag, value in (
            ("--target", cfg.target),
            ("--features", cfg.features),
            ("--categorical", cfg.categorical),
            *_carried_flags(cfg),
            ("--formula", cfg.formula),
        ):
            if value is not None:
                raise UsageError(
                    f"{flag} names columns of a CSV or Parquet file, so it needs --data"
                )
    _check_carried(cfg)


def _check_carried(cfg: Any) -> None:
    """--weights ... --groups: one column each, no two the same."""
    named = [(flag, name) for flag, name in _carried_flags(cfg) if name is not None]
    for flag, name in named:
        if not name.strip() or "," in name:
            raise UsageError(f"{flag} takes one column name, got {name!r}")
        for other, theirs in named:
            if other < flag and theirs == name:
                raise UsageError(f"{other} and {flag} name the same column {name!r}")
    if cfg.groups is not None and cfg.cov_type != "cluster":
        raise UsageError("--groups is for --cov_type cluster: it names each row's cluster")
    if cfg.cov_type == "cluster" and cfg.groups is None and cfg.data is not None:
        raise UsageError("--cov_type cluster needs --groups COL, the column of each row's cluster")
    for flag, value in (("--features", cfg.features), ("--categorical", cfg.categorical)):
        if value is not None:
            names = column_names(value) if isinstance(value, str) else ()
            if not names or not all(names) or len(set(names)) < len(names):
                raise UsageError(
                    f"{flag} takes distinct column names separated by commas, got {value!r}"
                )


def _carried_flags(cfg: Any) -> tuple[tuple[str, str | None], ...]:
    """The flags of the columns read beside the features and the target, with their values."""
    return (
        ("--weights", cfg.weights),
        ("--offset", cfg.offset),
        ("--exposure", cfg.exposure),
        ("--fold_column", cfg.fold_column),
        ("--groups", cfg.groups),
    )


def _check_formula(cfg: Any) -> None:
    """--formula names the features, the target and their levels itself."""
    if cfg.formula is None:
        return
    for flag, value in (
        ("--features", cfg.features),
        ("--target", cfg.target),
        ("--categorical", cfg.categorical),
    ):
        if value is not None:
            raise UsageError(
                f"--formula names the target and the features, and C() their levels: give it "
                f"without {flag}"
            )
    if cfg.elastic:
        raise UsageError(
            "--elastic reads --data's columns as --features names them: --formula is for plain runs"
        )


def column_names(value: str) -> tuple[str, ...]:
    """A comma-separated list of column names."""
    return tuple(name.strip() for name in value.split(","))
