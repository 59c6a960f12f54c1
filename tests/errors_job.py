"""Ranks that pass hvd_linreg.fit() rows that do not agree: rank 0 the columns a and b, the
others a and c; a column g of categories on rank 0 and of numbers on the others; g's
categories in another order. Then two estimators: a LinearRegression given one row on rank 1
(its ValueError there is every rank's UsageError), and an ElasticNetCV given a splitter, which
only one process takes. Each rank catches each UsageError (a ValueError), and rank 0 writes
every rank's messages as JSON, a list by rank. Run by tests/test_error_messages.py under a
launcher."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pandas as pd


def frames(rank: int) -> list[pd.DataFrame]:
    rng = np.random.default_rng(rank)
    x = rng.normal(size=10)
    other = pd.Categorical(["p", "q"] * 5, categories=["p", "q"] if rank == 0 else ["q", "p"])
    return [
        pd.DataFrame({"a": x, "b" if rank == 0 else "c": rng.normal(size=10)}),
        pd.DataFrame({"a": x, "g": other if rank == 0 else np.arange(10.0)}),
        pd.DataFrame({"a": x, "g": other}),
    ]


def estimator_fits(rank: int) -> list:
    from sklearn.model_selection import KFold

    from hvd_linreg import estimators

    X, y = np.arange(20.0).reshape(10, 2) % 7, np.arange(10.0) % 4
    rows = 1 if rank == 1 else 10
    return [
        lambda: estimators.LinearRegression().fit(X[:rows], y[:rows]),
        lambda: estimators.ElasticNetCV(cv=KFold(3)).fit(X, y),
    ]


def main() -> int:
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("HOROVOD_RANK", "0")))
    import hvd_linreg

    said = []
    for X in frames(rank):
        try:
            hvd_linreg.fit(X, np.arange(10.0) % 4, solver="exact", quiet=True)
            said.append("no error")
        except hvd_linreg.UsageError as e:
            said.append(str(e))
    for fit in estimator_fits(rank):
        try:
            fit()
            said.append("no error")
        except ValueError as e:
            said.append(f"{type(e).__name__}: {e}")
    from mpi4py import MPI

    every = MPI.COMM_WORLD.allgather(said)
    if rank == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(every, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
