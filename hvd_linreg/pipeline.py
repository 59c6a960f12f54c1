"""The recipe, top to bottom: start Horovod, load this rank's shard, announce the run, fit
(averaged SGD, or the exact solver), solve exactly for comparison, report.

The command line's plain runs follow run() below, and hvd_linreg.fit (library.py) the same
steps on the rows its caller passes; elastic runs (elastic.py) take them inside Horovod's
elastic loop, as steps_for(family) gives them: prepare, train and finish are the ones defined
here, or, for a target of classes, multinomial.py's.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hvd_linreg import families, scoring, solvers
from hvd_linreg.config import Config
from hvd_linreg.data import Shard, load_shard, targets
from hvd_linreg.errors import ConvergenceWarning, UsageError, agreed
from hvd_linreg.matrix import DenseMatrix
from hvd_linreg.model_file import export
from hvd_linreg.plot import save_plot
from hvd_linreg.report import Report, TrainingResult, check_writable, header_line, write_json
from hvd_linreg.runtime import ranks
from hvd_linreg.runtime.hosts import keepalive_warning
from hvd_linreg.runtime.ranks import Job
from hvd_linreg.sgd import checkpoint
from hvd_linreg.solvers import irls, path, wide_path
from hvd_linreg.solvers.path_settings import settings_for
from hvd_linreg.solvers.penalty import Penalty
from hvd_linreg.solvers.start import iterates

if TYPE_CHECKING:
    from hvd_linreg.sgd.trainer import Trainer


def run(cfg: Config) -> int:
    """A plain (not elastic) run: the command line's."""
    job = ranks.init(verbose=cfg.verbose, horovod=needs_horovod(cfg))
    cfg = with_formula(cfg)
    family = family_for(cfg)
    model = start_model(cfg, family, job)
    if family.CLASSES:  # K classes: multinomial.py's recipe
        from hvd_linreg import multinomial
        from hvd_linreg.data import classes

        def load():
            shard, labels = classes.file_shard(cfg, job)
            if model is not None:  # every rank has the same model, names and classes
                export.check_start(model, shard, labels)
            return shard, labels

        multinomial.run(cfg, job, family, load, None if model is None else model.theta)
        return 0
    shard, ckpt_dir = prepare(cfg, family, job)
    if model is not None:
        export.check_start(model, shard)
    start = None if model is None else model.theta
    result, optimum = fit(cfg, family, job, shard, ckpt_dir, start)
    finish(cfg, family, job, shard, result, optimum)
    return 0


class Steps:
    """The recipe's steps, for a caller that runs them itself (elastic.py, inside Horovod's
    elastic loop): a family of one mean's here, ClassSteps for a target of classes."""

    @staticmethod
    def check(cfg: Config) -> None:
        """Refuse, before any row is read, what the recipe does not take."""

    @staticmethod
    def prepare(cfg: Config, family, job: Job):
        """(the family for this run's rows, this rank's shard, the checkpoint directory)."""
        return (family, *prepare(cfg, family, job))

    @staticmethod
    def announce(cfg: Config, family, job: Job, shard: Shard) -> None:
        announce(cfg, family, job, shard)

    @staticmethod
    def train(cfg: Config, family, job: Job, shard: Shard, trainer: Trainer, commit=None):
        """SGD's TrainingResult, and the exact optimum it is measured against (or None)."""
        return train(cfg, family, job, shard, trainer, commit)

    @staticmethod
    def finish(cfg: Config, family, job: Job, shard: Shard, result, optimum, began: float):
        """Score, report and write what was asked for (began: the run's start)."""
        finish(cfg, family, job, shard, result, optimum)


class ClassSteps(Steps):
    """A target of classes (multinomial.py): the family is made for the classes that the ranks
    agree the rows hold; training gives SGD's result alone, and finish fits the exact optimum
    its gap is measured against, with the statistics and the report."""

    @staticmethod
    def check(cfg: Config) -> None:
        from hvd_linreg import multinomial

        multinomial.check_settings(cfg)

    @staticmethod
    def prepare(cfg: Config, family, job: Job):
        from hvd_linreg.data import classes

        read = {}

        def load():
            shard, read["classes"] = classes.file_shard(cfg, job)
            return shard

        shard, ckpt_dir = prepare(cfg, family, job, load)
        return family.with_classes(read["classes"]), shard, ckpt_dir

    @staticmethod
    def announce(cfg: Config, family, job: Job, shard: Shard) -> None:
        from hvd_linreg import multinomial

        multinomial.announce(cfg, job, family, shard)

    @staticmethod
    def train(cfg: Config, family, job: Job, shard: Shard, trainer: Trainer, commit=None):
        return trainer.fit(commit), None

    @staticmethod
    def finish(cfg: Config, family, job: Job, shard: Shard, result, optimum, began: float):
        from hvd_linreg import multinomial

        multinomial.finish(cfg, job, family, shard, result, began)


