"""The run's configuration: every knob with its default, validated once, then frozen."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from hvd_linreg.constraints import (
    between_1_and_2,
    check_columns,
    check_elastic,
    check_iterations,
    check_penalty,
    check_steps,
    column_names,
    control,
    finite_from_0,
    folds,
    fraction,
    int_from_0,
    one_of,
    open_unit_interval,
    optional,
    positive_finite,
    positive_int,
    setting,
    strengths,
    unit_interval,
)

SOLVERS = ("sgd", "exact")
OPTIMIZERS = ("sgd", "momentum", "adam")
DTYPES = ("float32", "float64")
OPTIMALITY_GAP = ("auto", "always", "never")
COV_TYPES = ("nonrobust", "HC0", "HC1", "cluster")  # solvers/sandwich.py
MISSING = ("error", "drop")  # data/missing.py
INDEX_BASES = ("auto", "0", "1")  # data/svmlight.py
SELECT = ("min", "1se")  # solvers/path.py
FOLD_ALPHA = ("same", "sum")  # solvers/path.py
TYPE_MEASURES = ("deviance", "mse", "mae", "class", "auc")  # scoring/cv_measures.py
MAX_LEVELS = 1000  # --max_levels' default: more in one column is an ID or free text
SYNTHETIC_SAMPLES = 1000  # the seed's dataset
SYNTHETIC_FEATURES = 1


# Defaults are the seed program's (../shared/seed): 1000 steps, lr 0.01, batch 100, logs every 100.
@dataclass(frozen=True)
class Config:
    num_steps: int = setting(1000, "training steps", "N", check=positive_int)
    learning_rate: float = setting(0.01, "SGD learning rate", "LR", check=positive_finite)
    batch_size: int = setting(
        100, "samples per rank per step; the global batch is B x ranks", "B", check=positive_int
    )
    num_samples: int | None = setting(
        None,
        f"synthetic samples in the whole dataset, over all ranks "
        f"(default {SYNTHETIC_SAMPLES}; with --data, every row of the file)",
        "N",
        check=optional(positive_int),
    )
    num_features: int | None = setting(
        None,
        f"synthetic features per sample (default {SYNTHETIC_FEATURES})",
        "F",
        check=optional(positive_int),
    )
    seed: int = setting(0, "seed for the synthetic data and the initial weights", check=int_from_0)
    log_every: int = setting(100, "log 'Step: N Loss: X' every N steps", "N", check=positive_int)
    data: str | None = setting(
        None,
        "train on a file instead: .npy (last column = target), .npz (arrays X, y), "
        ".csv (header line; target = last column or --target), .parquet; or a directory or "
        "glob of .npy, .csv or .parquet files, read in the order of their paths",
        "PATH",
    )
    target: str | None = setting(
        None, "CSV or Parquet column to predict (default: the last one)", "NAME"
    )
    features: str | None = setting(
        None,
        "CSV or Parquet columns to use as features, comma-separated, in this order "
        "(default: every column but the target)",
        "A,B,...",
    )
    weights: str | None = setting(
        None,
        "the column of each row's prior weight (>= 0; 0: the row counts for nothing), as R's "
        "glm(weights=) and statsmodels' var_weights; for binomial proportions, the trials",
        "COL",
    )
    offset: str | None = setting(
        None, "the column added to each row's linear predictor x.w + b, as a known term", "COL"
    )
    exposure: str | None = setting(
        None,
        "the column of each row's exposure (> 0) for log-link models: log(exposure) is added "
        "to the linear predictor, so that the mean is a rate times the exposure",
        "COL",
    )
    missing: str = setting(
        "error",
        "a missing value (an empty CSV cell, NA, N/A, NaN, null) in a column the run uses: "
        "error ends the run naming its file, line and column; drop drops its row, the same "
        "rows at any number of ranks (CSV files)",
        choices=MISSING,
        check=one_of(MISSING),
    )
    categorical: str | None = setting(
        None,
        "CSV or Parquet feature columns of numbers to code as levels, comma-separated (a "
        "column of words, a Parquet category or boolean column is categorical anyway): "
        "treatment dummies named column[T.level], as patsy and R code them, the levels the "
        "same at any number of ranks",
        "A,B,...",
    )
    max_levels: int = setting(
        MAX_LEVELS,
        "the most levels a column of words may have; more end the run naming the column (one "
        "named in --categorical takes any number)",
        "N",
        check=positive_int,
    )
    index_base: str = setting(
        "auto",
        "a libsvm file's feature indices: 0 or 1 where the first feature is; auto: 0 where any "
        "line of the file holds index 0, else 1 (scikit-learn's rule)",
        "auto|0|1",
        choices=INDEX_BASES,
        check=one_of(INDEX_BASES),
    )
    dtype: str | None = setting(
        None,
        "precision of the data and the model (default: a file's own, float64 for CSV text; "
        "float32 for synthetic data)",
        choices=DTYPES,
        check=optional(one_of(DTYPES)),
    )
    validation_fraction: float = setting(
        0.0,
        "hold out this fraction of the rows, picked by a hash of the row index and --seed (the "
        "same rows for any number of ranks), and score the model on them at each log step",
        "F",
        check=fraction,
    )
    metrics_json: str | None = setting(None, "rank 0 writes the run's results here as JSON", "PATH")
    checkpoint_dir: str | None = setting(
        None, "rank 0 saves checkpoints here; a run resumes from the newest one it finds", "DIR"
    )
    checkpoint_every: int = setting(100, "steps between checkpoints", "N", check=positive_int)
    keep_checkpoints: int = setting(3, "keep the K newest checkpoints", "K", check=positive_int)
    model: str = setting(
        "linear",
        "the model family: linear (least squares), gaussian (the same by IRLS, with GLM "
        "statistics), logistic or binomial (a 0/1 target), poisson (y >= 0), gamma (y > 0), "
        "tweedie (y >= 0, --tweedie_power), inverse_gaussian (y > 0), negative_binomial "
        "(y >= 0, --nb_alpha), or multinomial (K classes); --solver exact is least squares "
        "for linear, Newton's method for multinomial, IRLS for the others",
        "NAME",
    )
    link: str | None = setting(
        None,
        "the link g of E[y] = g^-1(x.w + b); by default the family's canonical one: "
        "linear and gaussian identity (or log), logistic and binomial logit (or probit, "
        "cloglog), poisson log (or identity, sqrt), gamma inverse (or log, identity), tweedie "
        "log (or identity), inverse_gaussian inverse_squared (or inverse, log, identity), "
        "negative_binomial log (or identity, sqrt)",
        "NAME",
    )
    tweedie_power: float | None = setting(
        None,
        "--model tweedie's power p, 1 < p < 2: Var(y) = phi mu^p (default 1.5)",
        "P",
        check=optional(between_1_and_2),
    )
    nb_alpha: float | None = setting(
        None,
        "--model negative_binomial's dispersion alpha > 0: Var(y) = mu + alpha mu^2 (NB2, as "
        "statsmodels' NegativeBinomial(alpha); default 1)",
        "A",
        check=optional(positive_finite),
    )
    solver: str = setting(
        "sgd",
        "sgd: train with data-parallel SGD; exact: solve least squares directly by a "
        "distributed QR (no batches: --batch_size does not apply)",
        choices=SOLVERS,
        check=one_of(SOLVERS),
    )
    optimality_gap: str = setting(
        "auto",
        "SGD runs: solve least squares exactly too and report the distance from its optimum; "
        "auto: when that costs less than the training (N x (F+1) <= 2 x steps x global batch)",
        choices=OPTIMALITY_GAP,
        check=one_of(OPTIMALITY_GAP),
    )
    l2: float = setting(
        0.0,
        "ridge: minimise the mean squared error + LAMBDA x |w|^2 (the bias is not penalised)",
        "LAMBDA",
        check=finite_from_0,
    )
    cov_type: str = setting(
        "nonrobust",
        "the exact optimum's standard errors: nonrobust (from the Fisher information, times "
        "the scale), HC0/HC1, the heteroscedasticity-robust sandwich (HC1 times n/(n-k)), or "
        "cluster, robust to correlation within --groups (times G/(G-1) (n-1)/(n-k))",
        choices=COV_TYPES,
        check=one_of(COV_TYPES),
    )
    tol: float | None = setting(
        None,
        "--solver exact's tolerance: IRLS stops at a step of at most TOL of each coefficient "
        "(absolute below 1) and an objective change of TOL / 100, relative (default 1e-10); "
        "the elastic net's coordinate descent at sweeps that move the fit by TOL of the "
        "working response's spread (default 1e-13); least squares has no iterations",
        "TOL",
        check=optional(positive_finite),
    )
    max_iter: int | None = setting(
        None,
        "--solver exact's most IRLS iterations (default 100; the elastic net's, at each "
        "strength); unconverged, the fit is the last iterate's, with a warning",
        "N",
        check=optional(positive_int),
    )
    start: str | None = setting(
        None,
        "an exported model (--export, fit().save) to start --solver exact's IRLS or Newton's "
        "method from, instead of the intercept-only model: the same optimum in fewer "
        "iterations. Its link, features (and classes) must be this run's; rank 0 reads it",
        "MODEL",
    )
    no_intercept: bool = setting(
        False,
        "fit the model without an intercept (b = 0), as R's y ~ x - 1; its statistics are "
        "statsmodels' without a constant (the uncentred R²); SGD holds b at 0; not with the "
        "elastic net",
    )
    formula: str | None = setting(
        None,
        "the model as a formula of --data's columns, statsmodels' language: 'y ~ x1 + "
        "np.log(x2) + C(region) + x1:x2', '- 1' for no intercept (needs formulaic)",
        "F",
    )
    groups: str | None = setting(
        None, "the column of each row's cluster, for --cov_type cluster (numbers)", "COL"
    )
    alpha: float | tuple[float, ...] | None = setting(
        None,
        "the elastic net's strength: minimise the mean deviance / 2 + ALPHA x (l1_ratio "
        "|w|_1 + (1 - l1_ratio) / 2 |w|^2), the bias not penalised (scikit-learn's and glum's "
        "alpha, glmnet's lambda); without it, a path of --n_alphas strengths (--solver exact)",
        "ALPHA",
        check=optional(strengths),
    )
    l1_ratio: float | None = setting(
        None,
        "the elastic net's share of L1: 1 lasso, 0 ridge (glmnet's alpha; default 1); only "
        "--solver exact fits it",
        "R",
        check=optional(unit_interval),
    )
    standardize: bool = setting(
        True,
        "penalise each feature scaled by its weighted standard deviation, as glmnet and H2O "
        "do (coefficients are reported on the features' own scale); --no-standardize "
        "penalises them as they are, as scikit-learn and glum do",
    )
    n_alphas: int = setting(
        100,
        "strengths on the path, log-spaced from the least that zeroes every coefficient",
        "N",
        check=positive_int,
    )
    whole_path: bool = setting(
        False,
        "fit every one of --n_alphas strengths; by default the path ends where glmnet's does, "
        "from its fifth strength on, once the fraction of the deviance explained stops moving "
        "or passes 0.999",
    )
    alpha_min_ratio: float | None = setting(
        None,
        "the path's last strength over its first (default 1e-4, or 1e-2 with more features "
        "than rows, as glmnet's)",
        "R",
        check=optional(open_unit_interval),
    )
    cv: int | None = setting(
        None,
        "cross-validate the path over K folds drawn by a hash of the row index and --seed "
        "(the same folds at any number of ranks), all in the path's own passes",
        "K",
        check=optional(folds),
    )
    fold_column: str | None = setting(
        None,
        "cross-validate over the folds this column gives, whole numbers (glmnet's foldid)",
        "COL",
    )
    select: str = setting(
        "min",
        "the cross-validated model to report and export: min (the least mean deviance) or 1se "
        "(the largest strength within one standard error of it)",
        choices=SELECT,
        check=one_of(SELECT),
    )
    fold_alpha: str = setting(
        "same",
        "each fold's strength: same (ALPHA on its mean deviance, as glmnet, glum and "
        "scikit-learn's ElasticNetCV) or sum (the same penalty against the summed deviance, "
        "ALPHA x all rows' weight / its training rows', as LogisticRegressionCV's C)",
        choices=FOLD_ALPHA,
        check=one_of(FOLD_ALPHA),
    )
    type_measure: str = setting(
        "deviance",
        "cv.glmnet's type.measure, the held-out figure that chooses: deviance, mse, mae, class "
        "(misclassification, for classes) or auc (two levels; the largest wins)",
        choices=TYPE_MEASURES,
        check=one_of(TYPE_MEASURES),
    )
    relax: bool = setting(
        False,
        "glmnet's relaxed lasso: blend each strength's fit with the unpenalized refit of the "
        "features it keeps, gamma x lasso + (1 - gamma) x refit; gamma chosen by CV too",
    )
    relax_gamma: float | None = setting(
        None,
        "--relax's blend, 0 (the refit; the default without folds) to 1 (the lasso)",
        "G",
        check=optional(unit_interval),
    )
    penalty_factor: str | None = control(
        "glmnet's penalty.factor, each named feature's (or categorical column's) share of the "
        "penalty, NAME=F,...: 0 unpenalized, others 1, rescaled to sum to the features' count",
        "NAME=F,...",
    )
    exclude: str | None = control(
        "features kept out of the elastic net's model, NAME,... (glmnet's exclude)", "NAME,..."
    )
    lower_limits: str | None = control(
        "the coefficients' lower limit, <= 0: a number (0: non-negative) or NAME=V,...", "V"
    )
    upper_limits: str | None = control(
        "the coefficients' upper limit, >= 0: a number or NAME=V,... (glmnet's limits)", "V"
    )
    optimizer: str = setting(
        "sgd", "the optimizer Horovod wraps", choices=OPTIMIZERS, check=one_of(OPTIMIZERS)
    )
    momentum: float = setting(0.9, "momentum of --optimizer momentum", check=fraction)
    lr_warmup_steps: int = setting(
        0,
        "ramp the learning rate linearly from lr/W to lr over the first W updates",
        "W",
        check=int_from_0,
    )
    scale_lr: bool = setting(
        False, "multiply the learning rate by the number of ranks (Horovod's linear scaling)"
    )
    fp16_allreduce: bool = setting(
        False, "send gradients as float16 in the allreduce (Horovod's fp16 compression)"
    )
    backward_passes_per_step: int = setting(
        1,
        "accumulate K local gradients (K steps' batches) before each allreduce and update",
        "K",
        check=positive_int,
    )
    logdir: str | None = setting(None, "rank 0 writes TensorBoard scalars here", "DIR")
    plot: str | None = setting(
        None, "rank 0 saves a figure of the loss and the fit here", "PATH.png"
    )
    export: str | None = setting(
        None,
        "rank 0 writes the trained model here: a TensorFlow SavedModel with its metadata, "
        "for hvd-linreg predict and evaluate (README, Use the model)",
        "DIR",
    )
    quiet: bool = setting(False, "print only the summary (no progress bar or Step lines)")
    verbose: bool = setting(False, "let every rank log, tagged with its rank")
    elastic: bool = setting(
        False,
        "train under Horovod's elastic mode: go on when ranks are lost or added "
        "(launch with horovodrun --host-discovery-script; README, Elastic)",
    )
    commit_every: int | None = setting(
        None,
        "with --elastic: steps between commits of the state a reset goes back to "
        "(default: --log_every)",
        "N",
        check=optional(positive_int),
    )

    def __post_init__(self) -> None:
        """Each setting's own constraint, declared with it (setting's check), then the ones
        that span settings."""
        for f in fields(self):
            if f.metadata["check"]:
                f.metadata["check"](f.name, getattr(self, f.name))
        check_steps(self)
        check_elastic(self)
        check_columns(self)
        check_penalty(self)
        check_iterations(self)

    @property
    def penalized(self) -> bool:
        """Whether the run fits the elastic net (solvers/path.py)."""
        return any(v is not None for v in (self.alpha, self.l1_ratio, self.cv, self.fold_column))

    @property
    def penalty_l1_ratio(self) -> float:
        """--l1_ratio, by default 1 (the lasso, glmnet's default)."""
        return 1.0 if self.l1_ratio is None else float(self.l1_ratio)

    @property
    def commit_interval(self) -> int:
        """Steps between elastic commits."""
        return self.commit_every or self.log_every

    @property
    def feature_columns(self) -> tuple[str, ...] | None:
        """--features as column names, in its order."""
        return None if self.features is None else column_names(self.features)

    @property
    def categorical_columns(self) -> tuple[str, ...]:
        """--categorical as column names."""
        return () if self.categorical is None else column_names(self.categorical)

    @property
    def batched(self) -> bool:
        """Whether the run trains on batches: --solver exact passes over all rows instead."""
        return self.solver == "sgd"

    @property
    def synthetic(self) -> bool:
        return self.data is None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def field_names() -> list[str]:
    return [f.name for f in fields(Config)]
