"""Section 16: a sparse logistic lasso path. 200,000 rows x 50,000 indicator columns, 0.2% of
them 1 (20 M non-zeros; 100 features with an effect), unstandardized, on glmnet's strengths for
these rows (100 from λ_max down to 1e-4 of it): `hvd_linreg.fit` on the CSR matrix at 1 and 2
ranks (under mpirun, each rank its own rows) next to R's glmnet on the same rows as a
dgCMatrix, at its default threshold, on the strengths the tool reaches (a working set holds at
most 4,096 features), each in a process of its own (section() below, which bench/run.py runs).

    python bench/sparse_peers.py --write rows.npz
    mpirun -np 2 python bench/sparse_peers.py --tool --data rows.npz --out result.json
    python bench/sparse_peers.py --peer glmnet --data rows.npz --strengths 27 --out result.json

Each writes the fit's wall time from the loaded rows to the coefficients (the tool's between
two barriers), the strengths fitted, its peak RSS, and the coefficients of every strength."""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS, COLUMNS, DENSITY, EFFECTS = 200_000, 50_000, 0.002, 100
STRENGTHS, MIN_RATIO = 100, 1e-4  # glmnet's nlambda and lambda.min.ratio (more rows than columns)
RANKS = (1, 2)
ROWS_FILE = "rows.npz"
SETTINGS = {"model": "logistic"}  # hvd_linreg.fit's settings beside the lasso's
GLMNET = """
suppressMessages({library(glmnet); library(Matrix)})
args <- commandArgs(trailingOnly = TRUE); d <- args[1]; k <- as.integer(args[2])
nnz <- file.size(file.path(d, "x.bin")) / 8
i <- readBin(file.path(d, "i.bin"), "integer", nnz)
j <- readBin(file.path(d, "j.bin"), "integer", nnz)
x <- readBin(file.path(d, "x.bin"), "double", nnz)
y <- readBin(file.path(d, "y.bin"), "double", as.integer(args[3]))
lam <- readBin(file.path(d, "lambda.bin"), "double", k)
X <- sparseMatrix(i = i, j = j, x = x, dims = c(length(y), as.integer(args[4])))
t <- system.time(fit <- glmnet(X, y, family = "binomial", alpha = 1, standardize = FALSE,
                               lambda = lam))[["elapsed"]]
writeBin(as.vector(as.matrix(coef(fit))), file.path(d, "coef.bin"))
cat(t, length(fit$lambda), "\\n")
"""


