"""SGD's loss is the solvers' loss: the TensorFlow model's batch loss of every family and link
is the mean of the family's NumPy loss_terms, and its gradient (TensorFlow's autodiff through
the same unit deviance and link) is the score the family's variance function gives,
LOSS_SCALE x Aᵀ(μ - y) / (V(μ) g'(μ)) / n: the maths is written once, and the two agree."""

from __future__ import annotations

import numpy as np
import pytest

from hvd_linreg import families
from hvd_linreg.sgd.model import Model

LINKS = [(name, link) for name in families.GLMS for link in families.get(name).LINKS]


def _rows(name: str, rng):
    X = rng.uniform(-1.0, 1.0, (64, 3))
    eta = X @ [0.3, -0.2, 0.1]
    if name in ("logistic", "binomial"):
        return X, (rng.uniform(size=64) < 0.5).astype(np.float64)
    if name in ("linear", "gaussian"):
        return X, eta + rng.normal(size=64)
    return X, rng.gamma(2.0, 1.0, 64) + (0.0 if name in ("poisson", "tweedie") else 0.1)


def _start(link: str) -> np.ndarray:
    """Coefficients whose mean is inside every link's domain on these rows."""
    b = {"inverse": 1.0, "inverse_squared": 1.0, "identity": 2.0, "sqrt": 1.5}.get(link, 0.2)
    return np.array([0.1, -0.05, 0.08, b])


@pytest.mark.parametrize("name, link", LINKS)
def test_sgd_loss_and_gradient_are_the_familys(name, link):
    import tensorflow as tf

    family = families.get(name, link)
    X, y = _rows(name, np.random.default_rng(len(name) + len(link)))
    theta = _start(link)
    model = Model(theta, "float64", 0.0, family)
    with tf.GradientTape() as tape:
        loss = model.loss(tf.constant(X), tf.constant(y))
    gradient = tape.gradient(loss, model.params).numpy().ravel()
    eta = X @ theta[:-1] + theta[-1]
    assert float(loss) == pytest.approx(np.mean(family.loss_terms(y, eta)), rel=1e-12)
    mu = family.link.inverse(eta)
    variance, slope = family.variance(mu), family.link.derivative(mu)
    score = family.LOSS_SCALE * (mu - y) / (variance * slope) / len(y)
    np.testing.assert_allclose(gradient, np.append(X.T @ score, score.sum()), rtol=1e-9)


def test_a_model_of_classes_loss_is_the_log_loss():
    import tensorflow as tf

    from hvd_linreg.solvers.multinomial import log_probabilities

    rng = np.random.default_rng(3)
    family = families.get("multinomial").with_classes(["a", "b", "c"])
    X, y = rng.normal(size=(50, 2)), rng.integers(0, 3, 50).astype(np.float64)
    B = rng.normal(size=(3, 2))
    loss = Model(B, "float64", 0.5, family).loss(tf.constant(X), tf.constant(y))
    logp = log_probabilities(X, B)
    expected = -np.mean(logp[np.arange(50), y.astype(int)]) + 0.5 * family.penalty_term(B[:-1])
    assert float(loss) == pytest.approx(expected, rel=1e-12)
    assert np.mean(family.loss_terms(y, X @ B[:-1] + B[-1])) == pytest.approx(
        -np.mean(logp[np.arange(50), y.astype(int)]), rel=1e-12
    )
