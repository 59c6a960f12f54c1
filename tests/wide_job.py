"""A user's script that fits sparse rows with hvd_linreg: each rank passes its own slice of one
dataset as a SciPy CSR matrix (900 columns, 1% filled) to fit() and to the estimators, and rank
0 writes the coefficients as JSON. Run as `python wide_job.py OUT [narrow-on-rank-1]`, alone or
under a launcher; tests/test_wide.py compares them with references() (scikit-learn and
statsmodels on all the rows)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from scipy import sparse

NUM_ROWS, NUM_FEATURES = 2000, 900
SHARES = {1: [1.0], 2: [0.35, 0.65]}  # each rank's share, unequal on purpose
L2 = 1e-3  # fit()'s ridge: scikit-learn's C = 1 / (2 n L2), Ridge's alpha = n L2


def rows() -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """The whole dataset: sparse X, a least-squares target and a 0/1 one."""
    rng = np.random.default_rng(23)
    X = sparse.random(NUM_ROWS, NUM_FEATURES, density=0.01, format="csr", random_state=24)
    eta = X @ rng.normal(size=NUM_FEATURES) + 0.3
    y = eta + rng.normal(size=NUM_ROWS)
    late = (rng.uniform(size=NUM_ROWS) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    return X, y, late


def references() -> dict[str, list[float]]:
    """The same fits by scikit-learn and statsmodels on all the rows, dense: [w..., b]."""
    import statsmodels.api as sm
    from sklearn.linear_model import LogisticRegression, Ridge

    X, y, late = rows()
    dense = X.toarray()
    ols = sm.OLS(y, np.c_[dense, np.ones(NUM_ROWS)]).fit().params
    C = 1 / (2 * L2 * NUM_ROWS)
    logistic = LogisticRegression(C=C, solver="newton-cholesky", tol=1e-12).fit(dense, late)
    ridge = Ridge(alpha=L2 * NUM_ROWS, solver="cholesky").fit(dense, y)
    return {
        "ols": ols.tolist(),
        "logistic": [*logistic.coef_[0], logistic.intercept_[0]],
        "LogisticRegression": [*logistic.coef_[0], logistic.intercept_[0]],
        "Ridge": [*ridge.coef_, ridge.intercept_],
    }


def main() -> int:
    out, *options = sys.argv[1:]
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    cuts = np.rint(np.cumsum([0.0, *SHARES[size]]) * NUM_ROWS).astype(int)
    mine = slice(int(cuts[rank]), int(cuts[rank + 1]))
    X, y, late = (a[mine] for a in rows())
    if "narrow-on-rank-1" in options and rank == 1:
        X = X[:, :-1]

    import hvd_linreg
    from hvd_linreg import estimators

    got = {
        "ols": hvd_linreg.fit(X, y, solver="exact").params.tolist(),
        "logistic": hvd_linreg.fit(
            X, late, model="logistic", solver="exact", l2=L2
        ).params.tolist(),
    }
    C = 1 / (2 * L2 * NUM_ROWS)
    fitted = estimators.LogisticRegression(C=C).fit(X.tocoo(), late)
    got["LogisticRegression"] = [*fitted.coef_[0], fitted.intercept_[0]]
    ridge = estimators.Ridge(alpha=L2 * NUM_ROWS).fit(X.tocsc(), y)
    got["Ridge"] = [*ridge.coef_, ridge.intercept_]
    if rank == 0:
        with open(out, "w") as f:
            json.dump(got, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
