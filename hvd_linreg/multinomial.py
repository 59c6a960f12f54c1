"""The multinomial recipe (--model multinomial, fit(model="multinomial")): a target of K >= 2
classes, numbers or words, fitted exactly by Newton's method (solvers/multinomial.py).

1. The classes are agreed by every rank as a column's levels are (one allgather): the union of
   every rank's, sorted (numbers as numbers, words as patsy sorts them), so that a class only
   one rank's rows hold is still a class. The first is the reference.
2. The rows go where the layout puts them, as fit()'s do (data/memory.py), their target each
   row's class's number, with their weights and offsets; a file's rows are read as fit()'s
   DataFrame is (data/formula_files.py). A formula's right side builds the features as the
   other models' do, and its left side names the target column as it is.
3. Newton's method; the statistics and the scores (statistics/multinomial.py); rank 0 reports,
   and draws --plot from every rank's rows."""

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
    "no_intercept": "a multinomial model without intercepts is not fitted yet",
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
        "no_intercept": cfg.no_intercept,
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
    """This rank's shard of --data's rows and the classes of the target: --target (the last
    column by default) and --features (the others), or --formula's left side and the columns
    its right side builds (the shard stores the formula for --export)."""
    from hvd_linreg.data import formulas
    from hvd_linreg.data.files import data_files
    from hvd_linreg.data.formula_files import complete_rows, rank_frame
    from hvd_linreg.data.rows import Carried

    formula = cfg.formula
    target = formulas.target_column(formula) if formula else cfg.target
    files = agreed(job, lambda: data_files(cfg.data))
    carried = Carried(cfg.weights, cfg.offset, None, cfg.fold_column, cfg.groups)
    wanted = None if formula is None else {*formulas.names_in(formula), *carried.names}
    frame, first = rank_frame(files, job, wanted, "--model multinomial")
    target = target or str(frame.columns[-1])
    frame = _columns(cfg, frame, target, carried)
    frame, dropped = complete_rows(job, frame, first, carried, cfg.missing, files[0])
    design = None
    if formula is None:
        X, y = frame.drop(columns=[target, *carried.names]), frame[target]
    else:
        design = formula_design(job, formula, frame, cfg.max_levels)
        X, y = design.X, design.y
    given = {n: frame[n].to_numpy() for n in carried.names}
    roles = dict(weights=carried.weight, offset=carried.offset, fold=carried.fold)
    columns = {role: given.get(name) for role, name in {**roles, "groups": carried.group}.items()}
    return rows_shard(cfg, job, X, y, dropped, design, **columns, names=carried, source=cfg.data)


def formula_design(job, formula: str, data, max_levels: int):
    """A multinomial model's formula on this rank's rows of data: the right side's columns
    built as the other models' are (data/formulas.py), and as the target (y) the column the
    left side names, as it is: its values, words or numbers, are the classes."""
    from dataclasses import replace

    from hvd_linreg.data import formulas

    target = formulas.target_column(formula)
    if target not in data.columns:
        raise UsageError(f"the formula {formula!r} names the target {target!r}: no such column")
    # the left side is not a design column here: formulaic is handed a number in its place
    design = formulas.design(job, formula, data.assign(**{target: 0.0}), max_levels)
    return replace(design, y=data[target].rename(target))


def _columns(cfg, frame, target: str, carried):
    """The frame's columns the run reads, the features first (--features', else every other
    column; a formula's: those it names), then the target and the carried columns."""
    known = {target, *carried.names}
    features = list(cfg.feature_columns or [c for c in frame.columns if c not in known])
    missing = [c for c in [*features, target, *carried.names] if c not in frame.columns]
    if missing:
        raise UsageError(f"--data {cfg.data} has no column {', '.join(missing)}")
    frame = frame[[*features, target, *carried.names]]
    for name in cfg.categorical_columns:
        frame[name] = frame[name].astype("category")
    return frame


def rows_shard(cfg, job, X, y, dropped=None, design=None, **carried):
    """The rows X, y as a shard, its target each row's class's number, and the classes of y.
    dropped: the rows --missing drop dropped; design: a formula's, which the shard keeps for
    --export and predict_proba; carried: memory_shard's weights, offset, fold, groups, names
    and source."""
    from hvd_linreg.data.memory import memory_shard

    name = str(getattr(y, "name", None) or "y")
    codes, classes = agreed_classes(job, y, cfg.max_levels, name)
    target = codes if getattr(y, "name", None) is None else _named(codes, name)
    shard = memory_shard(cfg, job, X, target, **carried)
    shard.formula = None if design is None else design.stored()
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
            report.check_writable("--plot", cfg.plot)
            export.check_target(cfg.export)

    agreed(job, outputs)
    shard, classes = load()
    K = len(classes)
    if cfg.plot and shard.num_features != 1:  # every rank has the same features
        raise UsageError(
            "--plot draws a multinomial model's probability of each class over its one "
            f"feature, and this one has {shard.num_features}: fit one feature, or leave out "
            "--plot"
        )
    if job.is_root and not cfg.quiet:
        job.log(f"{report.header_line(cfg, family, job, shard)}, {K} classes")
    fit = solver.fit(job, shard, K, cfg.tol, cfg.max_iter, cfg.l2)
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
        cfg, shard, classes, stats, training, validation, time.perf_counter() - began
    )
    if job.is_root and not cfg.quiet:
        for line in result.summary_lines(limit=statistics.SHOWN_COEFFICIENTS):
            job.log(line)
    if job.is_root and cfg.metrics_json:
        report.write_json(cfg.metrics_json, result.to_dict())
    if cfg.export:
        from hvd_linreg import multinomial_model

        agreed(job, lambda: multinomial_model.save(cfg, result) if job.is_root else None)
    if cfg.plot:
        _plot(cfg.plot, job, result)
    return result


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
    but the first (its last row the intercepts), its statistics and scores."""

    cfg: Any
    shard: Any
    classes: list
    statistics: Any  # statistics/multinomial.py's MultinomialStatistics
    training: dict
    validation: dict | None
    wall_s: float

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
            "versions": versions(),
            "config": self.cfg.as_dict(),
        }


def _named(codes: np.ndarray, name: str):
    import pandas as pd

    return pd.Series(codes, name=name)
