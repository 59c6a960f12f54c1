"""fit("y ~ x1 + np.log(x2) + C(region)", data=df) and --formula: a formula, parsed and
materialized by formulaic (its language and its column names are those of statsmodels' formula
API), with every rank building the same design columns from its own rows.

- Levels. Before formulaic sees a rank's rows, each variable that becomes levels is made a
  pandas categorical with the levels every rank agreed on (frames.py: the union over the
  ranks, sorted; a category dtype's own order): the columns of words, booleans and categories
  the formula names, and the numeric ones it wraps in C(). formulaic then codes each with all
  of its levels, a level no row of a rank holds included, so every rank's columns are the
  same. A column that mixes numbers and words is refused, as the readers refuse one.
- Stateful transforms (center, scale, standardize, bs, cr, poly) learn their state (a mean, a
  spline's knots) from the rows they see. Under a launcher each rank gathers the columns they
  read from every rank (one allgather: those columns of the whole dataset, on every rank) and
  learns the state from all the rows, as one process would; the design is then built from its
  own rows with that state.
- A formula without an intercept (`- 1`) is a model without one (--no_intercept).

A Design stores what builds its columns from new rows (the right side, the levels, the
state) as JSON in an exported model, so predict applies the formula to a file's rows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvd_linreg.data import frames
from hvd_linreg.errors import UsageError, agreed

INTERCEPT = "Intercept"
_NAMES = re.compile(r"[A-Za-z_][A-Za-z_0-9.]*")  # the names a formula's terms use
_QUOTED = re.compile(r"`([^`]*)`")  # `a column name with spaces`
_WRAPPED = re.compile(r"\bC\(\s*([A-Za-z_][A-Za-z_0-9]*)")  # C(name ...): levels of a number


@dataclass(frozen=True)
class Design:
    """A formula's design on this rank: its columns (the intercept left out: the tool adds
    b), its target, and what builds the same columns from new rows: the right side as formulaic
    writes it, each variable's levels and the stateful transforms' state."""

    X: Any  # pandas DataFrame, named as statsmodels names the formula's columns
    y: Any  # pandas Series: the left side
    intercept: bool
    formula: str
    rhs: str = ""  # "1 + x + C(g)": formulaic's right side, its intercept written out
    levels: dict | None = None  # each variable's levels: a column name -> its categories
    state: dict | None = None  # each stateful transform's state, learned from every rank's rows
    variables: tuple[str, ...] = ()  # the data's columns the right side reads
    lhs: str = ""  # the left side as formulaic writes it: "y", "np.log(y)"
    target: tuple[str, ...] = ()  # the data's columns the left side reads

    def new_rows(self, data) -> np.ndarray:
        """New rows' design columns, coded with the fit's levels and state."""
        if not hasattr(data, "columns"):
            raise UsageError(f"a model fitted from the formula {self.formula!r} takes a DataFrame")
        missing = [c for c in self.variables if c not in data.columns]
        if missing:
            raise UsageError(
                f"the rows have no column {', '.join(missing)}, which the formula "
                f"{self.formula!r} uses"
            )
        prepared = _as_levels(data[list(self.variables)], self.levels or {})
        matrix = _materialize(lambda: self._spec().get_model_matrix(prepared, na_action="raise"))
        return matrix.drop(columns=[INTERCEPT], errors="ignore").to_numpy(np.float64)

    def target_of(self, data, levels: list | None = None) -> np.ndarray:
        """New rows' target: the left side on them (evaluate; its caller has refused rows
        without the columns it reads, naming them: formula_files.formula_columns); a column
        of words by the model's levels of it (levels)."""
        from formulaic import ModelSpec

        if levels:
            from hvd_linreg.data import frames

            column = self.target[0]
            return frames.coded(data[[column]], {column: levels}).iloc[:, 0].to_numpy()
        spec = ModelSpec(formula=f"{self.lhs} - 1")  # a right side's intercept left out
        matrix = _materialize(lambda: spec.get_model_matrix(data, na_action="raise"))
        return matrix.iloc[:, 0].to_numpy(np.float64)

    def stored(self) -> dict:
        """What an exported model keeps of the design, as JSON holds it."""
        return {
            "formula": self.formula,
            "rhs": self.rhs,
            "levels": self.levels or {},
            "state": _as_json(self.state or {}),
            "intercept": self.intercept,
            "variables": list(self.variables),
            "lhs": self.lhs,
            "target": list(self.target),
        }

    @classmethod
    def of_stored(cls, stored: dict) -> Design:
        """The design an exported model stored (stored()), for new rows."""
        return cls(
            None,
            None,
            stored["intercept"],
            stored["formula"],
            stored["rhs"],
            stored["levels"],
            _of_json(stored["state"]),
            tuple(stored["variables"]),
            stored["lhs"],
            tuple(stored["target"]),
        )

    def _spec(self):
        from formulaic import ModelSpec

        # formulaic adds an intercept to a formula's text unless told not to
        rhs = self.rhs if self.intercept else f"{self.rhs} - 1"
        return ModelSpec(formula=rhs, transform_state=self.state or {})


