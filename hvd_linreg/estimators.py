"""scikit-learn estimators over hvd_linreg.fit: LinearRegression, Ridge, LogisticRegression,
PoissonRegressor, GammaRegressor and TweedieRegressor, with scikit-learn's parameter names and
defaults, solved exactly (least squares by the distributed QR, the others by IRLS); and the
elastic net's (penalized_estimators.py): ElasticNet, Lasso, ElasticNetCV, LassoCV, and glum's
GeneralizedLinearRegressor and GeneralizedLinearRegressorCV.

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
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from hvd_linreg import families
from hvd_linreg.estimator_base import _check_iterations, _Exact, _non_negative, _positive
from hvd_linreg.penalized_estimators import (
    ElasticNet,
    ElasticNetCV,
    GeneralizedLinearRegressor,
    GeneralizedLinearRegressorCV,
    Lasso,
    LassoCV,
)

__all__ = [
    "ElasticNet",
    "ElasticNetCV",
    "GammaRegressor",
    "GeneralizedLinearRegressor",
    "GeneralizedLinearRegressorCV",
    "Lasso",
    "LassoCV",
    "LinearRegression",
    "LogisticRegression",
    "PoissonRegressor",
    "Ridge",
    "TweedieRegressor",
]


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
    """Binary logistic regression, as sklearn.linear_model.LogisticRegression: minimises
    C·Σ sw·logloss + ‖w‖²/2 (penalty="l2"), which is the tool's --model logistic objective
    times C·n with l2 = 1 / (2·C·n); penalty=None is l2 = 0. penalty="l1" and "elasticnet"
    (with l1_ratio), scikit-learn's C·Σ sw·logloss + l1_ratio·‖w‖₁ + (1 - l1_ratio)/2·‖w‖², are
    the elastic net (docs/elastic-net.md) at alpha = 1 / (C·Σsw), unstandardized. The classes
    are the union of every rank's; exactly 2 (the tool fits binary models only)."""

    _model = "logistic"
    _classifier = True

    def __init__(
        self, penalty="l2", *, C=1.0, fit_intercept=True, tol=1e-4, max_iter=100, l1_ratio=None
    ):
        self.penalty = penalty
        self.C = C
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def _l2(self, weight_sum, rows):
        if self.penalty is None:
            return 0.0
        return 1.0 / (2.0 * self.C * rows)

    def _fit_settings(self, job, weight_sum, rows, local_rows):
        if self.penalty not in ("l1", "elasticnet"):
            return super()._fit_settings(job, weight_sum, rows, local_rows)
        ratio = 1.0 if self.penalty == "l1" else float(self.l1_ratio)
        return {"alpha": 1.0 / (self.C * weight_sum), "l1_ratio": ratio, "standardize": False}

    def _check_params(self):
        if self.penalty not in ("l2", None, "l1", "elasticnet"):
            raise ValueError(
                f"penalty={self.penalty!r} is not supported: use 'l2', 'l1', 'elasticnet' or None"
            )
        if self.penalty == "elasticnet":
            ratio = self.l1_ratio
            if not isinstance(ratio, (int, float, np.number)) or not 0 <= ratio <= 1:
                raise ValueError(f"l1_ratio must be between 0 and 1; got (l1_ratio={ratio!r})")
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
