"""What the scikit-learn estimators share (estimators.py, penalized_estimators.py): validation
on every rank, the fit through hvd_linreg.fit, the fitted attributes and summary(), and the
checks of scikit-learn's own parameters."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from hvd_linreg.data.frames import mixed_text_column
from hvd_linreg.errors import UsageError
from hvd_linreg.library import fit, start_job

# SciPy's sparse formats the estimators take (scikit-learn's accept_sparse): fit() holds each
# rank's rows as CSR (matrix/sparse.py), the exact solvers never densify them
SPARSE = ("csr", "csc", "coo")


class _Exact(BaseEstimator):
    """What every estimator here shares: validation, the fit through hvd_linreg.fit, the
    fitted attributes and summary()."""

    _model = "linear"
    _classifier = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # SPARSE's formats: fit() keeps them sparse
        return tags

    # --- what each estimator says -------------------------------------------------------
    def _settings(self) -> dict:
        """The tool's model, link and power for this estimator's parameters."""
        return {"model": self._model}

    def _check_params(self) -> None:
        """ValueError for a parameter the tool cannot take (before any collective)."""

    def _l2(self, weight_sum: float, rows: float) -> float:
        """The tool's l2 for this estimator's penalty, given Σw and n over all ranks."""
        return 0.0

    def _elastic(self) -> bool:
        """Whether the fit is the elastic net's path (solvers/path.py), which always fits
        the intercept."""
        return False

    def _check_target(self, y: np.ndarray) -> None:
        """ValueError for a target this rank's rows show the estimator cannot fit."""

    def _target(self, job, y: np.ndarray) -> np.ndarray:
        """y as the tool's family takes it (the classifier's classes, agreed by every rank,
        become 0/1); called on every rank, after the ranks agreed that their rows are valid."""
        return y

    # --- the shared path ----------------------------------------------------------------
    def fit(self, X, y, sample_weight=None):
        """Fit on this rank's rows X, y (and each row's weight); under a launcher every rank
        calls fit with its own rows, and the rows of all the ranks are the dataset."""
        job = start_job()
        error, previous = None, self._previous_fit()
        try:
            if not self.fit_intercept and self._elastic():
                raise ValueError(
                    f"{type(self).__name__}(fit_intercept=False) is not supported with the "
                    "elastic net's penalty: its path always fits the intercept"
                )
            self._check_params()
            mixed = mixed_text_column(X) if hasattr(X, "columns") else None
            if mixed is not None:  # not "could not convert string to float": name the cell
                raise mixed
            frame = X if _has_levels(X) else None  # words, categories: fit() codes them
            dtype = object if frame is not None else np.float64
            X, y = validate_data(
                self, X, y, dtype=dtype, y_numeric=not self._classifier, accept_sparse=SPARSE
            )
            if X.shape[0] < 2:
                raise ValueError(f"{type(self).__name__} needs at least 2 samples, got 1 sample")
            if previous is not None and previous["features"] != self.n_features_in_:
                raise ValueError(
                    f"warm_start=True starts from the previous fit, of {previous['features']} "
                    f"features, but X has {self.n_features_in_}: fit with warm_start=False"
                )
            # A rank's rows may all weigh 0 where another rank's do not: checked over all ranks
            sample_weight = _check_sample_weight(
                sample_weight,
                X,
                dtype=np.float64,
                ensure_non_negative=True,
                allow_all_zero_weights=True,
            )
            self._check_target(y)
        except (TypeError, ValueError) as e:
            if job.size == 1:
                raise
            error = UsageError(str(e))
        job.agree(error)  # every rank raises, or none: no rank is left in a collective
        y = self._target(job, y)
        start = self._warm_start(previous)
        weight_sum, rows = job.allreduce_sum(
            [sample_weight.sum(), np.count_nonzero(sample_weight)], "estimator_rows"
        )
        if rows == 0:
            raise ValueError("every sample_weight is zero: there are no rows to fit")
        names = getattr(self, "feature_names_in_", None)
        if frame is not None:
            X = frame
        elif names is not None:
            import pandas as pd

            X = pd.DataFrame(X, columns=[str(c) for c in names])
        self._fit_rows(job, X, y, sample_weight, weight_sum, rows, start)
        return self

    def _previous_fit(self) -> dict | None:
        """With warm_start=True, what the previous fit left (its width, coefficients and
        classes), read before this fit's validation resets them; else None."""
        if not getattr(self, "warm_start", False) or not hasattr(self, "coef_"):
            return None
        return {
            "features": self.n_features_in_,
            "coef": np.array(self.coef_, np.float64),
            "intercept": np.ravel(self.intercept_).astype(np.float64),
            "classes": getattr(self, "classes_", None),
        }

    def _warm_start(self, previous: dict | None):
        """fit()'s start= from the previous fit (warm_start=True, as scikit-learn's
        estimators reuse coef_ and intercept_): [w..., b]. None: start afresh (no previous fit,
        or the elastic net's path, which starts each strength from the last)."""
        if previous is None or self._elastic():
            return None
        return np.append(np.ravel(previous["coef"]), previous["intercept"][0])

    def _fit_rows(
        self, job, X, y, sample_weight, weight_sum: float, rows: float, start=None
    ) -> None:
        """The fit of this rank's validated rows (y as the family takes it), given Σw and n
        over all ranks: hvd_linreg.fit with this estimator's settings, from start where given
        (warm_start), then its attributes."""
        settings = self._fit_settings(job, weight_sum, rows, len(y))
        if not self.fit_intercept:
            settings["no_intercept"] = True
        settings.update(self._limits())
        result = fit_warning_of_sklearn(
            X, y, weights=sample_weight, solver="exact", start=start, **settings, **self._settings()
        )
        params = result.params
        self.coef_ = params[:-1]
        self.intercept_ = float(params[-1])
        self.n_iter_ = result.iterations
        self.summary_ = result.summary()
        self.levels_ = dict(result.report.shard.levels or {})
        self._fitted(result)

    def _limits(self) -> dict:
        """fit()'s tol and max_iter: this estimator's, where it has them (None: the tool's)."""
        return {name: getattr(self, name, None) for name in ("tol", "max_iter")}

    def _fit_settings(self, job, weight_sum: float, rows: float, local_rows: int) -> dict:
        """fit()'s settings for this estimator's penalty (and fold=), given Σw and n over all
        ranks and this rank's rows; by default its ridge, _l2."""
        return {"l2": float(self._l2(weight_sum, rows))}

    def _fitted(self, result) -> None:
        """Set the attributes a fit has beyond coef_ and intercept_ (a path's, a CV's)."""

    def _features(self, X) -> np.ndarray:
        """New rows' features, validated, coded with the fit's levels where it had any."""
        check_is_fitted(self)
        levels = getattr(self, "levels_", None)
        if levels:  # coded with the fit's levels, by the columns' names
            from hvd_linreg.data import frames

            validate_data(self, X, dtype=object, reset=False)
            columns = tuple(str(c) for c in self.feature_names_in_)
            return frames.new_rows(X, columns, levels).to_numpy(np.float64)
        return validate_data(self, X, dtype=np.float64, reset=False, accept_sparse=SPARSE)

    def _linear_predictor(self, X) -> np.ndarray:
        return self._features(X) @ np.ravel(self.coef_) + np.ravel(self.intercept_)[0]

    def summary(self) -> str:
        """The table the command line prints: each coefficient, its standard error, z or t,
        p-value and confidence interval, and the fit's statistics."""
        check_is_fitted(self)
        return self.summary_


