"""Run by tests/test_nist.py as the ranks of one horovodrun job: the tool's exact solver
(load_shard, least_squares.optimum, statistics.describe: the path of --solver exact) on every
.npy file of a directory (last column the target), and without an intercept on those of its
subdirectory no_intercept (optimum's intercept=False, the path of --no_intercept: b is 0, with
no standard error); rank 0 writes each fit's [w..., b], standard errors and singular columns to
a JSON file. One job fits them all: a launch costs seconds, a fit none.

    horovodrun -np N python tests/exact_job.py DIRECTORY OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hvd_linreg.config import Config
from hvd_linreg.data import load_shard
from hvd_linreg.runtime import ranks
from hvd_linreg.solvers import least_squares
from hvd_linreg.statistics import describe


def main(directory: str, out: str) -> None:
    job = ranks.init()
    fits = {}
    paths = [(p, True) for p in sorted(Path(directory).glob("*.npy"))]
    paths += [(p, False) for p in sorted(Path(directory, "no_intercept").glob("*.npy"))]
    for path, intercept in paths:
        config = Config(data=str(path), solver="exact", no_intercept=not intercept)
        shard = load_shard(config, job.rank, job.size, job)
        optimum = least_squares.optimum(job, shard, intercept=intercept)
        fits[path.stem] = {
            "params": optimum.params[:, 0].tolist(),  # the matrix's one column, [w..., b]
            "std_errors": [c.std_error for c in describe(optimum).coefficients],
            "dependent": list(optimum.dependent),
        }
    if job.is_root:
        Path(out).write_text(json.dumps({"size": job.size, "controller": job.controller, **fits}))


if __name__ == "__main__":
    main(*sys.argv[1:])