def write(path: str, seed: int = 0) -> None:
    """The rows: X's CSR arrays and y (0/1), y ~ Bernoulli(σ(X w - 0.5)), w ~ N(0, 1) on
    EFFECTS columns."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    nnz = int(ROWS * COLUMNS * DENSITY)
    rows, cols = rng.integers(0, ROWS, nnz), rng.integers(0, COLUMNS, nnz)
    X = sparse.csr_matrix((np.ones(nnz), (rows, cols)), shape=(ROWS, COLUMNS))
    X.sum_duplicates()
    X.data[:] = 1.0
    w = np.zeros(COLUMNS)
    w[rng.choice(COLUMNS, EFFECTS, replace=False)] = rng.normal(size=EFFECTS)
    y = (rng.random(ROWS) < 1 / (1 + np.exp(0.5 - X @ w))).astype(np.float64)
    np.savez(path, data=X.data, indices=X.indices, indptr=X.indptr, y=y)


def load(path: str, part: tuple[int, int] = (0, 1)):
    """Rows part[0] of part[1] equal runs: a CSR matrix and y."""
    from scipy import sparse

    f = np.load(path)
    indptr, y = f["indptr"], f["y"]
    start, stop = (len(y) * part[0]) // part[1], (len(y) * (part[0] + 1)) // part[1]
    a, b = indptr[start], indptr[stop]
    X = sparse.csr_matrix(
        (f["data"][a:b], f["indices"][a:b], indptr[start : stop + 1] - a),
        shape=(stop - start, COLUMNS),
    )
    return X, y[start:stop]


def strengths(path: str, design=None) -> np.ndarray:
    """glmnet's sequence for design's rows (this module's by default): λ_max = max |Xᵀ(y - ȳ)|
    / n, down to MIN_RATIO of it."""
    design = design or sys.modules[__name__]
    X, y = design.load(path)
    top = np.abs(X.T @ (y - y.mean())).max() / len(y)
    return top * design.MIN_RATIO ** (np.arange(design.STRENGTHS) / (design.STRENGTHS - 1))


def tool(data: str, out: str, design=None) -> None:
    """Under mpirun: each rank fits its own rows of design (this module by default), the
    lasso unstandardized with design's SETTINGS; rank 0 writes the result."""
    from mpi4py import MPI

    import hvd_linreg

    design = design or sys.modules[__name__]
    comm = MPI.COMM_WORLD
    X, y = design.load(data, (comm.rank, comm.size))
    alphas = list(strengths(data, design))
    comm.Barrier()
    start = time.perf_counter()
    fit = hvd_linreg.fit(X, y, solver="exact", l1_ratio=1.0, standardize=False, alpha=alphas,
                         **design.SETTINGS)  # fmt: skip
    comm.Barrier()
    seconds = time.perf_counter() - start
    peak = comm.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    if comm.rank == 0:
        done = {"fit_s": seconds, "strengths": len(fit.path.alphas), "peak_rss_mib": max(peak)}
        write_path(out, done, fit.path.coefficients)


def glmnet(data: str, count: int, out: str) -> None:
    """R's glmnet on the first count strengths, the rows as a dgCMatrix."""
    X, y = load(data)
    coo = X.tocoo()
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        d = Path(tmp)
        (coo.row + 1).astype(np.int32).tofile(d / "i.bin")
        (coo.col + 1).astype(np.int32).tofile(d / "j.bin")
        coo.data.astype(np.float64).tofile(d / "x.bin")
        y.tofile(d / "y.bin")
        strengths(data)[:count].tofile(d / "lambda.bin")
        run_glmnet(d, GLMNET, [str(count), str(len(y)), str(COLUMNS)], COLUMNS, out)


def run_glmnet(d: Path, script: str, args: list[str], columns: int, out: str) -> None:
    """R's script in the directory d (its first argument, then args), which prints its
    seconds and the strengths it fitted and writes d/coef.bin ([b, w...] by strength): the
    result's JSON at out."""
    (d / "fit.R").write_text(script)
    argv = ["Rscript", str(d / "fit.R"), str(d), *args]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    seconds, fitted = done.stdout.split()
    coef = np.fromfile(d / "coef.bin").reshape(-1, columns + 1)
    done = {"fit_s": float(seconds), "strengths": int(fitted), "peak_rss_mib": None}
    write_path(out, done, np.column_stack([coef[:, 1:], coef[:, 0]]))


def write_path(out: str, done: dict, coefficients: np.ndarray) -> None:
    """The result's JSON, with the coefficients of every strength ([w..., b] each)."""
    Path(out).write_text(json.dumps({**done, "coefficients": coefficients.tolist()}) + "\n")


def compared(fits: dict, reached: int) -> None:
    """Each fit's largest gap to the tool's 1-rank coefficients on the strengths it reached,
    relative to their largest (max_gap), in place of its coefficients."""
    reference = np.asarray(fits["tool_1"].pop("coefficients"))
    for fit in fits.values():
        theta = np.asarray(fit.pop("coefficients", reference))[:reached]
        fit["max_gap"] = float(np.abs(theta - reference).max() / np.abs(reference).max())


def section(rounds: int, progress) -> dict:
    """The tool at 1 and 2 ranks, then glmnet on the strengths it reached."""
    return peers_section(sys.modules[__name__], "sparse lasso", {"density": DENSITY}, progress)


def peers_section(design, what: str, figures: dict, progress) -> dict:
    """A path benchmark of design (this module, or one with the same functions and constants:
    dense_peers.py): the tool at 1 and 2 ranks, then glmnet on the strengths it reached;
    seconds, and each one's largest gap to the tool's 1-rank coefficients."""
    import launch  # bench/ is on the path of bench/run.py, which runs these sections

    name, fits = Path(design.__file__).name, {}
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        data = str(Path(tmp) / design.ROWS_FILE)
        design.write(data)
        env = {"OMPI_MCA_mpi_yield_when_idle": "1"}
        for n in RANKS:
            fits[f"tool_{n}"] = launch.script(n, name, ["--tool", "--data", data], env=env)
            progress(f"{what}: the tool at {n} rank(s), {fits[f'tool_{n}']['fit_s']:.1f} s")
        reached = fits["tool_1"]["strengths"]
        if shutil.which("Rscript"):
            fits["glmnet"] = launch.peer_fit(name, "glmnet", data,
                                             extra=("--strengths", str(reached)))  # fmt: skip
            progress(f"{what}: glmnet, {fits['glmnet']['fit_s']:.1f} s")
        compared(fits, reached)
    return {
        "rows": design.ROWS, "columns": design.COLUMNS, **figures, "strengths": reached,
        "fits": fits, "missing": [] if "glmnet" in fits else ["glmnet (Rscript)"],
    }  # fmt: skip


def main(design=None) -> int:
    """The command line of design (this module by default): --write, --tool or --peer."""
    design = design or sys.modules[__name__]
    p = argparse.ArgumentParser(description=design.__doc__)
    p.add_argument("--write", help=f"write the rows to this {design.ROWS_FILE[4:]} and exit")
    p.add_argument("--tool", action="store_true", help="the tool's fit (under mpirun)")
    p.add_argument("--peer", choices=("glmnet",))
    p.add_argument("--data")
    p.add_argument("--strengths", type=int, default=design.STRENGTHS)
    p.add_argument("--out")
    args = p.parse_args()
    if args.write:
        design.write(args.write)
    elif args.tool:
        tool(args.data, args.out, design)
    else:
        design.glmnet(args.data, args.strengths, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
