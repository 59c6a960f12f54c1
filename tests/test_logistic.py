"""--model logistic: averaged SGD on the log-loss exactly as a NumPy simulation computes it,
Newton's optimum and its statistics as statsmodels and scikit-learn compute them, separation
refused, scores and predictions as scikit-learn's, and a target that is not 0/1 refused."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from conftest import launch, params_of
from hvd_linreg.config import Config
from reference import SGD, averaged, constant

STEPS, LR, BATCH = 60, 0.5, 8


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def logistic_gradient(theta, X, y, l2=0.0):
    """d/dtheta of mean(log-loss) + l2 |w|²: Aᵀ(p - y) / n, A = [X 1]."""
    error = sigmoid(X @ theta[:-1] + theta[-1]) - y
    return np.append(X.T @ error, error.sum()) / len(y) + np.append(2.0 * l2 * theta[:-1], 0.0)


def log_loss(theta, X, y):
    z = X @ theta[:-1] + theta[-1]
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    """400 rows, 3 standardised features, y ~ Bernoulli(sigmoid(x·w + b)): not separable."""
    tmp = tmp_path_factory.mktemp("logistic")
    rng = np.random.default_rng(11)
    X = rng.standard_normal((400, 3))
    y = (rng.random(400) < sigmoid(X @ [1.0, -2.0, 0.5] + 0.3)).astype(np.float64)
    np.savez(tmp / "train.npz", X=X, y=y)
    return tmp, X, y


@pytest.fixture(scope="module")
def cancer(tmp_path_factory):
    """scikit-learn's breast cancer data: the ten "mean ..." features and 1 = malignant."""
    from sklearn.datasets import load_breast_cancer

    frame = load_breast_cancer(as_frame=True).frame
    columns = [c for c in frame.columns if c.startswith("mean ")]
    X, y = frame[columns].to_numpy(np.float64), 1.0 - frame["target"].to_numpy(np.float64)
    path = tmp_path_factory.mktemp("cancer") / "cancer.csv"
    names = [c.replace(" ", "_") for c in columns]
    np.savetxt(
        path, np.c_[X, y], delimiter=",", header=",".join([*names, "malignant"]), comments=""
    )
    return path, X, y


