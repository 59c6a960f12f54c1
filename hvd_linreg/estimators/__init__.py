"""scikit-learn estimators over hvd_linreg.fit: LinearRegression, Ridge, PoissonRegressor,
GammaRegressor and TweedieRegressor, with scikit-learn's parameter names and defaults, solved
exactly (least squares by the distributed QR, the others by IRLS); the classifiers
(classifiers.py): LogisticRegression and LogisticRegressionCV; and the elastic net's
(penalized.py): ElasticNet, Lasso, ElasticNetCV, LassoCV, and glum's
GeneralizedLinearRegressor and GeneralizedLinearRegressorCV.

In one process they are drop-in replacements for scikit-learn's estimators of the same names.
Under a launcher (horovodrun, mpirun, srun), call fit on every rank with that rank's own rows:
the ranks' rows in rank order are the dataset, and every rank gets the same coefficients.

Each maps scikit-learn's objective onto the tool's exactly. The tool minimises
    (1/n) Σ w·loss(y, x·w + b) + l2·‖w‖²   (n: the rows of weight > 0; the bias is not penalised)
where loss is the squared error for least squares, the negative log-likelihood for logistic,
and half the unit deviance for the GLMs. Each class's docstring gives its l2.

warm_start=True (the GLM regressors, LogisticRegression) starts IRLS or Newton's method from the
previous fit's coef_ and intercept_ (fit()'s start=): the same optimum, in fewer iterations.
tol and max_iter are fit()'s, the tool's criteria (docs/python-api.md): tol None (the default)
is the tool's own tolerance, stricter than scikit-learn's 1e-4; IRLS stopped at max_iter gives
its last iterate with scikit-learn's ConvergenceWarning. These estimators need scikit-learn
installed; `import hvd_linreg` does not import this module."""

from __future__ import annotations

from sklearn.base import RegressorMixin

from hvd_linreg import families
from hvd_linreg.estimators.base import _check_iterations, _Exact, _non_negative
from hvd_linreg.estimators.classifiers import LogisticRegression, LogisticRegressionCV
from hvd_linreg.estimators.penalized import (
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
    "LogisticRegressionCV",
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


class _GLM(RegressorMixin, _Exact):
    """The GLM regressors: scikit-learn's objective
    (1/(2·Σsw)) Σ sw·deviance + alpha/2·‖w‖² is the tool's times n/Σsw with
    l2 = alpha·Σsw / (2n) (for the normal family, whose loss is the whole squared error,
    alpha·Σsw / n)."""

    def __init__(self, *, alpha=1.0, fit_intercept=True, tol=None, max_iter=100, warm_start=False):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

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
        self, *, power=0.0, alpha=1.0, fit_intercept=True, link="auto", tol=None, max_iter=100
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