def _has_levels(X) -> bool:
    """Whether X is a DataFrame with columns of words, categories or booleans."""
    if not hasattr(X, "columns") or not hasattr(X, "dtypes"):
        return False
    from hvd_linreg.data.frames import kind

    return any(kind(X[c]) is not None for c in X.columns)


def fit_warning_of_sklearn(*args, **kwargs):
    """hvd_linreg.fit, whose warning that IRLS stopped at max_iter unconverged is
    scikit-learn's ConvergenceWarning (rank 0's, as the tool's warnings are)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from hvd_linreg.errors import ConvergenceWarning as ToolsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ToolsWarning)
        result = fit(*args, **kwargs)
    for warning in caught:
        if issubclass(warning.category, ToolsWarning):
            warnings.warn(str(warning.message), ConvergenceWarning, stacklevel=3)
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return result


def _check_iterations(estimator) -> None:
    """tol and max_iter as scikit-learn checks them, tol None allowed: the tool's own
    tolerance, stricter than scikit-learn's 1e-4 (a step of 1e-10 of each coefficient for
    IRLS). Both reach the exact solver (fit()'s tol and max_iter); n_iter_ says how many
    iterations it took."""
    if estimator.tol is not None:
        _positive("tol", estimator.tol)
    if not isinstance(estimator.max_iter, (int, np.integer)) or estimator.max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {estimator.max_iter!r}")


def _positive(name: str, value) -> float:
    if not isinstance(value, (int, float, np.number)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def _non_negative(name: str, value) -> float:
    if not isinstance(value, (int, float, np.number)) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def _glum_factors(estimator) -> np.ndarray | None:
    """glum's P1 (the lasso's) or P2 (the ridge's) as the tool's one penalty factor per
    feature: the one the objective uses, or both where they are equal; None: all 1."""
    P1, P2 = (_vector(name, getattr(estimator, name)) for name in ("P1", "P2"))
    F = estimator.n_features_in_
    for name, P in (("P1", P1), ("P2", P2)):
        if P is not None and (len(P) != F or not (P >= 0).all() or not np.isfinite(P).all()):
            raise ValueError(f"{name} must be {F} finite numbers >= 0, one per feature")
    if estimator.l1_ratio == 1:
        return P1
    if estimator.l1_ratio == 0:
        return P2
    ones = np.ones(F)
    if not np.array_equal(ones if P1 is None else P1, ones if P2 is None else P2):
        raise ValueError(
            "P1 and P2 that differ are not supported with 0 < l1_ratio < 1: the tool's "
            "penalty factor (glmnet's) weighs the L1 and L2 parts alike"
        )
    return P1 if P1 is not None else P2


def glum_alpha_scale(estimator) -> float:
    """The tool rescales penalty factors to sum to the number of features (glmnet's
    convention): glum's alpha is the tool's times F / Σ P."""
    P = _glum_factors(estimator)
    return 1.0 if P is None or not P.sum() > 0 else estimator.n_features_in_ / float(P.sum())


def glum_controls(estimator) -> dict:
    """fit()'s settings of glum's P1/P2 and bounds: penalty_factor and the limits."""
    out = {}
    P = _glum_factors(estimator)
    if P is not None:
        out["penalty_factor"] = [float(p) for p in P]
    for ours, theirs in (("lower_limits", "lower_bounds"), ("upper_limits", "upper_bounds")):
        bound = getattr(estimator, theirs)
        if bound is not None:
            values = np.ravel(np.asarray(bound, np.float64))
            out[ours] = float(values[0]) if values.size == 1 else [float(v) for v in values]
    return out


def _vector(name: str, value) -> np.ndarray | None:
    """glum's P1 or P2: None or "identity" (all 1), else one number per feature."""
    if value is None or isinstance(value, str) and value == "identity":
        return None
    if isinstance(value, str):
        raise ValueError(f"{name} must be 'identity' or one number per feature, got {value!r}")
    return np.ravel(np.asarray(value, np.float64))


def positive_limits(estimator) -> dict:
    """scikit-learn's positive=True: every coefficient's lower limit 0 (glmnet's)."""
    return {"lower_limits": 0.0} if estimator.positive else {}