def exact(cancer, size, tmp_path, extra=()):
    path = cancer[0]
    run = launch(
        "mpirun",
        size,
        ["--model", "logistic", "--data", str(path), "--solver", "exact", *extra],
        tmp_path,
    )
    assert run.returncode == 0, run.output
    return run


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "launcher, size, l2",
    [
        ("mpirun", 1, 0.0),
        ("horovodrun-gloo", 2, 0.0),
        ("horovodrun-mpi", 2, 0.01),
        ("mpirun", 4, 0.0),
    ],
)
def test_sgd_is_exactly_averaged_sgd_on_the_log_loss(classes, launcher, size, l2, tmp_path):
    tmp, X, y = classes
    args = ["--model", "logistic", "--data", str(tmp / "train.npz"), "--num_steps", str(STEPS)]
    args += ["--learning_rate", str(LR), "--batch_size", str(BATCH), "--l2", str(l2)]
    run = launch(launcher, size, [*args, "--log_every", "20"], tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    expected = averaged(
        X,
        y,
        ranks=size,
        batch_size=BATCH,
        steps=STEPS,
        optimizer=SGD(constant(LR)),
        w0=m["initial_w"],
        b0=m["initial_b"],
        l2=l2,
        grad=logistic_gradient,
    )
    # float64 data trains in float64: far closer than the 1e-4 a float32 run would allow.
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    assert m["loss"] == pytest.approx(log_loss(expected, X, y), rel=1e-9)
    assert "(mean log-loss over all 400 samples)" in run.stdout


def statsmodels_logit(X, y):
    import statsmodels.api as sm

    model = sm.Logit(y, sm.add_constant(X, prepend=False))  # b last, as the tool's theta
    return model.fit(method="newton", tol=1e-12, maxiter=100, disp=0)


def sklearn_fit(X, y, C=None):
    from sklearn.linear_model import LogisticRegression

    penalty = {"C": np.inf if C is None else C}
    fit = LogisticRegression(solver="newton-cholesky", tol=1e-12, max_iter=1000, **penalty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newton-cholesky on unscaled data: not our concern
        fit.fit(X, y)
    return np.append(fit.coef_[0], fit.intercept_[0])


@pytest.mark.multiprocess
@pytest.mark.parametrize("size", [1, 2])
def test_newton_is_statsmodels_logit_and_its_statistics(cancer, size, tmp_path):
    _, X, y = cancer
    m = exact(cancer, size, tmp_path).metrics
    ref = statsmodels_logit(X, y)
    theta, stats = params_of(m), m["statistics"]
    np.testing.assert_allclose(theta, ref.params, rtol=1e-6)
    np.testing.assert_allclose(theta, sklearn_fit(X, y), rtol=1e-6)
    columns = {k: np.array([c[k] for c in stats["coefficients"]]) for k in ("std_error", "z", "p")}
    np.testing.assert_allclose(columns["std_error"], ref.bse, rtol=1e-6)
    np.testing.assert_allclose(columns["z"], ref.tvalues, rtol=1e-6)
    np.testing.assert_allclose(columns["p"], ref.pvalues, rtol=1e-6)
    assert stats["log_likelihood"] == pytest.approx(ref.llf, rel=1e-9)
    assert stats["null_log_likelihood"] == pytest.approx(ref.llnull, rel=1e-6)
    assert stats["pseudo_r2"] == pytest.approx(ref.prsquared, rel=1e-6)
    assert m["loss"] == pytest.approx(-ref.llf / len(y), rel=1e-9)
    assert stats["iterations"] <= 20 and stats["gradient_norm"] < 1e-8
    assert [c["name"] for c in stats["coefficients"]][:2] == ["mean_radius", "mean_texture"]


@pytest.mark.multiprocess
def test_newton_with_l2_is_scikit_learns_penalised_fit(cancer, tmp_path):
    """The tool minimises mean(log-loss) + λ‖w‖², scikit-learn C·Σ log-loss + ½‖w‖² (neither
    penalises b). N/(2Nλ) times the tool's is Σ log-loss/(2Nλ) + ½‖w‖²: the same minimiser
    with C = 1/(2Nλ)."""
    _, X, y = cancer
    l2 = 1e-3
    m = exact(cancer, 2, tmp_path, ["--l2", str(l2)]).metrics
    np.testing.assert_allclose(params_of(m), sklearn_fit(X, y, C=1 / (2 * len(y) * l2)), rtol=1e-6)
    stats = m["statistics"]
    assert all(c["std_error"] is None for c in stats["coefficients"])
    assert "penalised fit" in stats["undefined"]["std_error"]


@pytest.mark.multiprocess
def test_the_summary_prints_the_logistic_statistics(cancer, tmp_path):
    run = exact(cancer, 1, tmp_path)
    out = run.stdout
    assert "exact maximum likelihood (Newton's method)" in out
    assert "McFadden's pseudo-R²" in out and "Newton: " in out
    assert re.search(r"^  coefficient +estimate +std error +z +p$", out, re.M), out
    assert "  mean_concave_points " in out  # a long name keeps a space before its estimate


@pytest.mark.multiprocess
@pytest.mark.parametrize("solver", ["exact", "sgd"])
def test_complete_separation_is_refused_with_a_clear_message(solver, tmp_path):
    """y = 1 exactly where x₀ + x₁ > 0: the log-likelihood rises towards 0 without a maximum.
    An SGD run computes the exact optimum for its optimality gap, and is refused too."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 2))
    np.savez(tmp_path / "separable.npz", X=X, y=(X.sum(axis=1) > 0).astype(np.float64))
    args = ["--model", "logistic", "--data", str(tmp_path / "separable.npz")]
    args += ["--solver", solver, "--optimality_gap", "always", "--num_steps", "10"]
    run = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert run.returncode == 2, run.output
    assert "the classes are completely separated" in run.stderr
    assert "no finite maximum" in run.stderr and "--l2 > 0" in run.stderr
    assert "Traceback" not in run.output


def quasi_separated(tmp_path) -> tuple[str, np.ndarray, np.ndarray]:
    """200 rows of two features, written as quasi.npz (its path, X, y): y = 1 where x₀ > 0 and
    y = 0 where x₀ < 0; the 20 rows with x₀ = 0 are of both classes."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((200, 2))
    X[:20, 0] = 0.0
    y = np.where(X[:, 0] > 0, 1.0, 0.0)
    y[:10] = 1.0
    np.savez(tmp_path / "quasi.npz", X=X, y=y)
    return str(tmp_path / "quasi.npz"), X, y


@pytest.mark.multiprocess
def test_quasi_separation_is_refused_and_l2_fits_it(tmp_path):
    """y = 1 where x₀ > 0 and y = 0 where x₀ < 0; rows with x₀ = 0 are of both classes. No
    hyperplane separates every row, but w₀ still grows without bound. With --l2 the penalised
    objective has its finite minimum."""
    path, X, y = quasi_separated(tmp_path)
    args = ["--model", "logistic", "--data", path, "--solver", "exact"]
    run = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert run.returncode == 2, run.output
    assert "(quasi-)separated" in run.stderr and "no finite maximum" in run.stderr
    assert "Traceback" not in run.output
    fitted = launch("mpirun", 2, [*args, "--l2", "0.01"], tmp_path)
    assert fitted.returncode == 0, fitted.output
    np.testing.assert_allclose(
        params_of(fitted.metrics), sklearn_fit(X, y, C=1 / (2 * len(y) * 0.01)), rtol=1e-6
    )


@pytest.mark.multiprocess
def test_a_target_other_than_0_and_1_is_refused_naming_its_row(classes, tmp_path):
    _, X, y = classes
    bad = y.copy()
    bad[301] = 2.0
    np.savez(tmp_path / "bad.npz", X=X, y=bad)
    args = ["--model", "logistic", "--data", str(tmp_path / "bad.npz"), "--num_steps", "5"]
    run = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert run.returncode == 2, run.output
    assert "bad.npz row 301: the target is 2" in run.stderr
    assert "--model logistic needs a target of 0 or 1" in run.stderr
    assert "Traceback" not in run.output
    # A training row is named by its row in the file; a held-out one says that it is one.
    held_out = launch(
        "mpirun",
        2,
        [*args, "--validation_fraction", "0.5", "--batch_size", "8"],
        tmp_path,
        metrics=False,
    )
    assert held_out.returncode == 2, held_out.output
    message = re.search(
        r"bad\.npz(: a held-out row's| row 301: the) target is 2; --model", held_out.stderr
    )
    assert message, held_out.output


@pytest.mark.multiprocess
@pytest.mark.parametrize("memory", ["in memory", "read as used"])
def test_a_target_of_two_other_values_is_read_as_0_and_1(classes, memory, tmp_path):
    """y coded 1/2 (a .npy file: features, then the target) trains exactly as y coded 0/1,
    from rows in memory and from rows read from the file as training uses them; held-out rows
    are recoded too (a logistic model's scores refuse any other target)."""
    _, X, y = classes
    np.save(tmp_path / "coded.npy", np.c_[X, y + 1.0])
    args = ["--model", "logistic", "--data", str(tmp_path / "coded.npy"), "--num_steps", "40"]
    args += ["--learning_rate", str(LR), "--batch_size", str(BATCH)]
    cap = ("-x", "HVD_LINREG_RANK_MEMORY=1000") if memory == "read as used" else ()
    run = launch("mpirun", 2, args, tmp_path, launcher_args=cap)
    assert run.returncode == 0, run.output
    assert "the target's values 1 and 2 are read as 0 and 1" in run.stdout
    m = run.metrics
    expected = averaged(
        X, y, ranks=2, batch_size=BATCH, steps=40, optimizer=SGD(constant(LR)),
        w0=m["initial_w"], b0=m["initial_b"], row_bytes=4 * 8, grad=logistic_gradient,
    )  # fmt: skip
    np.testing.assert_allclose(params_of(m), expected, rtol=1e-9, atol=1e-12)
    assert m["loss"] == pytest.approx(log_loss(expected, X, y), rel=1e-9)
    validated = launch(
        "mpirun", 2, [*args, "--validation_fraction", "0.2"], tmp_path, launcher_args=cap
    )
    assert validated.returncode == 0, validated.output
    assert 0 < validated.metrics["validation"]["log_loss"] < 1


@pytest.fixture(scope="module")
def exported(classes, tmp_path_factory):
    """A logistic model trained on 2 ranks with held-out rows, exported."""
    tmp, X, y = classes
    out = tmp_path_factory.mktemp("exported")
    args = ["--model", "logistic", "--data", str(tmp / "train.npz"), "--num_steps", "200"]
    args += ["--validation_fraction", "0.25", "--export", str(out / "model")]
    run = launch("mpirun", 2, args, out)
    assert run.returncode == 0, run.output
    meta = json.loads((out / "model" / "assets.extra" / "hvd_linreg.json").read_text())
    return out / "model", np.array([*meta["w"], meta["b"]]), run


def sklearn_model(theta):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression()
    model.coef_, model.intercept_, model.classes_ = theta[None, :-1], theta[-1:], np.array([0, 1])
    return model


@pytest.mark.multiprocess
def test_evaluate_scores_are_scikit_learns(classes, exported, tmp_path):
    from sklearn.metrics import accuracy_score, log_loss, roc_auc_score

    tmp, X, y = classes
    model, theta, training = exported
    assert "validation: log-loss " in training.stdout and ", AUC " in training.stdout
    assert set(training.metrics["validation"]) >= {"log_loss", "accuracy", "auc", "history"}
    args = ["evaluate", "--model", str(model), "--data", str(tmp / "train.npz")]
    args += ["--metrics_json", str(tmp_path / "s.json")]
    run = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert run.returncode == 0, run.output
    assert "  ROC AUC:  " in run.stdout
    scores = json.loads((tmp_path / "s.json").read_text())
    p = sklearn_model(theta).predict_proba(X)[:, 1]
    assert scores["count"] == len(y)
    assert scores["log_loss"] == pytest.approx(log_loss(y, p), rel=1e-12)
    assert scores["accuracy"] == accuracy_score(y, sklearn_model(theta).predict(X))
    assert scores["auc"] == pytest.approx(roc_auc_score(y, p), rel=1e-12)


@pytest.mark.multiprocess
def test_predict_writes_probabilities_or_classes_as_scikit_learn(classes, exported, tmp_path):
    tmp, X, _ = classes
    model, theta, _ = exported
    args = ["predict", "--model", str(model), "--data", str(tmp / "train.npz")]
    probabilities = launch(
        "mpirun", 2, [*args, "--out", str(tmp_path / "p.npy")], tmp_path, metrics=False
    )
    assert probabilities.returncode == 0, probabilities.output
    reference = sklearn_model(theta)
    np.testing.assert_allclose(
        np.load(tmp_path / "p.npy"), reference.predict_proba(X)[:, 1], rtol=1e-12
    )
    args += ["--threshold", "0.5", "--out", str(tmp_path / "c.csv")]
    classified = launch("mpirun", 2, args, tmp_path, metrics=False)
    assert classified.returncode == 0, classified.output
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "c.csv", skiprows=1), reference.predict(X))


