"""The multinomial recipe (--model multinomial, fit(model="multinomial")): a target of K >= 2
classes, numbers or words, fitted exactly by Newton's method (solvers/multinomial.py).

1. The classes are agreed by every rank as a column's levels are (one allgather): the union of
   every rank's, sorted (numbers as numbers, words as patsy sorts them), so that a class only
   one rank's rows hold is still a class. The first is the reference.
2. The rows go where the layout puts them, as fit()'s do (data/memory.py), their target each
   row's class's number; a file's rows are read as fit()'s DataFrame is (data/formula_files.py).
3. Newton's method; the statistics and the scores (statistics/multinomial.py); rank 0 reports."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvd_linreg.data.frames import plain
from hvd_linreg.errors import ConvergenceWarning, UsageError, agreed

# What the multinomial model does not take yet, and why
NOT_YET = {
    "offset": "an offset is not taken by the multinomial model yet",
    "exposure": "an exposure is not taken by the multinomial model",
    "no_intercept": "a multinomial model without intercepts is not fitted yet",
    "plot": "--plot of a multinomial model is not drawn yet",
    "formula": "--formula with --model multinomial is not read yet: use --features",
    "robust": "robust standard errors of a multinomial model are not computed yet",
}


def check_settings(cfg) -> None:
    """Refuse, before any row is read, what the multinomial model does not take."""
    given = {
        "offset": cfg.offset is not None,
        "exposure": cfg.exposure is not None,
        "no_intercept": cfg.no_intercept,
        "plot": cfg.plot is not None,
        "formula": cfg.formula is not None,
        "robust": cfg.cov_type != "nonrobust",
    }
    for name, value in given.items():
        if value:
            raise UsageError(NOT_YET[name])


def agreed_classes(job, y, max_levels: int, column: str) -> tuple[np.ndarray, list]:
    """Each row's class's number (float64) and the classes, the same on every rank."""
    from hvd_linreg.data import frames
    from hvd_linreg.data.categorical import sorted_levels

    def local():
        import pandas as pd

        cells = y if hasattr(y, "isna") else pd.Series(np.asarray(y))
        missing = np.flatnonzero(cells.isna().to_numpy())
        if len(missing):
            raise UsageError(
                f"row {missing[0]} of this rank's rows has no class in {column!r}: drop such "
                "rows (--missing drop)"
            )
        frames.refuse_mixed(cells.to_frame(column))
        words = frames.kind(cells) is not None
        values = cells.map(frames.text_of) if words else cells.map(frames.number_of)
        return len(cells), words, sorted(set(values.tolist()), key=str), values

    count, words, mine, values = agreed(job, local)
    every = job.allgather((count, words, mine), name="multinomial_classes")
    kinds = {theirs for n, theirs, _ in every if n}
    if len(kinds) > 1:
        raise UsageError(f"the target {column!r} holds words on some ranks, numbers on others")
    union = set().union(*(theirs for _, _, theirs in every))
    classes = sorted_levels(union) if words else sorted(union)
    if len(classes) < 2:
        raise UsageError(
            f"the target {column!r} has one class ({', '.join(map(str, classes))}): a "
            "multinomial model needs two or more"
        )
    if len(classes) > max_levels:
        raise UsageError(
            f"the target {column!r} has {len(classes)} classes, more than --max_levels "
            f"{max_levels}: is it an ID or a number? Raise --max_levels for that many classes"
        )
    at = {c: i for i, c in enumerate(classes)}
    return values.map(at).to_numpy(np.float64), classes


def file_shard(cfg, job):
    """This rank's shard of --data's rows and the classes of --target (the last column)."""
    import pandas as pd

    from hvd_linreg.data.files import data_files
    from hvd_linreg.data.formula_files import complete_rows, rank_frame
    from hvd_linreg.data.memory import memory_shard
    from hvd_linreg.data.rows import Carried

    files = agreed(job, lambda: data_files(cfg.data))
    frame, first = rank_frame(files, job, None, "--model multinomial")
    carried = Carried(cfg.weights, None, None, cfg.fold_column, cfg.groups)
    target = cfg.target or str(frame.columns[-1])
    known = {target, *carried.names}
    features = list(cfg.feature_columns or [c for c in frame.columns if c not in known])
    missing = [c for c in [*features, target, *carried.names] if c not in frame.columns]
    if missing:
        raise UsageError(f"--data {cfg.data} has no column {', '.join(missing)}")
    frame = frame[[*features, target, *carried.names]]
    for name in cfg.categorical_columns:
        frame[name] = frame[name].astype("category")
    frame, dropped = complete_rows(job, frame, first, carried, cfg.missing, files[0])
    codes, classes = agreed_classes(job, frame[target], cfg.max_levels, target)
    given = {n: frame[n].to_numpy() for n in carried.names}
    weights, fold, groups = (given.get(n) for n in (carried.weight, carried.fold, carried.group))
    y = pd.Series(codes, name=target)
    shard = memory_shard(
        cfg, job, frame[features], y, weights, None, fold, groups, names=carried, source=cfg.data
    )
    shard.dropped = dropped
    return shard, classes


def rows_shard(cfg, job, X, y, weights, dropped=None):
    """fit()'s rows as a shard (dropped: the rows missing="drop" dropped), and the classes of
    y."""
    from hvd_linreg.data.memory import memory_shard

    name = str(getattr(y, "name", None) or "y")
    codes, classes = agreed_classes(job, y, cfg.max_levels, name)
    target = codes if getattr(y, "name", None) is None else _named(codes, name)
    shard = memory_shard(cfg, job, X, target, weights)
    shard.dropped = dropped
    return shard, classes


def run(cfg, job, family, load) -> MultinomialResult:
    """The recipe: load() -> (shard, classes), then the fit (Newton's method, or SGD and, for
    its optimality gap, Newton's), its statistics and its scores; rank 0 prints the summary
    (unless quiet) and writes --metrics_json and --export."""
    from hvd_linreg import checkpoint, report

    began = time.perf_counter()
    check_settings(cfg)

    def outputs():
        if job.is_root:  # rank 0 writes them: checked before the fit, not after
            from hvd_linreg import export

            report.check_writable("--metrics_json", cfg.metrics_json)
            export.check_target(cfg.export)
            return checkpoint.prepare_dir(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
        return None

    ckpt_dir = agreed(job, outputs)
    shard, classes = load()
    family = family.with_classes(classes)
    announce(cfg, job, family, shard)
    sgd = train(cfg, job, family, shard, ckpt_dir) if cfg.solver == "sgd" else None
    return finish(cfg, job, family, shard, sgd, began)


def announce(cfg, job, family, shard) -> None:
    """The header line: the job, the data, the run and the classes."""
    from hvd_linreg import report

    if job.is_root and not cfg.quiet:
        classes = f"{len(family.labels)} classes"
        job.log(f"{report.header_line(cfg, family, job, shard)}, {classes}")


def finish(cfg, job, family, shard, sgd, began: float) -> MultinomialResult:
    """After SGD (sgd: its TrainingResult) or none: Newton's fit where wanted, the statistics,
    the scores of the run's B; rank 0 reports."""
    from hvd_linreg.statistics import multinomial as statistics

    classes = family.labels
    names = (*(shard.feature_names or (f"w[{j}]" for j in range(shard.num_features))), "b")
    if cfg.penalized:  # the elastic net's path (an exact fit)
        path, stats, B = penalized(cfg, job, shard, names, classes)
        fit = None
    else:
        path, fit = None, optimum(cfg, job, shard, len(classes))
        stats = None if fit is None else statistics.describe(fit, names, classes)
        B = fit.params if sgd is None else sgd.params
    training = statistics.scores(job, shard.blocks(), B, classes, "multinomial_train")
    validation = None
    if shard.validation is not None:
        held = [shard.validation]
        validation = statistics.scores(job, held, B, classes, "multinomial_valid")
    exact_loss, gap = None, None
    if sgd is not None and fit is not None:
        exact_loss = family.loss(job, shard, fit.params)
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
    )
    _report(cfg, job, result)
    return result


