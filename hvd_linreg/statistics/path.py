"""What a penalized fit reports: the path as a table (strength, non-zero coefficients, share of
the deviance explained, the cross-validated deviance), the chosen model's coefficients by name,
and the JSON's path, cv and passes. A penalized fit has no standard errors or p-values: the
usual ones ignore the selection and the shrinkage, and glmnet, scikit-learn and glum give none
either."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hvd_linreg.families.coefficients import vec
from hvd_linreg.solvers.path_fit import PathFit
from hvd_linreg.statistics.table import INTERCEPT

NO_ERRORS = (
    "no standard errors or p-values: a penalized fit has none that mean what they would "
    "without the penalty (refit the chosen features unpenalized for them)"
)


@dataclass(frozen=True)
class PathStatistics:
    fit: PathFit
    names: tuple[str, ...]

    @property
    def chosen(self) -> str:
        return chosen(self.fit)

    def as_json(self) -> dict:
        fit = self.fit
        return {
            **chosen_json(fit),
            "coefficients": [
                {"name": name, "estimate": float(value)}
                for name, value in zip(self.names, vec(fit.params))
            ],
            "undefined": {"std_error": NO_ERRORS},
        }

    def sections(self) -> dict:
        """The metrics JSON's path, cv and passes."""
        fit = self.fit
        return {
            "path": {
                "alpha": fit.alphas.tolist(),
                "w": fit.coefficients[:, :-1].tolist(),
                "b": fit.coefficients[:, -1].tolist(),
                "deviance": fit.deviance.tolist(),
                "dev_ratio": fit.dev_ratio.tolist(),
                "nonzero": fit.nonzero.tolist(),
                "chosen": fit.index,
            },
            "cv": cv_section(fit),
            "relaxed": relaxed_section(fit),
            "passes": fit.passes,
            "ended": fit.ended,
        }

    def table(self, limit: int | None = None) -> list[str]:
        """The path, then the chosen model's every coefficient (limit: as the other tables
        take it; a penalized model's are listed whole)."""
        fit = self.fit
        lines = path_lines(fit, "elastic net")
        width = max(12, 1 + max(len(name) for name in self.names))
        relaxed = "" if fit.gamma is None else f", relaxed gamma {fit.gamma:g}"
        lines += [
            f"  chosen: alpha {fit.alpha:.6g}{relaxed}, {self.chosen}",
            f"  {'coefficient':<{width}}{'estimate':>14}",
            *(f"  {name:<{width}}{v:>14.6g}" for name, v in zip(self.names, vec(fit.params))),
            f"  {NO_ERRORS}",
        ]
        return lines


def relaxed_section(fit, w=None, b=None) -> dict | None:
    """The metrics JSON's relaxed lasso (--relax): the relaxed fits along the path (w and b,
    as the path's are laid out; by default a path of one class's), and with folds each
    blend's cross-validated mean and standard error and cv.glmnet's choices."""
    r = getattr(fit, "relaxed", None)
    if r is None:
        return None
    out = {
        "gamma": r.gammas.tolist(),
        "w": (r.coefficients[:, :-1] if w is None else w).tolist(),
        "b": (r.coefficients[:, -1] if b is None else b).tolist(),
        "chosen_gamma": fit.gamma,
    }
    if r.mean is not None:
        out |= {
            "mean": [_numbers(m) for m in r.mean],
            "se": [_numbers(m) for m in r.se],
            "gamma_min": r.gamma_min,
            "alpha_min": float(fit.alphas[r.index_min]),
            "gamma_1se": r.gamma_1se,
            "alpha_1se": float(fit.alphas[r.index_1se]),
        }
    return out


def chosen(fit) -> str:
    """How a path's reported strength was chosen."""
    if fit.settings.alphas is not None:
        return "as given (--alpha)"
    if fit.cv is None:
        return "the path's last: no cross-validation (--cv, --fold_column) to choose"
    return f"--select {fit.settings.select}, by {len(fit.cv.weights)}-fold cross-validation"


def chosen_json(fit) -> dict:
    """The JSON's statistics of a path's chosen strength, but its coefficients."""
    return {
        "method": "elastic net",
        "alpha": fit.alpha,
        "l1_ratio": fit.settings.l1_ratio,
        "standardize": fit.settings.standardize,
        "deviance": float(fit.deviance[fit.index]),
        "null_deviance": fit.null_deviance,
        "dev_ratio": float(fit.dev_ratio[fit.index]),
        "converged": True,  # a strength that does not converge ends the run
    }


def cv_section(fit) -> dict | None:
    """The metrics JSON's cv: cv.glmnet's figures and choices (None without folds)."""
    cv = fit.cv
    if cv is None:
        return None
    return {
        "folds": len(cv.weights),
        "measure": cv.measure,
        "mean": _numbers(cv.mean),
        "se": _numbers(cv.se),
        "alpha_min": float(fit.alphas[cv.index_min]),
        "alpha_1se": float(fit.alphas[cv.index_1se]),
        "fold_weights": cv.weights.tolist(),
    }


def path_lines(fit, what: str) -> list[str]:
    """The path as the summary shows it: a line per strength, its non-zero features, the
    deviance explained, and the cross-validated deviance with the two choices marked."""
    cv, s = fit.cv, fit.settings
    scaled = "standardized" if s.standardize else "as they are"
    lines = [
        f"  {what}, l1_ratio {s.l1_ratio:g}, features {scaled}: {len(fit.alphas)} "
        f"strength{'s' * (len(fit.alphas) > 1)}, {fit.passes} pass"
        f"{'es' * (fit.passes > 1)} over the data",
        f"  {'alpha':>12}{'nonzero':>9}{'%dev':>9}"
        + (f"  cv mean {cv.measure} ± se" if cv else ""),
    ]
    for i, alpha in enumerate(fit.alphas):
        row = f"  {alpha:>12.5g}{fit.nonzero[i]:>9d}{100 * fit.dev_ratio[i]:>9.2f}"
        if cv is not None:
            row += f"  {cv.mean[i]:.6g} ± {cv.se[i]:.3g}"
            marks = [m for m, at in (("min", cv.index_min), ("1se", cv.index_1se)) if at == i]
            row += f"  <- {', '.join(marks)}" if marks else ""
        lines.append(row)
    if fit.ended:
        lines.append(f"  the path ends here: {fit.ended}")
    return lines


def describe(fit: PathFit, feature_names: tuple[str, ...] | None) -> PathStatistics:
    F = len(fit.params) - 1
    names = tuple(feature_names or (f"w[{j}]" for j in range(F)))
    return PathStatistics(fit, (*names, INTERCEPT))


def _numbers(values: np.ndarray) -> list:
    """A list for JSON: NaN (a fold with no rows) as null."""
    return [None if not np.isfinite(v) else float(v) for v in values]
