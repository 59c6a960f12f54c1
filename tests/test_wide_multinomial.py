"""The multinomial model on a wide design (categorical columns of hundreds of levels, sparse
rows): Newton's method on its information by blocks, never the dense dummies. Equal to
statsmodels' MNLogit (coefficients, standard errors, log-likelihood) and to scikit-learn's
multinomial LogisticRegression with a ridge, at 1 and 2 ranks; what would need the dense rows
is refused with one line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from conftest import launch, refused, run_command, run_metrics

SIZES = [1, pytest.param(2, marks=pytest.mark.multiprocess)]
CLASSES = np.array(["high", "low", "mid"])


def rows(levels: int = 600, each: int = 20, seed: int = 0) -> pd.DataFrame:
    """A shop code of `levels` levels (numbers, `each` rows each, in shuffled order), a
    brand of 300 words, a number and one of three classes."""
    rng = np.random.default_rng(seed)
    n = levels * each
    shop = rng.permutation(np.repeat(np.arange(levels), each))
    brand, x = rng.integers(0, 300, n), rng.normal(size=n)
    eta = np.c_[np.zeros(n), 0.3 * rng.normal(size=(levels, 2))[shop] + np.c_[x, -0.5 * x]]
    p = np.exp(eta)
    p /= p.sum(axis=1, keepdims=True)
    y = (rng.uniform(size=n)[:, None] > p.cumsum(axis=1)).sum(axis=1)
    brand = np.char.add("b", brand.astype(str))
    return pd.DataFrame({"shop": shop, "brand": brand, "x": x, "grade": CLASSES[y]})


def dummies(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The tool's treatment coding of columns, in its order (levels by value, the first the
    reference, the numbers after the dummies)."""
    coded = table[columns].astype({c: "category" for c in columns if c != "x"})
    X = pd.get_dummies(coded, drop_first=True, dtype=float)
    return X[[c for c in X.columns if c != "x"] + (["x"] if "x" in columns else [])]


def as_matrix(metrics: dict, field: str) -> np.ndarray:
    rows = metrics["statistics"]["coefficients"]
    return np.array([c[field] for c in rows]).reshape(2, -1).T


@pytest.fixture(scope="module")
def shops(tmp_path_factory):
    """The rows as a CSV, and MNLogit's fit of the shop code and x (601 columns)."""
    table = rows()
    path = tmp_path_factory.mktemp("shops") / "shops.csv"
    table.to_csv(path, index=False)
    X = sm.add_constant(dummies(table, ["shop", "x"]), prepend=False)
    y = np.searchsorted(CLASSES, table.grade)
    fit = sm.MNLogit(y, X).fit(method="newton", tol=1e-14, maxiter=100, disp=0)
    return table, path, fit


