"""The exact solver's accuracy problems and how they are scored: NIST's certified datasets and
designs of our own solved in rational arithmetic, the correct digits (LRE) of the tool's fit at
N ranks, and those of scikit-learn, statsmodels and SciPy on the same float64 rows. Used by
tests/test_nist.py and tests/nist_table.py (docs/statistics.md's table)."""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
from nist_strd import DATASETS, lre, rational_least_squares

from conftest import launch

JOB = Path(__file__).resolve().parent / "exact_job.py"
NO_INTERCEPT = "no_intercept"  # write()'s subdirectory of the problems fitted without one


@dataclass(frozen=True)
class Problem:
    X: np.ndarray
    y: np.ndarray
    # The exact [w..., b] ([w...] alone without an intercept): certified, or solved in rational
    # arithmetic.
    estimates: np.ndarray
    std_errors: np.ndarray
    # The exact least squares of the float64 rows themselves (rational arithmetic): all a
    # float64 solver can reach. NIST's decimals and powers rounded to float64 are another
    # problem, whose solution is some digits from the certified one on Filip and Wampler.
    rows_estimates: np.ndarray
    intercept: bool = True  # False: fitted through the origin (NoInt1, NoInt2), by all

    @property
    def digits(self) -> np.ndarray:
        """The LRE cap of each of [w..., b]: the 15 digits NIST prints, and for b what float64
        can hold of b = mean(y) - mean(x)·w once each w is rounded to its last bit: Norris's b
        is 1700 times smaller than mean(x)·w, and keeps 12.4 digits. Above that, libraries
        differ by the luck of their rounding (statsmodels' b has 13.2, the exact w rounded 12.8).
        Without an intercept, the 15 digits of each w."""
        if not self.intercept:
            return np.full(len(self.estimates), 15.0)
        w, b = self.estimates[:-1], self.estimates[-1]
        terms = float(np.abs(self.X.mean(axis=0) * w).sum())
        bias = 15.0 if b == 0 else -np.log10(np.finfo(float).eps * terms / abs(b))
        return np.append(np.full(len(w), 15.0), min(15.0, bias))


def own_designs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Designs that cost the normal equations digits: features offset far from 0, two nearly
    collinear features, and features on scales 12 orders of magnitude apart."""
    rng = np.random.default_rng(23)
    t = rng.standard_normal((120, 3))
    noise = 0.01 * rng.standard_normal(120)
    offsets = t + [1e6, -3e5, 7e4]
    near = np.c_[t[:, 0], t[:, 0] + 1e-6 * t[:, 1], t[:, 2]]
    scales = t * [1e-6, 1.0, 1e6]
    return {
        name: (X, X @ w + 3.0 + noise)
        for name, X, w in [
            ("offsets", offsets, [2.0, -1.0, 0.5]),
            ("near_collinear", near, [1.0, 1.0, -2.0]),
            ("mixed_scales", scales, [4e5, 0.3, -2e-7]),
        ]
    }


def problems() -> dict[str, Problem]:
    found = {}
    for d in DATASETS:
        X, y = d.arrays()
        rows = rows_least_squares(X, y, d.intercept)[0]
        found[d.name] = Problem(X, y, *d.certified, rows, d.intercept)
    for name, (X, y) in own_designs().items():
        estimates, errors = rows_least_squares(X, y)
        found[name] = Problem(X, y, estimates, errors, estimates)
    return found


def rows_least_squares(
    X: np.ndarray, y: np.ndarray, intercept: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The exact least squares [w..., b] ([w...] without an intercept) of these float64 rows,
    and the standard errors."""
    ones = [Fraction(1)] if intercept else []
    design = [[*map(Fraction, row), *ones] for row in X.tolist()]
    return rational_least_squares(design, list(map(Fraction, y.tolist())))


def write(problems: dict[str, Problem], directory: Path) -> None:
    """Each problem as NAME.npy, float64, the target last: the rows the libraries fit too; a
    problem without an intercept in the subdirectory NO_INTERCEPT, which exact_job.py fits
    without one."""
    (directory / NO_INTERCEPT).mkdir(exist_ok=True)
    for name, p in problems.items():
        np.save(directory / ("" if p.intercept else NO_INTERCEPT) / f"{name}.npy", np.c_[p.X, p.y])


def libraries(p: Problem) -> dict[str, tuple[float, float | None]]:
    """Each library's (coefficients' LRE, standard errors' LRE or None where it has none)."""
    import statsmodels.api as sm
    from scipy.linalg import lstsq
    from sklearn.linear_model import LinearRegression

    A = np.c_[p.X, np.ones(len(p.y))] if p.intercept else p.X
    sk = LinearRegression(fit_intercept=p.intercept).fit(p.X, p.y)
    sk_params = np.append(sk.coef_, sk.intercept_) if p.intercept else sk.coef_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels warns of the condition number
        ols = sm.OLS(p.y, A).fit(method="qr")
        errors = np.nan_to_num(ols.bse, nan=np.inf)
    return {
        "scikit-learn": (lre(sk_params, p.estimates, p.digits), None),
        "statsmodels": (lre(ols.params, p.estimates, p.digits), lre(errors, p.std_errors)),
        "scipy": (lre(lstsq(A, p.y)[0], p.estimates, p.digits), None),
    }


def fit_with_the_tool(launcher: str, size: int, directory: Path, tmp_path: Path) -> dict:
    """The tool's fits of every problem in directory at size ranks: one launch (exact_job.py)."""
    out = tmp_path / f"fits-{launcher}-{size}.json"
    run = launch(
        launcher,
        size,
        [str(directory), str(out)],
        tmp_path,
        metrics=False,
        program=(sys.executable, str(JOB)),
    )
    assert run.returncode == 0, run.output
    return {"output": run.output, **json.loads(out.read_text())}


def tool_lre(fit: dict, p: Problem) -> tuple[float, float]:
    """The worst coefficient's and the worst standard error's LRE of one of the tool's fits
    (of w alone without an intercept: b is 0, with no standard error)."""
    k = len(p.estimates)
    errors = np.array([np.nan if e is None else e for e in fit["std_errors"][:k]])
    return lre(fit["params"][:k], p.estimates, p.digits), lre(errors, p.std_errors)


def rows_lre(fit: dict, p: Problem) -> float:
    """The worst coefficient's LRE of one of the tool's fits against the exact least squares
    of the float64 rows it was given: the solver's own error, whatever the data's rounding."""
    return lre(fit["params"][: len(p.estimates)], p.rows_estimates, p.digits)
