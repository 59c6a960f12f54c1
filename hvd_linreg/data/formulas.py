"""fit("y ~ x1 + np.log(x2) + C(region)", data=df): a formula, parsed and materialized by
formulaic (its language and its column names are those of statsmodels' formula API), with
every rank building the same design columns from its own rows.

Before formulaic sees a rank's rows, each variable that becomes levels is made a pandas
categorical with the levels every rank agreed on (frames.py: the union over the ranks, sorted;
a category dtype's own order): the columns of words, booleans and categories the formula
names, and the numeric ones it wraps in C(). formulaic then codes each with all of its levels,
a level no row of a rank holds included, so every rank's columns are the same. A formula
without an intercept (`- 1`) is a model without one (--no_intercept).

A stateful transform (center, scale, splines) learns its state from the rows it sees: under a
launcher each rank's would differ, so a formula with one is refused there (compute the column
in the DataFrame instead); in one process it is formulaic's own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvd_linreg.data import frames
from hvd_linreg.errors import UsageError

INTERCEPT = "Intercept"
_WRAPPED = re.compile(r"\bC\(\s*([A-Za-z_][A-Za-z_0-9]*)")  # C(name ...): levels of a number


@dataclass(frozen=True)
class Design:
    """A formula's design on this rank: its columns (the intercept left out: the tool adds
    b), its target, and how to build the same columns from new rows."""

    X: Any  # pandas DataFrame, named as statsmodels names the formula's columns
    y: Any  # pandas Series: the left side
    intercept: bool
    formula: str
    spec: Any = None  # formulaic's ModelSpec of the right side
    levels: dict | None = None  # each variable's levels: a column name -> its categories

    def new_rows(self, data) -> np.ndarray:
        """New rows' design columns, coded with the fit's levels."""
        if not hasattr(data, "columns"):
            raise UsageError(f"a model fitted from the formula {self.formula!r} takes a DataFrame")
        prepared = _as_levels(data, self.levels or {})
        matrix = _materialize(lambda: self.spec.get_model_matrix(prepared, na_action="raise"))
        return matrix.drop(columns=[INTERCEPT], errors="ignore").to_numpy(np.float64)


def design(job, formula: str, data, max_levels: int) -> Design:
    """The formula's design columns and target on this rank's rows of data, every rank's the
    same columns: levels agreed first (one allgather), then formulaic."""
    from formulaic import Formula

    if not hasattr(data, "columns"):
        raise UsageError("fit(formula, data=) takes data as a pandas DataFrame")
    try:
        parsed = Formula(formula)
    except Exception as e:  # formulaic's FormulaSyntaxError and its kin
        raise UsageError(f"the formula {formula!r} does not parse: {e}") from None
    if not hasattr(parsed, "lhs") or not len(parsed.lhs):
        raise UsageError(f"the formula {formula!r} has no left side: write it 'y ~ x1 + x2'")
    used = [c for c in data.columns if str(c) in parsed.required_variables]
    levels = _agreed_levels(job, data[used], formula, max_levels)
    error, matrices = None, None
    try:  # a rank's own rows may fail it (a missing value): every rank stops, or none
        from formulaic import model_matrix

        prepared = _as_levels(data[used], levels)
        matrices = _materialize(lambda: model_matrix(formula, prepared, na_action="raise"))
    except UsageError as e:
        error = e
    job.agree(error)
    rhs = matrices.rhs
    if rhs.model_spec.transform_state and job.size > 1:
        raise UsageError(
            f"the formula {formula!r} has a stateful transform "
            f"({', '.join(rhs.model_spec.transform_state)}), whose state each rank would learn "
            "from its own rows: compute the column in the DataFrame instead"
        )
    if matrices.lhs.shape[1] != 1:
        raise UsageError(f"the formula {formula!r} must have one column on its left side")
    y = matrices.lhs.iloc[:, 0]
    intercept = INTERCEPT in rhs.columns
    X = rhs.drop(columns=[INTERCEPT]) if intercept else rhs
    return Design(X, y, intercept, formula, rhs.model_spec, levels)


def _agreed_levels(job, data, formula: str, max_levels: int) -> dict:
    """Every variable's levels, agreed by the ranks: the columns of words, booleans and
    categories (frames.agree), and the numeric columns the formula wraps in C()."""
    levels = frames.agree(job, data, max_levels)
    wrapped = [c for c in dict.fromkeys(_WRAPPED.findall(formula)) if c in data.columns]
    numeric = [c for c in wrapped if c not in levels]
    mine = {c: sorted({v.item() for v in np.unique(data[c].to_numpy())}) for c in numeric}
    every = job.allgather(mine, name="formula_levels") if job.size > 1 else [mine]
    for c in numeric:
        levels[c] = sorted(set().union(*(theirs[c] for theirs in every)))
    return levels


def _as_levels(data, levels: dict):
    """data with each column of levels a pandas categorical of those levels, so that formulaic
    codes every one of them (words and booleans as the text of their levels)."""
    import pandas as pd

    out = data.copy()
    for name, chosen in levels.items():
        if name not in out.columns:
            raise UsageError(f"the rows have no column {name!r}, which the formula uses")
        cells = out[name]
        if frames.kind(cells) == "words":
            cells = cells.map(frames.text_of)
        out[name] = pd.Categorical(cells, categories=chosen)
        unseen = out[name].isna() & cells.notna()
        if unseen.any():
            at = int(np.flatnonzero(unseen.to_numpy())[0])
            raise UsageError(
                f"row {at} of the rows given has {cells.iloc[at]!r} in column {name!r}, not one "
                f"of the model's levels ({', '.join(map(str, chosen[:10]))})"
            )
    return out


def _materialize(build):
    """formulaic's model matrices; its errors (a name the data lacks, a missing value) as
    UsageError."""
    try:
        return build()
    except UsageError:
        raise
    except Exception as e:  # formulaic's FactorEvaluationError, PatsyError-like kin
        raise UsageError(f"the formula cannot be applied to the rows: {e}") from None
