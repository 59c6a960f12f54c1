"""The multinomial recipe (--model multinomial, fit(model="multinomial")): a target of K >= 2
classes, numbers or words.

1. The rows and their classes (data/classes.py): the classes agreed by every rank as a
   column's levels are, sorted, the first the reference; the rows where the layout puts them,
   with their weights and offsets; a formula's right side the features, its left side the
   target column as it is.
2. The fit: Newton's method (solvers/multinomial.py), averaged SGD through the trainer every
   family's SGD has, or the elastic net's path (solvers/multinomial_path.py).
3. The statistics and the scores (statistics/); rank 0 reports, and draws --plot from every
   rank's rows."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hvd_linreg import scoring
from hvd_linreg.data.frames import plain
from hvd_linreg.data.shard import DENSE_MAX_COLUMNS
from hvd_linreg.errors import ConvergenceWarning, UsageError, agreed
from hvd_linreg.families.coefficients import stored
from hvd_linreg.statistics.table import INTERCEPT

# What the multinomial model does not take yet, and why
NOT_YET = {
    "no_intercept": "a multinomial model without intercepts is not fitted yet",
    "penalized_offset": "an offset is not taken by the multinomial elastic net yet",
}


def check_settings(cfg) -> None:
    """Refuse, before any row is read, what the multinomial model does not take."""
    given = {
        "no_intercept": cfg.no_intercept,
        "penalized_offset": cfg.penalized and cfg.offset is not None,
    }
    for name, value in given.items():
        if value:
            raise UsageError(NOT_YET[name])


def run(cfg, job, family, load, start=None) -> MultinomialResult:
    """The recipe: load() -> (shard, classes), then the fit (Newton's method, from start where
    given, or SGD and, for its optimality gap, Newton's), its statistics and its scores; rank
    0 prints the summary (unless quiet) and writes --metrics_json and --export."""
    from hvd_linreg import report
    from hvd_linreg.sgd import checkpoint

    began = time.perf_counter()
    check_settings(cfg)
    job = replace(job, shows_progress=not cfg.quiet)  # rank 0 shows a long fit's progress

    def outputs():
        if job.is_root:  # rank 0 writes them: checked before the fit, not after
            from hvd_linreg.model_file import export

            report.check_writable("--metrics_json", cfg.metrics_json)
            report.check_writable("--plot", cfg.plot)
            export.check_target(cfg.export)
            return checkpoint.prepare_dir(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        return None

    ckpt_dir = agreed(job, outputs)
    shard, classes = load()
    check_design(cfg, shard)
    if shard.structured and cfg.solver == "exact":  # by blocks: the blocks a rank holds
        from hvd_linreg.solvers import class_blocks

        agreed(job, lambda: class_blocks.check_memory(shard.design_template(), len(classes) - 1))
    family = family.with_classes(classes)
    announce(cfg, job, family, shard)
    sgd = train(cfg, job, family, shard, ckpt_dir) if cfg.solver == "sgd" else None
    return finish(cfg, job, family, shard, sgd, began, start)


def check_design(cfg, shard) -> None:
    """A wide design (categorical or sparse columns, matrix/) is fitted by Newton's method on
    its blocks; what would form its dense rows is refused, on every rank alike (every rank
    has the same columns)."""
    if not shard.structured:
        return
    from hvd_linreg.solvers import check_wide

    check_wide(cfg, shard)
    if cfg.penalized:
        raise UsageError(
            f"the multinomial elastic net takes a design of at most {DENSE_MAX_COLUMNS} "
            f"columns; this is a design of {shard.num_features} columns (categorical or "
            "sparse): fit it with --l2's ridge alone, or fewer columns"
        )


def announce(cfg, job, family, shard) -> None:
    """Refuse a --plot it cannot draw (every rank has the same features), then the header
    line: the job, the data, the run and the classes."""
    from hvd_linreg import report

    if cfg.plot and shard.num_features != 1:
        raise UsageError(
            "--plot draws a multinomial model's probability of each class over its one "
            f"feature, and this one has {shard.num_features}: fit one feature, or leave out "
            "--plot"
        )
    if job.is_root and not cfg.quiet:
        classes = f"{len(family.labels)} classes"
        job.log(f"{report.header_line(cfg, family, job, shard)}, {classes}")


def finish(cfg, job, family, shard, sgd, began: float, start=None) -> MultinomialResult:
    """After SGD (sgd: its TrainingResult) or none: Newton's fit where wanted, the statistics,
    the scores of the run's B; rank 0 reports."""
    from hvd_linreg.statistics import multinomial as statistics

    classes = family.labels
    features = shard.feature_names or (f"w[{j}]" for j in range(shard.num_features))
    names = (*features, INTERCEPT)
    fitting = time.perf_counter()
    if cfg.penalized:  # the elastic net's path (an exact fit)
        path, stats, B = penalized(cfg, job, shard, names, classes)
        fit = None
    else:
        path, fit = None, optimum(cfg, job, shard, len(classes), start)
        stats = None if fit is None else describe(cfg, job, shard, fit, names, classes)
        B = fit.params if sgd is None else sgd.params
    fit_s = time.perf_counter() - fitting if sgd is None else sgd.wall_s
    training = statistics.scores(job, shard.blocks(), B, classes, "multinomial_train")
    validation = None
    if shard.validation is not None:
        held = [shard.validation]
        validation = statistics.scores(job, held, B, classes, "multinomial_valid")
    exact_loss, gap = None, None
    if sgd is not None and fit is not None:
        exact_loss = scoring.loss(job, shard, family, fit.params)
        gap = family.objective(sgd.loss, sgd.params, cfg.l2)
        gap -= family.objective(exact_loss, fit.params, cfg.l2)
    wall_s = time.perf_counter() - began
    result = MultinomialResult(
        cfg,
        shard,
        classes,
        names,
        stats,
        training,
        validation,
        wall_s,
        sgd,
        exact_loss,
        gap,
        job.size,
        path,
        fit_s,
        job.controller,
    )
    _report(cfg, job, result)
    return result


def train(cfg, job, family, shard, ckpt_dir):
    """--solver sgd: averaged SGD on the mean log-loss through Horovod's DistributedOptimizer,
    by the trainer every family's SGD has (checkpoints, resume, held-out scores)."""
    from hvd_linreg.sgd.trainer import make_trainer

    for warning in shard.warnings(cfg):
        job.warn(warning)
    trainer = make_trainer(cfg, family, job, shard)
    trainer.use(job, shard, ckpt_dir)
    trainer.start()
    return trainer.fit()


def describe(cfg, job, shard, fit, names, classes):
    """Newton's fit's statistics; with --cov_type HC0, HC1 or cluster, its standard errors the
    sandwich's (solvers/sandwich.py: one more pass)."""
    from hvd_linreg.solvers import sandwich
    from hvd_linreg.statistics import multinomial as statistics

    robust = None
    if cfg.cov_type != "nonrobust":
        if cfg.cov_type == "cluster" and shard.carried_columns.group is None:
            raise UsageError("--cov_type cluster needs --groups COL (groups= from Python)")
        args = (job, shard, fit.params, fit.information, cfg.cov_type)
        robust = sandwich.class_covariance(*args)
    return statistics.describe(fit, names, classes, robust, cfg.cov_type)


def penalized(cfg, job, shard, names, classes):
    """The elastic net's path (solvers/multinomial_path.py): the fit, its statistics, and the
    chosen model as the unpenalized fit's B (the same probabilities)."""
    from hvd_linreg.solvers import multinomial_path
    from hvd_linreg.solvers.path_settings import settings_for
    from hvd_linreg.statistics import multinomial_path as statistics

    path = multinomial_path.fit(job, shard, classes, settings_for(cfg, job, shard))
    return path, statistics.describe(path, names, classes), path.reference_params


def optimum(cfg, job, shard, K: int, start=None):
    """Newton's fit (from start, where given): the run's, or an SGD run's exact optimum where
    it wants one (None)."""
    from hvd_linreg.solvers import multinomial as solver
    from hvd_linreg.solvers import wants_optimum

    if cfg.solver == "sgd" and not wants_optimum(cfg, shard):
        return None
    fit = solver.fit(job, shard, K, cfg.tol, cfg.max_iter, cfg.l2, start)
    if not fit.converged:
        job.warn(
            f"Newton's method did not converge in --max_iter {cfg.max_iter} iterations: the "
            "statistics are the last iterate's; raise --max_iter",
            ConvergenceWarning,
        )
    return fit


def _report(cfg, job, result: MultinomialResult) -> None:
    """Rank 0's summary and files; the export's problem stops every rank alike."""
    from hvd_linreg import report
    from hvd_linreg.statistics.table import SHOWN_COEFFICIENTS

    if job.is_root and not cfg.quiet:
        for line in result.summary_lines(limit=SHOWN_COEFFICIENTS):
            job.log(line)
    if job.is_root and cfg.metrics_json:
        report.write_json(cfg.metrics_json, result.to_dict())
    if cfg.export:
        from hvd_linreg.model_file import multinomial_model

        agreed(job, lambda: multinomial_model.save(cfg, result) if job.is_root else None)
        if job.is_root and not cfg.quiet:
            from hvd_linreg.model_file.export import written

            job.log(written(cfg.export))
    if cfg.plot:
        _plot(cfg.plot, job, result)


def _plot(path: str, job, result: MultinomialResult) -> None:
    """Rank 0 draws the model of one feature (plot.py) from every rank's rows, binned."""
    from hvd_linreg.plot import save_class_plot
    from hvd_linreg.statistics.multinomial import class_frequencies

    shard = result.shard
    edges, counts = class_frequencies(job, shard.blocks, len(result.classes))
    agreed(job, lambda: save_class_plot(path, result, edges, counts) if job.is_root else None)


@dataclass(frozen=True)
class MultinomialResult:
    """A multinomial fit, the same on every rank: B, (F + 1) x (K - 1), a column per class
    but the first (its last row the intercepts): Newton's, or SGD's (sgd); the statistics of
    Newton's optimum (None where an SGD run did not solve for it) and the scores of B."""

    cfg: Any
    shard: Any
    classes: list
    names: tuple[str, ...]  # the coefficients' names in each class: the features', then b
    statistics: Any  # statistics/multinomial.py's MultinomialStatistics, or None
    training: dict
    validation: dict | None
    wall_s: float
    sgd: Any = None  # SGD's TrainingResult (report.py), or None
    exact_loss: float | None = None  # an SGD run's exact optimum's mean log-loss
    # SGD's objective (its mean log-loss + --l2's term) less the exact optimum's
    optimality_gap: float | None = None
    size: int = 1  # the ranks of the job (of its last stretch, an elastic one's)
    # the elastic net's MultinomialPathFit (its statistics are then the path's), or None
    path: Any = None
    # the fit alone, from the loaded rows to the coefficients: Newton's method (with its
    # robust errors), the elastic net's path, or SGD's steps
    fit_s: float = 0.0
    controller: str = "none"  # the job's collectives: ranks.py's Job.controller

    @property
    def params(self) -> np.ndarray:
        if self.path is not None:
            return self.path.reference_params
        return self.statistics.estimates if self.sgd is None else self.sgd.params

    @property
    def bse(self) -> np.ndarray | None:
        """The standard errors of Newton's optimum (None where it was not solved for, and for
        the elastic net, which has none)."""
        if self.statistics is None or self.path is not None:
            return None
        return self.statistics.std_errors

    @property
    def iterations(self) -> int:
        """Newton's iterations (the elastic net's: its passes over the rows), as fit()'s other
        results count them; 0 where the exact optimum was not solved."""
        if self.path is not None:
            return int(self.path.passes)
        return 0 if self.statistics is None else int(self.statistics.iterations)

    @property
    def converged(self) -> bool | None:
        """Whether Newton's method converged: False where it stopped at max_iter (the fit is
        its last iterate's); True for the elastic net, whose unconverged strengths are
        refused; None where the exact optimum was not solved."""
        if self.path is not None:
            return True
        return None if self.statistics is None else bool(self.statistics.converged)

    @property
    def symmetric_params(self) -> np.ndarray:
        """The coefficients in scikit-learn's symmetric form, (F + 1) x K, a column per class:
        each row centred over the classes (the first class's column of B being 0), as
        scikit-learn's multinomial coef_ (transposed) and intercept_ are."""
        if self.path is not None:  # the elastic net's own: glmnet's, not centred
            return self.path.params
        B = np.column_stack([np.zeros(len(self.params)), self.params])
        return B - B.mean(axis=1, keepdims=True)

    def predict_proba(self, X, offset=None) -> np.ndarray:
        """Each row's probability of each class (rows x K, in classes' order), with each
        row's offset where the model has one."""
        from hvd_linreg.data.memory import features_of
        from hvd_linreg.solvers.multinomial import log_probabilities

        shard = self.shard
        if shard.formula is not None:  # the formula's columns, from the new rows
            from hvd_linreg.data.formulas import Design

            X = Design.of_stored(shard.formula).new_rows(X)
        elif shard.levels:
            from hvd_linreg.data import frames

            X = frames.new_rows(X, shard.columns, shard.levels)
        X = features_of(X, self.params.shape[0] - 1)
        if offset is not None:
            offset = np.asarray(offset, np.float64).reshape(-1)
        return np.exp(log_probabilities(X, self.params, offset))

    def predict(self, X, offset=None) -> np.ndarray:
        """Each row's most probable class."""
        best = self.predict_proba(X, offset).argmax(axis=1)
        return np.asarray(self.classes, dtype=object)[best]

    def summary_lines(self, limit: int | None = None) -> list[str]:
        """The summary as every family's is laid out: the run's figures, then the statistics
        of the exact optimum or the path (a table per class)."""
        from hvd_linreg.report import versions
        from hvd_linreg.statistics.multinomial import score_lines

        lines = ["Summary:", *self._sgd_lines()]
        if self.training["log_loss"] is not None:
            weighted = "weighted " * self.shard.weighted
            lines.append(
                f"  final loss: {self.training['log_loss']:.6g} ({weighted}mean log-loss over "
                f"all {self.shard.num_samples}"
                f"{' training' * bool(self.shard.num_validation)} samples)"
            )
        lines += score_lines("training", self.training, self.classes)
        if self.validation is not None:
            lines += score_lines("validation", self.validation, self.classes)
        v = versions()
        lines += [
            f"  wall time: {self.wall_s:.3f} s ({self._cost()})",
            f"  ranks: {self.size}, controller: {self.controller}",
            f"  versions: hvd_linreg {v['hvd_linreg']}, Horovod {v['horovod']}, "
            f"TensorFlow {v['tensorflow']}, NumPy {v['numpy']}, Python {v['python']}",
        ]
        return lines + ([] if self.statistics is None else self.statistics.lines(limit))

    def _cost(self) -> str:
        """What the wall time went on, as the other families' summaries say it."""
        if self.path is not None:
            passes = self.path.passes
            return f"{passes} pass{'es' * (passes > 1)} over the data, by proximal Newton"
        if self.sgd is not None:
            return f"{self.sgd.steps - self.sgd.first_step} SGD steps"
        return "a pass and an allreduce per Newton iteration"

    def _sgd_lines(self) -> list[str]:
        """SGD's steps, its loss against the exact optimum's, and its B, a line per class."""
        if self.sgd is None:
            return []
        sgd, B = self.sgd, self.sgd.params
        gap = self.optimality_gap
        exact = (
            "" if gap is None else f" (the exact optimum's {self.exact_loss:.6g}, gap {gap:.3g})"
        )
        lines = [f"  SGD: {sgd.steps} steps, mean log-loss {sgd.loss:.6g}{exact}"]
        for j, label in enumerate(self.classes[1:]):
            w = ", ".join(f"{v:.6g}" for v in B[:-1, j][:8])
            more = f", ... ({len(B) - 1} in all)" if len(B) > 9 else ""
            lines.append(f"  class {label}: w [{w}{more}], b {B[-1, j]:.6g}")
        return lines

    def summary(self) -> str:
        return "\n".join(self.summary_lines())

    def to_dict(self) -> dict[str, Any]:
        """The metrics JSON that --metrics_json writes."""
        from hvd_linreg.report import versions

        shard, (w, b) = self.shard, stored(self.params)
        return {
            "model": "multinomial",
            "solver": self.cfg.solver,
            "num_samples": shard.num_samples,
            "rows_dropped_missing": shard.num_dropped,
            "num_features": shard.num_features,
            "features": list(self.names[:-1]),
            "classes": [plain(c) for c in self.classes],
            "reference_class": plain(self.classes[0]),
            "w": w,
            "b": b,
            **self._sgd_json(),
            "statistics": None if self.statistics is None else self.statistics.as_json(),
            **({} if self.path is None else self.statistics.sections()),
            "training_scores": self.training,
            "validation": self.validation,
            "wall_s": self.wall_s,
            "fit_s": self.fit_s,
            "versions": versions(),
            "config": self.cfg.as_dict(),
        }

    def _sgd_json(self) -> dict[str, Any]:
        """An SGD run's own keys: its start, steps, loss, gap and loss history."""
        if self.sgd is None:
            return {}
        sgd, (w, b) = self.sgd, stored(self.sgd.initial_params)
        return {
            "initial_w": w,
            "initial_b": b,
            "size": self.size,
            "steps": sgd.steps,
            "first_step": sgd.first_step,
            "resets": [list(event) for event in sgd.resets],
            "loss": sgd.loss,
            "exact_loss": self.exact_loss,
            "optimality_gap": self.optimality_gap,
            "history": [[step, loss] for step, loss in sgd.history],
            "validation_history": [
                {"step": step, **scores.values()} for step, scores in sgd.validation_history
            ],
        }
