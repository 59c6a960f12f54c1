"""Section 10's rows and peers: the Poisson design (write), and one Poisson fit of it by
scikit-learn, glum or statsmodels on data already loaded, in a process of its own.

    python bench/glm_peers.py --write rows.npz --rows 2000000 --features 32
    python bench/glm_peers.py --peer sklearn --data rows.npz --out result.json

Writes [w..., b], the fit's wall time (from the loaded arrays to the coefficients) and the
process's peak RSS. Each is asked for the unpenalised maximum-likelihood fit, with its Newton
solver, to a tolerance tight enough to agree with the others to 1e-6."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
import warnings
from pathlib import Path

import numpy as np


def sklearn_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import PoissonRegressor

    model = PoissonRegressor(alpha=0.0, solver="newton-cholesky", tol=1e-10, max_iter=100)
    model.fit(X, y)
    return np.append(model.coef_, model.intercept_)


def glum_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    from glum import GeneralizedLinearRegressor

    model = GeneralizedLinearRegressor(family="poisson", alpha=0.0, gradient_tol=1e-10)
    model.fit(X, y)
    return np.append(model.coef_, model.intercept_)


def statsmodels_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sm.GLM(y, sm.add_constant(X, prepend=False), family=sm.families.Poisson())
        return np.asarray(model.fit(tol=1e-10).params)


PEERS = {"sklearn": sklearn_fit, "glum": glum_fit, "statsmodels": statsmodels_fit}
_PROCESSES = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
# The threads a peer was given, as its environment says: unset, its library picks
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def write(path: str, rows: int, features: int, seed: int = 0) -> None:
    """X ~ N(0, 1) (float64), y ~ Poisson(exp(X·w + 0.5)), w ~ N(0, 0.1²): an .npz of X and y,
    uncompressed, which the tool reads by ranges of rows and the peers load whole."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    w = rng.normal(0.0, 0.1, features)
    y = rng.poisson(np.exp(X @ w + 0.5)).astype(np.float64)
    np.savez(path, X=X, y=y)


def gap(params, reference: np.ndarray) -> float:
    """The largest difference from the reference's coefficients, relative where they are
    above 1 in size."""
    return float(np.max(np.abs(np.asarray(params) - reference) / np.maximum(abs(reference), 1)))


def summarised(runs: dict[str, list[dict]], reference: np.ndarray, agree: float) -> dict:
    """Each fit's runs (fit_s, params, peak_rss_mib) as its median seconds, its largest peak
    RSS, and its largest gap to the reference, which agrees if at most `agree`."""
    fits = {}
    for name, done in runs.items():
        largest = max(gap(r["params"], reference) for r in done)
        fits[name] = {
            "fit_s": statistics.median(r["fit_s"] for r in done),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in done),
            "max_gap": largest,
            "agree": bool(largest <= agree),
            "runs_s": [r["fit_s"] for r in done],
        }
    return fits


def load(path: str) -> tuple[np.ndarray, np.ndarray]:
    """X and y of the .npz that write() wrote."""
    with np.load(path) as arrays:
        return arrays["X"], arrays["y"]


def main(doc: str = __doc__, peers=PEERS, write=write, load=load) -> int:
    """--write the rows, or time one peer's fit of them (bench/multinomial_peers.py hands in
    its own doc, peers, writer and loader)."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--write", help="write the design to this file and exit")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--peer", choices=peers)
    p.add_argument("--data", help="the file --write wrote")
    p.add_argument("--out")
    args = p.parse_args()
    if args.write:
        write(args.write, args.rows, args.features)
        return 0
    X, y = load(args.data)
    start = time.perf_counter()
    theta = peers[args.peer](X, y)
    seconds = time.perf_counter() - start
    if isinstance(theta, tuple):  # a peer in a server of its own (H2O): its fit's own time
        theta, seconds = theta
    # Linux: KiB; a server's (H2O's JVM) is among the children once it has ended
    peak_mib = max(resource.getrusage(r).ru_maxrss for r in _PROCESSES) / 1024
    result = {
        "peer": args.peer,
        "params": theta.tolist(),
        "fit_s": seconds,
        "threads": {k: os.environ.get(k) for k in THREAD_VARIABLES},
        "peak_rss_mib": peak_mib,
    }
    Path(args.out).write_text(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
