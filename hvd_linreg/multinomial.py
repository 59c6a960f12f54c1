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
    "penalized": "the elastic net's path of a multinomial model is not fitted yet",
    "offset": "an offset is not taken by the multinomial model yet",
    "exposure": "an exposure is not taken by the multinomial model",
    "no_intercept": "a multinomial model without intercepts is not fitted yet",
    "plot": "--plot of a multinomial model is not drawn yet",
    "formula": "--formula with --model multinomial is not read yet: use --features",
    "robust": "robust standard errors of a multinomial model are not computed yet",
}


def check_settings(cfg) -> None:
    """Refuse, before any row is read, what the multinomial model does not take."""
    if cfg.solver != "exact":
        raise UsageError(
            "--model multinomial is fitted by --solver exact (Newton's method on the whole "
            "likelihood); SGD does not fit it yet"
        )
    given = {
        "penalized": cfg.penalized,
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
    """The recipe: load() -> (shard, classes), then the fit, its statistics and its scores;
    rank 0 prints the summary (unless quiet) and writes --metrics_json."""
    from hvd_linreg import export, report
    from hvd_linreg.solvers import multinomial as solver
    from hvd_linreg.statistics import multinomial as statistics

    began = time.perf_counter()
    check_settings(cfg)

    def outputs():
        if job.is_root:  # rank 0 writes them: checked before the fit, not after
            report.check_writable("--metrics_json", cfg.metrics_json)
            export.check_target(cfg.export)

    agreed(job, outputs)
    shard, classes = load()
    K = len(classes)
    if job.is_root and not cfg.quiet:
        job.log(f"{report.header_line(cfg, family, job, shard)}, {K} classes")
    fitting = time.perf_counter()
    fit = solver.fit(job, shard, K, cfg.tol, cfg.max_iter, cfg.l2)
    fit_s = time.perf_counter() - fitting
    if not fit.converged:
        job.warn(
            f"Newton's method did not converge in --max_iter {cfg.max_iter} iterations: the "
            "statistics are the last iterate's; raise --max_iter",
            ConvergenceWarning,
        )
    names = (*(shard.feature_names or (f"w[{j}]" for j in range(shard.num_features))), "b")
    stats = statistics.describe(fit, names, classes)
    training = statistics.scores(job, shard.blocks(), fit.params, classes, "multinomial_train")
    validation = None
    if shard.validation is not None:
        held = [shard.validation]
        validation = statistics.scores(job, held, fit.params, classes, "multinomial_valid")
    result = MultinomialResult(
        cfg, shard, classes, stats, training, validation, time.perf_counter() - began, fit_s
    )
    if job.is_root and not cfg.quiet:
        for line in result.summary_lines(limit=statistics.SHOWN_COEFFICIENTS):
            job.log(line)
    if job.is_root and cfg.metrics_json:
        report.write_json(cfg.metrics_json, result.to_dict())
    if cfg.export:
        from hvd_linreg import multinomial_model

        agreed(job, lambda: multinomial_model.save(cfg, result) if job.is_root else None)
    return result


@dataclass(frozen=True)
class MultinomialResult:
    """A multinomial fit, the same on every rank: B, (F + 1) x (K - 1), a column per class
    but the first (its last row the intercepts), its statistics and scores."""

    cfg: Any
    shard: Any
    classes: list
    statistics: Any  # statistics/multinomial.py's MultinomialStatistics
    training: dict
    validation: dict | None
    wall_s: float  # the whole run: the rows read, the fit, its statistics and scores
    fit_s: float  # Newton's method alone, from the loaded rows to the coefficients

    @property
    def params(self) -> np.ndarray:
        return self.statistics.estimates

    @property
    def bse(self) -> np.ndarray:
        return self.statistics.std_errors

    @property
    def names(self) -> tuple[str, ...]:
        return self.statistics.names

    @property
    def symmetric_params(self) -> np.ndarray:
        """The coefficients in scikit-learn's symmetric form, (F + 1) x K, a column per class:
        each row centred over the classes (the first class's column of B being 0), as
        scikit-learn's multinomial coef_ (transposed) and intercept_ are."""
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

        lines = ["Summary:", *self.statistics.lines(limit)]
        lines += score_lines("training", self.training, self.classes)
        if self.validation is not None:
            lines += score_lines("validation", self.validation, self.classes)
        lines.append(f"  wall time: {self.wall_s:.3f} s")
        return lines

    def summary(self) -> str:
        return "\n".join(self.summary_lines())

    def to_dict(self) -> dict[str, Any]:
        """The metrics JSON that --metrics_json writes."""
        from hvd_linreg.report import versions

        shard, B = self.shard, self.params
        return {
            "model": "multinomial",
            "num_samples": shard.num_samples,
            "rows_dropped_missing": shard.num_dropped,
            "num_features": shard.num_features,
            "features": list(self.names[:-1]),
            "classes": [plain(c) for c in self.classes],
            "reference_class": plain(self.classes[0]),
            "w": B[:-1].T.tolist(),
            "b": B[-1].tolist(),
            "statistics": self.statistics.as_json(),
            "training_scores": self.training,
            "validation": self.validation,
            "wall_s": self.wall_s,
            "fit_s": self.fit_s,
            "versions": versions(),
            "config": self.cfg.as_dict(),
        }


def _named(codes: np.ndarray, name: str):
    import pandas as pd

    return pd.Series(codes, name=name)