@pytest.mark.parametrize("size", SIZES)
def test_a_wide_multinomial_is_mnlogits(shops, tmp_path, size):
    """A numeric shop code named in --categorical (its levels agreed by the ranks): MNLogit's
    coefficients to 1e-8, standard errors to 1e-6, log-likelihood to 1e-10."""
    table, path, reference = shops
    args = ["--data", str(path), "--target", "grade", "--model", "multinomial"]
    args += ["--solver", "exact", "--features", "shop,x", "--categorical", "shop"]
    m = run_metrics(tmp_path, size, args)
    assert len(m["w"][0]) == 600  # 599 dummies and x: past the 512 columns of a dense design
    np.testing.assert_allclose(as_matrix(m, "estimate"), reference.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), reference.bse, rtol=1e-6)
    assert m["statistics"]["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)
    assert m["statistics"]["null_log_likelihood"] == pytest.approx(reference.llnull, rel=1e-10)


def test_a_wide_multinomials_model_predicts_mnlogits_probabilities(shops, tmp_path):
    """--export, then predict on the rows: MNLogit's probabilities to 1e-8."""
    table, path, reference = shops
    model = tmp_path / "model"
    args = ["--data", str(path), "--target", "grade", "--model", "multinomial", "--solver"]
    args += ["exact", "--features", "shop,x", "--categorical", "shop", "--export", str(model)]
    run_metrics(tmp_path, 1, args)
    out = tmp_path / "p.csv"
    command = ["predict", "--model", str(model), "--data", str(path), "--out", str(out)]
    run_command(tmp_path, 1, command)
    got = pd.read_csv(out)
    np.testing.assert_allclose(got[list(CLASSES)].to_numpy(), reference.predict(), rtol=1e-8)


def symmetric(metrics: dict) -> tuple[np.ndarray, np.ndarray]:
    """The JSON's B as scikit-learn's symmetric coefficients (K x F) and intercepts."""
    W = np.vstack([np.zeros(len(metrics["w"][0])), np.array(metrics["w"])])
    b = np.append(0.0, metrics["b"])
    return W - W.mean(axis=0), b - b.mean()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("columns", [["shop", "brand", "x"], ["shop", "x"]])
def test_a_wide_multinomials_ridge_is_scikit_learns(shops, tmp_path, size, columns):
    """--l2 1/(2·C·n) on two categorical columns (levels against levels: a sparse cross block)
    and on one beside a number (a dense one): scikit-learn's multinomial LogisticRegression(C)
    on the dense dummies, to 1e-8."""
    from sklearn.linear_model import LogisticRegression

    table, path, _ = shops
    C = 0.5
    args = ["--data", str(path), "--target", "grade", "--model", "multinomial", "--solver"]
    args += ["exact", "--features", ",".join(columns), "--categorical", "shop"]
    m = run_metrics(tmp_path, size, [*args, "--l2", repr(1 / (2 * C * len(table)))])
    reference = LogisticRegression(C=C, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    reference.fit(dummies(table, columns).to_numpy(), table.grade)
    coef, intercept = symmetric(m)
    np.testing.assert_allclose(coef, reference.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(intercept, reference.intercept_, rtol=1e-8, atol=1e-10)


def test_sparse_rows_of_three_classes_are_scikit_learns():
    """A SciPy CSR matrix of 800 columns in the estimator: scikit-learn's coefficients and
    probabilities to 1e-9."""
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression

    from hvd_linreg import estimators

    rng = np.random.default_rng(1)
    X = sparse.random(4000, 800, density=0.01, random_state=2, format="csr")
    eta = np.c_[np.zeros(4000), X @ rng.normal(scale=0.5, size=(800, 2))]
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    y = (rng.uniform(size=4000)[:, None] > p.cumsum(axis=1)).sum(axis=1)
    ours = estimators.LogisticRegression(C=1.0).fit(X, y)
    theirs = LogisticRegression(C=1.0, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    theirs.fit(X.toarray(), y)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X.toarray()), atol=1e-12)


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--solver", "sgd"], "is fitted by --solver exact"),
        (["--solver", "exact", "--cov_type", "HC0"], "--cov_type HC0 takes a design of at most"),
        (["--solver", "exact", "--cv", "3"], "the multinomial elastic net takes a design of"),
    ],
)
def test_what_would_need_a_wide_multinomials_dense_rows_is_refused(shops, capsys, extra, says):
    _, path, _ = shops
    args = ["--data", str(path), "--target", "grade", "--model", "multinomial"]
    assert says in refused(capsys, [*args, "--categorical", "shop", *extra])


@pytest.mark.parametrize("size", SIZES)
def test_cross_blocks_past_a_ranks_memory_are_refused_before_the_fit(
    shops, tmp_path, monkeypatch, capsys, size
):
    """The shop code against the brand's 300 levels and x: 3 class pairs' cross blocks of
    599 x 301 numbers a pass, about 21 MB a rank with the factor's arrays. With a rank's
    memory set to 10 MB (the levels themselves need 0.4 MB), every rank says so before the
    fit, in one line, exit 2."""
    _, path, _ = shops
    args = ["--data", str(path), "--target", "grade", "--model", "multinomial",
            "--categorical", "shop,brand", "--solver", "exact"]  # fmt: skip
    says = (
        "sums 3 cross blocks of 599 x 301 numbers per pass: with the factor's arrays about "
        "20.6 MiB a rank, more than the 9.5 MiB a rank may use here"
    )
    memory = {"HVD_LINREG_RANK_MEMORY": "10000000"}
    if size == 1:
        monkeypatch.setenv(*memory.popitem())
        assert says in refused(capsys, args)
        return
    run = launch("mpirun", size, args, tmp_path, metrics=False, env=memory)
    assert run.returncode == 2, run.output
    assert run.stderr.count("hvd-linreg: error: ") == 1 and says in run.stderr, run.output
    assert "Traceback" not in run.output and "progress:" not in run.output
