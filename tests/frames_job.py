"""Fits a DataFrame with word, category and boolean columns with hvd_linreg.fit, each rank
its own rows: statsmodels' grunfeld panel sorted by firm, so that each rank lacks some firms,
and a synthetic panel. Rank 0 writes each fit's names and coefficients as JSON. Run by
tests/test_frames.py, in one process or under a launcher."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pandas as pd


def grunfeld() -> pd.DataFrame:
    """statsmodels' grunfeld (investment of 11 firms over 20 years), sorted by firm: a rank's
    contiguous rows hold only some of the firms."""
    import statsmodels.api as sm

    data = sm.datasets.grunfeld.load_pandas().data
    return data.sort_values(["firm", "year"], kind="stable").reset_index(drop=True)


def panel() -> pd.DataFrame:
    """600 rows: a word column (region) of which the last rank's rows alone hold "Z", a category
    column with its own order (its first, "mid", the reference), a boolean, and a Poisson
    count."""
    rng = np.random.default_rng(5)
    n = 600
    region = rng.choice(["N", "S", "E", "W"], n)
    region[-30:] = "Z"
    grade = pd.Categorical(rng.choice(["lo", "mid", "hi"], n), categories=["mid", "lo", "hi"])
    flag = rng.uniform(size=n) < 0.4
    x = rng.normal(size=n)
    eta = 0.2 + 0.3 * x + 0.4 * (region == "S") - 0.3 * (region == "Z") + 0.5 * flag
    eta = eta + 0.3 * (np.asarray(grade) == "hi")
    y = rng.poisson(np.exp(eta)).astype(float)
    k = rng.integers(0, 3, n)
    k[-20:] = 3  # a number that only the last rank's rows hold, a level through C(k)
    return pd.DataFrame({"x": x, "region": region, "grade": grade, "flag": flag, "k": k, "y": y})


def guerry() -> pd.DataFrame:
    """Guerry's departments (tests/data/guerry.csv) sorted by region, so that a rank's rows lack
    some regions: Corsica's region is missing, and so, here, are one department's literacy and
    another's population."""
    from pathlib import Path

    table = pd.read_csv(Path(__file__).parent / "data" / "guerry.csv")
    table = table.sort_values(["Region", "dept"], kind="stable", na_position="first")
    table = table.reset_index(drop=True)
    table.loc[10, "Literacy"] = np.nan
    table.loc[60, "Pop1831"] = None
    return table


FITS = {
    "grunfeld": (grunfeld, ["value", "capital", "firm"], "invest", {}),
    "panel": (panel, ["x", "region", "grade", "flag"], "y", {"model": "poisson"}),
}


# Formula fits (fit(formula, data=)): the implicit constant of a full coding (- 1) included
FORMULAS = {
    "grunfeld-formula": (grunfeld, "invest ~ np.log(value) + capital + C(firm) - 1", {}),
    "panel-formula": (
        panel,
        "y ~ x + C(region) + grade + flag + x:flag + C(k)",
        {"model": "poisson"},
    ),
    "guerry-missing": (
        guerry,
        "Lottery ~ Literacy + np.log(Pop1831) + Region",
        {"missing": "drop"},
    ),
}


def mine(table: pd.DataFrame, rank: int, size: int) -> pd.DataFrame:
    cuts = np.linspace(0, len(table), size + 1).astype(int)
    return table.iloc[cuts[rank] : cuts[rank + 1]]


def main() -> int:
    out = sys.argv[1]
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("HOROVOD_RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("HOROVOD_SIZE", "1")))
    import hvd_linreg

    got = {}
    for name, (make, features, target, settings) in FITS.items():
        rows = mine(make(), rank, size)
        result = hvd_linreg.fit(rows[features], rows[target], solver="exact", **settings)
        got[name] = {
            "names": list(result.names),
            "params": result.params.tolist(),
            "bse": result.bse.tolist(),
            "predicted": result.predict(rows[features]).tolist(),
        }
    for name, (make, formula, settings) in FORMULAS.items():
        rows = mine(make(), rank, size)
        result = hvd_linreg.fit(formula, data=rows, solver="exact", **settings)
        statistics = result.to_dict()["statistics"]
        got[name] = {
            "names": list(result.names),
            "params": result.params.tolist(),
            "bse": result.bse.tolist(),
            "predicted": result.predict(rows.dropna()).tolist(),
            "dropped": result.to_dict()["rows_dropped_missing"],
            "r2": statistics.get("r2"),
            "f_value": statistics.get("f_value"),
        }
    every = [got]
    if size > 1:
        from mpi4py import MPI

        every = MPI.COMM_WORLD.allgather(got)
    if rank == 0:
        for name in [*FITS, *FORMULAS]:  # each rank's predictions of its rows, in rank order
            got[name]["predicted"] = [v for theirs in every for v in theirs[name]["predicted"]]
        with open(out, "w") as f:
            json.dump(got, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
