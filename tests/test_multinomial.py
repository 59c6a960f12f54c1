"""--model multinomial: a target of K classes (words or numbers) fitted exactly by Newton's
method, equal to statsmodels' MNLogit at 1, 2 and 3 ranks with a class that only the last
rank's rows hold; K = 2 is the logistic model; mistakes end with one line and exit 2."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from conftest import refused, run_command, run_metrics

SIZES = [
    1,
    pytest.param(2, marks=pytest.mark.multiprocess),
    pytest.param(3, marks=pytest.mark.multiprocess),
]
FRUIT = np.array(["apple", "fig", "kiwi", "pear", "plum", "quince"])


def choices(K: int, n: int = 900, seed: int = 3) -> pd.DataFrame:
    """n rows of two numbers, a word column and a class among K fruits; the last 40 rows are
    the only ones of the last class (the last rank's rows alone hold it)."""
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.uniform(-1, 1, n)
    shop = rng.choice(["north", "south"], n)
    B = rng.normal(scale=0.8, size=(4, K - 1))
    eta = np.column_stack([x1, x2, shop == "south", np.ones(n)]) @ B
    p = np.exp(np.column_stack([np.zeros(n), eta]))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K - 1, p=row[:-1] / row[:-1].sum()) for row in p])
    y[-40:] = K - 1
    return pd.DataFrame({"x1": x1, "x2": x2, "shop": shop, "fruit": FRUIT[y]})


def mnlogit(table: pd.DataFrame, repeats=None):
    X = pd.get_dummies(table[["x1", "x2", "shop"]], drop_first=True, dtype=float)
    X, y = sm.add_constant(X, prepend=False), table.fruit
    if repeats is not None:
        X, y = X.loc[X.index.repeat(repeats)], y.loc[y.index.repeat(repeats)]
    return sm.MNLogit(y.to_numpy(), X).fit(method="newton", tol=1e-14, maxiter=100, disp=0)


def as_matrix(metrics: dict, field: str) -> np.ndarray:
    """The JSON's coefficients' field as statsmodels' (F + 1) x (K - 1) array."""
    rows = metrics["statistics"]["coefficients"]
    K1 = len(metrics["classes"]) - 1
    return np.array([c[field] for c in rows]).reshape(K1, -1).T


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("K", [3, 5])
def test_multinomial_is_mnlogit_at_any_rank_count(tmp_path, size, K):
    """Word classes, a word feature, prior weights (whole numbers: MNLogit on each row repeated
    as many times): coefficients to 1e-8, standard errors to 1e-6, the log-likelihood to 1e-10,
    McFadden's R², AIC and BIC."""
    table = choices(K)
    table["w"] = np.random.default_rng(1).integers(1, 4, len(table)).astype(float)
    table.to_csv(tmp_path / "fruit.csv", index=False)
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, size, [*args, "--target", "fruit", "--weights", "w"])
    reference = mnlogit(table, table.w.astype(int).to_numpy())
    assert m["classes"] == sorted(FRUIT[:K].tolist())
    np.testing.assert_allclose(as_matrix(m, "estimate"), reference.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), reference.bse, rtol=1e-6)
    s = m["statistics"]
    assert s["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)
    assert s["null_log_likelihood"] == pytest.approx(reference.llnull, rel=1e-8)
    assert s["pseudo_r2"] == pytest.approx(reference.prsquared, rel=1e-7)
    assert s["aic"] == pytest.approx(reference.aic, rel=1e-10)
    assert s["bic"] == pytest.approx(reference.bic, rel=1e-10)
    assert {c["class"] for c in s["coefficients"]} == set(m["classes"][1:])
    confusion = np.array(m["training_scores"]["confusion"])
    assert confusion.sum() == pytest.approx(table.w.sum())
    assert m["training_scores"]["accuracy"] == pytest.approx(np.trace(confusion) / confusion.sum())


@pytest.mark.parametrize("size", SIZES[:2])
def test_the_readmes_election_study_is_mnlogits(tmp_path, size):
    """docs/examples.md's run: docs/anes96_csv.py's file, 7 number classes, against MNLogit."""
    import subprocess
    import sys

    from conftest import REPO, launcher_env

    path = tmp_path / "anes96.csv"
    script = [sys.executable, str(REPO / "docs" / "anes96_csv.py"), str(path)]
    subprocess.run(script, check=True, env=launcher_env())
    args = ["--data", str(path), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, size, args)
    table = pd.read_csv(path)
    X = sm.add_constant(table.drop(columns="PID"), prepend=False)
    reference = sm.MNLogit(table.PID, X).fit(method="newton", tol=1e-14, maxiter=100, disp=0)
    assert m["classes"] == list(range(7))
    np.testing.assert_allclose(as_matrix(m, "estimate"), reference.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), reference.bse, rtol=1e-6)
    assert m["statistics"]["log_likelihood"] == pytest.approx(reference.llf, rel=1e-10)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("cov_type", ["HC0", "HC1", "cluster"])
