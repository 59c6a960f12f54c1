"""Dense rows of more columns than the dense exact solver takes (4,096 for least squares, 1,024
for the other families): --solver exact fits them on the wide route, as a sparse design's
(working sets for a path, blocks without a penalty). Equal to glmnet's path on the same dense
matrix and to statsmodels' GLM, at 1 and 2 ranks."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import statsmodels.api as sm

from conftest import run_metrics

GLMNET_DENSE = r"""
library(glmnet)
args <- commandArgs(TRUE)
n <- as.integer(args[2]); p <- as.integer(args[3])
A <- matrix(readBin(args[1], "double", n * (p + 1)), n, p + 1, byrow=TRUE)
lam <- as.numeric(strsplit(args[4], ",")[[1]])
fit <- glmnet(A[, 1:p], A[, p + 1], family=args[5], alpha=as.numeric(args[6]), lambda=lam,
              standardize=as.logical(args[7]), thresh=1e-20, maxit=1e8)
cat(sprintf("%.17g", as.matrix(coef(fit))), "\n")
"""


def dense_rows(path, n: int, p: int, family: str, seed: int = 5) -> np.ndarray:
    """n rows of p normal features and a target (the last column) as a .npy file: 30 features
    matter; a gaussian target at unit variance (glmnet scales its own)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    beta = np.zeros(p)
    beta[:30] = rng.normal(scale=0.5, size=30)
    eta = X @ beta + 0.3
    if family == "gaussian":
        y = eta + rng.normal(size=n)
        y = y / y.std()
    else:
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(float)
    rows = np.column_stack([X, y])
    np.save(path, rows)
    return rows


@pytest.mark.glmnet
@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "family, columns, l1_ratio, standardize",
    [("gaussian", 4200, 1.0, True), ("binomial", 1100, 0.5, False)],
    ids=["gaussian-lasso-4200", "binomial-enet-raw-1100"],
)
def test_a_dense_path_past_the_dense_solver_equals_glmnet(
    tmp_path, family, columns, l1_ratio, standardize
):
    """The path of 300 dense rows on working sets, at 1 and 2 ranks, against glmnet on the
    same matrix at the tool's strengths, thresh 1e-20."""
    if shutil.which("Rscript") is None:
        pytest.skip("R's glmnet is not installed")
    rows = dense_rows(tmp_path / "rows.npy", 300, columns, family)
    model = "linear" if family == "gaussian" else "logistic"
    args = ["--data", str(tmp_path / "rows.npy"), "--model", model, "--solver", "exact"]
    args += ["--l1_ratio", repr(l1_ratio), "--n_alphas", "15", "--alpha_min_ratio", "0.1"]
    if not standardize:
        args.append("--no-standardize")
    runs = [run_metrics(tmp_path, size, args) for size in (1, 2)]
    alphas = runs[0]["path"]["alpha"]
    rows.tofile(tmp_path / "rows.bin")
    script = tmp_path / "glmnet.R"
    script.write_text(GLMNET_DENSE)
    out = subprocess.run(
        ["Rscript", str(script), str(tmp_path / "rows.bin"), "300", str(columns),
         ",".join(repr(a) for a in alphas), family, repr(l1_ratio), str(standardize).upper()],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    B = np.array(out.split(), float).reshape(len(alphas), columns + 1)
    for m in runs:
        np.testing.assert_allclose(m["path"]["b"], B[:, 0], rtol=0, atol=1e-8)
        np.testing.assert_allclose(m["path"]["w"], B[:, 1:], rtol=0, atol=1e-8)
    assert np.count_nonzero(B[-1, 1:]) > 10  # the path's end is no null model


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_an_unpenalized_dense_fit_past_the_dense_solver_equals_statsmodels(tmp_path, size):
    """Logistic regression on 1,100 dense columns (the dense solver takes 1,024): statsmodels'
    GLM's coefficients to 1e-8 and standard errors to 1e-6."""
    rows = dense_rows(tmp_path / "rows.npy", 6000, 1100, "binomial")
    args = ["--data", str(tmp_path / "rows.npy"), "--model", "logistic", "--solver", "exact"]
    m = run_metrics(tmp_path, size, args)
    X, y = sm.add_constant(rows[:, :-1], prepend=False), rows[:, -1]
    reference = sm.GLM(y, X, family=sm.families.Binomial()).fit(tol=1e-13)
    got = np.append(m["w"], m["b"])
    np.testing.assert_allclose(got, reference.params, rtol=0, atol=1e-8)
    errors = [c["std_error"] for c in m["statistics"]["coefficients"]]
    np.testing.assert_allclose(errors, reference.bse, rtol=1e-6)
