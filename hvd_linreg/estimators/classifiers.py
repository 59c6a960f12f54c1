"""The classifiers, as scikit-learn's for a binary target: LogisticRegression, solved
exactly, and LogisticRegressionCV, whose strength C is chosen by K-fold cross-validation with
every fold's fits at every C from the same passes over the rows (solvers/path.py) rather than
one fit per fold and C.

scikit-learn fits a fold at C by minimising C·Σ sw·logloss + penalty over its training rows:
the tool's objective at alpha = 1 / (C·Σsw) of those rows. The path fits the full data at
alpha = 1 / (C·Σsw) and each fold at that times Σsw / its training rows' Σsw (fold_alpha="sum").
cv=K cuts the rows as scikit-learn's StratifiedKFold(K) does, unshuffled; under a launcher
the rows of all the ranks in rank order, so one process and many see the same folds. Each
fold's score at each C is its held-out rows' accuracy (scoring=None) or negative log-loss,
weighted by sample_weight; its sums over the ranks make it the score of all the held-out
rows. refit=True reports the full data's model at the C of the best total score, the first
(the smallest C) among equals; refit=False the mean of each fold's best model, as
scikit-learn."""

from __future__ import annotations

import numbers

import numpy as np
from scipy import sparse
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from hvd_linreg.data import frames
from hvd_linreg.estimators.base import _check_iterations, _Exact, _positive
from hvd_linreg.estimators.penalized import _check_ratio, _folds
from hvd_linreg.library import fit

SCORINGS = (None, "accuracy", "neg_log_loss")


