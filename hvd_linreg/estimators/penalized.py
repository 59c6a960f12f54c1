"""scikit-learn estimators of the elastic net (docs/elastic-net.md), with scikit-learn's and
glum's parameter names: ElasticNet, Lasso, ElasticNetCV, LassoCV, GeneralizedLinearRegressor
and GeneralizedLinearRegressorCV (LogisticRegression's penalty="l1" and "elasticnet" are in
estimators.py, beside its "l2").

Each is the tool's objective as it is: scikit-learn's ElasticNet minimises
(1/(2·Σsw)) Σ sw·(y - x·w - b)² + alpha·(l1_ratio·‖w‖₁ + (1 - l1_ratio)/2·‖w‖²), glum's
GeneralizedLinearRegressor the same with each family's deviance, and neither scales the
features (the tool's --no-standardize; glum's scale_predictors=True is its --standardize).

The CV estimators take cv=K (default 5) as scikit-learn's KFold(K) cuts the rows, unshuffled:
under a launcher the rows of all the ranks in rank order, so that one process and many see the
same folds; in one process cv may also be a splitter (its test sets are the folds). Every fold's
model comes from the same passes over the rows as the full path. alpha_ is the strength of the
least mean held-out deviance over the folds, each fold counting once (scikit-learn's and glum's
choice; the command line's cv.glmnet-style mean weighs each fold by its rows' weight)."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import RegressorMixin

from hvd_linreg.estimators.base import (
    _check_iterations,
    _Exact,
    _non_negative,
    _positive,
    glum_alpha_scale,
    glum_controls,
    positive_limits,
)
from hvd_linreg.families import links

# glum's family names -> the tool's model and glum's "auto" link for it
_GLUM_FAMILIES = {
    "normal": ("linear", "identity"),
    "gaussian": ("linear", "identity"),
    "poisson": ("poisson", "log"),
    "gamma": ("gamma", "log"),
    "binomial": ("logistic", "logit"),
    "inverse.gaussian": ("inverse_gaussian", "log"),
}


class ElasticNet(RegressorMixin, _Exact):
    """Least squares with the elastic net's penalty, as sklearn.linear_model.ElasticNet."""

    def __init__(
        self, alpha=1.0, *, l1_ratio=0.5, fit_intercept=True, tol=None, max_iter=1000,
        positive=False,
    ):  # fmt: skip
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.positive = positive

    def _ratio(self) -> float:
        return self.l1_ratio

    def _elastic(self) -> bool:
        return True

    def _check_params(self):
        _non_negative("alpha", self.alpha)
        _check_ratio(self._ratio())
        _check_iterations(self)

    def _fit_settings(self, job, weight_sum, rows, local_rows):
        ratio = float(self._ratio())
        return {
            "alpha": float(self.alpha),
            "l1_ratio": ratio,
            "standardize": False,
            **positive_limits(self),
        }

    def predict(self, X):
        return self._linear_predictor(X)


class Lasso(ElasticNet):
    """Least squares with an L1 penalty, as sklearn.linear_model.Lasso: ElasticNet at
    l1_ratio 1."""

    def __init__(self, alpha=1.0, *, fit_intercept=True, tol=None, max_iter=1000, positive=False):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.positive = positive

    def _ratio(self) -> float:
        return 1.0