def train(cfg, job, family, shard, ckpt_dir):
    """--solver sgd: averaged SGD on the mean log-loss through Horovod's DistributedOptimizer,
    by the trainer every family's SGD has (checkpoints, resume, held-out scores)."""
    from hvd_linreg.trainer import make_trainer

    for warning in shard.warnings(cfg):
        job.warn(warning)
    trainer = make_trainer(cfg, family, job, shard)
    trainer.use(job, shard, ckpt_dir)
    trainer.start()
    return trainer.fit()


def penalized(cfg, job, shard, names, classes):
    """The elastic net's path (solvers/multinomial_path.py): the fit, its statistics, and the
    chosen model as the unpenalized fit's B (the same probabilities)."""
    from hvd_linreg.solvers import multinomial_path
    from hvd_linreg.solvers.path_settings import settings_for
    from hvd_linreg.statistics import multinomial_path as statistics

    path = multinomial_path.fit(job, shard, len(classes), settings_for(cfg, job, shard))
    return path, statistics.describe(path, names, classes), path.reference_params


def optimum(cfg, job, shard, K: int):
    """Newton's fit: the run's, or an SGD run's exact optimum where it wants one (None)."""
    from hvd_linreg.solvers import multinomial as solver
    from hvd_linreg.solvers import wants_optimum

    if cfg.solver == "sgd" and not wants_optimum(cfg, shard):
        return None
    fit = solver.fit(job, shard, K, cfg.tol, cfg.max_iter, cfg.l2)
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
        from hvd_linreg import multinomial_model

        agreed(job, lambda: multinomial_model.save(cfg, result) if job.is_root else None)


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
    def symmetric_params(self) -> np.ndarray:
        """The coefficients in scikit-learn's symmetric form, (F + 1) x K, a column per class:
        each row centred over the classes (the first class's column of B being 0), as
        scikit-learn's multinomial coef_ (transposed) and intercept_ are."""
        if self.path is not None:  # the elastic net's own: glmnet's, not centred
            return self.path.params
        B = np.column_stack([np.zeros(len(self.params)), self.params])
        return B - B.mean(axis=1, keepdims=True)

    def predict_proba(self, X) -> np.ndarray:
        """Each row's probability of each class (rows x K, in classes' order)."""
        from hvd_linreg.data.memory import features_of
        from hvd_linreg.solvers.multinomial import log_probabilities

        shard = self.shard
        if shard.levels:
            from hvd_linreg.data import frames

            X = frames.new_rows(X, shard.columns, shard.levels)
        X = features_of(X, self.params.shape[0] - 1)
        return np.exp(log_probabilities(X, self.params))

    def predict(self, X) -> np.ndarray:
        """Each row's most probable class."""
        return np.asarray(self.classes, dtype=object)[self.predict_proba(X).argmax(axis=1)]

    def summary_lines(self, limit: int | None = None) -> list[str]:
        from hvd_linreg.statistics.multinomial import score_lines

        lines = ["Summary:", *self._sgd_lines()]
        lines += [] if self.statistics is None else self.statistics.lines(limit)
        lines += score_lines("training", self.training, self.classes)
        if self.validation is not None:
            lines += score_lines("validation", self.validation, self.classes)
        lines.append(f"  wall time: {self.wall_s:.3f} s")
        return lines

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

        shard, B = self.shard, self.params
        return {
            "model": "multinomial",
            "solver": self.cfg.solver,
            "num_samples": shard.num_samples,
            "rows_dropped_missing": shard.num_dropped,
            "num_features": shard.num_features,
            "features": list(self.names[:-1]),
            "classes": [plain(c) for c in self.classes],
            "reference_class": plain(self.classes[0]),
            "w": B[:-1].T.tolist(),
            "b": B[-1].tolist(),
            **self._sgd_json(),
            "statistics": None if self.statistics is None else self.statistics.as_json(),
            **({} if self.path is None else self.statistics.sections()),
            "training_scores": self.training,
            "validation": self.validation,
            "wall_s": self.wall_s,
            "versions": versions(),
            "config": self.cfg.as_dict(),
        }

    def _sgd_json(self) -> dict[str, Any]:
        """An SGD run's own keys: its start, steps, loss, gap and loss history."""
        if self.sgd is None:
            return {}
        sgd, start = self.sgd, np.asarray(self.sgd.initial_params)
        return {
            "initial_w": start[:-1].T.tolist(),
            "initial_b": start[-1].tolist(),
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


def _named(codes: np.ndarray, name: str):
    import pandas as pd

    return pd.Series(codes, name=name)