class LogisticRegression(ClassifierMixin, _Exact):
    """Binary logistic regression, as scikit-learn 1.9's sklearn.linear_model.LogisticRegression:
    minimises C·Σ sw·logloss + ‖w‖²/2 (l1_ratio=0, the default), which is the tool's --model
    logistic objective times C·n with l2 = 1 / (2·C·n); C=np.inf is l2 = 0. l1_ratio above 0,
    scikit-learn's C·Σ sw·logloss + l1_ratio·‖w‖₁ + (1 - l1_ratio)/2·‖w‖², is the elastic net
    (docs/elastic-net.md) at alpha = 1 / (C·Σsw), unstandardized. penalty= ("l2", "l1",
    "elasticnet", None), deprecated by scikit-learn 1.8, still names the penalty. The classes
    are the union of every rank's. With K > 2 classes it is the multinomial model (--model
    multinomial, l2 = 1 / (2·C·Σsw), l1_ratio 0 or C=np.inf), coef_ (K x F) and intercept_ (K)
    in scikit-learn's symmetric form."""

    _model = "logistic"
    _classifier = True

    def __init__(
        self,
        penalty="deprecated",
        *,
        C=1.0,
        l1_ratio=0.0,
        fit_intercept=True,
        tol=None,
        max_iter=100,
        warm_start=False,
    ):
        self.penalty = penalty
        self.C = C
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def _penalty(self) -> str | None:
        """The penalty as scikit-learn 1.9 reads it: l1_ratio 0 is "l2", 1 is "l1", between
        them "elasticnet", and C=np.inf none; the deprecated penalty= names it instead."""
        if self.penalty != "deprecated":
            return self.penalty
        if self.C == np.inf:
            return None
        return {0: "l2", 1: "l1"}.get(self.l1_ratio, "elasticnet")

    def _l2(self, weight_sum, rows):
        if self._penalty() is None:
            return 0.0
        return 1.0 / (2.0 * self.C * rows)

    def _elastic(self) -> bool:
        return self._penalty() in ("l1", "elasticnet")

    def _fit_settings(self, job, weight_sum, rows, local_rows):
        if not self._elastic():
            return super()._fit_settings(job, weight_sum, rows, local_rows)
        ratio = 1.0 if self._penalty() == "l1" else float(self.l1_ratio)
        return {"alpha": 1.0 / (self.C * weight_sum), "l1_ratio": ratio, "standardize": False}

    def _check_params(self):
        if self.penalty not in ("deprecated", "l2", None, "l1", "elasticnet"):
            raise ValueError(
                f"penalty={self.penalty!r} is not supported: leave it (deprecated in "
                "scikit-learn 1.8) and set l1_ratio and C, or use 'l2', 'l1', 'elasticnet' "
                "or None"
            )
        ratio = self.l1_ratio
        if not isinstance(ratio, (int, float, np.number)) or not 0 <= ratio <= 1:
            raise ValueError(f"l1_ratio must be between 0 and 1; got (l1_ratio={ratio!r})")
        if self.C != np.inf or self.penalty not in ("deprecated", None):
            _positive("C", self.C)
        _check_iterations(self)

    def _check_target(self, y):
        check_classification_targets(y)  # a continuous y: "Unknown label type: continuous"

    def _target(self, job, y):
        classes = np.unique(y)
        if job.size > 1:  # every rank's classes (a rank may hold only one of them)
            classes = np.unique(np.concatenate(job.allgather(np.unique(y), "estimator_classes")))
        if len(classes) < 2:
            raise ValueError(
                f"LogisticRegression needs 2 or more classes, got {len(classes)} class: "
                f"{classes[:5].tolist()}"
            )
        self.classes_ = classes
        if len(classes) > 2:  # multinomial: the labels as they are, its classes agreed anew
            if not self._takes_classes():
                raise ValueError(
                    "Only binary classification is supported with these parameters. The type "
                    f"of the target is multiclass ({len(classes)} classes): {type(self).__name__}"
                    " fits K classes with penalty 'l2' or None and an intercept"
                )
            return y
        return (y == classes[1]).astype(np.float64)

    def _takes_classes(self) -> bool:
        """Whether it fits more than two classes (the multinomial model) with its parameters."""
        return not self._elastic() and bool(self.fit_intercept)

    def _warm_start(self, previous):
        """The previous fit's coefficients where it had these classes: [w..., b], or for K
        classes B, (F + 1) x (K - 1), each class's against the first (scikit-learn's symmetric
        coef_ and intercept_ differ from B's by the first class's row)."""
        same = previous is not None and np.array_equal(previous["classes"], self.classes_)
        if not same or self._elastic():
            return None
        if len(self.classes_) == 2:
            return super()._warm_start(previous)
        symmetric = np.vstack([previous["coef"].T, previous["intercept"]])
        return symmetric[:, 1:] - symmetric[:, :1]

    def _fit_rows(self, job, X, y, sample_weight, weight_sum, rows, start=None):
        if len(self.classes_) == 2:
            return super()._fit_rows(job, X, y, sample_weight, weight_sum, rows, start)
        from hvd_linreg.estimators.base import fit_warning_of_sklearn

        l2 = 0.0 if self._penalty() is None else 1.0 / (2.0 * self.C * weight_sum)
        result = fit_warning_of_sklearn(
            X,
            y,
            weights=sample_weight,
            solver="exact",
            model="multinomial",
            l2=l2,
            start=start,
            **self._limits(),
        )
        symmetric = result.symmetric_params  # scikit-learn's coef_ and intercept_
        self.coef_, self.intercept_ = symmetric[:-1].T.copy(), symmetric[-1].copy()
        self.n_iter_ = result.statistics.iterations
        self.summary_ = result.summary()
        self.levels_ = dict(result.shard.levels or {})

    def decision_function(self, X):
        """Binary: each row's log-odds of the second class; K classes: each class's linear
        predictor (rows x K)."""
        check_is_fitted(self)
        if len(self.classes_) == 2:
            return self._linear_predictor(X)
        return self._features(X) @ self.coef_.T + self.intercept_

    def predict_proba(self, X):
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = 1.0 / (1.0 + np.exp(-scores))
            return np.column_stack([1.0 - p, p])
        scores = np.exp(scores - scores.max(axis=1, keepdims=True))
        return scores / scores.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        check_is_fitted(self)
        if len(self.classes_) > 2:
            return self.classes_[self.predict_proba(X).argmax(axis=1)]
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]

    def fit(self, X, y, sample_weight=None):
        super().fit(X, y, sample_weight)
        if len(self.classes_) == 2:
            self.coef_ = self.coef_[None, :]
            self.intercept_ = np.array([self.intercept_])
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self._takes_classes()
        return tags