class _CrossValidated(_Exact):
    """What the CV estimators share: the folds, the path's settings, and the choice."""

    def _elastic(self) -> bool:
        return True

    def _ratio(self) -> float:
        return self.l1_ratio

    def _path_settings(self, rows: float) -> dict:
        """fit()'s path settings, given the rows of weight > 0 over all ranks."""
        raise NotImplementedError

    def _fit_settings(self, job, weight_sum, rows, local_rows):
        fold = _folds(job, local_rows, self.cv)
        return {"l1_ratio": float(self._ratio()), **self._path_settings(rows), "fold": fold}

    def _fitted(self, result):
        path = result.path
        raw = path.cv.raw  # (folds, strengths): each fold's mean held-out deviance
        best = int(np.argmin(raw.mean(axis=0)))  # the first: the largest strength of the least
        scale = self._alpha_scale()  # the tool's strengths in the estimator's own
        self.alpha_ = float(path.alphas[best]) * scale
        self.alphas_ = np.asarray(path.alphas) * scale
        self.l1_ratio_ = float(self._ratio())
        self.coef_ = path.coefficients[best, :-1]
        self.intercept_ = float(path.coefficients[best, -1])
        self._store_path(raw)

    def _store_path(self, raw: np.ndarray) -> None:
        raise NotImplementedError

    def _alpha_scale(self) -> float:
        return 1.0


class ElasticNetCV(RegressorMixin, _CrossValidated):
    """ElasticNet with its strength chosen by K-fold cross-validation, as scikit-learn 1.9's
    sklearn.linear_model.ElasticNetCV: alphas a count of strengths from the least that zeroes
    every coefficient down to eps times it, or the strengths themselves; mse_path_ (strengths x
    folds)."""

    def __init__(
        self,
        *,
        l1_ratio=0.5,
        eps=1e-3,
        alphas=100,
        fit_intercept=True,
        cv=None,
        tol=None,
        max_iter=1000,
        positive=False,
    ):
        self.l1_ratio = l1_ratio
        self.eps = eps
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.tol = tol
        self.max_iter = max_iter
        self.positive = positive

    def _check_params(self):
        _check_ratio(self._ratio())
        _check_eps(self.eps)
        _strengths(self.alphas)
        _check_iterations(self)

    def _path_settings(self, rows):
        given = _strengths(self.alphas)
        if isinstance(given, int):
            return {
                "n_alphas": given,
                "alpha_min_ratio": self.eps,
                "standardize": False,
                "whole_path": True,  # scikit-learn's path ends nowhere early
                **positive_limits(self),
            }
        return {"alpha": given, "standardize": False, **positive_limits(self)}

    def _store_path(self, raw):
        self.mse_path_ = raw.T

    def predict(self, X):
        return self._linear_predictor(X)


class LassoCV(ElasticNetCV):
    """Lasso with its strength chosen by K-fold cross-validation, as
    sklearn.linear_model.LassoCV: ElasticNetCV at l1_ratio 1."""

    def __init__(
        self, *, eps=1e-3, alphas=100, fit_intercept=True, cv=None, tol=None, max_iter=1000,
        positive=False,
    ):  # fmt: skip
        self.eps = eps
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.tol = tol
        self.max_iter = max_iter
        self.positive = positive

    def _ratio(self) -> float:
        return 1.0


class _Glum(RegressorMixin):
    """glum's family and link, its penalty vectors and bounds, its prediction and its score."""

    _alpha_scale = glum_alpha_scale  # the tool's rescaled factors undone
    _control_settings = glum_controls

    def _settings(self):
        if self.family not in _GLUM_FAMILIES:
            raise ValueError(
                f"family={self.family!r} is not supported: use one of {', '.join(_GLUM_FAMILIES)}"
            )
        model, auto = _GLUM_FAMILIES[self.family]
        link = auto if self.link == "auto" else self.link
        return {"model": model, "link": link}

    def predict(self, X):
        return links.named(self._settings()["link"]).inverse(self._linear_predictor(X))

    def score(self, X, y, sample_weight=None):
        """D², the fraction of the deviance explained (R² for the normal family)."""
        from sklearn.metrics import d2_tweedie_score

        power = {"normal": 0, "gaussian": 0, "poisson": 1, "gamma": 2, "inverse.gaussian": 3}
        power = power.get(self.family)
        if power is None:
            from sklearn.metrics import d2_log_loss_score

            p = self.predict(X)
            return d2_log_loss_score(y, np.c_[1 - p, p], sample_weight=sample_weight)
        return d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=power)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = self.family in ("poisson", "gamma", "inverse.gaussian")
        return tags


