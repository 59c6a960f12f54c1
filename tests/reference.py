"""An independent float64 NumPy simulation of data-parallel SGD, written from the README's
sharding contract, to check the distributed runs against. It shares no code with hvd_linreg."""

from __future__ import annotations

import numpy as np


def shards(X: np.ndarray, y: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Rank r owns rows r, r + size, ... of the first len(y) // size * size rows."""
    used = len(y) // size * size
    return [(X[r:used:size], y[r:used:size]) for r in range(size)]


def gradient(theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """d/dtheta of mean((X w + b - y)^2), theta = [w..., b]."""
    residual = X @ theta[:-1] + theta[-1] - y
    return np.append(2.0 * X.T @ residual, 2.0 * residual.sum()) / len(y)


def batch(X: np.ndarray, y: np.ndarray, step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Step i uses the shard's rows (i * B + j) mod n, j = 0 .. B-1."""
    rows = (step * size + np.arange(size)) % len(y)
    return X[rows], y[rows]


def averaged_sgd(X, y, *, ranks, batch_size, steps, lr, w0, b0) -> np.ndarray:
    """What a correct run computes: every step applies the mean of the ranks' gradients."""
    parts = shards(np.asarray(X, np.float64), np.asarray(y, np.float64), ranks)
    theta = np.append(np.asarray(w0, np.float64), b0)
    for i in range(steps):
        grads = [gradient(theta, *batch(Xs, ys, i, batch_size)) for Xs, ys in parts]
        theta = theta - lr * np.mean(grads, axis=0)
    return theta


def rank0_local_sgd(X, y, *, ranks, batch_size, steps, lr, w0, b0) -> np.ndarray:
    """What rank 0 computes if gradients are NOT averaged: SGD on its own shard alone."""
    Xs, ys = shards(np.asarray(X, np.float64), np.asarray(y, np.float64), ranks)[0]
    theta = np.append(np.asarray(w0, np.float64), b0)
    for i in range(steps):
        theta = theta - lr * gradient(theta, *batch(Xs, ys, i, batch_size))
    return theta
