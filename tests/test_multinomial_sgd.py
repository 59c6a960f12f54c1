"""--model multinomial --solver sgd: averaged SGD on the mean softmax cross-entropy through
hvd.DistributedOptimizer, exactly as a float64 NumPy simulation computes it at 1, 2 and 4 ranks
under each launcher (so k ranks x batch B is 1 rank x batch kB); with weights, an offset, --l2
and momentum; checkpoints that resume on another rank count, a checkpoint of other classes
refused, and the held-out rows scored at each log step."""

from __future__ import annotations

import numpy as np
import pytest
from test_validation import held_out

from conftest import launch, refused, run_metrics
from reference import SGD, averaged, averaged_in_segments, constant

WORDS = np.array(["ant", "bee", "cat", "dog"])


def animals(path, K: int = 3, n: int = 240, seed: int = 5, weights: bool = False) -> tuple:
    """n rows of 3 features and a class among K words, written to path as CSV (numbers written
    exactly); (X, the classes' numbers, the weights or None). With weights, a column w of
    whole numbers and a column o of offsets (its values in X[:, 0]'s order: see o_of)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    eta = np.column_stack([np.zeros(n), X @ rng.normal(size=(3, K - 1))])
    p = np.exp(eta - eta.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=row) for row in p])
    w = rng.integers(1, 4, n).astype(float) if weights else None
    with open(path, "w") as f:
        f.write("x0,x1,x2," + ("w,o," if weights else "") + "animal\n")
        for i in range(n):
            more = [repr(float(w[i])), repr(o_of(X[i, 0]))] if weights else []
            cells = [repr(float(v)) for v in X[i]] + more
            f.write(",".join([*cells, WORDS[y[i]]]) + "\n")
    return X, y, w


def o_of(x0: float) -> float:
    """A row's offset, a function of its first feature (batches are rows of X)."""
    return float(np.sin(3.0 * x0))


def softmax_gradient(K: int, weights=None, l2: float = 0.0, offset: bool = False):
    """d/dθ of mean_i(w_i (-log P(y_i | x_i))) + l2 (Σ_k ‖b_k‖² - ‖Σ_k b_k‖² / K), θ the
    (F + 1) x (K - 1) matrix B row by row; weights: each row's, looked up by its first feature
    (batches are rows of X, whatever the rank); offset: each row's o_of added to every class's
    log-odds against the first."""

    def grad(theta, X, y, _l2=0.0):
        B = theta.reshape(X.shape[1] + 1, K - 1)
        A = np.column_stack([X, np.ones(len(X))])
        o = np.array([o_of(x) for x in X[:, 0]]) if offset else np.zeros(len(X))
        eta = np.column_stack([np.zeros(len(X)), A @ B + o[:, None]])
        P = np.exp(eta - eta.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        Y = np.eye(K)[y.astype(int)]
        w = np.ones(len(X)) if weights is None else np.array([weights[x] for x in X[:, 0]])
        G = A.T @ ((P - Y)[:, 1:] * w[:, None]) / len(X)
        W = B[:-1]
        G[:-1] += 2.0 * l2 * (W - W.sum(axis=1, keepdims=True) / K)
        return G.reshape(-1)

    return grad


def simulated(m: dict, X, y, grad, ranks: int, batch: int, steps: int, optimizer) -> np.ndarray:
    """The simulation from the run's own start, as the run's (F + 1) x (K - 1) B."""
    w0, b0 = np.array(m["initial_w"]).T, np.array(m["initial_b"])
    theta = averaged(
        X,
        y,
        ranks=ranks,
        batch_size=batch,
        steps=steps,
        optimizer=optimizer,
        w0=w0,
        b0=b0,
        grad=grad,
    )
    return theta.reshape(len(w0) + 1, -1)


def params(m: dict) -> np.ndarray:
    return np.vstack([np.array(m["w"]).T, m["b"]])


# Keras holds the momentum as a float32: 0.9 is 0.89999998 in a float64 run's updates too
MOMENTUM = float(np.float32(0.9))
SGD_ARGS = ["--model", "multinomial", "--solver", "sgd", "--dtype", "float64", "--seed", "0"]


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "launcher, size",
    [
        ("mpirun", 1),
        ("mpirun", 2),
        ("horovodrun-gloo", 2),
        ("horovodrun-mpi", 2),
        ("mpirun", 4),
        ("horovodrun-gloo", 4),
    ],
)
def test_sgd_is_the_simulation_at_any_rank_count(tmp_path, launcher, size):
    """30 steps, a global batch of 16 rows: k ranks x 16/k rows each, to 1e-9."""
    X, y, _ = animals(tmp_path / "a.csv", K=4)
    batch, steps = 16 // size, 30
    args = ["--data", str(tmp_path / "a.csv"), *SGD_ARGS, "--num_steps", str(steps)]
    args += ["--batch_size", str(batch), "--learning_rate", "0.3", "--log_every", "10"]
    run = launch(launcher, size, args, tmp_path)
    assert run.returncode == 0, run.output
    m = run.metrics
    assert m["classes"] == ["ant", "bee", "cat", "dog"] and m["steps"] == steps
    expected = simulated(m, X, y, softmax_gradient(4), size, batch, steps, SGD(constant(0.3)))
    np.testing.assert_allclose(params(m), expected, rtol=1e-9, atol=1e-12)
    assert run.stdout.count("Step: ") == 3
    # The exact optimum beside it: SGD's loss is above it, by the gap the JSON gives
    assert m["optimality_gap"] == pytest.approx(m["loss"] - m["exact_loss"], abs=1e-15)
    assert m["optimality_gap"] > 0 and m["statistics"]["converged"]


