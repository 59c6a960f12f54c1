"""The maths every family and solver shares: the linear predictor, the deviances' x log y and
log Γ, and the namespace a family's maths is written in (NumPy's functions, or TensorFlow's
for SGD's loss, which sgd/tf_maths.py registers). A leaf of families/: it imports only NumPy,
the coefficients' layout and the rows' record."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from hvd_linreg.data.rows import Rows
from hvd_linreg.families.coefficients import matrix, predictors
from hvd_linreg.matrix import DesignMatrix


def linear_predictor(theta: np.ndarray, X: np.ndarray | DesignMatrix) -> np.ndarray:
    """η = x·w + b in float64, summed term by term: a BLAS product's order of summation depends
    on how many rows it is given, and a row's value must not depend on the rank count. theta:
    the coefficients (coefficients.py), η a value per row (K′ = 1) or a row of K′ per row. A
    design matrix's rows (matrix/) by its own product, which sums each row's terms alone."""
    B = matrix(theta)
    if isinstance(X, DesignMatrix):
        return predictors(B, X.matvec(B[:-1], ordered=True) + B[-1])
    X = X.astype(np.float64, copy=False)
    out = np.empty((len(X), B.shape[1]), np.float64)
    out[:] = B[-1]
    for j, w_j in enumerate(B[:-1]):
        out += X[:, j, None] * w_j
    return predictors(B, out)


def predictor(theta: np.ndarray, rows: Rows) -> np.ndarray:
    """The rows' η = x·w + b + offset in float64, for the passes of the solvers and the scores:
    by BLAS's product, many times faster than linear_predictor's columns one by one, its
    rounding free to differ in the last bit with the rows a rank holds (predict's values
    come from linear_predictor, the same bytes at any rank count). A model of classes adds
    the offset to every column."""
    B = matrix(theta)
    eta = predictors(B, rows.times(B[:-1]) + B[-1])
    if rows.offset is None:
        return eta
    return eta + (rows.offset if eta.ndim == 1 else rows.offset[:, None])


def xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x log y, 0 where x is 0 (the deviances' convention)."""
    x, y = np.asarray(x), np.asarray(y)
    out = np.zeros(np.broadcast_shapes(x.shape, y.shape), np.result_type(x, y))
    with np.errstate(divide="ignore", invalid="ignore"):
        np.log(y, out=out, where=x != 0)  # one masked pass: the IRLS passes take it per row
        out *= x  # 0 where x is 0 (0 x 0)
    return out


def lgamma(x: np.ndarray) -> np.ndarray:
    """log Γ(x) per value, computed once for each distinct value: targets that are counts,
    and weights, hold few of them (NumPy has no vectorised lgamma)."""
    values, inverse = np.unique(np.asarray(x, np.float64), return_inverse=True)
    return _lgamma(values)[inverse.reshape(-1)].reshape(np.shape(x))


_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


# The functions of array kinds other than NumPy's, by the top package of their arrays' type:
# SGD's loss hands the families TensorFlow tensors, and hvd_linreg.sgd.tf_maths, imported by
# SGD's model, registers TensorFlow's here (the families import no TensorFlow).
NAMESPACES: dict[str, SimpleNamespace] = {}


def namespace(*arrays):
    """The functions for these arrays: NUMPY's, or those registered for their kind (SGD's
    loss: TensorFlow's), so that a family writes its unit deviance, its links' inverses and its
    penalty once for both."""
    for a in arrays:
        kind = type(a).__module__.partition(".")[0]
        if kind in NAMESPACES:
            return NAMESPACES[kind]
    return NUMPY


def _sigmoid(eta):
    """1 / (1 + e^-η) without overflow: e^η / (1 + e^η) below 0."""
    e = np.exp(-np.abs(eta))
    return np.where(eta >= 0, 1.0, e) / (1.0 + e)


def _erfc(x):
    import scipy.special  # only the probit link needs it

    return scipy.special.erfc(np.asarray(x, np.float64))


def _logsumexp(values, axis):
    top = np.max(values, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(values - top), axis=axis)) + np.squeeze(top, axis)


def _take_class(values, y):
    return np.take_along_axis(values, np.asarray(y, np.int64)[:, None], axis=1)[:, 0]


NUMPY = SimpleNamespace(
    abs=np.abs,
    clip=np.clip,
    concat=np.concatenate,
    erfc=_erfc,
    exp=np.exp,
    expm1=np.expm1,
    log=np.log,
    log1p=np.log1p,
    logsumexp=_logsumexp,
    maximum=np.maximum,
    power=np.power,
    sigmoid=_sigmoid,
    sum=np.sum,
    take_class=_take_class,
    xlogy=xlogy,
    zeros_like=np.zeros_like,
)