def test_roc_auc_counts_ties_as_one_half_as_scikit_learn():
    from sklearn.metrics import roc_auc_score

    from hvd_linreg.scoring.classification import roc_auc

    rng = np.random.default_rng(2)
    scores, labels = rng.integers(0, 5, 300).astype(float), rng.integers(0, 2, 300).astype(float)
    assert roc_auc(scores, labels, 1 - labels) == pytest.approx(
        roc_auc_score(labels, scores), rel=1e-12
    )
    assert np.isnan(roc_auc(scores, np.ones(300), np.zeros(300)))


def test_synthetic_logistic_rows_are_the_same_for_any_rank_count():
    """y ~ Bernoulli(σ(5x + 2)), a pure function of (seed, row): 3 ranks' shards and the
    held-out rows hold exactly the rows of one rank, and the target is 0/1 at the rate the
    model gives."""
    from hvd_linreg import families
    from hvd_linreg.data import load_shard

    cfg = Config(model="logistic", num_samples=6000, batch_size=10, validation_fraction=0.1)
    target = families.for_config(cfg).synthetic_target
    whole = load_shard(cfg, 0, 1, target=target)
    parts = [load_shard(cfg, rank, 3, target=target) for rank in range(3)]
    X = np.concatenate([whole.X, whole.validation.X])
    y = np.concatenate([whole.y, whole.validation.y])
    assert set(np.unique(y)) == {0.0, 1.0}
    rows = {(float(a), float(b)) for a, b in zip(X[:, 0], y)}
    for part in parts:
        for Xp, yp in [(part.X, part.y), (part.validation.X, part.validation.y)]:
            assert {(float(a), float(b)) for a, b in zip(Xp[:, 0], yp)} <= rows
    p = 1 / (1 + np.exp(-(5.0 * X[:, 0].astype(np.float64) + 2.0)))
    assert abs(y.mean() - p.mean()) < 4 * np.sqrt((p * (1 - p)).sum()) / len(y)


@pytest.mark.multiprocess
def test_newton_on_synthetic_logistic_data_recovers_the_true_model(tmp_path):
    """The synthetic job (y ~ Bernoulli(σ(5x + 2))) fitted by Newton at 2 ranks: w and b within
    4 standard errors of the truth, and the same fit as on 1 rank."""
    args = ["--model", "logistic", "--solver", "exact", "--num_samples", "4000"]
    one, two = (launch("mpirun", n, args, tmp_path) for n in (1, 2))
    assert one.returncode == 0 and two.returncode == 0, one.output + two.output
    m = two.metrics
    coefficients = m["statistics"]["coefficients"]
    for c, truth in zip(coefficients, [5.0, 2.0]):
        assert abs(c["estimate"] - truth) < 4 * c["std_error"], c
    np.testing.assert_allclose(params_of(m), params_of(one.metrics), rtol=1e-9)
