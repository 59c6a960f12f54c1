"""What a penalized multinomial fit reports, as glmnet's family = "multinomial" does: the path
as a table (strength, features with a non-zero coefficient in some class, the share of the
deviance explained, the cross-validated deviance), the chosen model's coefficients, a column
per class, and the JSON's statistics, path, cv and passes. No standard errors (statistics/
path.py says why)."""

from __future__ import annotations

from dataclasses import dataclass

from hvd_linreg.data.frames import plain
from hvd_linreg.solvers.path_fit import MultinomialPathFit
from hvd_linreg.statistics.path import (
    NO_ERRORS,
    chosen,
    chosen_json,
    cv_section,
    path_lines,
    relaxed_section,
)


@dataclass(frozen=True)
class MultinomialPathStatistics:
    fit: MultinomialPathFit
    names: tuple[str, ...]  # the features', then b
    classes: list

    @property
    def chosen(self) -> str:
        return chosen(self.fit)

    def as_json(self) -> dict:
        fit = self.fit
        return {
            **chosen_json(fit),
            "coefficients": [
                {"class": plain(label), "name": name, "estimate": float(fit.params[i, k])}
                for k, label in enumerate(self.classes)
                for i, name in enumerate(self.names)
            ],
            "undefined": {"std_error": NO_ERRORS},
        }

    def sections(self) -> dict:
        """The metrics JSON's path, cv and passes; the path's w and b per strength, a list
        per class (all K), as glmnet's coef() gives them."""
        fit = self.fit
        return {
            "path": {
                "alpha": fit.alphas.tolist(),
                "w": fit.coefficients[:, :-1, :].transpose(0, 2, 1).tolist(),
                "b": fit.coefficients[:, -1, :].tolist(),
                "deviance": fit.deviance.tolist(),
                "dev_ratio": fit.dev_ratio.tolist(),
                "nonzero": fit.nonzero.tolist(),
                "chosen": fit.index,
            },
            "cv": cv_section(fit),
            "relaxed": self._relaxed(),
            "passes": fit.passes,
        }

    def _relaxed(self) -> dict | None:
        fit = self.fit
        if fit.relaxed is None:
            return None
        K = len(self.classes)
        theta = fit.relaxed.coefficients.reshape(len(fit.alphas), K, -1)  # class by class
        return relaxed_section(fit, theta[:, :, :-1], theta[:, :, -1])

    def lines(self, limit: int | None = None) -> list[str]:
        """The path, then the chosen model's coefficients, a column per class."""
        fit = self.fit
        lines = path_lines(fit, "multinomial elastic net")
        width = max(12, 1 + max(len(name) for name in self.names))
        cells = max(12, *(len(str(c)) + 2 for c in self.classes))
        shown = len(self.names) if limit is None else min(limit, len(self.names))
        relaxed = "" if fit.gamma is None else f", relaxed gamma {fit.gamma:g}"
        lines += [
            f"  chosen: alpha {fit.alpha:.6g}{relaxed}, {self.chosen}",
            f"  {'coefficient':<{width}}" + "".join(f"{str(c):>{cells}}" for c in self.classes),
        ]
        for i, name in enumerate(self.names[:shown]):
            row = "".join(f"{v:>{cells}.6g}" for v in fit.params[i])
            lines.append(f"  {name:<{width}}{row}")
        if shown < len(self.names):
            lines.append(f"  ... ({len(self.names)} in all: the JSON has every one)")
        lines.append(f"  {NO_ERRORS}")
        return lines


def describe(fit: MultinomialPathFit, names: tuple[str, ...], classes: list):
    return MultinomialPathStatistics(fit, names, classes)
