"""Section 12's rows, peers and meter: whole runs, from a process's start to its exit, as a user
waits for them (bench/run.py, time_to_whole_results).

    python bench/whole_runs.py --write poisson rows.npz --rows 2000000 --features 32
    python bench/whole_runs.py --peer sklearn --model poisson --data rows.npz
    python bench/whole_runs.py --meter OUT_DIR -- COMMAND ...

--write: the rows of one model as an uncompressed .npz of X and y (or a .csv with a header, the
target last). --peer: a script a user of scikit-learn or glum would write: load the file (NumPy,
or pandas for a CSV) and fit the unpenalised model to the tolerance the tool reaches; it prints
its coefficients as JSON. --meter: run COMMAND and write its peak RSS (the largest of the
processes it waited for) to OUT_DIR/<rank>.json; under mpirun each rank meters itself.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

MODELS = ("linear", "logistic", "poisson")


def write(model: str, path: str, rows: int, features: int, seed: int = 0) -> None:
    """X ~ N(0, 1), w ~ N(0, 0.1²), b = 0.5, and y of the model's kind."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    eta = X @ rng.normal(0.0, 0.1, features) + 0.5
    if model == "linear":
        y = eta + rng.standard_normal(rows)
    elif model == "logistic":
        y = (rng.random(rows) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    else:
        y = rng.poisson(np.exp(eta)).astype(np.float64)
    if path.endswith(".csv"):
        header = ",".join([*(f"x{j}" for j in range(features)), "y"])
        np.savetxt(path, np.c_[X, y], delimiter=",", header=header, comments="", fmt="%.17g")
    else:
        np.savez(path, X=X, y=y)


def load(path: str) -> tuple:
    """X and y as a user loads them: np.load for .npz, pandas for .csv."""
    import numpy as np

    if path.endswith(".csv"):
        import pandas as pd

        frame = pd.read_csv(path)
        return frame.iloc[:, :-1].to_numpy(), frame.iloc[:, -1].to_numpy()
    with np.load(path) as arrays:
        return arrays["X"], arrays["y"]


def sklearn_fit(model: str, X, y) -> list[float]:
    import numpy as np
    from sklearn import linear_model

    if model == "linear":
        fitted = linear_model.LinearRegression().fit(X, y)
    elif model == "logistic":
        fitted = linear_model.LogisticRegression(
            penalty=None, solver="newton-cholesky", tol=1e-10, max_iter=100
        ).fit(X, y)
    else:
        fitted = linear_model.PoissonRegressor(
            alpha=0.0, solver="newton-cholesky", tol=1e-10, max_iter=100
        ).fit(X, y)
    return np.append(np.ravel(fitted.coef_), fitted.intercept_).tolist()


def glum_fit(model: str, X, y) -> list[float]:
    import numpy as np
    from glum import GeneralizedLinearRegressor

    family = {"linear": "normal", "logistic": "binomial", "poisson": "poisson"}[model]
    fitted = GeneralizedLinearRegressor(family=family, alpha=0.0, gradient_tol=1e-10).fit(X, y)
    return np.append(fitted.coef_, fitted.intercept_).tolist()


PEERS = {"sklearn": sklearn_fit, "glum": glum_fit}


def meter(out_dir: str, command: list[str]) -> int:
    """Run command; write its peak RSS in MiB to OUT_DIR/<rank>.json; exit with its code."""
    code = subprocess.call(command)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "0")
    (Path(out_dir) / f"{rank}.json").write_text(json.dumps({"peak_rss_mib": peak_mib}))
    return code


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--meter":
        return meter(sys.argv[2], sys.argv[sys.argv.index("--") + 1 :])
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--write", nargs=2, metavar=("MODEL", "PATH"))
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--peer", choices=PEERS)
    p.add_argument("--model", choices=MODELS)
    p.add_argument("--data")
    args = p.parse_args()
    if args.write:
        write(*args.write, args.rows, args.features)
        return 0
    X, y = load(args.data)
    print(json.dumps({"params": PEERS[args.peer](args.model, X, y)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