class LogisticRegressionCV(LogisticRegression):
    """Binary logistic regression with C chosen by cross-validation, as scikit-learn 1.9's
    sklearn.linear_model.LogisticRegressionCV: Cs (a count, log-spaced from 1e-4 to 1e4, or the
    values), l1_ratios (None: the ridge; each value 0 to 1, chosen over by cross-validation
    too; the deprecated penalty= still names the penalty), scoring None (accuracy) or
    "neg_log_loss"; C_, Cs_, l1_ratio_, scores_ and coefs_paths_ as scikit-learn's legacy
    attributes (use_legacy_attributes=True)."""

    def __init__(
        self,
        *,
        Cs=10,
        l1_ratios=None,
        fit_intercept=True,
        cv=None,
        penalty="deprecated",
        scoring=None,
        tol=None,
        max_iter=100,
        refit=True,
    ):
        self.Cs = Cs
        self.l1_ratios = l1_ratios
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.penalty = penalty
        self.scoring = scoring
        self.tol = tol
        self.max_iter = max_iter
        self.refit = refit

    def _penalty(self) -> str:
        """scikit-learn 1.9's: l1_ratios None or all 0 is "l2", all 1 "l1", else
        "elasticnet"; the deprecated penalty= names it instead."""
        if self.penalty != "deprecated":
            return self.penalty
        ratios = np.asarray(self.l1_ratios if self.l1_ratios is not None else [0.0], float)
        return "l2" if (ratios == 0).all() else "l1" if (ratios == 1).all() else "elasticnet"

    def _check_params(self):
        if self.penalty not in ("deprecated", "l2", "l1", "elasticnet"):
            raise ValueError(
                f"penalty={self.penalty!r} is not supported: leave it (deprecated in "
                "scikit-learn 1.8) and set l1_ratios, or use 'l2', 'l1' or 'elasticnet'"
            )
        if self.l1_ratios is not None or self.penalty == "elasticnet":
            if not isinstance(self.l1_ratios, (list, tuple, np.ndarray)) or not len(self.l1_ratios):
                raise ValueError("l1_ratios must be a list of numbers in [0, 1]")
            for ratio in self.l1_ratios:
                _check_ratio(ratio)
        if self.scoring not in SCORINGS:
            raise ValueError(
                f"scoring={self.scoring!r} is not supported: use None (accuracy), 'accuracy' "
                "or 'neg_log_loss', whose sums over the ranks' rows are the score of them all"
            )
        self._Cs()
        _check_iterations(self)

    def _elastic(self) -> bool:
        return True

    def _Cs(self) -> np.ndarray:
        if isinstance(self.Cs, numbers.Integral) and not isinstance(self.Cs, bool):
            if self.Cs < 1:
                raise ValueError(f"Cs must be a count >= 1 or a list of C, got {self.Cs!r}")
            return np.logspace(-4, 4, self.Cs)
        values = np.asarray(self.Cs, dtype=np.float64).ravel()
        if not len(values):
            raise ValueError("Cs must be a count >= 1 or a non-empty list of C")
        for value in values:
            _positive("each of Cs", value)
        return values

    def _ratios(self) -> list:
        if self.l1_ratios is None:
            return [None]
        return [float(r) for r in self.l1_ratios]

    def _fit_rows(self, job, X, y, sample_weight, weight_sum, rows, start=None):
        Cs = self._Cs()
        order = np.argsort(Cs, kind="stable")  # the path runs from the largest alpha down
        alphas = [float(a) for a in 1.0 / (Cs[order] * weight_sum)]
        back = np.argsort(order)  # the path's strengths in Cs' order
        fold = _folds(job, len(y), self.cv, y)
        coded = None  # X as the path's features: its words coded once, by the first fit's levels
        scores, paths, fulls, passes, summaries = [], [], [], [], []
        for ratio in self._ratios():
            penalty = self._penalty()
            l1 = 1.0 if penalty == "l1" else 0.0 if penalty == "l2" else ratio
            result = fit(
                X,
                y,
                weights=sample_weight,
                fold=fold,
                solver="exact",
                model="logistic",
                alpha=alphas,
                l1_ratio=l1,
                standardize=False,
                fold_alpha="sum",
                **self._limits(),
            )
            path, shard = result.path, result.report.shard
            folds = path.fold_coefficients[:, back]
            if coded is None:
                self.levels_ = dict(shard.levels or {})
                coded = frames.new_rows(X, shard.columns, shard.levels) if shard.levels else X
            scores.append(self._scores(job, coded, y, sample_weight, fold, folds))
            paths.append(folds)
            fulls.append(path.coefficients[back])
            passes.append(path.passes)
            summaries.append(result.summary())
        self._choose(Cs, np.concatenate(scores, 1), np.concatenate(paths, 1), fulls, passes)
        self.summary_ = summaries[0] if len(summaries) == 1 else "\n\n".join(summaries)

    def _scores(self, job, X, y, weight, fold, paths) -> np.ndarray:
        """Each fold's score (K, Cs) at each C: its held-out rows' weighted accuracy or
        negative log-loss, summed over every rank's rows."""
        X = sparse.csr_matrix(X) if sparse.issparse(X) else np.asarray(X, dtype=np.float64)
        K, count = paths.shape[:2]
        sums = np.zeros((2, K, count))
        for k in range(K):
            held = fold == k + 1
            eta = X[held] @ paths[k, :, :-1].T + paths[k, :, -1]  # (rows, Cs)
            w, target = weight[held][:, None], y[held][:, None]
            if self.scoring == "neg_log_loss":
                p = np.clip(1.0 / (1.0 + np.exp(-eta)), np.finfo(float).eps, 1 - 1e-16)
                gain = target * np.log(p) + (1 - target) * np.log1p(-p)
            else:
                gain = ((eta > 0) == (target > 0.5)).astype(np.float64)
            sums[0, k] = (w * gain).sum(axis=0)
            sums[1, k] = w.sum()
        if job.size > 1:
            sums = np.asarray(job.allreduce_sum(sums.ravel(), "estimator_scores")).reshape(
                sums.shape
            )
        return sums[0] / sums[1]

    def _choose(self, Cs, scores, paths, fulls, passes) -> None:
        """scikit-learn's choice and attributes from each fold's scores and models (K, Cs x
        l1_ratios) and the full data's models (one (Cs, F + 1) per l1_ratio)."""
        count, ratios = len(Cs), self._ratios()
        label = self.classes_[1]
        self.Cs_ = Cs
        self.l1_ratios_ = np.asarray(ratios)
        self.scores_ = {label: scores}
        self.coefs_paths_ = {label: paths}
        self.n_iter_ = np.repeat(np.asarray(passes), count)[None, None, :].repeat(len(paths), 1)
        if self.refit:
            best = int(scores.sum(axis=0).argmax())
            self.C_ = np.array([Cs[best % count]])
            self.l1_ratio_ = np.array([ratios[best // count]])
            w = fulls[best // count][best % count]
        else:
            best = scores.argmax(axis=1)
            w = np.mean([paths[i, b] for i, b in enumerate(best)], axis=0)
            self.C_ = np.array([np.mean(Cs[best % count])])
            chosen = [ratios[b // count] for b in best]
            elastic = self._penalty() == "elasticnet"
            self.l1_ratio_ = np.array([np.mean(chosen) if elastic else 0.0])
        self.coef_ = w[None, :-1]
        self.intercept_ = np.array([w[-1]])
        if self.l1_ratios is not None:  # an axis for the l1_ratios: (folds, Cs, l1_ratios, ...)
            K, shape = len(paths), (len(ratios), count)
            self.scores_[label] = scores.reshape(K, *shape).transpose(0, 2, 1)
            self.coefs_paths_[label] = paths.reshape(K, *shape, -1).transpose(0, 2, 1, 3)
            self.n_iter_ = self.n_iter_.reshape(1, K, *shape).transpose(0, 1, 3, 2)

    def _takes_classes(self) -> bool:
        return False  # binary: its folds' scores are of two classes

    def fit(self, X, y, sample_weight=None):
        return super(LogisticRegression, self).fit(X, y, sample_weight)
