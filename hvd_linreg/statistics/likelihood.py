"""Maximum likelihood's statistics of an IRLS fit, as statsmodels' GLM reports them: Wald
standard errors from the inverse Fisher information (times the scale where it is estimated),
z and p values, the log-likelihood with AIC and BIC, the deviance, the intercept-only
model's, and McFadden's pseudo-R²."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hvd_linreg.families.coefficients import vec
from hvd_linreg.solvers.irls import Fit
from hvd_linreg.statistics.table import (
    INTERCEPT,
    NO_INTERCEPT,
    SHOWN_COEFFICIENTS,
    cell,
    coefficient_lines,
    robust_errors,
)


@dataclass(frozen=True)
class Coefficient:
    name: str  # the feature's column name, w[j], or b
    estimate: float
    std_error: float | None
    z: float | None
    p: float | None  # two-sided: P(|Z| > |z|) for a standard normal Z


@dataclass(frozen=True)
class Statistics:
    coefficients: list[Coefficient]  # w[0] ... w[F-1], then b
    log_likelihood: float | None  # None where the density has no closed form (Tweedie)
    null_log_likelihood: float | None  # of the model with the bias alone
    pseudo_r2: float | None  # McFadden's: 1 - log_likelihood / null_log_likelihood
    deviance: float
    null_deviance: float | None
    pearson_chi2: float  # Σ w (y - μ)² / V(μ)
    scale: float  # the dispersion φ: 1, or Pearson's χ² / dof
    aic: float | None  # -2 log-likelihood + 2 coefficients, as statsmodels' GLM
    dof: int  # residual degrees of freedom: rows of weight > 0 less the coefficients
    method: str  # "Newton" (a canonical link) or "Fisher scoring"
    iterations: int
    gradient_norm: float
    undefined: dict[str, str] = field(default_factory=dict)  # statistic -> why it is None
    cov_type: str = "nonrobust"  # the standard errors' (--cov_type)
    bic: float | None = None  # -2 log-likelihood + log(N) coefficients: statsmodels' bic_llf
    clusters: int | None = None  # --cov_type cluster: how many
    converged: bool = True  # False: IRLS stopped at --max_iter (irls.Fit.converged)

    def as_json(self) -> dict:
        return {
            "log_likelihood": self.log_likelihood,
            "null_log_likelihood": self.null_log_likelihood,
            "pseudo_r2": self.pseudo_r2,
            "deviance": self.deviance,
            "null_deviance": self.null_deviance,
            "pearson_chi2": self.pearson_chi2,
            "scale": self.scale,
            "aic": self.aic,
            "bic": self.bic,
            "dof": self.dof,
            "iterations": self.iterations,
            "converged": self.converged,
            "gradient_norm": self.gradient_norm,
            "cov_type": self.cov_type,
            "clusters": self.clusters,
            "coefficients": [vars(c) for c in self.coefficients],
            "undefined": self.undefined,
        }

    def table(self, limit: int | None = SHOWN_COEFFICIENTS) -> list[str]:
        """The fit statistics and coefficient table that the run's summary ends with: every
        coefficient up to limit (None: every one)."""
        # For a 0/1 target the deviance is -2 x the log-likelihood: it says nothing more.
        ll = self.log_likelihood
        binary = ll is not None and abs(self.deviance + 2 * ll) <= 1e-9 * max(abs(self.deviance), 1)
        deviance = (
            ""
            if binary
            else f", deviance {self.deviance:.6g}, null deviance "
            f"{cell(self.null_deviance, '.6g')}, Pearson χ² {self.pearson_chi2:.6g}, scale "
            f"{self.scale:.6g}"
        )
        first = (
            f"Statistics of the exact optimum: log-likelihood {cell(ll, '.6g')}, AIC "
            f"{cell(self.aic, '.6g')}, BIC {cell(self.bic, '.6g')}, "
            f"null log-likelihood {cell(self.null_log_likelihood, '.6g')}, McFadden's "
            f"pseudo-R² {cell(self.pseudo_r2, '.6g')}{deviance}; {self.method}: "
            f"{self.iterations} iteration{'s' * (self.iterations != 1)}"
            f"{'' if self.converged else ' (did not converge: --max_iter)'}, gradient norm "
            f"{self.gradient_norm:.3g}"
        )
        if self.cov_type != "nonrobust":
            first += f"; {robust_errors(self.cov_type, self.clusters)}"
        rows = [(c.name, c.estimate, c.std_error, c.z, c.p) for c in self.coefficients]
        return [first, *coefficient_lines(rows, "z", self.undefined, limit)]


def describe(fit: Fit, feature_names: tuple[str, ...] | None = None) -> Statistics:
    """The statistics of the IRLS optimum; each w is named by its column where the data names
    them, else w[j]."""
    n, k, params = fit.count, len(fit.params) - (not fit.factor.centred), vec(fit.params)
    names = [*(feature_names or (f"w[{j}]" for j in range(len(params) - 1))), INTERCEPT]
    undefined: dict[str, str] = {} if fit.factor.centred else {INTERCEPT: NO_INTERCEPT}
    ll, null = fit.log_likelihood, fit.null_log_likelihood
    if not math.isfinite(ll):
        ll = null = None
        for name in ("log_likelihood", "null_log_likelihood", "pseudo_r2", "aic", "bic"):
            undefined[name] = "the family's density has no closed form; see the deviance"
    elif null is None or null == 0:
        undefined["null_log_likelihood"] = undefined["pseudo_r2"] = "the target is constant"
        null = None
    if fit.null_deviance is None:
        undefined["null_deviance"] = "the target is constant"
    pseudo_r2 = None if null is None else 1.0 - ll / null
    aic = None if ll is None else -2.0 * ll + 2.0 * k
    bic = None if ll is None else -2.0 * ll + math.log(n) * k
    figures = (ll, null, pseudo_r2, fit.deviance, fit.null_deviance, fit.pearson, fit.scale)
    figures += (aic, n - k)
    fitting = (fit.method, fit.iterations, fit.gradient_norm)
    why, variance = None, None
    if fit.penalty.penalized:
        why = "a penalised fit (--l2 > 0): maximum likelihood's errors do not apply"
    elif n <= k:
        why = f"{n} rows for {k} coefficients"
    elif fit.robust is None:
        variance = fit.factor.inverse_diagonal()
        if variance is None:
            why = fit.factor.why_no_errors()
    if why is not None:
        for name in ("std_error", "z", "p"):
            undefined[name] = why
        estimates = [Coefficient(nm, v, None, None, None) for nm, v in zip(names, params.tolist())]
        return Statistics(
            estimates, *figures, *fitting, undefined, bic=bic, converged=fit.converged
        )
    # Var(θ) = φ (AᵀWA)⁻¹, A = [X 1]: from the factor of the centred √W X, as least squares'
    # Var(b) = φ (1/ΣW + x̄ᵀ (XcᵀWXc)⁻¹ x̄).
    if fit.robust is not None:  # --cov_type HC0/HC1: the sandwich's
        std_error = np.sqrt(np.diag(fit.robust))
    else:
        std_error = np.sqrt(fit.scale * variance)
    z = params / std_error
    p = [math.erfc(abs(v) / math.sqrt(2.0)) for v in z.tolist()]
    columns = zip(names, params.tolist(), std_error.tolist(), z.tolist(), p)
    coefficients = [Coefficient(*c) for c in columns]
    if not fit.factor.centred:  # b is held at 0: no statistics
        coefficients[-1] = Coefficient(INTERCEPT, 0.0, None, None, None)
    return Statistics(
        coefficients, *figures, *fitting, undefined, fit.cov_type, bic, fit.clusters, fit.converged
    )
