"""Section 14: the exact multinomial fit (`hvd-linreg --model multinomial --solver exact`) on
1,000,000 x 32 float64 rows of 5 classes at 1 and 2 ranks, next to scikit-learn's multinomial
LogisticRegression (lbfgs and newton-cholesky) and statsmodels' MNLogit (newton) on the same
rows, each in a process of its own, taking turns (section() below, which bench/run.py runs);
and the rows (--write) and one peer's fit of them on data already loaded (--peer).

    python bench/multinomial_peers.py --write rows.parquet --rows 1000000 --features 32
    python bench/multinomial_peers.py --peer sklearn-lbfgs --data rows.parquet --out result.json

A peer writes the coefficients in the tool's form, B ((F + 1) x (K - 1): a column per class but the
first, the reference, the intercepts last), the fit's wall time (from the loaded arrays to the
coefficients), its BLAS and OpenMP threads and the process's peak RSS. Each is asked for the
unpenalised maximum-likelihood fit to a tolerance tight enough to agree with the others to
1e-6."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import glm_peers  # bench/ is on the path of the scripts in it
import numpy as np

CLASSES = 5
TOLERANCE = 1e-10
MAX_ITER = 10_000  # never what stops lbfgs: its tolerances do
ROWS, FEATURES = 1_000_000, 32
RANKS = (1, 2)
AGREE = 1e-6  # every peer's coefficients the tool's to this
# The tool's ranks get a BLAS and OpenMP thread each (its own default: ranks are its
# parallelism); a peer gets the machine's cores, as its user would leave it.
TOOL_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
PEER_THREADS = {name: str(os.cpu_count()) for name in TOOL_THREADS}
# statsmodels' MNLogit on these rows took more than 240 s (the launches' usual limit) on this
# machine under a load average of 3 to 5: its BLAS threads wait for the cores others hold
PEER_TIMEOUT_S = 900


def reference_form(coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """scikit-learn's symmetric coef_ (K x F) and intercept_ (K) as B, (F + 1) x (K - 1):
    each class's coefficients less the first class's."""
    symmetric = np.column_stack([coef, intercept])  # K x (F + 1)
    return (symmetric[1:] - symmetric[0]).T


def sklearn_fit(X: np.ndarray, y: np.ndarray, solver: str) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(penalty=None, solver=solver, tol=TOLERANCE, max_iter=MAX_ITER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # penalty=None's future spelling, C=inf
        model.fit(X, y)
    return reference_form(model.coef_, model.intercept_)


def statsmodels_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    import statsmodels.api as sm

    exog = np.column_stack([X, np.ones(len(y))])  # the constant last, as the tool's B
    fitted = sm.MNLogit(y, exog).fit(method="newton", tol=TOLERANCE, maxiter=100, disp=0)
    return np.asarray(fitted.params)


PEERS = {
    "sklearn-lbfgs": lambda X, y: sklearn_fit(X, y, "lbfgs"),
    "sklearn-newton-cholesky": lambda X, y: sklearn_fit(X, y, "newton-cholesky"),
    "statsmodels": statsmodels_fit,
}


def write(path: str, rows: int, features: int, seed: int = 0) -> None:
    """X ~ N(0, 1) (float64) and a class 0..K-1 per row drawn from the multinomial logit of
    B_true: coefficients ~ N(0, 0.2²), intercepts ~ N(0, 0.5²), class 0 the reference; as
    Parquet (columns x0.., then y), which the tool and the peers read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    B = np.vstack([rng.normal(0.0, 0.2, (features, CLASSES - 1)),
                   rng.normal(0.0, 0.5, (1, CLASSES - 1))])  # fmt: skip
    eta = np.column_stack([np.zeros(rows), X @ B[:-1] + B[-1]])
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    cumulative = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    y = (rng.random((rows, 1)) > cumulative[:, :-1]).sum(axis=1)
    columns = {f"x{j}": X[:, j] for j in range(features)}
    pq.write_table(pa.table({**columns, "y": y}), path, row_group_size=1 << 17)


def load(path: str) -> tuple[np.ndarray, np.ndarray]:
    """X (rows x features, float64, C order) and y (int64) of the Parquet file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    names = [n for n in table.column_names if n != "y"]
    X = np.column_stack([table.column(n).to_numpy() for n in names])
    return np.ascontiguousarray(X), table.column("y").to_numpy()


def tool_fit(ranks: int, data: str) -> dict:
    """The tool's fit at ranks (mpirun), watched: its fit_s, B and each rank's peak RSS."""
    import launch  # bench/ is on the path of bench/run.py, which runs this section

    args = ["--data", data, "--target", "y", "--model", "multinomial", "--solver", "exact"]
    env = {"OMPI_MCA_mpi_yield_when_idle": "1", **TOOL_THREADS}  # as section 10's tool
    watched = launch.watched_tool(ranks, [*args, "--quiet"], env=env)
    m = watched["metrics"]
    return {
        "fit_s": m["fit_s"],
        "params": np.vstack([np.array(m["w"]).T, m["b"]]).tolist(),
        "iterations": m["statistics"]["iterations"],
        "peak_rss_mib": max(watched["peak_rss_mib"]),
    }


def section(rounds: int, progress) -> dict:
    """The tool at 1 and 2 ranks and each peer, `rounds` times each, taking turns; statsmodels,
    the slowest by far, once. Times are medians; gaps are to the tool's first 1-rank fit. A
    peer that fails or runs out of time is reported, and the others still run."""
    import launch

    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / "rows.parquet")
        launch.run_python(["multinomial_peers.py", "--write", data, "--rows", str(ROWS),
                           "--features", str(FEATURES)])  # fmt: skip
        peers = [p for p in PEERS if launch.importable(p.split("-")[0])]
        runs: dict[str, list[dict]] = {**{f"tool_{n}": [] for n in RANKS}, **{p: [] for p in peers}}
        failed: dict[str, str] = {}

        def record(name: str, done: dict) -> None:
            runs[name].append(done)
            progress(f"multinomial fit, {name}: {done['fit_s']:.1f} s")

        for i in range(rounds):
            for n in RANKS:
                record(f"tool_{n}", tool_fit(n, data))
            for peer in peers:
                if peer in failed or (peer == "statsmodels" and i > 0):
                    continue
                try:
                    record(peer, launch.peer_fit("multinomial_peers.py", peer, data,
                                                 PEER_THREADS, PEER_TIMEOUT_S))  # fmt: skip
                except launch.LaunchError as e:
                    failed[peer] = str(e).splitlines()[0]
                    progress(f"multinomial fit, {peer}: {failed[peer]}")
    runs = {name: done for name, done in runs.items() if done}
    fits = glm_peers.summarised(runs, np.asarray(runs["tool_1"][0]["params"]), AGREE)
    return {
        "rows": ROWS,
        "features": FEATURES,
        "classes": CLASSES,
        "iterations": runs["tool_1"][0]["iterations"],
        "threads": {"tool": TOOL_THREADS, "peers": PEER_THREADS},
        "fits": fits,
        "failed": failed,
        "missing": [p for p in PEERS if p not in peers],
    }


if __name__ == "__main__":
    raise SystemExit(glm_peers.main(__doc__, PEERS, write, load))
