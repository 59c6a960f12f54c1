"""hvd_linreg.fit: the command line's fit, called from the user's own script on every rank of
a job (or in one process with no launcher), each rank passing its own rows.

The same recipe as the command line's (pipeline.py), on the rows the caller passes
(data/memory.py) instead of a file; the same settings by the same names, checked by Config.
Errors the caller can fix raise UsageError, a ValueError, on every rank with the message the
command line prints. Nothing here exits the process."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hvd_linreg.config import MISSING, Config
from hvd_linreg.constraints import one_of
from hvd_linreg.errors import UsageError, agreed
from hvd_linreg.families.coefficients import vec
from hvd_linreg.statistics.table import INTERCEPT

# Settings that describe a file or a launch, which fit() does not take: its rows are its
# arguments, and an elastic run needs the launcher's host discovery.
NOT_FOR_FIT = {
    "target": "pass the target as y",
    "features": "pass the features as X (a DataFrame's columns name them)",
    "weights": "pass the weights as fit(X, y, weights=w)",
    "offset": "pass the offset as fit(X, y, offset=o)",
    "exposure": "pass log(exposure) as fit(X, y, offset=np.log(exposure))",
    "categorical": "pass the column with pandas' category dtype (X[c].astype('category')): "
    "words, categories and booleans are coded as levels",
    "num_samples": "the rows passed are the dataset",
    "num_features": "the rows passed are the dataset",
    "elastic": "elastic runs are the command line's (hvd-linreg --elastic)",
    "commit_every": "elastic runs are the command line's (hvd-linreg --elastic)",
}


def config_for_fit(settings: dict[str, Any]) -> Config:
    """The Config of fit()'s settings: the command line's names and checks, quiet unless
    asked (a library call prints nothing of its own accord)."""
    for name, instead in NOT_FOR_FIT.items():
        if name in settings:
            raise UsageError(f"fit() does not take {name}=: {instead}")
    try:
        cfg = Config(**{"quiet": True, **settings})
    except TypeError:
        known = set(Config.__dataclass_fields__)
        unknown = sorted(set(settings) - known)
        raise UsageError(
            f"fit() got unknown settings {', '.join(unknown)}; its settings are the command "
            "line's flags by the same names (hvd-linreg --help)"
        ) from None
    from hvd_linreg import families

    families.for_config(cfg)  # the model, link and power: Config knows no family
    return cfg


FOR_FOLDS = ("select", "fold_alpha")  # the settings that choose among or fit the folds


def fit(
    X,
    y=None,
    *,
    weights=None,
    offset=None,
    fold=None,
    groups=None,
    data=None,
    start=None,
    **settings,
) -> FitResult:
    """Fit the model the settings name (the command line's flags, by the same names: model,
    solver, l2, ...) to the rows that every rank passes: X (rows x features: a NumPy array,
    or a pandas DataFrame whose columns name the coefficients), y, and each row's prior
    weight and offset. The ranks' rows in rank order are the dataset. Call it on every rank,
    with or without hvd.init() before; every rank gets the same FitResult. fold: each row's
    cross-validation fold, whole numbers, for an elastic-net path (as --fold_column). groups:
    each row's cluster, numbers, for cov_type="cluster" (as --groups). X may instead be a
    formula, "y ~ x1 + np.log(x2) + C(region)", of the columns of data (data/formulas.py).
    start: where IRLS or Newton's method begins instead of the intercept-only model (rank
    0's): [w..., b], or for a model of K classes B, (F + 1) x (K - 1).
    missing="drop" drops the rows that hold a missing value (NaN, None) in any of them, as
    --missing drop does a file's; "error" (the default) refuses them."""
    missing = settings.pop("missing", "error")
    one_of(MISSING)("missing", missing)
    cfg = _checked(settings, fold, groups)
    from hvd_linreg import pipeline
    from hvd_linreg.data.memory import memory_shard

    job = start_job(cfg.verbose, horovod=pipeline.needs_horovod(cfg))
    start = _start(job, cfg, start)
    dropped = None
    if missing == "drop":
        rows = (X, y, weights, offset, fold, groups, data)
        X, y, weights, offset, fold, groups, data, dropped = _complete(job, *rows)
    design, cfg, X, y, groups = _design(job, cfg, X, y, data, groups)

    family = pipeline.family_for(cfg)
    if family.CLASSES:  # K classes: multinomial.py's recipe and result
        from hvd_linreg import multinomial
        from hvd_linreg.data import classes

        def load():
            carried = {"weights": weights, "offset": offset}
            return classes.rows_shard(cfg, job, X, y, dropped, design, **carried)

        return multinomial.run(cfg, job, family, load, start)

    def load():
        shard = memory_shard(cfg, job, X, y, weights, offset, fold, groups)
        shard.formula = None if design is None else design.stored()
        shard.dropped = dropped
        return shard

    shard, ckpt_dir = pipeline.prepare(cfg, family, job, load)
    result, optimum = pipeline.fit(cfg, family, job, shard, ckpt_dir, start)
    report = pipeline.finish(cfg, family, job, shard, result, optimum, speak=not cfg.quiet)
    return FitResult(report, design)


