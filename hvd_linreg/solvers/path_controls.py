"""glmnet's controls around the elastic net, resolved against the features' names: each
feature's penalty factor (penalty.factor), the features kept out of the model (exclude), and
each coefficient's limits (lower.limits, upper.limits).

The settings name features as the summary does ("age", "region[T.north]", "w[3]"); a
categorical column's name stands for all its levels. From Python, a list gives one value per
feature in order (penalty factors, limits) or the features' positions (exclude).

glmnet's conventions: the factors are rescaled to sum to the number of features (an excluded
feature counting 1); a factor of 0 leaves a feature unpenalized, so that α_max is taken where
the unpenalized features are fitted; limits hold lower <= 0 <= upper, so that the null model
is within them; an excluded feature's coefficient is 0 and takes no part in α_max."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from hvd_linreg.constraints import assignments, feature_names, number
from hvd_linreg.errors import UsageError
from hvd_linreg.solvers.penalty import Penalty


@dataclass(frozen=True)
class Controls:
    """Per-feature factors, exclusions and limits; None where the setting was not given."""

    factors: np.ndarray | None = None  # (F,) rescaled to sum to F
    excluded: np.ndarray | None = None  # (F,) bool
    lower: np.ndarray | None = None  # (F,) <= 0, -inf where unbounded
    upper: np.ndarray | None = None  # (F,) >= 0, +inf where unbounded

    def limits(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Each of n coefficients' lower and upper limit, ±inf where none is given."""
        lower = np.full(n, -np.inf) if self.lower is None else self.lower
        upper = np.full(n, np.inf) if self.upper is None else self.upper
        return lower, upper

    def penalty(self, alpha: float, l1_ratio: float, scales: np.ndarray) -> Penalty:
        """The elastic net of strength α with these factors and limits (exclusion: both 0)."""
        penalty = Penalty.elastic_net(alpha, l1_ratio, scales, self.factors, self.factors)
        if self.excluded is not None and self.excluded.any():
            return self.unpenalized_within(penalty, ~self.excluded)
        if self.lower is None and self.upper is None:
            return penalty
        return penalty.bounded(self.lower, self.upper)

    def unpenalized_within(self, penalty: Penalty, free: np.ndarray) -> Penalty:
        """The penalty with the coefficients outside free held at 0, the others within their
        limits (exclusion; the null model's and a relaxed refit's features)."""
        lower, upper = self.limits(len(free))
        return penalty.bounded(np.where(free, lower, 0.0), np.where(free, upper, 0.0))

    def null_penalty(self, n: int) -> Penalty | None:
        """The null model's: the unpenalized features (factor 0, not excluded) free within
        their limits, every other held at 0. None where there are none to fit."""
        free = self.unpenalized(n)
        if not free.any():
            return None
        return self.unpenalized_within(Penalty(np.zeros(n), np.zeros(n)), free)

    def unpenalized(self, n: int) -> np.ndarray:
        """The features in the model with no penalty (a factor of 0)."""
        if self.factors is None:
            return np.zeros(n, bool)
        out = self.factors == 0
        return out & ~self.excluded if self.excluded is not None else out

    def in_alpha_max(self, scales: np.ndarray) -> np.ndarray:
        """The features whose gradient sets α_max: penalized, in the model, not constant."""
        keep = scales > 0
        if self.factors is not None:
            keep &= self.factors > 0
        if self.excluded is not None:
            keep &= ~self.excluded
        return keep

    def l1_factors(self, n: int) -> np.ndarray:
        return np.ones(n) if self.factors is None else self.factors

    @property
    def zero_limit(self) -> bool:
        """Whether a limit is 0 (non-negative coefficients, say): glmnet then ends the path
        only where the deviance explained passes 0.999 (it sets fdev to 0)."""
        return any(a is not None and (a == 0).any() for a in (self.lower, self.upper))

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.factors, self.excluded, self.lower, self.upper))


def controls_for(cfg, names: Sequence[str]) -> Controls:
    """The controls the settings give, for features of these names; a name that is no feature
    (nor a categorical column's), a negative factor, or limits on the wrong side of 0 end
    with a UsageError naming it."""
    n = len(names)
    excluded = None
    if cfg.exclude is not None:
        excluded = np.zeros(n, bool)
        for name in feature_names(cfg.exclude, "exclude"):
            excluded[_features(name, names, "exclude")] = True
        if excluded.all():
            raise UsageError("--exclude leaves no feature in the model")
    factors = None
    if cfg.penalty_factor is not None:
        factors = _per_feature(cfg.penalty_factor, names, "penalty_factor", 1.0)
        bad = [v for v in factors if not (v >= 0) or v == math.inf]
        if bad:
            raise UsageError(
                f"--penalty_factor must be finite numbers >= 0 (0 leaves a feature "
                f"unpenalized; --exclude keeps it out of the model), got {bad[0]!r}"
            )
        counted = np.where(excluded, 1.0, factors) if excluded is not None else factors
        if not counted.sum() > 0:
            raise UsageError("--penalty_factor is 0 for every feature: nothing is penalized")
        factors = factors * n / counted.sum()  # glmnet's rescaling
    lower = upper = None
    if cfg.lower_limits is not None:
        lower = _per_feature(cfg.lower_limits, names, "lower_limits", -math.inf)
        if (lower > 0).any() or np.isnan(lower).any():
            raise UsageError(_side("lower_limits", lower[~(lower <= 0)][0], "<= 0"))
    if cfg.upper_limits is not None:
        upper = _per_feature(cfg.upper_limits, names, "upper_limits", math.inf)
        if (upper < 0).any() or np.isnan(upper).any():
            raise UsageError(_side("upper_limits", upper[~(upper >= 0)][0], ">= 0"))
    return Controls(factors, excluded, lower, upper)


def _side(flag: str, value: float, side: str) -> str:
    return (
        f"--{flag} must be {side} for every feature (as glmnet's: the model with every "
        f"coefficient 0 must be within the limits), got {value:g}"
    )


def _per_feature(value, names: Sequence[str], flag: str, default: float) -> np.ndarray:
    """One number per feature from a number, a NAME=V string or mapping, or a list."""
    n = len(names)
    if isinstance(value, str):
        value = assignments(value, flag)
    if isinstance(value, Mapping):
        out = np.full(n, default)
        for key, v in value.items():
            out[_features(key, names, flag)] = number(v, flag, key)
        return out
    if isinstance(value, (Sequence, np.ndarray)):
        values = [number(v, flag, None) for v in value]
        if len(values) != n:
            raise UsageError(f"--{flag} has {len(values)} values for {n} features")
        return np.array(values, np.float64)
    return np.full(n, number(value, flag, None))


def _features(key, names: Sequence[str], flag: str) -> np.ndarray:
    """The positions of the features a name gives: itself, or a categorical column's levels
    (name[...]); from Python, an integer is a position."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if not 0 <= key < len(names):
            raise UsageError(f"--{flag}: feature {key} is out of range (0 to {len(names) - 1})")
        return np.array([int(key)])
    found = [i for i, name in enumerate(names) if name == key]
    if not found:
        found = [i for i, name in enumerate(names) if name.startswith(f"{key}[")]
    if not found:
        shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        raise UsageError(f"--{flag} names {key!r}, which is no feature (the features: {shown})")
    return np.array(found)
