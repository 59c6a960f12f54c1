"""scikit-learn estimators over hvd_linreg.fit: LinearRegression, Ridge, LogisticRegression,
PoissonRegressor, GammaRegressor and TweedieRegressor, with scikit-learn's parameter names and
defaults, solved exactly (least squares by the distributed QR, the others by IRLS).

In one process they are drop-in replacements for scikit-learn's estimators of the same names.
Under a launcher (horovodrun, mpirun, srun), call fit on every rank with that rank's own rows:
the ranks' rows in rank order are the dataset, and every rank gets the same coefficients.

Each maps scikit-learn's objective onto the tool's exactly. The tool minimises
    (1/n) Σ w·loss(y, x·w + b) + l2·‖w‖²   (n: the rows of weight > 0; the bias is not penalised)
where loss is the squared error for least squares, the negative log-likelihood for logistic,
and half the unit deviance for the GLMs. Each class's docstring gives its l2. scikit-learn
needs scikit-learn installed; `import hvd_linreg` does not import this module."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from hvd_linreg import families
from hvd_linreg.data.memory import mixed_text_column
from hvd_linreg.errors import UsageError
from hvd_linreg.library import fit, start_job


class _Exact(BaseEstimator):
    """What every estimator here shares: validation, the fit through hvd_linreg.fit, the
    fitted attributes and summary()."""

    _model = "linear"
    _classifier = False

    # --- what each estimator says -------------------------------------------------------
    def _settings(self) -> dict:
        """The tool's model, link and power for this estimator's parameters."""
        return {"model": self._model}

    def _check_params(self) -> None:
        """ValueError for a parameter the tool cannot take (before any collective)."""

    def _l2(self, weight_sum: float, rows: float) -> float:
        """The tool's l2 for this estimator's penalty, given Σw and n over all ranks."""
        return 0.0

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
        error = None
        try:
            if not self.fit_intercept:
                raise ValueError(
                    f"{type(self).__name__}(fit_intercept=False) is not supported: the tool "
                    "always fits the intercept"
                )
            self._check_params()
            mixed = mixed_text_column(X) if hasattr(X, "columns") else None
            if mixed is not None:  # not "could not convert string to float": name the cell
                raise mixed
            X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=not self._classifier)
            if len(X) < 2:
                raise ValueError(f"{type(self).__name__} needs at least 2 samples, got 1 sample")
            sample_weight = _check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True
            )
            self._check_target(y)
        except (TypeError, ValueError) as e:
            if job.size == 1:
                raise
            error = UsageError(str(e))
        job.agree(error)  # every rank raises, or none: no rank is left in a collective
        y = self._target(job, y)
        weight_sum, rows = job.allreduce_sum(
            [sample_weight.sum(), np.count_nonzero(sample_weight)], "estimator_rows"
        )
        if rows == 0:
            raise ValueError("every sample_weight is 0: there are no rows to fit")
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            import pandas as pd

            X = pd.DataFrame(X, columns=[str(c) for c in names])
        result = fit(
            X,
            y,
            weights=sample_weight,
            solver="exact",
            l2=self._l2(weight_sum, rows),
            **self._settings(),
        )
        params = result.params
        self.coef_ = params[:-1]
        self.intercept_ = float(params[-1])
        self.n_iter_ = result.iterations
        self.summary_ = result.summary()
        return self

    def _linear_predictor(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ np.ravel(self.coef_) + np.ravel(self.intercept_)[0]

    def summary(self) -> str:
        """The table the command line prints: each coefficient, its standard error, z or t,
        p-value and confidence interval, and the fit's statistics."""
        check_is_fitted(self)
        return self.summary_


class LinearRegression(RegressorMixin, _Exact):
    """Ordinary (weighted) least squares, as sklearn.linear_model.LinearRegression: the
    tool's --model linear --solver exact with l2 = 0."""

    def __init__(self, *, fit_intercept=True):
        self.fit_intercept = fit_intercept

    def predict(self, X):
        return self._linear_predictor(X)


class Ridge(RegressorMixin, _Exact):
    """Least squares with an L2 penalty, as sklearn.linear_model.Ridge: minimises
    Σ sw·(y - x·w - b)² + alpha·‖w‖², which is the tool's objective times n with
    l2 = alpha / n (n: the rows of weight > 0 on all ranks)."""

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def _l2(self, weight_sum, rows):
        return self.alpha / rows

    def _check_params(self):
        _non_negative("alpha", self.alpha)

    def predict(self, X):
        return self._linear_predictor(X)


