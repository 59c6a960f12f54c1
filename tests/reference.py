"""An independent float64 NumPy simulation of data-parallel training, written from docs/data.md's
sharding contract and Keras 2.15's update rules, to check the runs against. It shares no code
with hvd_linreg."""

from __future__ import annotations

import numpy as np

# Runs shorter than this are not read alone (docs/data.md, layout and batching contract).
MIN_RUN_BYTES = 256 * 1024


def run_length(size: int, batch_size: int, row_bytes: int | None = None) -> int:
    """g: 1 on one rank, for data not read by ranges of rows (row_bytes None: synthetic, CSV)
    and where batch_size rows are under MIN_RUN_BYTES; else the smallest divisor of the
    batch whose rows reach MIN_RUN_BYTES."""
    if size == 1 or row_bytes is None or batch_size * row_bytes < MIN_RUN_BYTES:
        return 1
    divisors = [g for g in range(1, batch_size + 1) if batch_size % g == 0]
    return min(g for g in divisors if g * row_bytes >= MIN_RUN_BYTES)


def shards(
    X: np.ndarray, y: np.ndarray, size: int, batch_size: int, row_bytes: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """SGD's rows of each rank, in order: the first N - N mod (size * g) rows, cut into runs
    of g rows; run q is rank q mod size's. row_bytes: a row's bytes in a .npy/.npz file."""
    g = run_length(size, batch_size, row_bytes)
    batched = len(y) - len(y) % (size * g)
    owner = np.arange(batched) // g % size
    return [(X[:batched][owner == r], y[:batched][owner == r]) for r in range(size)]


def gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray, l2: float = 0.0) -> np.ndarray:
    """d/dtheta of mean((X w + b - y)^2) + l2 * |w|^2, theta = [w..., b]."""
    residual = X @ theta[:-1] + theta[-1] - y
    penalty = np.append(2.0 * l2 * theta[:-1], 0.0)  # the bias is not penalised
    return np.append(2.0 * X.T @ residual, 2.0 * residual.sum()) / len(y) + penalty


def mse(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """Mean squared error of theta = [w..., b] over the given rows, in float64."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    residual = X @ np.asarray(theta, np.float64)[:-1] + theta[-1] - y
    return float(residual @ residual / len(y))


def lstsq(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares [w..., b] in float64."""
    A = np.c_[np.asarray(X, np.float64), np.ones(len(y))]
    return np.linalg.lstsq(A, np.asarray(y, np.float64), rcond=None)[0]


def ridge(X: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """The [w..., b] minimising mean((X w + b - y)^2) + l2 * |w|^2, in float64: the normal
    equations of [X 1], with N * l2 added to the diagonal of w's rows only."""
    A = np.c_[np.asarray(X, np.float64), np.ones(len(y))]
    penalty = len(y) * l2 * np.diag(np.append(np.ones(A.shape[1] - 1), 0.0))
    return np.linalg.solve(A.T @ A + penalty, A.T @ np.asarray(y, np.float64))


def batch(X: np.ndarray, y: np.ndarray, step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Step i uses the shard's rows (i * B + j) mod n, j = 0 .. B-1."""
    rows = (step * size + np.arange(size)) % len(y)
    return X[rows], y[rows]


def constant(lr: float):
    return lambda k: lr


def linear_warmup(lr: float, warmup_steps: int):
    """Keras' PolynomialDecay(lr / W, W, end_learning_rate=lr, power=1) at update k (from 0):
    lr / W at the first update, rising in equal steps to lr at update W, then lr."""
    start = lr / warmup_steps
    return lambda k: start + (lr - start) * min(k, warmup_steps) / warmup_steps


class SGD:
    """Keras 2.15's SGD: velocity = momentum * velocity - lr * g; theta += velocity.
    With momentum 0 that is theta -= lr * g."""

    def __init__(self, rate, momentum: float = 0.0):
        self.rate, self.momentum, self.updates, self.velocity = rate, momentum, 0, 0.0

    def apply(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        self.velocity = self.momentum * self.velocity - self.rate(self.updates) * grad
        self.updates += 1
        return theta + self.velocity


class Adam:
    """Keras 2.15's Adam: moments updated in place, the bias correction folded into the rate,
    epsilon added to sqrt(v) (not inside it)."""

    def __init__(self, rate, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
        self.rate, self.beta_1, self.beta_2, self.epsilon = rate, beta_1, beta_2, epsilon
        self.updates, self.m, self.v = 0, 0.0, 0.0

    def apply(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        t = self.updates + 1
        alpha = self.rate(self.updates) * np.sqrt(1 - self.beta_2**t) / (1 - self.beta_1**t)
        self.m = self.m + (grad - self.m) * (1 - self.beta_1)
        self.v = self.v + (grad**2 - self.v) * (1 - self.beta_2)
        self.updates = t
        return theta - self.m * alpha / (np.sqrt(self.v) + self.epsilon)


def averaged(
    X, y, *, ranks, batch_size, steps, optimizer, w0, b0, l2=0.0, row_bytes=None, grad=gradient
):
    """What a correct run computes: every step applies the mean of the ranks' gradients
    (grad: the loss's gradient on a batch, the squared error's by default)."""
    return averaged_in_segments(
        X,
        y,
        segments=[(0, steps, ranks)],
        batch_size=batch_size,
        optimizer=optimizer,
        w0=w0,
        b0=b0,
        l2=l2,
        row_bytes=row_bytes,
        grad=grad,
    )


def averaged_in_segments(
    X, y, *, segments, batch_size, optimizer, w0, b0, l2=0.0, row_bytes=None, grad=gradient
) -> np.ndarray:
    """A run whose rank count changes (an elastic one): segments are (first step, end step,
    ranks), in order; each step uses the sharding and batching contract at its segment's ranks,
    and the optimizer's state carries over from one segment to the next."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    theta = np.append(np.asarray(w0, np.float64), b0)
    for first, end, ranks in segments:
        parts = shards(X, y, ranks, batch_size, row_bytes)
        for i in range(first, end):
            grads = [grad(theta, *batch(Xs, ys, i, batch_size), l2) for Xs, ys in parts]
            theta = optimizer.apply(theta, np.mean(grads, axis=0))
    return theta


def averaged_sgd(
    X, y, *, ranks, batch_size, steps, lr, w0, b0, l2=0.0, row_bytes=None
) -> np.ndarray:
    """Averaged-gradient plain SGD at a constant rate (on the ridge loss with l2 > 0)."""
    return averaged(
        X,
        y,
        ranks=ranks,
        batch_size=batch_size,
        steps=steps,
        optimizer=SGD(constant(lr)),
        w0=w0,
        b0=b0,
        l2=l2,
        row_bytes=row_bytes,
    )