def steps_for(family) -> type[Steps]:
    """The recipe's steps for this family: a target of classes has its own."""
    return ClassSteps if family.CLASSES else Steps


def with_formula(cfg: Config) -> Config:
    """The settings a --formula implies: `- 1`, no intercept."""
    if cfg.formula is None:
        return cfg
    from hvd_linreg.data import formulas

    return formulas.settings(cfg, cfg.formula, formulas.has_intercept(cfg.formula))


def start_model(cfg: Config, family, job: Job):
    """--start's model (None without it), read by rank 0 before any row, as --export's is
    written, and handed to every rank: its file needs to be on rank 0's host alone."""
    if cfg.start is None:
        return None
    if not iterates(family):
        raise UsageError(
            "--start is where IRLS or Newton's method begins: --model linear's least squares "
            "is one factorisation, with nothing to start"
        )

    def read():
        return export.read_start(cfg.start, family) if job.is_root else None

    return job.broadcast(agreed(job, read))


def family_for(cfg: Config):
    """The model family the settings ask for, with the solver they ask of it."""
    family = families.for_config(cfg)
    if cfg.solver == "exact" and not family.exact:
        raise UsageError(f"--model {cfg.model} has no exact solver: use --solver sgd")
    return family


def prepare(cfg: Config, family, job: Job, load=None) -> tuple[Shard, Path | None]:
    """This rank's shard (by load(), default: load_shard's of the settings' data), and rank
    0's checked output paths and checkpoint directory."""
    # Each rank reads only its own rows, and rank 0 checks the paths it will write, before any
    # training: a problem any rank sees stops all of them together, with one message.
    shard, ckpt_dir, error = None, None, None
    try:
        shard = (load or _loader(cfg, family, job))()
        if job.is_root:
            check_writable("--metrics_json", cfg.metrics_json)
            check_writable("--plot", cfg.plot)
            export.check_target(cfg.export)
            ckpt_dir = checkpoint.prepare_dir(cfg.checkpoint_dir) if cfg.checkpoint_dir else None
    except UsageError as e:
        error = e
    job.agree(error)
    shard = _dense_wide(cfg, family, shard)
    if shard.structured:  # every rank has the same columns: every rank decides the same
        solvers.check_wide(cfg, shard)
    # The target against the family's domain: refused on every rank where it is out, or the
    # shard with the target as the family reads it (a binary family's two values as 0 and 1).
    shard = targets.checked(job, shard, family)
    for warning in shard.warnings(cfg):
        job.warn(warning)
    return shard, ckpt_dir


def _dense_wide(cfg: Config, family, shard: Shard) -> Shard:
    """A dense shard of more columns than the family's dense exact solver takes, as a design
    matrix (matrix/): the exact solvers' wide route fits it (working sets for a path, blocks
    or conjugate gradients without a penalty), as a sparse design's. Every rank has the same
    columns: every rank decides the same."""
    wide = shard.num_features > family.MAX_EXACT_FEATURES
    if cfg.solver != "exact" or not wide or not isinstance(shard.X, np.ndarray):
        return shard
    if shard.table is not None:  # rows read as they are used: the dense solver's refusal
        return shard
    if not cfg.penalized and not cfg.l2 and shard.num_samples <= shard.num_features:
        raise UsageError(
            f"{shard.num_samples} rows and {shard.num_features} features: without a penalty "
            "the fit has no unique solution; fit with --l2 > 0, or the elastic net's path "
            "(--alpha, --l1_ratio, --cv)"
        )
    validation = shard.validation
    if validation is not None:
        validation = validation._replace(X=DenseMatrix(validation.X))
    return replace(shard, X=DenseMatrix(shard.X), validation=validation)


def _loader(cfg: Config, family, job: Job):
    """The settings' rows: --data's through a --formula, --data's, or synthetic rows."""
    if cfg.formula is not None:
        from hvd_linreg.data.formula_files import formula_shard

        return lambda: formula_shard(cfg, job)
    return lambda: load_shard(cfg, job.rank, job.size, job, family.synthetic_target)


def announce(cfg: Config, family, job: Job, shard: Shard) -> None:
    """The header line, and what the user should know before training starts."""
    if not cfg.quiet:
        job.log(header_line(cfg, family, job, shard))
    warning = keepalive_warning(job.hosts, job.controller, job.stall_limit_s)
    if warning:
        job.warn(warning)


