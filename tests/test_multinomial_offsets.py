"""--offset with --model multinomial: each row's offset added to the log-odds of every class
against the reference. With two classes it is the binomial GLM's offset; with K classes the
reference is statsmodels' Poisson GLM on the Poisson surrogate (a row per observation and
class, a fixed effect per observation), whose class coefficients and their standard errors are
the multinomial model's. The intercept-only model with the offset is fitted, not the closed
form; predict and evaluate add the offset column of their file."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from test_multinomial import as_matrix

from conftest import refused, run_command, run_metrics

SIZES = [
    1,
    pytest.param(2, marks=pytest.mark.multiprocess),
    pytest.param(3, marks=pytest.mark.multiprocess),
]
NAMES = np.array(["bus", "car", "cycle", "train", "walk"])


def journeys(K: int, n: int = 300, seed: int = 11) -> pd.DataFrame:
    """n rows of two features, an offset o, whole-number weights w and a mode of K."""
    rng = np.random.default_rng(seed + K)
    x1, x2, o = rng.normal(size=n), rng.uniform(-1, 1, n), rng.normal(scale=1.0, size=n)
    B = rng.normal(scale=0.8, size=(3, K - 1))
    eta = np.column_stack([x1, x2, np.ones(n)]) @ B + o[:, None]
    p = np.exp(np.column_stack([np.zeros(n), eta]))
    p /= p.sum(axis=1, keepdims=True)
    mode = NAMES[[rng.choice(K, p=row) for row in p]]
    w = rng.integers(1, 4, n).astype(float)
    return pd.DataFrame({"x1": x1, "x2": x2, "o": o, "w": w, "mode": mode})


def design(table: pd.DataFrame) -> np.ndarray:
    return np.column_stack([table.x1, table.x2, np.ones(len(table))])


@functools.lru_cache
def surrogate(K: int):
    """The Poisson surrogate of journeys(K): log μ_ik = α_i + x_i·β_k + o_i [k >= 1], a count 1
    for the observed class, freq_weights w_i. Its β (and their errors) are the multinomial
    MLE's; its log-likelihood + Σ w is the multinomial one. Also the intercept-only model's
    (α_i, class intercepts and the offset). Returns B, its errors, ℓ and ℓ₀, the table."""
    table = journeys(K)
    n, X = len(table), design(table)
    y = np.searchsorted(NAMES[:K], table["mode"].to_numpy())
    rows = np.repeat(np.arange(n), K)
    k = np.tile(np.arange(K), n)
    fixed = np.zeros((n * K, n))
    fixed[np.arange(n * K), rows] = 1.0
    slopes = np.zeros((n * K, 3 * (K - 1)))
    for j in range(1, K):
        slopes[k == j, 3 * (j - 1) : 3 * j] = X[rows[k == j]]
    count, offset = (y[rows] == k).astype(float), table.o.to_numpy()[rows] * (k >= 1)
    weights = table.w.to_numpy()[rows]

    def poisson(D):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sm.GLM(
                count, D, family=sm.families.Poisson(), offset=offset, freq_weights=weights
            )
            return model.fit(tol=1e-14, maxiter=300)

    full = poisson(np.hstack([fixed, slopes]))
    null = poisson(np.hstack([fixed, slopes[:, 2::3]]))  # the class intercepts alone
    B = full.params[n:].reshape(K - 1, 3).T
    errors = full.bse[n:].reshape(K - 1, 3).T
    total = table.w.sum()
    return B, errors, full.llf + total, null.llf + total, table


def command(path, *more) -> list[str]:
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    return [*args, "--target", "mode", "--features", "x1,x2", "--weights", "w", *more]


@pytest.mark.parametrize("size", SIZES[:2])
def test_two_classes_with_an_offset_are_the_binomial_glm(tmp_path, size):
    """K = 2 is GLM(Binomial, offset=): with prior weights (var_weights) the coefficients to
    1e-8 and standard errors to 1e-6; the log-likelihood and the intercept-only model's with
    the offset (freq_weights: Σ w log p) to 1e-10, at 1 and 2 ranks."""
    table = journeys(2)
    table["w"] = np.random.default_rng(4).uniform(0.2, 3.0, len(table))
    table.to_csv(tmp_path / "two.csv", index=False)
    m = run_metrics(tmp_path, size, command(tmp_path / "two.csv", "--offset", "o"))
    y = (table["mode"] == "car").to_numpy(float)
    glm = functools.partial(sm.GLM, y, design(table), sm.families.Binomial(), offset=table.o)
    prior = glm(var_weights=table.w).fit(tol=1e-14, maxiter=100)
    repeated = glm(freq_weights=table.w).fit(tol=1e-14, maxiter=100)
    np.testing.assert_allclose(as_matrix(m, "estimate")[:, 0], prior.params, rtol=1e-8)
    np.testing.assert_allclose(as_matrix(m, "std_error")[:, 0], prior.bse, rtol=1e-6)
    s = m["statistics"]
    assert s["log_likelihood"] == pytest.approx(repeated.llf, rel=1e-10)
    assert s["null_log_likelihood"] == pytest.approx(repeated.llnull, rel=1e-10)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("K", [3, 4, 5])
def test_k_classes_with_an_offset_are_the_poisson_surrogate(tmp_path, size, K):
    """Coefficients to 1e-8 and standard errors to 1e-6 of the surrogate's; the
    log-likelihood and the intercept-only model's with the offset to 1e-10."""
    B, errors, llf, llnull, table = surrogate(K)
    table.to_csv(tmp_path / "modes.csv", index=False)
    m = run_metrics(tmp_path, size, command(tmp_path / "modes.csv", "--offset", "o"))
    assert m["classes"] == NAMES[:K].tolist()
    np.testing.assert_allclose(as_matrix(m, "estimate"), B, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), errors, rtol=1e-6)
    s = m["statistics"]
    assert s["log_likelihood"] == pytest.approx(llf, rel=1e-10)
    assert s["null_log_likelihood"] == pytest.approx(llnull, rel=1e-10)