class GeneralizedLinearRegressor(_Glum, _Exact):
    """A GLM with the elastic net's penalty, as glum.GeneralizedLinearRegressor: families
    normal, poisson, gamma, inverse.gaussian and binomial; alpha=None (glum's default) is no
    penalty; scale_predictors=True penalises the standardized coefficients."""

    def __init__(
        self,
        *,
        alpha=None,
        l1_ratio=0,
        family="normal",
        link="auto",
        fit_intercept=True,
        max_iter=100,
        scale_predictors=False,
        P1=None, P2=None, lower_bounds=None, upper_bounds=None,
    ):  # fmt: skip
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.family = family
        self.link = link
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.scale_predictors = scale_predictors
        self.P1, self.P2 = P1, P2
        self.lower_bounds, self.upper_bounds = lower_bounds, upper_bounds

    def _elastic(self) -> bool:
        return self.alpha is not None

    def _check_params(self):
        if self.alpha is not None:
            _non_negative("alpha", self.alpha)
        _check_ratio(self.l1_ratio)
        _check_count("max_iter", self.max_iter)
        self._settings()

    def _fit_settings(self, job, weight_sum, rows, local_rows):
        if self.alpha is None:
            return {}
        return {
            "alpha": float(self.alpha) / self._alpha_scale(),
            "l1_ratio": float(self.l1_ratio),
            "standardize": bool(self.scale_predictors),
            **self._control_settings(),
        }


class GeneralizedLinearRegressorCV(_Glum, _CrossValidated):
    """GeneralizedLinearRegressor with its strength chosen by K-fold cross-validation, as
    glum.GeneralizedLinearRegressorCV: n_alphas strengths down to min_alpha_ratio (default
    1e-6, 1e-2 with more features than rows, as glum's); deviance_path_ (folds x strengths)."""

    def __init__(
        self,
        *,
        l1_ratio=0,
        family="normal",
        link="auto",
        fit_intercept=True,
        max_iter=100,
        n_alphas=100,
        min_alpha_ratio=None,
        cv=None,
        scale_predictors=False,
        P1=None, P2=None, lower_bounds=None, upper_bounds=None,
    ):  # fmt: skip
        self.l1_ratio = l1_ratio
        self.family = family
        self.link = link
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.n_alphas = n_alphas
        self.min_alpha_ratio = min_alpha_ratio
        self.cv = cv
        self.scale_predictors = scale_predictors
        self.P1, self.P2 = P1, P2
        self.lower_bounds, self.upper_bounds = lower_bounds, upper_bounds

    def _check_params(self):
        _check_ratio(self.l1_ratio)
        _check_count("n_alphas", self.n_alphas)
        _check_count("max_iter", self.max_iter)
        if self.min_alpha_ratio is not None:
            _check_eps(self.min_alpha_ratio)
        self._settings()

    def _path_settings(self, rows):
        ratio = self.min_alpha_ratio
        if ratio is None:
            ratio = 1e-6 if rows >= self.n_features_in_ else 1e-2
        return {
            "n_alphas": int(self.n_alphas),
            "whole_path": True,  # glum's path ends nowhere early
            "alpha_min_ratio": ratio,
            "standardize": bool(self.scale_predictors),
            **self._control_settings(),
        }

    def _store_path(self, raw):
        self.deviance_path_ = raw