def design(job, formula: str, data, max_levels: int) -> Design:
    """The formula's design columns and target on this rank's rows of data, every rank's the
    same columns: levels agreed first (one allgather), then formulaic, with any stateful
    transform's state learned from every rank's rows."""
    if not hasattr(data, "columns"):
        raise UsageError("fit(formula, data=) takes data as a pandas DataFrame")
    parsed = _parsed(formula)
    used = _used(parsed, formula, data)
    levels = _agreed_levels(job, data[used], formula, max_levels)
    prepared, matrices = _built(job, formula, data[used], levels)
    spec = matrices.rhs.model_spec
    rhs = matrices.rhs
    if spec.transform_state and job.size > 1:
        spec = spec.update(transform_state=_agreed_state(job, spec, prepared))
        rhs = agreed(job, lambda: _materialize(lambda: spec.get_model_matrix(prepared)))
    if _stateful(matrices.lhs.model_spec) and job.size > 1:
        raise UsageError(
            f"the formula {formula!r} has a stateful transform on its left side: transform the "
            "target in the DataFrame instead"
        )
    y = _words_target(parsed, data)  # a column of words: its levels, which the family checks
    if y is None and matrices.lhs.shape[1] != 1:
        raise UsageError(f"the formula {formula!r} must have one column on its left side")
    if y is None:
        y = matrices.lhs.iloc[:, 0]
    intercept = INTERCEPT in rhs.columns
    X = rhs.drop(columns=[INTERCEPT]) if intercept else rhs
    state = dict(spec.transform_state)
    variables, target = _read(rhs.model_spec), _read(matrices.lhs.model_spec)
    levels = {name: v for name, v in levels.items() if name in variables}  # the right side's
    lhs = str(matrices.lhs.model_spec.formula)
    return Design(
        X, y, intercept, formula, str(spec.formula), levels, state, variables, lhs, target
    )


def _words_target(parsed, data):
    """The left side's column as it is where it names one column of words, booleans or
    categories (yes and no: a binary family's two levels, data/memory.py); else None."""
    from hvd_linreg.data import frames

    factors = [factor for term in parsed.lhs for factor in term.factors]
    if len(factors) != 1 or factors[0].eval_method.name != "LOOKUP":
        return None
    name = str(factors[0])
    if name not in data.columns or frames.kind(data[name]) is None:
        return None
    return data[name]


def target_column(formula: str) -> str:
    """The column that the formula's left side names as it is: a model of classes' target,
    whose values (words or numbers) are the classes rather than a design column."""
    lhs = _parsed(formula).lhs
    factors = [factor for term in lhs for factor in term.factors]
    if len(factors) != 1 or factors[0].eval_method.name != "LOOKUP":
        raise UsageError(
            f"the formula {formula!r}: the left side of a multinomial model names the target "
            f"column, whose values are the classes ('fruit ~ x1 + x2'), not {str(lhs)!r}"
        )
    return str(factors[0])


def has_intercept(formula: str) -> bool:
    """Whether the formula's right side has an intercept (not `- 1`, `+ 0`)."""
    return any(str(term) == "1" for term in _parsed(formula).rhs)


def settings(cfg, formula: str, intercept: bool):
    """cfg for a formula with or without an intercept: without one, --no_intercept; with one,
    --no_intercept refused (the formula says it: `y ~ x - 1`)."""
    from dataclasses import replace

    if intercept and cfg.no_intercept:
        raise UsageError(
            f"the formula {formula!r} has an intercept, and no_intercept asks for none: write "
            "the formula without one, as 'y ~ x - 1'"
        )
    return cfg if intercept else replace(cfg, no_intercept=True)


def names_in(formula: str) -> set[str]:
    """The names a formula writes: every column it may read (and its functions' names)."""
    return {*_NAMES.findall(formula), *_QUOTED.findall(formula)}


def _read(spec) -> tuple[str, ...]:
    """The data's columns a materialized side reads."""
    return tuple(sorted(str(v) for v in spec.variables_by_source.get("data", ())))


def _parsed(formula: str):
    try:
        from formulaic import Formula
    except ImportError:
        raise UsageError(
            "a formula needs formulaic: pip install 'hvd_linreg[formula]' (or pip install "
            "formulaic)"
        ) from None

    try:
        parsed = Formula(formula)
    except Exception as e:  # formulaic's FormulaSyntaxError and its kin
        raise UsageError(f"the formula {formula!r} does not parse: {e}") from None
    if not hasattr(parsed, "lhs") or not len(parsed.lhs):
        raise UsageError(f"the formula {formula!r} has no left side: write it 'y ~ x1 + x2'")
    return parsed