def test_robust_standard_errors_are_mnlogits(tmp_path, size, cov_type):
    """MNLogit.fit(cov_type=) on each row repeated as many times as its whole weight (a
    cluster's rows all repeated in it): the sandwich's standard errors to 1e-6, and the
    coefficients unchanged. HC1 is HC0 times n / (n - k), as the tool's HC1 is for every model
    (statsmodels' OLS factor; its MNLogit and GLM return HC0 for HC1)."""
    table = choices(4)
    table["w"] = np.random.default_rng(5).integers(1, 4, len(table)).astype(float)
    table["store"] = np.arange(len(table)) % 23  # 23 clusters, each on every rank
    table.to_csv(tmp_path / "fruit.csv", index=False)
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    args += ["--target", "fruit", "--weights", "w", "--features", "x1,x2,shop"]
    args += ["--cov_type", cov_type, *(["--groups", "store"] if cov_type == "cluster" else [])]
    m = run_metrics(tmp_path, size, args)
    repeats = table.w.astype(int).to_numpy()
    X = pd.get_dummies(table[["x1", "x2", "shop"]], drop_first=True, dtype=float)
    X = sm.add_constant(X, prepend=False).loc[table.index.repeat(repeats)]
    y = table.fruit.loc[table.index.repeat(repeats)].to_numpy()
    kwds = {"groups": table.store.loc[table.index.repeat(repeats)].to_numpy()}
    reference = sm.MNLogit(y, X).fit(
        method="newton", tol=1e-14, maxiter=100, disp=0, cov_type=cov_type.replace("1", "0"),
        cov_kwds=kwds if cov_type == "cluster" else None,
    )  # fmt: skip
    n, k = len(y), reference.params.size
    factor = np.sqrt(n / (n - k)) if cov_type == "HC1" else 1.0
    np.testing.assert_allclose(as_matrix(m, "estimate"), reference.params, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(as_matrix(m, "std_error"), reference.bse * factor, rtol=1e-6)
    assert m["statistics"]["cov_type"] == cov_type
    assert m["statistics"]["clusters"] == (23 if cov_type == "cluster" else None)


def test_the_metrics_json_holds_every_documented_key_and_no_other(tmp_path):
    import re

    from conftest import REPO

    text = (REPO / "docs" / "output.md").read_text()
    section = text.split("### A multinomial run's metrics JSON")[1].split("\n#")[0]
    table = choices(3)
    table.to_csv(tmp_path / "fruit.csv", index=False)
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, 1, args)
    keys = {*m, *m["statistics"], *m["statistics"]["coefficients"][0], *m["training_scores"]}
    sgd = ["--solver", "sgd", "--num_steps", "20", "--validation_fraction", "0.2"]
    m = run_metrics(tmp_path, 1, [*args[:-2], *sgd, "--log_every", "10"])
    keys |= {*m, *m["validation_history"][0]}
    net = ["--l1_ratio", "0.5", "--cv", "3", "--n_alphas", "5"]
    m = run_metrics(tmp_path, 1, [*args, *net])
    keys |= {*m, *m["statistics"], *m["path"], *m["cv"]}
    assert keys == set(re.findall(r"`([a-z_0-9]+)`", section)) - {"multinomial"}


