"""Run by tests/test_collectives.py alone or as the ranks of one job: every family's exact fit
through hvd_linreg.fit, each rank passing its own slice of one dataset; rank 0 writes each fit's
[w..., b] and standard errors, the job's controller, and which of TensorFlow and Horovod's
TensorFlow module the process imported.

    mpirun -np N python tests/collectives_job.py OUT.json
"""

from __future__ import annotations

import json
import os
import sys

from library_job import my_slice, rows

# Each family's settings and the rows (library_job.rows' model) it fits
FITS = {
    "linear": ("linear", {}),
    "gaussian": ("linear", {"model": "gaussian", "link": "log"}),
    "logistic": ("logistic", {"model": "logistic"}),
    "binomial": ("logistic", {"model": "binomial", "link": "probit"}),
    "poisson": ("poisson", {"model": "poisson"}),
    "gamma": ("gamma", {"model": "gamma", "link": "log"}),
    "tweedie": ("poisson", {"model": "tweedie", "tweedie_power": 1.4}),
}


def main(out: str) -> None:
    import hvd_linreg

    rank = int(os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(os.environ.get("HOROVOD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    got = {}
    for name, (data_of, settings) in FITS.items():
        data = {k: v[my_slice(rank, size)] for k, v in rows(data_of).items()}
        if name == "gaussian":
            data["y"] = data["y"] + 5.0  # a positive mean for the log link
        result = hvd_linreg.fit(data.pop("X"), data.pop("y"), **data, solver="exact", **settings)
        got[name] = {"params": result.params.tolist(), "bse": result.bse.tolist()}
        controller = result.to_dict()["controller"]
    imported = [m for m in ("tensorflow", "horovod.tensorflow") if m in sys.modules]
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"fits": got, "controller": controller, "imported": imported}, f)


if __name__ == "__main__":
    main(sys.argv[1])
