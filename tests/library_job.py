"""A user's Horovod script that calls hvd_linreg.fit: each rank builds its own rows (a slice of
one dataset, of unequal sizes), fits, and rank 0 writes what it got as JSON. Run as
`python library_job.py MODEL[,MODEL...] OUT [init-first] [nan-on-rank-1]`, alone or under a
launcher; MODEL "estimators" fits each of hvd_linreg.estimators instead. tests/test_library.py
and tests/test_estimators.py import rows() to fit the same dataset with statsmodels and
scikit-learn."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

NUM_ROWS = 1000
# Each rank's share of the rows, in rank order, for up to 4 ranks: unequal on purpose.
SHARES = {1: [1.0], 2: [0.3, 0.7], 3: [0.5, 0.1, 0.4], 4: [0.1, 0.4, 0.2, 0.3]}
SETTINGS = {
    "linear": {"solver": "exact"},
    "logistic": {"model": "logistic", "solver": "exact"},
    "poisson": {"model": "poisson", "solver": "exact"},
}
# Each estimator, the rows it fits (rows()'s model) and its parameters; the rows' weights, where
# they have them, are its sample_weight.
ESTIMATORS = {
    "LinearRegression": ("linear", {}),
    "Ridge": ("linear", {"alpha": 30.0}),
    "LogisticRegression": ("logistic", {"C": 0.05}),
    "PoissonRegressor": ("poisson", {"alpha": 0.1}),
    "GammaRegressor": ("gamma", {"alpha": 0.1}),
    "TweedieRegressor": ("poisson", {"power": 1.5, "alpha": 0.1}),
    "ElasticNet": ("linear", {"alpha": 0.02, "l1_ratio": 0.5}),
    "LassoCV": ("linear", {"cv": 3}),
    "LogisticRegressionCV": ("logistic", {"Cs": 6, "cv": 3}),
}


def rows(model: str) -> dict[str, np.ndarray]:
    """The whole dataset: X (3 features), y, and for Poisson each row's weight and offset."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(NUM_ROWS, 3))
    eta = 0.3 + X @ np.array([0.5, -0.25, 0.1])
    data = {"X": X}
    if model == "linear":
        data["y"] = eta + rng.normal(size=NUM_ROWS)
    elif model == "logistic":
        data["y"] = (rng.uniform(size=NUM_ROWS) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    elif model == "gamma":
        data["weights"] = rng.uniform(0.5, 2.0, NUM_ROWS)
        data["y"] = rng.gamma(2.0, np.exp(eta) / 2.0)
    else:
        data["weights"] = rng.uniform(0.5, 2.0, NUM_ROWS)
        data["offset"] = rng.normal(scale=0.2, size=NUM_ROWS)
        data["y"] = rng.poisson(np.exp(eta + data["offset"])).astype(np.float64)
    return data


def my_slice(rank: int, size: int) -> slice:
    cuts = np.rint(np.cumsum([0.0, *SHARES[size]]) * NUM_ROWS).astype(int)
    return slice(int(cuts[rank]), int(cuts[rank + 1]))


def main() -> int:
    models, out, *options = sys.argv[1:]
    rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(os.environ.get("HOROVOD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    if "init-first" in options:  # the script's own Horovod start, before the library's
        import horovod.tensorflow as hvd

        hvd.init()
    got = {}
    for model in models.split(","):
        if model == "estimators":
            got[model] = fit_estimators(rank, size)
            continue
        data = {k: v[my_slice(rank, size)] for k, v in rows(model).items()}
        if "nan-on-rank-1" in options and rank == 1:
            data["X"][2, 1] = np.nan
        try:
            got[model] = fit(model, data)
        except ValueError as e:  # hvd_linreg.UsageError, a ValueError
            print(f"rank {rank}: {type(e).__name__}: {e}", flush=True)
            return 2
    if rank == 0:
        with open(out, "w") as f:
            json.dump(got, f)
    return 0


def fit(model: str, data: dict[str, np.ndarray]) -> dict:
    """hvd_linreg.fit on this rank's rows, its features in a DataFrame as a user's would be."""
    import pandas as pd

    import hvd_linreg

    X = pd.DataFrame(data.pop("X"), columns=["x1", "x2", "x3"])
    result = hvd_linreg.fit(X, data.pop("y"), **data, **SETTINGS[model])
    return {
        "params": result.params.tolist(),
        "bse": result.bse.tolist(),
        "names": list(result.names),
        "summary": result.summary(),
        "metrics": result.to_dict(),
    }


def fit_estimators(rank: int, size: int) -> dict:
    """Each of hvd_linreg.estimators fitted on this rank's rows: its coef_ and intercept_."""
    from hvd_linreg import estimators

    got = {}
    for name, (model, params) in ESTIMATORS.items():
        data = {k: v[my_slice(rank, size)] for k, v in rows(model).items()}
        fitted = getattr(estimators, name)(**params).fit(
            data["X"], data["y"], sample_weight=data.get("weights")
        )
        got[name] = figures(fitted)
    return got


def figures(fitted) -> list[float]:
    """A fitted estimator's [coef..., intercept], then for LogisticRegressionCV each fold's
    score at each C (which tells its stratified folds and its fits)."""
    out = [*np.ravel(fitted.coef_), np.ravel(fitted.intercept_)[0]]
    scores = getattr(fitted, "scores_", None)
    return [float(v) for v in [*out, *(np.ravel(scores[fitted.classes_[1]]) if scores else [])]]


if __name__ == "__main__":
    sys.exit(main())