def test_two_classes_are_the_logistic_model(tmp_path):
    table = choices(3)
    table = table[table.fruit != "kiwi"].reset_index(drop=True)  # apple and fig
    table["fig"] = (table.fruit == "fig").astype(float)
    table.to_csv(tmp_path / "two.csv", index=False)
    data = ["--data", str(tmp_path / "two.csv"), "--solver", "exact", "--features", "x1,x2,shop"]
    two = run_metrics(tmp_path, 1, [*data, "--model", "multinomial", "--target", "fruit"])
    binary = run_metrics(tmp_path, 1, [*data, "--model", "logistic", "--target", "fig"])
    ours = [c["estimate"] for c in binary["statistics"]["coefficients"]]
    np.testing.assert_allclose(as_matrix(two, "estimate")[:, 0], ours, rtol=1e-9)
    errors = [c["std_error"] for c in binary["statistics"]["coefficients"]]
    np.testing.assert_allclose(as_matrix(two, "std_error")[:, 0], errors, rtol=1e-9)


def test_from_python_numbers_as_classes_and_predictions():
    import hvd_linreg

    table = choices(4)
    codes = pd.Series(np.searchsorted(FRUIT, table.fruit) * 10, name="code")  # 0, 10, 20, 30
    result = hvd_linreg.fit(table[["x1", "x2", "shop"]], codes, model="multinomial", solver="exact")
    assert result.classes == [0, 10, 20, 30]
    reference = mnlogit(table)
    np.testing.assert_allclose(result.params, reference.params, rtol=1e-8, atol=1e-10)
    probabilities = result.predict_proba(table[["x1", "x2", "shop"]])
    np.testing.assert_allclose(probabilities, reference.predict(), rtol=1e-8)
    assert list(result.predict(table.iloc[:3][["x1", "x2", "shop"]])) == [
        [0, 10, 20, 30][k] for k in probabilities[:3].argmax(axis=1)
    ]
    assert "class 30 (against 0):" in result.summary()


def test_held_out_rows_are_scored(tmp_path):
    table = choices(3)
    table.to_csv(tmp_path / "fruit.csv", index=False)
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, 1, [*args, "--validation_fraction", "0.2"])
    held = m["validation"]
    assert held["rows"] + m["num_samples"] == 900 and 170 < held["rows"] < 190
    assert 0 < held["accuracy"] < 1 and held["log_loss"] > 0
    assert np.array(held["confusion"]).sum() == held["rows"]


def test_multinomial_mistakes_end_with_one_line(tmp_path, capsys):
    table = choices(3)
    table.to_csv(tmp_path / "fruit.csv", index=False)
    data = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial"]
    exact = [*data, "--solver", "exact"]
    says = refused(capsys, [*exact, "--no_intercept"])
    assert "a multinomial model without intercepts is not fitted yet" in says
    table.assign(fruit="apple").to_csv(tmp_path / "one.csv", index=False)
    one = ["--data", str(tmp_path / "one.csv"), "--model", "multinomial", "--solver", "exact"]
    assert "the target 'fruit' has one class (apple)" in refused(capsys, one)
    says = refused(capsys, [*exact, "--max_levels", "2"])
    assert "the target 'fruit' has 3 classes, more than --max_levels 2" in says
    gaps = table.copy()
    gaps.loc[7, "fruit"] = None
    gaps.to_csv(tmp_path / "gaps.csv", index=False)
    says = refused(capsys, ["--data", str(tmp_path / "gaps.csv"), *exact[2:]])
    assert "gaps.csv line 9: no value in column 'fruit'" in says
    separated = table.copy()
    separated["x1"] = np.where(separated.fruit == "apple", -5.0, 5.0) + separated.x2 * 0.01
    separated.to_csv(tmp_path / "sep.csv", index=False)
    says = refused(capsys, ["--data", str(tmp_path / "sep.csv"), *exact[2:]])
    assert "or a class is separated from the others" in says


