"""Section 18: a wide dense lasso path. n = p = 10,000 normal features (100 with an effect), a
gaussian target, unstandardized, on glmnet's strengths for these rows (100 from λ_max down to
1e-4 of it): `hvd_linreg.fit` on the array at 1 and 2 ranks (under mpirun, each rank its own
rows) next to R's glmnet on the same matrix, at its default threshold, on the strengths the
tool reaches (a working set holds at most 4,096 features), each in a process of its own
(section() below, which bench/run.py runs).

    python bench/dense_peers.py --write rows.npy
    mpirun -np 2 python bench/dense_peers.py --tool --data rows.npy --out result.json
    python bench/dense_peers.py --peer glmnet --data rows.npy --strengths 40 --out result.json

Each writes the fit's wall time from the loaded rows to the coefficients (the tool's between
two barriers), the strengths fitted, its peak RSS, and the coefficients of every strength."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from sparse_peers import main, peers_section, run_glmnet, strengths

ROWS = COLUMNS = 10_000
EFFECTS = 100
STRENGTHS, MIN_RATIO = 100, 1e-4  # glmnet's nlambda and lambda.min.ratio (n >= p)
ROWS_FILE = "rows.npy"
SETTINGS = {}  # hvd_linreg.fit's settings beside the lasso's: its default, least squares
GLMNET = """
suppressMessages(library(glmnet))
args <- commandArgs(trailingOnly = TRUE); d <- args[1]; k <- as.integer(args[2])
n <- as.integer(args[3]); p <- as.integer(args[4])
A <- matrix(readBin(file.path(d, "rows.bin"), "double", n * (p + 1)), n, p + 1, byrow = TRUE)
lam <- readBin(file.path(d, "lambda.bin"), "double", k)
X <- A[, 1:p]; y <- A[, p + 1]; rm(A)
t <- system.time(fit <- glmnet(X, y, alpha = 1, standardize = FALSE, lambda = lam))[["elapsed"]]
writeBin(as.vector(as.matrix(coef(fit))), file.path(d, "coef.bin"))
cat(t, length(fit$lambda), "\\n")
"""


def write(path: str, seed: int = 0) -> None:
    """The rows [X y]: X ~ N(0, 1), y = X w + N(0, 1), w ~ N(0, 0.5²) on EFFECTS columns."""
    rng = np.random.default_rng(seed)
    rows = np.empty((ROWS, COLUMNS + 1))
    rows[:, :COLUMNS] = rng.standard_normal((ROWS, COLUMNS))
    w = np.zeros(COLUMNS)
    w[rng.choice(COLUMNS, EFFECTS, replace=False)] = rng.normal(scale=0.5, size=EFFECTS)
    rows[:, COLUMNS] = rows[:, :COLUMNS] @ w + rng.standard_normal(ROWS)
    np.save(path, rows)


def load(path: str, part: tuple[int, int] = (0, 1)):
    """Rows part[0] of part[1] equal runs: X and y."""
    rows = np.load(path, mmap_mode="r")
    start, stop = (ROWS * part[0]) // part[1], (ROWS * (part[0] + 1)) // part[1]
    mine = np.array(rows[start:stop])
    return mine[:, :COLUMNS], mine[:, COLUMNS]


def glmnet(data: str, count: int, out: str) -> None:
    """R's glmnet on the first count strengths, the rows as a dense matrix."""
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp:
        d = Path(tmp)
        np.load(data, mmap_mode="r").tofile(d / "rows.bin")
        strengths(data, sys.modules[__name__])[:count].tofile(d / "lambda.bin")
        run_glmnet(d, GLMNET, [str(count), str(ROWS), str(COLUMNS)], COLUMNS, out)


def section(rounds: int, progress) -> dict:
    """The tool at 1 and 2 ranks, then glmnet on the strengths it reached."""
    return peers_section(sys.modules[__name__], "dense lasso", {}, progress)


if __name__ == "__main__":
    raise SystemExit(main(sys.modules[__name__]))
