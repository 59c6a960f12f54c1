"""Statistics of the exact fit, as an ordinary least squares package reports them: R², adjusted
R², RMSE, and each coefficient's standard error, t value and two-sided p value. A statistic the
fit does not define is None, with the reason in Statistics.undefined: never a number that means
nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.solvers.least_squares import Optimum
from hvd_linreg.statistics.table import cell, coefficient_lines, two_sided_p


@dataclass(frozen=True)
class Coefficient:
    name: str  # w[j] or b
    estimate: float
    std_error: float | None
    t: float | None
    p: float | None  # two-sided: P(|T| > |t|) for Student's t with the residual dof


@dataclass(frozen=True)
class Statistics:
    coefficients: list[Coefficient]  # w[0] ... w[F-1], then b
    r2: float | None
    adjusted_r2: float | None
    rmse: float  # sqrt(mean squared residual): the tool's loss, as a length
    dof: int | None  # residual degrees of freedom, N - F - 1
    undefined: dict[str, str] = field(default_factory=dict)  # statistic -> why it is None
    cov_type: str = "nonrobust"  # the standard errors' (--cov_type)

    def as_json(self) -> dict:
        return {
            "r2": self.r2,
            "adjusted_r2": self.adjusted_r2,
            "rmse": self.rmse,
            "dof": self.dof,
            "cov_type": self.cov_type,
            "coefficients": [vars(c) for c in self.coefficients],
            "undefined": self.undefined,
        }

    def table(self) -> list[str]:
        """The fit statistics and coefficient table that the run's summary ends with."""
        dof = "" if self.dof is None else f", {self.dof} residual degrees of freedom"
        first = (
            f"Statistics of the exact optimum: R² {cell(self.r2, '.6g')}, adjusted R² "
            f"{cell(self.adjusted_r2, '.6g')}, RMSE {self.rmse:.6g}{dof}"
        )
        if self.cov_type != "nonrobust":
            first += f"; {self.cov_type} robust standard errors"
        rows = [(c.name, c.estimate, c.std_error, c.t, c.p) for c in self.coefficients]
        return [first, *coefficient_lines(rows, "t", self.undefined)]


def describe(optimum: Optimum, feature_names: tuple[str, ...] | None = None) -> Statistics:
    """The statistics of the exact optimum, from its R factor and its loss; each w is named by
    its column where the data names them, else w[j]."""
    factor, params = optimum.factor, optimum.params
    n, k = factor.count, len(params)  # k: the features and the bias
    rss, rmse = optimum.loss * n, float(np.sqrt(optimum.loss))
    names = [*(feature_names or (f"w[{j}]" for j in range(k - 1))), "b"]
    undefined: dict[str, str] = {}
    y_ss = factor.y_ss
    r2 = 1.0 - rss / y_ss if y_ss > 0 else None
    if r2 is None:
        undefined["r2"] = undefined["adjusted_r2"] = "the target is constant"
    why = None
    if optimum.l2 > 0:
        why = "a ridge fit (--l2 > 0): ordinary least squares' errors do not apply"
    elif n <= k:
        why = f"{n} rows for {k} coefficients: no residual degrees of freedom"
    elif optimum.dependent:
        why = "the design is singular (features collinear or constant)"
    if why is not None:
        for name in ("std_error", "t", "p", "adjusted_r2", "dof"):
            undefined.setdefault(name, why)
        estimates = [Coefficient(nm, v, None, None, None) for nm, v in zip(names, params.tolist())]
        return Statistics(estimates, r2, None, rmse, None, undefined)
    dof = n - k
    # Var(w) = σ² (Xcᵀ Xc)⁻¹ = σ² R⁻¹ R⁻ᵀ; b = ȳ - x̄·w, with ȳ and w uncorrelated:
    # Var(b) = σ² (1/N + x̄ᵀ (Xcᵀ Xc)⁻¹ x̄); weighted, as WLS: Xc = √W (X - x̄_w), 1/Σw
    sigma2 = rss / dof
    if optimum.robust is not None:  # --cov_type HC0/HC1: the sandwich's
        std_error = np.sqrt(np.diag(optimum.robust))
    else:
        variance = factor.variances()
        variance[-1] += 1.0 / factor.weight  # Σ w: the rows, unweighted
        std_error = np.sqrt(sigma2 * variance)
    if sigma2 > 0:
        t = params / std_error
        columns = zip(names, params.tolist(), std_error.tolist(), t.tolist(), two_sided_p(t, dof))
    else:
        undefined["t"] = undefined["p"] = "the fit is exact (zero residuals)"
        columns = zip(names, params.tolist(), std_error.tolist(), [None] * k, [None] * k)
    adjusted = None if r2 is None else 1.0 - (1.0 - r2) * (n - 1) / dof
    coefficients = [Coefficient(*c) for c in columns]
    return Statistics(coefficients, r2, adjusted, rmse, dof, undefined, optimum.cov_type)
