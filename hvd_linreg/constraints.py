"""Each setting's own constraint, and setting(), which declares a Config field with its help
and its constraint: the parts of config.py that know no setting in particular; and the
elastic net's checks across its settings (check_penalty)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import field
from typing import Any

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


def check_penalty(cfg: Any) -> None:
    """The elastic net is the exact solver's, on its own: no second penalty, no standard
    errors, and cross-validation by one of --cv and --fold_column."""
    if cfg.cv is not None and cfg.fold_column is not None:
        raise UsageError("--cv and --fold_column both choose the folds: give one of them")
    folded = cfg.cv is not None or cfg.fold_column is not None
    for flag, value, default in (
        ("--select", cfg.select, "min"),
        ("--fold_alpha", cfg.fold_alpha, "same"),
    ):
        if value != default and not folded:
            raise UsageError(
                f"{flag} {value} is for cross-validated strengths: it needs --cv or --fold_column"
            )
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
