"""What every fit's statistics share: the coefficient table, its cells, and Student's t."""

from __future__ import annotations

import numpy as np

SHOWN_WEIGHTS = 8  # the summary's "w:" line lists at most this many; its table lists more
# Why b has no statistics in a model without an intercept
# The intercept's name in every table, in fit()'s names and in the statistics' JSON, as
# statsmodels and patsy name it (a model file keeps w and b)
INTERCEPT = "Intercept"
NO_INTERCEPT = "the model has no intercept (--no_intercept): it is 0, not estimated"
SHOWN_COEFFICIENTS = 200  # the command line's table lists up to this many w's; fit()'s, all


def cell(value: float | None, spec: str) -> str:
    return "undefined" if value is None else format(value, spec)


def coefficient_lines(
    rows: list[tuple[str, float, float | None, float | None, float | None]],
    statistic: str,
    undefined: dict[str, str],
    limit: int | None = SHOWN_COEFFICIENTS,
) -> list[str]:
    """The coefficient table, (name, estimate, std error, test statistic, p) per row with b
    last: every w up to limit (None: every one; past it, the first limit and b, and where the
    rest are); an undefined statistic says so, and the lines below say why."""
    weights = rows[:-1]
    shown = [*weights[:limit], rows[-1]]
    width = max(12, 1 + max(len(row[0]) for row in shown))  # a name longer than 11 keeps a space
    lines = [f"  {'coefficient':<{width}}{'estimate':>14}{'std error':>14}{statistic:>11}{'p':>11}"]
    for name, estimate, std_error, stat, p in shown:
        lines.append(
            f"  {name:<{width}}{estimate:>14.6g}{cell(std_error, '.6g'):>14}"
            f"{cell(stat, '.4g'):>11}{cell(p, '.3g'):>11}"
        )
    if limit is not None and len(weights) > limit:
        lines.insert(
            -1,
            f"  ... ({len(weights)} w's in all: every one in --metrics_json, and in "
            "hvd_linreg.fit's summary())",
        )
    reasons: dict[str, list[str]] = {}
    for name, why in undefined.items():
        reasons.setdefault(why, []).append(name)
    lines += [f"  undefined: {', '.join(names)}: {why}" for why, names in reasons.items()]
    return lines


def robust_errors(cov_type: str, clusters: int | None) -> str:
    """The summary's words for robust standard errors."""
    if clusters is not None:
        return f"cluster-robust standard errors ({clusters} clusters)"
    return f"{cov_type} robust standard errors"


def two_sided_p(t: np.ndarray, dof: int) -> list[float]:
    """P(|T| > |t|) for Student's t with dof degrees of freedom: the regularised incomplete
    beta function I_x(dof/2, 1/2) at x = dof / (dof + t²). SciPy's betainc: an exact fit
    starts no TensorFlow."""
    from scipy.special import betainc

    x = dof / (dof + np.square(np.asarray(t, np.float64)))
    return np.atleast_1d(betainc(dof / 2, 0.5, x)).tolist()