class LogisticRegression(ClassifierMixin, _Exact):
    """Binary logistic regression, as sklearn.linear_model.LogisticRegression with its lbfgs
    solver: minimises C·Σ sw·logloss + ‖w‖²/2 (penalty="l2"), which is the tool's --model
    logistic objective times C·n with l2 = 1 / (2·C·n); penalty=None is l2 = 0. The classes are
    the union of every rank's; exactly 2 (the tool fits binary models only)."""

    _model = "logistic"
    _classifier = True

    def __init__(self, penalty="l2", *, C=1.0, fit_intercept=True, tol=1e-4, max_iter=100):
        self.penalty = penalty
        self.C = C
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def _l2(self, weight_sum, rows):
        if self.penalty is None:
            return 0.0
        return 1.0 / (2.0 * self.C * rows)

    def _check_params(self):
        if self.penalty not in ("l2", None):
            raise ValueError(f"penalty={self.penalty!r} is not supported: use 'l2' or None")
        _positive("C", self.C)
        _check_iterations(self)

    def _check_target(self, y):
        check_classification_targets(y)  # a continuous y: "Unknown label type: continuous"

    def _target(self, job, y):
        classes = np.unique(y)
        if job.size > 1:  # every rank's classes (a rank may hold only one of them)
            classes = np.unique(np.concatenate(job.allgather(np.unique(y), "estimator_classes")))
        if len(classes) > 2:
            raise ValueError(
                "Only binary classification is supported. The type of the target is multiclass: "
                f"{len(classes)} classes"
            )
        if len(classes) != 2:
            raise ValueError(
                f"LogisticRegression needs exactly 2 classes (it is binary), got {len(classes)} "
                f"class{'es' * (len(classes) != 1)}: {classes[:5].tolist()}"
            )
        self.classes_ = classes
        return (y == classes[1]).astype(np.float64)

    def decision_function(self, X):
        return self._linear_predictor(X)

    def predict_proba(self, X):
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.coef_ = self.coef_[None, :]
        self.intercept_ = np.array([self.intercept_])
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class _GLM(RegressorMixin, _Exact):
    """The GLM regressors: scikit-learn's objective
    (1/(2·Σsw)) Σ sw·deviance + alpha/2·‖w‖² is the tool's times n/Σsw with
    l2 = alpha·Σsw / (2n) (for the normal family, whose loss is the whole squared error,
    alpha·Σsw / n)."""

    def __init__(self, *, alpha=1.0, fit_intercept=True, tol=1e-4, max_iter=100):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def _l2(self, weight_sum, rows):
        settings = self._settings()
        family = families.get(settings["model"], settings["link"], settings.get("tweedie_power"))
        return self.alpha * family.LOSS_SCALE * weight_sum / (2.0 * rows)

    def _check_params(self):
        _non_negative("alpha", self.alpha)
        _check_iterations(self)
        self._settings()

    def predict(self, X):
        eta = self._linear_predictor(X)
        from hvd_linreg.families import links

        return links.named(self._settings()["link"]).inverse(eta)

    def score(self, X, y, sample_weight=None):
        """D², the fraction of the deviance explained, as scikit-learn's GLM regressors score
        (R² for the normal family)."""
        from sklearn.metrics import d2_tweedie_score

        return d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=self._power)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = self._settings()["model"] != "linear"
        return tags


class PoissonRegressor(_GLM):
    """Poisson regression with the log link, as sklearn.linear_model.PoissonRegressor
    (--model poisson; y >= 0)."""

    _power = 1.0

    def _settings(self):
        return {"model": "poisson", "link": "log"}


class GammaRegressor(_GLM):
    """Gamma regression with the log link, as sklearn.linear_model.GammaRegressor
    (--model gamma --link log; y > 0)."""

    _power = 2.0

    def _settings(self):
        return {"model": "gamma", "link": "log"}


# TweedieRegressor's power, as the tool's families: 0 normal, 1 Poisson, 1 < p < 2 compound
# Poisson-gamma, 2 gamma. Other powers (p < 0, 0 < p < 1, p > 2) are not fitted by the tool.
_TWEEDIE = {0.0: "linear", 1.0: "poisson", 2.0: "gamma"}


class TweedieRegressor(_GLM):
    """Tweedie regression, as sklearn.linear_model.TweedieRegressor, for the powers the tool
    fits: 0 (normal, --model linear), 1 (poisson), 1 < power < 2 (--model tweedie
    --tweedie_power) and 2 (gamma). link="auto" is identity for power 0 and log otherwise."""

    def __init__(
        self, *, power=0.0, alpha=1.0, fit_intercept=True, link="auto", tol=1e-4, max_iter=100
    ):
        self.power = power
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.link = link
        self.tol = tol
        self.max_iter = max_iter

    @property
    def _power(self) -> float:
        return float(self.power)

    def _settings(self):
        power = float(self.power)
        model = _TWEEDIE.get(power, "tweedie" if 1.0 < power < 2.0 else None)
        if model is None:
            raise ValueError(
                f"TweedieRegressor(power={self.power}) is not supported: the tool fits power 0, "
                "1, 1 < power < 2 and 2"
            )
        if self.link not in ("auto", "identity", "log"):
            raise ValueError(f"link={self.link!r}: use 'auto', 'identity' or 'log'")
        link = self.link if self.link != "auto" else ("identity" if power <= 0 else "log")
        settings = {"model": model, "link": link}
        if model == "tweedie":
            settings["tweedie_power"] = power
        return settings


def _check_iterations(estimator) -> None:
    """tol and max_iter as scikit-learn checks them. The tool's IRLS stops at its own, stricter
    tolerance (a step of 1e-10 of each coefficient) within 100 iterations: tol and max_iter
    are taken for scikit-learn's signature, and n_iter_ says how many it took."""
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