def _design(job, cfg: Config, X, y, data, groups):
    """A formula's design (else None) and its settings, the features and target it gives (X
    and y as given otherwise), and the groups as numbers."""
    design = None
    if isinstance(X, str):
        design, cfg = _formula(job, cfg, X, y, data)
        X, y = design.X, design.y
    elif data is not None:
        raise UsageError("data= is the DataFrame of a formula: fit('y ~ x1 + x2', data=df)")
    if groups is not None:
        from hvd_linreg.data import frames

        groups = frames.cluster_numbers(job, groups)
    return design, cfg, X, y, groups


def _complete(job, X, y, weights, offset, fold, groups, data):
    """The rows given without those that hold a missing value in any of them (of a formula's
    data: in the columns it names), and the dataset's rows dropped (every rank's, sorted; None
    where none is)."""
    from hvd_linreg.data import formulas
    from hvd_linreg.data.missing import complete, rows_of

    def keep() -> np.ndarray:
        read = X
        if isinstance(X, str) and data is not None:
            read = data[[c for c in data.columns if str(c) in formulas.names_in(X)]]
        given = [v for v in (read, y, weights, offset, fold, groups) if v is not None]
        if isinstance(X, str) and data is None:
            given = given[1:]
        lengths = {len(v) for v in given}
        if len(lengths) > 1:
            raise UsageError(f"the rows given have different lengths: {sorted(lengths)}")
        kept = np.ones(lengths.pop() if lengths else 0, bool)
        for values in given:
            kept &= complete(values)
        return kept

    kept = agreed(job, keep)
    counts = job.allgather(len(kept), name="fit_missing")
    mine = sum(counts[: job.rank]) + np.flatnonzero(~kept)
    every = np.concatenate(job.allgather(mine, name="fit_dropped"))
    rows = (y, weights, offset, fold, groups, data)
    X = X if isinstance(X, str) else rows_of(X, kept)
    return (X, *(rows_of(v, kept) for v in rows), every if len(every) else None)


def _checked(settings: dict, fold, groups) -> Config:
    """fit()'s settings as a Config, checked with fold= and groups=."""
    # Config knows folds by --cv or --fold_column: the settings that need them wait for fold=
    deferred = {k: settings.pop(k) for k in FOR_FOLDS if fold is not None and k in settings}
    cfg = config_for_fit(settings)
    if fold is not None:
        if cfg.cv is not None:
            raise UsageError("fit() takes cv= or fold=, not both: both choose the folds")
        cfg = replace(cfg, l1_ratio=cfg.penalty_l1_ratio)  # a path: its checks again
        for name, value in deferred.items():
            Config.__dataclass_fields__[name].metadata["check"](name, value)
            object.__setattr__(cfg, name, value)  # checked: its own constraint is its only one
    if (groups is not None) != (cfg.cov_type == "cluster"):
        raise UsageError(
            "cov_type='cluster' needs groups=, each row's cluster"
            if groups is None
            else "groups= is for cov_type='cluster': it gives each row's cluster"
        )
    return cfg


def _start(job, cfg: Config, start):
    """start= as every rank takes it, rank 0's: refused where no iterative fit would begin
    from it."""
    if job.size > 1:
        start = job.broadcast(start)
    if start is None:
        return None
    from hvd_linreg import families
    from hvd_linreg.solvers.start import iterates

    if cfg.solver != "exact" or not iterates(families.for_config(cfg)) or cfg.penalized:
        raise UsageError(
            "start= is where IRLS or Newton's method begins: it needs solver='exact' and a "
            "model they fit (every model but linear), without the elastic net's alpha= or cv="
        )
    return start


def _formula(job, cfg: Config, formula: str, y, data):
    """A formula's design on this rank's rows of data, and the settings for it (`- 1`: no
    intercept)."""
    if data is None:
        raise UsageError("fit(formula) takes data=, the DataFrame whose columns it names")
    if y is not None:
        raise UsageError("fit(formula, data=) takes y from the formula's left side: pass no y")
    from hvd_linreg import families
    from hvd_linreg.data import formulas

    if families.for_config(cfg).CLASSES:  # its left side: the classes
        from hvd_linreg.data.classes import formula_design

        design = formula_design(job, formula, data, cfg.max_levels)
    else:
        design = formulas.design(job, formula, data, cfg.max_levels)
    return design, formulas.settings(cfg, formula, design.intercept)