def probabilities(B: np.ndarray, table: pd.DataFrame) -> np.ndarray:
    eta = design(table) @ B + table.o.to_numpy()[:, None]
    p = np.exp(np.column_stack([np.zeros(len(table)), eta]))
    return p / p.sum(axis=1, keepdims=True)


def test_fit_takes_the_offset_and_predict_proba_adds_it():
    import hvd_linreg

    B, errors, _, _, table = surrogate(3)
    X = table[["x1", "x2"]]
    result = hvd_linreg.fit(
        X, table["mode"], weights=table.w, offset=table.o, model="multinomial", solver="exact"
    )
    np.testing.assert_allclose(result.params, B, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(result.bse, errors, rtol=1e-6)
    np.testing.assert_allclose(result.predict_proba(X, table.o), probabilities(B, table), rtol=1e-8)


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_predict_and_evaluate_add_the_offset_column(tmp_path, capsys, size):
    """The exported model keeps the offset's column: predict's probabilities and evaluate's
    log-loss are those with each row's offset (1e-8); a file without the column is refused."""
    import json

    from sklearn.metrics import log_loss

    B, _, _, _, table = surrogate(4)
    table.to_csv(tmp_path / "modes.csv", index=False)
    model = tmp_path / "model"
    run_metrics(
        tmp_path, 1, command(tmp_path / "modes.csv", "--offset", "o", "--export", str(model))
    )
    args = ["--model", str(model), "--data", str(tmp_path / "modes.csv")]
    run_command(tmp_path, size, ["predict", *args, "--out", str(tmp_path / "p.csv")])
    expected = probabilities(B, table)
    got = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(got[NAMES[:4].tolist()].to_numpy(), expected, rtol=1e-8)
    out = tmp_path / "scores.json"
    run_command(tmp_path, size, ["evaluate", *args, "--metrics_json", str(out)])
    scores = json.loads(out.read_text())
    reference = log_loss(table["mode"], expected, sample_weight=table.w, labels=NAMES[:4])
    assert scores["log_loss"] == pytest.approx(reference, rel=1e-8)
    table.drop(columns="o").to_csv(tmp_path / "no_offset.csv", index=False)
    says = refused(
        capsys,
        [
            "predict",
            *args[:2],
            "--data",
            str(tmp_path / "no_offset.csv"),
            "--out",
            str(tmp_path / "q.csv"),
        ],
    )
    assert "has no column 'o': the model" in says and "adds it (--offset)" in says


def test_an_exposure_is_still_refused(tmp_path, capsys):
    journeys(3).to_csv(tmp_path / "modes.csv", index=False)
    says = refused(capsys, command(tmp_path / "modes.csv", "--exposure", "o"))
    assert says == (
        "--exposure multiplies the mean only under the log link, and --model multinomial has "
        "the logit link here: pass log(exposure) with --offset"
    )
