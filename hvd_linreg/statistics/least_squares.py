"""Statistics of the exact fit, as statsmodels' OLS and WLS report them: R², adjusted R², RMSE,
the F test that every w is 0 and its p value, the log-likelihood (of normal errors, WLS's with
weights), AIC, BIC, the (weighted) residual sum of squares, the condition number, and each
coefficient's standard error, t value and two-sided p value. A statistic the fit does not
define is None, with the reason in Statistics.undefined: never a number that means nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.families.coefficients import vec
from hvd_linreg.solvers.least_squares import Optimum, design_rank
from hvd_linreg.statistics.table import (
    INTERCEPT,
    NO_INTERCEPT,
    SHOWN_COEFFICIENTS,
    cell,
    coefficient_lines,
    robust_errors,
    two_sided_p,
)


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
    clusters: int | None = None  # --cov_type cluster: G (t and F take G - 1 degrees of freedom)
    rss: float = 0.0  # Σ w (y - ŷ)²: the residual sum of squares, weighted where rows are
    f_value: float | None = None  # every w = 0: (ESS / F) / (RSS / dof); a Wald F when robust
    f_p: float | None = None
    log_likelihood: float | None = None  # of independent normal errors of variance σ² / w
    aic: float | None = None  # -2 log-likelihood + 2 (F + 1)
    bic: float | None = None  # -2 log-likelihood + log(N) (F + 1)
    condition_number: float | None = None  # √(λmax / λmin) of AᵀWA, A = [X 1], as statsmodels

    def as_json(self) -> dict:
        return {
            "r2": self.r2,
            "adjusted_r2": self.adjusted_r2,
            "rmse": self.rmse,
            "dof": self.dof,
            "rss": self.rss,
            "f_value": self.f_value,
            "f_p": self.f_p,
            "log_likelihood": self.log_likelihood,
            "aic": self.aic,
            "bic": self.bic,
            "condition_number": self.condition_number,
            "cov_type": self.cov_type,
            "clusters": self.clusters,
            "converged": True,  # one factorisation: nothing to iterate
            "coefficients": [vars(c) for c in self.coefficients],
            "undefined": self.undefined,
        }

    def table(self, limit: int | None = SHOWN_COEFFICIENTS) -> list[str]:
        """The fit statistics and coefficient table that the run's summary ends with: every
        coefficient up to limit (None: every one)."""
        dof = "" if self.dof is None else f", {self.dof} residual degrees of freedom"
        first = (
            f"Statistics of the exact optimum: R² {cell(self.r2, '.6g')}, adjusted R² "
            f"{cell(self.adjusted_r2, '.6g')}, RMSE {self.rmse:.6g}{dof}"
        )
        if self.cov_type != "nonrobust":
            first += f"; {robust_errors(self.cov_type, self.clusters)}"
        second = (
            f"  F {cell(self.f_value, '.6g')} (p {cell(self.f_p, '.3g')}), log-likelihood "
            f"{cell(self.log_likelihood, '.6g')}, AIC {cell(self.aic, '.6g')}, BIC "
            f"{cell(self.bic, '.6g')}, residual sum of squares {self.rss:.6g}, condition number "
            f"{cell(self.condition_number, '.4g')}"
        )
        rows = [(c.name, c.estimate, c.std_error, c.t, c.p) for c in self.coefficients]
        return [first, second, *coefficient_lines(rows, "t", self.undefined, limit)]


def describe(optimum: Optimum, feature_names: tuple[str, ...] | None = None) -> Statistics:
    """The statistics of the exact optimum, from its R factor and its loss; each w is named by
    its column where the data names them, else w[j]."""
    factor, params = optimum.factor, vec(optimum.params)
    # k: the features and the bias, where the model has one (without: R² uncentred, b 0)
    n, k = factor.count, len(params) - (not factor.centred)
    rss, rmse = optimum.loss * n, float(np.sqrt(optimum.loss))
    names = [*(feature_names or (f"w[{j}]" for j in range(len(params) - 1))), INTERCEPT]
    undefined: dict[str, str] = {}
    if not factor.centred:
        undefined[INTERCEPT] = NO_INTERCEPT
    y_ss = factor.centred_y_ss if factor.implicit_constant else factor.y_ss
    r2 = 1.0 - rss / y_ss if y_ss > 0 else None
    if r2 is None:
        undefined["r2"] = undefined["adjusted_r2"] = "the target is constant"
    variance, why = _variance(optimum, n, k)
    whole = _whole_table(optimum, rss, undefined)
    if why is not None:
        for name in ("std_error", "t", "p", "adjusted_r2", "dof", "f_value", "f_p"):
            undefined.setdefault(name, why)
        estimates = [Coefficient(nm, v, None, None, None) for nm, v in zip(names, params.tolist())]
        return Statistics(estimates, r2, None, rmse, None, undefined, **whole)
    dof = n - k
    # Var(w) = σ² (Xcᵀ Xc)⁻¹ = σ² R⁻¹ R⁻ᵀ; b = ȳ - x̄·w, with ȳ and w uncorrelated:
    # Var(b) = σ² (1/N + x̄ᵀ (Xcᵀ Xc)⁻¹ x̄); weighted, as WLS: Xc = √W (X - x̄_w), 1/Σw.
    sigma2 = rss / dof
    fitted = params if factor.centred else params[:-1]  # no intercept: b, held at 0, has none
    if optimum.robust is not None:  # --cov_type HC0/HC1/cluster: the sandwich's
        std_error = np.sqrt(np.diag(optimum.robust))[: len(fitted)]
    else:
        std_error = np.sqrt(sigma2 * variance[: len(fitted)])
    inference = dof if optimum.clusters is None else optimum.clusters - 1  # Stata's, and
    # statsmodels' with use_t: a cluster-robust t has G - 1 degrees of freedom
    if sigma2 > 0:
        t = fitted / std_error
        p = two_sided_p(t, inference)
        columns = zip(names, fitted.tolist(), std_error.tolist(), t.tolist(), p)
    else:
        undefined["t"] = undefined["p"] = "the fit is exact (zero residuals)"
        columns = zip(names, fitted.tolist(), std_error.tolist(), [None] * k, [None] * k)
    coefficients = [Coefficient(*c) for c in columns]
    if not factor.centred:
        coefficients.append(Coefficient(INTERCEPT, 0.0, None, None, None))
    # statsmodels adjusts by n - 1 where the model has a constant, its own or implicit
    constant = 1 if factor.centred else int(factor.implicit_constant)
    adjusted = None if r2 is None else 1.0 - (1.0 - r2) * (n - constant) / dof
    whole.update(_f_test(optimum, rss, inference, undefined))
    return Statistics(
        coefficients,
        r2,
        adjusted,
        rmse,
        dof,
        undefined,
        optimum.cov_type,
        optimum.clusters,
        **whole,
    )


def _variance(optimum: Optimum, n: int, k: int) -> tuple[np.ndarray | None, str | None]:
    """diag((AᵀWA)⁻¹), what each coefficient's variance scales (None with robust errors), or
    why the fit has no standard errors."""
    if optimum.penalty.penalized:
        return None, "a ridge fit (--l2 > 0): ordinary least squares' errors do not apply"
    if n <= k:
        return None, f"{n} rows for {k} coefficients: no residual degrees of freedom"
    if optimum.dependent:
        return None, "the design is singular (features collinear or constant)"
    if optimum.robust is not None:
        return None, None
    variance = optimum.factor.inverse_diagonal()
    return variance, optimum.factor.why_no_errors() if variance is None else None


def _whole_table(optimum: Optimum, rss: float, undefined: dict) -> dict:
    """The residual sum of squares, the normal log-likelihood with AIC and BIC (statsmodels'
    OLS and WLS: -n/2 (1 + log(2π RSS / n)) + Σ log w / 2, and the design's rank as the count
    of coefficients, so a singular design has them too), and the condition number."""
    factor = optimum.factor
    k = len(optimum.params) - (not factor.centred)
    n, k = factor.count, design_rank(factor) if optimum.dependent else k
    out: dict = {"rss": rss}
    reason = None
    if optimum.penalty.penalized:
        reason = "a ridge fit (--l2 > 0): not a maximum of the likelihood"
    elif not rss > 0:
        reason = "the fit is exact (zero residuals)"
    if reason is None:
        ll = -n / 2 * (1 + math.log(2 * math.pi * rss / n)) + factor.log_weight / 2
        out.update(log_likelihood=ll, aic=-2 * ll + 2 * k, bic=-2 * ll + math.log(n) * k)
    else:
        for name in ("log_likelihood", "aic", "bic"):
            undefined.setdefault(name, reason)
    condition, why = factor.condition_number()
    if condition is not None:
        out["condition_number"] = condition
    else:
        undefined["condition_number"] = why
    return out


def _f_test(optimum: Optimum, rss: float, dof: int, undefined: dict) -> dict:
    """The F test that every w is 0: (ESS / F) / (RSS / dof), or with robust errors the Wald
    test w' V⁺ w / r on their covariance V of rank r (F, unless fewer clusters than
    coefficients), as statsmodels; p from F(r, dof) (cluster: dof G - 1)."""
    from scipy.special import fdtrc

    w, factor = vec(optimum.params[:-1]), optimum.factor
    F = len(w) - factor.implicit_constant  # the constant, implicit in the columns, not tested
    if factor.implicit_constant and optimum.robust is not None:
        undefined["f_value"] = undefined["f_p"] = (
            "the constant is implicit in the columns: the robust Wald F needs it named"
        )
        return {}
    if F == 0 or not rss > 0:
        undefined["f_value"] = undefined["f_p"] = (
            "no features to test" if F == 0 else "the fit is exact (zero residuals)"
        )
        return {}
    if optimum.robust is not None:
        cov = optimum.robust[:F, :F]
        scale = np.sqrt(np.diag(cov))  # the rank of the correlations: scale-free
        rank = int(np.linalg.matrix_rank(cov / np.outer(scale, scale)))
        # fewer clusters than coefficients leave V singular: the Wald test on the rank of V,
        # by its pseudo-inverse, as statsmodels' wald_test (which warns)
        value = float(w @ np.linalg.pinv(cov) @ w) / rank
        return {"f_value": value, "f_p": float(fdtrc(rank, dof, value))}
    total = factor.centred_y_ss if factor.implicit_constant else factor.y_ss
    value = (total - rss) / F / (rss / dof)
    return {"f_value": value, "f_p": float(fdtrc(F, dof, value))}