def _used(parsed, formula: str, data) -> list:
    """The columns of data the formula names: formulaic's required variables, and the names
    inside its stateful transforms (center(x)), which it does not count among them."""
    named = {*parsed.required_variables, *names_in(formula)}
    return [c for c in data.columns if str(c) in named]


def _built(job, formula: str, data, levels: dict):
    """data with its levels as categoricals, and formulaic's model matrices of it; a rank's
    own rows may fail (a missing value): every rank stops, or none."""
    from formulaic import model_matrix

    def build():
        prepared = _as_levels(data, levels)
        return prepared, _materialize(lambda: model_matrix(formula, prepared, na_action="raise"))

    return agreed(job, build)


def _agreed_state(job, spec, prepared) -> dict:
    """The stateful transforms' state learned from every rank's rows: the columns they read,
    gathered from every rank in rank order (the dataset's order), give it as one process's
    rows would."""
    import pandas as pd
    from formulaic import model_matrix

    stateful = _stateful(spec)
    read = {str(v) for f in stateful for v in spec.factor_variables[f]}
    names = [c for c in prepared.columns if c in read]
    rows = pd.concat(job.allgather(prepared[names], name="formula_state"), ignore_index=True)
    terms = " + ".join(str(f) for f in stateful) + " - 1"
    learned = agreed(job, lambda: _materialize(lambda: model_matrix(terms, rows)))
    return dict(learned.model_spec.transform_state)


def _stateful(spec) -> list:
    """A materialized side's factors that hold state (the sides of a formula share one dict
    of states)."""
    return [f for f in spec.factor_variables if str(f) in spec.transform_state]


def _agreed_levels(job, data, formula: str, max_levels: int) -> dict:
    """Every variable's levels, agreed by the ranks: the columns of words, booleans and
    categories (frames.agree), and the numeric columns the formula wraps in C()."""
    levels = frames.agree(job, data, max_levels, check=frames.refuse_mixed)
    wrapped = [c for c in dict.fromkeys(_WRAPPED.findall(formula)) if c in data.columns]
    numeric = [c for c in wrapped if c not in levels]
    mine = {c: sorted({v.item() for v in np.unique(data[c].to_numpy())}) for c in numeric}
    every = job.allgather(mine, name="formula_levels") if job.size > 1 else [mine]
    for c in numeric:
        levels[c] = sorted(set().union(*(theirs[c] for theirs in every)))
    return levels


def _as_levels(data, levels: dict):
    """data with each column of levels a pandas categorical of those levels, so that formulaic
    codes every one of them (words and booleans as the text of their levels). Every column
    of levels is in data: the fit's rows hold them, and new_rows refuses rows without them."""
    import pandas as pd

    out = data.copy()
    for name, chosen in levels.items():
        cells = out[name]
        if frames.kind(cells) == "words":
            cells = cells.map(frames.text_of)
        out[name] = pd.Categorical(cells, categories=chosen)
        unseen = out[name].isna() & cells.notna()
        if unseen.any():
            at = int(np.flatnonzero(unseen.to_numpy())[0])
            raise UsageError(
                f"row {at}: {cells.iloc[at]!r} in column {name!r} is not one "
                f"of the model's levels ({', '.join(map(str, chosen[:10]))})"
            )
    return out


def _materialize(build):
    """formulaic's model matrices; its errors (a name the data lacks, a missing value) as
    UsageError, and NumPy's and pandas' warnings on the way (a log of 0) silenced: the error
    that follows says what went wrong."""
    import warnings

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return build()
    except UsageError:
        raise
    except Exception as e:  # formulaic's FactorEvaluationError, PatsyError-like kin
        term = re.search(r"`([^`]+)` contains null values after evaluation", str(e))
        if term:
            raise UsageError(
                f"the formula's term {term.group(1)} has no value for some rows (a log or a "
                "square root of a number out of its domain, or a value missing): change the "
                "term, or leave those rows out of the data"
            ) from None
        raise UsageError(f"the formula cannot be applied to the rows: {e}") from None


def _as_json(value):
    """A transform's state as JSON keeps it exactly: dicts as [key, value] pairs (poly's keys
    are numbers), arrays tagged, NumPy numbers as Python's."""
    if isinstance(value, dict):
        return {"pairs": [[_as_json(k), _as_json(v)] for k, v in value.items()]}
    if isinstance(value, np.ndarray):
        return {"array": value.tolist()}
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _of_json(value):
    if isinstance(value, dict):
        if "pairs" in value:
            return {_of_json(k): _of_json(v) for k, v in value["pairs"]}
        return np.array(value["array"])
    return [_of_json(v) for v in value] if isinstance(value, list) else value
