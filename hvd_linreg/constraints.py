"""Each setting's own constraint, and setting(), which declares a Config field with its help
and its constraint: the parts of config.py that know no setting in particular."""

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