@pytest.mark.parametrize("size", [1, pytest.param(2, marks=pytest.mark.multiprocess)])
def test_weights_an_offset_l2_and_momentum_are_the_simulation(tmp_path, size):
    X, y, w = animals(tmp_path / "a.csv", K=3, weights=True)
    batch, steps, l2 = 16 // size, 24, 0.05
    args = ["--data", str(tmp_path / "a.csv"), *SGD_ARGS, "--num_steps", str(steps)]
    args += ["--batch_size", str(batch), "--learning_rate", "0.05", "--weights", "w"]
    args += ["--l2", str(l2), "--optimizer", "momentum", "--features", "x0,x1,x2"]
    m = run_metrics(tmp_path, size, [*args, "--offset", "o"])
    grad = softmax_gradient(3, dict(zip(X[:, 0], w)), l2, offset=True)
    expected = simulated(m, X, y, grad, size, batch, steps, SGD(constant(0.05), momentum=MOMENTUM))
    np.testing.assert_allclose(params(m), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.multiprocess
def test_a_checkpoint_resumes_on_another_rank_count(tmp_path):
    """20 steps at 2 ranks x 8 rows, then on to 40 at 4 ranks x 4 rows (the same global batch)
    from the checkpoint: the simulation of the two segments."""
    X, y, _ = animals(tmp_path / "a.csv", K=3)
    base = ["--data", str(tmp_path / "a.csv"), *SGD_ARGS, "--learning_rate", "0.3"]
    base += ["--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "10"]
    first = launch("mpirun", 2, [*base, "--num_steps", "20", "--batch_size", "8"], tmp_path)
    assert first.returncode == 0, first.output
    run = launch("mpirun", 4, [*base, "--num_steps", "40", "--batch_size", "4"], tmp_path)
    assert run.returncode == 0, run.output
    assert "Resuming from" in run.stdout and "at step 20" in run.stdout
    m = run.metrics
    assert m["first_step"] == 20 and m["steps"] == 40
    theta = np.append(np.array(m["initial_w"]).T, m["initial_b"])
    for first, end, ranks, batch in [(0, 20, 2, 8), (20, 40, 4, 4)]:  # plain SGD: no state
        theta = averaged_in_segments(
            X,
            y,
            segments=[(first, end, ranks)],
            batch_size=batch,
            optimizer=SGD(constant(0.3)),
            w0=theta[:-2],
            b0=theta[-2:],
            grad=softmax_gradient(3),
        )
    np.testing.assert_allclose(params(m), theta.reshape(4, 2), rtol=1e-9, atol=1e-12)


def test_a_checkpoint_of_other_classes_is_refused(tmp_path, capsys):
    animals(tmp_path / "three.csv", K=3)
    animals(tmp_path / "four.csv", K=4)
    base = [*SGD_ARGS, "--checkpoint_dir", str(tmp_path / "ckpt"), "--num_steps", "10"]
    run_metrics(tmp_path, 1, ["--data", str(tmp_path / "three.csv"), *base])
    says = refused(capsys, ["--data", str(tmp_path / "four.csv"), *base[:-1], "20"])
    assert "is of a model of the classes ['ant', 'bee', 'cat'], this run fits the classes" in says


def test_held_out_rows_are_scored_at_each_log_step(tmp_path):
    X, y, _ = animals(tmp_path / "a.csv", K=3, n=400)
    args = ["--data", str(tmp_path / "a.csv"), *SGD_ARGS, "--num_steps", "30"]
    args += ["--batch_size", "10", "--learning_rate", "0.3", "--log_every", "10"]
    m = run_metrics(tmp_path, 1, [*args, "--validation_fraction", "0.25"])
    held = held_out(400, seed=0, fraction=0.25)
    expected = simulated(m, X[~held], y[~held], softmax_gradient(3), 1, 10, 30, SGD(constant(0.3)))
    np.testing.assert_allclose(params(m), expected, rtol=1e-9, atol=1e-12)
    B = params(m)
    eta = np.column_stack([np.zeros(held.sum()), X[held] @ B[:-1] + B[-1]])
    log_p = eta - np.log(np.exp(eta).sum(axis=1, keepdims=True))
    log_loss = -log_p[np.arange(held.sum()), y[held]].mean()
    assert m["validation"]["log_loss"] == pytest.approx(log_loss, rel=1e-12)
    assert [h["step"] for h in m["validation_history"]] == [10, 20, 30]
    assert m["validation_history"][-1]["log_loss"] == pytest.approx(log_loss, rel=1e-12)