def fit(cfg: Config, family, job: Job, shard: Shard, ckpt_dir: Path | None, start=None):
    """Announce the run, then fit: (TrainingResult, the exact optimum or None); start: IRLS's
    first coefficients (fit()'s start=, --start's model's)."""
    announce(cfg, family, job, shard)
    if cfg.solver == "exact":
        return solve(cfg, family, job, shard, start)
    from hvd_linreg.sgd.trainer import make_trainer

    trainer = make_trainer(cfg, family, job, shard)
    trainer.use(job, shard, ckpt_dir)
    trainer.start()
    return train(cfg, family, job, shard, trainer)


def needs_horovod(cfg: Config) -> bool:
    """Whether a run needs Horovod, and so TensorFlow: SGD does (hvd.DistributedOptimizer), an
    exact fit does not (its collectives are MPI's, or none in one process)."""
    return cfg.solver == "sgd"


def train(cfg: Config, family, job: Job, shard: Shard, trainer: Trainer, commit=None):
    """SGD from the trainer's start, then the exact optimum that its result is measured
    against: (TrainingResult, the optimum or None)."""
    result = trainer.fit(commit)
    return result, optimum(cfg, family, job, shard)


def solve(cfg: Config, family, job: Job, shard: Shard, start=None):
    """--solver exact: (the optimum as a TrainingResult, the optimum)."""
    job = replace(job, shows_progress=not cfg.quiet)  # rank 0 shows a long fit's progress
    began = time.perf_counter()
    best = optimum(cfg, family, job, shard, start)
    if best is None:
        raise UsageError(f"--solver exact handles up to {family.MAX_EXACT_FEATURES} features")
    wall_s = time.perf_counter() - began
    return TrainingResult(None, best.params, best.loss, 0, 0, wall_s), best


def optimum(cfg: Config, family, job: Job, shard: Shard, start=None):
    """The exact optimum (of --l2's ridge objective) over the whole dataset, the same on every
    rank; None above the family's feature limit, or for an SGD run that does not want it
    (Report.exact_skipped says why). IRLS stopped by --max_iter: rank 0 warns."""
    too_wide = not shard.structured and shard.num_features > family.MAX_EXACT_FEATURES
    if not family.exact or too_wide or not solvers.wants_optimum(cfg, shard):
        return None
    if cfg.penalized:  # a wide design's path on working sets
        fitter = wide_path if shard.structured else path
        return fitter.fit(job, shard, family, settings_for(cfg, job, shard))
    # The recipe pairs the family with its solver: the solver knows the family only as Family.
    best = solvers.optimum(
        job,
        shard,
        family,
        Penalty.ridge(cfg.l2, shard.num_features),
        shard.feature_names,
        cfg.cov_type,
        not cfg.no_intercept,
        irls.Limits(cfg.tol, cfg.max_iter),
        start,
    )
    if not best.converged:
        job.warn(irls.not_converged(best), ConvergenceWarning)
    return best


# Scores that gather every row (the exact ROC AUC: 24 bytes a row on every rank) are taken on
# the training rows up to this many; the held-out rows are a fraction of them.
TRAINING_SCORES_GATHERED_ROWS = 4_000_000


def training_scores(family, job: Job, shard: Shard, result: TrainingResult):
    """The family's scores on the training rows at the end, each row by its weight: one more
    pass; None where they would gather more than TRAINING_SCORES_GATHERED_ROWS rows."""
    if scoring.gathers_rows(family) and shard.num_samples > TRAINING_SCORES_GATHERED_ROWS:
        return None
    return scoring.scores(job, family, result.params, shard.blocks)


def finish(
    cfg: Config,
    family,
    job: Job,
    shard: Shard,
    result: TrainingResult,
    optimum,
    speak: bool = True,
) -> Report:
    """Score the held-out rows, then rank 0 reports (speak: prints the summary) and writes
    what was asked for. The report, on every rank."""
    validation = None
    if shard.num_validation:
        validation = scoring.scores(job, family, result.params, shard.validation_blocks)
    result = replace(
        result, validation=validation, training=training_scores(family, job, shard, result)
    )
    summary = Report(cfg, job, shard, result, optimum, family)
    error = None
    if job.is_root:  # only rank 0 writes, so ranks never race on the same file
        for line in summary.summary_lines() if speak else ():
            job.log(line)
        metrics = summary.metrics()
        if cfg.metrics_json:
            write_json(cfg.metrics_json, metrics)
        if cfg.plot:
            save_plot(cfg.plot, summary)
        if cfg.export:
            try:
                export.save(cfg, family, shard, result.params, metrics)
                if speak:
                    job.log(export.written(cfg.export))
            except UsageError as e:  # --export was taken while training ran
                error = e
    if cfg.export:
        job.agree(error)  # every rank exits as rank 0 does
    return summary