def test_max_iter_and_tol_reach_newtons_method(tmp_path, capsys):
    """--max_iter 2: the last iterate, converged false and one warning line, exit 0; a looser
    --tol stops sooner."""
    table = choices(3)
    table.to_csv(tmp_path / "fruit.csv", index=False)
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    full = run_metrics(tmp_path, 1, args)["statistics"]
    short = run_metrics(tmp_path, 1, [*args, "--max_iter", "2"])["statistics"]
    assert full["converged"] and not short["converged"] and short["iterations"] == 2
    assert short["log_likelihood"] < full["log_likelihood"]
    assert "warning: Newton's method did not converge in --max_iter 2" in capsys.readouterr().err
    loose = run_metrics(tmp_path, 1, [*args, "--tol", "1e-3"])["statistics"]
    assert loose["iterations"] < full["iterations"]


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_export_predict_and_evaluate(tmp_path, capsys, size):
    """--export keeps the classes; predict writes a probability column per class and the most
    probable class, the IDs beside them (MNLogit's probabilities, at 1 and 2 ranks); evaluate
    scores them as scikit-learn does; a class the model does not know is named."""
    from sklearn.metrics import confusion_matrix, log_loss

    from hvd_linreg.cli import main

    table = choices(4)
    table.insert(0, "id", [f"r{i:03d}" for i in range(len(table))])
    table.to_csv(tmp_path / "fruit.csv", index=False)
    model = tmp_path / "model"
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    run_metrics(tmp_path, 1, [*args, "--features", "x1,x2,shop", "--export", str(model)])
    command = ["predict", "--model", str(model), "--data", str(tmp_path / "fruit.csv")]
    command += ["--out", str(tmp_path / "p.csv"), "--keep_columns", "id"]
    run_command(tmp_path, size, command)
    got = pd.read_csv(tmp_path / "p.csv")
    classes = sorted(FRUIT[:4].tolist())
    assert list(got.columns) == ["id", *classes, "class"] and list(got.id) == list(table.id)
    expected = mnlogit(table).predict()
    np.testing.assert_allclose(got[classes].to_numpy(), expected, rtol=1e-8)
    assert list(got["class"]) == [classes[k] for k in expected.argmax(axis=1)]
    capsys.readouterr()
    out = tmp_path / "scores.json"
    assert main(["evaluate", *command[1:5], "--metrics_json", str(out)]) == 0
    import json

    scores = json.loads(out.read_text())
    assert scores["log_loss"] == pytest.approx(log_loss(table.fruit, expected), rel=1e-8)
    predicted = np.array(classes)[expected.argmax(axis=1)]
    np.testing.assert_array_equal(
        scores["confusion"], confusion_matrix(table.fruit, predicted, labels=classes)
    )
    table.loc[12, "fruit"] = "mango"
    table.to_csv(tmp_path / "mango.csv", index=False)
    says = refused(capsys, ["evaluate", *command[1:3], "--data", str(tmp_path / "mango.csv")])
    assert "mango.csv line 14: the class 'mango' in 'fruit'" in says
    if size == 1:  # the SavedModel serves the same probabilities
        import tensorflow as tf

        serve = tf.saved_model.load(str(model)).signatures["serving_default"]
        X = pd.get_dummies(table[["x1", "x2", "shop"]], drop_first=True, dtype=float)
        served = serve(features=tf.constant(X.to_numpy()))["probabilities"].numpy()
        np.testing.assert_allclose(served, expected, rtol=1e-8)


# matplotlib's first three colours: the classes' curves and dots
COLOURS = [(0.122, 0.467, 0.706), (1.0, 0.498, 0.055), (0.173, 0.627, 0.173)]


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_plot_draws_each_class_over_the_one_feature(tmp_path, size):
    """A PNG of one panel: a curve and binned dots in each class's colour, at 1 and 2 ranks."""
    import matplotlib.image

    choices(3).to_csv(tmp_path / "fruit.csv", index=False)
    figure = tmp_path / "classes.png"
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    run_metrics(tmp_path, size, [*args, "--features", "x1", "--plot", str(figure)])
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(figure)
    height, width = image.shape[:2]
    assert 1.2 * height < width < 1.6 * height  # one panel, as each of the binary plot's
    for colour in COLOURS:
        pixels = np.all(np.abs(image[..., :3] - colour) < 0.03, axis=-1)
        assert pixels.sum() > 300, colour