def _folds(job, local_rows: int, cv, y: np.ndarray | None = None) -> np.ndarray:
    """Each of this rank's rows' fold (1 .. K): scikit-learn's KFold(K) of the rows of all the
    ranks in rank order, unshuffled, or with a classifier's target y its StratifiedKFold(K);
    or, in one process, a splitter's test sets."""
    cv = 5 if cv is None else cv
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"cv must be at least 2 folds, got {cv}")
        if y is not None:
            return _stratified(job, y, cv)
        counts = job.allgather(local_rows, "estimator_folds") if job.size > 1 else [local_rows]
        n, start = sum(counts), sum(counts[: job.rank])
        if n < cv:
            raise ValueError(
                f"Cannot have number of splits n_splits={cv} greater than the number of "
                f"samples: n_samples={n}."
            )
        sizes = np.full(cv, n // cv)
        sizes[: n % cv] += 1
        ids = np.arange(start, start + local_rows)
        return (np.searchsorted(np.cumsum(sizes), ids, side="right") + 1).astype(np.float64)
    if job.size > 1:
        raise ValueError("under a launcher, cv is a number of folds (KFold over all the rows)")
    splits = cv.split(np.zeros((local_rows, 1)), y) if hasattr(cv, "split") else cv
    fold = np.zeros(local_rows)
    for k, (train, test) in enumerate(splits):
        if (fold[test] != 0).any() or len(np.intersect1d(train, test)):
            raise ValueError("cv's test sets must not overlap, nor a test set its training set")
        fold[test] = k + 1
    if (fold == 0).any():
        raise ValueError("cv's splits must put every row in one test set")
    return fold


def _stratified(job, y: np.ndarray, K: int) -> np.ndarray:
    """StratifiedKFold(K)'s folds (1 .. K) of this rank's rows, from every rank's count and
    first row of each class: the classes coded by their first row over all the ranks, each
    fold's share of each class dealt round-robin over the sorted codes, and each class's rows
    given their folds in blocks, in rank order."""
    classes = np.unique(y)
    if job.size > 1:
        classes = np.unique(np.concatenate(job.allgather(classes, "estimator_strata")))
    code = np.searchsorted(classes, y)
    counts = np.bincount(code, minlength=len(classes))
    first = np.full(len(classes), np.inf)
    np.minimum.at(first, code, np.arange(len(y), dtype=np.float64))
    if job.size > 1:
        every = job.allgather((counts, first), "estimator_strata_rows")
    else:
        every = [(counts, first)]
    before = sum((c for c, _ in every[: job.rank]), np.zeros(len(classes), np.int64))
    starts = np.cumsum([0] + [int(c.sum()) for c, _ in every])
    firsts = np.min([f + start for (_, f), start in zip(every, starts)], axis=0)
    totals = sum(c for c, _ in every)
    if np.all(K > totals):
        raise ValueError(
            f"n_splits={K} cannot be greater than the number of members in each class."
        )
    appearance = np.argsort(np.argsort(firsts, kind="stable"))  # each class's code by first row
    ordered = np.repeat(np.arange(len(classes)), totals[np.argsort(firsts, kind="stable")])
    allocation = np.array([np.bincount(ordered[i::K], minlength=len(classes)) for i in range(K)])
    fold = np.zeros(len(y))
    for c in range(len(classes)):
        blocks = np.repeat(np.arange(K), allocation[:, appearance[c]])
        mine = code == c
        fold[mine] = blocks[before[c] : before[c] + counts[c]] + 1
    return fold


def _check_ratio(value) -> None:
    if not isinstance(value, (int, float, np.number)) or not 0 <= value <= 1:
        raise ValueError(f"l1_ratio must be between 0 and 1; got (l1_ratio={value!r})")


def _check_eps(value) -> None:
    _positive("eps", value)
    if not value < 1:
        raise ValueError(f"eps must be below 1, got {value!r}")


def _strengths(alphas) -> int | list[float]:
    """scikit-learn 1.9's alphas: a count of strengths on the path, or the strengths, each
    >= 0, largest first as the path runs; ValueError otherwise."""
    if isinstance(alphas, numbers.Integral) and not isinstance(alphas, bool):
        _check_count("alphas", alphas)
        return int(alphas)
    try:
        values = np.asarray(alphas, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        values = np.array([])
    if not len(values) or isinstance(alphas, (str, bool)):
        raise ValueError(f"alphas must be a count >= 1 or a list of strengths, got {alphas!r}")
    for value in values:
        _non_negative("each of alphas", value)
    return sorted(values.tolist(), reverse=True)


def _check_count(name: str, value) -> None:
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