def start_job(verbose: bool = False, horovod: bool = False):
    """This process's job for a library call, leaving the caller's signal handlers as they are.
    An exact fit starts neither TensorFlow nor Horovod (ranks.init); horovod: an SGD fit's
    first call imports TensorFlow quietly and starts Horovod (a no-op where the caller's script
    has)."""
    from hvd_linreg.runtime import ranks

    return ranks.init(verbose=verbose, own_process=False, horovod=horovod)


@dataclass(frozen=True)
class FitResult:
    """A fit, the same on every rank: its coefficients [w..., b] with their names and, where
    the exact optimum was solved, their standard errors; its summary and metrics as the
    command line prints and writes them."""

    report: Any  # report.Report: the run, its data, its result and its statistics
    design: Any = None  # data/formulas.py's Design, for a fit from a formula

    @property
    def params(self) -> np.ndarray:
        """[w..., b]: the features' coefficients, then the intercept (the coefficients'
        one column, as statsmodels' params)."""
        return vec(self.report.result.params).astype(np.float64)

    @property
    def names(self) -> tuple[str, ...]:
        """Each coefficient's name: the DataFrame's columns (else w[j]), then b."""
        names = self.report.shard.feature_names
        count = len(self.report.result.params) - 1
        return (*(names or (f"w[{j}]" for j in range(count))), INTERCEPT)

    @property
    def bse(self) -> np.ndarray | None:
        """The coefficients' standard errors (the settings' cov_type), from the exact optimum;
        None where it was not solved (an SGD run that skipped it)."""
        statistics = self.report.statistics
        if statistics is None or self.report.penalized:
            return None  # a penalized fit has none (statistics/path.py)
        return np.array([c.std_error for c in statistics.coefficients], np.float64)

    @property
    def iterations(self) -> int:
        """The exact solver's passes over the rows: IRLS's iterations, 1 for least squares
        (one QR), 0 where the exact optimum was not solved."""
        optimum = self.report.optimum
        return 0 if optimum is None else int(optimum.iterations)

    @property
    def converged(self) -> bool | None:
        """Whether the exact solver converged: False where IRLS stopped at max_iter (the fit
        is its last iterate's), True for least squares and the elastic net (whose
        unconverged strengths are refused), None where the exact optimum was not solved."""
        optimum = self.report.optimum
        return None if optimum is None else bool(optimum.converged)

    @property
    def path(self):
        """A penalized fit's path and cross-validation (solvers.path_fit.PathFit: alphas,
        coefficients, deviance, dev_ratio, nonzero, cv, the chosen index and alpha); None for
        an unpenalized fit."""
        return self.report.optimum if self.report.penalized else None

    def summary(self) -> str:
        """The summary the command line prints, as one string, with every coefficient (the
        command line lists up to 200)."""
        return "\n".join(self.report.summary_lines(limit=None))

    def to_dict(self) -> dict[str, Any]:
        """The metrics JSON that --metrics_json writes."""
        return self.report.metrics()

    def predict(self, X, offset=None) -> np.ndarray:
        """The model's mean for each row of X (with each row's offset), in float64."""
        from hvd_linreg.data.memory import features_of

        shard, levels = self.report.shard, None
        if self.design is not None:  # the formula's columns, from the new rows
            X = self.design.new_rows(X)
        elif shard.levels:  # columns of words or categories: their codes by the fit's levels
            from hvd_linreg.data import frames

            X = frames.coded(frames.columns_of(X, shard.columns, shard.levels), shard.levels)
            levels = {j: shard.levels[c] for j, c in enumerate(shard.columns) if c in shard.levels}
        X = features_of(X, self.report.result.params.shape[0] - 1, levels)
        return self.report.family.predict(self.params, X, offset)

    def save(self, path: str) -> None:
        """Rank 0 writes the model to path as --export does (hvd-linreg predict and evaluate,
        and load(), read it); the other ranks write nothing."""
        from hvd_linreg.model_file import export

        report = self.report
        if report.job.is_root:
            cfg = replace(report.cfg, export=str(path))
            export.save(cfg, report.family, report.shard, self.params, report.metrics())


def load(path: str):
    """A model that save() or the command line's --export wrote (export.ExportedModel)."""
    from hvd_linreg.model_file import export

    return export.load(str(path))