def test_plot_of_more_than_one_feature_is_refused(tmp_path, capsys):
    choices(3).to_csv(tmp_path / "fruit.csv", index=False)
    figure = tmp_path / "classes.png"
    args = ["--data", str(tmp_path / "fruit.csv"), "--model", "multinomial", "--solver", "exact"]
    says = refused(capsys, [*args, "--features", "x1,x2", "--plot", str(figure)])
    assert says == (
        "--plot draws a multinomial model's probability of each class over its one feature, "
        "and this one has 2: fit one feature, or leave out --plot"
    )
    assert not figure.exists()


def symmetric(w: list, b: list) -> tuple[np.ndarray, np.ndarray]:
    """The JSON's w (a list per class but the first) and b in scikit-learn's symmetric form:
    coef_ (K x F) and intercept_ (K), each centred over the classes."""
    W = np.vstack([np.zeros(len(w[0])), np.array(w)])
    b = np.append(0.0, b)
    return W - W.mean(axis=0), b - b.mean()


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_l2_is_scikit_learns_multinomial_on_iris(tmp_path, size):
    """--l2 1/(2·C·n) is scikit-learn's multinomial LogisticRegression(C) (newton-cholesky,
    tol 1e-12), its symmetric coefficients to 1e-6, at 1 and 2 ranks."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    iris = load_iris(as_frame=True).frame
    iris["species"] = np.array(["setosa", "versicolor", "virginica"])[iris.target]
    iris.drop(columns="target").to_csv(tmp_path / "iris.csv", index=False)
    C, n = 0.5, len(iris)
    args = ["--data", str(tmp_path / "iris.csv"), "--model", "multinomial", "--solver", "exact"]
    m = run_metrics(tmp_path, size, [*args, "--l2", repr(1 / (2 * C * n))])
    X = iris.drop(columns=["target", "species"]).to_numpy()
    reference = LogisticRegression(C=C, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    reference.fit(X, iris.species)
    coef, intercept = symmetric(m["w"], m["b"])
    np.testing.assert_allclose(coef, reference.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(intercept, reference.intercept_, rtol=1e-6, atol=1e-9)


def test_l2_is_scikit_learns_multinomial_on_digits():
    """Ten classes, 64 pixels of which some are always 0 (only the penalty fixes them)."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    import hvd_linreg

    X, y = load_digits(return_X_y=True)
    X, y = X[:600], y[:600]
    C = 0.1
    result = hvd_linreg.fit(X, y, model="multinomial", solver="exact", l2=1 / (2 * C * len(y)))
    reference = LogisticRegression(C=C, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    reference.fit(X, y)
    S = result.symmetric_params
    np.testing.assert_allclose(S[:-1].T, reference.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(S[-1], reference.intercept_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("C", [0.05, 1.0])
def test_the_estimator_takes_k_classes_as_scikit_learns(C):
    """estimators.LogisticRegression with 3 classes and sample weights: scikit-learn's
    multinomial coef_ (K x F), intercept_ and predict_proba to 1e-8."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    from hvd_linreg import estimators

    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    weights = np.random.default_rng(2).uniform(0.5, 2.0, len(y))
    ours = estimators.LogisticRegression(C=C).fit(X, labels, sample_weight=weights)
    theirs = LogisticRegression(C=C, tol=1e-12, max_iter=1000, solver="newton-cholesky")
    theirs.fit(X, labels, sample_weight=weights)
    assert list(ours.classes_) == list(theirs.classes_) and ours.coef_.shape == (3, 4)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-8)
    assert (ours.predict(X) == theirs.predict(X)).all()
    assert "class virginica (against setosa):" in ours.summary()
