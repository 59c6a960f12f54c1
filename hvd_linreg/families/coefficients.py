"""A linear model's coefficients: an (F + 1) x K′ matrix B with a column [w..., b] per linear
predictor. K′ is 1 for a family of one mean, and the classes less one for a multinomial model
(the first class the reference, its column 0). The weights are B's first F rows, the
intercepts its last. A feature's name travels beside its row (the statistics' names), a
class's label beside its column (the family's labels).

The solvers' Newton systems and the covariances order the coefficients class-major, vec(B):
column after column, so that K′ = 1 is the [w..., b] vector the factorisation solves for.
A leaf: it imports NumPy alone."""

from __future__ import annotations

import numpy as np


def matrix(values) -> np.ndarray:
    """values as an (F + 1) x K′ float64 matrix: a [w..., b] vector is its one column."""
    B = np.asarray(values, np.float64)
    return B.reshape(-1, 1) if B.ndim == 1 else B


def vec(B: np.ndarray) -> np.ndarray:
    """B's columns one after the other: the order of the solvers' systems and covariances."""
    return np.asarray(B).ravel(order="F")


def unvec(values: np.ndarray, columns: int = 1) -> np.ndarray:
    """vec's inverse: class-major values as an (F + 1) x columns matrix."""
    return np.asarray(values, np.float64).reshape(-1, columns, order="F")


def predictors(B: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """η, rows x K′, as the family takes it: a value per row for one linear predictor (K′ = 1),
    else a row of K′ per row."""
    return eta[:, 0] if B.shape[1] == 1 else eta


def stored(B: np.ndarray) -> tuple[list, float | list]:
    """w and b as a model file and the metrics JSON keep them: for one column a list of F
    numbers and a number; else a list of F numbers per class but the first, and a list of
    their intercepts."""
    B = matrix(B)
    if B.shape[1] == 1:
        return B[:-1, 0].tolist(), float(B[-1, 0])
    return B[:-1].T.tolist(), B[-1].tolist()


def from_stored(w, b, classes: bool = False) -> np.ndarray:
    """stored()'s inverse: the (F + 1) x K′ matrix of a file's w and b (classes: a model of
    classes'); ValueError where they are not numbers of those shapes."""
    if classes:
        return np.vstack([np.array(w, np.float64).T, np.array(b, np.float64)])
    theta = np.array([*w, b], np.float64)
    if theta.ndim != 1:
        raise ValueError("w is not a list of numbers")
    return matrix(theta)
